"""``tapegrad.nn``: modules, the functional layer (``nn.functional``: activations, losses, convolutions,
pooling, normalisation, dropout) and initialisers (``nn.init``).

A model is a ``Module`` holding Parameters; ``grad(loss_fn, grad_position=None,
weights=net.trainable_params())`` differentiates with respect to them (MindSpore's pattern). Layers
take PyTorch's arguments and PyTorch's default initialisation; ``net.train()`` / ``net.eval()`` switch
the layers that behave differently when training (``BatchNorm*``, ``Dropout``).
"""
from tapegrad.nn import functional, init
from tapegrad.nn._conv_layers import Conv1d, Conv2d, Conv3d, ConvTranspose1d, ConvTranspose2d, ConvTranspose3d
from tapegrad.nn._dropout import Dropout
from tapegrad.nn._module import Module
from tapegrad.nn._norm_layers import BatchNorm1d, BatchNorm2d, BatchNorm3d, GroupNorm, LayerNorm
from tapegrad.nn._pool_layers import AdaptiveAvgPool1d, AdaptiveAvgPool2d, AvgPool1d, AvgPool2d, MaxPool1d, MaxPool2d
from tapegrad.nn._stateless import functional_call
from tapegrad.nn.layers import Dense, Embedding, Flatten, ReLU, Sequential, Sigmoid, Tanh

__all__ = [
    "AdaptiveAvgPool1d", "AdaptiveAvgPool2d", "AvgPool1d", "AvgPool2d", "BatchNorm1d", "BatchNorm2d", "BatchNorm3d",
    "Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d", "ConvTranspose2d", "ConvTranspose3d", "Dense", "Dropout",
    "Embedding", "Flatten", "GroupNorm", "LayerNorm", "MaxPool1d", "MaxPool2d", "Module", "ReLU", "Sequential",
    "Sigmoid", "Tanh", "functional", "functional_call", "init",
]
