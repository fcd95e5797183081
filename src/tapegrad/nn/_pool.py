"""Pooling over the trailing spatial axes (PyTorch's NCL / NCHW layout): max, average and adaptive average.

Max pooling is one primitive, ``max_pool_p``, generic over the number of spatial axes, with two
results: the pooled values and the position of each window's maximum, a window offset in
``[0, prod(window))`` (one integer array, which carries no derivative). The derivatives read it:

- vjp: ``select_scatter_p(ct, argmax)`` routes each cotangent to its window's argmax (summing where
  windows overlap);
- jvp: ``window_gather_p(t, argmax)`` reads the tangent at each window's argmax.

The scatter and the gather are linear in their first operand and are each other's transposes, so
double backward (a gradient penalty through max pooling) needs nothing more. Ties go to the first
maximum in the window (row-major window order), as PyTorch and JAX.

The argmax is computed once, with the values, and kept as a result (the rules' operand), rather than
recomputed from ``x`` in every rule; computing it from the pooled values (the first offset equal to
the maximum) is about 2.5x faster than tracking a running maximum.

Average pooling is a window sum divided by a constant (a Python float, or a constant array where
windows differ in size). The window sum is a linear primitive, ``window_sum_p``, whose vjp is its
transpose ``window_sum_transpose_p`` (and the other way round). Composed of ``tapegrad.numpy`` strided
slices instead, its backward pass made one input-sized ``index_add`` per slice: 3 to 7 ms against
0.3 ms for the transpose on a float32 (32, 8, 32, 32) input with a 3x3 window; a reshape and ``sum``
over the window axes is 30x slower than strided adds in NumPy. Adaptive average pooling uses the window
sum on the axes whose size the output size divides, and a product with a constant 0/1 matrix on the
others.

Implementation notes (``impl`` only touches ``xp``, one code path for NumPy and CuPy):

- Windows are strided views of the (padded) input, one per window offset: no ``sliding_window_view``
  copy, no ``add.at``.
- Selecting by a mask uses integer multiplication of the values' bit patterns by the 0/1 mask: exact
  (an unselected element is +0.0 even when the selected value is inf or nan), branch-free, and about
  5x faster than ``where`` on NumPy, whose select mispredicts on a random mask.
"""
from __future__ import annotations

import itertools
import math
from typing import Any

import numpy as np

import tapegrad.numpy as tnp
from tapegrad._array_type import Array
from tapegrad._backend import namespace_of
from tapegrad._core import ShapedArray, bind
from tapegrad._typing import ArrayLike, ShapeLike
from tapegrad.extend import all_at_front, bind_batched, defbatch, defjvp, defvjp, ndim_of, primitive
from tapegrad.nn._args import as_int, as_ints
from tapegrad.nn._conv import conv_out_spatial

__all__ = ["adaptive_avg_pool1d", "adaptive_avg_pool2d", "avg_pool1d", "avg_pool2d", "max_pool1d",
           "max_pool2d"]

_BITS = {2: np.int16, 4: np.int32, 8: np.int64}  # an integer of each float's size, for exact selects


# ---- window geometry -----------------------------------------------------------------------------
# Static parameters shared by the primitives: ``window``, ``strides``, ``dilation`` (tuples of ints, one
# per spatial axis) and ``padding`` (one ``(lo, hi)`` pair per spatial axis). ``hi`` includes what
# ceil_mode adds, so every window lies inside the padded input.

def _out_spatial(spatial, window, strides, dilation, padding) -> tuple:
    """The convolution's output size for the same window (no input dilation)."""
    return conv_out_spatial(spatial, window, strides, padding, (1,) * len(window), dilation)


def _offsets(window):
    """Every window offset, in row-major order: the order in which ties go to the first."""
    return itertools.product(*(range(k) for k in window))


def _views(a, window, strides, dilation, out_spatial):
    """For each window offset, the strided view of ``a`` (padded) holding that element of every window."""
    for offset in _offsets(window):
        yield a[(Ellipsis,) + tuple(slice(o * d, o * d + s * (n - 1) + 1, s)
                                    for o, d, s, n in zip(offset, dilation, strides, out_spatial))]


def _padded(x, padding, fill):
    """``x`` with its spatial axes padded by ``fill`` (a filled buffer and one copy: faster than ``pad``)."""
    if not any(lo or hi for lo, hi in padding):
        return x
    xp = namespace_of(x)
    n = len(padding)
    lead, spatial = x.shape[:-n], x.shape[-n:]
    out = xp.full(lead + tuple(m + lo + hi for m, (lo, hi) in zip(spatial, padding)), fill, dtype=x.dtype)
    out[(Ellipsis,) + tuple(slice(lo, lo + m) for m, (lo, _) in zip(spatial, padding))] = x
    return out


def _cropped(a, in_spatial, padding):
    """The input's part of a padded buffer (a fresh array, so no result holds the padding alive)."""
    if not any(lo or hi for lo, hi in padding):
        return a
    crop = tuple(slice(lo, lo + m) for m, (lo, _) in zip(in_spatial, padding))
    return namespace_of(a).ascontiguousarray(a[(Ellipsis,) + crop])


def _lowest(dtype):
    dtype = np.dtype(dtype)
    return -np.inf if dtype.kind == "f" else np.iinfo(dtype).min


def _index_dtype(window):
    size = math.prod(window)
    return np.int8 if size <= 127 else np.int16 if size <= 32767 else np.int32


def _as_bits(a):
    """The same memory as an integer array: multiplying it by a 0/1 mask selects exactly."""
    return a.view(_BITS[a.dtype.itemsize]) if a.dtype.kind == "f" else a


def _disjoint(window, strides, dilation) -> bool:
    """No input element lies in two windows (each stride spans the whole dilated window)."""
    return all(s >= d * (k - 1) + 1 for k, s, d in zip(window, strides, dilation))


# ---- impls ---------------------------------------------------------------------------------------
def _max_pool_impl(x, *, window, strides, dilation, padding):
    """The pooled values and their windows' argmax."""
    values = _pooled_max(x, window, strides, dilation, padding)
    return [values, _window_argmax(x, values, window, strides, dilation, padding)]


def _pooled_max(x, window, strides, dilation, padding):
    xp = namespace_of(x)
    out_spatial = _out_spatial(x.shape[-len(window):], window, strides, dilation, padding)
    views = _views(_padded(x, padding, _lowest(x.dtype)), window, strides, dilation, out_spatial)
    first = next(views)
    out = None
    for v in views:
        out = xp.maximum(first, v) if out is None else xp.maximum(out, v, out=out)
    return first.copy() if out is None else out


def _window_argmax(x, ans, window, strides, dilation, padding):
    """The first offset whose element equals the window's maximum ``ans``: ``K-1 - max_k (K-1-k)[x_k ==
    ans]`` (K offsets). A window holding nan has no equal element and gives K-1, the last offset."""
    xp = namespace_of(x)
    padded = _padded(x, padding, _lowest(x.dtype))
    views = list(_views(padded, window, strides, dilation, ans.shape[-len(window):]))
    last = len(views) - 1
    dtype = _index_dtype(window)
    score = xp.zeros(ans.shape, dtype)
    for k, v in enumerate(views[:-1]):
        xp.maximum(score, xp.multiply(v == ans, dtype(last - k)), out=score)
    return xp.subtract(dtype(last), score)


def _select_scatter_impl(ct, index, *, in_spatial, window, strides, dilation, padding):
    """Each cotangent added at its window's argmax, in an input-shaped array of zeros."""
    xp = namespace_of(ct)
    n = len(window)
    padded_spatial = tuple(m + lo + hi for m, (lo, hi) in zip(in_spatial, padding))
    disjoint = _disjoint(window, strides, dilation)
    covered = disjoint and all(s == k and m == s * o for k, s, m, o in
                               zip(window, strides, padded_spatial, ct.shape[-n:]))
    out = (xp.empty if covered else xp.zeros)(ct.shape[:-n] + padded_spatial, ct.dtype)
    bits = _as_bits(ct)
    out_views = _views(_as_bits(out) if disjoint else out, window, strides, dilation, ct.shape[-n:])
    for k, view in enumerate(out_views):
        if disjoint:  # each element is written by one offset of one window at most
            xp.multiply(bits, index == k, out=view)
        else:
            view += xp.multiply(bits, index == k).view(ct.dtype)
    return _cropped(out, in_spatial, padding)


def _window_gather_impl(t, index, *, window, strides, dilation, padding):
    """Each window's element at its argmax: the sum over offsets of the masked views (one is nonzero)."""
    xp = namespace_of(t)
    out: Any = None
    views = _views(_as_bits(_padded(t, padding, 0)), window, strides, dilation, index.shape[-len(window):])
    for k, v in enumerate(views):
        term = xp.multiply(v, index == k)
        out = term if out is None else xp.add(out, term, out=out)
    return out.view(t.dtype)


def _axis_views(a, i, n, k, s, d, o):
    """Along spatial axis ``i`` of ``n``: for each of the ``k`` window offsets, the strided view holding
    that element of every window."""
    after = (slice(None),) * (n - 1 - i)
    return [a[(Ellipsis, slice(j * d, j * d + s * (o - 1) + 1, s)) + after] for j in range(k)]


def _window_sum_impl(x, *, window, strides, dilation, padding):
    """Each window's sum, one spatial axis at a time (the sum is separable: ``kh + kw`` strided adds,
    not ``kh * kw``)."""
    xp = namespace_of(x)
    n = len(window)
    out_spatial = _out_spatial(x.shape[-n:], window, strides, dilation, padding)
    a = _padded(x, padding, 0)
    for i, (k, s, d, o) in enumerate(zip(window, strides, dilation, out_spatial)):
        views = _axis_views(a, i, n, k, s, d, o)
        a = views[0] + views[1] if k > 1 else views[0]
        for v in views[2:]:
            a += v
    return xp.array(a, copy=True) if a is x or a.base is not None else a


def _window_sum_transpose_impl(ct, *, in_spatial, window, strides, dilation, padding):
    """The transpose of the window sum: each cotangent added to every element of its window (one
    spatial axis at a time, into a zero-padded buffer that is cropped at the end)."""
    xp = namespace_of(ct)
    n = len(window)
    a = ct
    for i in reversed(range(n)):
        k, s, d, (lo, hi) = window[i], strides[i], dilation[i], padding[i]
        if k == s == 1 and lo == hi == 0 and a.shape[i - n] == in_spatial[i]:
            continue  # an axis left as it is (adaptive pooling's matrix axes)
        shape = a.shape[:a.ndim - n + i] + (in_spatial[i] + lo + hi,) + a.shape[a.ndim - n + i + 1:]
        out = xp.zeros(shape, ct.dtype)
        disjoint = _disjoint((k,), (s,), (d,))
        for view in _axis_views(out, i, n, k, s, d, a.shape[i - n]):
            if disjoint:  # no element is in two windows
                view[...] = a
            else:
                view += a
        a = out
    return xp.array(a, copy=True) if a is ct else _cropped(a, in_spatial, padding)


# ---- abstract evals ------------------------------------------------------------------------------
def _pooled_aval(x, *, window, strides, dilation, padding):
    n = len(window)
    return ShapedArray(tuple(x.shape[:-n]) + _out_spatial(x.shape[-n:], window, strides, dilation, padding),
                       np.dtype(x.dtype))


def _max_pool_aval(x, *, window, **params):
    values = _pooled_aval(x, window=window, **params)
    return [values, ShapedArray(values.shape, np.dtype(_index_dtype(window)))]


def _input_shaped_aval(ct, *index, in_spatial, window, **params):
    """The scatter's and the transpose's: the cotangent's leading axes and the input's spatial ones."""
    return ShapedArray(tuple(ct.shape[:-len(window)]) + tuple(in_spatial), np.dtype(ct.dtype))


def _gather_aval(t, index, **params):
    return ShapedArray(tuple(index.shape), np.dtype(t.dtype))


# ---- batching: any leading axis will do ----------------------------------------------------------
def _leading_batch(prim):
    """The primitives pool the last ``len(window)`` axes and keep the leading ones: a batch axis shared
    by every operand among the leading axes stays where it is; otherwise it goes to the front."""
    def rule(vals, dims, **params):
        n = len(params["window"])
        d = dims[0]
        if d is not None and all(dv == d and d < ndim_of(v) - n for v, dv in zip(vals, dims)):
            return bind_batched(prim, vals, d, **params)
        return bind_batched(prim, all_at_front(vals, dims), 0, **params)
    return rule


# ---- the primitives ------------------------------------------------------------------------------
max_pool_p = primitive("max_pool", _max_pool_impl, _max_pool_aval, multiple_results=True)
select_scatter_p = primitive("select_scatter", _select_scatter_impl, _input_shaped_aval)
window_gather_p = primitive("window_gather", _window_gather_impl, _gather_aval)


def _spatial(x, params) -> tuple:
    return tuple(x.shape[-len(params["window"]):])


def _max_pool_vjp(cts, ans, x, **params):
    return bind(select_scatter_p, cts[0], ans[1], in_spatial=_spatial(x, params), **params)


def _max_pool_jvp(t, ans, x, **params):
    return [bind(window_gather_p, t, ans[1], **params), None]


defvjp(max_pool_p, _max_pool_vjp)
defjvp(max_pool_p, _max_pool_jvp)

# linear in the cotangent; the index is an integer operand with no derivative
defvjp(select_scatter_p,
       lambda ct, ans, c, index, *, in_spatial, **params: bind(window_gather_p, ct, index, **params), None)
defjvp(select_scatter_p, lambda t, ans, c, index, **params: bind(select_scatter_p, t, index, **params), None)

defvjp(window_gather_p, lambda ct, ans, t, index, **params: bind(
    select_scatter_p, ct, index, in_spatial=_spatial(t, params), **params), None)
defjvp(window_gather_p, lambda t, ans, u, index, **params: bind(window_gather_p, t, index, **params), None)

# the window sum of average pooling and its transpose: linear, each the other's vjp
window_sum_p = primitive("window_sum", _window_sum_impl, _pooled_aval)
window_sum_transpose_p = primitive("window_sum_transpose", _window_sum_transpose_impl, _input_shaped_aval)
defvjp(window_sum_p, lambda ct, ans, x, **params: bind(
    window_sum_transpose_p, ct, in_spatial=_spatial(x, params), **params))
defjvp(window_sum_p, lambda t, ans, x, **params: bind(window_sum_p, t, **params))
defvjp(window_sum_transpose_p, lambda ct, ans, c, *, in_spatial, **params: bind(window_sum_p, ct, **params))
defjvp(window_sum_transpose_p, lambda t, ans, c, **params: bind(window_sum_transpose_p, t, **params))

for _prim in (max_pool_p, select_scatter_p, window_gather_p, window_sum_p, window_sum_transpose_p):
    defbatch(_prim, _leading_batch(_prim))


# ---- arguments -----------------------------------------------------------------------------------
def _out_len(n: int, k: int, s: int, p: int, d: int, ceil_mode: bool) -> int:
    """PyTorch's ``pooling_output_shape``: in ceil mode the last window must start inside the input or
    the left padding."""
    out = (n + 2 * p - d * (k - 1) - 1 + (s - 1 if ceil_mode else 0)) // s + 1
    if ceil_mode and (out - 1) * s >= n + p:
        out -= 1
    return out


class _Geometry:
    """The checked arguments of one pooling call, and the windows they give on the input's spatial axes."""

    def __init__(self, fn, input, n, kernel_size, stride, padding, dilation, ceil_mode):
        shape = tuple(getattr(input, "shape", ()))
        if len(shape) not in (n + 1, n + 2):
            layout = "(N, C, L) or (C, L)" if n == 1 else "(N, C, H, W) or (C, H, W)"
            raise ValueError(f"{fn}: input must be {layout}, got shape {shape}")
        self.window = as_ints(kernel_size, n, "kernel_size", fn, 1)
        no_stride = stride is None or (isinstance(stride, (tuple, list)) and len(stride) == 0)
        self.strides = self.window if no_stride else as_ints(stride, n, "stride", fn, 1)
        pads = as_ints(padding, n, "padding", fn, 0)
        self.dilation = as_ints(dilation, n, "dilation", fn, 1)
        if any(p > k // 2 for p, k in zip(pads, self.window)):
            raise ValueError(f"{fn}: padding must be at most half of kernel_size (as PyTorch), got padding={padding!r} "
                             f"with kernel_size={kernel_size!r}; use a smaller padding or a larger kernel")
        if not isinstance(ceil_mode, (bool, np.bool_)):
            raise TypeError(f"{fn}: ceil_mode must be a bool, got {ceil_mode!r}")
        self.spatial = shape[-n:]
        self.out = tuple(_out_len(m, k, s, p, d, bool(ceil_mode)) for m, k, s, p, d in
                         zip(self.spatial, self.window, self.strides, pads, self.dilation))
        if any(o < 1 for o in self.out):
            raise ValueError(f"{fn}: input of spatial size {self.spatial} is too small for kernel_size="
                             f"{kernel_size!r}, dilation={dilation!r}, padding={padding!r}: the output size would "
                             f"be {self.out}; use a smaller kernel or add padding")
        # the high side padded so that the last window (ceil mode) fits; windows past it are never read
        self.padding = tuple((p, max(0, (o - 1) * s + d * (k - 1) + 1 - m - p)) for m, k, s, p, d, o in
                             zip(self.spatial, self.window, self.strides, pads, self.dilation, self.out))

    def params(self) -> dict:
        return dict(window=self.window, strides=self.strides, dilation=self.dilation, padding=self.padding)


def _operand(x):
    return x if hasattr(x, "shape") else tnp.asarray(x)


def _check_dtype(x, fn: str, floats_only: bool) -> None:
    kind = np.dtype(x.dtype).kind
    if kind in "bc" or (floats_only and kind != "f"):
        wanted = "floating-point" if floats_only else "real (float or integer)"
        raise TypeError(f"{fn}: input must be {wanted}, got dtype {x.dtype}; cast it with .astype(np.float32)")


# ---- max pooling ---------------------------------------------------------------------------------
def _max_pool(fn, n, input, kernel_size, stride, padding, dilation, ceil_mode):
    input = _operand(input)
    geometry = _Geometry(fn, input, n, kernel_size, stride, padding, dilation, ceil_mode)
    _check_dtype(input, fn, floats_only=False)
    values, _ = bind(max_pool_p, input, **geometry.params())
    return values


def max_pool1d(input: ArrayLike, kernel_size: Any, stride: Any = None, padding: Any = 0, dilation: int = 1,
               ceil_mode: bool = False) -> Array:
    """1-d max pooling over the last axis (``torch.nn.functional.max_pool1d``); see :func:`max_pool2d`.

    Args:
        input: ``(N, C, L)`` or ``(C, L)``, float or integer.
        kernel_size, stride, padding, dilation: ints (or 1-tuples); ``stride=None`` means ``kernel_size``.
        ceil_mode: round the output length up instead of down.

    Returns:
        ``(N, C, L_out)`` or ``(C, L_out)``, of the input's dtype, with ``L_out = floor((L + 2 * padding -
        dilation * (kernel_size - 1) - 1) / stride) + 1`` (``ceil`` in ceil mode).
    """
    return _max_pool("max_pool1d", 1, input, kernel_size, stride, padding, dilation, ceil_mode)


def max_pool2d(input: ArrayLike, kernel_size: Any, stride: Any = None, padding: Any = 0, dilation: int = 1,
               ceil_mode: bool = False) -> Array:
    """2-d max pooling over the last two axes (``torch.nn.functional.max_pool2d``, NCHW).

    ``out[..., i, j] = max over a, b of xpad[..., i * sh + a * dh, j * sw + b * dw]`` for ``a < kh``,
    ``b < kw``, where ``xpad`` is the input padded with ``-inf`` on each side.

    Args:
        input: ``(N, C, H, W)`` or ``(C, H, W)``, float or integer.
        kernel_size: the window ``(kh, kw)``, or one int for both.
        stride: ``(sh, sw)`` or one int; None (the default) means ``kernel_size``.
        padding: ``-inf`` added on both sides of each spatial axis; at most ``kernel_size // 2``.
        dilation: the spacing between window elements.
        ceil_mode: round the output size up instead of down, so that a last partial window is kept
            when it starts inside the input or the left padding (PyTorch's rule).

    Returns:
        ``(N, C, H_out, W_out)`` or ``(C, H_out, W_out)``, of the input's dtype, with ``H_out =
        floor((H + 2 * ph - dh * (kh - 1) - 1) / sh) + 1`` (``ceil`` in ceil mode), ``W_out`` alike.

    The gradient goes to the maximum of each window (summed where windows overlap); ties go to the
    first maximum in row-major window order, as PyTorch and JAX. A window holding nan pools to nan, as
    PyTorch; its gradient goes to the window's last element (PyTorch: to its last nan).

    Raises:
        ValueError: an input that is not 3-d or 4-d; a non-positive kernel_size, stride or dilation; a
            negative padding or one above ``kernel_size // 2``; an input too small for one window.
        TypeError: sizes that are not ints or tuples of ints; a boolean or complex input.
    """
    return _max_pool("max_pool2d", 2, input, kernel_size, stride, padding, dilation, ceil_mode)


# ---- average pooling -------------------------------------------------------------------------------
def _counts(m, k, s, p, o, count_include_pad) -> np.ndarray:
    """How many elements each window along one axis averages (PyTorch: windows clipped to the padded
    input, then to the input itself where padding is not counted)."""
    start = np.arange(o) * s - p
    end = np.minimum(start + k, m + p)
    if not count_include_pad:
        start, end = np.maximum(start, 0), np.minimum(end, m)
    return end - start


def _divide(sums, counts, x):
    """``sums`` divided by the outer product of the per-axis ``counts`` (a Python float when constant, so
    the dtype stays; else a constant array of ``x``'s dtype on its backend)."""
    divisor = counts[0]
    for c in counts[1:]:
        divisor = np.multiply.outer(divisor, c)
    if np.all(divisor == divisor.flat[0]):
        return sums if divisor.flat[0] == 1 else sums / float(divisor.flat[0])
    return sums / namespace_of(x).asarray(divisor.astype(x.dtype))


def _avg_pool(fn, n, input, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override):
    input = _operand(input)
    g = _Geometry(fn, input, n, kernel_size, stride, padding, 1, ceil_mode)
    _check_dtype(input, fn, floats_only=True)
    if divisor_override is not None:
        as_int(divisor_override, "divisor_override", fn, expected="None or an int")
        if divisor_override == 0:
            raise ValueError(f"{fn}: divisor_override must not be zero; pass None to divide by the window size")
    pads = tuple(lo for lo, _ in g.padding)
    sums = bind(window_sum_p, input, **g.params())
    if divisor_override is not None:
        return sums / float(divisor_override)
    counts = [_counts(m, k, s, p, o, count_include_pad)
              for m, k, s, p, o in zip(g.spatial, g.window, g.strides, pads, g.out)]
    return _divide(sums, counts, input)


def avg_pool1d(input: ArrayLike, kernel_size: Any, stride: Any = None, padding: Any = 0, ceil_mode: bool = False,
               count_include_pad: bool = True) -> Array:
    """1-d average pooling over the last axis (``torch.nn.functional.avg_pool1d``); see :func:`avg_pool2d`.

    Args:
        input: ``(N, C, L)`` or ``(C, L)``, floating-point.
        kernel_size, stride, padding: ints (or 1-tuples); ``stride=None`` means ``kernel_size``.
        ceil_mode: round the output length up instead of down.
        count_include_pad: count the zero padding in each window's divisor.

    Returns:
        ``(N, C, L_out)`` or ``(C, L_out)``, of the input's dtype.
    """
    return _avg_pool("avg_pool1d", 1, input, kernel_size, stride, padding, ceil_mode, count_include_pad, None)


def avg_pool2d(input: ArrayLike, kernel_size: Any, stride: Any = None, padding: Any = 0, ceil_mode: bool = False,
               count_include_pad: bool = True, divisor_override: Any = None) -> Array:
    """2-d average pooling over the last two axes (``torch.nn.functional.avg_pool2d``, NCHW).

    Each output is the sum of its window of the zero-padded input divided by: ``divisor_override`` when
    given; else the window's size clipped to the padded input (``count_include_pad=True``, the default:
    ``kh * kw`` except for a partial last window in ceil mode); else the number of input elements in the
    window (``count_include_pad=False``). PyTorch's definitions.

    Args:
        input: ``(N, C, H, W)`` or ``(C, H, W)``, floating-point.
        kernel_size: the window ``(kh, kw)``, or one int for both.
        stride: ``(sh, sw)`` or one int; None (the default) means ``kernel_size``.
        padding: zeros added on both sides of each spatial axis; at most ``kernel_size // 2``.
        ceil_mode: round the output size up instead of down (PyTorch's rule: a last window must start
            inside the input or the left padding).
        count_include_pad: count the padding in the divisor.
        divisor_override: a non-zero int to divide every window's sum by.

    Returns:
        ``(N, C, H_out, W_out)`` or ``(C, H_out, W_out)``, of the input's dtype (float32 stays float32),
        with ``H_out = floor((H + 2 * ph - kh) / sh) + 1`` (``ceil`` in ceil mode), ``W_out`` alike.

    Raises:
        ValueError: an input that is not 3-d or 4-d; a non-positive kernel_size or stride; a negative
            padding or one above ``kernel_size // 2``; an input too small for one window; a zero
            ``divisor_override``.
        TypeError: sizes that are not ints or tuples of ints; an input that is not floating-point; a
            ``divisor_override`` that is not an int.
    """
    return _avg_pool("avg_pool2d", 2, input, kernel_size, stride, padding, ceil_mode, count_include_pad,
                     divisor_override)


# ---- adaptive average pooling --------------------------------------------------------------------
def _adaptive_sizes(output_size, spatial, fn):
    n = len(spatial)
    items = tuple(output_size) if isinstance(output_size, (tuple, list)) else (output_size,) * n
    if len(items) != n or not all(v is None or (isinstance(v, (int, np.integer)) and not isinstance(v, bool))
                                  for v in items):
        raise TypeError(f"{fn}: output_size must be an int or a tuple of {n} ints or None, got {output_size!r}")
    sizes = tuple(m if v is None else int(v) for v, m in zip(items, spatial))
    if any(v < 1 for v in sizes):
        raise ValueError(f"{fn}: output_size must be positive, got {output_size!r}")
    return sizes


def _adaptive_matrix_sums(x, axis, m, o):
    """Sums over PyTorch's adaptive windows ``[floor(i * m / o), ceil((i + 1) * m / o))`` along one
    spatial axis (``-1`` or ``-2``) whose windows do not tile it: a product with a constant 0/1 matrix."""
    i = np.arange(o)
    start, end = (i * m) // o, -((-(i + 1) * m) // o)
    columns = np.arange(m)
    member = (columns >= start[:, None]) & (columns < end[:, None])  # (o, m)
    matrix = namespace_of(x).asarray(member.astype(x.dtype))
    sums = tnp.matmul(x, tnp.transpose(matrix)) if axis == -1 else tnp.matmul(matrix, x)
    return sums, end - start


def _adaptive_avg_pool(fn, n, input, output_size):
    """Axes whose size the output size divides are plain windows (``window = stride = m // o``, one
    window sum for all of them); the others take a matrix product each."""
    input = _operand(input)
    shape = tuple(input.shape)
    if len(shape) not in (n + 1, n + 2):
        layout = "(N, C, L) or (C, L)" if n == 1 else "(N, C, H, W) or (C, H, W)"
        raise ValueError(f"{fn}: input must be {layout}, got shape {shape}")
    _check_dtype(input, fn, floats_only=True)
    spatial = shape[-n:]
    sizes = _adaptive_sizes(output_size, spatial, fn)
    window = tuple(m // o if m % o == 0 else 1 for m, o in zip(spatial, sizes))
    x, counts = input, [np.full(o, k) for o, k in zip(sizes, window)]
    if any(k > 1 for k in window):
        x = bind(window_sum_p, x, window=window, strides=window, dilation=(1,) * n, padding=((0, 0),) * n)
    for i, (m, o) in enumerate(zip(spatial, sizes)):
        if m % o:
            x, counts[i] = _adaptive_matrix_sums(x, i - n, m, o)
    return _divide(x, counts, input)


def adaptive_avg_pool1d(input: ArrayLike, output_size: ShapeLike) -> Array:
    """1-d adaptive average pooling (``torch.nn.functional.adaptive_avg_pool1d``); see
    :func:`adaptive_avg_pool2d`.

    Args:
        input: ``(N, C, L)`` or ``(C, L)``, floating-point.
        output_size: the output length ``L_out`` (an int, or a 1-tuple; None keeps ``L``).

    Returns:
        ``(N, C, L_out)`` or ``(C, L_out)``, of the input's dtype.
    """
    return _adaptive_avg_pool("adaptive_avg_pool1d", 1, input, output_size)


def adaptive_avg_pool2d(input: ArrayLike, output_size: ShapeLike) -> Array:
    """2-d adaptive average pooling (``torch.nn.functional.adaptive_avg_pool2d``, NCHW).

    Output ``(i, j)`` averages rows ``[floor(i * H / H_out), ceil((i + 1) * H / H_out))`` and the columns
    defined alike (PyTorch's windows: they cover the input, overlapping by at most one element where
    the sizes do not divide).

    Args:
        input: ``(N, C, H, W)`` or ``(C, H, W)``, floating-point.
        output_size: ``(H_out, W_out)``, one int for both, or a tuple with None for a size kept as the
            input's.

    Returns:
        ``(N, C, H_out, W_out)`` or ``(C, H_out, W_out)``, of the input's dtype.

    Raises:
        ValueError: an input that is not 3-d or 4-d; a non-positive output size.
        TypeError: an output_size that is not an int or a tuple of ints and None; an input that is not
            floating-point.
    """
    return _adaptive_avg_pool("adaptive_avg_pool2d", 2, input, output_size)
