"""Convolution layers with PyTorch's signatures: ``Conv1d``, ``Conv2d``, ``Conv3d`` and
``ConvTranspose1d``, ``ConvTranspose2d``, ``ConvTranspose3d``.

Each holds ``weight`` and ``bias`` Parameters (in that order, so ``trainable_params()`` names them
``"weight"``, ``"bias"``), starts them as ``torch.nn.Conv*d.reset_parameters`` does, and calls the
functional ``conv{n}d`` / ``conv_transpose{n}d`` of ``_conv_api``. The initialisers are those of
``nn.Dense`` (``weight_init``/``bias_init``: None, an array, a number, a name or a callable).
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from tapegrad._array_type import Array
from tapegrad._params import Parameter
from tapegrad._typing import ArrayLike
from tapegrad.nn import _conv_api
from tapegrad.nn._args import Initializer, as_int, as_ints
from tapegrad.nn._module import Module
from tapegrad.nn.layers import _initial_value

__all__ = ["Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d", "ConvTranspose2d", "ConvTranspose3d"]

_UNSUPPORTED_MODES = ("reflect", "replicate", "circular")


class _ConvNd(Module):
    """What the six layers share: argument checks, PyTorch's initialisation, ``extra_repr``."""

    rank: int = 2
    transposed: bool = False

    def _setup(self, in_channels, out_channels, kernel_size, stride, padding, dilation, groups, bias,
               padding_mode, output_padding, dtype, seed, weight_init, bias_init):
        where, n = type(self).__name__, self.rank
        self.in_channels = as_int(in_channels, "in_channels", where, minimum=1)
        self.out_channels = as_int(out_channels, "out_channels", where, minimum=1)
        self.groups = as_int(groups, "groups", where, minimum=1)
        for what, channels in (("in_channels", self.in_channels), ("out_channels", self.out_channels)):
            if channels % self.groups:
                raise ValueError(f"{where}: {what}={channels} must be divisible by groups={self.groups}")
        self.kernel_size = as_ints(kernel_size, n, "kernel_size", where)
        self.stride = as_ints(stride, n, "stride", where)
        self.padding = self._check_padding(padding, where)
        self.dilation = as_ints(dilation, n, "dilation", where)
        self.output_padding = as_ints(output_padding, n, "output_padding", where, minimum=0)
        if self.transposed:
            _conv_api.check_output_padding(self.output_padding, self.stride, self.dilation, where)
        self.padding_mode = self._check_padding_mode(padding_mode, where)
        self._init_parameters(bool(bias), np.dtype(dtype), seed, weight_init, bias_init, where)

    def _check_padding(self, padding, where: str):
        """An int or ``rank`` ints >= 0 (a tuple), or ``'same'``/``'valid'`` (plain convolutions only;
        ``'same'`` needs stride 1, PyTorch's rule)."""
        if isinstance(padding, str):
            if self.transposed or padding not in ("same", "valid"):
                allowed = "an int or a tuple of ints" + ("" if self.transposed else ", 'same' or 'valid'")
                raise ValueError(f"{where}: padding must be {allowed}, got {padding!r}")
            if padding == "same":
                _conv_api.check_same_needs_unit_stride(self.stride, where)
            return padding
        return as_ints(padding, self.rank, "padding", where, minimum=0)

    @staticmethod
    def _check_padding_mode(padding_mode, where: str) -> str:
        if padding_mode == "zeros":
            return padding_mode
        if padding_mode in _UNSUPPORTED_MODES:
            raise NotImplementedError(f"{where}: padding_mode={padding_mode!r} is not implemented; only "
                                      "padding_mode='zeros' is (pad the input yourself with tnp.pad first)")
        raise ValueError(f"{where}: padding_mode must be one of 'zeros', 'reflect', 'replicate', 'circular', "
                         f"got {padding_mode!r}")

    def _init_parameters(self, bias: bool, dtype, seed, weight_init, bias_init, where: str):
        """PyTorch's default: weight and bias ~ U(-1/sqrt(fan_in), 1/sqrt(fan_in)) (kaiming_uniform with
        a=sqrt(5)), fan_in = weight.shape[1] * prod(kernel_size); the weight is drawn first."""
        if self.transposed:
            shape = (self.in_channels, self.out_channels // self.groups) + self.kernel_size
        else:
            shape = (self.out_channels, self.in_channels // self.groups) + self.kernel_size
        bound = 1.0 / math.sqrt(shape[1] * math.prod(self.kernel_size))
        rng = np.random.default_rng(seed)
        self.weight = Parameter(_initial_value(weight_init, shape, dtype, rng, bound, f"{where} weight_init"))
        self.bias = Parameter(_initial_value(bias_init, (self.out_channels,), dtype, rng, bound,
                                             f"{where} bias_init")) if bias else None

    def _check_input(self, x):
        """The channel axis must hold ``in_channels`` (a clearer message than the functional's)."""
        shape = getattr(x, "shape", None)
        if shape is None:
            return
        n = self.rank
        if len(shape) not in (n + 1, n + 2) or shape[-n - 1] != self.in_channels:
            raise ValueError(f"{self!r}: the input must be (N, {self.in_channels}, {n} spatial axes) or "
                             f"unbatched ({self.in_channels}, {n} spatial axes), got shape {tuple(shape)}")

    def extra_repr(self) -> str:
        """PyTorch's text: sizes, kernel and stride always; the rest where not the default."""
        text = (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
                f"stride={self.stride}")
        if self.padding != (0,) * self.rank:
            text += f", padding={self.padding}"
        if self.dilation != (1,) * self.rank:
            text += f", dilation={self.dilation}"
        if self.output_padding != (0,) * self.rank:
            text += f", output_padding={self.output_padding}"
        if self.groups != 1:
            text += f", groups={self.groups}"
        if self.bias is None:
            text += ", bias=False"
        return text


class _Conv(_ConvNd):
    """A convolution layer (see :class:`Conv2d`)."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: Any, stride: int = 1, padding: Any = 0,
                 dilation: int = 1, groups: int = 1, bias: bool = True, padding_mode: str = "zeros", *,
                 dtype: Any = np.float32, seed: int | None = None, weight_init: Initializer = None,
                 bias_init: Initializer = None) -> None:
        super().__init__()
        self._setup(in_channels, out_channels, kernel_size, stride, padding, dilation, groups, bias,
                    padding_mode, 0, dtype, seed, weight_init, bias_init)

    def __call__(self, x: ArrayLike) -> Array:
        self._check_input(x)
        fn = getattr(_conv_api, f"conv{self.rank}d")
        return fn(x, self.weight.value, None if self.bias is None else self.bias.value, self.stride,
                  self.padding, self.dilation, self.groups)


class _ConvTranspose(_ConvNd):
    """A transposed convolution layer (see :class:`ConvTranspose2d`)."""

    transposed = True

    def __init__(self, in_channels: int, out_channels: int, kernel_size: Any, stride: int = 1, padding: Any = 0,
                 output_padding: int = 0, groups: int = 1, bias: bool = True, dilation: int = 1,
                 padding_mode: str = "zeros", *, dtype: Any = np.float32, seed: int | None = None,
                 weight_init: Initializer = None, bias_init: Initializer = None) -> None:
        super().__init__()
        self._setup(in_channels, out_channels, kernel_size, stride, padding, dilation, groups, bias,
                    padding_mode, output_padding, dtype, seed, weight_init, bias_init)

    def __call__(self, x: ArrayLike) -> Array:
        self._check_input(x)
        fn = getattr(_conv_api, f"conv_transpose{self.rank}d")
        return fn(x, self.weight.value, None if self.bias is None else self.bias.value, self.stride,
                  self.padding, self.output_padding, self.groups, self.dilation)


# ---- the six layers: one docstring template per kind, filled in for each rank -------------------------
_DIMS = {
    1: dict(tuple="a 1-tuple", kernel="kL", kernel_product="kL", spatial="L", spatial_out="L_out"),
    2: dict(tuple="a pair", kernel="kH, kW", kernel_product="kH * kW", spatial="H, W", spatial_out="H_out, W_out"),
    3: dict(tuple="a triple", kernel="kD, kH, kW", kernel_product="kD * kH * kW", spatial="D, H, W",
            spatial_out="D_out, H_out, W_out"),
}

_COMMON_ARGS = """        groups: input and output channels are split into this many groups (``C_in``: depthwise).
        bias: False leaves the bias out (``self.bias`` is None).
        padding_mode: only ``'zeros'``."""

_SETUP_ARGS = """        dtype: of the Parameters (float32 by default); keyword-only.
        seed: for the random initialisers (``np.random.default_rng(seed)``); None draws fresh entropy."""

_COMMON_RAISES = """            an unknown ``padding_mode``; an initial array of the wrong shape; (at the call) an input
            whose channel axis is not ``in_channels``.
        TypeError: sizes, strides, paddings or dilations that are not ints.
        NotImplementedError: ``padding_mode`` ``'reflect'``, ``'replicate'`` or ``'circular'``."""

_CONV_DOC = """{n}-D convolution layer (cross-correlation), ``torch.nn.Conv{n}d``'s signature, initialisation and
    ``repr``: ``self(x)`` is :func:`tapegrad.nn.functional.conv{n}d` ``(x, weight, bias, stride,
    padding, dilation, groups)``.

    Args:
        in_channels: channels of the input (``C_in``).
        out_channels: channels of the output (``C_out``).
        kernel_size: an int or {tuple}.
        stride: an int or {tuple} (default 1).
        padding: an int or {tuple} (zeros on both sides), ``'valid'``, or ``'same'`` (stride 1 only).
        dilation: an int or {tuple} (default 1).
""" + _COMMON_ARGS + "\n" + _SETUP_ARGS + """
        weight_init: how ``weight``, ``(C_out, C_in / groups, {kernel})``, starts: None for PyTorch's
            ``U(-1/sqrt(fan_in), 1/sqrt(fan_in))`` with ``fan_in = C_in / groups * {kernel_product}``
            (``kaiming_uniform`` with ``a = sqrt(5)``), or an array, a number, a name or a callable
            ``(shape, dtype, rng) -> array`` as for :class:`tapegrad.nn.Dense`.
        bias_init: the same for ``bias`` ``(C_out,)``; None draws from the same uniform as the weight.

    Input ``(N, C_in, {spatial})`` or unbatched ``(C_in, {spatial})``;
    output ``(N, C_out, {spatial_out})`` (or unbatched),
    each ``out = floor((in + 2p - d(k - 1) - 1) / s) + 1``, of the result dtype of input and weight.

    Raises:
        ValueError: a non-positive size; channels not divisible by ``groups``; a stride or dilation < 1;
            negative padding; an unknown padding word; ``'same'`` with a stride;
""" + _COMMON_RAISES + "\n    "

_CONV_TRANSPOSE_DOC = """{n}-D transposed convolution layer, ``torch.nn.ConvTranspose{n}d``'s signature
    (note its order: ``output_padding`` after ``padding``, ``dilation`` after ``bias``), its
    initialisation and ``repr``: ``self(x)`` is :func:`tapegrad.nn.functional.conv_transpose{n}d`, the
    gradient of a convolution with respect to its input (with the same ``stride``, ``padding``,
    ``dilation`` and ``groups``).

    Args:
        in_channels: channels of the input (``C_in``).
        out_channels: channels of the output (``C_out``).
        kernel_size: an int or {tuple}.
        stride: an int or {tuple} (default 1).
        padding: an int or {tuple}: ``dilation * (kernel_size - 1) - padding`` zeros are added on both
            sides of the dilated input (no ``'same'``/``'valid'``).
        output_padding: an int or {tuple} added to one side of the output, each smaller than the
            stride or the dilation (PyTorch's rule): it picks among the output sizes a convolution of
            this stride maps to the same input size.
""" + _COMMON_ARGS + """
        dilation: an int or {tuple} (default 1).
""" + _SETUP_ARGS + """
        weight_init: how ``weight``, ``(C_in, C_out / groups, {kernel})``, starts: None for PyTorch's
            ``U(-1/sqrt(fan_in), 1/sqrt(fan_in))`` with ``fan_in = C_out / groups * {kernel_product}`` (the
            weight's second axis), or an array, a number, a name or a callable as for
            :class:`tapegrad.nn.Dense`.
        bias_init: the same for ``bias`` ``(C_out,)``; None draws from the same uniform as the weight.

    Input ``(N, C_in, {spatial})`` or unbatched ``(C_in, {spatial})``;
    output ``(N, C_out, {spatial_out})`` (or unbatched),
    each ``out = (in - 1) s - 2p + d(k - 1) + output_padding + 1``, of the result dtype of input and weight.

    Raises:
        ValueError: a non-positive size; channels not divisible by ``groups``; a stride or dilation < 1;
            negative padding; a string padding; an ``output_padding`` not smaller than the stride or
            the dilation;
""" + _COMMON_RAISES + "\n    "


class Conv1d(_Conv):
    __doc__ = _CONV_DOC.format(n=1, **_DIMS[1])
    rank = 1


class Conv2d(_Conv):
    __doc__ = _CONV_DOC.format(n=2, **_DIMS[2])
    rank = 2


class Conv3d(_Conv):
    __doc__ = _CONV_DOC.format(n=3, **_DIMS[3])
    rank = 3


class ConvTranspose1d(_ConvTranspose):
    __doc__ = _CONV_TRANSPOSE_DOC.format(n=1, **_DIMS[1])
    rank = 1


class ConvTranspose2d(_ConvTranspose):
    __doc__ = _CONV_TRANSPOSE_DOC.format(n=2, **_DIMS[2])
    rank = 2


class ConvTranspose3d(_ConvTranspose):
    __doc__ = _CONV_TRANSPOSE_DOC.format(n=3, **_DIMS[3])
    rank = 3
