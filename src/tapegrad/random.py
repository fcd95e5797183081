"""``tapegrad.random``: random numbers through explicit keys (JAX's functional PRNG, on NumPy's Philox).

A key is an ordinary array: ``uint64`` of shape ``(2,)``, the 128-bit key of NumPy's counter-based
``numpy.random.Philox``. Every function here is a pure function of its key: the same key gives the
same numbers, on every call, under ``jit`` (the key is a traced input, the draw happens at run time)
and on NumPy or CuPy. New keys come from :func:`split` and :func:`fold_in`; never draw twice from one
key when you want different numbers.

>>> import tapegrad as tg
>>> key = tg.random.key(0)
>>> key, sub = tg.random.split(key)
>>> x = tg.random.normal(sub, (3,))

Under ``vmap`` a batched key (a leading axis of keys, such as ``split(key, n)``) gives each example
its own draw; an unbatched key gives every example the same draw (JAX's semantics).

Defaults follow NumPy: float draws are float64 unless ``dtype`` says otherwise (JAX defaults to
float32), integer draws and permutations are int64. See ``docs/random.md``.
"""
from __future__ import annotations

import operator
from typing import Any

import numpy as np

import tapegrad.numpy as tnp
from tapegrad._backend import default_namespace, is_array, namespace_of, scipy_module
from tapegrad._core import Boxed, ShapedArray, bind
from tapegrad._random import (
    _native,
    check_key,
    fold_in_p,
    key_p,
    normal_p,
    permutation_p,
    randint_p,
    seed_state,
    split_p,
    uniform_p,
)
from tapegrad._typing import Array, ArrayLike, ShapeLike
from tapegrad.extend import broadcast_shapes, defbatch_elementwise, defjvp, defvjp, primitive, shape_of
from tapegrad.numpy import _elementwise as ew

__all__ = ["PRNGKey", "bernoulli", "fold_in", "key", "normal", "permutation", "randint", "split", "truncated_normal",
           "uniform"]

_FLOAT_DTYPES = (np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64))


# ---- argument checks -----------------------------------------------------------------------------
def _check_shape(shape, fn: str) -> tuple:
    """``shape`` (an int or a sequence of ints) as a tuple of non-negative Python ints."""
    dims = (shape,) if isinstance(shape, (int, np.integer)) else shape
    try:
        if isinstance(dims, (str, bytes)) or any(isinstance(d, (bool, np.bool_)) for d in dims):
            raise TypeError
        out = tuple(operator.index(d) for d in dims)
    except TypeError:
        raise TypeError(f"{fn}: shape must be an int or a tuple of ints, got {shape!r}") from None
    if any(d < 0 for d in out):
        raise ValueError(f"{fn}: shape must not have negative sizes, got {out}")
    return out


def _float_dtype(dtype, fn: str) -> np.dtype:
    dtype = np.dtype(dtype)
    if dtype not in _FLOAT_DTYPES:
        raise ValueError(f"{fn}: dtype must be a real float dtype (float16, float32 or float64), got {dtype}")
    return dtype


def _int_dtype(dtype, fn: str) -> np.dtype:
    dtype = np.dtype(dtype)
    if dtype.kind not in "iu":
        raise ValueError(f"{fn}: dtype must be an integer dtype (int8 ... int64, uint8 ... uint64), got {dtype}")
    return dtype


def _check_broadcast(name: str, value, shape: tuple, fn: str) -> None:
    """``value`` (a scalar or an array) broadcasts to ``shape`` without growing it (JAX's rule)."""
    vshape = tuple(np.shape(value)) if not hasattr(value, "shape") else tuple(value.shape)
    try:
        ok = np.broadcast_shapes(vshape, shape) == shape
    except ValueError:
        ok = False
    if not ok:
        raise ValueError(f"{fn}: {name} of shape {vshape} does not broadcast to shape {shape}; "
                         f"give a scalar or an array that broadcasts to {shape}")


# ---- keys ----------------------------------------------------------------------------------------
def key(seed: int | ArrayLike) -> Array:
    """A new random key from an integer seed (JAX's ``random.key``; :func:`PRNGKey` is the same function).

    The key is ``numpy.random.SeedSequence(seed).generate_state(2, numpy.uint64)``: the 128-bit key of
    NumPy's ``Philox``, so ``numpy.random.Generator(numpy.random.Philox(key=np.asarray(k)))`` draws
    what this module draws from ``k``. SeedSequence mixes the seed, so neighbouring seeds give
    unrelated keys, and seeds of any size are accepted.

    The seed may be a 0-d integer array, traced too: ``key(i)`` inside ``jit`` (an argument, or a
    ``fori_loop`` index) stages the primitive ``random_key`` and gives, bit for bit, the key of
    ``key(int(i))``; under ``vmap`` a batch of seeds gives a batch of keys. The mixing runs on the
    host (NumPy's SeedSequence): a device seed is read back (8 bytes, a synchronisation), and jit's
    compiled executor does not lower it (the program runs on the Python executor). A negative array
    seed raises when the key is computed.

    Args:
        seed: a non-negative Python or NumPy int (any size), or a 0-d integer array (int or uint, up
            to 64 bits), which may be traced.

    Returns:
        A ``uint64`` array of shape ``(2,)``, on the default backend (``tg.set_backend``) for an int
        seed and on the seed's backend for an array.

    Raises:
        TypeError: ``seed`` is not an integer (a bool, a float, a float array), or an integer array
            that is not 0-d (``vmap`` over seeds for a batch of keys).
        ValueError: ``seed`` is negative.
    """
    if isinstance(seed, Boxed):
        seed = seed.unbox()
    if isinstance(seed, (int, np.integer)) and not isinstance(seed, (bool, np.bool_)):
        return default_namespace().asarray(seed_state(seed))
    dtype = getattr(seed, "dtype", None)
    if dtype is None or np.dtype(dtype).kind not in "iu":
        raise TypeError(f"key: seed must be a non-negative int or a 0-d integer array, got {type(seed).__name__} "
                        f"{seed!r}; to mix a float into a key, derive an int from it")
    if tuple(seed.shape) != ():
        raise TypeError(f"key: seed must be one integer (0-d), got an array of shape {tuple(seed.shape)}; for a "
                        "batch of keys use tg.vmap(tapegrad.random.key)(seeds), or split one key")
    return bind(key_p, seed)


PRNGKey = key  # JAX's older spelling, the one most JAX programs use: the same uint64[2] key here


def split(key: ArrayLike, num: int = 2) -> Array:
    """``num`` new keys derived from ``key`` (JAX's ``random.split``).

    The children are read from ``key``'s Philox stream at a counter that no draw reaches, so they are
    deterministic, independent of each other, and independent of every draw made from ``key``. The
    usual pattern replaces the parent: ``key, sub = split(key)``.

    Args:
        key: a key (``uint64[2]``).
        num: how many keys (a non-negative int).

    Returns:
        A ``uint64`` array of shape ``(num, 2)`` on ``key``'s backend; unpack it or index it for the
        keys.

    Raises:
        TypeError: ``key`` is not a key; ``num`` is not an int.
        ValueError: ``num`` is negative.
    """
    key = check_key(key, "split")
    if isinstance(num, bool) or not isinstance(num, (int, np.integer)):
        raise TypeError(f"split: num must be an int, got {type(num).__name__} {num!r}")
    if num < 0:
        raise ValueError(f"split: num must be non-negative, got {num}")
    return bind(split_p, key, num=int(num))


def fold_in(key: ArrayLike, data: ArrayLike) -> Array:
    """A new key from ``key`` and an integer ``data`` (JAX's ``random.fold_in``): different data give
    independent keys, for instance one per training step or per layer.

    Args:
        key: a key (``uint64[2]``).
        data: an int in ``[0, 2**64)``, or an integer array with one element per key (a 0-d array; it
            may be traced, like a step counter passed to a jitted function). Arrays are converted to
            ``uint64`` (wrapping negative values, as JAX's cast to ``uint32`` does).

    Returns:
        A ``uint64`` key of shape ``(2,)``, on ``key``'s backend.

    Raises:
        TypeError: ``key`` is not a key; ``data`` is not an integer.
        ValueError: a Python int ``data`` outside ``[0, 2**64)``; an array ``data`` that is not 0-d.
    """
    key = check_key(key, "fold_in")
    if isinstance(data, Boxed):
        data = data.unbox()
    if isinstance(data, (bool, np.bool_)):
        raise TypeError("fold_in: data must be an integer, got a bool")
    if isinstance(data, (int, np.integer)):
        if not 0 <= int(data) < 2 ** 64:
            raise ValueError(f"fold_in: data must be in [0, 2**64), got {data}")
        data = int(data)
    elif hasattr(data, "dtype") and np.dtype(data.dtype).kind in "iu":
        if tuple(data.shape) != ():
            raise ValueError(f"fold_in: data must be one integer (0-d), got shape {tuple(data.shape)}; "
                             "fold in several values one after the other, or vmap over them")
    else:
        raise TypeError(f"fold_in: data must be an int or an integer array, got {type(data).__name__} {data!r}")
    return bind(fold_in_p, key, data)


# ---- draws ---------------------------------------------------------------------------------------
def normal(key: ArrayLike, shape: ShapeLike = (), dtype: Any = np.float64) -> Array:
    """Standard normal samples (mean 0, variance 1), as JAX's ``random.normal``.

    Drawn with ``Generator(Philox(key)).standard_normal`` (NumPy's ziggurat); float16 is drawn in
    float32 and rounded. Not differentiable in ``key`` (nothing to differentiate); scale and shift
    the result for other means and deviations (``mu + sigma * normal(key, shape)`` is differentiable
    in ``mu`` and ``sigma``).

    Args:
        key: a key (``uint64[2]``).
        shape: the result's shape, an int or a tuple of ints.
        dtype: float16, float32 or float64 (default float64, NumPy's default; JAX's is float32).

    Returns:
        An array of ``shape`` and ``dtype`` on ``key``'s backend.

    Raises:
        TypeError: ``key`` is not a key; ``shape`` is not an int or a tuple of ints.
        ValueError: ``dtype`` is not a real float dtype; a negative size in ``shape``.
    """
    key = check_key(key, "normal")
    return bind(normal_p, key, shape=_check_shape(shape, "normal"), dtype=_float_dtype(dtype, "normal"))


def uniform(key: ArrayLike, shape: ShapeLike = (), dtype: Any = np.float64, minval: ArrayLike = 0.0,
            maxval: ArrayLike = 1.0) -> Array:
    """Uniform samples in ``[minval, maxval)``, as JAX's ``random.uniform``.

    Computed as ``minval + (maxval - minval) * u`` with ``u`` uniform in ``[0, 1)``
    (``Generator(Philox(key)).random``; float16 keeps float16's grid of ``k / 2048``), so it is
    differentiable in ``minval`` and ``maxval`` (derivatives ``1 - u`` and ``u``). As in JAX,
    rounding of that product can land on ``maxval`` when ``maxval - minval`` is large against the
    dtype's precision.

    Args:
        key: a key (``uint64[2]``).
        shape: the result's shape, an int or a tuple of ints.
        dtype: float16, float32 or float64 (default float64; JAX's is float32).
        minval, maxval: the bounds: Python floats, or float arrays that broadcast to ``shape``
            (cast to ``dtype``, so the result is always ``dtype``); they may be traced.

    Returns:
        An array of ``shape`` and ``dtype`` on ``key``'s backend.

    Raises:
        TypeError: ``key`` is not a key; ``shape`` is not an int or a tuple of ints.
        ValueError: ``dtype`` is not a real float dtype; a bound that does not broadcast to ``shape``.
    """
    key = check_key(key, "uniform")
    shape, dtype = _check_shape(shape, "uniform"), _float_dtype(dtype, "uniform")
    u = bind(uniform_p, key, shape=shape, dtype=dtype)
    if _is_number(minval, 0.0) and _is_number(maxval, 1.0):
        return u
    what = "uniform: minval and maxval"
    minval, maxval = _bound(minval, dtype, what), _bound(maxval, dtype, what)
    _check_broadcast("minval", minval, shape, "uniform")
    _check_broadcast("maxval", maxval, shape, "uniform")
    return minval + (maxval - minval) * u


def _is_number(x, value: float) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and x == value


def _bound(x, dtype, what: str):
    """A bound in ``dtype``: a Python number stays a (weak) scalar; an array is cast, differentiably.
    ``what`` names the function and the argument in the TypeError."""
    if isinstance(x, Boxed):
        x = x.unbox()
    if isinstance(x, (int, float, np.integer, np.floating)) and not isinstance(x, (bool, np.bool_)):
        return float(x)
    if hasattr(x, "dtype"):
        if np.dtype(x.dtype) == dtype:
            return x
        return tnp.astype(x, dtype)
    raise TypeError(f"{what} must be numbers or arrays, got {type(x).__name__} {x!r}")


# ---- the truncated normal: the inverse CDF of a uniform draw --------------------------------------
def _mirrored(lower, upper):
    """Where to draw on the mirror image ``[-upper, -lower]`` and negate: an interval centred above 0
    reaches further into the upper tail, where ``ndtr(x) = 1 - tiny`` keeps no digit of ``tiny``;
    mirrored it lies in the lower tail, where ``ndtr`` keeps its relative precision (to about -37)."""
    return lower > -upper  # lower + upper > 0, with no inf - inf


def _truncated_normal(v, lower, upper, *, dtype):
    """``ndtri(ndtr(lower) + (ndtr(upper) - ndtr(lower)) * v)`` (mirrored where :func:`_mirrored`), in
    ``v``'s dtype, cast to ``dtype`` and kept inside the open interval (as JAX does: rounding, or
    ``v = 0``, would give a bound)."""
    xp = namespace_of(v, lower, upper)
    try:
        special = scipy_module(xp, "special")
    except ImportError:
        raise ImportError("tapegrad.random.truncated_normal needs ndtr and ndtri from scipy.special (from "
                          "cupyx.scipy.special for CuPy arrays), which is not installed: pip install scipy") from None
    lower, upper = xp.asarray(lower, dtype=dtype), xp.asarray(upper, dtype=dtype)
    lo, hi = lower.astype(v.dtype), upper.astype(v.dtype)
    flip = _mirrored(lo, hi)
    lo, hi = xp.where(flip, -hi, lo), xp.where(flip, -lo, hi)
    a = special.ndtr(lo)
    x = special.ndtri(a + (special.ndtr(hi) - a) * v)
    x = xp.where(flip, -x, x).astype(dtype)
    return xp.clip(x, xp.nextafter(lower, xp.asarray(np.inf, dtype)), xp.nextafter(upper, xp.asarray(-np.inf, dtype)))


def _mass_above(v, lower, upper):
    """``(ndtr(upper) - ndtr(x)) / (ndtr(upper) - ndtr(lower))`` for the draw ``x`` of ``v``: ``1 - v``,
    or ``v`` where the interval was mirrored."""
    return tnp.where(_mirrored(lower, upper), v, 1.0 - v)


# Implicit differentiation of ndtr(x) = ndtr(lower) + (ndtr(upper) - ndtr(lower)) * v with v held: dx/dlower
# = mass_above * pdf(lower) / pdf(x). The ratio of densities is one exp, finite where each density alone
# underflows (the chain through ndtri' and ndtr' would give inf * 0 there). The uniform draw v has no tangent.
def _d_lower(g, ans, v, lower, upper, **params):
    return g * _mass_above(v, lower, upper) * tnp.exp(0.5 * (ans * ans - lower * lower))


def _d_upper(g, ans, v, lower, upper, **params):
    return g * (1.0 - _mass_above(v, lower, upper)) * tnp.exp(0.5 * (ans * ans - upper * upper))


truncated_normal_p = primitive(
    "random_truncated_normal", _truncated_normal,
    lambda v, lower, upper, *, dtype: ShapedArray(broadcast_shapes(shape_of(v), shape_of(lower), shape_of(upper)),
                                                  np.dtype(dtype)))
defvjp(truncated_normal_p, None, ew.summed_to_operand(_d_lower, 1), ew.summed_to_operand(_d_upper, 2))
defjvp(truncated_normal_p, None, _d_lower, _d_upper)
defbatch_elementwise(truncated_normal_p)


def truncated_normal(key: ArrayLike, lower: ArrayLike, upper: ArrayLike, shape: ShapeLike | None = None,
                     dtype: Any = np.float64) -> Array:
    """Standard normal samples truncated to the open interval ``(lower, upper)``, as JAX's
    ``random.truncated_normal`` (the density is proportional to ``exp(-x**2 / 2)`` there).

    Drawn by the inverse CDF, as JAX does: ``x = ndtri(ndtr(lower) + (ndtr(upper) - ndtr(lower)) * u)``
    with ``u = uniform(key, shape)``; where ``lower + upper > 0`` the mirror image ``[-upper, -lower]`` is
    drawn and negated, so an interval far in either tail keeps its precision: the law holds to about
    37 standard deviations in float64 and 13 in float32, where JAX's ``erf`` form puts its samples on
    the upper bound from about 8 in float64 and 5 in float32 (beyond those limits samples sit on a
    bound here too). Values that rounding would put on a bound are moved one ulp inside (JAX's clip):
    every sample is strictly inside. float16 is computed in float32 and rounded.

    Differentiable in ``lower`` and ``upper`` to any order, holding ``u``: ``dx/dlower = s * pdf(lower) /
    pdf(x)`` and ``dx/dupper = (1 - s) * pdf(upper) / pdf(x)``, with ``s`` the fraction of the
    truncated mass above ``x`` (what JAX's construction gives; the ratio of densities is computed as
    one ``exp``, finite far into the tails).

    Args:
        key: a key (``uint64[2]``).
        lower, upper: the bounds (``lower < upper``; ``-inf`` and ``inf`` allowed): Python floats or
            float arrays that broadcast with each other and to ``shape``, cast to ``dtype``; they may
            be traced. Array bounds are not checked: where ``lower >= upper`` the values are meaningless.
        shape: the result's shape (an int or a tuple of ints); None (the default): the broadcast shape
            of ``lower`` and ``upper``.
        dtype: float16, float32 or float64 (default float64; JAX's is float32).

    Returns:
        An array of ``shape`` and ``dtype`` on ``key``'s backend.

    Raises:
        TypeError: ``key`` is not a key; a bound is not a number or an array; ``shape`` is not an int
            or a tuple of ints.
        ValueError: ``dtype`` is not a real float dtype; Python-number bounds with ``lower >= upper``;
            bounds that do not broadcast to ``shape`` (or with each other).
        ImportError: SciPy is not installed (``ndtr`` and ``ndtri`` come from ``scipy.special``, or
            ``cupyx.scipy.special`` for a CuPy key).
    """
    key = check_key(key, "truncated_normal")
    dtype = _float_dtype(dtype, "truncated_normal")
    lower = _bound(lower, dtype, "truncated_normal: lower and upper")
    upper = _bound(upper, dtype, "truncated_normal: lower and upper")
    if isinstance(lower, float) and isinstance(upper, float) and not lower < upper:
        raise ValueError(f"truncated_normal: lower ({lower}) must be less than upper ({upper})")
    if shape is None:
        try:
            shape = np.broadcast_shapes(shape_of(lower), shape_of(upper))
        except ValueError:
            raise ValueError(f"truncated_normal: lower of shape {shape_of(lower)} and upper of shape "
                             f"{shape_of(upper)} do not broadcast together") from None
    else:
        shape = _check_shape(shape, "truncated_normal")
        _check_broadcast("lower", lower, shape, "truncated_normal")
        _check_broadcast("upper", upper, shape, "truncated_normal")
    u = bind(uniform_p, key, shape=shape, dtype=_native(dtype))
    return bind(truncated_normal_p, u, lower, upper, dtype=dtype)


def bernoulli(key: ArrayLike, p: float = 0.5, shape: ShapeLike | None = None) -> Array:
    """Booleans that are True with probability ``p``, as JAX's ``random.bernoulli``.

    Computed as ``uniform(key, shape, dtype) < p``, ``dtype`` being ``p``'s float dtype (float64 for a
    Python float). The result is boolean, so it has no derivative in ``p``.

    Args:
        key: a key (``uint64[2]``).
        p: the probability of True: a Python float in ``[0, 1]`` or a float array (traced allowed,
            not checked) that broadcasts to ``shape``.
        shape: the result's shape (an int or a tuple of ints); None: ``p``'s shape.

    Returns:
        A boolean array of ``shape`` on ``key``'s backend.

    Raises:
        TypeError: ``key`` is not a key; ``p`` is not a number or a float array.
        ValueError: a Python ``p`` outside ``[0, 1]``; ``p`` does not broadcast to ``shape``.
    """
    key = check_key(key, "bernoulli")
    if isinstance(p, Boxed):
        p = p.unbox()
    if isinstance(p, (int, float, np.integer, np.floating)) and not isinstance(p, (bool, np.bool_)):
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"bernoulli: p must be a probability in [0, 1], got {p}")
        p, dtype = float(p), np.dtype(np.float64)
    elif hasattr(p, "dtype") and np.dtype(p.dtype) in _FLOAT_DTYPES:
        dtype = np.dtype(p.dtype)
    else:
        raise TypeError(f"bernoulli: p must be a float or a float array, got {type(p).__name__} {p!r}")
    if shape is None:
        shape = tuple(p.shape) if hasattr(p, "shape") else ()
    else:
        shape = _check_shape(shape, "bernoulli")
    _check_broadcast("p", p, shape, "bernoulli")
    return bind(uniform_p, key, shape=shape, dtype=dtype) < p


def randint(key: ArrayLike, shape: ShapeLike, minval: ArrayLike, maxval: ArrayLike, dtype: Any = np.int64) -> Array:
    """Integers drawn uniformly from ``[minval, maxval)``, as JAX's ``random.randint``.

    Drawn with ``Generator(Philox(key)).integers(minval, maxval, shape, dtype)`` (unbiased).

    Args:
        key: a key (``uint64[2]``).
        shape: the result's shape, an int or a tuple of ints.
        minval, maxval: the bounds, ints or 0-d integer arrays (which may be traced; JAX also takes
            arrays that broadcast to ``shape``, tapegrad does not yet); ``maxval`` is excluded and
            must be greater than ``minval``, and both must fit ``dtype``.
        dtype: an integer dtype (default int64, NumPy's; JAX's is int32).

    Returns:
        An array of ``shape`` and ``dtype`` on ``key``'s backend.

    Raises:
        TypeError: ``key`` is not a key; ``shape`` is not an int or tuple; a bound that is not an
            integer.
        ValueError: ``dtype`` not an integer dtype; ``maxval <= minval`` (for traced bounds, when the
            draw runs); a bound outside ``dtype``'s range; a bound that is not 0-d.
    """
    key = check_key(key, "randint")
    shape, dtype = _check_shape(shape, "randint"), _int_dtype(dtype, "randint")
    minval, maxval = _int_bound("minval", minval, dtype), _int_bound("maxval", maxval, dtype)
    if isinstance(minval, int) and isinstance(maxval, int) and maxval <= minval:
        raise ValueError(f"randint: maxval ({maxval}) must be greater than minval ({minval}); the draw is "
                         "from [minval, maxval)")
    return bind(randint_p, key, minval, maxval, shape=shape, dtype=dtype)


def _int_bound(name: str, x, dtype):
    if isinstance(x, Boxed):
        x = x.unbox()
    if isinstance(x, (int, np.integer)) and not isinstance(x, (bool, np.bool_)):
        info = np.iinfo(dtype)
        # maxval is exclusive, so it may be one past the largest value of dtype
        if not info.min <= int(x) <= info.max + (name == "maxval"):
            raise ValueError(f"randint: {name}={int(x)} is outside the range of {dtype} "
                             f"([{info.min}, {info.max}]); pick a wider dtype")
        return int(x)
    if hasattr(x, "dtype") and np.dtype(x.dtype).kind in "iu":
        if tuple(x.shape) != ():
            raise ValueError(f"randint: {name} must be 0-d, got shape {tuple(x.shape)}")
        return x
    raise TypeError(f"randint: {name} must be an int or a 0-d integer array, got {type(x).__name__} {x!r}")


def permutation(key: ArrayLike, x: ArrayLike, axis: int = 0) -> Array:
    """A random permutation, as JAX's ``random.permutation``.

    Args:
        key: a key (``uint64[2]``).
        x: an int ``n``: a permutation of ``arange(n)``; or an array (at least 1-d): ``x`` with its
            entries along ``axis`` permuted (whole slices move together). For an array the result is
            ``take(x, permutation(key, n), axis)``, a gather, so it is differentiable in ``x``.
        axis: the axis of ``x`` to permute (negative counts from the end).

    Returns:
        For an int, an int64 array of shape ``(n,)`` on ``key``'s backend (JAX gives int32). For an
        array: ``x``'s shape and dtype.

    Raises:
        TypeError: ``key`` is not a key; ``x`` is neither an int nor an array.
        ValueError: a negative ``n``; a 0-d array ``x``.
        numpy.exceptions.AxisError: ``axis`` out of range.
    """
    key = check_key(key, "permutation")
    if isinstance(x, (int, np.integer)) and not isinstance(x, (bool, np.bool_)):
        if x < 0:
            raise ValueError(f"permutation: x must be a non-negative int or an array, got {x}")
        return bind(permutation_p, key, n=int(x))
    if isinstance(x, Boxed):
        x = x.unbox()
    if isinstance(x, (list, tuple)):
        x = tnp.asarray(x)
    if not is_array(x):
        raise TypeError(f"permutation: x must be an int or an array, got {type(x).__name__}")
    if x.ndim == 0:
        raise ValueError("permutation: x must be an int or an array of at least one dimension, got a 0-d "
                         "array; pass int(x) to permute arange(x)")
    axis = np.lib.array_utils.normalize_axis_index(operator.index(axis), x.ndim)
    return tnp.take(x, bind(permutation_p, key, n=int(x.shape[axis])), axis=axis)
