"""``vmap`` staged by ``jit`` runs as a loop over the batch (``_control_flow/_batch_loop.py``) where the
compiled executor lowers one example's program: the same numbers as the batched program and as a Python
loop over the examples, by every route; the batched program where one example's program does not lower."""
from __future__ import annotations

import numpy as np
import pytest

import tapegrad as tg
import tapegrad.numpy as tnp
from _tol import assert_close
from tapegrad._jit import native

pytestmark = pytest.mark.skipif(not native.available(), reason="numba is not installed")
B = 5


@pytest.fixture(autouse=True)
def _compiled(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("TAPEGRAD_NUMBA_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "numba"))
    monkeypatch.setenv("TAPEGRAD_NATIVE_STRICT", "1")
    saved = tg.config.compiled_executor
    tg.config.compiled_executor = True
    yield
    tg.config.compiled_executor = saved


def oscillator(k, y0):
    """A small per-example state: 50 Euler steps of a damped oscillator, then a scalar and a vector."""
    def body(i, y):
        return y + 0.05 * tnp.stack([y[1], -k[0] * y[0] - k[1] * y[1]])
    y = tg.fori_loop(0, 50, body, y0)
    return tnp.sum(y * y), y


def _scans(program) -> int:
    """The loops over the batch in ``program``: scans of ``B`` steps with no carry (a fori_loop's
    scan carries its state)."""
    return sum(eqn.prim.name == "scan" and eqn.params["length"] == B and eqn.params["n_carry"] == 0
               for eqn in program.eqns)


def batched(fn, *args, **vmap_kwargs):
    """``jit(vmap(fn))`` with the compiled executor off: the batched program."""
    tg.config.compiled_executor = False
    try:
        return tg.jit(tg.vmap(fn, **vmap_kwargs))(*args)
    finally:
        tg.config.compiled_executor = True


def data(seed=0):
    rng = np.random.default_rng(seed)
    return rng.uniform(0.5, 1.5, (B, 2)), rng.uniform(-1.0, 1.0, (B, 2))


def test_the_batch_is_the_compiled_programs_outer_loop():
    ks, y0s = data()
    f = tg.jit(tg.vmap(oscillator))
    got = f(ks, y0s)
    assert f.executor(ks, y0s) == "numba"
    assert _scans(f.program(ks, y0s)) == 1
    want = [oscillator(k, y) for k, y in zip(ks, y0s)]
    assert_close(got[0], np.stack([w[0] for w in want]))
    assert_close(got[1], np.stack([w[1] for w in want]))
    assert_close(got[1], batched(oscillator, ks, y0s)[1])


@pytest.mark.parametrize("in_axes, out_axes", [((0, None), 0), ((1, 0), (0, 1)), ((0, 0), (-1, 0))])
def test_in_axes_and_out_axes(in_axes, out_axes):
    ks, y0s = data(1)
    args = (ks.T if in_axes[0] == 1 else ks, y0s[0] if in_axes[1] is None else y0s)
    f = tg.jit(tg.vmap(oscillator, in_axes=in_axes, out_axes=out_axes))
    got = f(*args)
    assert _scans(f.program(*args)) == 1
    want = batched(oscillator, *args, in_axes=in_axes, out_axes=out_axes)
    for g, w in zip(got, want):
        assert g.shape == w.shape
        assert_close(g, w)


def test_per_example_gradients_and_their_gradient():
    ks, y0s = data(2)
    per_example = tg.jit(tg.vmap(tg.value_and_grad(lambda k, y: oscillator(k, y)[0])))
    value, grads = per_example(ks, y0s)
    assert per_example.executor(ks, y0s) == "numba"
    want = [tg.value_and_grad(lambda k, y: oscillator(k, y)[0])(k, y) for k, y in zip(ks, y0s)]
    assert_close(value, np.stack([w[0] for w in want]))
    assert_close(grads, np.stack([w[1] for w in want]))

    def total(ks):  # grad through jit(vmap(...)): reverse mode through the loop over the batch
        return tnp.sum(tg.jit(tg.vmap(oscillator))(ks, y0s)[0])

    def twin(ks):
        return sum(oscillator(k, y)[0] for k, y in zip(ks, y0s))
    assert_close(tg.grad(total)(ks), tg.grad(twin)(ks))
    assert_close(tg.jacfwd(tg.grad(total))(ks), tg.jacfwd(tg.grad(twin))(ks))


def test_third_derivatives_through_the_loop_over_the_batch():
    """Order 3 by three routes through ``jit(vmap(...))`` (whose vmap is the loop over the batch, jit
    inside the derivative) and with jit outside it, against the same sum written as a Python loop."""
    ks, y0s = data(6)
    ks = ks[:2]

    def total(ks):
        return tnp.sum(tg.jit(tg.vmap(oscillator))(ks, y0s[:2])[0])

    def twin(ks):
        return sum(oscillator(ks[i], y0s[i])[0] for i in range(2))
    want = tg.jacfwd(tg.jacrev(tg.jacrev(twin)))(ks)
    assert_close(tg.jacfwd(tg.jacrev(tg.jacrev(total)))(ks), want)
    assert_close(tg.grad(lambda k: tnp.sum(tg.hessian(total)(k)))(ks), want.sum(axis=(0, 1, 2, 3)))
    jitted = tg.jit(tg.vmap(tg.hessian(lambda k, y: oscillator(k, y)[0])))
    assert _scans(jitted.program(ks[:1].repeat(B, 0), y0s)) == 1  # per-example Hessians, looped
    third = tg.jacfwd(lambda k: tnp.sum(jitted(tnp.broadcast_to(k, (B, 2)), y0s)))(ks[0])
    want_third = sum(tg.jacfwd(lambda k, y=y: tnp.sum(tg.hessian(lambda k: oscillator(k, y)[0])(k)))(ks[0])
                     for y in y0s)
    assert_close(third, want_third)


def test_nested_vmap_is_a_loop_in_a_loop():
    ks, y0s = data(3)
    kk = np.stack([ks, ks * 1.1])
    f = tg.jit(tg.vmap(tg.vmap(oscillator, in_axes=(0, None)), in_axes=(0, None)))
    got = f(kk, y0s[0])
    assert f.executor(kk, y0s[0]) == "numba"
    want = np.array([[oscillator(k, y0s[0])[1] for k in row] for row in kk])
    assert_close(got[1], want)


def _no_loop_over_the_batch(fn, *args, **vmap_kwargs):
    f = tg.jit(tg.vmap(fn, **vmap_kwargs))
    got = f(*args)
    assert _scans(f.program(*args)) == 0
    return got


def test_one_examples_program_that_does_not_lower_keeps_the_batched_program():
    x = np.linspace(-2.0, 2.0, B * 3).reshape(B, 3)
    got = _no_loop_over_the_batch(lambda x: tnp.round(tnp.sin(x) * 10.0), x)  # round has no lowering
    np.testing.assert_array_equal(got, np.round(np.sin(x) * 10.0))
    big = np.ones((B, native.MAX_ELEMENTS + 1))  # one example past the size limit
    assert_close(_no_loop_over_the_batch(lambda v: tnp.sin(v) * 2.0, big), np.sin(big) * 2.0)


def test_an_output_shared_by_the_examples_keeps_the_batched_program():
    ks, y0s = data(4)
    got = _no_loop_over_the_batch(lambda k, y: (oscillator(k, y)[1], tnp.sum(y0s)), ks, y0s, out_axes=(0, None))
    assert_close(got[0], batched(oscillator, ks, y0s)[1])
    assert_close(got[1], np.sum(y0s))


def test_off_the_compiled_executor_vmap_batches():
    ks, y0s = data(5)
    tg.config.compiled_executor = False
    got = _no_loop_over_the_batch(oscillator, ks, y0s)
    tg.config.compiled_executor = True
    assert_close(got[1], tg.jit(tg.vmap(oscillator))(ks, y0s)[1])
