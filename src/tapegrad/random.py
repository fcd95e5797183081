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
from tapegrad._backend import default_namespace, is_array
from tapegrad._core import Boxed, bind
from tapegrad._random import check_key, fold_in_p, normal_p, permutation_p, randint_p, split_p, uniform_p
from tapegrad._typing import Array, ArrayLike, ShapeLike

__all__ = ["bernoulli", "fold_in", "key", "normal", "permutation", "randint", "split", "uniform"]

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
def key(seed: int) -> Array:
    """A new random key from an integer seed.

    The key is ``numpy.random.SeedSequence(seed).generate_state(2, numpy.uint64)``: the 128-bit key of
    NumPy's ``Philox``, so ``numpy.random.Generator(numpy.random.Philox(key=np.asarray(k)))`` draws
    what this module draws from ``k``. SeedSequence mixes the seed, so neighbouring seeds give
    unrelated keys, and seeds of any size are accepted.

    Args:
        seed: a non-negative Python or NumPy int (any size).

    Returns:
        A ``uint64`` array of shape ``(2,)`` on the default backend (``tg.set_backend``).

    Raises:
        TypeError: ``seed`` is not an int (a bool, a float, an array or a traced value: derive keys
            from traced values with :func:`fold_in`).
        ValueError: ``seed`` is negative.
    """
    if isinstance(seed, (bool, np.bool_)) or not isinstance(seed, (int, np.integer)):
        raise TypeError(f"key: seed must be a non-negative int, got {type(seed).__name__} {seed!r}; to mix a "
                        "traced or array value into a key use tapegrad.random.fold_in(key, data)")
    if seed < 0:
        raise ValueError(f"key: seed must be a non-negative int, got {seed}")
    state = np.random.SeedSequence(int(seed)).generate_state(2, np.uint64)
    return default_namespace().asarray(state)


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
    minval, maxval = _bound(minval, dtype), _bound(maxval, dtype)
    _check_broadcast("minval", minval, shape, "uniform")
    _check_broadcast("maxval", maxval, shape, "uniform")
    return minval + (maxval - minval) * u


def _is_number(x, value: float) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and x == value


def _bound(x, dtype):
    """A bound in ``dtype``: a Python number stays a (weak) scalar; an array is cast, differentiably."""
    if isinstance(x, Boxed):
        x = x.unbox()
    if isinstance(x, (int, float, np.integer, np.floating)) and not isinstance(x, (bool, np.bool_)):
        return float(x)
    if hasattr(x, "dtype"):
        if np.dtype(x.dtype) == dtype:
            return x
        return tnp.astype(x, dtype)
    raise TypeError(f"uniform: minval and maxval must be numbers or arrays, got {type(x).__name__} {x!r}")


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
