"""Pooling modules (PyTorch's ``nn.MaxPool2d``, ``nn.AvgPool2d``, ... with the same arguments): thin
holders of the arguments of the pooling functions of :mod:`tapegrad.nn.functional`. They have no Parameters.

The arguments are checked when the module is built (types and signs), and again against the input's
shape at the call.
"""
from __future__ import annotations

from typing import Any

from tapegrad._array_type import Array
from tapegrad._typing import ArrayLike, ShapeLike
from tapegrad.nn import _pool
from tapegrad.nn._args import as_ints
from tapegrad.nn._module import Module


def _checked(name, n, kernel_size, stride, padding, dilation=1):
    """Fail at construction on sizes the call would refuse whatever the input."""
    window = as_ints(kernel_size, n, "kernel_size", name, 1)
    if stride is not None and not (isinstance(stride, (tuple, list)) and len(stride) == 0):
        as_ints(stride, n, "stride", name, 1)
    pads = as_ints(padding, n, "padding", name, 0)
    as_ints(dilation, n, "dilation", name, 1)
    if any(p > k // 2 for p, k in zip(pads, window)):
        raise ValueError(f"{name}: padding must be at most half of kernel_size (as PyTorch), got padding="
                         f"{padding!r} with kernel_size={kernel_size!r}")


class _MaxPoolNd(Module):
    _n = 2
    _fn = staticmethod(_pool.max_pool2d)

    def __init__(self, kernel_size: Any, stride: Any = None, padding: Any = 0, dilation: int = 1,
                 ceil_mode: bool = False) -> None:
        super().__init__()
        _checked(type(self).__name__, self._n, kernel_size, stride, padding, dilation)
        self.kernel_size = kernel_size
        self.stride = kernel_size if stride is None else stride  # as PyTorch keeps it
        self.padding, self.dilation, self.ceil_mode = padding, dilation, bool(ceil_mode)

    def __call__(self, x: ArrayLike) -> Array:
        return self._fn(x, self.kernel_size, self.stride, self.padding, self.dilation, self.ceil_mode)

    def extra_repr(self) -> str:
        return (f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}, "
                f"dilation={self.dilation}, ceil_mode={self.ceil_mode}")


class MaxPool1d(_MaxPoolNd):
    """1-d max pooling over the last axis of ``(N, C, L)`` or ``(C, L)`` (``torch.nn.MaxPool1d``):
    ``self(x)`` is :func:`tapegrad.nn.functional.max_pool1d` with these arguments. No Parameters.

    Args:
        kernel_size: the window length, an int or a 1-tuple.
        stride: an int or a 1-tuple; None (the default) means ``kernel_size``.
        padding: ``-inf`` padding on both ends, at most ``kernel_size // 2``.
        dilation: the spacing between window elements.
        ceil_mode: round the output length up (PyTorch's rule).

    Input ``(N, C, L)`` or ``(C, L)``, float or integer; output ``(N, C, L_out)`` or ``(C, L_out)`` of the
    input's dtype, ``L_out = floor((L + 2 * padding - dilation * (kernel_size - 1) - 1) / stride) + 1``
    (``ceil`` in ceil mode). The gradient goes to each window's first maximum.

    Raises:
        ValueError: a non-positive ``kernel_size``, stride or dilation, a negative padding or one above
            ``kernel_size // 2`` (at construction); an input of the wrong rank or too small for one
            window (at the call).
        TypeError: sizes that are not ints or tuples of ints (at construction); a boolean or complex input
            (at the call).
    """

    _n = 1
    _fn = staticmethod(_pool.max_pool1d)


class MaxPool2d(_MaxPoolNd):
    """2-d max pooling over the last two axes of ``(N, C, H, W)`` or ``(C, H, W)`` (``torch.nn.MaxPool2d``):
    ``self(x)`` is :func:`tapegrad.nn.functional.max_pool2d` with these arguments. No Parameters.

    Args:
        kernel_size: the window, an int or ``(kh, kw)``.
        stride: an int or ``(sh, sw)``; None (the default) means ``kernel_size``.
        padding: ``-inf`` padding on both sides, at most ``kernel_size // 2``.
        dilation: the spacing between window elements.
        ceil_mode: round the output size up (PyTorch's rule).

    Input ``(N, C, H, W)`` or ``(C, H, W)``, float or integer; output ``(N, C, H_out, W_out)`` or
    ``(C, H_out, W_out)`` of the input's dtype (see :func:`tapegrad.nn.functional.max_pool2d` for the
    output size and the gradient's tie rule).

    Raises:
        ValueError: a non-positive ``kernel_size``, stride or dilation, a negative padding or one above
            ``kernel_size // 2`` (at construction); an input of the wrong rank or too small for one
            window (at the call).
        TypeError: sizes that are not ints or tuples of ints (at construction); a boolean or complex input
            (at the call).
    """


class _AvgPoolNd(Module):
    _n = 2

    def __init__(self, kernel_size: Any, stride: Any = None, padding: Any = 0, ceil_mode: bool = False,
                 count_include_pad: bool = True) -> None:
        super().__init__()
        _checked(type(self).__name__, self._n, kernel_size, stride, padding)
        self.kernel_size = kernel_size
        self.stride = kernel_size if stride is None else stride
        self.padding, self.ceil_mode, self.count_include_pad = padding, bool(ceil_mode), bool(count_include_pad)

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class AvgPool1d(_AvgPoolNd):
    """1-d average pooling over the last axis of ``(N, C, L)`` or ``(C, L)`` (``torch.nn.AvgPool1d``):
    ``self(x)`` is :func:`tapegrad.nn.functional.avg_pool1d` with these arguments. No Parameters.

    Args:
        kernel_size: the window length, an int or a 1-tuple.
        stride: an int or a 1-tuple; None (the default) means ``kernel_size``.
        padding: zero padding on both ends, at most ``kernel_size // 2``.
        ceil_mode: round the output length up (PyTorch's rule).
        count_include_pad: count the padding in each window's divisor.

    Input ``(N, C, L)`` or ``(C, L)``, floating-point; output ``(N, C, L_out)`` or ``(C, L_out)`` of the
    input's dtype.

    Raises:
        ValueError: a non-positive ``kernel_size`` or stride, a negative padding or one above
            ``kernel_size // 2`` (at construction); an input of the wrong rank or too small for one
            window (at the call).
        TypeError: sizes that are not ints or tuples of ints (at construction); an input that is not floating-point
            (at the call).
    """

    _n = 1

    def __call__(self, x: ArrayLike) -> Array:
        return _pool.avg_pool1d(x, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                                self.count_include_pad)


class AvgPool2d(_AvgPoolNd):
    """2-d average pooling over the last two axes of ``(N, C, H, W)`` or ``(C, H, W)``
    (``torch.nn.AvgPool2d``): ``self(x)`` is :func:`tapegrad.nn.functional.avg_pool2d` with these
    arguments. No Parameters.

    Args:
        kernel_size: the window, an int or ``(kh, kw)``.
        stride: an int or ``(sh, sw)``; None (the default) means ``kernel_size``.
        padding: zero padding on both sides, at most ``kernel_size // 2``.
        ceil_mode: round the output size up (PyTorch's rule).
        count_include_pad: count the padding in each window's divisor.
        divisor_override: a non-zero int to divide every window's sum by, or None.

    Input ``(N, C, H, W)`` or ``(C, H, W)``, floating-point; output ``(N, C, H_out, W_out)`` or
    ``(C, H_out, W_out)`` of the input's dtype.

    Raises:
        ValueError: a non-positive ``kernel_size`` or stride, a negative padding or one above
            ``kernel_size // 2`` (at construction); an input of the wrong rank or too small for one
            window (at the call).
        TypeError: sizes that are not ints or tuples of ints (at construction); an input that is not floating-point
            (at the call).
    """

    def __init__(self, kernel_size: Any, stride: Any = None, padding: Any = 0, ceil_mode: bool = False,
                 count_include_pad: bool = True, divisor_override: Any = None) -> None:
        super().__init__(kernel_size, stride, padding, ceil_mode, count_include_pad)
        self.divisor_override = divisor_override

    def __call__(self, x: ArrayLike) -> Array:
        return _pool.avg_pool2d(x, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                                self.count_include_pad, self.divisor_override)


class _AdaptiveAvgPoolNd(Module):
    _n = 2

    def __init__(self, output_size: ShapeLike) -> None:
        super().__init__()
        _pool._adaptive_sizes(output_size, (1,) * self._n, type(self).__name__)  # types and signs
        self.output_size = output_size

    def extra_repr(self) -> str:
        return f"output_size={self.output_size}"


class AdaptiveAvgPool1d(_AdaptiveAvgPoolNd):
    """Adaptive average pooling to length ``output_size`` (``torch.nn.AdaptiveAvgPool1d``): ``self(x)`` is
    :func:`tapegrad.nn.functional.adaptive_avg_pool1d`. No Parameters.

    Args:
        output_size: the output length ``L_out``, an int or a 1-tuple; None keeps ``L``.

    Input ``(N, C, L)`` or ``(C, L)``, floating-point; output ``(N, C, L_out)`` or ``(C, L_out)`` of the
    input's dtype.

    Raises:
        ValueError: a non-positive ``output_size`` (at construction); an input that is not 2-d or 3-d
            (at the call).
        TypeError: an ``output_size`` that is not an int, a tuple of ints or None (at construction); an
            input that is not floating-point (at the call).
    """

    _n = 1

    def __call__(self, x: ArrayLike) -> Array:
        return _pool.adaptive_avg_pool1d(x, self.output_size)


class AdaptiveAvgPool2d(_AdaptiveAvgPoolNd):
    """Adaptive average pooling to ``output_size = (H_out, W_out)`` (``torch.nn.AdaptiveAvgPool2d``):
    ``self(x)`` is :func:`tapegrad.nn.functional.adaptive_avg_pool2d`, PyTorch's windows. No Parameters.

    Args:
        output_size: ``(H_out, W_out)``, one int for both, or a pair with None for a size kept as the
            input's.

    Input ``(N, C, H, W)`` or ``(C, H, W)``, floating-point; output ``(N, C, H_out, W_out)`` or
    ``(C, H_out, W_out)`` of the input's dtype.

    Raises:
        ValueError: a non-positive output size (at construction); an input that is not 3-d or 4-d (at
            the call).
        TypeError: an ``output_size`` that is not an int or a tuple of ints and None (at construction);
            an input that is not floating-point (at the call).
    """

    def __call__(self, x: ArrayLike) -> Array:
        return _pool.adaptive_avg_pool2d(x, self.output_size)
