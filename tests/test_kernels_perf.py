"""The fast paths of the kernels: ``x.at[idx].add(y)`` (the scatter behind every gather's vjp) against
``np.add.at`` for each kind of index (repeated, negative, several arrays, non-adjacent fancy items,
masks, ints mixed in, broadcast values, every dtype); its derivatives and ``x[idx]``'s to order 2 in
both modes; the Embedding gradient against a hand-written NumPy one; errors as NumPy raises them."""
from __future__ import annotations

import numpy as np
import pytest

import tapegrad as tg
import tapegrad.numpy as tnp
from _tol import assert_close
from tapegrad.nn import functional as F
from tapegrad.numpy import _indexing

MASK = np.array([[True, False, True, False], [False, False, True, True], [True, True, False, False]])

# (name, x's shape, index, y's shape): every way an index can reach the scatter
INDICES = [
    ("repeated", (5, 4), (np.array([0, 3, 0, 0, 2]),), (5, 4)),
    ("a row repeated past the rounds", (5, 4), (np.array([3] * 20 + [1]),), (21, 4)),
    ("negative", (5, 4), (np.array([-1, 4, -5, 0]),), (4, 4)),
    ("2-d index array", (5, 4), (np.array([[1, 1], [4, 2]]),), (2, 2, 4)),
    ("sorted unique", (5, 4), (np.array([0, 2, 3]),), (3, 4)),
    ("two arrays (take_along_axis)", (3, 4), (np.arange(3)[:, None], np.array([[3, 0], [1, 1], [2, 3]])), (3, 2)),
    ("array on the last axis", (3, 4), (slice(None), np.array([2, 2, -1])), (3, 3)),
    ("fancy items apart", (3, 2, 4), (np.array([0, 2, 2]), slice(None), np.array([1, 3, 1])), (3, 2)),
    ("int beside an array", (3, 2, 4), (1, slice(None), np.array([0, 0, 3])), (3, 2)),
    ("ellipsis and newaxis", (3, 2, 4), (Ellipsis, None, np.array([3, 3])), (3, 2, 1, 2)),
    ("mask", (3, 4), (MASK,), (6,)),
    ("mask over leading axes", (3, 4, 2), (MASK,), (6, 2)),
    ("mask then a full slice", (3, 4, 2), (MASK, slice(None)), (6, 2)),
    ("trailing ellipsis", (3, 2, 4), (np.array([2, 0, 2]), Ellipsis), (3, 2, 4)),
    ("newaxis after the array", (5, 4), (np.array([1, -4]), None, slice(None)), (2, 1, 4)),
    ("empty index array", (5, 4), (np.array([], dtype=np.int64),), (0, 4)),
    ("0-d mask", (5, 4), (np.array(True),), (1, 5, 4)),
    ("broadcast value", (5, 4), (np.array([1, 1, 3]),), (1, 4)),
    ("scalar value", (5, 4), (np.array([1, 1, 3]),), ()),
]
IDS = [case[0] for case in INDICES]


@pytest.fixture(autouse=True, params=["rows", "add.at"])
def route(request, monkeypatch):
    """Every test runs through both routes of the scatter: the row path (lowered to take these small
    arrays) and NumPy's ``add.at``, which small scatters keep."""
    calls = []
    if request.param == "rows":
        monkeypatch.setattr(_indexing, "_ROWS_FROM", 0)
        row_path = _indexing._scatter_add_rows
        monkeypatch.setattr(_indexing, "_scatter_add_rows", lambda *args: calls.append(1) or row_path(*args))
    return request.param, calls


def _at_add(x, index, y):
    """``x.at[index].add(y)`` evaluated eagerly (``.at`` lives on traced arrays: vjp's output is the value)."""
    return tg.vjp(lambda x, y: x.at[index].add(y), x, y)[0]


def _draw(shape, dtype, rng):
    x = rng.standard_normal(shape)
    if np.dtype(dtype).kind == "c":
        x = x + 1j * rng.standard_normal(shape)
    return np.asarray(x, dtype=dtype)


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.complex128])
@pytest.mark.parametrize(("name", "shape", "index", "y_shape"), INDICES, ids=IDS)
def test_scatter_add_matches_numpy(name, shape, index, y_shape, dtype, route):
    rng = np.random.default_rng(0)
    x, y = _draw(shape, dtype, rng), _draw(y_shape, dtype, rng)
    expected = x.copy()
    np.add.at(expected, index, y)
    got = _at_add(x, index, y)
    assert got.dtype == expected.dtype
    assert_close(got, expected)
    route_name, calls = route
    assert bool(calls) == (route_name == "rows")  # the route named was the one taken


@pytest.mark.parametrize(("name", "shape", "index", "y_shape"), INDICES, ids=IDS)
def test_scatter_add_derivatives(name, shape, index, y_shape):
    rng = np.random.default_rng(1)
    x, y = _draw(shape, np.float64, rng), _draw(y_shape, np.float64, rng)
    tg.testing.check_grads(lambda x, y: tnp.sin(x.at[index].add(y * y)), (x, y), order=2, modes=("fwd", "rev"))


@pytest.mark.parametrize(("name", "shape", "index", "y_shape"), INDICES, ids=IDS)
def test_gather_derivatives(name, shape, index, y_shape):
    x = _draw(shape, np.float64, np.random.default_rng(2))
    tg.testing.check_grads(lambda x: tnp.sin(x[index]) * x[index], (x,), order=2, modes=("fwd", "rev"))


@pytest.mark.parametrize(("name", "shape", "index", "y_shape"), INDICES, ids=IDS)
def test_gather_gradient_counts_every_read(name, shape, index, y_shape):
    """``grad(sum(x[idx] * c))`` puts ``c``'s entries where they were read, summing repeats."""
    rng = np.random.default_rng(3)
    x = _draw(shape, np.float32, rng)
    c = _draw(x[index].shape, np.float32, rng)
    expected = np.zeros_like(x)
    np.add.at(expected, index, c)
    got = tg.grad(lambda x: tnp.sum(x[index] * c))(x)
    assert got.dtype == np.float32
    assert_close(got, expected)


def test_embedding_gradient():
    """Large enough (8192 values) for the row path by default."""
    rng = np.random.default_rng(4)
    table = rng.standard_normal((50, 16)).astype(np.float32)
    ids = rng.integers(-50, 50, (16, 32))
    ct = rng.standard_normal((16, 32, 16)).astype(np.float32)
    expected = np.zeros_like(table)
    for i, row in zip(ids.reshape(-1), ct.reshape(-1, 16)):  # one row at a time, the plainest reference
        expected[i] += row
    assert_close(tg.grad(lambda t: tnp.sum(t[ids] * ct))(table), expected)


def test_sort_gradient_follows_the_permutation():
    rng = np.random.default_rng(5)
    x, w = rng.standard_normal((6, 30)), rng.standard_normal((6, 30))
    order = np.argsort(x, axis=-1)
    expected = np.zeros_like(x)
    np.put_along_axis(expected, order, w, axis=-1)
    assert_close(tg.grad(lambda x: tnp.sum(tnp.sort(x, axis=-1) * w))(x), expected)


def test_scatter_keeps_a_non_contiguous_input_intact():
    x = np.arange(24.0).reshape(4, 6)[:, ::2]
    before = x.copy()
    expected = x.copy()
    np.add.at(expected, (np.array([0, 0, 3]),), 1.0)
    assert_close(_at_add(x, np.array([0, 0, 3]), 1.0), expected)
    assert_close(x, before)


@pytest.mark.parametrize("index", [np.array([0, 5]), np.array([-6, 1])])
def test_out_of_range_index_is_an_index_error(index):
    x = np.zeros((5, 2))
    with pytest.raises(IndexError):
        _at_add(x, index, 1.0)
    with pytest.raises(IndexError):
        tg.grad(lambda x: tnp.sum(x[index]))(x)


# jit refuses a 0-d mask (its shape depends on its value: the ConcretizationError of x[mask])
STAGEABLE = [case for case in INDICES if case[0] != "0-d mask"]


@pytest.mark.parametrize(("name", "shape", "index", "y_shape"), STAGEABLE, ids=[c[0] for c in STAGEABLE])
def test_gather_gradient_under_jit_and_vmap(name, shape, index, y_shape):
    """The scatter of the gather's vjp staged by jit, and batched by vmap (a batch of x, and a batch
    of cotangent weights), agrees with the eager gradient example by example."""
    rng = np.random.default_rng(6)
    xs = _draw((3,) + shape, np.float64, rng)
    cs = _draw((3,) + xs[0][index].shape, np.float64, rng)

    def loss(x, c):
        return tnp.sum(tnp.sin(x[index]) * c)

    g = tg.grad(loss)
    expected = np.stack([g(x, c) for x, c in zip(xs, cs)])
    assert_close(tg.jit(g)(xs[0], cs[0]), expected[0])
    assert_close(tg.vmap(g)(xs, cs), expected)
    assert_close(tg.vmap(g, in_axes=(None, 0))(xs[0], cs), np.stack([g(xs[0], c) for c in cs]))


def test_gather_gradient_with_indices_mapped_by_vmap():
    rng = np.random.default_rng(7)
    x = rng.standard_normal((6, 3))
    ids = np.array([[0, 5, 0, -1], [2, 2, 2, 1]])

    def loss(x, i):
        return tnp.sum(x[i] ** 2)

    expected = np.stack([tg.grad(loss)(x, i) for i in ids])
    assert_close(tg.vmap(tg.grad(loss), in_axes=(None, 0))(x, ids), expected)


# ---- layer_norm and group_norm: the fused kernel for concrete inputs -----------------------------------
def _reference_norm(x, axes, eps):
    x = x.astype(np.float64)
    mean = x.mean(axis=axes, keepdims=True)
    return (x - mean) / np.sqrt(((x - mean) ** 2).mean(axis=axes, keepdims=True) + eps)


NORM_CASES = [
    ("float32", np.float32, np.float32, True, True),
    ("float64 no affine", np.float64, None, False, False),
    ("weight only", np.float32, np.float32, True, False),
    ("bias only", np.float64, np.float64, False, True),
    ("float32 input, float64 weights", np.float32, np.float64, True, True),
    ("float16", np.float16, np.float16, True, True),
]


@pytest.mark.parametrize(("name", "dtype", "wdtype", "has_weight", "has_bias"), NORM_CASES,
                         ids=[c[0] for c in NORM_CASES])
def test_layer_norm_fused_matches_the_traced_composition(name, dtype, wdtype, has_weight, has_bias):
    rng = np.random.default_rng(8)
    x = (rng.standard_normal((4, 3, 5, 6)) * 3 + 10).astype(dtype)[:, :, ::-1]  # not contiguous either
    w = rng.standard_normal((5, 6)).astype(wdtype) if has_weight else None
    b = rng.standard_normal((5, 6)).astype(wdtype) if has_bias else None
    got = F.layer_norm(x, (5, 6), w, b)
    traced = tg.jit(lambda x: F.layer_norm(x, (5, 6), w, b))(x)
    expected = _reference_norm(x, (2, 3), 1e-5) * (1.0 if w is None else w) + (0.0 if b is None else b)
    assert got.dtype == traced.dtype == np.result_type(x, *(v for v in (w, b) if v is not None))
    assert_close(got, expected, dtype=x.dtype)  # normalised in x's precision, whatever the weights'
    assert_close(got, traced, dtype=x.dtype)


@pytest.mark.parametrize(("name", "dtype", "wdtype", "has_weight", "has_bias"), NORM_CASES,
                         ids=[c[0] for c in NORM_CASES])
def test_group_norm_fused_matches_the_traced_composition(name, dtype, wdtype, has_weight, has_bias):
    rng = np.random.default_rng(9)
    x = (rng.standard_normal((3, 6, 4, 5)) * 2 - 7).astype(dtype)
    w = rng.standard_normal(6).astype(wdtype) if has_weight else None
    b = rng.standard_normal(6).astype(wdtype) if has_bias else None
    got = F.group_norm(x, 3, w, b)
    traced = tg.jit(lambda x: F.group_norm(x, 3, w, b))(x)
    grouped = _reference_norm(x.reshape(3, 3, -1), (2,), 1e-5).reshape(x.shape)
    expected = grouped * (1.0 if w is None else w[:, None, None]) + (0.0 if b is None else b[:, None, None])
    assert got.dtype == traced.dtype
    assert_close(got, expected, dtype=x.dtype)  # normalised in x's precision, whatever the weights'
    assert_close(got, traced, dtype=x.dtype)


def test_norm_layers_with_parameters_take_the_fused_kernel_and_still_differentiate():
    """A LayerNorm module's Parameters are concrete outside grad (the fused kernel) and traced inside
    (the composition): the same values either way, and gradients that match finite differences."""
    rng = np.random.default_rng(10)
    net = tg.nn.LayerNorm(6)
    net.weight.assign(rng.standard_normal(6).astype(np.float32))
    x = rng.standard_normal((4, 6)).astype(np.float32)
    out, (g_weight, g_bias) = tg.value_and_grad(lambda x: tnp.sum(net(x) ** 3), grad_position=None,
                                                    weights=net.trainable_params())(x)
    normalised = _reference_norm(x, (1,), 1e-5)
    y = normalised * net.weight.value + net.bias.value
    assert_close(out, np.sum(y ** 3), dtype=np.float32)
    assert_close(np.sum(net(x) ** 3), np.sum(y ** 3), dtype=np.float32)
    assert_close(g_weight, np.sum(3 * y ** 2 * normalised, axis=0), dtype=np.float32)
    assert_close(g_bias, np.sum(3 * y ** 2, axis=0), dtype=np.float32)
    tg.testing.check_grads(lambda x, w, b: F.layer_norm(x, (6,), w, b) ** 2,
                           (x, rng.standard_normal(6), rng.standard_normal(6)), order=2)
    tg.testing.check_grads(lambda x, w: F.group_norm(x, 2, w) ** 2,
                           (rng.standard_normal((2, 4, 3)), rng.standard_normal(4)), order=2)
