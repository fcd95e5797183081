"""tapegrad.numpy's shape, indexing, set and search functions (append ... bincount): values and dtypes
against NumPy; derivatives to order 2 in both modes (float64, float32, complex) for the ones that
gather or scatter their data; one vmap and one jit check per function (with size= where the length
depends on the values); and the traps: ConcretizationError naming size=, inplace=True refused, the
gradient of unique going to the first occurrence, histogram counts constant in the samples."""
from __future__ import annotations

import numpy as np
import pytest

import tapegrad as tg
import tapegrad.numpy as tnp
from _device_check import check_route, grid
from _specs import OpSpec, check_op
from _tol import assert_close
from _vmapcheck import check_vmap
from tapegrad.errors import ConcretizationError

FLOATS = [np.float64, np.float32]
ALL = [np.float64, np.float32, np.complex128]
F64 = [np.float64]


def _draw(shape, dtype, rng):
    x = rng.uniform(-2.0, 2.0, shape)
    if np.dtype(dtype).kind == "c":
        x = x + 1j * rng.uniform(-2.0, 2.0, shape)
    return np.asarray(x, dtype=dtype)


def _inplace(fn):
    """NumPy's in-place writer as a function returning the written copy."""
    def ref(a, *args, **kwargs):
        a = np.array(a, copy=True)
        fn(a, *args, **kwargs)
        return a
    return ref


PUT_IDX = np.array([0, -1, 4, 4])
ALONG = np.array([[2], [0], [1]])
CHOICE = np.array([[0, 1, 2], [2, 0, 1]])
COND = np.array([[1, 0], [0, 1], [1, 1]])
BINS_AT = np.array([-1.5, -0.3, 0.2, 0.9, 1.7, 3.5])
IDX = np.array([0, 3, 1, 3, 3])

# (spec, argument shapes, dtypes)
DIFF = [
    (OpSpec("append", tnp.append, np.append), [(3, 2), (4,)], ALL),
    (OpSpec("append_axis0", lambda a, v: tnp.append(a, v, axis=0), lambda a, v: np.append(a, v, axis=0)),
     [(3, 2), (1, 2)], FLOATS),
    (OpSpec("insert_axis1", lambda a, v: tnp.insert(a, 1, v, axis=1), lambda a, v: np.insert(a, 1, v, axis=1)),
     [(3, 2), (3,)], ALL),
    (OpSpec("insert_seq", lambda a, v: tnp.insert(a, [0, 2, 2], v), lambda a, v: np.insert(a, [0, 2, 2], v)),
     [(3, 2), (3,)], FLOATS),
    (OpSpec("insert_slice", lambda a, v: tnp.insert(a, slice(0, 2), v, axis=0),
            lambda a, v: np.insert(a, slice(0, 2), v, axis=0)), [(3, 2), (2,)], FLOATS),
    (OpSpec("delete_seq", lambda a: tnp.delete(a, [0, 2], axis=1), lambda a: np.delete(a, [0, 2], axis=1)),
     [(2, 4)], ALL),
    (OpSpec("delete_mask", lambda a: tnp.delete(a, [True, False, True]), lambda a: np.delete(a, [True, False, True])),
     [(3,)], FLOATS),
    (OpSpec("block", lambda a, b, c: tnp.block([[a, b], [c]]), lambda a, b, c: np.block([[a, b], [c]])),
     [(2, 2), (2, 1), (1, 3)], ALL),
    (OpSpec("put", lambda a, v: tnp.put(a, PUT_IDX, v, inplace=False), _inplace(lambda a, v: np.put(a, PUT_IDX, v))),
     [(3, 2), (3,)], ALL),
    (OpSpec("put_along_axis", lambda a, v: tnp.put_along_axis(a, ALONG, v, 1, inplace=False),
            _inplace(lambda a, v: np.put_along_axis(a, ALONG, v, 1))), [(3, 4), (3, 1)], FLOATS),
    (OpSpec("fill_diagonal", lambda a, v: tnp.fill_diagonal(a, v, wrap=True, inplace=False),
            _inplace(lambda a, v: np.fill_diagonal(a, v, wrap=True))), [(5, 3), (2,)], ALL),
    (OpSpec("choose", lambda c0, c1, c2: tnp.choose(CHOICE, [c0, c1, c2]),
            lambda c0, c1, c2: np.choose(CHOICE, [c0, c1, c2])), [(2, 3), (3,), (2, 3)], ALL),
    (OpSpec("piecewise", lambda x: tnp.piecewise(x, [x < 0, x >= 0.5], [lambda x: x ** 2, tnp.sin, 1.5]),
            lambda x: np.piecewise(x, [x < 0, x >= 0.5], [lambda x: x ** 2, np.sin, 1.5])), [(3, 2)], FLOATS),
    (OpSpec("apply_along_axis",
            lambda x: tnp.apply_along_axis(lambda v: tnp.stack([v.sum(), (v ** 2).max()]), 1, x),
            lambda x: np.apply_along_axis(lambda v: np.stack([v.sum(), (v ** 2).max()]), 1, x)), [(3, 4)], FLOATS),
    (OpSpec("apply_over_axes", lambda x: tnp.apply_over_axes(tnp.sum, x, [0, 2]),
            lambda x: np.apply_over_axes(np.sum, x, [0, 2])), [(2, 3, 4)], FLOATS),
    (OpSpec("compress", lambda a: tnp.compress([True, False, True], a, axis=1),
            lambda a: np.compress([True, False, True], a, axis=1)), [(2, 3)], FLOATS),
    (OpSpec("extract", lambda a: tnp.extract(COND, a), lambda a: np.extract(COND, a)), [(3, 2)], ALL),
    (OpSpec("meshgrid", lambda x, y: tnp.stack(tnp.meshgrid(x, y)), lambda x, y: np.stack(np.meshgrid(x, y))),
     [(3,), (4,)], FLOATS),
    (OpSpec("meshgrid_ij_sparse", lambda x, y: tnp.meshgrid(x, y, sparse=True, indexing="ij")[0] * y,
            lambda x, y: np.meshgrid(x, y, sparse=True, indexing="ij")[0] * y), [(3,), (4,)], FLOATS),
    (OpSpec("r_", lambda x, y: tnp.r_[x, 0.5, y], lambda x, y: np.r_[x, 0.5, y]), [(3,), (2,)], FLOATS),
    (OpSpec("c_", lambda x, y: tnp.c_[x, y], lambda x, y: np.c_[x, y]), [(3,), (3, 2)], FLOATS),
    (OpSpec("ix_", lambda a: a[tnp.ix_([0, 2], [1, 0])], lambda a: a[np.ix_([0, 2], [1, 0])]), [(3, 2)], FLOATS),
    (OpSpec("rollaxis", lambda a: tnp.rollaxis(a, 2, 0), lambda a: np.rollaxis(a, 2, 0)), [(2, 3, 4)], FLOATS),
    (OpSpec("unique", tnp.unique, np.unique), [(5,)], FLOATS),
    (OpSpec("union1d", tnp.union1d, np.union1d), [(3,), (2,)], FLOATS),
    (OpSpec("setdiff1d", lambda x: tnp.setdiff1d(x, [10.0]), lambda x: np.setdiff1d(x, [10.0])), [(4,)], FLOATS),
    (OpSpec("setxor1d", tnp.setxor1d, np.setxor1d), [(3,), (2,)], FLOATS),
    (OpSpec("histogram_weights", lambda w: tnp.histogram(BINS_AT, bins=3, range=(-2, 2), weights=w)[0],
            lambda w: np.histogram(BINS_AT, bins=3, range=(-2, 2), weights=w)[0]), [(6,)], FLOATS),
    (OpSpec("histogram_density", lambda w: tnp.histogram(BINS_AT, bins=4, weights=w, density=True)[0],
            lambda w: np.histogram(BINS_AT, bins=4, weights=w, density=True)[0]), [(6,)], F64),  # float64 edges
    (OpSpec("histogram2d_weights", lambda w: tnp.histogram2d(BINS_AT, BINS_AT[::-1], bins=2, weights=w)[0],
            lambda w: np.histogram2d(BINS_AT, BINS_AT[::-1], bins=2, weights=w)[0]), [(6,)], F64),
    (OpSpec("bincount_weights", lambda w: tnp.bincount(IDX, w), lambda w: np.bincount(IDX, w)), [(5,)], F64),
]
DIFF_CASES = [(spec, shapes, dtype) for spec, shapes, dtypes in DIFF for dtype in dtypes]


def _args(shapes, dtype, seed=0):
    rng = np.random.default_rng(seed)
    return tuple(_draw(s, dtype, rng) for s in shapes)


@pytest.mark.parametrize("spec,shapes,dtype", DIFF_CASES,
                         ids=[f"{s.name}-{np.dtype(d).name}" for s, _, d in DIFF_CASES])
def test_values_and_derivatives(spec, shapes, dtype):
    check_op(spec, _args(shapes, dtype), dtype)


# the number of values of these depends on the data: test_size_under_jit/vmap cover them with size=
FIXED_LENGTH = [(spec, shapes) for spec, shapes, _ in DIFF
                if spec.name not in ("unique", "union1d", "setdiff1d", "setxor1d")]


@pytest.mark.parametrize("spec,shapes", FIXED_LENGTH, ids=[s.name for s, _ in FIXED_LENGTH])
def test_vmap(spec, shapes):
    check_vmap(spec.op, _args(shapes, np.float64), 0)


@pytest.mark.parametrize("spec,shapes", FIXED_LENGTH, ids=[s.name for s, _ in FIXED_LENGTH])
def test_jit(spec, shapes):
    args = _args(shapes, np.float64)
    assert_close(tg.jit(spec.op)(*args), spec.ref(*args))


@pytest.mark.parametrize("name", ["unique", "union1d", "setdiff1d", "setxor1d"])
def test_sized_set_values_are_differentiable_under_vmap_and_jit(name):
    """Per example, the gradient of the padded values: each slot's weight goes to the first
    occurrence of its value in x, the padding's (the smallest value, JAX's default) included."""
    fn = {"unique": lambda x: tnp.unique(x, size=4), "union1d": lambda x: tnp.union1d(x, [9.0], size=4),
          "setdiff1d": lambda x: tnp.setdiff1d(x, [9.0], size=4),
          "setxor1d": lambda x: tnp.setxor1d(x, [9.0], size=4)}[name]
    xs = np.array([[2.0, 0.5, 2.0], [1.0, 3.0, -1.0]])
    loss = lambda x: (fn(x) * np.array([1.0, 2.0, 3.0, 4.0])).sum()  # noqa: E731
    expected = np.stack([tg.grad(loss)(x) for x in xs])
    assert_close(tg.vmap(tg.grad(loss))(xs), expected)
    assert_close(tg.jit(tg.vmap(tg.grad(loss)))(xs), expected)
    # values (0.5, 2, pad, pad) or (0.5, 2, 9, pad); the padding repeats the smallest value, 0.5
    padded_twice = name in ("unique", "setdiff1d")
    assert_close(expected[0], np.array([2.0, 1.0 + 3.0 + 4.0 if padded_twice else 1.0 + 4.0, 0.0]))


# ---- non-differentiable: exact values against NumPy ----------------------------------------------
A = np.array([[0.0, 1.5, 0.0], [2.0, 0.0, -3.0]])
V = np.array([3.0, 1.0, 2.0, 1.0, np.nan, 3.0, np.nan])
SORTED = np.array([-1.0, 0.0, 0.0, 2.5, 4.0])
X = np.array([-2.0, -1.0, 0.0, 1.0, 2.5, 4.0, 9.0])

# (name, fn(module) -> result): the same expression with NumPy and with tapegrad.numpy
EXACT = [
    ("nonzero", lambda m: m.nonzero(A)),
    ("flatnonzero", lambda m: m.flatnonzero(A)),
    ("argwhere", lambda m: m.argwhere(A)),
    ("argwhere_0d", lambda m: m.argwhere(np.array(2.0))),
    ("count_nonzero", lambda m: m.count_nonzero(A, axis=0)),
    ("count_nonzero_keepdims", lambda m: m.count_nonzero(A, axis=1, keepdims=True)),
    ("searchsorted_left", lambda m: m.searchsorted(SORTED, X)),
    ("searchsorted_right", lambda m: m.searchsorted(SORTED, X, side="right")),
    ("searchsorted_sorter", lambda m: m.searchsorted(SORTED[::-1], X, sorter=np.arange(5)[::-1])),
    ("digitize", lambda m: m.digitize(X, SORTED)),
    ("digitize_right", lambda m: m.digitize(X, SORTED, right=True)),
    ("digitize_decreasing", lambda m: m.digitize(X, SORTED[::-1])),
    ("digitize_decreasing_right", lambda m: m.digitize(X, SORTED[::-1], right=True)),
    ("isin", lambda m: m.isin(V, [1.0, np.nan, 3.0])),
    ("isin_invert", lambda m: m.isin(A, [0.0], invert=True)),
    ("unique_all_flags", lambda m: m.unique(V, return_index=True, return_inverse=True, return_counts=True)),
    ("unique_nan_distinct", lambda m: m.unique(V, return_counts=True, equal_nan=False)),
    ("unique_2d_inverse", lambda m: m.unique(A, return_inverse=True)),
    ("unique_axis0", lambda m: m.unique(np.array([[1, 0], [0, 1], [1, 0]]), axis=0, return_counts=True)),
    ("unique_all", lambda m: tuple(m.unique_all(V[:4]))),
    ("unique_counts", lambda m: tuple(m.unique_counts(V[:4]))),
    ("unique_inverse", lambda m: tuple(m.unique_inverse(V[:4]))),
    ("intersect1d_indices", lambda m: m.intersect1d([5, 1, 3, 3, 7], [3, 7, 9, 1], return_indices=True)),
    ("setdiff1d_assume_unique", lambda m: m.setdiff1d([5, 1, 3], [3], assume_unique=True)),
    ("union1d_int", lambda m: m.union1d([3, 1, 1], [2, 3])),
    ("setxor1d_int", lambda m: m.setxor1d([3, 1, 1, 5], [2, 3])),
    ("bincount", lambda m: m.bincount(IDX)),
    ("bincount_minlength", lambda m: m.bincount(IDX, minlength=7)),
    ("histogram", lambda m: m.histogram(X, bins=3)),
    ("histogram_edges_array", lambda m: m.histogram(X, bins=[-1.0, 0.0, 2.0, 10.0])),
    ("histogram_auto", lambda m: m.histogram(X, bins="auto")),
    ("histogram_bin_edges", lambda m: m.histogram_bin_edges(X, bins=4, range=(0, 2))),
    ("histogramdd", lambda m: m.histogramdd(np.stack([X, X[::-1]], axis=1), bins=(2, 3))),
    ("tri", lambda m: m.tri(3, 4, k=1)),
    ("tril_indices", lambda m: m.tril_indices(3, k=-1, m=4)),
    ("triu_indices", lambda m: m.triu_indices(4, 1)),
    ("tril_indices_from", lambda m: m.tril_indices_from(A)),
    ("triu_indices_from", lambda m: m.triu_indices_from(A, k=1)),
    ("diag_indices", lambda m: m.diag_indices(3, 3)),
    ("diag_indices_from", lambda m: m.diag_indices_from(np.ones((2, 2)))),
    ("indices", lambda m: m.indices((2, 3))),
    ("indices_sparse", lambda m: m.indices((2, 3), sparse=True)),
    ("ix_bool", lambda m: m.ix_([True, False, True], [1, 0])),
    ("mgrid", lambda m: m.mgrid[0:2, 0:3]),
    ("s_", lambda m: np.arange(10)[m.s_[2:7:2]]),
    ("r_directive", lambda m: m.r_["0,2,0", [1, 2], [3, 4]]),
    ("r_complex_step", lambda m: m.r_[-1:1:5j]),
]


def _assert_same(out, ref):
    """Equal structure, shapes, dtypes and values (NaNs in the same places)."""
    if isinstance(ref, (tuple, list)):
        assert isinstance(out, (tuple, list)) and len(out) == len(ref), (out, ref)
        for o, r in zip(out, ref):
            _assert_same(o, r)
        return
    out, ref = np.asarray(out), np.asarray(ref)
    assert out.shape == ref.shape and out.dtype == ref.dtype, (out.shape, out.dtype, ref.shape, ref.dtype)
    np.testing.assert_array_equal(out, ref)


@pytest.mark.parametrize("name,fn", EXACT, ids=[n for n, _ in EXACT])
def test_values_equal_numpy(name, fn):
    _assert_same(fn(tnp), fn(np))


# ---- value-dependent lengths: size= under jit and vmap ---------------------------------------------
def _padded(ref, size, fill):
    ref = np.asarray(ref)
    out = np.full((size,) + ref.shape[1:], fill, ref.dtype)
    out[:min(size, len(ref))] = ref[:size]
    return out


SIZED = [  # (name, fn(x, size), expected(x, size)) on a 1-D float x
    ("nonzero", lambda x, n: tnp.nonzero(x, size=n, fill_value=-1)[0],
     lambda x, n: _padded(np.nonzero(x)[0], n, -1)),
    ("flatnonzero", lambda x, n: tnp.flatnonzero(x, size=n), lambda x, n: _padded(np.flatnonzero(x), n, 0)),
    ("argwhere", lambda x, n: tnp.argwhere(x, size=n, fill_value=9), lambda x, n: _padded(np.argwhere(x), n, 9)),
    ("extract", lambda x, n: tnp.extract(x > 0, x, size=n, fill_value=-7.0),
     lambda x, n: _padded(np.extract(x > 0, x), n, -7.0)),
    ("compress", lambda x, n: tnp.compress(x > 0, x, size=n), lambda x, n: _padded(np.compress(x > 0, x), n, 0.0)),
    ("unique", lambda x, n: tnp.unique(x, size=n), lambda x, n: _padded(np.unique(x), n, np.unique(x)[0])),
    ("unique_counts", lambda x, n: tnp.unique(x, size=n, return_counts=True)[1],
     lambda x, n: _padded(np.unique(x, return_counts=True)[1], n, 0)),
    ("unique_index", lambda x, n: tnp.unique(x, size=n, fill_value=0.5, return_index=True),
     lambda x, n: (_padded(np.unique(x), n, 0.5), _padded(np.unique(x, return_index=True)[1], n, 0))),
    ("union1d", lambda x, n: tnp.union1d(x, [9.0], size=n, fill_value=-1.0),
     lambda x, n: _padded(np.union1d(x, [9.0]), n, -1.0)),
    ("intersect1d", lambda x, n: tnp.intersect1d(x, [2.0, 0.0, 5.0], size=n, fill_value=-1.0),
     lambda x, n: _padded(np.intersect1d(x, [2.0, 0.0, 5.0]), n, -1.0)),
    ("setdiff1d", lambda x, n: tnp.setdiff1d(x, [2.0], size=n, fill_value=-1.0),
     lambda x, n: _padded(np.setdiff1d(x, [2.0]), n, -1.0)),
    ("setxor1d", lambda x, n: tnp.setxor1d(x, [2.0, 7.0], size=n, fill_value=-1.0),
     lambda x, n: _padded(np.setxor1d(x, [2.0, 7.0]), n, -1.0)),
    ("bincount", lambda x, n: tnp.bincount(tnp.astype(tnp.abs(x), np.int64), length=n),
     lambda x, n: _padded(np.bincount(np.abs(x).astype(np.int64)), n, 0)),
]
XS = [np.array([2.0, 0.0, 2.0, -1.0, 3.0, 0.0]), np.array([0.0, 5.0, 5.0, 1.0, 1.0, 1.0])]


@pytest.mark.parametrize("size", [2, 4, 8])
@pytest.mark.parametrize("name,fn,expected", SIZED, ids=[n for n, _, _ in SIZED])
def test_size_under_jit(name, fn, expected, size):
    for x in XS:
        _assert_same(tg.jit(lambda x: fn(x, size))(x), expected(x, size))


@pytest.mark.parametrize("name,fn,expected", SIZED, ids=[n for n, _, _ in SIZED])
def test_size_under_vmap(name, fn, expected):
    out = tg.vmap(lambda x: fn(x, 4))(np.stack(XS))
    _assert_same(out, tg.tree.tree_map(lambda *r: np.stack(r), *[expected(x, 4) for x in XS]))


NEEDS_SIZE = [
    ("nonzero", lambda x: tnp.nonzero(x)), ("flatnonzero", tnp.flatnonzero), ("argwhere", tnp.argwhere),
    ("extract", lambda x: tnp.extract(x > 0, x)), ("compress", lambda x: tnp.compress(x > 0, x)),
    ("unique", tnp.unique), ("unique_values", tnp.unique_values), ("union1d", lambda x: tnp.union1d(x, x)),
    ("intersect1d", lambda x: tnp.intersect1d(x, x)), ("setdiff1d", lambda x: tnp.setdiff1d(x, x)),
    ("setxor1d", lambda x: tnp.setxor1d(x, x)),
]


@pytest.mark.parametrize("transform", [tg.jit, tg.vmap])
@pytest.mark.parametrize("name,fn", NEEDS_SIZE, ids=[n for n, _ in NEEDS_SIZE])
def test_value_dependent_length_without_size_names_size(name, fn, transform):
    x = np.array([[1.0, 0.0, 2.0]])
    with pytest.raises(ConcretizationError, match="size="):
        transform(fn)(x if transform is tg.vmap else x[0])


def test_numpys_one_argument_where_under_vmap_names_the_tnp_call_that_takes_size():
    """np.where(condition) dispatches to tapegrad, but NumPy's signature refuses size=: the message
    names the tnp functions that take it, and the call it names works."""
    xs = np.array([[1.0, -1.0, 2.0], [-3.0, 4.0, 5.0]])
    with pytest.raises(ConcretizationError, match=r"tnp\.where\(condition, size=n\)") as info:
        tg.vmap(lambda x: np.where(x > 0))(xs)
    assert "tnp.nonzero(..., size=n)" in str(info.value) and "np.nonzero accepts no size=" in str(info.value)
    with pytest.raises(TypeError, match="size"):  # what the old hint led to
        tg.vmap(lambda x: np.where(x > 0, size=2))(xs)
    (positions,) = tg.vmap(lambda x: tnp.where(x > 0, size=2))(xs)
    assert np.array_equal(positions, [[0, 2], [1, 2]])


@pytest.mark.parametrize("transform", [tg.jit, tg.vmap])
def test_bincount_without_length_names_length(transform):
    with pytest.raises(ConcretizationError, match=r"length=.*tnp\.bincount\(\.\.\., length=n\)"):
        transform(tnp.bincount)(np.array([[0, 2, 1]]) if transform is tg.vmap else np.array([0, 2, 1]))


@pytest.mark.parametrize("name,fn", [
    ("insert", lambda i, x: tnp.insert(x, i, 0.0)), ("delete", lambda i, x: tnp.delete(x, i)),
])
def test_traced_positions_of_insert_and_delete_are_refused_under_jit(name, fn):
    with pytest.raises(ConcretizationError, match="positions"):
        tg.jit(fn)(np.array([1]), np.arange(3.0))
    expected = np.insert(np.arange(3.0), [1], 0.0) if name == "insert" else np.delete(np.arange(3.0), [1])
    assert_close(fn(np.array([1]), np.arange(3.0)), expected)  # eagerly they are fine


# ---- vmap of the index and search functions ------------------------------------------------------
def test_searchsorted_under_vmap_with_mapped_and_shared_sorted_arrays():
    sorted_batch = np.stack([SORTED, SORTED + 0.5, SORTED[::-1] * 0 + np.arange(5.0)])
    check_vmap(tnp.searchsorted, (SORTED, X), (None, 0), draw=lambda rng: (SORTED, X + rng.uniform(-1, 1)))
    for side in ("left", "right"):
        out = tg.vmap(lambda a, side=side: tnp.searchsorted(a, X, side=side))(sorted_batch)
        _assert_same(out, np.stack([np.searchsorted(a, X, side=side) for a in sorted_batch]))


@pytest.mark.parametrize("name,fn", [
    ("digitize", lambda x: tnp.digitize(x, SORTED)), ("isin", lambda x: tnp.isin(x, [0.0, 2.5])),
    ("count_nonzero", lambda x: tnp.count_nonzero(x > 0)), ("histogram", lambda x: tnp.histogram(x, 3, (-2, 5))[0]),
])
def test_search_and_count_under_vmap_and_jit(name, fn):
    draw = lambda rng: (rng.choice(np.array([-2.0, 0.0, 1.0, 2.5, 4.0, 9.0]), size=X.shape),)  # noqa: E731
    check_vmap(fn, (X,), 0, draw=draw)
    _assert_same(tg.jit(fn)(X), fn(X))


def test_digitize_with_traced_bins_reads_their_direction():
    for bins in (SORTED, SORTED[::-1]):
        _assert_same(tg.jit(lambda b: tnp.digitize(X, b))(bins), np.digitize(X, bins))


# ---- conventions ---------------------------------------------------------------------------------
def test_unique_gradient_goes_to_the_first_occurrence():
    x = np.array([3.0, 1.0, 3.0, 2.0, 1.0])
    g = tg.grad(lambda x: (tnp.unique(x) * np.array([1.0, 10.0, 100.0])).sum())(x)
    assert_close(g, np.array([100.0, 1.0, 0.0, 10.0, 0.0]))
    _, t = tg.jvp(tnp.unique, (x,), (np.arange(5.0),))
    assert_close(t, np.array([1.0, 3.0, 0.0]))


def test_intersect1d_gradient_goes_to_the_first_array():
    x, y = np.array([5.0, 1.0, 3.0, 3.0]), np.array([3.0, 7.0, 1.0])
    gx, gy = tg.grad(lambda x, y: tnp.intersect1d(x, y).sum(), grad_position=(0, 1))(x, y)
    assert_close(gx, np.array([0.0, 1.0, 1.0, 0.0]))
    assert_close(gy, np.zeros(3))


def test_histogram_counts_are_constant_in_the_samples():
    g = tg.grad(lambda a: tnp.histogram(a, bins=3, range=(-2.0, 5.0), density=True)[0].sum())(X)
    assert_close(g, np.zeros_like(X))


def test_piecewise_evaluates_every_function_everywhere_so_guard_the_input():
    """The documented trap: sqrt on the negative side gives NaN through 0 * inf unless guarded."""
    x = np.array([-1.0, 4.0])
    guarded = lambda x: tnp.piecewise(x, [x > 0], [lambda x: tnp.sqrt(tnp.where(x > 0, x, 1.0)), 0.0])  # noqa: E731
    assert_close(tg.grad(lambda x: guarded(x).sum())(x), np.array([0.0, 0.25]))


@pytest.mark.parametrize("call", [
    lambda x: tnp.put(x, [0], [1.0]), lambda x: tnp.fill_diagonal(x, 1.0), lambda x: tnp.place(x, x > 0, [1.0]),
    lambda x: tnp.put_along_axis(x, np.array([[0], [1]]), 1.0, 1),
])
def test_inplace_writers_refuse_inplace_true(call):
    x = np.ones((2, 2))
    with pytest.raises(ValueError, match="inplace=False"):
        call(x)
    assert (x == 1.0).all()  # nothing was written


def test_numpy_inplace_writers_on_traced_values_fail_loudly():
    with pytest.raises(ValueError, match="inplace=False"):
        tg.grad(lambda x: np.put(x, [0], [1.0]))(np.ones(3))


@pytest.mark.parametrize("call,error,message", [
    (lambda: tnp.nonzero(np.array(1.0)), ValueError, "0d"),
    (lambda: tnp.choose(np.array([0, 3]), [np.ones(2), np.zeros(2)]), ValueError, "invalid entry"),
    (lambda: tnp.put(np.ones(3), [5], [1.0], inplace=False), IndexError, "out of range"),
    (lambda: tnp.digitize(X, [1.0, 0.0, 2.0]), ValueError, "monotonically"),
    (lambda: tnp.histogram(X, bins=[2.0, 1.0]), ValueError, "monotonically"),
    (lambda: tnp.histogram(np.array([1.0, np.nan])), ValueError, "not finite"),
    (lambda: tnp.bincount(np.array([1, -1])), ValueError, "negative"),
    (lambda: tnp.block([[np.ones(2)], np.ones(2)]), ValueError, "depths are mismatched"),
    (lambda: tnp.r_["r", np.ones(2)], NotImplementedError, "numpy.matrix"),
    (lambda: tnp.piecewise(X, [X > 0], []), ValueError, "functions are"),
    (lambda: tnp.apply_along_axis(lambda v: v[: int(v[0] > 0) + 1], 1, np.array([[1.0, 2], [-1, 2]])),
     ValueError, "different shapes"),
])
def test_bad_input_raises_a_clear_error(call, error, message):
    with pytest.raises(error, match=message):
        call()


@pytest.mark.parametrize("mode", ["wrap", "clip"])
def test_choose_and_put_modes_under_jit(mode):
    a = np.array([[0, 3], [-1, 1]])
    choices = [np.zeros((2, 2)), np.ones((2, 2))]
    _assert_same(tg.jit(lambda a: tnp.choose(a, choices, mode=mode))(a), np.choose(a, choices, mode=mode))
    with pytest.raises(ConcretizationError, match="mode='wrap'"):
        tg.jit(lambda a: tnp.choose(a, choices))(a)
    x = np.arange(4.0)
    expected = _inplace(lambda x: np.put(x, [5, -7], [9.0, 8.0], mode=mode))(x)
    _assert_same(tg.jit(lambda x: tnp.put(x, np.array([5, -7]), [9.0, 8.0], mode=mode, inplace=False))(x), expected)


# ---- plain np.* calls on traced values ------------------------------------------------------------
DISPATCH = [  # (name, loss of x written with plain NumPy, its gradient at X3)
    ("append", lambda x: np.append(x, x[:1]).sum(), [2.0, 1.0, 1.0]),
    ("insert", lambda x: np.insert(x, 1, x[2]).sum(), [1.0, 1.0, 2.0]),
    ("delete", lambda x: np.delete(x, 0).sum(), [0.0, 1.0, 1.0]),
    ("block", lambda x: np.block([[x], [x]]).sum(), [2.0, 2.0, 2.0]),
    ("unique", lambda x: np.unique(x).sum(), [1.0, 1.0, 1.0]),
    ("extract", lambda x: np.extract(x > 0, x).sum(), [0.0, 1.0, 1.0]),
    ("compress", lambda x: np.compress([True, False, True], x).sum(), [1.0, 0.0, 1.0]),
    ("choose", lambda x: np.choose(np.array([1, 0]), [x[:2], 2 * x[:2]]).sum(), [2.0, 1.0, 0.0]),
    ("piecewise", lambda x: np.piecewise(x, [x < 0], [lambda x: -x, lambda x: x]).sum(), [-1.0, 1.0, 1.0]),
    ("apply_along_axis", lambda x: np.apply_along_axis(lambda v: v ** 2, 0, x).sum(), [-2.0, 1.0, 3.0]),
    ("meshgrid", lambda x: np.meshgrid(x, x)[0].sum(), [3.0, 3.0, 3.0]),
    ("setdiff1d", lambda x: np.setdiff1d(x, [0.5]).sum(), [1.0, 0.0, 1.0]),
    ("histogram", lambda x: np.histogram(X, bins=2, range=(-3, 3), weights=np.concatenate([x, x, x[:1]]))[0][0],
     [1.0, 1.0, 0.0]),  # the samples -2 and -1 fall in the first bin
    ("nonzero", lambda x: x[np.nonzero(x > 0)].sum(), [0.0, 1.0, 1.0]),
    ("searchsorted", lambda x: x[np.searchsorted(SORTED, -0.5)], [0.0, 1.0, 0.0]),
]
X3 = np.array([-1.0, 0.5, 1.5])


@pytest.mark.parametrize("name,loss,expected", DISPATCH, ids=[n for n, _, _ in DISPATCH])
def test_plain_numpy_calls_dispatch(name, loss, expected):
    assert_close(tg.grad(loss)(X3), np.array(expected))


# ---- on the strict device double (CuPy's rules): device in, device out, equal to the host run ------
W6 = np.random.default_rng(5).uniform(size=6)
DEVICE_CASES = [(s.name, s.op, _args(shapes, np.float64)) for s, shapes in FIXED_LENGTH
                if not s.name.startswith(("histogram", "bincount"))] + [  # those close over host data
    ("histogram", lambda x, w: tnp.histogram(x, bins=3, range=(-2, 2), weights=w)[0], (BINS_AT, W6)),
    ("histogram_density", lambda x, w: tnp.histogram(x, bins=4, weights=w, density=True)[0], (BINS_AT, W6)),
    ("histogram2d", lambda x, w: tnp.histogram2d(x, x[::-1], bins=2, weights=w)[0], (BINS_AT, W6)),
    ("bincount", lambda w: tnp.bincount(tnp.astype(w * 3, np.int64), w), (W6,)),
    ("unique_sized", lambda x: tnp.unique(x, size=4), (XS[0],)),
    ("setxor1d_sized", lambda x, y: tnp.setxor1d(x, y, size=4), (XS[0], np.array([9.0, 1.0]))),
    ("extract_sized", lambda x: tnp.extract(x > 0, x, size=3), (XS[0],)),
    ("nonzero_sized", lambda x: tnp.nonzero(x, size=3)[0], (XS[0],)),
    ("isin_list", lambda x: tnp.isin(x, [2.0, 3.0]), (XS[0],)),
    ("digitize", lambda b, x: tnp.digitize(x, b), (SORTED, X)),
    ("searchsorted", lambda s, x: tnp.searchsorted(s, x, side="right"), (SORTED, X)),
    ("r_scalars_and_slices", lambda x: tnp.r_[x, 0.5, 1:3], (XS[0],)),
    ("put_list", lambda x: tnp.put(x, [0, 2], 1.0, inplace=False), (XS[0],)),
]


@pytest.mark.parametrize("name,fn,args,route", grid(DEVICE_CASES, ids=(lambda case: case[0],), unpack=True))
def test_on_the_device_double(name, fn, args, route):
    check_route(route, fn, args)


def test_set_through_repeated_host_indices_differentiates_on_the_device():
    """x.at[host_index].set(v) on a device x: the mask of the surviving writes lives on x's device
    (it was built on the index's host backend, and the vjp mixed host and device arrays)."""
    for route in ("vjp", "jit-vjp"):
        check_route(route, lambda x, v: x.at[np.array([0, 2, 2])].set(v), (np.arange(4.0), np.array([1.0, 2.0, 3.0])))
