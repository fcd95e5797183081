"""The primitives behind ``tapegrad.random``: each draw is a pure function of a key (NumPy's Philox).

A key is a ``uint64`` array of shape ``(2,)``: the 128-bit key of NumPy's counter-based
``numpy.random.Philox``. Each primitive takes the key as its array operand (so ``jit`` traces it and
``vmap`` maps over it) and the shape, dtype and the like as static parameters. Its ``impl`` builds
``Generator(Philox(key=key))`` from the key's value, starting at counter 0, and draws; the same key
always gives the same numbers, so common-subexpression elimination and constant folding under
``jit`` are sound.

On the host the draw runs on NumPy's Generator. On a device (CuPy), ``uniform``, ``split`` and
``fold_in`` compute NumPy's Philox4x64-10 themselves in the key's array module (:func:`_philox_raw`,
64-bit products from 32-bit halves), bit for bit the words NumPy's ``Philox`` gives, so CPU and GPU
draw the same numbers and a dropout mask or a new key never leaves the device: no host
synchronisation. ``normal``, ``randint`` and ``permutation`` of a device key still read the key back
(16 bytes, a synchronisation) and draw on NumPy, whose result goes to the key's device.

Every ``impl`` also accepts keys with leading axes ``(*batch, 2)`` and draws once per key, stacking
the results: that is the batch rule (one Generator per example, as a Python loop over the examples
would build), and its other operands (``randint``'s bounds, ``fold_in``'s data) are broadcast over
those axes. Under ``vmap`` with an unbatched key and batched bounds, the key is broadcast: every
example draws from the same key, as JAX does.

``random_key`` is ``key(seed)`` of an integer array (traced under ``jit``, batched under ``vmap``):
NumPy's SeedSequence of each seed, on the host, so a device seed is read back.

Where counters go: draws use the stream from counter 0; ``split`` reads the block at counter word 3
equal to ``2**63``, and ``fold_in(data)`` the block at word 3 equal to ``2**62`` and word 0 equal to
``data``. No draw comes near those counters (word 3 moves after ``2**194`` values), so children are
independent of their parent's draws and of each other.
"""
from __future__ import annotations

import numpy as np

from tapegrad._backend import namespace_of, to_host
from tapegrad._core import Boxed, ShapedArray, bind
from tapegrad.extend import all_at_front, def_nondiff, defbatch, primitive, to_front

KEY_DTYPE = np.dtype(np.uint64)
_SPLIT_COUNTER = np.array([0, 0, 0, 1 << 63], np.uint64)
_FOLD_IN_WORD = 1 << 62


# ---- keys ----------------------------------------------------------------------------------------
def check_key(key, fn: str):
    """The key as an array operand (a Parameter reads as its value), or a TypeError naming ``key``."""
    if isinstance(key, Boxed):
        key = key.unbox()
    shape, dtype = getattr(key, "shape", None), getattr(key, "dtype", None)
    if shape is not None and tuple(shape) == (2,) and np.dtype(dtype) == KEY_DTYPE:
        return key
    if isinstance(key, (int, np.integer)) and not isinstance(key, bool):
        hint = f"make one with tapegrad.random.key({int(key)})"
    elif shape is not None and len(shape) > 1 and tuple(shape[-1:]) == (2,) and np.dtype(dtype) == KEY_DTYPE:
        hint = "a stack of keys draws one result per key under tg.vmap(...)"
    else:
        hint = "make one with tapegrad.random.key(seed), and new ones with split or fold_in"
    got = (f"an array of shape {tuple(shape)} and dtype {np.dtype(dtype)}" if shape is not None
           else f"a {type(key).__name__}")
    raise TypeError(f"{fn}: key must be a single random key (a uint64 array of shape (2,)), got {got}; {hint}")


# ---- the one loop over keys ----------------------------------------------------------------------
def generator(key) -> np.random.Generator:
    """NumPy's Generator on Philox with this key (a ``uint64[2]`` NumPy array), at counter 0."""
    return np.random.Generator(np.random.Philox(key=key))


def _per_key(key, draw, shape: tuple, dtype, *operands):
    """``draw(key, *operands)`` for each key along the leading axes of ``key`` (``(*batch, 2)``), each
    result of ``shape`` and ``dtype``, stacked into ``batch + shape`` on the key's backend. The
    ``operands`` broadcast against ``batch``; ``draw`` gets one key and one scalar of each."""
    xp = namespace_of(key)
    host = to_host(key)
    batch = host.shape[:-1]
    values = [np.broadcast_to(to_host(o), batch) for o in operands]
    if not batch:
        out = np.asarray(draw(host, *[v[()] for v in values]), dtype)
    else:  # one Generator per key: exactly what a Python loop over the examples computes
        out = np.empty(batch + tuple(shape), dtype)
        for i in np.ndindex(*batch):
            out[i] = draw(host[i], *[v[i] for v in values])
    return out if xp is np else xp.asarray(out)


def _key_aval(key, shape: tuple, dtype) -> ShapedArray:
    """One draw of ``shape`` and ``dtype`` per key along the key's leading axes."""
    return ShapedArray(tuple(key.shape[:-1]) + tuple(shape), np.dtype(dtype))


def _key_batch(prim):
    """The batch rule of every random primitive: operands with their batch axis at 0 (a shared key or
    bound broadcast), one draw per example along that axis; the result's batch axis is 0."""
    def rule(vals, dims, **params):
        if len(vals) == 1:
            return bind(prim, to_front(vals[0], dims[0]), **params), 0
        return bind(prim, *all_at_front(vals, dims), **params), 0
    return rule


def _random_primitive(name, impl, abstract_eval):
    """A draw: not differentiable in its operands (integer keys and bounds have no tangent), one
    batch rule for all."""
    prim = primitive(name, impl, abstract_eval)
    def_nondiff(prim)
    defbatch(prim, _key_batch(prim))
    return prim


# ---- Philox on the key's device -------------------------------------------------------------------
_M0, _M1 = 0xD2E7470EE14C6C93, 0xCA5A826395121157  # Philox4x64's multipliers and key increments
_W0, _W1 = 0x9E3779B97F4A7C15, 0xBB67AE8584CAA73B
_LOW32, _32 = np.uint64(0xFFFFFFFF), np.uint64(32)


def _mulhilo(a, b: int):
    """The high and low words of the 128-bit products of the uint64 array ``a`` and the constant ``b``,
    from 32-bit halves (no 128-bit type in an array module); uint64 arithmetic wraps."""
    b_lo, b_hi = np.uint64(b & 0xFFFFFFFF), np.uint64(b >> 32)
    a_lo, a_hi = a & _LOW32, a >> _32
    ll, lh, hl = a_lo * b_lo, a_lo * b_hi, a_hi * b_lo
    cross = (ll >> _32) + (lh & _LOW32) + (hl & _LOW32)
    return a_hi * b_hi + (lh >> _32) + (hl >> _32) + (cross >> _32), a * np.uint64(b)


def _philox_raw(key, counter, n: int):
    """``numpy.random.Philox(key=k, counter=counter).random_raw(n)`` for each key ``k`` along the
    leading axes of ``key`` (``(*batch, 2)``), computed in ``key``'s array module: ``(*batch, n)``
    uint64. ``counter``: four words, Python ints, or arrays of shape ``batch`` for word 0 (whose
    carry goes into word 1, as NumPy's does). NumPy increments the counter before each block of four
    words, so block ``j`` comes from ``counter + 1 + j``."""
    xp = namespace_of(key)
    blocks = -(-n // 4)
    shape = tuple(key.shape[:-1]) + (blocks,)
    start = np.uint64(counter[0]) if isinstance(counter[0], int) else xp.expand_dims(counter[0], -1)
    c0 = xp.arange(1, blocks + 1, dtype=np.uint64) + start
    c1 = (c0 < start).astype(np.uint64) + np.uint64(counter[1])
    c0, c1 = xp.broadcast_to(c0, shape), xp.broadcast_to(c1, shape)
    # NumPy scalars: a Python int past int64's range (2**63) does not convert to every module's fill
    c2, c3 = xp.full(shape, np.uint64(counter[2]), np.uint64), xp.full(shape, np.uint64(counter[3]), np.uint64)
    k0, k1 = xp.expand_dims(key[..., 0], -1), xp.expand_dims(key[..., 1], -1)
    for r in range(10):
        if r:
            k0, k1 = k0 + np.uint64(_W0), k1 + np.uint64(_W1)
        hi0, lo0 = _mulhilo(c0, _M0)
        hi1, lo1 = _mulhilo(c2, _M1)
        c0, c1, c2, c3 = hi1 ^ c1 ^ k0, lo1, hi0 ^ c3 ^ k1, lo0
    return xp.stack([c0, c1, c2, c3], axis=-1).reshape(tuple(key.shape[:-1]) + (4 * blocks,))[..., :n]


def _uniform_on_device(key, shape: tuple, dtype):
    """``_uniform`` per key, on the key's device: NumPy's ``Generator.random``, which makes a float64
    from the top 53 bits of a word and a float32 from the top 24 bits of a 32-bit half (the low half
    of each word first)."""
    xp = namespace_of(key)
    batch, size = tuple(key.shape[:-1]), int(np.prod(shape, dtype=np.int64))
    native = _native(dtype)
    if native == np.float64:
        u = (_philox_raw(key, (0, 0, 0, 0), size) >> np.uint64(11)).astype(np.float64) * (2.0 ** -53)
    else:
        words = _philox_raw(key, (0, 0, 0, 0), -(-size // 2))
        halves = xp.stack([words & _LOW32, words >> _32], axis=-1).reshape(batch + (-1,))[..., :size]
        u = (halves >> np.uint64(8)).astype(np.float32) * np.float32(2.0 ** -24)
    u = u.reshape(batch + tuple(shape))
    if dtype == np.float16:
        u = xp.floor(u * np.float32(2048.0)) / np.float32(2048.0)
    return u.astype(dtype, copy=False)


def _on_host(key) -> bool:
    return namespace_of(key) is np


# ---- float draws ---------------------------------------------------------------------------------
def _native(dtype) -> np.dtype:
    """The dtype NumPy's Generator draws in: itself for float32/float64, float32 for float16."""
    return np.dtype(np.float32) if dtype == np.float16 else dtype


def _normal(key, shape, dtype):
    return generator(key).standard_normal(shape, dtype=_native(dtype)).astype(dtype, copy=False)


def _uniform(key, shape, dtype):
    u = generator(key).random(shape, dtype=_native(dtype))
    if dtype == np.float16:  # round down onto float16's grid in [0, 1): a cast could round up to 1.0
        u = np.floor(u * 2048.0) / 2048.0
    return u.astype(dtype, copy=False)


normal_p = _random_primitive(
    "random_normal",
    lambda key, *, shape, dtype: _per_key(key, lambda k: _normal(k, shape, dtype), shape, dtype),
    lambda key, *, shape, dtype: _key_aval(key, shape, dtype))
uniform_p = _random_primitive(
    "random_uniform",
    lambda key, *, shape, dtype: (_per_key(key, lambda k: _uniform(k, shape, dtype), shape, dtype) if _on_host(key)
                                  else _uniform_on_device(key, shape, dtype)),
    lambda key, *, shape, dtype: _key_aval(key, shape, dtype))


# ---- integer draws -------------------------------------------------------------------------------
def _integers(key, low, high, shape, dtype):
    low, high = int(low), int(high)
    if high <= low:
        raise ValueError(f"randint: maxval ({high}) must be greater than minval ({low}); the draw is from "
                         "[minval, maxval)")
    return generator(key).integers(low, high, size=shape, dtype=dtype)


randint_p = _random_primitive(
    "random_randint",
    lambda key, minval, maxval, *, shape, dtype: _per_key(
        key, lambda k, lo, hi: _integers(k, lo, hi, shape, dtype), shape, dtype, minval, maxval),
    lambda key, minval, maxval, *, shape, dtype: _key_aval(key, shape, dtype))

permutation_p = _random_primitive(
    "random_permutation",
    lambda key, *, n: _per_key(key, lambda k: generator(k).permutation(n), (n,), np.int64),
    lambda key, *, n: _key_aval(key, (n,), np.int64))


# ---- new keys ------------------------------------------------------------------------------------
def seed_state(seed) -> np.ndarray:
    """The key of a non-negative integer seed: ``SeedSequence(seed).generate_state(2, uint64)``."""
    seed = int(seed)
    if seed < 0:
        raise ValueError(f"key: seed must be a non-negative int, got {seed}")
    return np.random.SeedSequence(seed).generate_state(2, KEY_DTYPE)


def _keys_of_seeds(seed):
    """:func:`seed_state` of each seed in the integer array ``seed``: ``seed.shape + (2,)``, on its
    backend (a device seed is read back: SeedSequence runs on the host)."""
    xp = namespace_of(seed)
    host = to_host(seed)
    out = np.empty(host.shape + (2,), KEY_DTYPE)
    for i in np.ndindex(*host.shape):
        out[i] = seed_state(host[i])
    return out if xp is np else xp.asarray(out)


key_p = _random_primitive("random_key", _keys_of_seeds,
                          lambda seed: ShapedArray(tuple(seed.shape) + (2,), KEY_DTYPE))


def _split(key, num):
    return np.random.Philox(key=key, counter=_SPLIT_COUNTER).random_raw(2 * num).reshape(num, 2)


def _fold_in(key, data):
    word = int(data) % 2 ** 64  # uint64's wrap-around: JAX casts data to its key word type too
    counter = np.array([word, 0, 0, _FOLD_IN_WORD], np.uint64)  # a tuple would go through float64
    return np.random.Philox(key=key, counter=counter).random_raw(2)


def _split_on_device(key, num: int):
    words = _philox_raw(key, [int(w) for w in _SPLIT_COUNTER], 2 * num)
    return words.reshape(tuple(key.shape[:-1]) + (num, 2))


def _fold_in_on_device(key, data):
    """``_fold_in`` per key, on the key's device; ``data`` (an int or an integer array broadcast against
    the keys' batch) wraps around into a uint64 word as there."""
    xp = namespace_of(key)
    batch = tuple(key.shape[:-1])
    if isinstance(data, (int, np.integer)):
        word = xp.full(batch, np.uint64(int(data) % 2 ** 64), np.uint64)
    else:  # a cast from a signed integer wraps modulo 2**64, as int(data) % 2**64
        data = data if namespace_of(data) is xp else xp.asarray(data)
        word = xp.broadcast_to(data.astype(np.int64).astype(np.uint64) if data.dtype.kind == "i"
                               else data.astype(np.uint64), batch)
    return _philox_raw(key, (word, 0, 0, _FOLD_IN_WORD), 2)


split_p = _random_primitive(
    "random_split",
    lambda key, *, num: (_per_key(key, lambda k: _split(k, num), (num, 2), KEY_DTYPE) if _on_host(key)
                         else _split_on_device(key, num)),
    lambda key, *, num: _key_aval(key, (num, 2), KEY_DTYPE))
fold_in_p = _random_primitive(
    "random_fold_in",
    lambda key, data: (_per_key(key, _fold_in, (2,), KEY_DTYPE, data) if _on_host(key)
                       else _fold_in_on_device(key, data)),
    lambda key, data: _key_aval(key, (2,), KEY_DTYPE))
