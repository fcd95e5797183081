"""The convolution functions users call: ``conv_general_dilated`` (JAX's arguments, checked) and the
PyTorch-style ``conv1d/2d/3d`` and ``conv_transpose1d/2d/3d``. Each checks its arguments, names the
one that is wrong, and binds the single primitive of ``_conv.py``.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from tapegrad._array_type import Array
from tapegrad._typing import ArrayLike
from tapegrad.nn._args import as_int, as_ints
from tapegrad.nn._conv import ConvDimensionNumbers, _merge_axis, _split_axis, conv, dilate_shape
from tapegrad.numpy._creation import asarray
from tapegrad.numpy._shape import expand_dims, flip, reshape

__all__ = ["conv1d", "conv2d", "conv3d", "conv_general_dilated", "conv_transpose1d", "conv_transpose2d",
           "conv_transpose3d"]


# ---- argument checks -----------------------------------------------------------------------------

def _dimension_numbers(dimension_numbers, ndim: int) -> ConvDimensionNumbers:
    """None (``(N, C, *spatial)``, ``(O, I, *spatial)``, ``(N, C, *spatial)``), a
    ``ConvDimensionNumbers`` of axis tuples, or three strings such as ``("NHWC", "HWIO", "NHWC")``
    (JAX's spelling: the spatial axes are matched by letter, in the kernel string's order)."""
    if dimension_numbers is None:
        canonical = tuple(range(ndim))
        return ConvDimensionNumbers(canonical, canonical, canonical)
    if len(dimension_numbers) != 3:
        raise ValueError("conv_general_dilated: dimension_numbers must be None, a ConvDimensionNumbers or "
                         f"three strings (lhs, rhs, out), got {dimension_numbers!r}")
    if all(isinstance(s, str) for s in dimension_numbers):
        lhs, rhs, out = dimension_numbers
        return _parse_specs(lhs, rhs, out, ndim)
    fn = "conv_general_dilated"
    specs = ConvDimensionNumbers(*(tuple(as_int(i, "dimension_numbers", fn) for i in s) for s in dimension_numbers))
    for name, spec in zip(("lhs", "rhs", "out"), specs):
        if sorted(spec) != list(range(ndim)):
            raise ValueError(f"conv_general_dilated: dimension_numbers' {name} spec {spec} must be a "
                             f"permutation of range({ndim})")
    return specs


def _parse_specs(lhs: str, rhs: str, out: str, ndim: int) -> ConvDimensionNumbers:
    if not (len(lhs) == len(rhs) == len(out) == ndim):
        raise ValueError(f"conv_general_dilated: dimension_numbers {(lhs, rhs, out)} must each have {ndim} "
                         "letters, one per axis of the operands")
    spatial = [c for c in rhs if c not in "OI"]
    try:
        return ConvDimensionNumbers(
            tuple(lhs.index(c) for c in ["N", "C"] + spatial),
            tuple(rhs.index(c) for c in ["O", "I"] + spatial),
            tuple(out.index(c) for c in ["N", "C"] + spatial))
    except ValueError:
        raise ValueError(f"conv_general_dilated: dimension_numbers {(lhs, rhs, out)}: lhs and out need 'N', "
                         "'C' and the kernel's spatial letters, the kernel needs 'O' and 'I' (e.g. "
                         "('NCHW', 'OIHW', 'NCHW'))") from None


def _padding(padding, in_spatial, kernel, strides, lhs_dilation, rhs_dilation) -> tuple:
    """``"VALID"``, ``"SAME"`` (output size ``ceil(in / stride)``, the extra element of an odd total
    on the high side, as JAX and TensorFlow) or ``n`` pairs ``(low, high)``."""
    n = len(in_spatial)
    if isinstance(padding, str):
        mode = padding.upper()
        if mode == "VALID":
            return ((0, 0),) * n
        if mode == "SAME":
            pairs = []
            for size, k, s in zip(dilate_shape(in_spatial, lhs_dilation), dilate_shape(kernel, rhs_dilation),
                                  strides):
                total = max((-(-size // s) - 1) * s + k - size, 0)
                pairs.append((total // 2, total - total // 2))
            return tuple(pairs)
        raise ValueError(f"conv_general_dilated: padding must be 'SAME', 'VALID' or {n} (low, high) pairs, "
                         f"got {padding!r}")
    try:
        pairs = tuple((lo, hi) for lo, hi in padding)
    except (TypeError, ValueError):
        pairs = ()
    if len(pairs) != n:
        raise ValueError(f"conv_general_dilated: padding must be 'SAME', 'VALID' or {n} (low, high) pairs "
                         f"of ints, got {padding!r}")
    fn = "conv_general_dilated"
    return tuple((as_int(lo, "padding", fn), as_int(hi, "padding", fn)) for lo, hi in pairs)


def _check_operands(lhs, rhs, fn: str):
    lhs, rhs = asarray(lhs), asarray(rhs)
    for name, x in (("lhs", lhs), ("rhs", rhs)):
        if np.dtype(x.dtype).kind not in "fc":
            raise TypeError(f"{fn}: {name} must be a float or complex array, got dtype {x.dtype}; cast it "
                            "with .astype(np.float32) first")
    if lhs.ndim != rhs.ndim or lhs.ndim < 3:
        raise ValueError(f"{fn}: lhs and rhs must have the same number of axes, at least 3 (batch, feature "
                         f"and one spatial axis), got shapes {tuple(lhs.shape)} and {tuple(rhs.shape)}")
    return lhs, rhs


def _check_groups(lhs_shape, rhs_shape, specs, feature_group_count, batch_group_count, fn: str):
    lhs_spec, rhs_spec, _ = specs
    batch, features = lhs_shape[lhs_spec[0]], lhs_shape[lhs_spec[1]]
    out_features, in_features = rhs_shape[rhs_spec[0]], rhs_shape[rhs_spec[1]]
    if feature_group_count > 1 and batch_group_count > 1:
        raise ValueError(f"{fn}: at most one of feature_group_count and batch_group_count may exceed 1")
    if features % feature_group_count or in_features * feature_group_count != features:
        raise ValueError(f"{fn}: the input has {features} features, which must equal the kernel's input "
                         f"features ({in_features}) times feature_group_count ({feature_group_count})")
    groups = max(feature_group_count, batch_group_count)
    if out_features % groups:
        raise ValueError(f"{fn}: the kernel's {out_features} output features must be divisible by the "
                         f"group count {groups}")
    if batch % batch_group_count:
        raise ValueError(f"{fn}: the input's batch of {batch} must be divisible by batch_group_count "
                         f"({batch_group_count})")


# ---- the general form ----------------------------------------------------------------------------

def conv_general_dilated(lhs: ArrayLike, rhs: ArrayLike, window_strides: Any = None, padding: Any = "VALID",
                         lhs_dilation: Any = None, rhs_dilation: Any = None, dimension_numbers: Any = None,
                         feature_group_count: int = 1, batch_group_count: int = 1) -> Array:
    """General N-d convolution (cross-correlation, as in deep learning), XLA's ConvGeneralDilated with
    JAX's ``lax.conv_general_dilated`` arguments.

    ``out[n, o, *p] = sum_{c, *k} lhs_d[n, g(o) * C_g + c, *(p * stride + k * rhs_dilation)] * rhs[o, c, *k]``
    where ``lhs_d`` is ``lhs`` with ``lhs_dilation - 1`` zeros between neighbours and ``padding`` around
    it, and ``g(o)`` is the feature group of output feature ``o``.

    Args:
        lhs: the input, ``(N, C, *spatial)`` by default; float or complex.
        rhs: the kernel, ``(O, C / feature_group_count, *kernel)`` by default.
        window_strides: one int per spatial axis (default 1).
        padding: ``"VALID"`` (none), ``"SAME"`` (output ``ceil(in / stride)``; an odd total pads one
            more on the high side) or one ``(low, high)`` pair of ints per spatial axis; negative
            values crop.
        lhs_dilation: one int per spatial axis (default 1); ``d > 1`` is a transposed (fractionally
            strided) convolution.
        rhs_dilation: the kernel's dilation (atrous convolution), one int per spatial axis.
        dimension_numbers: None for ``(N, C, *spatial)`` / ``(O, I, *spatial)`` / ``(N, C, *spatial)``,
            a ``ConvDimensionNumbers`` of axis tuples, or strings such as ``("NHWC", "HWIO", "NHWC")``.
        feature_group_count: split the input features into this many groups, each convolved with its
            own slice of the output features (``groups`` in PyTorch; ``C`` groups is depthwise).
        batch_group_count: split the batch into this many groups, each producing its own slice of the
            output features (the kernel's gradient of a grouped convolution is one).

    Returns:
        The output, ``(N / batch_group_count, O, *out_spatial)`` laid out by ``dimension_numbers``, of
        the result dtype of ``lhs`` and ``rhs`` (float32 stays float32). ``out_spatial =
        floor((dilated_in + low + high - dilated_kernel) / stride) + 1``.

    Its vjp and jvp are convolutions of this same primitive (JAX's transpose rules), so it is
    differentiable to any order; under ``vmap`` the batch folds into examples, features or groups.

    Raises:
        TypeError: an integer or boolean operand; strides, dilations or padding that are not ints.
        ValueError: operands of different rank or rank < 3; a stride or dilation < 1; padding of the
            wrong length; feature or batch counts that the group counts do not divide; an empty
            output.
    """
    fn = "conv_general_dilated"
    lhs, rhs = _check_operands(lhs, rhs, fn)
    specs = _dimension_numbers(dimension_numbers, lhs.ndim)
    n = lhs.ndim - 2
    window_strides = as_ints(1 if window_strides is None else window_strides, n, "window_strides", fn)
    lhs_dilation = as_ints(1 if lhs_dilation is None else lhs_dilation, n, "lhs_dilation", fn)
    rhs_dilation = as_ints(1 if rhs_dilation is None else rhs_dilation, n, "rhs_dilation", fn)
    feature_group_count = as_ints(feature_group_count, 1, "feature_group_count", fn)[0]
    batch_group_count = as_ints(batch_group_count, 1, "batch_group_count", fn)[0]
    _check_groups(lhs.shape, rhs.shape, specs, feature_group_count, batch_group_count, fn)
    in_spatial = tuple(lhs.shape[i] for i in specs.lhs_spec[2:])
    kernel = tuple(rhs.shape[i] for i in specs.rhs_spec[2:])
    padding = _padding(padding, in_spatial, kernel, window_strides, lhs_dilation, rhs_dilation)
    for size, (lo, hi), k in zip(dilate_shape(in_spatial, lhs_dilation), padding,
                                 dilate_shape(kernel, rhs_dilation)):
        if size + lo + hi < k:
            raise ValueError(f"{fn}: the padded input ({in_spatial}, padding {padding}) is smaller than the "
                             f"dilated kernel ({kernel}, rhs_dilation {rhs_dilation}); pad more or use a "
                             "smaller kernel")
    return conv(lhs, rhs, window_strides=window_strides, padding=padding, lhs_dilation=lhs_dilation,
                rhs_dilation=rhs_dilation, dimension_numbers=specs, feature_group_count=feature_group_count,
                batch_group_count=batch_group_count)


# ---- PyTorch's spelling ----------------------------------------------------------------------------

def _batched(input, weight, n: int, fn: str):
    """``input`` with a batch axis (PyTorch accepts one unbatched example) and whether one was added."""
    input, weight = _check_operands_torch(input, weight, n, fn)
    if input.ndim == n + 1:
        return expand_dims(input, 0), weight, True
    return input, weight, False


def _check_operands_torch(input, weight, n: int, fn: str):
    input, weight = asarray(input), asarray(weight)
    for name, x in (("input", input), ("weight", weight)):
        if np.dtype(x.dtype).kind not in "fc":
            raise TypeError(f"{fn}: {name} must be a float or complex array, got dtype {x.dtype}; cast it "
                            "with .astype(np.float32) first")
    if input.ndim not in (n + 1, n + 2):
        raise ValueError(f"{fn}: input must be (N, C, {n} spatial axes) or unbatched (C, {n} spatial axes), "
                         f"got shape {tuple(input.shape)}")
    if weight.ndim != n + 2:
        raise ValueError(f"{fn}: weight must have {n + 2} axes (out_channels, in_channels / groups, "
                         f"{n} kernel axes), got shape {tuple(weight.shape)}")
    return input, weight


def check_same_needs_unit_stride(stride: tuple, fn: str) -> None:
    """PyTorch's rule for ``padding='same'`` (shared with the Conv layers, which check it when built)."""
    if any(s != 1 for s in stride):
        raise ValueError(f"{fn}: padding='same' needs stride 1 (PyTorch's rule), got stride {stride}")


def check_output_padding(output_padding: tuple, stride: tuple, dilation: tuple, fn: str) -> None:
    """PyTorch's rule for a transposed convolution's ``output_padding`` (shared with the layers)."""
    if any(e >= max(s, d) for e, s, d in zip(output_padding, stride, dilation)):
        raise ValueError(f"{fn}: output_padding {output_padding} must be smaller than stride {stride} or "
                         f"dilation {dilation} (PyTorch's rule)")


def _torch_padding(padding, n: int, kernel, dilation, stride, fn: str) -> tuple:
    """PyTorch's ``padding``: an int or n ints (both sides), ``'valid'`` or ``'same'`` (stride 1 only;
    an odd total pads one more on the high side, as PyTorch)."""
    if isinstance(padding, str):
        if padding == "valid":
            return ((0, 0),) * n
        if padding == "same":
            check_same_needs_unit_stride(stride, fn)
            totals = [d * (k - 1) for k, d in zip(kernel, dilation)]
            return tuple((t // 2, t - t // 2) for t in totals)
        raise ValueError(f"{fn}: padding must be an int, a tuple of {n} ints, 'valid' or 'same', got {padding!r}")
    return tuple((p, p) for p in as_ints(padding, n, "padding", fn, minimum=0))


def _add_bias(out, bias, n: int, fn: str):
    if bias is None:
        return out
    bias = asarray(bias)
    if bias.shape != (out.shape[1],):
        raise ValueError(f"{fn}: bias must have shape ({out.shape[1]},), one per output channel, got "
                         f"{tuple(bias.shape)}")
    return out + reshape(bias, (out.shape[1],) + (1,) * n)


def _unbatched(out, added: bool):
    return out[0] if added else out


def _conv_nd(n: int, input, weight, bias, stride, padding, dilation, groups):
    fn = f"conv{n}d"
    input, weight, added = _batched(input, weight, n, fn)
    groups = as_ints(groups, 1, "groups", fn)[0]
    if input.shape[1] != weight.shape[1] * groups:
        raise ValueError(f"{fn}: input has {input.shape[1]} channels, but weight {tuple(weight.shape)} with "
                         f"groups={groups} expects {weight.shape[1] * groups}")
    if weight.shape[0] % groups:
        raise ValueError(f"{fn}: weight's {weight.shape[0]} output channels must be divisible by groups={groups}")
    stride = as_ints(stride, n, "stride", fn)
    dilation = as_ints(dilation, n, "dilation", fn)
    pads = _torch_padding(padding, n, weight.shape[2:], dilation, stride, fn)
    out = conv_general_dilated(input, weight, stride, pads, None, dilation, None, groups)
    return _unbatched(_add_bias(out, bias, n, fn), added)


def conv1d(input: ArrayLike, weight: ArrayLike, bias: ArrayLike = None, stride: int = 1, padding: Any = 0,
           dilation: int = 1, groups: int = 1) -> Array:
    """1-D convolution (cross-correlation), ``torch.nn.functional.conv1d``'s signature and result.

    Args:
        input: ``(N, C_in, L)`` or one unbatched example ``(C_in, L)``.
        weight: ``(C_out, C_in / groups, K)``.
        bias: ``(C_out,)`` or None.
        stride, dilation: an int or a 1-tuple.
        padding: an int or 1-tuple (zeros on both sides), ``'valid'``, or ``'same'`` (stride 1 only).
        groups: input and output channels split into this many groups.

    Returns:
        ``(N, C_out, L_out)`` (or ``(C_out, L_out)``), ``L_out = floor((L + 2p - d(K - 1) - 1) / s) + 1``;
        the result dtype of input and weight.

    Raises:
        ValueError: wrong ranks, channels that do not match ``weight`` and ``groups``, a bias of the
            wrong shape, ``'same'`` with a stride, a kernel larger than the padded input.
        TypeError: integer operands, non-int stride/padding/dilation/groups.
    """
    return _conv_nd(1, input, weight, bias, stride, padding, dilation, groups)


def conv2d(input: ArrayLike, weight: ArrayLike, bias: ArrayLike = None, stride: int = 1, padding: Any = 0,
           dilation: int = 1, groups: int = 1) -> Array:
    """2-D convolution (cross-correlation), ``torch.nn.functional.conv2d``'s signature and result.

    Args:
        input: ``(N, C_in, H, W)`` or one unbatched example ``(C_in, H, W)``.
        weight: ``(C_out, C_in / groups, kH, kW)``.
        bias: ``(C_out,)`` or None.
        stride, dilation: an int or a pair.
        padding: an int or pair (zeros on both sides of each axis), ``'valid'``, or ``'same'`` (stride 1
            only; an odd total pads one more at the end, as PyTorch).
        groups: input and output channels split into this many groups (``C_in`` groups: depthwise).

    Returns:
        ``(N, C_out, H_out, W_out)`` (or unbatched), ``H_out = floor((H + 2p - d(kH - 1) - 1) / s) + 1``;
        the result dtype of input and weight.

    Raises:
        ValueError, TypeError: as :func:`conv1d`.
    """
    return _conv_nd(2, input, weight, bias, stride, padding, dilation, groups)


def conv3d(input: ArrayLike, weight: ArrayLike, bias: ArrayLike = None, stride: int = 1, padding: Any = 0,
           dilation: int = 1, groups: int = 1) -> Array:
    """3-D convolution, ``torch.nn.functional.conv3d``'s signature: input ``(N, C_in, D, H, W)`` or
    unbatched, weight ``(C_out, C_in / groups, kD, kH, kW)``; arguments, result and errors as
    :func:`conv2d` with triples."""
    return _conv_nd(3, input, weight, bias, stride, padding, dilation, groups)


def _conv_transpose_nd(n: int, input, weight, bias, stride, padding, output_padding, groups, dilation):
    """The gradient of ``conv{n}d`` with respect to its input, as a layer: the input dilated by the
    stride, padded by ``dilation * (k - 1) - padding`` (plus ``output_padding`` at the end) and
    convolved with the spatially reversed kernel whose in and out channels are exchanged."""
    fn = f"conv_transpose{n}d"
    input, weight, added = _batched(input, weight, n, fn)
    groups = as_ints(groups, 1, "groups", fn)[0]
    if input.shape[1] != weight.shape[0] or weight.shape[0] % groups:
        raise ValueError(f"{fn}: input has {input.shape[1]} channels, but weight {tuple(weight.shape)} expects "
                         f"{weight.shape[0]} (weight is (C_in, C_out / groups, *kernel), C_in divisible by "
                         f"groups={groups})")
    stride = as_ints(stride, n, "stride", fn)
    dilation = as_ints(dilation, n, "dilation", fn)
    pad = as_ints(padding, n, "padding", fn, minimum=0)
    extra = as_ints(output_padding, n, "output_padding", fn, minimum=0)
    check_output_padding(extra, stride, dilation, fn)
    kernel = weight.shape[2:]
    pads = tuple((d * (k - 1) - p, d * (k - 1) - p + e) for k, d, p, e in zip(kernel, dilation, pad, extra))
    if groups > 1:  # (g * C_in/g, C_out/g, k) -> (C_in/g, g * C_out/g, k): groups join the output channels
        weight = _merge_axis(_split_axis(weight, 0, groups), 0, 1)
    rhs_spec = (1, 0) + tuple(range(2, n + 2))
    canonical = tuple(range(n + 2))
    out = conv_general_dilated(input, flip(weight, axis=tuple(range(2, n + 2))), None, pads, stride, dilation,
                               ConvDimensionNumbers(canonical, rhs_spec, canonical), groups)
    return _unbatched(_add_bias(out, bias, n, fn), added)


def conv_transpose1d(input: ArrayLike, weight: ArrayLike, bias: ArrayLike = None, stride: int = 1, padding: Any = 0,
                     output_padding: int = 0, groups: int = 1, dilation: int = 1) -> Array:
    """1-D transposed convolution, ``torch.nn.functional.conv_transpose1d``: input ``(N, C_in, L)``,
    weight ``(C_in, C_out / groups, K)``; see :func:`conv_transpose2d`."""
    return _conv_transpose_nd(1, input, weight, bias, stride, padding, output_padding, groups, dilation)


def conv_transpose2d(input: ArrayLike, weight: ArrayLike, bias: ArrayLike = None, stride: int = 1, padding: Any = 0,
                     output_padding: int = 0, groups: int = 1, dilation: int = 1) -> Array:
    """2-D transposed convolution ("deconvolution"), ``torch.nn.functional.conv_transpose2d``'s
    signature and result: the gradient of :func:`conv2d` with respect to its input.

    Args:
        input: ``(N, C_in, H, W)`` or unbatched ``(C_in, H, W)``.
        weight: ``(C_in, C_out / groups, kH, kW)`` (the layout of the ``conv2d`` it transposes).
        bias: ``(C_out,)`` or None.
        stride, padding, dilation: those of the forward ``conv2d``; ints or pairs.
        output_padding: extra rows/columns at the end of each spatial axis (smaller than the stride or
            the dilation), to pick among the input sizes a strided ``conv2d`` maps to one output size.
        groups: channel groups.

    Returns:
        ``(N, C_out, H_out, W_out)``, ``H_out = (H - 1) s - 2p + d(kH - 1) + output_padding + 1``.

    Raises:
        ValueError: wrong ranks, channel counts that do not match ``weight`` and ``groups``,
            ``output_padding`` too large, a bias of the wrong shape.
        TypeError: integer operands, non-int arguments.
    """
    return _conv_transpose_nd(2, input, weight, bias, stride, padding, output_padding, groups, dilation)


def conv_transpose3d(input: ArrayLike, weight: ArrayLike, bias: ArrayLike = None, stride: int = 1, padding: Any = 0,
                     output_padding: int = 0, groups: int = 1, dilation: int = 1) -> Array:
    """3-D transposed convolution, ``torch.nn.functional.conv_transpose3d``; see :func:`conv_transpose2d`."""
    return _conv_transpose_nd(3, input, weight, bias, stride, padding, output_padding, groups, dilation)
