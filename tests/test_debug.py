"""tapegrad.debug.print / debug.callback and tg.pure_callback: host calls from inside every transform.

Each case checks what was called, with which values, how many times and in which order: eagerly, under
jit on both executors (the compiled one keeps a program with a host call on the Python executor and
says so), in loop bodies, once per example under vmap (with debug.batch_index), on primal values only
under grad/jvp; pure_callback's results, its vmap methods, its lack of a derivative and its use inside
custom_vjp (a SciPy routine in a differentiated, jitted function); and on the device double.
"""
from __future__ import annotations

import numpy as np
import pytest
import scipy.special

import tapegrad as tg
import tapegrad.numpy as tnp
from tapegrad._core import trace_stack

try:
    import numba  # noqa: F401 — the compiled executor's dependency
    HAVE_NUMBA = True
except ImportError:
    HAVE_NUMBA = False


class Log:
    """A debug.callback target that records (label, batch index, value) in call order."""

    def __init__(self):
        self.calls = []

    def __call__(self, label):
        return lambda *values: self.calls.append((label, tg.debug.batch_index(), *[np.array(v) for v in values]))

    def labels(self):
        return [c[0] for c in self.calls]


def _loss(log):
    def f(x):
        tg.debug.callback(log("x"), x)
        y = tnp.sin(x)
        tg.debug.callback(log("y"), y)
        return tnp.sum(y * 2.0)
    return f


X = np.array([0.5, 1.0])


def _assert_primal_calls(log, x):
    assert log.labels() == ["x", "y"]
    np.testing.assert_array_equal(log.calls[0][2], x)
    np.testing.assert_array_equal(log.calls[1][2], np.sin(x))


@pytest.mark.parametrize("route", ["eager", "jit", "grad", "jit_grad", "grad_jit", "vjp", "jvp", "hessian",
                                   "value_and_grad"])
def test_callback_sees_primal_values_once(route):
    log = Log()
    f = _loss(log)
    run = {"eager": lambda: f(X), "jit": lambda: tg.jit(f)(X), "grad": lambda: tg.grad(f)(X),
           "jit_grad": lambda: tg.jit(tg.grad(f))(X), "grad_jit": lambda: tg.grad(tg.jit(f))(X),
           "vjp": lambda: tg.vjp(f, X)[1](1.0), "jvp": lambda: tg.jvp(f, (X,), (np.ones(2),)),
           "hessian": lambda: tg.hessian(f)(X), "value_and_grad": lambda: tg.value_and_grad(f)(X)}[route]
    run()
    _assert_primal_calls(log, X)
    if route.startswith("jit"):  # a compiled function calls at each run, not when staged
        log.calls.clear()
        run()
        _assert_primal_calls(log, X)


def test_grad_unchanged_by_callbacks():
    log = Log()
    np.testing.assert_allclose(tg.grad(_loss(log))(X), 2 * np.cos(X), rtol=1e-15)
    np.testing.assert_allclose(tg.jit(tg.grad(_loss(log)))(X), 2 * np.cos(X), rtol=1e-15)


@pytest.mark.parametrize("jitted", [False, True])
def test_vmap_calls_once_per_example_with_its_index(jitted):
    log = Log()
    f = tg.vmap(_loss(log))
    xs = np.arange(6.0).reshape(3, 2)
    (tg.jit(f) if jitted else f)(xs)
    assert log.labels() == ["x"] * 3 + ["y"] * 3  # each callback in program order, each example in turn
    for b in range(3):
        assert log.calls[b][1] == (b,)
        np.testing.assert_array_equal(log.calls[b][2], xs[b])
        np.testing.assert_array_equal(log.calls[3 + b][2], np.sin(xs[b]))


def test_nested_vmap_indices_and_unbatched_operands():
    log = Log()
    a, b = np.arange(6.0).reshape(2, 3), np.array([10.0, 20.0, 30.0])
    tg.vmap(tg.vmap(lambda u, v: tg.debug.callback(log("uv"), u, v)), in_axes=(0, None))(a, b)
    assert [c[1] for c in log.calls] == [(i, j) for i in range(2) for j in range(3)]
    for (_, (i, j), u, v) in log.calls:
        assert u == a[i, j] and v == b[j]


def test_vmap_of_grad_calls_per_example_with_primals():
    log = Log()
    xs = np.array([[0.1, 0.2], [0.3, 0.4]])
    g = tg.vmap(tg.grad(_loss(log)))(xs)
    np.testing.assert_allclose(g, 2 * np.cos(xs), rtol=1e-15)
    np.testing.assert_array_equal(log.calls[0][2], xs[0])
    assert [c[1] for c in log.calls] == [(0,), (1,), (0,), (1,)]


@pytest.mark.parametrize("jitted", [False, True])
def test_loop_bodies_call_at_each_step(jitted):
    log = Log()

    def f(c):
        def body(i, c):
            tg.debug.callback(log("step"), i, c)
            return c * 2.0
        c = tg.fori_loop(0, 3, body, c)
        c = tg.while_loop(lambda c: c < 20.0, lambda c: (tg.debug.callback(log("while"), c), c + 5.0)[1], c)
        return tg.cond(c > 0, lambda c: (tg.debug.callback(log("cond"), c), c)[1], lambda c: -c, c)
    out = (tg.jit(f) if jitted else f)(1.0)
    assert out == 23.0
    assert log.labels() == ["step"] * 3 + ["while"] * 3 + ["cond"]
    assert [float(c[3]) for c in log.calls[:3]] == [1.0, 2.0, 4.0]
    assert [int(c[2]) for c in log.calls[:3]] == [0, 1, 2]
    assert [float(c[2]) for c in log.calls[3:6]] == [8.0, 13.0, 18.0]


def test_scan_under_grad_calls_once_per_step():
    log = Log()

    def f(c):
        def body(c, x):
            tg.debug.callback(log("c"), c)
            return c * x, None
        return tg.scan(body, c, np.arange(1.0, 4.0))[0]
    assert tg.grad(f)(1.0) == 6.0
    assert [float(c[2]) for c in log.calls] == [1.0, 1.0, 2.0]
    log.calls.clear()
    assert tg.jit(tg.grad(f))(1.0) == 6.0
    assert [float(c[2]) for c in log.calls] == [1.0, 1.0, 2.0]


def test_jit_keeps_what_its_passes_would_drop():
    """Nothing reads a callback's results (it has none), two identical ones print twice, and one of a
    constant runs at each call, not when the program is compiled."""
    log = Log()

    def f(x):
        tg.debug.callback(log("a"), x)
        tg.debug.callback(log("a"), x)
        tg.debug.callback(log("const"), np.ones(2))
        return x + 1.0
    jf = tg.jit(f)
    program = tg.make_program(f)(X)
    assert sum(eqn.prim.name == "debug_callback" for eqn in program.eqns) == 3
    assert log.calls == []  # staging calls nothing
    jf(X)
    jf(X)
    assert log.labels() == ["a", "a", "const"] * 2


def test_callback_may_keep_what_it_gets():
    """The values are copies: jit's buffer reuse may overwrite the intermediate afterwards."""
    kept = []

    def f(x):
        y = x * 2.0
        tg.debug.callback(kept.append, y)
        z = tnp.exp(y) + 1.0
        return tnp.sin(z) * 3.0
    x = np.array([0.1, 0.2, 0.3])
    tg.jit(f)(x)
    np.testing.assert_array_equal(kept[0], x * 2.0)
    assert isinstance(kept[0], np.ndarray)


def test_print_formats_values(capsys):
    def f(x):
        tg.debug.print("x = {} sum = {s:.3f}", x, s=tnp.sum(x))
        return x
    tg.jit(f)(np.array([1.0, 2.0]))
    tg.vmap(f)(np.array([[1.0], [2.0]]))
    assert capsys.readouterr().out.splitlines() == ["x = [1. 2.] sum = 3.000", "x = [1.] sum = 1.000",
                                                    "x = [2.] sum = 2.000"]


def test_print_with_non_array_leaves(capsys):
    tg.jit(lambda x: tg.debug.print("{} {} {}", "label", None, x))(1.5)
    assert capsys.readouterr().out == "label None 1.5\n"


@pytest.mark.skipif(not HAVE_NUMBA, reason="the compiled executor needs numba")
def test_compiled_executor_keeps_host_calls_on_python(monkeypatch):
    monkeypatch.setattr(tg.config, "compiled_executor", True)
    log = Log()

    def f(x):
        def body(i, c):
            tg.debug.callback(log("step"), c)
            return c * 1.5
        return tg.fori_loop(0, 4, body, x)
    jf = tg.jit(f)
    assert jf(1.0) == 1.5 ** 4
    assert [float(c[2]) for c in log.calls] == [1.0, 1.5, 2.25, 3.375]
    assert jf.executor(1.0) in ("python", "python+numba")
    assert "host callback" in jf.explain(1.0)


def test_errors_and_state():
    with pytest.raises(TypeError, match="callable"):
        tg.debug.callback(3, 1.0)
    with pytest.raises(TypeError, match="format string"):
        tg.debug.print(3)

    def boom(x):
        raise RuntimeError("from the callback")
    with pytest.raises(RuntimeError, match="from the callback"):
        tg.jit(lambda x: tg.debug.callback(boom, x))(1.0)
    with pytest.raises(RuntimeError, match="from the callback"):
        tg.grad(lambda x: (tg.debug.callback(boom, x), x * 2)[1])(1.0)
    assert trace_stack() == ()
    with pytest.raises(KeyError):
        tg.jit(lambda x: tg.debug.print("{missing}", x))(1.0)


# ---- pure_callback ----------------------------------------------------------------------------------------
def _cos_callback(x):
    return tg.pure_callback(np.cos, tg.ShapeDtypeStruct(x.shape, x.dtype), x, vmap_method="sequential")


@pytest.mark.parametrize("route", ["eager", "jit", "vmap", "jit_vmap"])
def test_pure_callback_values(route):
    xs = np.linspace(0.1, 1.0, 6).reshape(3, 2)
    run = {"eager": lambda: _cos_callback(xs), "jit": lambda: tg.jit(_cos_callback)(xs),
           "vmap": lambda: tg.vmap(_cos_callback)(xs), "jit_vmap": lambda: tg.jit(tg.vmap(_cos_callback))(xs)}
    out = run[route]()
    np.testing.assert_array_equal(out, np.cos(xs))
    assert out.dtype == np.float64 and isinstance(out, np.ndarray)


def test_pure_callback_pytrees_and_kwargs():
    def host(a, pair, *, scale):
        return {"sum": np.asarray(a + pair[0] + pair[1]) * scale, "n": np.asarray(a.size, np.int64)}
    shapes = {"sum": tg.ShapeDtypeStruct((2,), np.float64), "n": tg.ShapeDtypeStruct((), np.int64)}

    def f(x):
        return tg.pure_callback(host, shapes, x, (x, 1.0), scale=2.0)
    for g in (f, tg.jit(f)):
        out = g(X)
        np.testing.assert_array_equal(out["sum"], (2 * X + 1.0) * 2.0)
        assert out["n"] == 2 and out["n"].dtype == np.int64


@pytest.mark.parametrize("method, seen", [("sequential", [((), ())] * 3), ("expand_dims", [((3,), (1,))]),
                                          ("broadcast_all", [((3,), (3,))])])
def test_pure_callback_vmap_methods(method, seen):
    shapes = []

    def host(a, b):
        shapes.append((a.shape, np.shape(b)))
        return a + b

    def f(a, b):
        return tg.pure_callback(host, tg.ShapeDtypeStruct((), np.float64), a, b, vmap_method=method)
    out = tg.vmap(f, in_axes=(0, None))(np.arange(3.0), np.array(1.0))
    np.testing.assert_array_equal(out, np.arange(3.0) + 1.0)
    assert shapes == seen


def test_pure_callback_nested_sequential():
    out = tg.vmap(tg.vmap(lambda a: tg.pure_callback(lambda v: v * 2, tg.ShapeDtypeStruct((), np.float64), a,
                                                      vmap_method="sequential")))(np.arange(6.0).reshape(2, 3))
    np.testing.assert_array_equal(out, 2 * np.arange(6.0).reshape(2, 3))


def test_pure_callback_is_dropped_when_unread():
    calls = []

    def f(x):
        tg.pure_callback(lambda v: calls.append(1) or v, tg.ShapeDtypeStruct((2,), np.float64), x)
        return x * 2
    tg.jit(f)(X)
    assert calls == []  # pure: jit may drop it (JAX's semantics)


# a SciPy routine inside a differentiated, jitted function: custom_vjp gives pure_callback its derivative
@tg.custom_vjp
def bessel_j0(x):
    return tg.pure_callback(scipy.special.j0, tg.ShapeDtypeStruct(x.shape, x.dtype), x, vmap_method="sequential")


def _j0_fwd(x):
    return bessel_j0(x), x


def _j0_bwd(x, g):
    j1 = tg.pure_callback(scipy.special.j1, tg.ShapeDtypeStruct(x.shape, x.dtype), x, vmap_method="sequential")
    return (-g * j1,)


bessel_j0.defvjp(_j0_fwd, _j0_bwd)


@pytest.mark.parametrize("route", ["grad", "jit_grad", "vmap_grad", "jit_vmap_grad", "grad_jit"])
def test_scipy_routine_in_a_differentiated_jitted_function(route):
    x = np.array([0.3, 1.2, 2.5])

    def loss(x):
        return tnp.sum(bessel_j0(x) ** 2)
    expected = -2 * scipy.special.j0(x) * scipy.special.j1(x)
    run = {"grad": tg.grad(loss), "jit_grad": tg.jit(tg.grad(loss)), "grad_jit": tg.grad(tg.jit(loss)),
           "vmap_grad": tg.vmap(tg.grad(lambda v: bessel_j0(v) ** 2)),
           "jit_vmap_grad": tg.jit(tg.vmap(tg.grad(lambda v: bessel_j0(v) ** 2)))}[route]
    np.testing.assert_allclose(run(x), expected, rtol=1e-14)


def test_pure_callback_errors():
    sd = tg.ShapeDtypeStruct((2,), np.float64)
    with pytest.raises(ValueError, match="no derivative.*custom_vjp"):
        tg.grad(lambda x: tnp.sum(tg.pure_callback(np.sin, sd, x)))(X)
    with pytest.raises(ValueError, match="no derivative"):
        tg.jvp(lambda x: tg.pure_callback(np.sin, sd, x), (X,), (X,))
    with pytest.raises(NotImplementedError, match="vmap_method"):
        tg.vmap(lambda x: tg.pure_callback(np.sin, tg.ShapeDtypeStruct((), np.float64), x))(X)
    with pytest.raises(ValueError, match="vmap_method must be one of"):
        tg.pure_callback(np.sin, sd, X, vmap_method="legacy_vectorized")
    with pytest.raises(TypeError, match="shape and dtype"):
        tg.pure_callback(np.sin, (2,), X)
    with pytest.raises(TypeError, match=r"dtype float32.*declares shape \(2,\) and dtype float64"):
        tg.jit(lambda x: tg.pure_callback(lambda v: v.astype(np.float32), sd, x))(X)
    with pytest.raises(TypeError, match="returned"):
        tg.pure_callback(lambda v: (v, v), sd, X)
    with pytest.raises(TypeError, match="tuple of ints"):
        tg.ShapeDtypeStruct(None, np.float64)
    assert trace_stack() == ()
    # stopping the gradient of its operand is the other way out
    assert np.all(tg.grad(lambda x: tnp.sum(tg.pure_callback(np.sin, sd, tg.stop_gradient(x)) + x))(X) == 1.0)


def test_shape_dtype_struct():
    s = tg.ShapeDtypeStruct(3, "float32")
    assert (s.shape, s.dtype, s.ndim, s.size) == ((3,), np.dtype(np.float32), 1, 3)
    assert s == tg.ShapeDtypeStruct((3,), np.float32) and hash(s) == hash(tg.ShapeDtypeStruct((3,), np.float32))
    assert repr(s) == "ShapeDtypeStruct(shape=(3,), dtype=float32)"


# ---- on the device double: the callback gets host arrays, pure_callback's results go back to the device ----
def test_device_arrays_cross_to_host_and_back():
    from _device import DeviceArray, xp
    seen = []

    def f(x):
        tg.debug.callback(lambda v: seen.append(type(v)), x)
        return tg.pure_callback(lambda v: np.cos(v), tg.ShapeDtypeStruct((2,), np.float64), x)
    for g in (f, tg.jit(f)):
        out = g(xp.asarray(X))
        assert isinstance(out, DeviceArray)
        np.testing.assert_array_equal(out.get(), np.cos(X))
    assert seen == [np.ndarray, np.ndarray]


# ---- against JAX ---------------------------------------------------------------------------------------------
@pytest.mark.peer("jax")
def test_pure_callback_with_custom_vjp_matches_jax():
    import jax
    import jax.numpy as jnp
    jax.config.update("jax_enable_x64", True)

    @jax.custom_vjp
    def j0(x):
        return jax.pure_callback(scipy.special.j0, jax.ShapeDtypeStruct(x.shape, x.dtype), x,
                                 vmap_method="sequential")
    j0.defvjp(lambda x: (j0(x), x),
              lambda x, g: (-g * jax.pure_callback(scipy.special.j1, jax.ShapeDtypeStruct(x.shape, x.dtype), x,
                                                   vmap_method="sequential"),))
    x = np.array([0.3, 1.2, 2.5])
    expected = np.asarray(jax.jit(jax.grad(lambda v: jnp.sum(j0(v) ** 2)))(x))
    np.testing.assert_allclose(tg.jit(tg.grad(lambda v: tnp.sum(bessel_j0(v) ** 2)))(x), expected, rtol=1e-14)
    for method in ("sequential", "expand_dims", "broadcast_all"):
        def ours(a, b, method=method):
            return tg.pure_callback(np.add, tg.ShapeDtypeStruct((), np.float64), a, b, vmap_method=method)

        def theirs(a, b, method=method):
            return jax.pure_callback(np.add, jax.ShapeDtypeStruct((), jnp.float64), a, b, vmap_method=method)
        a, b = np.arange(3.0), np.array(0.5)
        np.testing.assert_array_equal(tg.vmap(ours, in_axes=(0, None))(a, b),
                                      np.asarray(jax.vmap(theirs, in_axes=(0, None))(a, b)))


@pytest.mark.peer("jax")
def test_debug_print_lines_match_jax_under_vmap(capsys):
    import jax
    jax.config.update("jax_enable_x64", True)
    xs = np.array([1.0, 2.0, 3.0])
    jax.vmap(lambda x: jax.debug.print("x={x}", x=x))(xs)
    jax.effects_barrier()
    theirs = capsys.readouterr().out.splitlines()
    tg.vmap(lambda x: tg.debug.print("x={x}", x=x))(xs)
    assert capsys.readouterr().out.splitlines() == theirs
