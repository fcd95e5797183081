"""tapegrad.random: keys (value, split, fold_in), every draw against NumPy's Philox Generator with the
same key, statistics at n = 1e5, dtypes, derivatives (uniform's bounds, permutation's gather), jit
(the key is a traced input: same key same numbers, a new key new numbers), vmap (a batched key
against a loop, a shared key drawing once) and the errors."""
from __future__ import annotations

import re

import numpy as np
import pytest

import tapegrad as tg
from _gpu import cupy_or_skip
from _tol import assert_close
from _vmapcheck import check_vmap
from tapegrad import random as R
from tapegrad.testing import check_grads

N = 100_000
FLOATS = [np.float64, np.float32, np.float16]


def philox(k):
    """NumPy's own generator for key ``k``: the reference every draw must equal."""
    return np.random.Generator(np.random.Philox(key=np.asarray(k)))


def random_key(rng):
    return (R.key(int(rng.integers(2 ** 62))),)


# ---- keys ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("seed", [0, 1, 2 ** 63 + 5, 2 ** 200, np.int32(7), np.uint64(2 ** 64 - 1)])
def test_key_is_seedsequence_state(seed):
    k = R.key(seed)
    assert type(k) is np.ndarray and k.shape == (2,) and k.dtype == np.uint64
    np.testing.assert_array_equal(k, np.random.SeedSequence(int(seed)).generate_state(2, np.uint64))


def test_neighbouring_seeds_give_unrelated_keys():
    keys = np.stack([R.key(s) for s in range(100)])
    assert len({tuple(k) for k in keys.tolist()}) == 100
    bits = np.unpackbits(keys[:-1].view(np.uint8) ^ keys[1:].view(np.uint8), axis=1).sum(axis=1)
    assert 40 < bits.mean() < 88  # about half of the 128 bits differ


def test_split_is_deterministic_and_children_differ():
    k = R.key(3)
    children = R.split(k, 5)
    assert children.shape == (5, 2) and children.dtype == np.uint64
    np.testing.assert_array_equal(children, R.split(k, 5))
    np.testing.assert_array_equal(children[:2], R.split(k))  # the first children do not depend on num
    assert len({tuple(c) for c in children.tolist()} | {tuple(k.tolist())}) == 6
    assert R.split(k, 0).shape == (0, 2)
    draws = [R.normal(c, (4,)) for c in children] + [R.normal(k, (4,))]
    assert len({d.tobytes() for d in draws}) == 6


def test_split_children_are_independent_of_the_parents_draws():
    # the children come from a counter block that no draw reaches: the parent's first values differ
    k = R.key(11)
    raw = np.random.Philox(key=np.asarray(k)).random_raw(64)
    assert not set(R.split(k, 8).ravel().tolist()) & set(raw.tolist())
    np.testing.assert_array_equal(R.split(k, 2), np.random.Philox(key=k, counter=(0, 0, 0, 2 ** 63))
                                  .random_raw(4).reshape(2, 2))


def test_fold_in():
    k = R.key(0)
    folded = [R.fold_in(k, d) for d in range(50)]
    assert len({f.tobytes() for f in folded} | {k.tobytes()} | {c.tobytes() for c in R.split(k, 4)}) == 55
    np.testing.assert_array_equal(R.fold_in(k, 7), R.fold_in(k, np.int64(7)))
    np.testing.assert_array_equal(R.fold_in(k, 7), R.fold_in(k, np.asarray(7, np.int32)))
    np.testing.assert_array_equal(R.fold_in(k, 2 ** 64 - 1), R.fold_in(k, np.asarray(-1)))  # uint64 wraps
    step = tg.jit(lambda key, i: R.fold_in(key, i))
    for i in (0, 3, 3, 9):
        np.testing.assert_array_equal(step(k, np.asarray(i)), folded[i])


# ---- each draw equals NumPy's Philox Generator with the same key ---------------------------------
def test_draws_equal_numpys_generator():
    k = R.key(5)
    np.testing.assert_array_equal(R.normal(k, (3, 4)), philox(k).standard_normal((3, 4)))
    np.testing.assert_array_equal(R.normal(k, 7, np.float32), philox(k).standard_normal(7, dtype=np.float32))
    np.testing.assert_array_equal(R.uniform(k, (2, 3)), philox(k).random((2, 3)))
    np.testing.assert_array_equal(R.randint(k, (9,), -3, 40, np.int16), philox(k).integers(-3, 40, 9, np.int16))
    np.testing.assert_array_equal(R.permutation(k, 12), philox(k).permutation(12))
    np.testing.assert_array_equal(R.bernoulli(k, 0.3, (5,)), philox(k).random(5) < 0.3)


@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("shape", [(), 3, (2, 3), (0, 4)], ids=str)
def test_float_draws_have_shape_and_dtype(shape, dtype):
    k = R.key(1)
    want = (shape,) if isinstance(shape, int) else shape
    for x in (R.normal(k, shape, dtype), R.uniform(k, shape, dtype), R.uniform(k, shape, dtype, -2.0, 3.0)):
        # a 0-d result of arithmetic on arrays at rest is a NumPy scalar, as everywhere in tapegrad.numpy
        assert isinstance(x, (np.ndarray, np.generic)) and x.shape == want and x.dtype == dtype


def test_reproducible_and_rekeyed():
    a, b = R.split(R.key(0))
    for fn in (lambda k: R.normal(k, (10,)), lambda k: R.uniform(k, (10,)), lambda k: R.bernoulli(k, 0.5, (64,)),
               lambda k: R.randint(k, (10,), 0, 1000), lambda k: R.permutation(k, 10)):
        np.testing.assert_array_equal(fn(a), fn(a))
        assert not np.array_equal(fn(a), fn(b))


# ---- statistics ----------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: np.dtype(d).name)
def test_normal_moments(dtype):
    x = R.normal(R.key(21), N, dtype).astype(np.float64)
    assert abs(x.mean()) < 5 / np.sqrt(N)  # 5 sigma
    assert abs(x.var() - 1.0) < 5 * np.sqrt(2.0 / N)
    assert abs(np.mean(x ** 3)) < 5 * np.sqrt(15.0 / N) and abs(np.mean(x ** 4) - 3.0) < 5 * np.sqrt(96.0 / N)


@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: np.dtype(d).name)
def test_uniform_moments_and_range(dtype):
    u = R.uniform(R.key(22), N, dtype)
    assert u.min() >= 0.0 and u.max() < 1.0
    u = u.astype(np.float64)
    assert abs(u.mean() - 0.5) < 5 * np.sqrt(1 / 12 / N)
    assert abs(u.var() - 1 / 12) < 5 * np.sqrt(1 / 180 / N)
    counts = np.histogram(u, bins=10, range=(0, 1))[0]
    assert np.all(np.abs(counts - N / 10) < 5 * np.sqrt(N / 10))
    v = R.uniform(R.key(22), N, dtype, minval=-3.0, maxval=-1.0)
    assert v.min() >= -3.0 and v.max() <= -1.0 and abs(v.astype(np.float64).mean() + 2.0) < 0.02


def test_float16_uniform_is_on_its_grid():
    u = R.uniform(R.key(4), N, np.float16)
    assert u.max() < 1.0 and np.all((u.astype(np.float64) * 2048) % 1 == 0)
    assert len(np.unique(u)) > 1500  # the grid k / 2048 is filled


@pytest.mark.parametrize("p", [0.0, 0.1, 0.5, 0.93, 1.0])
def test_bernoulli_frequency(p):
    b = R.bernoulli(R.key(23), p, (N,))
    assert b.dtype == np.bool_ and b.shape == (N,)
    assert abs(b.mean() - p) <= 5 * np.sqrt(p * (1 - p) / N)


def test_bernoulli_with_array_p():
    p = np.array([0.1, 0.5, 0.9], np.float32)
    b = R.bernoulli(R.key(24), p)  # shape None: p's shape
    assert b.shape == (3,) and b.dtype == np.bool_
    b = R.bernoulli(R.key(24), p, (N, 3))
    assert np.all(np.abs(b.mean(axis=0) - p) < 5 * np.sqrt(0.25 / N))
    np.testing.assert_array_equal(b, philox(R.key(24)).random((N, 3), dtype=np.float32) < p)


@pytest.mark.parametrize("dtype", [np.int64, np.int32, np.int8, np.uint8, np.uint64])
def test_randint_range_and_coverage(dtype):
    lo, hi = (0, 10) if np.dtype(dtype).kind == "u" else (-4, 6)
    x = R.randint(R.key(25), (N,), lo, hi, dtype)
    assert x.dtype == dtype and x.min() == lo and x.max() == hi - 1
    counts = np.bincount((x.astype(np.int64) - lo), minlength=hi - lo)
    chi2 = ((counts - N / 10) ** 2 / (N / 10)).sum()
    assert chi2 < 40  # 9 degrees of freedom: p < 1e-5


def test_randint_extremes():
    x = R.randint(R.key(2), (1000,), np.iinfo(np.int8).min, np.iinfo(np.int8).max + 1, np.int8)
    assert x.dtype == np.int8 and x.min() < -100 and x.max() > 100
    np.testing.assert_array_equal(R.randint(R.key(2), (5,), 3, 4), [3] * 5)


@pytest.mark.parametrize("n", [0, 1, 2, 17, 1000])
def test_permutation_of_n(n):
    p = R.permutation(R.key(26), n)
    assert p.dtype == np.int64 and p.shape == (n,)
    np.testing.assert_array_equal(np.sort(p), np.arange(n))


def test_permutation_of_n_is_uniform():
    counts = np.zeros((4, 4))
    for k in R.split(R.key(27), 4000):
        counts[np.arange(4), R.permutation(k, 4)] += 1
    assert np.all(np.abs(counts - 1000) < 5 * np.sqrt(1000 * 0.75))  # each value lands everywhere


@pytest.mark.parametrize("axis", [0, 1, -1, -3])
def test_permutation_of_an_array_moves_slices(axis):
    x = np.arange(24.0).reshape(2, 3, 4)
    k = R.key(28)
    y = R.permutation(k, x, axis=axis)
    assert y.shape == x.shape and y.dtype == x.dtype
    order = R.permutation(k, x.shape[axis])
    np.testing.assert_array_equal(y, np.take(x, order, axis=axis))
    np.testing.assert_array_equal(R.permutation(k, [1.0, 2.0, 3.0]), np.take([1.0, 2.0, 3.0], R.permutation(k, 3)))


# ---- derivatives ---------------------------------------------------------------------------------
def test_uniform_is_differentiable_in_its_bounds():
    k = R.key(30)
    lo, hi = np.array([-1.0, 0.5, 2.0]), np.array([1.0, 3.0, 2.5])
    check_grads(lambda lo, hi: R.uniform(k, (3,), np.float64, lo, hi), (lo, hi), order=2)
    check_grads(lambda lo: R.uniform(k, (4, 3), np.float64, lo, 5.0), (lo,), order=2)
    u = R.uniform(k, (3,))
    g_lo, g_hi = tg.grad(lambda lo, hi: R.uniform(k, (3,), np.float64, lo, hi).sum(), (0, 1))(lo, hi)
    assert_close(g_lo, 1.0 - u)
    assert_close(g_hi, u)


def test_uniform_bounds_are_cast_to_dtype():
    lo = np.array([-1.0, 0.0, 1.0])  # float64 bounds on a float32 draw: no upcast
    out = R.uniform(R.key(0), (3,), np.float32, lo, lo + 1)
    assert out.dtype == np.float32
    g = tg.grad(lambda lo: R.uniform(R.key(0), (3,), np.float32, lo, 2.0).sum())(lo)
    assert g.dtype == np.float64  # the cast's gradient comes back in the bound's dtype


def test_permutation_is_differentiable_in_x():
    k = R.key(31)
    x = np.random.default_rng(0).standard_normal((4, 3))
    check_grads(lambda x: R.permutation(k, x), (x,), order=2)
    check_grads(lambda x: R.permutation(k, x, axis=1) ** 2, (x,), order=2)


def test_normal_with_traced_scale():
    k = R.key(32)
    check_grads(lambda mu, sigma: mu + sigma * R.normal(k, (5,)), (np.float64(0.3), np.float64(1.7)), order=2)


def test_draws_are_constants_for_grad():
    k = R.key(33)
    g = tg.grad(lambda x: (x * R.normal(k, (3,))).sum())(np.ones(3))
    np.testing.assert_array_equal(g, R.normal(k, (3,)))
    _, t = tg.jvp(lambda x: x + R.normal(k, (3,)), (np.ones(3),), (np.full(3, 2.0),))
    np.testing.assert_array_equal(t, np.full(3, 2.0))


# ---- jit -----------------------------------------------------------------------------------------
DRAWS = {
    "normal": lambda k: R.normal(k, (3, 2)),
    "normal-f32": lambda k: R.normal(k, 4, np.float32),
    "uniform": lambda k: R.uniform(k, (5,)),
    "uniform-bounds": lambda k: R.uniform(k, (5,), np.float32, -2.0, 4.0),
    "bernoulli": lambda k: R.bernoulli(k, 0.3, (6,)),
    "randint": lambda k: R.randint(k, (2, 3), -5, 50),
    "permutation": lambda k: R.permutation(k, 9),
    "permutation-array": lambda k: R.permutation(k, np.arange(12.0).reshape(3, 4), axis=1),
    "split": lambda k: R.split(k, 3),
    "fold_in": lambda k: R.fold_in(k, 12),
    "split-then-draw": lambda k: R.normal(R.split(k)[1], (2,)),
}
PRIMITIVE_NAMES = {"normal": "random_normal", "normal-f32": "random_normal", "uniform": "random_uniform",
                   "uniform-bounds": "random_uniform", "bernoulli": "random_uniform", "randint": "random_randint",
                   "permutation": "random_permutation", "permutation-array": "random_permutation",
                   "split": "random_split", "fold_in": "random_fold_in", "split-then-draw": "random_normal"}


@pytest.mark.parametrize("name", list(DRAWS))
def test_jit_equals_eager_and_rekeys(name):
    fn = DRAWS[name]
    jitted = tg.jit(fn)
    keys = list(R.split(R.key(40), 3))
    outs = [jitted(k) for k in keys + keys[:1]]
    for k, out in zip(keys, outs):
        want = fn(k)
        assert out.dtype == want.dtype
        np.testing.assert_array_equal(out, want)
    assert not np.array_equal(outs[0], outs[1])
    np.testing.assert_array_equal(outs[0], outs[3])
    assert jitted._cache_size() == 1  # the key is a traced input, not a constant baked in
    program = tg.make_program(fn)(keys[0])
    program.typecheck()
    assert PRIMITIVE_NAMES[name] in str(program)


def test_jit_with_traced_bounds():
    k = R.key(41)
    draw = tg.jit(lambda k, lo, hi: R.randint(k, (20,), lo, hi))
    np.testing.assert_array_equal(draw(k, np.asarray(2), np.asarray(9)), R.randint(k, (20,), 2, 9))
    np.testing.assert_array_equal(draw(k, np.asarray(-7), np.asarray(0)), R.randint(k, (20,), -7, 0))
    with pytest.raises(ValueError, match=re.escape("maxval (2) must be greater than minval (2)")):
        draw(k, np.asarray(2), np.asarray(2))
    lo = np.array([0.0, 1.0])
    u = tg.jit(lambda k, lo: R.uniform(k, (2,), np.float64, lo, lo + 1.0))
    assert_close(u(k, lo), lo + R.uniform(k, (2,)))


def test_jit_grad_through_draws():
    k = R.key(42)
    f = lambda lo, k: (R.uniform(k, (4,), np.float64, lo, 2.0) ** 2).sum()
    lo = np.array(-1.0)
    assert_close(tg.jit(tg.grad(f))(lo, k), tg.grad(f)(lo, k))
    assert_close(tg.grad(tg.jit(f))(lo, k), tg.grad(f)(lo, k))


# ---- vmap ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", list(DRAWS))
def test_vmap_over_keys_equals_a_loop(name):
    check_vmap(DRAWS[name], random_key(np.random.default_rng(0)), (0,), batch=4, draw=random_key)


@pytest.mark.parametrize("name", ["normal", "randint", "split", "permutation-array"])
def test_jit_of_vmap_over_keys(name):
    keys = R.split(R.key(43), 5)
    np.testing.assert_array_equal(tg.jit(tg.vmap(DRAWS[name]))(keys), np.stack([DRAWS[name](k) for k in keys]))


def test_nested_vmap_over_keys():
    keys = R.split(R.key(44), 6).reshape(2, 3, 2)
    out = tg.vmap(tg.vmap(lambda k: R.normal(k, (4,))))(keys)
    want = np.stack([np.stack([R.normal(k, (4,)) for k in row]) for row in keys])
    np.testing.assert_array_equal(out, want)
    out = tg.vmap(tg.vmap(lambda k: R.normal(k, (4,))), in_axes=1)(keys)  # keys along axis 1
    np.testing.assert_array_equal(out, want.transpose(1, 0, 2))


def test_vmap_with_a_shared_key_draws_once():
    k = R.key(45)
    x = np.arange(12.0).reshape(4, 3)
    out = tg.vmap(lambda x: x + R.normal(k, (3,)))(x)
    np.testing.assert_array_equal(out, x + R.normal(k, (3,)))  # every example the same draw (JAX)


def test_vmap_over_bounds_with_a_shared_key():
    k = R.key(46)
    lo = np.array([0, 10, 20])
    out = tg.vmap(lambda lo: R.randint(k, (5,), lo, lo + 7))(lo)
    np.testing.assert_array_equal(out, np.stack([R.randint(k, (5,), int(v), int(v) + 7) for v in lo]))
    keys = R.split(k, 3)
    out = tg.vmap(lambda k, lo: R.randint(k, (5,), lo, 100))(keys, lo)
    np.testing.assert_array_equal(out, np.stack([R.randint(kk, (5,), int(v), 100) for kk, v in zip(keys, lo)]))


def test_vmap_over_fold_in_data():
    k = R.key(47)
    data = np.arange(4)
    np.testing.assert_array_equal(tg.vmap(lambda d: R.fold_in(k, d))(data), np.stack([R.fold_in(k, int(d))
                                                                                       for d in data]))


def test_vmap_of_grad_with_per_example_keys():
    keys = R.split(R.key(48), 3)
    lo = np.array([-1.0, 0.0, 1.0])
    f = lambda lo, k: R.uniform(k, (4,), np.float64, lo, 3.0).sum()
    out = tg.vmap(tg.grad(f))(lo, keys)
    assert_close(out, [tg.grad(f)(low, k) for low, k in zip(lo, keys)])


def test_per_example_draws_under_vmap_of_split():
    keys = R.split(R.key(49), 4)
    out = tg.vmap(lambda k: R.split(k, 2)[1])(keys)
    np.testing.assert_array_equal(out, np.stack([R.split(k, 2)[1] for k in keys]))


# ---- errors --------------------------------------------------------------------------------------
ERRORS = [
    ("seed-negative", lambda: R.key(-1), ValueError, "key: seed must be a non-negative int, got -1"),
    ("seed-bool", lambda: R.key(True), TypeError,
     "key: seed must be a non-negative int or a 0-d integer array, got bool"),
    ("seed-float", lambda: R.key(1.5), TypeError, "got float 1.5"),
    ("seed-array", lambda: R.key(np.array([1, 2])), TypeError, "got an array of shape (2,); for a batch of keys use "
     "tg.vmap(tapegrad.random.key)(seeds)"),
    ("seed-float-array", lambda: R.key(np.asarray(3.0)), TypeError, "key: seed must be a non-negative int or a 0-d "
     "integer array, got ndarray"),
    ("seed-traced-float", lambda: tg.jit(R.key)(np.asarray(3.0)), TypeError, "key: seed must be"),
    ("seed-traced-negative", lambda: tg.jit(R.key)(np.asarray(-3)), ValueError,
     "key: seed must be a non-negative int, got -3"),
    ("key-int", lambda: R.normal(0, (3,)), TypeError, "normal: key must be a single random key"),
    ("key-int-hint", lambda: R.uniform(7), TypeError, "tapegrad.random.key(7)"),
    ("key-float-array", lambda: R.normal(np.zeros(2), 3), TypeError, "got an array of shape (2,) and dtype float64"),
    ("key-uint32", lambda: R.normal(np.zeros(2, np.uint32)), TypeError, "dtype uint32"),
    ("key-stack", lambda: R.normal(R.split(R.key(0), 3)), TypeError, "under tg.vmap"),
    ("key-list", lambda: R.split([1, 2]), TypeError, "split: key must be a single random key (a uint64 array "
     "of shape (2,)), got a list"),
    ("shape-float", lambda: R.normal(R.key(0), 2.0), TypeError, "normal: shape must be an int or a tuple of ints"),
    ("shape-negative", lambda: R.uniform(R.key(0), (2, -1)), ValueError, "negative sizes"),
    ("shape-str", lambda: R.normal(R.key(0), "3"), TypeError, "shape must be an int"),
    ("normal-int-dtype", lambda: R.normal(R.key(0), 3, np.int32), ValueError,
     "normal: dtype must be a real float dtype"),
    ("uniform-complex", lambda: R.uniform(R.key(0), 3, np.complex128), ValueError, "uniform: dtype must be"),
    ("uniform-bound-shape", lambda: R.uniform(R.key(0), (3,), np.float64, np.zeros(4)), ValueError,
     "minval of shape (4,) does not broadcast to shape (3,)"),
    ("uniform-bound-grows", lambda: R.uniform(R.key(0), (3,), np.float64, 0.0, np.ones((2, 3))), ValueError,
     "maxval of shape (2, 3)"),
    ("uniform-bound-str", lambda: R.uniform(R.key(0), 3, np.float64, "a"), TypeError, "minval and maxval"),
    ("bernoulli-p-range", lambda: R.bernoulli(R.key(0), 1.5), ValueError, "p must be a probability in [0, 1]"),
    ("bernoulli-p-int-array", lambda: R.bernoulli(R.key(0), np.ones(3, int)), TypeError,
     "p must be a float or a float array"),
    ("bernoulli-shape", lambda: R.bernoulli(R.key(0), np.full(3, 0.5), (2,)), ValueError,
     "p of shape (3,) does not broadcast"),
    ("randint-float-dtype", lambda: R.randint(R.key(0), 3, 0, 5, np.float64), ValueError,
     "randint: dtype must be an integer dtype"),
    ("randint-empty-range", lambda: R.randint(R.key(0), 3, 5, 5), ValueError,
     "randint: maxval (5) must be greater than minval (5)"),
    ("randint-out-of-dtype", lambda: R.randint(R.key(0), 3, 0, 300, np.int8), ValueError,
     "maxval=300 is outside the range of int8"),
    ("randint-float-bound", lambda: R.randint(R.key(0), 3, 0.5, 5), TypeError, "minval must be an int"),
    ("randint-array-bound", lambda: R.randint(R.key(0), 3, 0, np.array([4, 5])), ValueError, "maxval must be 0-d"),
    ("permutation-negative", lambda: R.permutation(R.key(0), -2), ValueError, "non-negative int"),
    ("permutation-0d", lambda: R.permutation(R.key(0), np.array(3.0)), ValueError, "at least one dimension"),
    ("permutation-axis", lambda: R.permutation(R.key(0), np.ones((2, 3)), axis=2), np.exceptions.AxisError, "axis"),
    ("permutation-str", lambda: R.permutation(R.key(0), "abc"), TypeError, "x must be an int or an array"),
    ("split-num-float", lambda: R.split(R.key(0), 2.0), TypeError, "split: num must be an int"),
    ("split-num-negative", lambda: R.split(R.key(0), -1), ValueError, "split: num must be non-negative"),
    ("fold_in-float", lambda: R.fold_in(R.key(0), 1.5), TypeError, "fold_in: data must be an int"),
    ("fold_in-range", lambda: R.fold_in(R.key(0), 2 ** 64), ValueError, "fold_in: data must be in [0, 2**64)"),
    ("fold_in-1d", lambda: R.fold_in(R.key(0), np.arange(3)), ValueError, "data must be one integer (0-d)"),
]


@pytest.mark.parametrize("name, call, error, message", ERRORS, ids=[e[0] for e in ERRORS])
def test_errors(name, call, error, message):
    with pytest.raises(error, match=re.escape(message)):
        call()


def test_every_random_primitive_has_its_rules():
    from tapegrad import _random
    for prim in (_random.normal_p, _random.uniform_p, _random.randint_p, _random.permutation_p,
                 _random.split_p, _random.fold_in_p, _random.key_p):
        assert prim.impl and prim.abstract_eval and prim.batch_rule and prim.nondiff, prim


@pytest.mark.gpu
def test_cupy_keys_draw_the_same_numbers_on_the_device():
    cupy = cupy_or_skip()
    k = R.key(50)
    kg = cupy.asarray(k)
    for fn in DRAWS.values():
        if fn is DRAWS["permutation-array"]:
            continue  # its array operand is a NumPy constant
        out = fn(kg)
        assert isinstance(out, cupy.ndarray)
        np.testing.assert_array_equal(cupy.asnumpy(out), fn(k))
    keys = cupy.asarray(R.split(k, 3))
    out = tg.vmap(lambda k: R.normal(k, (4,)))(keys)
    assert isinstance(out, cupy.ndarray)
    np.testing.assert_array_equal(cupy.asnumpy(out), np.stack([R.normal(kk, (4,)) for kk in R.split(k, 3)]))
    assert isinstance(tg.jit(DRAWS["uniform"])(kg), cupy.ndarray)
