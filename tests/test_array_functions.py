"""Array functions: differences, rolls and rotations, diagonals and triangles, stacking and splitting,
Kronecker and cross products, select, average, ptp and the NaN-ignoring reductions. A table of specs
x shapes x dtypes x axes: values (and dtypes) against NumPy, derivatives by check_grads to order 2 in
both modes, and the same functions reached through NumPy's own names (``np.diff(tracer)``)."""
from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Callable

import numpy as np
import pytest

import tapegrad as tg
import tapegrad.numpy as tnp
from _specs import check_values
from _tol import assert_close
from _vmapcheck import check_vmap_mixes
from tapegrad.testing import check_grads

DTYPES = [np.float64, np.float32]
BOTH = ("fwd", "rev")


def draw(shape, dtype, rng, domain="real"):
    if domain == "pos":
        x = rng.uniform(0.5, 2.0, shape)
    elif domain == "nan":  # NaNs at about a quarter of the positions, never a whole row
        x = rng.uniform(-2.0, 2.0, shape)
        x[(rng.uniform(size=shape) < 0.25) & (np.arange(x.size).reshape(shape) % 3 != 0)] = np.nan
    else:  # distinct values, 0.2 apart: no ties for max/min/ptp, even after a finite-difference step
        n = int(np.prod(shape))
        x = (rng.permutation(n) * 0.25 - n * 0.125 + rng.uniform(0.0, 0.05, n)).reshape(shape)
    return np.asarray(x, dtype=dtype)


@dataclasses.dataclass(frozen=True)
class Spec:
    """``op(m, *arrays)`` computes the function with ``m`` = ``tnp`` or ``np`` (the reference, and
    the route through NumPy's dispatch); ``cases`` lists the argument shapes of each case."""

    name: str
    op: Callable
    cases: tuple
    domain: str = "real"

    def __repr__(self):
        return self.name


def one(*shapes):
    """Cases of a one-argument function."""
    return tuple((s,) for s in shapes)


MASK = np.array([[True, False, True, False], [False, False, True, True], [True, True, False, False]])
SPECS = [
    # differences
    Spec("diff", lambda m, x: m.diff(x), one((5,), (3, 4), (2, 3, 4))),
    Spec("diff-n2-axis0", lambda m, x: m.diff(x, n=2, axis=0), one((5,), (3, 4), (4, 2, 3))),
    Spec("diff-axis1", lambda m, x: m.diff(x, axis=1), one((3, 4), (2, 3, 4))),
    Spec("diff-prepend-append", lambda m, x: m.diff(x, prepend=0.5, append=x[..., :2] * 2.0), one((5,), (3, 4))),
    Spec("diff-n0", lambda m, x: m.diff(x, n=0), one((3, 4))),
    Spec("ediff-via-two-arrays", lambda m, x, y: m.diff(x, prepend=y, axis=0), ((((2, 4)), (3, 4)),)),
    # rolls, rotations, flips
    Spec("roll", lambda m, x: m.roll(x, 2), one((5,), (3, 4), (2, 3, 4))),
    Spec("roll-axis", lambda m, x: m.roll(x, -1, axis=-1), one((5,), (3, 4), (2, 3, 4))),
    Spec("roll-multi", lambda m, x: m.roll(x, (1, 5, -2), axis=(0, 1, 0)), one((3, 4), (2, 3, 4))),
    Spec("rot90", lambda m, x: m.rot90(x), one((3, 4), (2, 3, 4))),
    Spec("rot90-k2", lambda m, x: m.rot90(x, 2), one((3, 4), (2, 3, 4))),
    Spec("rot90-k3-axes", lambda m, x: m.rot90(x, -1, axes=(2, 0)), one((2, 3, 4))),
    Spec("rot90-k0", lambda m, x: m.rot90(x, 4), one((3, 4))),
    Spec("fliplr", lambda m, x: m.fliplr(x), one((3, 4), (2, 3, 4))),
    Spec("flipud", lambda m, x: m.flipud(x), one((5,), (3, 4))),
    # diagonals and triangles
    Spec("diag-from-1d", lambda m, x: m.diag(x), one((4,))),
    Spec("diag-from-1d-k", lambda m, x: m.diag(x, 2), one((3,))),
    Spec("diag-from-1d-negative-k", lambda m, x: m.diag(x, -1), one((3,))),
    Spec("diag-of-2d", lambda m, x: m.diag(x), one((3, 4), (4, 3))),
    Spec("diag-of-2d-k", lambda m, x: m.diag(x, -1), one((3, 4), (4, 3))),
    Spec("diagflat", lambda m, x: m.diagflat(x, 1), one((2, 2))),
    Spec("diagonal", lambda m, x: m.diagonal(x), one((3, 4), (2, 3, 4))),
    Spec("diagonal-offset-axes", lambda m, x: m.diagonal(x, 1, axis1=-1, axis2=0), one((3, 4), (4, 3, 2))),
    Spec("diagonal-negative-offset", lambda m, x: m.diagonal(x, -2, 2, 1), one((2, 3, 4))),
    Spec("trace", lambda m, x: m.trace(x), one((3, 4), (2, 3, 4))),
    Spec("trace-offset", lambda m, x: m.trace(x, 1, axis1=1, axis2=2), one((2, 3, 4))),
    Spec("triu", lambda m, x: m.triu(x), one((4,), (3, 4), (2, 3, 4))),
    Spec("triu-k", lambda m, x: m.triu(x, -1), one((3, 4), (2, 4, 3))),
    Spec("tril", lambda m, x: m.tril(x), one((4,), (3, 4), (2, 3, 4))),
    Spec("tril-k", lambda m, x: m.tril(x, 2), one((3, 4), (2, 4, 3))),
    # stacking and splitting
    Spec("vstack", lambda m, x, y: m.vstack([x, y]), (((4,), (4,)), ((2, 4), (4,)), ((2, 3, 4), (1, 3, 4)))),
    Spec("hstack", lambda m, x, y: m.hstack((x, y)), (((4,), (2,)), ((3, 2), (3, 4)), ((2, 3, 4), (2, 1, 4)))),
    Spec("dstack", lambda m, x, y: m.dstack([x, y]), (((4,), (4,)), ((3, 4), (3, 4)), ((2, 3, 1), (2, 3, 4)))),
    Spec("column_stack", lambda m, x, y: m.column_stack([x, y]), (((4,), (4,)), ((4, 2), (4,)))),
    Spec("vstack-scalar-and-const", lambda m, x: m.vstack([x, np.ones(x.shape)]), one((), (3,))),
    Spec("atleast_1d", lambda m, x: m.atleast_1d(x), one((), (3,), (2, 3))),
    Spec("atleast_2d", lambda m, x: m.atleast_2d(x), one((), (3,), (2, 3))),
    Spec("atleast_3d", lambda m, x: m.atleast_3d(x), one((), (3,), (2, 3), (2, 3, 4))),
    Spec("atleast_3d-many", lambda m, x, y: m.atleast_3d(x, y), (((), (2, 3)),)),
    Spec("array_split", lambda m, x: m.array_split(x, 3), one((7,), (5, 2))),
    Spec("array_split-indices-axis", lambda m, x: m.array_split(x, [1, 3, 9], axis=-1), one((2, 5))),
    Spec("array_split-more-than-length", lambda m, x: m.array_split(x, 4, axis=1), one((3, 2))),
    Spec("hsplit", lambda m, x: m.hsplit(x, 2), one((4,), (3, 4))),
    Spec("vsplit", lambda m, x: m.vsplit(x, [1]), one((3, 4))),
    Spec("dsplit", lambda m, x: m.dsplit(x, 2), one((2, 3, 4))),
    # products and selection
    Spec("kron", lambda m, x, y: m.kron(x, y),
         (((2,), (3,)), ((2, 2), (3, 2)), ((2,), (2, 3)), ((2, 1, 2), (2, 3)), ((), (2, 2)), ((2, 2), ()))),
    Spec("cross", lambda m, x, y: m.cross(x, y), (((3,), (3,)), ((4, 3), (3,)), ((2, 1, 3), (4, 3)))),
    Spec("cross-axes", lambda m, x, y: m.cross(x, y, axisa=0, axisb=1, axisc=0), (((3, 2), (2, 3)),)),
    Spec("cross-axis", lambda m, x, y: m.cross(x, y, axis=0), (((3, 4), (3, 4)),)),
    Spec("select", lambda m, x, y: m.select([MASK, ~MASK & (np.arange(4) > 1)], [x, y], default=0.5),
         (((3, 4), (3, 4)), ((3, 4), (4,)), ((), (3, 1)))),
    Spec("select-default-traced", lambda m, x, y: m.select([MASK], [x], default=y), (((3, 4), (4,)),)),
    # averages and ranges
    Spec("average", lambda m, x: m.average(x), one((5,), (3, 4))),
    Spec("average-axis", lambda m, x: m.average(x, axis=-1, keepdims=True), one((3, 4), (2, 3, 4))),
    Spec("average-weights", lambda m, x, w: m.average(x, weights=w), (((5,), (5,)), ((3, 4), (3, 4))), "pos"),
    Spec("average-weights-axis", lambda m, x, w: m.average(x, axis=1, weights=w), (((3, 4), (4,)), ((2, 4, 3), (4,))),
         "pos"),
    Spec("average-weights-axes", lambda m, x, w: m.average(x, axis=(2, 0), weights=w), (((2, 3, 4), (4, 2)),), "pos"),
    Spec("average-returned", lambda m, x, w: m.average(x, axis=0, weights=w, returned=True),
         (((3, 4), (3, 4)), ((3, 4), (3,))), "pos"),
    Spec("average-returned-unweighted", lambda m, x: m.average(x, axis=0, returned=True)[0], one((3, 4))),
    Spec("ptp", lambda m, x: m.ptp(x), one((5,), (3, 4))),
    Spec("ptp-axis", lambda m, x: m.ptp(x, axis=(0, -1), keepdims=True), one((3, 4), (2, 3, 4))),
    # NaN-ignoring reductions (NaNs at a quarter of the positions)
    Spec("nansum", lambda m, x: m.nansum(x), one((5,), (3, 4)), "nan"),
    Spec("nansum-axis", lambda m, x: m.nansum(x, axis=0, keepdims=True), one((3, 4), (2, 3, 4)), "nan"),
    Spec("nanprod", lambda m, x: m.nanprod(x, axis=-1), one((5,), (3, 4)), "nan"),
    Spec("nanmean", lambda m, x: m.nanmean(x), one((5,), (3, 4)), "nan"),
    Spec("nanmean-axes", lambda m, x: m.nanmean(x, axis=(0, 2)), one((2, 3, 4)), "nan"),
    Spec("nanvar", lambda m, x: m.nanvar(x, axis=1), one((3, 4), (2, 3, 4)), "nan"),
    Spec("nanvar-ddof-keepdims", lambda m, x: m.nanvar(x, ddof=1, keepdims=True), one((5,), (3, 4)), "nan"),
    Spec("nanstd", lambda m, x: m.nanstd(x, axis=-1), one((3, 4), (2, 3, 4)), "nan"),
    Spec("nanmax", lambda m, x: m.nanmax(x, axis=0), one((3, 4), (2, 3, 4)), "nan"),
    Spec("nanmax-all", lambda m, x: m.nanmax(x), one((5,), (3, 4)), "nan"),
    Spec("nanmin", lambda m, x: m.nanmin(x, axis=-1, keepdims=True), one((3, 4), (2, 3, 4)), "nan"),
    Spec("nancumsum", lambda m, x: m.nancumsum(x, axis=1), one((3, 4), (2, 3, 4)), "nan"),
    Spec("nancumsum-flat", lambda m, x: m.nancumsum(x), one((5,), (3, 4)), "nan"),
    Spec("nancumprod", lambda m, x: m.nancumprod(x, axis=0), one((3, 4), (2, 3, 4)), "nan"),
    Spec("nan-reductions-without-nan", lambda m, x: [m.nanmean(x, 0), m.nanvar(x, 1), m.nanmax(x), m.nansum(x)],
         one((3, 4))),
]

CASES = [pytest.param(spec, shapes, id=f"{spec.name}-{'-'.join('x'.join(map(str, s)) or 'scalar' for s in shapes)}")
         for spec in SPECS for shapes in spec.cases]


def _args(spec, shapes, dtype, seed=0):
    rng = np.random.default_rng(seed)
    return tuple(draw(shape, dtype, rng, spec.domain) for shape in shapes)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("spec, shapes", CASES)
def test_values_and_derivatives(spec, shapes, dtype):
    args = _args(spec, shapes, dtype)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # NumPy 2 deprecates 2-vectors in cross
        check_values(spec.op(tnp, *args), spec.op(np, *args), dtype)
        check_grads(lambda *a: spec.op(tnp, *a), args, order=2, modes=BOTH, name=spec.name)
        # the same function spelled with NumPy's names dispatches to tapegrad.numpy on traced values
        check_grads(lambda *a: spec.op(np, *a), args, order=1, modes=BOTH, name="np." + spec.name)
    grads = tg.grad(lambda *a: sum(tnp.sum(o) for o in tg.tree.tree_leaves(spec.op(tnp, *a))),
                    tuple(range(len(args))))(*args)
    assert [(g.dtype, g.shape) for g in grads] == [(a.dtype, a.shape) for a in args]


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("spec, shapes", CASES)
def test_vmap(spec, shapes, dtype):
    args = _args(spec, shapes, dtype)
    fresh = lambda rng: tuple(draw(s, dtype, rng, spec.domain) for s in shapes)  # noqa: E731
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # NumPy 2 deprecates 2-vectors in cross
        check_vmap_mixes(lambda *a: spec.op(tnp, *a), args, draw=fresh, slack=10.0)


@pytest.mark.skipif(np.lib.NumpyVersion(np.__version__) < "2.5.0", reason="NumPy < 2.5 takes 2-vectors (below)")
def test_cross_refuses_two_vectors_as_numpy_does():
    x, y = np.array([1.0, 2.0, 0.5]), np.array([[0.3, -1.0], [2.0, 1.0]])
    for a, b in ((x[:2], y), (x, y), (y, x)):
        for cross in (np.cross, tnp.cross):
            with pytest.raises(ValueError, match="3-dimensional vectors"):
                cross(a, b)


@pytest.mark.skipif(np.lib.NumpyVersion(np.__version__) >= "2.5.0", reason="NumPy 2.5 refuses 2-vectors (above)")
def test_cross_with_two_vectors():
    x, y = np.array([1.0, 2.0, 0.5]), np.array([[0.3, -1.0], [2.0, 1.0]])
    with pytest.warns(DeprecationWarning):
        assert_close(tnp.cross(x[:2], y), np.cross(x[:2], y))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        for a, b in ((x[:2], y), (x, y), (y, x)):
            assert_close(tnp.cross(a, b), np.cross(a, b))
            check_grads(tnp.cross, (a, b), order=2, modes=BOTH, name="cross-2")


# ---- complex inputs (JAX's conventions, checked by check_grads) ---------------------------------
COMPLEX = [
    ("sort", lambda m, x: m.sort(x, axis=0)),
    ("partition", lambda m, x: m.partition(x, 2, axis=1)),
    ("diff", lambda m, x: m.diff(x, n=2)),
    ("roll-rot90", lambda m, x: m.rot90(m.roll(x, 1, axis=1))),
    ("diag-trace-triu", lambda m, x: [m.diag(x[0]), m.trace(x), m.triu(x, 1)]),
    ("kron-cross", lambda m, x: [m.kron(x[0], x[1:, :2]), m.cross(x[:, :3], x[::-1, 1:])]),
    ("stacking", lambda m, x: m.vstack(m.array_split(m.column_stack([x[0], x[1]]), 3))),
    ("select-average", lambda m, x: [m.select([MASK], [x], default=x[::-1]),
                                     m.average(x, axis=0, weights=m.real(x[:, 0]) ** 2 + 1.0)]),
    ("nan-reductions", lambda m, x: [m.nansum(x, axis=1), m.nanmean(x, axis=0), m.nanvar(x, axis=1), m.nanstd(x)]),
]


@pytest.mark.parametrize("dtype", [np.complex128, np.complex64], ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("name, op", COMPLEX, ids=[c[0] for c in COMPLEX])
def test_complex_inputs(name, op, dtype):
    rng = np.random.default_rng(4)
    real_dtype = np.float32 if dtype == np.complex64 else np.float64
    x = draw((3, 4), real_dtype, rng) + 1j * draw((3, 4), real_dtype, rng)
    if name == "nan-reductions":
        x[0, 1] = x[2, 3] = np.nan
    x = x.astype(dtype)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        check_values(op(tnp, x), op(np, x), real_dtype)
        check_grads(lambda x: op(tnp, x), (x,), order=2, modes=BOTH, name=name)


@pytest.mark.parametrize("dtype", [np.complex128, np.complex64], ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("name, op", COMPLEX, ids=[c[0] for c in COMPLEX])
def test_complex_inputs_vmap(name, op, dtype):
    rng = np.random.default_rng(4)
    real_dtype = np.float32 if dtype == np.complex64 else np.float64
    x = (draw((3, 4), real_dtype, rng) + 1j * draw((3, 4), real_dtype, rng)).astype(dtype)
    if name == "nan-reductions":
        x[0, 1] = x[2, 3] = np.nan
    check_vmap_mixes(lambda x: op(tnp, x), (x,), slack=10.0)


# ---- NaN gradients, empty slices, integer inputs -------------------------------------------------
def test_nan_entries_get_zero_derivatives():
    x = np.array([[1.0, np.nan, 3.0], [np.nan, 2.0, -1.0]])
    for fn in (tnp.nansum, tnp.nanmean, tnp.nanvar, tnp.nanstd, tnp.nanmax, tnp.nanmin, tnp.nanprod,
               tnp.nanmedian, lambda x: tnp.nanquantile(x, 0.3), lambda x: tnp.nancumsum(x)[-1]):
        g = tg.grad(lambda x, fn=fn: tnp.sum(fn(x)))(x)
        assert g[0, 1] == 0.0 and g[1, 0] == 0.0 and np.isfinite(g).all()
        _, t = tg.jvp(fn, (x,), (np.where(np.isnan(x), 1e3, 0.0),))
        np.testing.assert_array_equal(t, 0.0)
    assert_close(tg.grad(tnp.nanmean)(x), [[0.25, 0, 0.25], [0, 0.25, 0.25]])
    assert_close(tg.grad(tnp.nanmax)(x), [[0, 0, 1], [0, 0, 0]])


def test_all_nan_slices_match_numpy():
    x = np.array([[np.nan, np.nan, np.nan], [1.0, np.nan, 2.5]])
    for name in ("nanmean", "nanvar", "nanstd", "nanmax", "nanmin"):
        with pytest.warns(RuntimeWarning):
            out = getattr(tnp, name)(x, axis=1)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            np.testing.assert_array_equal(out, getattr(np, name)(x, axis=1))
            g = tg.grad(lambda x, name=name: tnp.nansum(getattr(tnp, name)(x, axis=1)))(x)
        assert np.isfinite(g).all() and (g[0] == 0).all()
    np.testing.assert_array_equal(tnp.nansum(x, axis=1), [0.0, 3.5])
    np.testing.assert_array_equal(tnp.nanprod(x, axis=1), [1.0, 2.5])
    with pytest.raises(ValueError, match="All-NaN slice"):
        tnp.nanargmax(x, axis=1)
    with pytest.raises(ValueError, match="All-NaN slice"):
        tnp.nanargmin(x, axis=1)


@pytest.mark.parametrize("keepdims", [False, True])
@pytest.mark.parametrize("axis", [None, 0, -1])
def test_nanargmax_nanargmin(axis, keepdims):
    x = draw((3, 4), np.float64, np.random.default_rng(3), "nan")
    for name in ("nanargmax", "nanargmin"):
        np.testing.assert_array_equal(getattr(tnp, name)(x, axis=axis, keepdims=keepdims),
                                      getattr(np, name)(x, axis=axis, keepdims=keepdims))
        out = tg.jvp(lambda x, name=name: getattr(np, name)(x, axis=axis, keepdims=keepdims), (x,), (x,))[0]
        np.testing.assert_array_equal(out, getattr(np, name)(x, axis=axis, keepdims=keepdims))


@pytest.mark.parametrize("keepdims", [False, True])
@pytest.mark.parametrize("axis", [None, 0, -1])
def test_nanargmax_nanargmin_vmap(axis, keepdims):
    x = draw((3, 4), np.float64, np.random.default_rng(3), "nan")
    fresh = lambda rng: (draw((3, 4), np.float64, rng, "nan"),)  # noqa: E731
    check_vmap_mixes(lambda x: [tnp.nanargmax(x, axis=axis, keepdims=keepdims),
                                tnp.nanargmin(x, axis=axis, keepdims=keepdims)], (x,), draw=fresh)


@pytest.mark.parametrize("name", ["nansum", "nanprod", "nanmean", "nanvar", "nanstd", "nanmax", "nanmin",
                                  "nancumsum", "nancumprod", "nanargmax", "nanargmin", "ptp", "average",
                                  "trace", "diff", "rot90", "triu", "tril"])
def test_integer_inputs_match_numpy(name):
    x = np.array([[3, 1, 4], [1, 5, 9], [2, 6, 5]])
    out, ref = getattr(tnp, name)(x), getattr(np, name)(x)
    assert np.asarray(out).dtype == np.asarray(ref).dtype
    np.testing.assert_array_equal(out, ref)


def test_dtypes_and_weak_scalars():
    x32 = np.arange(6, dtype=np.float32).reshape(2, 3)
    assert tnp.select([x32 > 2], [x32]).dtype == np.select([x32 > 2], [x32]).dtype == np.float32
    assert tnp.select([x32 > 2], [x32], np.float64(1)).dtype == np.float64
    assert tnp.average(x32, weights=np.ones(3), axis=1).dtype == np.float64
    assert tnp.average(np.arange(3), weights=np.arange(3)).dtype == np.float64
    avg, scl = tnp.average(x32, axis=1, returned=True)
    assert avg.dtype == scl.dtype == np.float32 and scl.shape == (2,)
    np.testing.assert_array_equal(scl, np.average(x32, axis=1, returned=True)[1])
    assert tnp.diff(np.array([True, False, False])).dtype == np.bool_
    assert tnp.vstack([x32, x32], dtype=np.float64).dtype == np.float64
    assert tnp.triu(np.ones((2, 2), bool)).dtype == np.bool_
    assert type(tnp.atleast_1d(1.0, 2.0)) is tuple


def test_errors():
    x = np.ones((2, 3))
    with pytest.raises(ValueError, match="non-negative"):
        tnp.diff(x, n=-1)
    with pytest.raises(ValueError, match="at least one dimensional"):
        tnp.diff(np.float64(1.0))
    with pytest.raises(ValueError, match="Axes must be different"):
        tnp.rot90(x, axes=(1, 1))
    with pytest.raises(ValueError, match="out of range"):
        tnp.rot90(x, axes=(0, 3))
    with pytest.raises(ValueError, match="1- or 2-d"):
        tnp.diag(np.ones((2, 2, 2)))
    with pytest.raises(ValueError, match="at least two dimensions"):
        tnp.diagonal(np.ones(3))
    with pytest.raises(ValueError, match="cannot be the same"):
        tnp.diagonal(x, 0, 1, -1)
    with pytest.raises(ValueError, match="larger than 0"):
        tnp.array_split(x, 0)
    with pytest.raises(ValueError, match="equal division"):
        tnp.hsplit(x, 2)
    with pytest.raises(ValueError, match="2 or more"):
        tnp.vsplit(np.ones(3), 3)
    with pytest.raises(ValueError, match="need at least one array"):
        tnp.vstack([])
    # NumPy's words: before 2.5 lengths 2 and 3 are allowed, from 2.5 only 3
    with pytest.raises(ValueError, match=r"dimension must be 2 or 3|must be \(arrays of\) 3-dimensional vectors"):
        tnp.cross(np.ones(4), np.ones(3))
    with pytest.raises(ValueError, match="same length"):
        tnp.select([x > 0], [x, x])
    with pytest.raises(TypeError, match="boolean"):
        tnp.select([x], [x])
    with pytest.raises(TypeError, match="Axis must be specified"):
        tnp.average(x, weights=np.ones(3))
    with pytest.raises(ValueError, match="consistent"):
        tnp.average(x, axis=0, weights=np.ones(3))
    with pytest.raises(ZeroDivisionError):
        tnp.average(x, axis=1, weights=np.zeros(3))
    with pytest.raises(ZeroDivisionError):
        tg.grad(lambda w: tnp.average(x, axis=1, weights=w).sum())(np.zeros(3))


@pytest.mark.parametrize("name", ["nansum", "nanmean", "nanvar", "nanmax", "nanargmax", "nanmedian", "median",
                                  "ptp", "average", "atleast_2d", "diff-list"])
def test_python_scalars_and_lists_match_numpy(name):
    if name == "diff-list":
        out, ref = tnp.diff([1.0, 4.0, 2.5]), np.diff([1.0, 4.0, 2.5])
    else:
        out, ref = getattr(tnp, name)(3.0), getattr(np, name)(3.0)
    assert np.asarray(out).dtype == np.asarray(ref).dtype
    np.testing.assert_array_equal(out, ref)
