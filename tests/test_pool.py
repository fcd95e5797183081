"""Pooling (tapegrad.nn._pool, _pool_layers): values and gradients against PyTorch over a table of
kernel/stride/padding/dilation/ceil_mode, derivatives to order 2 in both modes, ties, vmap, jit, double
backward (a gradient penalty), the modules, and the error messages."""
from __future__ import annotations

import itertools

import numpy as np
import pytest

import tapegrad as tg
import tapegrad.numpy as tnp
from _tol import assert_close
from _vmapcheck import check_vmap, check_vmap_mixes
from tapegrad.nn import _pool
from tapegrad.nn._pool import adaptive_avg_pool1d, adaptive_avg_pool2d, avg_pool1d, avg_pool2d, max_pool1d, max_pool2d
from tapegrad.nn._pool_layers import AdaptiveAvgPool1d, AdaptiveAvgPool2d, AvgPool1d, AvgPool2d, MaxPool1d, MaxPool2d
from tapegrad.testing import check_grads

DTYPES = [np.float64, np.float32]

# (kernel_size, stride, padding, dilation, ceil_mode); avg pooling drops dilation (cases with one skip it)
CASES_2D = [
    (2, None, 0, 1, False),
    (3, 2, 1, 1, False),
    (3, 2, 1, 1, True),
    ((2, 3), (1, 2), (1, 1), 1, False),
    ((3, 2), (2, 1), (1, 0), 1, True),
    (2, 3, 0, 1, True),           # stride > kernel: elements no window reads
    ((2, 3), (2, 1), (1, 1), 1, True),  # one axis tiles (a reshape for avg), the other overlaps
    (3, 1, 1, 1, False),          # overlapping windows
    (2, 1, 1, (2, 1), False),     # dilation, max only
    (3, 2, 1, 2, True),           # dilation with ceil_mode, max only
]
CASES_1D = [
    (2, None, 0, 1, False),
    (3, 2, 1, 1, True),
    (4, 3, 2, 1, False),
    (3, 1, 0, 1, False),
    (2, 2, 1, 3, True),           # dilation, max only
]
SHAPE_2D, SHAPE_1D = (2, 3, 7, 8), (2, 3, 10)


def _distinct(rng, shape, dtype=np.float64):
    """A random permutation of well-separated values: no ties, so the argmax is stable under the
    finite-difference step."""
    return (rng.permutation(int(np.prod(shape))).reshape(shape) * 0.1 - 1.0).astype(dtype)


def _torch():
    import torch
    return torch


def _case_id(case):
    return "k{}-s{}-p{}-d{}-{}".format(*case[:4], "ceil" if case[4] else "floor")


def _has_dilation(case):
    return case[3] not in (1, (1,), (1, 1))


def _max(n):
    return max_pool1d if n == 1 else max_pool2d


def _avg(n):
    return avg_pool1d if n == 1 else avg_pool2d


TABLE = [(1, c) for c in CASES_1D] + [(2, c) for c in CASES_2D]
TABLE_IDS = [f"{n}d-{_case_id(c)}" for n, c in TABLE]


# ---- values and first-order gradients against PyTorch -----------------------------------------------
@pytest.mark.peer("torch")
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n,case", TABLE, ids=TABLE_IDS)
def test_max_pool_matches_torch(n, case, dtype):
    torch = _torch()
    k, s, p, d, ceil = case
    rng = np.random.default_rng(0)
    for shape in ((SHAPE_1D, SHAPE_1D[1:]) if n == 1 else (SHAPE_2D, SHAPE_2D[1:])):
        x = rng.standard_normal(shape).astype(dtype)
        out = _max(n)(x, k, s, p, d, ceil)
        tx = torch.tensor(x, requires_grad=True)
        ref = getattr(torch.nn.functional, f"max_pool{n}d")(tx, k, s, p, d, ceil)
        assert out.dtype == dtype and out.shape == tuple(ref.shape)
        np.testing.assert_array_equal(out, ref.detach().numpy())
        ct = rng.standard_normal(out.shape).astype(dtype)
        ref.backward(torch.tensor(ct))
        (g,) = tg.vjp(lambda x: _max(n)(x, k, s, p, d, ceil), x)[1](ct)
        assert g.dtype == dtype
        assert_close(g, tx.grad.numpy(), rtol=1e-6 if dtype == np.float32 else 1e-12, atol=1e-6)


@pytest.mark.peer("torch")
@pytest.mark.parametrize("count_include_pad", [True, False])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n,case", [t for t in TABLE if not _has_dilation(t[1])],
                         ids=[i for i, t in zip(TABLE_IDS, TABLE) if not _has_dilation(t[1])])
def test_avg_pool_matches_torch(n, case, dtype, count_include_pad):
    torch = _torch()
    k, s, p, _, ceil = case
    rng = np.random.default_rng(1)
    tol = dict(rtol=1e-5, atol=1e-6) if dtype == np.float32 else dict(rtol=1e-12, atol=1e-14)
    for shape in ((SHAPE_1D, SHAPE_1D[1:]) if n == 1 else (SHAPE_2D, SHAPE_2D[1:])):
        x = rng.standard_normal(shape).astype(dtype)
        out = _avg(n)(x, k, s, p, ceil, count_include_pad)
        tx = torch.tensor(x, requires_grad=True)
        ref = getattr(torch.nn.functional, f"avg_pool{n}d")(tx, k, s, p, ceil, count_include_pad)
        assert out.dtype == dtype and out.shape == tuple(ref.shape)
        assert_close(out, ref.detach().numpy(), **tol)
        ct = rng.standard_normal(out.shape).astype(dtype)
        ref.backward(torch.tensor(ct))
        (g,) = tg.vjp(lambda x: _avg(n)(x, k, s, p, ceil, count_include_pad), x)[1](ct)
        assert g.dtype == dtype
        assert_close(g, tx.grad.numpy(), **tol)


@pytest.mark.peer("torch")
@pytest.mark.parametrize("divisor", [1, 3, -2])
def test_avg_pool2d_divisor_override_matches_torch(divisor):
    torch = _torch()
    x = np.random.default_rng(2).standard_normal(SHAPE_2D)
    out = avg_pool2d(x, 3, 2, 1, True, False, divisor_override=divisor)
    ref = torch.nn.functional.avg_pool2d(torch.tensor(x), 3, 2, 1, True, False, divisor_override=divisor)
    assert_close(out, ref.numpy(), rtol=1e-12)


@pytest.mark.peer("torch")
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("output_size", [(3, 4), (4, 3), 5, (None, 3), (7, None), 1, (2, 8), (1, 4)])
def test_adaptive_avg_pool2d_matches_torch(output_size, dtype):
    torch = _torch()
    x = np.random.default_rng(3).standard_normal(SHAPE_2D).astype(dtype)
    out = adaptive_avg_pool2d(x, output_size)
    ref = torch.nn.functional.adaptive_avg_pool2d(torch.tensor(x), output_size).numpy()
    assert out.dtype == dtype and out.shape == ref.shape
    assert_close(out, ref, rtol=1e-5 if dtype == np.float32 else 1e-12, atol=1e-6)
    out = adaptive_avg_pool2d(x[0], output_size)  # unbatched
    assert_close(out, ref[0], rtol=1e-5 if dtype == np.float32 else 1e-12, atol=1e-6)


@pytest.mark.peer("torch")
@pytest.mark.parametrize("output_size", [3, 4, 10, 1, (7,)])
def test_adaptive_avg_pool1d_matches_torch(output_size):
    torch = _torch()
    x = np.random.default_rng(4).standard_normal(SHAPE_1D)
    out = adaptive_avg_pool1d(x, output_size)
    ref = torch.nn.functional.adaptive_avg_pool1d(torch.tensor(x), output_size).numpy()
    assert_close(out, ref, rtol=1e-12)


# ---- derivatives to order 2, both modes ---------------------------------------------------------------
GRAD_SHAPES = {1: (1, 2, 7), 2: (1, 2, 5, 6)}


@pytest.mark.parametrize("n,case", TABLE, ids=TABLE_IDS)
def test_max_pool_check_grads(n, case):
    k, s, p, d, ceil = case
    x = _distinct(np.random.default_rng(5), GRAD_SHAPES[n])
    check_grads(lambda x: _max(n)(x, k, s, p, d, ceil), (x,), order=2, name=f"max_pool{n}d")


@pytest.mark.parametrize("count_include_pad", [True, False])
@pytest.mark.parametrize("n,case", [t for t in TABLE if not _has_dilation(t[1])],
                         ids=[i for i, t in zip(TABLE_IDS, TABLE) if not _has_dilation(t[1])])
def test_avg_pool_check_grads(n, case, count_include_pad):
    k, s, p, _, ceil = case
    x = np.random.default_rng(6).standard_normal(GRAD_SHAPES[n])
    check_grads(lambda x: _avg(n)(x, k, s, p, ceil, count_include_pad), (x,), order=2, name=f"avg_pool{n}d")


@pytest.mark.parametrize("output_size", [(2, 4), (3, 3), (None, 4)])
def test_adaptive_avg_pool_check_grads(output_size):
    x = np.random.default_rng(7).standard_normal(GRAD_SHAPES[2])
    check_grads(lambda x: adaptive_avg_pool2d(x, output_size), (x,), order=2, name="adaptive_avg_pool2d")
    check_grads(lambda x: adaptive_avg_pool1d(x, 3), (x[0],), order=2, name="adaptive_avg_pool1d")


def test_scatter_and_gather_check_grads():
    # the rules' own primitives, on a cotangent / tangent: linear, each other's transposes
    x = _distinct(np.random.default_rng(8), (2, 5, 6))
    params = dict(window=(3, 2), strides=(2, 1), dilation=(1, 2), padding=((1, 1), (0, 1)))
    ans, index = _pool.max_pool_p.impl(x, **params)
    ct = np.random.default_rng(9).standard_normal(ans.shape)
    scatter = lambda c: _pool.select_scatter_p.bind(c, index, in_spatial=(5, 6), **params)
    gather = lambda t: _pool.window_gather_p.bind(t, index, **params)
    check_grads(scatter, (ct,), order=2, name="select_scatter")
    check_grads(gather, (x,), order=2, name="window_gather")
    # <scatter(c), t> == <c, gather(t)>
    assert_close(np.vdot(scatter(ct), x), np.vdot(ct, gather(x)), rtol=1e-12)


@pytest.mark.parametrize("params", [
    dict(window=(3, 2), strides=(2, 1), dilation=(1, 2), padding=((1, 1), (0, 1))),  # overlapping, dilated
    dict(window=(2, 3), strides=(2, 3), dilation=(1, 1), padding=((1, 0), (0, 0))),  # disjoint
    dict(window=(2, 2), strides=(3, 3), dilation=(1, 1), padding=((0, 0), (0, 0))),  # gaps
], ids=["overlap", "disjoint", "gaps"])
def test_window_sum_and_its_transpose(params):
    x = np.random.default_rng(24).standard_normal((2, 5, 6))
    window_sum = lambda x: _pool.window_sum_p.bind(x, **params)
    ct = np.random.default_rng(25).standard_normal(window_sum(x).shape)
    transpose = lambda c: _pool.window_sum_transpose_p.bind(c, in_spatial=(5, 6), **params)
    padded = np.pad(x, ((0, 0),) + params["padding"])
    (kh, kw), (sh, sw), (dh, dw) = params["window"], params["strides"], params["dilation"]
    ref = sum(padded[:, i * dh:, j * dw:][:, ::sh, ::sw][:, :ct.shape[1], :ct.shape[2]]
              for i in range(kh) for j in range(kw))
    assert_close(window_sum(x), ref, rtol=1e-12)
    assert_close(np.vdot(transpose(ct), x), np.vdot(ct, window_sum(x)), rtol=1e-12)
    check_grads(window_sum, (x,), order=2, name="window_sum")
    check_grads(transpose, (ct,), order=2, name="window_sum_transpose")


# ---- ties, non-finite values, dtypes ---------------------------------------------------------------
@pytest.mark.peer("torch")
@pytest.mark.parametrize("case", [(2, None, 0, 1, False), (3, 1, 1, 1, False), (3, 2, 1, 1, True),
                                  (2, 1, 0, 2, False)], ids=_case_id)
def test_ties_go_to_the_first_maximum_as_torch(case):
    torch = _torch()
    k, s, p, d, ceil = case
    x = np.random.default_rng(10).integers(0, 3, size=(2, 2, 6, 7)).astype(np.float64)  # many ties
    x[0, 0] = 1.0  # a plane of equal values
    ct = np.random.default_rng(11).standard_normal(max_pool2d(x, k, s, p, d, ceil).shape)
    (g,) = tg.vjp(lambda x: max_pool2d(x, k, s, p, d, ceil), x)[1](ct)
    tx = torch.tensor(x, requires_grad=True)
    torch.nn.functional.max_pool2d(tx, k, s, p, d, ceil).backward(torch.tensor(ct))
    assert_close(g, tx.grad.numpy(), rtol=1e-12, atol=1e-12)
    # forward mode reads the tangent at the same element
    t = np.random.default_rng(12).standard_normal(x.shape)
    _, t_out = tg.jvp(lambda x: max_pool2d(x, k, s, p, d, ceil), (x,), (t,))
    assert_close(np.vdot(ct, t_out), np.vdot(g, t), rtol=1e-12)


def test_non_finite_cotangents_are_routed_exactly():
    # the scatter selects by bit pattern: unselected elements are 0, not inf * 0 = nan
    x = _distinct(np.random.default_rng(13), (1, 1, 4, 4))
    ct = np.array([[[[np.inf, -np.inf], [np.nan, 1.0]]]])
    (g,) = tg.vjp(lambda x: max_pool2d(x, 2), x)[1](ct)
    assert np.count_nonzero(g == 0) == 12
    assert np.isposinf(g).sum() == 1 and np.isneginf(g).sum() == 1 and np.isnan(g).sum() == 1


@pytest.mark.peer("torch")
def test_inf_and_nan_inputs():
    torch = _torch()
    x = np.array([[[1.0, np.nan, 3.0, np.nan, -np.inf, -np.inf, 2.0, np.inf]]])
    ref = torch.nn.functional.max_pool1d(torch.tensor(x), 4, 2, 1).numpy()
    np.testing.assert_array_equal(max_pool1d(x, 4, 2, 1), ref)  # nan propagates, as PyTorch


@pytest.mark.parametrize("dtype", [np.int64, np.int32, np.float16])
def test_max_pool_other_dtypes(dtype):
    x = np.random.default_rng(14).integers(-50, 50, size=(2, 5, 6)).astype(dtype)
    out = max_pool2d(x, 3, 2, 1)
    assert out.dtype == dtype
    padded = np.pad(x.astype(np.float64), ((0, 0), (1, 1), (1, 1)), constant_values=-np.inf)
    ref = np.lib.stride_tricks.sliding_window_view(padded, (3, 3), axis=(1, 2))[:, ::2, ::2].max(axis=(-2, -1))
    np.testing.assert_array_equal(out, ref)


def test_float32_gradients_stay_float32():
    x = np.random.default_rng(15).standard_normal((2, 3, 6, 6)).astype(np.float32)
    for fn in (lambda x: max_pool2d(x, 3, 2, 1), lambda x: avg_pool2d(x, 3, 2, 1, count_include_pad=False),
               lambda x: adaptive_avg_pool2d(x, (4, 5)), lambda x: avg_pool2d(x, 2, ceil_mode=True, padding=1)):
        out, g = tg.value_and_grad(lambda x, fn=fn: tnp.sum(fn(x)))(x)
        assert fn(x).dtype == np.float32 and g.dtype == np.float32


# ---- double backward: a gradient penalty through max pooling -----------------------------------------
@pytest.mark.peer("torch")
def test_gradient_penalty_through_max_pool_matches_torch():
    torch = _torch()
    rng = np.random.default_rng(16)
    x = _distinct(rng, (2, 3, 6, 6))
    a = rng.uniform(0.5, 1.5, (3, 1, 1))
    w = rng.standard_normal((2, 3, 3, 3))

    def critic(x, a):
        h = max_pool2d(x * a, 3, 2, 1)
        return tnp.sum(h * h * w)

    def penalty(a):
        g = tg.grad(critic)(x, a)
        return tnp.sqrt(tnp.sum(g * g))  # grad of ||grad||

    got = tg.grad(penalty)(a)
    tx, ta = torch.tensor(x, requires_grad=True), torch.tensor(a, requires_grad=True)
    h = torch.nn.functional.max_pool2d(tx * ta, 3, 2, 1)
    (g,) = torch.autograd.grad((h * h * torch.tensor(w)).sum(), tx, create_graph=True)
    (ref,) = torch.autograd.grad(g.pow(2).sum().sqrt(), ta)
    assert_close(got, ref.numpy(), rtol=1e-10)
    check_grads(penalty, (a,), order=1)
    assert_close(tg.jit(tg.grad(penalty))(a), got, rtol=1e-12)


# ---- vmap and jit ------------------------------------------------------------------------------------
def _pool_draw(shape):
    return lambda rng: (_distinct(rng, shape),)


@pytest.mark.parametrize("fn", [
    lambda x: max_pool2d(x, 3, 2, 1, ceil_mode=True),
    lambda x: max_pool2d(x, 2),
    lambda x: avg_pool2d(x, 3, 2, 1, count_include_pad=False),
    lambda x: avg_pool2d(x, 2),
    lambda x: adaptive_avg_pool2d(x, (2, 4)),
    lambda x: max_pool1d(x[0], 3, 1, 1, 2),
], ids=["max3", "max2", "avg3", "avg2", "adaptive", "max1d"])
def test_vmap_against_a_loop(fn):
    shape = (2, 5, 6)  # unbatched examples (C, H, W): the batch axis lands at 0, 1 and 3 (spatial)
    x = _distinct(np.random.default_rng(17), shape)
    for in_axes in ((0,), (1,), (-1,)):
        check_vmap(fn, (x,), in_axes, draw=_pool_draw(shape))
    check_vmap(fn, (x[None],), (0,), draw=lambda rng: (_distinct(rng, (1,) + shape),))  # batched (N, C, H, W)


@pytest.mark.parametrize("params", [dict(k=2, s=None, p=0, d=1), dict(k=3, s=1, p=1, d=1),
                                    dict(k=2, s=1, p=1, d=2)], ids=["disjoint", "overlap", "dilated"])
def test_vmap_of_vjp_and_jvp_in_axes_mixes(params):
    # (x, ct) and (x, t) with one argument shared (None) and the other batched: the scatter's, the
    # gather's and the argmax's batch rules with operands mapped on different axes
    k, s, p, d = params.values()
    pool = lambda x: max_pool2d(x, k, s, p, d)
    x = _distinct(np.random.default_rng(18), (2, 5, 6))
    ct = np.random.default_rng(19).standard_normal(pool(x).shape)
    vjp = lambda x, ct: tg.vjp(pool, x)[1](ct)[0]
    jvp = lambda x, t: tg.jvp(pool, (x,), (t,))[1]
    check_vmap_mixes(vjp, (x, ct), draw=lambda rng: (_distinct(rng, x.shape), rng.standard_normal(ct.shape)))
    check_vmap_mixes(jvp, (x, x * 0.5), draw=lambda rng: (_distinct(rng, x.shape), rng.standard_normal(x.shape)))


def test_vmap_of_per_example_gradients():
    # per-example gradients of a pooled loss: vmap(grad) against a loop, weights shared
    x = _distinct(np.random.default_rng(20), (3, 2, 6, 6))
    w = np.random.default_rng(21).standard_normal((2, 3, 3))
    loss = lambda x, w: tnp.sum(max_pool2d(x, 2) ** 2 * w) + tnp.sum(avg_pool2d(x, 3, 1, 1))
    grads = tg.vmap(tg.grad(loss), in_axes=(0, None))(x, w)
    for i in range(3):
        assert_close(grads[i], tg.grad(loss)(x[i], w), rtol=1e-12)


def test_jit_equals_eager():
    x = _distinct(np.random.default_rng(22), (2, 3, 7, 6)).astype(np.float32)
    def fn(x):
        return (tnp.sum(max_pool2d(x, 3, 2, 1, ceil_mode=True) ** 2) + tnp.sum(avg_pool2d(x, 2, 1, 1) ** 2)
                + tnp.sum(adaptive_avg_pool2d(x, (3, 4)) ** 2) + tnp.sum(max_pool1d(x[0], 2) ** 2))
    for f in (fn, tg.grad(fn), tg.grad(lambda x: tnp.sum(tg.grad(fn)(x) ** 2))):
        eager, jitted = f(x), tg.jit(f)(x)
        assert jitted.dtype == eager.dtype
        assert_close(jitted, eager, rtol=1e-6)
    program = str(tg.make_program(tg.grad(fn))(x))
    assert "max_pool" in program and "select_scatter" in program


def test_primitives_have_every_rule():
    for prim in (_pool.max_pool_p, _pool.select_scatter_p, _pool.window_gather_p, _pool.window_sum_p,
                 _pool.window_sum_transpose_p):
        assert prim.impl and prim.abstract_eval and prim.batch_rule, prim
        assert prim.nondiff or (prim.vjp_rules and prim.jvp_rule), prim


# ---- modules -----------------------------------------------------------------------------------------
def test_modules_call_the_functions_and_print_like_torch():
    x = _distinct(np.random.default_rng(23), (2, 3, 7, 8))
    cases = [
        (MaxPool2d(3, 2, 1, ceil_mode=True), max_pool2d(x, 3, 2, 1, ceil_mode=True),
         "MaxPool2d(kernel_size=3, stride=2, padding=1, dilation=1, ceil_mode=True)"),
        (MaxPool2d((2, 3)), max_pool2d(x, (2, 3)),
         "MaxPool2d(kernel_size=(2, 3), stride=(2, 3), padding=0, dilation=1, ceil_mode=False)"),
        (AvgPool2d(2, 1, 1, count_include_pad=False), avg_pool2d(x, 2, 1, 1, count_include_pad=False),
         "AvgPool2d(kernel_size=2, stride=1, padding=1)"),
        (AvgPool2d(2, divisor_override=3), avg_pool2d(x, 2, divisor_override=3),
         "AvgPool2d(kernel_size=2, stride=2, padding=0)"),
        (AdaptiveAvgPool2d((3, None)), adaptive_avg_pool2d(x, (3, None)), "AdaptiveAvgPool2d(output_size=(3, None))"),
        (MaxPool1d(3, 2), max_pool1d(x[0], 3, 2),
         "MaxPool1d(kernel_size=3, stride=2, padding=0, dilation=1, ceil_mode=False)"),
        (AvgPool1d(3, ceil_mode=True), avg_pool1d(x[0], 3, ceil_mode=True),
         "AvgPool1d(kernel_size=3, stride=3, padding=0)"),
        (AdaptiveAvgPool1d(4), adaptive_avg_pool1d(x[0], 4), "AdaptiveAvgPool1d(output_size=4)"),
    ]
    for module, expected, text in cases:
        inp = x[0] if type(module).__name__.endswith("1d") else x
        np.testing.assert_array_equal(module(inp), expected)
        assert repr(module) == text
        assert module.trainable_params() == tg.ParameterTuple(())


def test_modules_check_their_arguments_when_built():
    with pytest.raises(ValueError, match="kernel_size must be positive"):
        MaxPool2d(0)
    with pytest.raises(ValueError, match="padding must be at most half"):
        AvgPool2d(2, padding=2)
    with pytest.raises(TypeError, match="stride must be an int"):
        MaxPool1d(2, stride=1.5)
    with pytest.raises(ValueError, match="output_size must be positive"):
        AdaptiveAvgPool2d((0, 2))


# ---- errors ------------------------------------------------------------------------------------------
X4 = np.zeros((1, 1, 5, 5))


@pytest.mark.parametrize("call,error,match", [
    (lambda: max_pool2d(X4, 0), ValueError, "max_pool2d: kernel_size must be positive"),
    (lambda: max_pool2d(X4, -1), ValueError, "kernel_size must be positive"),
    (lambda: max_pool2d(X4, 2.0), TypeError, "kernel_size must be an int or a tuple of 2 ints"),
    (lambda: max_pool2d(X4, (2, 2, 2)), TypeError, "kernel_size must be an int or a tuple of 2 ints"),
    (lambda: max_pool2d(X4, True), TypeError, "kernel_size must be an int"),
    (lambda: max_pool2d(X4, 2, 0), ValueError, "stride must be positive"),
    (lambda: max_pool2d(X4, 2, (1, "a")), TypeError, "stride must be an int"),
    (lambda: max_pool2d(X4, 2, 1, -1), ValueError, "padding must be non-negative"),
    (lambda: max_pool2d(X4, 3, 1, 2), ValueError, "padding must be at most half of kernel_size"),
    (lambda: max_pool2d(X4, 2, 1, 0, 0), ValueError, "dilation must be positive"),
    (lambda: max_pool2d(X4, 6), ValueError, r"too small .* output size would be \(0, 0\)"),
    (lambda: max_pool2d(X4, 2, ceil_mode=1), TypeError, "ceil_mode must be a bool"),
    (lambda: max_pool2d(X4[0, 0], 2), ValueError, r"input must be \(N, C, H, W\) or \(C, H, W\)"),
    (lambda: max_pool1d(X4, 2), ValueError, r"input must be \(N, C, L\) or \(C, L\)"),
    (lambda: max_pool2d(X4.astype(complex), 2), TypeError, "input must be real"),
    (lambda: avg_pool2d(X4.astype(np.int64), 2), TypeError, "input must be floating-point"),
    (lambda: avg_pool2d(X4, 3, 1, 2), ValueError, "padding must be at most half"),
    (lambda: avg_pool2d(X4, 2, divisor_override=0), ValueError, "divisor_override must not be zero"),
    (lambda: avg_pool2d(X4, 2, divisor_override=2.0), TypeError, "divisor_override must be None or an int"),
    (lambda: avg_pool1d(X4[0], 0), ValueError, "avg_pool1d: kernel_size must be positive"),
    (lambda: adaptive_avg_pool2d(X4, (2, 0)), ValueError, "output_size must be positive"),
    (lambda: adaptive_avg_pool2d(X4, (2, 2, 2)), TypeError, "output_size must be an int or a tuple of 2"),
    (lambda: adaptive_avg_pool2d(X4[0, 0], 2), ValueError, r"input must be \(N, C, H, W\)"),
])
def test_errors_name_the_argument(call, error, match):
    with pytest.raises(error, match=match):
        call()


# ---- values against a NumPy reference (runs without PyTorch) -------------------------------------------
def _reference_pool(x, n, kind, k, s, p, d, ceil, count_include_pad=True):
    """PyTorch's pooling, window by window: output length ``floor((L + 2p - d(k-1) - 1 [+ s-1]) / s) + 1``,
    dropping a ceil-mode window that starts in the right padding; max over the in-bounds elements, or
    their sum over the window size clipped to the padded input (``count_include_pad``) or to the input."""
    tup = lambda v: (v,) * n if isinstance(v, int) else tuple(v)
    k, p, d = tup(k), tup(p), tup(d)
    s = k if s is None else tup(s)
    lengths = x.shape[-n:]
    outs = []
    for L, kk, ss, pp, dd in zip(lengths, k, s, p, d):
        o = (L + 2 * pp - dd * (kk - 1) - 1 + (ss - 1 if ceil else 0)) // ss + 1
        if ceil and (o - 1) * ss >= L + pp:
            o -= 1
        outs.append(o)
    out = np.empty(x.shape[:-n] + tuple(outs), x.dtype)
    for pos in itertools.product(*[range(o) for o in outs]):
        if kind == "max":
            axes = [[o * ss - pp + j * dd for j in range(kk)] for o, ss, pp, kk, dd in zip(pos, s, p, k, d)]
            axes = [[i for i in a if 0 <= i < L] for a, L in zip(axes, lengths)]
            window = x[(Ellipsis,) + np.ix_(*axes)]
            out[(Ellipsis,) + pos] = window.reshape(window.shape[:-n] + (-1,)).max(axis=-1)
        else:
            starts = [o * ss - pp for o, ss, pp in zip(pos, s, p)]
            ends = [min(a + kk, L + pp) for a, kk, L, pp in zip(starts, k, lengths, p)]
            padded_size = np.prod([e - a for a, e in zip(starts, ends)])
            starts = [max(a, 0) for a in starts]
            ends = [min(e, L) for e, L in zip(ends, lengths)]
            window = x[(Ellipsis,) + tuple(slice(a, e) for a, e in zip(starts, ends))]
            size = padded_size if count_include_pad else np.prod([e - a for a, e in zip(starts, ends)])
            out[(Ellipsis,) + pos] = window.reshape(window.shape[:-n] + (-1,)).sum(axis=-1) / size
    return out


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n,case", TABLE, ids=TABLE_IDS)
def test_max_pool_matches_reference(n, case, dtype):
    x = np.random.default_rng(0).standard_normal(SHAPE_1D if n == 1 else SHAPE_2D).astype(dtype)
    out = _max(n)(x, *case)
    assert out.dtype == dtype
    np.testing.assert_array_equal(out, _reference_pool(x, n, "max", *case))


@pytest.mark.parametrize("count_include_pad", [True, False])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n,case", [t for t in TABLE if not _has_dilation(t[1])],
                         ids=[i for i, t in zip(TABLE_IDS, TABLE) if not _has_dilation(t[1])])
def test_avg_pool_matches_reference(n, case, dtype, count_include_pad):
    x = np.random.default_rng(1).standard_normal(SHAPE_1D if n == 1 else SHAPE_2D).astype(dtype)
    k, s, p, _, ceil = case
    out = _avg(n)(x, k, s, p, ceil, count_include_pad)
    assert out.dtype == dtype
    ref = _reference_pool(x.astype(np.float64), n, "avg", k, s, p, 1, ceil, count_include_pad)
    assert_close(out, ref, rtol=1e-5 if dtype == np.float32 else 1e-12, atol=1e-6)
