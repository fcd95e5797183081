"""``tapegrad.nn``: modules (``Module``, ``Dense``, ``Sequential``, activation modules), the
functional layer (``nn.functional``: activations and losses) and initialisers (``nn.init``).

A model is a ``Module`` holding Parameters; ``grad(loss_fn, grad_position=None,
weights=net.trainable_params())`` differentiates with respect to them (MindSpore's pattern).
"""
from tapegrad.nn import functional, init
from tapegrad.nn._module import Module
from tapegrad.nn.layers import Dense, ReLU, Sequential, Sigmoid, Tanh

__all__ = ["Dense", "Module", "ReLU", "Sequential", "Sigmoid", "Tanh", "functional", "init"]
