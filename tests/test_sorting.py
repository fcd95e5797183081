"""Sorting and order statistics: sort, partition, argsort, argpartition, median, quantile, percentile
and their NaN-ignoring versions. A table of specs x shapes x dtypes x axes: values (and dtypes)
against NumPy, derivatives by check_grads to order 2 in both modes, and the same functions reached
through NumPy's own names (``np.sort(tracer)``). Samples are drawn without ties, so every order
statistic is a differentiable function of the data at the drawn point."""
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
QUANTILE_METHODS = ["linear", "inverted_cdf", "averaged_inverted_cdf", "closest_observation",
                    "interpolated_inverted_cdf", "hazen", "weibull", "median_unbiased", "normal_unbiased",
                    "lower", "higher", "midpoint", "nearest"]


def draw(shape, dtype, rng, nan_fraction=0.0):
    """Distinct values, at least 0.2 apart (no ties, even after a finite-difference step), with NaNs
    at a fraction of the positions when asked."""
    n = int(np.prod(shape))
    x = (rng.permutation(n) * 0.25 - n * 0.125 + rng.uniform(0.0, 0.05, n)).reshape(shape)
    if nan_fraction:
        x[rng.uniform(size=shape) < nan_fraction] = np.nan
    return np.asarray(x, dtype=dtype)


@dataclasses.dataclass(frozen=True)
class Spec:
    """``op(m, x)`` computes the function with ``m`` = ``tnp`` or ``np`` (the reference, and the
    route through NumPy's dispatch); ``shapes`` lists the shapes of ``x`` to try."""

    name: str
    op: Callable
    shapes: tuple
    nan_fraction: float = 0.0

    def __repr__(self):
        return self.name


S1, S2, S3 = ((5,),), ((3, 4),), ((2, 3, 4),)
SPECS = [
    Spec("sort", lambda m, x: m.sort(x), S1 + S2 + S3),
    Spec("sort-axis0", lambda m, x: m.sort(x, axis=0), S1 + S2 + S3),
    Spec("sort-axis1", lambda m, x: m.sort(x, axis=1), S2 + S3),
    Spec("sort-axis-2", lambda m, x: m.sort(x, axis=-2), S2 + S3),
    Spec("sort-None", lambda m, x: m.sort(x, axis=None), S1 + S2 + S3),
    Spec("sort-stable", lambda m, x: m.sort(x, kind="stable"), S2),
    Spec("partition", lambda m, x: m.partition(x, 1), S1 + S2 + S3),
    Spec("partition-multi-axis0", lambda m, x: m.partition(x, (0, 2), axis=0), ((3,), (3, 4), (4, 2, 3))),
    Spec("partition-negative-kth", lambda m, x: m.partition(x, -1, axis=1), S2 + S3),
    Spec("partition-None", lambda m, x: m.partition(x, 4, axis=None), S1 + S2 + S3),
    Spec("median", lambda m, x: m.median(x), S1 + S2 + S3),
    Spec("median-axis0", lambda m, x: m.median(x, axis=0), S1 + S2 + S3),
    Spec("median-axis-1-keepdims", lambda m, x: m.median(x, axis=-1, keepdims=True), S1 + S2 + S3),
    Spec("median-axes", lambda m, x: m.median(x, axis=(0, 2)), S3),
    Spec("median-keepdims-None", lambda m, x: m.median(x, keepdims=True), S2),
    Spec("quantile", lambda m, x: m.quantile(x, 0.3), S1 + S2 + S3),
    Spec("quantile-many-axis-1", lambda m, x: m.quantile(x, [0.1, 0.62, 0.9], axis=-1), S1 + S2 + S3),
    Spec("quantile-0d-q-axis0-keepdims", lambda m, x: m.quantile(x, np.array(0.62), axis=0, keepdims=True),
         S2 + S3),
    Spec("quantile-axes", lambda m, x: m.quantile(x, [0.3, 0.62], axis=(0, -1)), S3),
    Spec("quantile-2d-q", lambda m, x: m.quantile(x, [[0.1, 0.3], [0.62, 1.0]], axis=1), S2),
    Spec("quantile-ends", lambda m, x: m.quantile(x, [0.0, 1.0], axis=0), S2),
    Spec("percentile", lambda m, x: m.percentile(x, 30, axis=0), S1 + S2 + S3),
    Spec("percentile-many-keepdims", lambda m, x: m.percentile(x, [10.0, 62.0], keepdims=True), S2 + S3),
    Spec("nanmedian", lambda m, x: m.nanmedian(x, axis=-1), S2 + S3, 0.2),
    Spec("nanmedian-None", lambda m, x: m.nanmedian(x), S1 + S2, 0.2),
    Spec("nanmedian-axes-keepdims", lambda m, x: m.nanmedian(x, axis=(0, 1), keepdims=True), S3, 0.2),
    Spec("nanquantile", lambda m, x: m.nanquantile(x, [0.3, 0.62], axis=0), S2 + S3, 0.2),
    Spec("nanquantile-None", lambda m, x: m.nanquantile(x, 0.3), S1 + S2, 0.2),
    Spec("nanpercentile", lambda m, x: m.nanpercentile(x, 62, axis=-1, keepdims=True), S2 + S3, 0.2),
    Spec("nanquantile-no-nan", lambda m, x: m.nanquantile(x, 0.3, axis=1), S2),
] + [Spec(f"quantile-{method}", lambda m, x, method=method: m.quantile(x, [0.1, 0.5, 0.62, 1.0], axis=-1,
                                                                        method=method), S1 + S2)
     for method in QUANTILE_METHODS] + [
    Spec(f"nanquantile-{method}", lambda m, x, method=method: m.nanquantile(x, [0.1, 0.5, 0.62], axis=0,
                                                                             method=method), S2, 0.25)
     for method in QUANTILE_METHODS]

CASES = [pytest.param(spec, (shape,), id=f"{spec.name}-{'x'.join(map(str, shape))}")
         for spec in SPECS for shape in spec.shapes]


def _args(spec, shapes, dtype, seed=0):
    rng = np.random.default_rng(seed)
    return tuple(draw(shape, dtype, rng, spec.nan_fraction) for shape in shapes)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("spec, shapes", CASES)
def test_values_and_derivatives(spec, shapes, dtype):
    args = _args(spec, shapes, dtype)
    check_values(spec.op(tnp, *args), spec.op(np, *args), dtype)
    check_grads(lambda *a: spec.op(tnp, *a), args, order=2, modes=BOTH, name=spec.name)
    # the same function spelled with NumPy's names dispatches to tapegrad.numpy on traced values
    check_grads(lambda *a: spec.op(np, *a), args, order=1, modes=BOTH, name="np." + spec.name)
    g = tg.grad(lambda *a: tnp.sum(spec.op(tnp, *a)))(*args)
    assert g.dtype == dtype and g.shape == shapes[0]


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("spec, shapes", CASES)
def test_vmap(spec, shapes, dtype):
    args = _args(spec, shapes, dtype)
    # each example a fresh draw: a different order (and NaN pattern) per example
    fresh = lambda rng: tuple(draw(s, dtype, rng, spec.nan_fraction) for s in shapes)  # noqa: E731
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a fresh draw may have an all-NaN slice
        check_vmap_mixes(lambda x: spec.op(tnp, x), args, draw=fresh, slack=10.0)


# ---- derivatives in q ----------------------------------------------------------------------------
# q values whose virtual indices (n - 1) q stay at least 0.1 away from an integer for these lengths
Q_CASES = [
    ("quantile", lambda m, x, q: m.quantile(x, q, axis=-1), (3, 4), (2,)),
    ("quantile-None", lambda m, x, q: m.quantile(x, q), (3, 4), ()),
    ("percentile", lambda m, x, q: m.percentile(x, q * 100, axis=0), (5, 2), (2,)),
    ("nanquantile", lambda m, x, q: m.nanquantile(x, q, axis=1), (2, 6), (2,)),
]


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("name, op, x_shape, q_shape", Q_CASES, ids=[c[0] for c in Q_CASES])
def test_derivatives_in_q(name, op, x_shape, q_shape, dtype):
    x = draw(x_shape, dtype, np.random.default_rng(1))
    q = np.asarray(np.resize([0.3, 0.62], q_shape), dtype=dtype)
    check_values(op(tnp, x, q), op(np, x, q), dtype)
    check_grads(lambda x, q: op(tnp, x, q), (x, q), order=2, modes=BOTH, name=name)
    # d/dq of the linear interpolation is the gap between the neighbouring order statistics
    if name == "quantile-None":
        s = np.sort(x, axis=None)
        i = int(np.floor(11 * q))
        assert_close(tg.grad(lambda q: tnp.quantile(x, q), 0)(q), 11 * (s[i + 1] - s[i]),
                     rtol=1e-5)


@pytest.mark.parametrize("name, op, x_shape, q_shape", Q_CASES, ids=[c[0] for c in Q_CASES])
def test_derivatives_in_q_vmap(name, op, x_shape, q_shape):
    rng = np.random.default_rng(1)
    x, q = draw(x_shape, np.float64, rng), np.resize([0.3, 0.62], q_shape)
    check_vmap_mixes(lambda x, q: op(tnp, x, q), (x, q),
                     draw=lambda rng: (draw(x_shape, np.float64, rng), rng.uniform(0.1, 0.9, q_shape)))


# ---- indices: argsort and argpartition -----------------------------------------------------------
@pytest.mark.parametrize("axis", [-1, 0, 1, None])
def test_argsort_and_argpartition_match_numpy(axis):
    x = draw((3, 4, 5), np.float64, np.random.default_rng(2))
    np.testing.assert_array_equal(tnp.argsort(x, axis=axis), np.argsort(x, axis=axis))
    kth = (0, 2)
    np.testing.assert_array_equal(tnp.argpartition(x, kth, axis=axis), np.argpartition(x, kth, axis=axis))

    def f(x):  # the indices are constants inside a transform, the gathered values are differentiable
        order = tnp.argsort(x, axis=axis)
        assert order.dtype == np.intp and not isinstance(order, tg._core.Tracer)
        flat = x if axis is not None else tnp.ravel(x)
        return tnp.take_along_axis(flat, order, axis=-1 if axis is None else axis) * 2.0
    check_grads(f, (x,), order=2, modes=BOTH, name="argsort")
    np.testing.assert_array_equal(np.argsort(x, axis=axis), tg.jvp(lambda x: np.argsort(x, axis=axis), (x,), (x,))[0])


@pytest.mark.parametrize("axis", [-1, 0, 1, None])
def test_argsort_and_argpartition_vmap(axis):
    x = draw((3, 4, 5), np.float64, np.random.default_rng(2))
    fresh = lambda rng: (draw((3, 4, 5), np.float64, rng),)  # noqa: E731
    check_vmap_mixes(lambda x: [tnp.argsort(x, axis=axis), tnp.argpartition(x, (0, 2), axis=axis),
                                tnp.argsort(x, axis=axis, kind="stable")], (x,), draw=fresh)


def test_sort_gradient_follows_the_elements():
    x = np.array([3.0, -1.0, 2.0])
    weights = np.array([1.0, 10.0, 100.0])
    # sorted = [-1, 2, 3]: slot 0 reads x[1], slot 1 reads x[2], slot 2 reads x[0]
    np.testing.assert_array_equal(tg.grad(lambda x: tnp.sum(tnp.sort(x) * weights))(x), [100.0, 1.0, 10.0])
    _, t = tg.jvp(tnp.sort, (x,), (np.array([1.0, 2.0, 3.0]),))
    np.testing.assert_array_equal(t, [2.0, 3.0, 1.0])


@pytest.mark.parametrize("kwargs", [dict(stable=True), dict(kind="stable"), dict(kind="mergesort")])
def test_stable_sort_keeps_ties_in_order(kwargs):
    x = np.array([1.0, 0.0, 1.0, 1.0, 0.0] * 7)
    np.testing.assert_array_equal(tnp.argsort(x, **kwargs), np.argsort(x, kind="stable"))
    g = tg.grad(lambda x: tnp.sort(x, **kwargs)[-3])(x)
    np.testing.assert_array_equal(g, np.eye(35)[30])  # the third-last 1.0 (of x[30], x[32], x[33])


def test_ties_give_one_element_each_slot():
    x = np.array([1.0, 0.0, 1.0, 1.0, 0.0] * 7)
    np.testing.assert_array_equal(tnp.argsort(x), np.argsort(x))  # NumPy's own (unstable) order
    jac = tg.jacrev(tnp.sort)(x)  # a permutation matrix: each slot reads one element, each element one slot
    np.testing.assert_array_equal(jac.sum(0), np.ones(35))
    np.testing.assert_array_equal(jac.sum(1), np.ones(35))
    np.testing.assert_array_equal(jac @ x, np.sort(x))


def test_median_and_quantile_gradient_weights():
    x = np.array([4.0, 1.0, 3.0, 2.0])
    assert_close(tg.grad(tnp.median)(x), [0.0, 0.0, 0.5, 0.5])
    assert_close(tg.grad(tnp.median)(x[:3]), [0.0, 0.0, 1.0])
    # linear: virtual index 3 * 0.4 = 1.2 between the order statistics 1 (x[3]) and 2 (x[2])
    assert_close(tg.grad(lambda x: tnp.quantile(x, 0.4))(x), [0.0, 0.0, 0.2, 0.8])
    assert_close(tg.grad(lambda x: tnp.percentile(x, 100))(x), [1.0, 0.0, 0.0, 0.0])


# ---- NaNs, dtypes and errors ---------------------------------------------------------------------
def test_nan_slices_match_numpy_and_get_zero_gradient():
    x = np.array([[1.0, np.nan, 3.0, 0.5], [2.0, 1.0, 4.0, 3.0]])
    for fn in (lambda m, x: m.median(x, axis=1), lambda m, x: m.quantile(x, [0.2, 0.9], axis=1),
               lambda m, x: m.sort(x, axis=1)):
        np.testing.assert_array_equal(fn(tnp, x), fn(np, x))
        g = tg.grad(lambda x, fn=fn: tnp.nansum(fn(tnp, x)))(x)
        assert np.isfinite(g).all()
    g = tg.grad(lambda x: tnp.sum(tnp.median(x, axis=1)))(x)
    np.testing.assert_array_equal(g[0], 0.0)
    assert_close(g[1], [0.5, 0.0, 0.0, 0.5])


def test_all_nan_slices_give_nan_and_zero_gradient():
    x = np.array([[np.nan, np.nan, np.nan], [2.0, np.nan, 1.0]])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        for fn in (lambda m, x: m.nanmedian(x, axis=1), lambda m, x: m.nanquantile(x, [0.2, 0.9], axis=1),
                   lambda m, x: m.nanpercentile(x, 50, axis=1)):
            np.testing.assert_array_equal(fn(tnp, x), fn(np, x))
            g = tg.grad(lambda x, fn=fn: tnp.nansum(fn(tnp, x)))(x)
            np.testing.assert_array_equal(g[0], 0.0)
            assert g[1, 1] == 0.0 and np.isfinite(g).all()
    with pytest.warns(RuntimeWarning, match="All-NaN"):
        tnp.nanmedian(x, axis=1)


# NumPy's quantile changed in 2.3 and again up to 2.4.2: a NumPy-scalar q now promotes (float32 data and a
# float64 q give float64), and the interpolation rounds differently. tapegrad follows NumPy 2.4.2 and later,
# bit for bit; against an older NumPy the values agree to the dtype's rounding, and the dtype may not.
_QUANTILE_AS_NUMPY = np.lib.NumpyVersion(np.__version__) >= "2.4.2"


@pytest.mark.parametrize("q", [0.3, np.float64(0.3), np.array([0.3, 0.5]), np.array(0.3, np.float32), 1, 0.0])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64])
def test_quantile_values_and_dtypes_are_numpys_bit_for_bit(q, dtype):
    x = np.asarray(draw((7,), np.float64, np.random.default_rng(5)) * 3.1, dtype=dtype)
    for method in QUANTILE_METHODS:
        for name in ("quantile", "nanquantile"):
            out, ref = getattr(tnp, name)(x, q, method=method), getattr(np, name)(x, q, method=method)
            if _QUANTILE_AS_NUMPY:
                assert np.asarray(out).dtype == np.asarray(ref).dtype, (name, method)
                np.testing.assert_array_equal(out, ref)
            else:
                assert_close(np.asarray(out, np.float64), np.asarray(ref, np.float64),
                             dtype=np.result_type(x.dtype, np.float32))
    for name in ("median", "nanmedian"):
        np.testing.assert_array_equal(getattr(tnp, name)(x), getattr(np, name)(x))


def test_integer_and_empty_inputs():
    x = np.array([[5, 1, 4], [2, 8, 3]])
    np.testing.assert_array_equal(tnp.sort(x, axis=0), np.sort(x, axis=0))
    np.testing.assert_array_equal(tnp.median(x, axis=1), np.median(x, axis=1))
    np.testing.assert_array_equal(tnp.nanmedian(x), np.nanmedian(x))
    np.testing.assert_array_equal(tnp.percentile(x, [25, 50], axis=0), np.percentile(x, [25, 50], axis=0))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        assert np.isnan(tnp.median(np.zeros(0)))


def test_errors():
    x = np.ones((2, 3))
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        tnp.quantile(x, 1.5)
    with pytest.raises(ValueError, match=r"\[0, 100\]"):
        tnp.percentile(x, -1)
    with pytest.raises(ValueError, match="not a valid method"):
        tnp.quantile(x, 0.5, method="nope")
    with pytest.raises(ValueError, match="scalar or 1d"):
        tnp.quantile(x, np.full((1, 1, 1), 0.5))
    with pytest.raises(TypeError, match="real numbers"):
        tnp.quantile(x + 1j, 0.5)
    with pytest.raises(ValueError, match="out of bounds"):
        tnp.partition(x, 3)
    with pytest.raises(np.exceptions.AxisError):
        tnp.sort(x, axis=2)
    with pytest.raises(np.exceptions.AxisError):
        tnp.sort(np.float64(1.0))
    with pytest.raises(NotImplementedError, match="order"):
        tnp.sort(x, order="f")
    with pytest.raises(NotImplementedError, match="out="):
        tnp.median(x, out=np.empty(3))


@pytest.mark.parametrize("route", ["grad", "jit(grad)", "vmap(grad)"])
@pytest.mark.parametrize("axis", [0, 1, -1])
def test_sort_gradient_moves_each_cotangent_to_its_element(route, axis):
    """The vjp of a stable sort (ties included, a non-contiguous input) puts cotangent slot ``k`` on
    the element the sort put there: NumPy's ``put_along_axis`` by the stable ``argsort``."""
    rng = np.random.default_rng(3)
    xs = np.round(rng.standard_normal((3, 5, 4, 6)), 1)[..., ::2]  # ties, strided
    w = rng.standard_normal(xs.shape[1:])

    def loss(x):
        return tnp.sum(tnp.sort(x, axis=axis, kind="stable") * w)

    expected = []
    for x in xs:
        g = np.empty_like(x)
        np.put_along_axis(g, np.argsort(x, axis=axis, kind="stable"), w, axis=axis)
        expected.append(g)
    if route == "vmap(grad)":
        got = tg.vmap(tg.grad(loss))(xs)
    else:
        fn = tg.grad(loss) if route == "grad" else tg.jit(tg.grad(loss))
        got = np.stack([fn(x) for x in xs])
    assert_close(got, np.stack(expected))


@pytest.mark.parametrize(("shape", "axis"), [((0, 3), 0), ((0, 3), 1), ((3, 0), 1), ((2, 0, 3), -1)])
def test_sort_of_an_empty_array_and_its_gradient(shape, axis):
    x = np.zeros(shape)
    assert tnp.sort(x, axis=axis).shape == shape
    assert tg.grad(lambda x: tnp.sum(tnp.sort(x, axis=axis)))(x).shape == shape
    assert tg.vmap(lambda x: tnp.sort(x, axis=axis))(np.zeros((2,) + shape)).shape == (2,) + shape
