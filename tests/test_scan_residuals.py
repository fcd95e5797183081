"""What reverse mode through ``scan`` stores: each step's residuals (the split body), or, with a
``checkpoint`` in the body, only the carries; and the derivatives of both policies against the
unrolled Python loop, to order 2, under ``vmap``, ``jit``, ``linearize`` and forward-over-reverse."""
from __future__ import annotations

import numpy as np
import pytest

import tapegrad as tg
import tapegrad.numpy as tnp
from _tol import assert_close
from tapegrad import extend
from tapegrad.testing import check_grads

RNG = np.random.default_rng(3)
WX = RNG.uniform(-0.5, 0.5, (2, 3))
XS = RNG.uniform(-1.0, 1.0, (5, 4, 2))  # 5 steps of a batch of 4 inputs of size 2
H0 = RNG.uniform(-1.0, 1.0, (4, 3))


def _step(wh, h, x):
    return tnp.tanh(x @ WX + h @ wh)


_checkpointed_step = tg.checkpoint(_step)


def _loss(wh, h0, xs, step=_step):
    _, hs = tg.scan(lambda h, x: (step(wh, h, x),) * 2, h0, xs)
    return tnp.sum(hs * hs)


def _unrolled(wh, h0, xs):
    h, total = h0, 0.0
    for x in xs:
        h = _step(wh, h, x)
        total = total + tnp.sum(h * h)
    return total


WH = RNG.uniform(-0.5, 0.5, (3, 3))


def _scans(program):
    return [eqn for eqn in program.eqns if eqn.prim.name == "scan"]


def _prims(closed):
    return {eqn.prim.name for eqn in closed.program.eqns}


def test_the_backward_scan_reads_residuals_and_recomputes_nothing():
    program = tg.make_program(tg.grad(_loss, (0, 1, 2)))(WH, H0, XS)
    forward, backward = _scans(program)
    assert "tanh" in _prims(forward.params["body"])
    assert "tanh" not in _prims(backward.params["body"])  # the step is not run again
    # the forward scan returns the carry, the ys and the residuals of each step, stacked
    n_user = 2
    assert len(forward.outs) > n_user
    assert all(out.aval.shape[0] == len(XS) for out in forward.outs[1:])


def test_a_checkpointed_body_stores_only_the_carries_and_recomputes_the_step():
    program = tg.make_program(tg.grad(lambda wh: _loss(wh, H0, XS, _checkpointed_step)))(WH)
    forward, backward = _scans(program)
    assert "tanh" in _prims(backward.params["body"])  # the step runs again, backward
    residuals = forward.outs[2:]
    assert [tuple(r.aval.shape) for r in residuals] == [(len(XS),) + H0.shape]  # the carry entering each step


@pytest.mark.parametrize("step", [_step, _checkpointed_step], ids=["residuals", "checkpoint"])
def test_both_policies_match_the_unrolled_loop_to_order_2(step):
    for argnum in range(3):
        got = tg.grad(_loss, argnum)(WH, H0, XS, step)
        assert_close(got, tg.grad(_unrolled, argnum)(WH, H0, XS))
    check_grads(lambda wh, h0, xs: _loss(wh, h0, xs, step), (WH, H0, XS), order=2)
    hess = tg.hessian(lambda wh: _loss(wh, H0, XS, step))(WH)
    assert_close(hess, tg.hessian(lambda wh: _unrolled(wh, H0, XS))(WH))


@pytest.mark.parametrize("step", [_step, _checkpointed_step], ids=["residuals", "checkpoint"])
def test_both_policies_under_jit_vmap_and_linearize(step):
    want = tg.grad(_unrolled)(WH, H0, XS)
    assert_close(tg.jit(tg.grad(_loss), static_argnums=3)(WH, H0, XS, step), want)
    batch = np.stack([H0, -H0, 0.5 * H0])
    per_example = tg.vmap(tg.grad(_loss), in_axes=(None, 0, None, None))(WH, batch, XS, step)
    for k in range(len(batch)):
        assert_close(per_example[k], tg.grad(_unrolled)(WH, batch[k], XS))
    # linearize replays the recorded scan's jvp rule, which must ignore the residuals it is handed
    direction = RNG.uniform(-1.0, 1.0, WH.shape)
    _, jvp_fn = tg.linearize(lambda wh: _loss(wh, H0, XS, step), WH)
    _, want_t = tg.jvp(lambda wh: _unrolled(wh, H0, XS), (WH,), (direction,))
    assert_close(jvp_fn(direction), want_t)


def test_a_vjp_fn_called_twice_reuses_the_stored_residuals():
    out, vjp_fn = tg.vjp(lambda wh, xs: _loss(wh, H0, xs), WH, XS)
    first = vjp_fn(np.array(1.0))
    second = vjp_fn(np.array(2.0))
    want = tg.grad(_unrolled, (0, 2))(WH, H0, XS)
    for got1, got2, w in zip(first, second, want):
        assert_close(got1, w)
        assert_close(got2, 2.0 * w)


def test_integer_carries_and_unused_ys_have_no_cotangent_inputs():
    def f(w):
        (n, acc), ys = tg.scan(lambda c, x: ((c[0] + 1, c[1] + tnp.sin(w * x)), x * 0), (0, 0.0), XS[:, 0, 0])
        return acc * n
    want = 5 * np.sum(np.cos(1.3 * XS[:, 0, 0]) * XS[:, 0, 0])
    assert_close(tg.grad(f)(np.array(1.3)), want)
    check_grads(f, (np.array(1.3),), order=2)


def test_defvjp_fwd_refuses_a_single_result_primitive():
    prim = extend.Primitive("tests.single")
    with pytest.raises(ValueError, match="multiple_results"):
        extend.defvjp_fwd(prim, lambda x: ([x], None))
    assert prim.vjp_fwd is None
