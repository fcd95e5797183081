"""``scan``, ``fori_loop`` and ``map``: against the equivalent unrolled Python loop, eagerly and under
every transform, with the loop staged by ``jit`` as one operation."""
from __future__ import annotations

import numpy as np
import pytest

import tapegrad as tg
import tapegrad.numpy as tnp
from _loops import halvings, python_halvings
from _tol import assert_close
from tapegrad.testing import check_grads

RNG = np.random.default_rng(0)
XS = RNG.uniform(-1.0, 1.0, (4, 3))
W = RNG.uniform(-0.5, 0.5, (3, 3))
H0 = RNG.uniform(-1.0, 1.0, (3,))


def _rnn_step(carry, x):
    """A pytree carry {"h": vector, "n": scalar} and a pair of outputs."""
    h = tnp.tanh(W @ carry["h"] + x)
    return {"h": h, "n": carry["n"] + tnp.sum(h * x)}, (h * 2.0, tnp.sum(h))


def _loop(step, init, xs, reverse=False):
    """The unrolled Python loop ``scan`` stands for, with NumPy's stacking."""
    carry, ys = init, []
    order = range(len(xs) - 1, -1, -1) if reverse else range(len(xs))
    for i in order:
        carry, y = step(carry, xs[i])
        ys.append(y)
    if reverse:
        ys.reverse()
    return carry, tuple(tnp.stack([y[k] for y in ys]) for k in range(len(ys[0])))


def _init(h0=H0):
    return {"h": h0, "n": np.array(0.0)}


@pytest.mark.parametrize("reverse", [False, True])
def test_values_match_the_python_loop(reverse):
    carry, ys = tg.scan(_rnn_step, _init(), XS, reverse=reverse)
    want_carry, want_ys = _loop(_rnn_step, _init(), XS, reverse)
    assert_close(carry["h"], want_carry["h"])
    assert_close(carry["n"], want_carry["n"])
    for got, want in zip(ys, want_ys):
        assert_close(got, want)


@pytest.mark.parametrize("reverse", [False, True])
def test_derivatives_to_order_2_in_both_modes(reverse):
    def f(h0, xs):
        carry, (hs, sums) = tg.scan(_rnn_step, _init(h0), xs, reverse=reverse)
        return carry["n"] + tnp.sum(hs * hs) + tnp.sum(sums)

    def unrolled(h0, xs):
        carry, (hs, sums) = _loop(_rnn_step, _init(h0), xs, reverse)
        return carry["n"] + tnp.sum(hs * hs) + tnp.sum(sums)
    check_grads(f, (H0, XS), order=2)
    for got, want in zip(tg.grad(f, (0, 1))(H0, XS), tg.grad(unrolled, (0, 1))(H0, XS)):
        assert_close(got, want)


def test_gradient_of_the_stacked_outputs_and_the_final_carry_in_float32():
    xs, h0 = XS.astype(np.float32), H0.astype(np.float32)

    def f(h0, xs):
        return tg.scan(lambda h, x: (tnp.sin(h) * x, h * x), h0, xs)
    check_grads(f, (h0, xs), order=2)


def test_length_zero_returns_the_init_and_empty_ys():
    carry, ys = tg.scan(_rnn_step, _init(), np.zeros((0, 3)))
    assert_close(carry["h"], H0)
    assert ys[0].shape == (0, 3) and ys[1].shape == (0,)
    assert tg.grad(lambda h0: tg.scan(_rnn_step, _init(h0), np.zeros((0, 3)))[0]["h"].sum())(H0).tolist() == [1, 1, 1]


def test_xs_none_with_length():
    carry, ys = tg.scan(lambda c, _: (c * 2.0, c), 1.0, None, length=4)
    assert_close(carry, 16.0)
    assert_close(ys, np.array([1.0, 2.0, 4.0, 8.0]))
    assert tg.grad(lambda c: tg.scan(lambda c, _: (c * c, None), c, None, length=3)[0])(np.array(1.5)) == \
        pytest.approx(8 * 1.5 ** 7)


def test_python_scalar_carry_takes_the_bodys_dtype():
    carry, ys = tg.scan(lambda c, x: (c + x, c), 0.0, np.ones(3, np.float32))
    assert carry.dtype == np.float32 and ys.dtype == np.float32
    assert_close(carry, np.float32(3.0))


def test_pytree_xs_and_none_ys():
    xs = {"a": XS, "b": (XS[:, 0],)}
    carry, ys = tg.scan(lambda c, x: (c + x["a"] * x["b"][0], None), H0, xs)
    assert ys is None
    assert_close(carry, H0 + (XS * XS[:, :1]).sum(0))


# ---- jit, vmap and compositions --------------------------------------------------------------------
def test_jit_stages_one_scan_and_traces_the_body_once():
    calls = []

    def step(c, x):
        calls.append(1)
        return tnp.sin(c) + x, c * x

    def f(c, xs):
        return tg.scan(step, c, xs)
    program = tg.make_program(f)(H0, XS)
    assert [eqn.prim.name for eqn in program.eqns] == ["scan"]
    assert len(calls) == 1
    assert "sin" in str(program)  # the body printed below the equation
    carry, ys = tg.jit(f)(H0, XS)
    want_carry, (want_ys,) = _loop(lambda c, x: (step(c, x)[0], (step(c, x)[1],)), H0, XS)
    assert_close(carry, want_carry)
    assert_close(ys, want_ys)
    calls.clear()
    for _ in range(5):  # eagerly: staged once per call, never once per step
        tg.scan(step, H0, XS)
    assert len(calls) == 5


def test_jit_of_grad_matches_the_loop():
    def loss(h0, xs):
        return tnp.sum(tg.scan(_rnn_step, _init(h0), xs)[1][0] ** 2)

    def unrolled(h0, xs):
        return tnp.sum(_loop(_rnn_step, _init(h0), xs)[1][0] ** 2)
    assert_close(tg.jit(tg.grad(loss))(H0, XS), tg.grad(unrolled)(H0, XS))
    program = tg.make_program(tg.grad(loss))(H0, XS)
    assert sum(eqn.prim.name == "scan" for eqn in program.eqns) == 2  # forward and the reverse scan


@pytest.mark.parametrize("axes", [(0, None), (None, 0), (0, 0), (1, 1)])
def test_vmap_matches_a_loop_over_the_batch(axes):
    hs = RNG.uniform(-1.0, 1.0, (2, 3))
    xss = RNG.uniform(-1.0, 1.0, (2, 4, 3))
    h_axis, x_axis = axes
    h_batch = hs if h_axis == 0 else (hs.T if h_axis == 1 else H0)
    x_batch = xss if x_axis in (0, None) else np.moveaxis(xss, 0, x_axis)
    x_batch = XS if x_axis is None else x_batch

    def f(h0, xs):
        carry, (ys, sums) = tg.scan(_rnn_step, _init(h0), xs)
        return carry["h"], ys, sums
    got = tg.vmap(f, in_axes=axes)(h_batch, x_batch)
    for b in range(2):
        want = f(hs[b] if h_axis is not None else H0, xss[b] if x_axis is not None else XS)
        for g, w in zip(got, want):
            assert_close(g[b], w)


def test_vmap_of_grad_and_grad_of_grad():
    def loss(h0, xs):
        return tnp.sum(tg.scan(lambda h, x: (tnp.sin(h * x), h), h0, xs)[0])

    def unrolled(h0, xs):
        for x in xs:
            h0 = tnp.sin(h0 * x)
        return tnp.sum(h0)
    hs = RNG.uniform(-1.0, 1.0, (2, 3))
    got = tg.vmap(tg.grad(loss), in_axes=(0, None))(hs, XS)
    for b in range(2):
        assert_close(got[b], tg.grad(unrolled)(hs[b], XS))
    second = tg.grad(lambda h: tnp.sum(tg.grad(loss)(h, XS) ** 2))(H0)
    assert_close(second, tg.grad(lambda h: tnp.sum(tg.grad(unrolled)(h, XS) ** 2))(H0))
    assert_close(tg.jit(tg.vmap(tg.grad(loss), in_axes=(0, None)))(hs, XS), got)


def test_parameters_read_inside_the_body_get_gradients():
    w = tg.Parameter(W.copy(), name="w")

    def loss(h0, xs):
        return tnp.sum(tg.scan(lambda h, x: (tnp.tanh(w @ h + x), None), h0, xs)[0])

    def unrolled(h0, xs):
        for x in xs:
            h0 = tnp.tanh(w @ h0 + x)
        return tnp.sum(h0)
    got = tg.grad(loss, grad_position=None, weights=(w,))(H0, XS)
    want = tg.grad(unrolled, grad_position=None, weights=(w,))(H0, XS)
    assert_close(got[0], want[0])
    assert_close(tg.jit(tg.grad(loss, grad_position=None, weights=(w,)))(H0, XS)[0], want[0])


def test_closure_over_an_outer_tracer():
    def f(a):
        return tg.scan(lambda c, x: (c * a + x, None), np.array(0.0), XS[:, 0])[0]

    def unrolled(a):
        c = 0.0
        for x in XS[:, 0]:
            c = c * a + x
        return c
    check_grads(f, (np.array(0.7),), order=2)
    assert_close(tg.grad(f)(np.array(0.7)), tg.grad(unrolled)(np.array(0.7)))


def test_integer_carry_is_carried_without_derivative():
    def f(h0, xs):
        (h, n), _ = tg.scan(lambda c, x: ((c[0] * x, c[1] + 1), None), (h0, np.array(0)), xs)
        return h * n
    assert_close(tg.grad(f)(H0, XS), 4 * XS.prod(0))
    check_grads(f, (H0, XS), order=2)


# ---- errors --------------------------------------------------------------------------------------
def test_carry_type_mismatch_names_the_leaf_and_both_types():
    with pytest.raises(TypeError, match=r"carry leaf \['h'\] is f64\[3\] in init but f returns f32\[3\]"):
        tg.scan(lambda c, x: ({"h": c["h"].astype(np.float32)}, None), {"h": H0}, XS)
    with pytest.raises(TypeError, match=r"carry leaf .* is f64\[3\] in init but f returns f64\[\]"):
        tg.scan(lambda c, x: (tnp.sum(c), None), H0, XS)
    with pytest.raises(TypeError, match="pytree structure"):
        tg.scan(lambda c, x: ((c, c), None), H0, XS)
    with pytest.raises(TypeError, match="must return a pair"):
        tg.scan(lambda c, x: c, H0, XS)


def test_length_errors():
    with pytest.raises(ValueError, match=r"length=3 but the leading axes of xs are \[4\]"):
        tg.scan(_rnn_step, _init(), XS, length=3)
    with pytest.raises(ValueError, match="length must be given"):
        tg.scan(lambda c, x: (c, None), H0, None)
    with pytest.raises(ValueError, match="different leading axes"):
        tg.scan(lambda c, x: (c, None), H0, (XS, XS[:2]))
    with pytest.raises(ValueError, match="non-negative int"):
        tg.scan(lambda c, x: (c, None), H0, None, length=-1)


def test_argument_errors_and_state_after_them():
    with pytest.raises(ValueError, match="unroll must be a positive int"):
        tg.scan(_rnn_step, _init(), XS, unroll=0)
    with pytest.raises(TypeError, match="f must be a function"):
        tg.scan(None, _init(), XS)
    with pytest.raises(TypeError, match="xs leaf 0 is a str"):
        tg.scan(lambda c, x: (c, None), H0, ["a"])
    p = tg.Parameter(np.zeros(3), name="p")

    def writes(c, x):
        return p.assign(c).value, None
    with pytest.raises(ValueError, match="assigns Parameter 'p'"):
        tg.scan(writes, H0, XS)
    assert_close(p.value, np.zeros(3))
    assert_close(tg.scan(_rnn_step, _init(), XS, unroll=2)[0]["h"], _loop(_rnn_step, _init(), XS)[0]["h"])


# ---- fori_loop and map ---------------------------------------------------------------------------
def _euler(i, y):
    return y + 0.1 * tnp.cos(y * i)


@pytest.mark.parametrize("bounds", [(0, 5), (2, 7), (3, 3), (5, 2)])
def test_fori_loop_matches_a_python_for_loop(bounds):
    lower, upper = bounds

    def f(y):
        return tg.fori_loop(lower, upper, _euler, y)

    def unrolled(y):
        for i in range(lower, upper):
            y = _euler(i, y)
        return y
    assert_close(f(H0), unrolled(H0))
    assert_close(tg.grad(lambda y: tnp.sum(f(y)))(H0), tg.grad(lambda y: tnp.sum(unrolled(y)))(H0))
    assert_close(tg.jit(f)(H0), unrolled(H0))
    if upper > lower:
        check_grads(f, (H0,), order=2)


def test_fori_loop_with_a_traced_bound_is_a_while_loop():
    f = tg.jit(lambda n, y: tg.fori_loop(0, n, _euler, y))

    def unrolled(n, y):
        for i in range(n):
            y = _euler(i, y)
        return y
    for n in (0, 1, 4):
        assert_close(f(np.array(n), H0), unrolled(n, H0))
    assert_close(tg.jvp(lambda y: f(np.array(4), y), (H0,), (np.ones(3),))[1],
                 tg.jvp(lambda y: unrolled(4, y), (H0,), (np.ones(3),))[1])
    assert_close(tg.grad(lambda y: tnp.sum(f(np.array(4), y)))(H0),  # reverse mode too: test_while_grad.py
                 tg.grad(lambda y: tnp.sum(unrolled(4, y)))(H0))
    with pytest.raises(TypeError, match="upper must be a scalar integer"):
        tg.fori_loop(0, 2.5, _euler, H0)


def test_map_matches_a_list_comprehension():
    got = tg.map(lambda x: (tnp.sin(x), tnp.sum(x)), XS)
    want = [(np.sin(x), np.sum(x)) for x in XS]
    assert_close(got[0], np.stack([w[0] for w in want]))
    assert_close(got[1], np.array([w[1] for w in want]))
    check_grads(lambda xs: tg.map(lambda x: tnp.exp(x) * x[0], xs), (XS,), order=2)


def test_hessian_jit_vmap_grad_and_custom_vjp_inside_the_body():
    xs = np.linspace(0.0, 1.0, 6)

    def f(c):
        return tnp.sum(tg.scan(lambda c, x: (tnp.sin(c) * x + c, c * c), c, xs)[1])

    def unrolled(c):
        total = 0.0
        for x in xs:
            total, c = total + c * c, tnp.sin(c) * x + c
        return tnp.sum(total)
    c0 = np.array([0.3, 0.2])
    assert_close(tg.hessian(f)(c0), tg.hessian(unrolled)(c0))
    assert_close(tg.jit(tg.vmap(tg.grad(f)))(c0), tg.vmap(tg.grad(unrolled))(c0))
    assert_close(tg.grad(lambda c: tnp.sum(tg.vmap(f)(c)))(c0), tg.grad(lambda c: tnp.sum(tg.vmap(unrolled)(c)))(c0))

    # a rule that is not the derivative of the function (gradient clipping): the loop must use it, as
    # the Python loop does, and not differentiate the function's forward computation
    @tg.custom_vjp
    def square(x):
        return x * x
    square.defvjp(lambda x: (x * x, x), lambda x, g: (tnp.clip(2.0 * x * g, -0.5, 0.5),))

    def looped(c):
        return tg.scan(lambda c, x: (square(c) * x, None), c, xs + 1.0)[0]

    def python(c):
        for x in xs + 1.0:
            c = square(c) * x
        return c
    for route in (tg.grad, lambda f: tg.jit(tg.grad(f)), lambda f: tg.grad(tg.jit(f))):
        assert_close(route(looped)(np.array(0.9)), tg.grad(python)(np.array(0.9)))
    assert_close(tg.vmap(tg.grad(looped))(np.array([0.9, 0.4])), tg.vmap(tg.grad(python))(np.array([0.9, 0.4])))


# ---- while_loop ----------------------------------------------------------------------------------
def test_while_loop_matches_python_eagerly_under_jit_and_vmap():
    vs = np.array([0.05, 0.7, 3.0, 40.0])
    for v in vs:
        for got in (halvings(np.array(v)), tg.jit(halvings)(np.array(v))):
            want = python_halvings(v)
            assert int(got[0]) == want[0]
            assert_close(got[1], want[1])
    program = tg.make_program(halvings)(np.array(1.0))
    assert [eqn.prim.name for eqn in program.eqns] == ["while"]
    for batched in (tg.vmap(halvings)(vs), tg.jit(tg.vmap(halvings))(vs)):
        for b, v in enumerate(vs):  # each example stops at its own count
            want = python_halvings(v)
            assert int(batched[0][b]) == want[0]
            assert_close(batched[1][b], want[1])


def test_while_loop_forward_mode_and_closures():
    def f(a):
        return tg.while_loop(lambda c: c[0] < 5, lambda c: (c[0] + 1, tnp.sin(c[1]) * a), (0, a))[1]

    def unrolled(a):
        v = a
        for _ in range(5):
            v = tnp.sin(v) * a
        return v
    a = np.array([0.9, 1.3])
    assert_close(tg.jvp(f, (a,), (np.ones(2),))[1], tg.jvp(unrolled, (a,), (np.ones(2),))[1])
    assert_close(tg.jacfwd(f)(a), tg.jacfwd(unrolled)(a))
    check_grads(f, (a,), order=2, modes=("fwd",))
    assert_close(tg.vmap(tg.jacfwd(f))(a[:, None]), tg.vmap(tg.jacfwd(unrolled))(a[:, None]))


def test_while_loop_errors():
    with pytest.raises(TypeError, match="cond_fun must return a scalar bool"):
        tg.while_loop(lambda v: v > 0, lambda v: v - 1.0, H0)
    with pytest.raises(TypeError, match=r"carry leaf #0 is f64\[3\] in init_val but body_fun returns f32\[3\]"):
        tg.while_loop(lambda v: v[0] > 0, lambda v: v.astype(np.float32), H0)
    with pytest.raises(TypeError, match="body_fun must be a function"):
        tg.while_loop(lambda v: True, None, H0)
    assert_close(tg.while_loop(lambda v: v > 100.0, lambda v: v * 2.0, 1.0), 1.0)  # zero trips


def test_a_failing_body_leaves_no_transform_behind():
    def bad(c, x):
        raise ZeroDivisionError("in the body")
    with pytest.raises(ZeroDivisionError):
        tg.grad(lambda h: tnp.sum(tg.scan(bad, h, XS)[0]))(H0)
    with pytest.raises(ValueError, match="unroll must be a positive int"):
        tg.scan(_rnn_step, _init(), XS, unroll=True)
    assert_close(tg.grad(lambda h: tnp.sum(tg.scan(lambda c, x: (c * x, None), h, XS)[0]))(H0), XS.prod(0))
    assert_close(tg.jit(lambda h: tg.scan(lambda c, x: (c * x, None), h, XS)[0])(H0), H0 * XS.prod(0))


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("unroll", [2, 3, 5, 7])
def test_unroll_runs_blocks_of_steps_with_the_same_results(unroll, reverse):
    # 4 steps: blocks of 2; of 3 and a remainder of 1; of 5 or 7 (longer than the loop): one by one
    xs = RNG.uniform(-1.0, 1.0, (4, 3))
    carry, ys = tg.scan(_rnn_step, _init(), xs, reverse=reverse, unroll=unroll)
    want_carry, want_ys = _loop(_rnn_step, _init(), xs, reverse)
    assert_close(carry["h"], want_carry["h"])
    for got, want in zip(ys, want_ys):
        assert_close(got, want)

    def f(h0):
        carry, (hs, sums) = tg.scan(_rnn_step, _init(h0), xs, reverse=reverse, unroll=unroll)
        return carry["n"] + tnp.sum(hs * hs) + tnp.sum(sums)

    def unrolled(h0):
        carry, (hs, sums) = _loop(_rnn_step, _init(h0), xs, reverse)
        return carry["n"] + tnp.sum(hs * hs) + tnp.sum(sums)
    assert_close(tg.grad(f)(H0), tg.grad(unrolled)(H0))
    assert_close(tg.jit(tg.grad(f))(H0), tg.grad(unrolled)(H0))
    check_grads(f, (H0,), order=2)


def test_jit_drops_the_ys_nothing_reads_from_the_body():
    from tapegrad._jit.passes import optimize

    def f(h0, xs):
        carry, (hs, sums) = tg.scan(_rnn_step, _init(h0), xs)
        return carry["h"], sums  # hs (h * 2.0) is never read
    (scan_eqn,) = [e for e in optimize(tg.make_program(f)(H0, XS)).eqns if e.prim.name == "scan"]
    assert len(scan_eqn.outs) == 3  # two carries and sums
    body = scan_eqn.params["body"].program
    assert not any(e.prim.name == "multiply" and any(getattr(x, "value", None) == 2.0 for x in e.inputs)
                   for e in body.eqns)
    got_h, got_sums = tg.jit(f)(H0, XS)
    want_carry, (_, want_sums) = _loop(_rnn_step, _init(), XS)
    assert_close(got_h, want_carry["h"])
    assert_close(got_sums, want_sums)


@pytest.mark.python_executor  # the Python-float loop
def test_a_long_loop_on_scalars_runs_as_python_floats_with_numpys_values(monkeypatch):
    from tapegrad._control_flow import _closed
    built = []
    real = _closed.compile_scalar_loop
    monkeypatch.setattr(_closed, "compile_scalar_loop", lambda *a: built.append(real(*a)) or built[-1])

    def euler(k, y0):  # 200 steps of y' = -k y on float64 scalars
        return tg.fori_loop(0, 200, lambda i, y: y + 0.01 * (-k * y), y0)

    def python(k, y0):
        y = y0
        for _ in range(200):
            y = y + 0.01 * (-k * y)
        return y
    k, y0 = np.array(0.7), np.array(1.5)
    assert euler(k, y0) == python(k, y0)  # + and * round as NumPy's do: bit for bit
    for route in (tg.grad, lambda f: tg.jit(tg.grad(f))):
        assert_close(route(euler)(k, y0), tg.grad(python)(k, y0))
    assert any(loop is not None for loop in built)  # the loops above ran as Python floats
    # where NumPy would warn, the Python-float loop gives up and the ordinary loop gives NumPy's inf
    with np.errstate(all="warn"), pytest.warns(RuntimeWarning):
        blown = tg.fori_loop(0, 100, lambda i, y: y * 1e10, np.array(1.0))
    assert blown == np.inf
