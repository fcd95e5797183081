"""``conv_general_dilated``: one convolution primitive whose vjp, jvp and batch rules are convolutions
of the same primitive, so second and higher derivatives (a gradient penalty through a CNN) need nothing
new.

The primitive follows XLA's ConvGeneralDilated, as JAX's ``lax.conv_general_dilated`` exposes it: window
strides, explicit (low, high) padding that may be negative, lhs (input) dilation, rhs (kernel)
dilation, feature groups and batch groups, and dimension numbers that say which axis of each operand
is the batch, the feature and each spatial axis. The lhs dilation and the batch groups exist because
the transposes need them: the cotangent of a strided convolution's input is a convolution over the
lhs-dilated cotangent, and the cotangent of a grouped convolution's kernel is a batch-grouped
convolution. The rule structure (which operand becomes which, and the padding formulas) is that of
JAX's ``jax/_src/lax/convolution.py``.

On NumPy (and CuPy without cuDNN) the impl is im2col. Unit-stride convolutions with one group (every
convolution of a gradient penalty through a plain CNN, transposes included) read the flattened padded
input at shifted offsets: one copy of contiguous runs and one GEMM whose long axis is examples x
positions, or, for a kernel's gradient (a small result, a long reduction), one GEMM per output position
on shifted views with no copy, in cache-sized blocks of the reduction. Other convolutions
copy a strided window view of the padded input into a (groups, rows, window) matrix, times the kernel
as one batched GEMM (see benchmarks/bench_gp.py and benchmarks/README.md for the measurements). On
CuPy, 2-D and 3-D convolutions without lhs dilation or batch groups go through cuDNN.
"""
from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from tapegrad._backend import namespace_of
from tapegrad._core import ShapedArray, bind
from tapegrad.extend import defbatch, defjvp, defvjp, primitive
from tapegrad.numpy._shape import flip, reshape, transpose, unbroadcast


class ConvDimensionNumbers(NamedTuple):
    """Where each role sits among an operand's axes (XLA's and JAX's convention).

    ``lhs_spec = (batch axis, feature axis, *spatial axes)`` of the input, ``rhs_spec = (output-feature
    axis, input-feature axis, *spatial axes)`` of the kernel, ``out_spec = (batch axis, feature axis,
    *spatial axes)`` of the output. PyTorch's NCHW / OIHW / NCHW is ``(0, 1, 2, 3)`` three times.
    """

    lhs_spec: tuple
    rhs_spec: tuple
    out_spec: tuple


# ---- shape arithmetic ----------------------------------------------------------------------------

def dilate_shape(shape, dilation) -> tuple:
    """The length of each axis after ``d - 1`` zeros are inserted between neighbours."""
    return tuple(0 if s == 0 else 1 + d * (s - 1) for s, d in zip(shape, dilation))


def conv_out_spatial(in_spatial, kernel_spatial, window_strides, padding, lhs_dilation,
                     rhs_dilation) -> tuple:
    """Output spatial shape: ``floor((dilated_in + lo + hi - dilated_kernel) / stride) + 1``, at
    least 0."""
    padded = [s + lo + hi for s, (lo, hi) in zip(dilate_shape(in_spatial, lhs_dilation), padding)]
    window = dilate_shape(kernel_spatial, rhs_dilation)
    return tuple((p - k) // st + 1 if p >= k else 0
                 for p, k, st in zip(padded, window, window_strides))


def _conv_abstract_eval(lhs, rhs, *, window_strides, padding, lhs_dilation, rhs_dilation,
                        dimension_numbers, feature_group_count, batch_group_count):
    lhs_spec, rhs_spec, out_spec = dimension_numbers
    spatial = conv_out_spatial([lhs.shape[i] for i in lhs_spec[2:]], [rhs.shape[i] for i in rhs_spec[2:]],
                               window_strides, padding, lhs_dilation, rhs_dilation)
    canonical = (lhs.shape[lhs_spec[0]] // batch_group_count, rhs.shape[rhs_spec[0]]) + spatial
    shape = [0] * len(canonical)
    for role, axis in enumerate(out_spec):
        shape[axis] = canonical[role]
    return ShapedArray(tuple(shape), np.result_type(lhs.dtype, rhs.dtype))


# ---- the NumPy impl: im2col and one batched GEMM (any strides and groups) --------------------------

def _dilate_and_pad(xp, x, lhs_dilation, padding, layout=None):
    """``x`` (N, C, *spatial) with ``d - 1`` zeros between neighbours and (lo, hi) zeros around each
    spatial axis; negative padding crops. With ``layout`` (an axis order) the new buffer is allocated
    in that order, so ``result.transpose(layout)`` is contiguous: the padding and the change of layout
    cost one copy, not two. ``x`` itself when there is nothing to insert."""
    if all(d == 1 for d in lhs_dilation) and all(lo == 0 and hi == 0 for lo, hi in padding):
        return x
    dilated = dilate_shape(x.shape[2:], lhs_dilation)
    grow = [(max(lo, 0), max(hi, 0)) for lo, hi in padding]
    shape = x.shape[:2] + tuple(d + lo + hi for d, (lo, hi) in zip(dilated, grow))
    layout = tuple(range(x.ndim)) if layout is None else tuple(layout)
    out = xp.zeros(tuple(shape[i] for i in layout), x.dtype).transpose(tuple(int(i) for i in np.argsort(layout)))
    out[(slice(None),) * 2 + tuple(slice(lo, lo + d, s) for d, (lo, _), s
                                   in zip(dilated, grow, lhs_dilation))] = x
    crop = tuple(slice(max(-lo, 0), out.shape[2 + i] - max(-hi, 0)) for i, (lo, hi) in enumerate(padding))
    return out[(slice(None),) * 2 + crop]


def _windows(xp, x, out_spatial, kernel_spatial, window_strides, rhs_dilation):
    """A strided view of ``x`` (N, C, *spatial) with shape (N, C, *out_spatial, *kernel_spatial):
    element ``[n, c, *o, *k]`` is ``x[n, c, *(o * stride + k * dilation)]``. No copy."""
    n, c = x.shape[:2]
    strides = x.strides
    shape = (n, c) + tuple(out_spatial) + tuple(kernel_spatial)
    window = tuple(s * st for s, st in zip(strides[2:], window_strides))
    dilation = tuple(s * d for s, d in zip(strides[2:], rhs_dilation))
    return xp.lib.stride_tricks.as_strided(x, shape, strides[:2] + window + dilation)


def _conv_canonical(xp, x, w, window_strides, padding, lhs_dilation, rhs_dilation, groups, batch_groups):
    """The convolution of ``x`` (N, C, *spatial) with ``w`` (O, C / groups, *kernel): (N / batch_groups, O,
    *out_spatial).

    The windows are copied once into ``cols``, a stack of g matrices (g feature or batch groups) whose
    axes are the rows (examples x output positions) and the window (channels x kernel positions); one
    batched GEMM with the kernel gives every output. The copy dominates, so its layout follows the
    longer contiguous run: rows innermost when the output is wider than the kernel (a forward
    convolution, 10x faster to gather there), the window innermost otherwise (a kernel's gradient,
    whose "kernel" is a whole image).
    """
    nd = x.ndim - 2
    x = _dilate_and_pad(xp, x, lhs_dilation, padding)
    kernel = w.shape[2:]
    out_spatial = conv_out_spatial(x.shape[2:], kernel, window_strides, ((0, 0),) * nd, (1,) * nd,
                                   rhs_dilation)
    patches = _windows(xp, x, out_spatial, kernel, window_strides, rhs_dilation)
    n, c = x.shape[:2]
    if batch_groups > 1:   # (bg, n / bg, c, *out, *k)
        g, n_out = batch_groups, n // batch_groups
        grouped = patches.reshape((g, n_out, c) + patches.shape[2:])
        group_axis, batch_axis = 0, 1
    else:                  # (n, g, c / g, *out, *k)
        g, n_out = groups, n
        grouped = patches.reshape((n, g, c // g) + patches.shape[2:])
        group_axis, batch_axis = 1, 0
    row_axes = (batch_axis,) + tuple(range(3, 3 + nd))
    window_axes = (2,) + tuple(range(3 + nd, 3 + 2 * nd))
    rows, window = n_out * math.prod(out_spatial), grouped.shape[2] * math.prod(kernel)
    o = w.shape[0]
    kernel_matrix = w.reshape(g, o // g, window)
    spatial = tuple(range(3, 3 + nd))
    if out_spatial[-1] >= kernel[-1]:
        cols = grouped.transpose((group_axis,) + window_axes + row_axes).reshape(g, window, rows)
        y = xp.matmul(kernel_matrix, cols)                                      # (g, o / g, rows)
        y = y.reshape((g, o // g, n_out) + tuple(out_spatial)).transpose((2, 0, 1) + spatial)
    else:
        cols = grouped.transpose((group_axis,) + row_axes + window_axes).reshape(g, rows, window)
        y = xp.matmul(cols, kernel_matrix.transpose(0, 2, 1))                  # (g, rows, o / g)
        y = y.reshape((g, n_out) + tuple(out_spatial) + (o // g,)).transpose((1, 0, 2 + nd) + tuple(range(2, 2 + nd)))
    return y.reshape((n_out, o) + tuple(out_spatial))                          # (n_out, g, o / g, *out) merged


def _kernel_outgrows_input(x, w, window_strides, padding, lhs_dilation, rhs_dilation, groups, batch_groups):
    """Whether the kernel has more spatial positions than the input, in a plain (undilated, unit
    stride, ungrouped) convolution: the case of a kernel gradient's own derivative, where the
    "kernel" is a whole cotangent image and the "input" a small kernel padded all round."""
    plain = all(v == 1 for v in window_strides + lhs_dilation + rhs_dilation) and groups == batch_groups == 1
    return plain and math.prod(w.shape[2:]) > math.prod(x.shape[2:])


def _conv_kernel_as_image(xp, x, w, window_strides, padding, lhs_dilation, rhs_dilation, groups, batch_groups):
    """The same convolution with the roles exchanged, so that im2col copies windows of the small
    operand: ``out[n, o, p] = sum_{c, j} x[n, c, j] w[o, c, lo + j - p]`` is the kernel ``w`` read as
    images (one per output feature) correlated with the input ``x`` as the kernel, at positions
    ``m = P - 1 - p``, so the result comes out reversed. With a 16x16 "kernel" and a 3x3 input padded
    by 14 this copies 20x fewer elements and does 30x fewer multiplications."""
    nd = x.ndim - 2
    out_spatial = conv_out_spatial(x.shape[2:], w.shape[2:], window_strides, padding, lhs_dilation, rhs_dilation)
    pads = []
    for p, j, k, (lo, _) in zip(out_spatial, x.shape[2:], w.shape[2:], padding):
        low = p - 1 - lo
        pads.append((low, p - 1 + j - k - low))
    ones = (1,) * nd
    y = _conv_numpy(xp, w, x, ones, tuple(pads), ones, ones, 1, 1)          # (O, N, *reversed positions)
    return y.transpose((1, 0) + tuple(range(2, nd + 2)))[(slice(None),) * 2 + (slice(None, None, -1),) * nd]


# ---- unit strides, one group: shifted views of the flattened padded grid -------------------------
# With unit window strides a window element at kernel offset k sits at a fixed distance from the
# window's origin in the flattened padded input, the same for every window (and for every example, when
# the examples follow one another). So the windows of one kernel offset form a single shifted slice of
# the flat input: im2col copies long contiguous runs instead of gathering rows of a few elements, and
# when the output is smaller than the kernel the shifted slices feed the products with no copy at all.
# The outputs are computed at every grid position where a window fits and the valid ones are viewed out.

def _grid_strides(grid) -> tuple:
    """The element strides of a C-ordered array of shape ``grid``."""
    return tuple(math.prod(grid[i + 1:]) for i in range(len(grid)))


def _flat_applies(x, w, window_strides, groups, batch_groups) -> bool:
    """Unit window strides, one group, nothing empty (any lhs dilation is inserted as zeros first)."""
    return (all(s == 1 for s in window_strides) and groups == batch_groups == 1 and x.size > 0
            and w.size > 0)


def _conv_flat(xp, x, w, padding, lhs_dilation, rhs_dilation):
    """The convolution of ``x`` (N, C, *spatial) with ``w`` (O, C, *kernel) at unit strides, one group:
    shifts over the kernel's offsets (one im2col of contiguous runs, one GEMM with the examples and
    positions as its long axis) when the kernel has no more positions than the output, shifts over the
    output's positions otherwise (a kernel gradient: the "kernel" is a whole image)."""
    nd = x.ndim - 2
    out_spatial = conv_out_spatial(x.shape[2:], w.shape[2:], (1,) * nd, padding, lhs_dilation, rhs_dilation)
    if 0 in out_spatial:
        return None
    if math.prod(w.shape[2:]) <= math.prod(out_spatial):
        return _shift_kernel(xp, x, w, padding, lhs_dilation, rhs_dilation, out_spatial)
    return _shift_output(xp, x, w, padding, lhs_dilation, rhs_dilation, out_spatial)


def _shift_kernel(xp, x, w, padding, lhs_dilation, rhs_dilation, out_spatial):
    """``y[o, n*L + j] = sum_{k, c} w[o, c, k] xt[c, n*L + j + shift(k)]`` over the flat (C, N*L) input
    (L positions per padded image): ``cols`` stacks one contiguous slice per (k, c), one GEMM."""
    nd = x.ndim - 2
    n, c, o, kernel = x.shape[0], x.shape[1], w.shape[0], w.shape[2:]
    layout = (1, 0) + tuple(range(2, 2 + nd))
    xt = xp.ascontiguousarray(_dilate_and_pad(xp, x, lhs_dilation, padding, layout).transpose(layout))
    grid = xt.shape[2:]
    size, item = n * math.prod(grid), xt.itemsize
    steps = [g * d for g, d in zip(_grid_strides(grid), rhs_dilation)]
    rows = size - sum(st * (k - 1) for st, k in zip(steps, kernel))  # positions whose window fits
    cols = xp.lib.stride_tricks.as_strided(xt, tuple(kernel) + (c, rows),
                                           tuple(st * item for st in steps) + (size * item, item))
    cols = cols.reshape(math.prod(kernel) * c, rows)                      # the one copy
    kernel_matrix = w.transpose((0,) + tuple(range(2, 2 + nd)) + (1,)).reshape(o, -1)
    y = xp.matmul(kernel_matrix, cols)                                    # (O, rows)
    grid_strides = tuple(g * y.itemsize for g in _grid_strides(grid))
    return xp.lib.stride_tricks.as_strided(y, (n, o) + tuple(out_spatial),
                                           (math.prod(grid) * y.itemsize, rows * y.itemsize) + grid_strides)


def _shift_output(xp, x, w, padding, lhs_dilation, rhs_dilation, out_spatial):
    """``y[p, n, o] = sum_q x[n, q + shift(p)] we[q, o]`` over the flat (N, C*L) input, ``we`` the kernel
    laid on the padded grid (zeros between and around its taps): one GEMM per output position, each
    reading a shifted view of the input, nothing gathered. The layout of ``we`` follows what OpenBLAS
    (0.3, Haswell kernels) was measured to multiply fastest: with 1 to 3 examples the products take
    0.35-0.7x the time with ``we`` stored (O, C*L) and read transposed, with 4 or more 1.4-2.5x."""
    nd = x.ndim - 2
    n, c, o, kernel = x.shape[0], x.shape[1], w.shape[0], w.shape[2:]
    xt = xp.ascontiguousarray(_dilate_and_pad(xp, x, lhs_dilation, padding))
    grid = xt.shape[2:]
    length, item = c * math.prod(grid), xt.itemsize
    steps = _grid_strides(grid)
    depth = length - sum(st * (p - 1) for st, p in zip(steps, out_spatial))
    taps = tuple(slice(0, d * (k - 1) + 1, d) for k, d in zip(kernel, rhs_dilation))
    if n <= 3:  # (O, C, *grid): copied in runs of the kernel's rows, read transposed
        laid = xp.zeros((o, c) + grid, w.dtype)
        laid[(slice(None),) * 2 + taps] = w
        laid = laid.reshape(o, length)[:, :depth].T
    else:       # (C, *grid, O): the layout OpenBLAS multiplies fastest with 4 or more examples
        laid = xp.zeros((c,) + grid + (o,), w.dtype)
        laid[(slice(None),) + taps] = w.transpose((1,) + tuple(range(2, 2 + nd)) + (0,))
        laid = laid.reshape(length, o)[:depth]
    shifted = xp.lib.stride_tricks.as_strided(xt, tuple(out_spatial) + (n, depth),
                                              tuple(st * item for st in steps) + (length * item, item))
    y = _reduction_matmul(xp, shifted, laid)                             # (*out, N, O)
    return y.transpose((nd, nd + 1) + tuple(range(nd)))


# ---- the products of a kernel gradient, in blocks ----------------------------------------------------
# A kernel gradient's products have a tiny result (positions x examples x features) and a huge reduction
# (channels x image). Cut into blocks of 4096 along the reduction, each block's operands stay in cache
# across the output positions: 0.5-0.9x the time of one product per position, measured on OpenBLAS with
# 1 to 32 examples. (BLAS threads split the result, not the reduction; dealing the blocks to Python
# threads was measured too, and lost 5-10% inside a gradient-penalty step at 2 BLAS threads.)

_BLOCK = 4096


def _reduction_matmul(xp, a, b):
    """``xp.matmul(a, b)`` for a reduction far longer than the result's axes: on NumPy one block of the
    reduction at a time, the partial products summed."""
    depth = a.shape[-1]
    if xp is not np or depth <= _BLOCK:
        return xp.matmul(a, b)
    out = np.matmul(a[..., :_BLOCK], b[:_BLOCK])
    for start in range(_BLOCK, depth, _BLOCK):
        out += np.matmul(a[..., start:start + _BLOCK], b[start:start + _BLOCK])
    return out


def _conv_numpy(xp, x, w, window_strides, padding, lhs_dilation, rhs_dilation, groups, batch_groups):
    """The im2col strategies, for NumPy and for CuPy where cuDNN does not apply."""
    args = (x, w, window_strides, padding, lhs_dilation, rhs_dilation, groups, batch_groups)
    if _kernel_outgrows_input(*args):
        return _conv_kernel_as_image(xp, *args)
    if _flat_applies(x, w, window_strides, groups, batch_groups):
        y = _conv_flat(xp, x, w, padding, lhs_dilation, rhs_dilation)
        if y is not None:
            return y
    return _conv_canonical(xp, *args)


def _conv_impl(lhs, rhs, *, window_strides, padding, lhs_dilation, rhs_dilation, dimension_numbers,
               feature_group_count, batch_group_count):
    xp = namespace_of(lhs, rhs)
    lhs_spec, rhs_spec, out_spec = dimension_numbers
    x, w = lhs.transpose(lhs_spec), rhs.transpose(rhs_spec)
    if x.dtype != w.dtype:
        dtype = np.result_type(x.dtype, w.dtype)
        x, w = x.astype(dtype), w.astype(dtype)
    args = (x, w, window_strides, padding, lhs_dilation, rhs_dilation, feature_group_count, batch_group_count)
    y = _cudnn_conv(xp, *args) if xp is not np else None
    if y is None:
        y = _conv_numpy(xp, *args)
    return y.transpose(tuple(int(i) for i in np.argsort(out_spec)))  # axes as ints: CuPy takes no host array


def _cudnn_conv(xp, x, w, window_strides, padding, lhs_dilation, rhs_dilation, groups, batch_groups):
    """cuDNN's forward convolution for CuPy arrays, where it applies (2-D or 3-D, symmetric
    non-negative padding, no lhs dilation, no batch groups, float dtypes and cuDNN available);
    None otherwise, and the im2col path runs."""
    try:
        from cupy import cudnn
    except ImportError:
        return None
    if not getattr(cudnn, "available", True) or x.ndim not in (4, 5) or batch_groups != 1:
        return None
    if any(d != 1 for d in lhs_dilation) or any(lo != hi or lo < 0 for lo, hi in padding):
        return None
    if x.dtype.kind != "f":
        return None
    out_spatial = conv_out_spatial(x.shape[2:], w.shape[2:], window_strides, padding, lhs_dilation, rhs_dilation)
    y = xp.empty((x.shape[0], w.shape[0]) + out_spatial, x.dtype)
    cudnn.convolution_forward(xp.ascontiguousarray(x), xp.ascontiguousarray(w), None, y,
                              tuple(lo for lo, _ in padding), tuple(window_strides), tuple(rhs_dilation),
                              groups, auto_tune=True, tensor_core="auto")
    return y


conv_general_dilated_p = primitive("conv_general_dilated", _conv_impl, _conv_abstract_eval)


def conv(lhs, rhs, **params):
    """Bind the primitive: ``params`` are its static parameters, already canonical (see
    ``tapegrad.nn.functional.conv_general_dilated`` for the checked public form)."""
    return bind(conv_general_dilated_p, lhs, rhs, **params)


# ---- axis juggling, in tapegrad operations (the rules must stay differentiable) --------------------

def _split_axis(x, axis: int, major: int):
    """Axis ``axis`` of length ``major * m`` becomes two axes ``(major, m)`` at ``axis``."""
    shape = tuple(x.shape)
    return reshape(x, shape[:axis] + (major, shape[axis] // major) + shape[axis + 1:])


def _merge_axis(x, src: int, dst: int):
    """Axis ``src`` is folded into axis ``dst`` as its major part; ``dst`` counts the axes as they
    are once ``src`` is removed."""
    perm = [i for i in range(x.ndim) if i != src]
    perm.insert(dst, src)
    shape = [x.shape[i] for i in range(x.ndim) if i != src]
    shape[dst] *= x.shape[src]
    if perm != list(range(x.ndim)):
        x = transpose(x, tuple(perm))
    return reshape(x, tuple(shape))


def _swap_roles(spec) -> tuple:
    """The same axes with the first two roles exchanged (batch <-> feature, out <-> in)."""
    return (spec[1], spec[0]) + tuple(spec[2:])


def _dilated(shape, dilation):
    return np.array(dilate_shape(shape, dilation))


# ---- vjp: the transposes are convolutions ----------------------------------------------------------

def _conv_vjp_lhs(ct, ans, lhs, rhs, *, window_strides, padding, lhs_dilation, rhs_dilation,
                  dimension_numbers, feature_group_count, batch_group_count):
    """The input's cotangent: ``ct`` convolved with the spatially reversed kernel, its in/out roles
    exchanged, the strides becoming lhs dilation."""
    lhs_spec, rhs_spec, out_spec = dimension_numbers
    groups = max(feature_group_count, batch_group_count)
    if groups > 1:  # each group's kernel slice moves from the output-feature to the input-feature axis
        rhs = _merge_axis(_split_axis(rhs, rhs_spec[0], groups), rhs_spec[0], rhs_spec[1])
    in_spatial = [lhs.shape[i] for i in lhs_spec[2:]]
    kernel = [rhs.shape[i] for i in rhs_spec[2:]]
    out_spatial = [ct.shape[i] for i in out_spec[2:]]
    lo = _dilated(kernel, rhs_dilation) - 1 - np.array([p[0] for p in padding])
    hi = (_dilated(in_spatial, lhs_dilation) + _dilated(kernel, rhs_dilation) - 1
          - _dilated(out_spatial, window_strides) - lo)
    out = conv(ct, flip(rhs, axis=tuple(rhs_spec[2:])),
               window_strides=lhs_dilation, padding=tuple(zip(lo.tolist(), hi.tolist())),
               lhs_dilation=window_strides, rhs_dilation=rhs_dilation,
               dimension_numbers=ConvDimensionNumbers(out_spec, _swap_roles(rhs_spec), lhs_spec),
               feature_group_count=groups, batch_group_count=1)
    if batch_group_count > 1:  # the batch groups were read from the input's batch axis: put them back
        out = _merge_axis(_split_axis(out, lhs_spec[1], batch_group_count), lhs_spec[1], lhs_spec[0])
    return unbroadcast(out, lhs)  # in lhs's dtype, as every binary rule (no rule upcasts)


def _conv_vjp_rhs(ct, ans, lhs, rhs, *, window_strides, padding, lhs_dilation, rhs_dilation,
                  dimension_numbers, feature_group_count, batch_group_count):
    """The kernel's cotangent: the input convolved with ``ct`` as the kernel (examples contracted as
    features), strides and kernel dilation exchanged; feature groups become batch groups and back."""
    lhs_spec, rhs_spec, out_spec = dimension_numbers
    in_spatial = [lhs.shape[i] for i in lhs_spec[2:]]
    kernel = [rhs.shape[i] for i in rhs_spec[2:]]
    out_spatial = [ct.shape[i] for i in out_spec[2:]]
    lo = np.array([p[0] for p in padding])
    hi = (_dilated(out_spatial, window_strides) - _dilated(in_spatial, lhs_dilation)
          + _dilated(kernel, rhs_dilation) - lo - 1)
    out = conv(lhs, ct, window_strides=rhs_dilation, padding=tuple(zip(lo.tolist(), hi.tolist())),
               lhs_dilation=lhs_dilation, rhs_dilation=window_strides,
               dimension_numbers=ConvDimensionNumbers(_swap_roles(lhs_spec), _swap_roles(out_spec),
                                                      _swap_roles(rhs_spec)),
               feature_group_count=batch_group_count, batch_group_count=feature_group_count)
    return unbroadcast(out, rhs)


defvjp(conv_general_dilated_p, _conv_vjp_lhs, _conv_vjp_rhs)
# bilinear: each operand's tangent contributes the convolution with the other operand held fixed
defjvp(conv_general_dilated_p,
       lambda t, ans, lhs, rhs, **params: conv(t, rhs, **params),
       lambda t, ans, lhs, rhs, **params: conv(lhs, t, **params))


# ---- vmap: the batch folds into the examples, the features or the groups ---------------------------

def _conv_batch(vals, dims, *, dimension_numbers, feature_group_count, batch_group_count, **params):
    """One convolution for the whole batch (JAX's batching scheme for ConvGeneralDilated).

    Batched input, shared kernel: the batch joins the examples. Shared input, batched kernel: the
    batch joins the output features. Both batched: the batch becomes more feature (or batch) groups,
    each example convolving only with its own kernel. With groups already present the batch goes
    inside each group, so the groups stay outermost as the primitive expects.
    """
    (lhs, rhs), (lhs_d, rhs_d) = vals, dims
    lhs_spec, rhs_spec, out_spec = dimension_numbers
    groups = dict(feature_group_count=feature_group_count, batch_group_count=batch_group_count)

    def run(lhs, rhs, **counts):
        return conv(lhs, rhs, dimension_numbers=dimension_numbers, **{**params, **groups, **counts})

    if lhs_d is not None and rhs_d is not None:
        size = lhs.shape[lhs_d]
        if batch_group_count > 1:
            new_lhs = _merge_axis(lhs, lhs_d, lhs_spec[0])
            counts = dict(batch_group_count=batch_group_count * size)
        else:
            new_lhs = _merge_axis(lhs, lhs_d, lhs_spec[1])
            counts = dict(feature_group_count=feature_group_count * size)
        out = run(new_lhs, _merge_axis(rhs, rhs_d, rhs_spec[0]), **counts)
        return _split_axis(out, out_spec[1], size), out_spec[1]
    if lhs_d is not None:
        size = lhs.shape[lhs_d]
        if batch_group_count == 1:
            new_lhs = _merge_axis(lhs, lhs_d, lhs_spec[0])
        else:  # batch inside each batch group: (groups, batch, n / groups)
            new_lhs = _inside_groups(lhs, lhs_d, lhs_spec[0], batch_group_count)
        return _split_axis(run(new_lhs, rhs), out_spec[0], size), out_spec[0]
    size = rhs.shape[rhs_d]
    if feature_group_count == 1 and batch_group_count == 1:
        out = run(lhs, _merge_axis(rhs, rhs_d, rhs_spec[0]))
        return _split_axis(out, out_spec[1], size), out_spec[1]
    group_count = max(feature_group_count, batch_group_count)
    out = run(lhs, _inside_groups(rhs, rhs_d, rhs_spec[0], group_count))
    out = _split_axis(_split_axis(out, out_spec[1], group_count), out_spec[1] + 1, size)
    return _merge_axis(out, out_spec[1], out_spec[1] + 1), out_spec[1]


def _inside_groups(x, d: int, axis: int, groups: int):
    """Fold batch axis ``d`` of ``x`` into ``axis`` (counted without ``d``) so that ``axis`` reads
    (groups, batch, per-group) from major to minor."""
    x = _split_axis(x, axis + (d <= axis), groups)              # (groups, per-group) at axis
    x = _merge_axis(x, d + (axis < d), axis + 1)                # batch into per-group: (groups, batch * per)
    return _merge_axis(x, axis, axis)                           # groups back in as the major part


defbatch(conv_general_dilated_p, _conv_batch)
