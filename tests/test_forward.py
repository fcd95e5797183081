"""Forward mode through the public API: jvp and linearize, their argument checks, and every nesting
with reverse mode (Hessian-vector products both ways, perturbation confusion)."""
import numpy as np
import pytest

import tapegrad as tg
import tapegrad.numpy as tnp
from _tol import assert_close
from tapegrad._core import trace_stack

X = np.array([0.3, 1.2, -0.5])
V = np.array([1.0, -2.0, 0.5])


def f(x):
    return tnp.sum(tnp.sin(x) * x ** 2)


def grad_f(x):  # analytic: d/dx sin(x) x^2
    return np.cos(x) * x ** 2 + 2 * x * np.sin(x)


def hess_f_diag(x):  # the Hessian of a sum of scalar functions is diagonal
    return -np.sin(x) * x ** 2 + 4 * x * np.cos(x) + 2 * np.sin(x)


def test_jvp_is_the_directional_derivative():
    out, t = tg.jvp(f, (X,), (V,))
    assert_close(out, np.sum(np.sin(X) * X ** 2))
    assert_close(t, grad_f(X) @ V)


def test_jvp_on_pytrees_and_several_arguments():
    def g(p, y):
        return {"a": p["w"] * y, "b": tnp.exp(p["b"])}
    p = {"w": np.array([1.0, 2.0]), "b": np.array(0.5)}
    tp = {"w": np.array([0.1, 0.2]), "b": np.array(1.0)}
    y, ty = np.array([3.0, 4.0]), np.array([1.0, 0.0])
    out, t = tg.jvp(g, (p, y), (tp, ty))
    assert_close(t["a"], tp["w"] * y + p["w"] * ty)
    assert_close(t["b"], np.exp(0.5))
    assert_close(out["a"], [3.0, 8.0])


def test_jvp_of_an_output_independent_of_the_input_is_zero():
    out, t = tg.jvp(lambda x: (x * 2.0, np.ones(2)), (X,), (V,))
    assert_close(t[0], 2 * V)
    np.testing.assert_array_equal(t[1], np.zeros(2))


def test_jvp_has_aux_conventions():
    out, t, aux = tg.jvp(lambda x: (tnp.sum(x * x), x + 1.0), (X,), (V,), has_aux=True)
    assert_close(t, 2 * X @ V)
    assert_close(aux, X + 1.0)
    assert type(aux) is np.ndarray  # aux is at rest, not a tracer
    out, t, aux = tg.jvp(lambda x: (tnp.sum(x), x, 3), (X,), (V,), has_aux=True)
    assert isinstance(aux, tuple) and aux[1] == 3


def test_jvp_keeps_float32():
    x = X.astype(np.float32)
    out, t = tg.jvp(lambda x: tnp.tanh(x) * 2.0, (x,), (V.astype(np.float32),))
    assert out.dtype == t.dtype == np.float32


def test_jvp_accepts_python_floats():
    out, t = tg.jvp(lambda x: x * x, (3.0,), (1.0,))
    assert float(t) == 6.0


@pytest.mark.parametrize("primals,tangents,exc,match", [
    (X, (V,), TypeError, "primals must be a tuple or list"),
    ((X,), V, TypeError, "tangents must be a tuple or list"),
    ((X,), (V, V), ValueError, "1 primals but 2 tangents"),
    ((X,), (V[:2],), ValueError, "shape \\(2,\\)"),
    ((X,), (V.astype(np.float32),), TypeError, "dtype float32"),
    (({"a": X},), ({"b": V},), ValueError, "structure"),
    ((np.arange(3),), (np.arange(3),), TypeError, "floating"),
])
def test_jvp_argument_errors(primals, tangents, exc, match):
    with pytest.raises(exc, match=match):
        tg.jvp(f, primals, tangents)
    assert trace_stack() == ()


def test_linearize_matches_jvp_and_is_reusable():
    out, jvp_fn = tg.linearize(f, X)
    assert_close(out, f(X))
    for v in (V, 2 * V, np.ones(3)):
        assert_close(jvp_fn(v), tg.jvp(f, (X,), (v,))[1])


def test_linearize_does_not_run_fn_again():
    calls = []

    def g(x):
        calls.append(1)
        return tnp.sin(x) * x
    out, jvp_fn = tg.linearize(g, X)
    for v in (V, np.ones(3)):
        assert_close(jvp_fn(v), (np.cos(X) * X + np.sin(X)) * v)
    assert len(calls) == 1


def test_linearize_has_aux_and_errors():
    out, jvp_fn, aux = tg.linearize(lambda x: (tnp.sum(x ** 2), x * 2.0), X, has_aux=True)
    assert_close(aux, 2 * X)
    assert_close(jvp_fn(V), 2 * X @ V)
    with pytest.raises(ValueError, match="linearize: tangent leaf 0 has shape"):
        jvp_fn(V[:2])
    with pytest.raises(TypeError, match="linearize: tangent leaf 0 has dtype"):
        jvp_fn(V.astype(np.float32))


def test_linearize_through_custom_rules_and_checkpoint():
    @tg.custom_vjp
    def double(x):
        return x * 2.0
    double.defvjp(lambda x: (x * 2.0, None), lambda res, g: (g * 2.0,))

    @tg.custom_jvp
    def cube(x):
        return x ** 3

    @cube.defjvp
    def cube_jvp(primals, tangents):
        (x,), (t,) = primals, tangents
        return cube(x), 3.0 * x ** 2 * t
    g = lambda x: tg.checkpoint(tnp.sin)(cube(double(x)))
    _, jvp_fn = tg.linearize(g, X)
    assert_close(jvp_fn(V), tg.jvp(g, (X,), (V,))[1])
    assert_close(jvp_fn(V), np.cos(8 * X ** 3) * 24 * X ** 2 * V)


def test_linearized_tangents_are_differentiable_again():
    # d/dx of jvp_fn(v) = H v: the linearization's sweep is recorded by an outer grad
    hvp = tg.grad(lambda x: tg.linearize(f, x)[1](V))(X)
    assert_close(hvp, hess_f_diag(X) * V)


def test_hessian_vector_product_forward_over_reverse():
    _, hvp = tg.jvp(tg.grad(f), (X,), (V,))
    assert_close(hvp, hess_f_diag(X) * V)


def test_hessian_vector_product_reverse_over_forward():
    hvp = tg.grad(lambda x: tg.jvp(f, (x,), (V,))[1])(X)
    assert_close(hvp, hess_f_diag(X) * V)


def test_hessian_vector_product_reverse_over_reverse_agrees():
    hvp = tg.grad(lambda x: tnp.sum(tg.grad(f)(x) * V))(X)
    assert_close(hvp, hess_f_diag(X) * V)


def test_third_derivative_through_jvp_of_jvp_of_grad():
    x, one = np.array(0.7), np.array(1.0)
    d2 = lambda x: tg.jvp(tg.grad(tnp.sin), (x,), (one,))[1]
    d3 = tg.jvp(d2, (x,), (one,))[1]
    assert_close(d3, -np.cos(0.7))


def test_perturbation_confusion_forward_mode():
    # d/dx [x * d/dy (x + y)] at y = 1 is 1, not 2 (Siskind and Pearlmutter)
    def outer(x):
        return x * tg.jvp(lambda y: x + y, (np.array(1.0),), (np.array(1.0),))[1]
    assert float(tg.jvp(outer, (np.array(2.0),), (np.array(1.0),))[1]) == 1.0
    assert float(tg.grad(outer)(np.array(2.0))) == 1.0


def test_tenth_derivative_of_sin_by_forward_mode():
    one = np.ones((2, 2))
    fn = tnp.sin
    for _ in range(10):
        fn = (lambda g: lambda x: tg.jvp(g, (x,), (one,))[1])(fn)
    x = np.array([[0.1, 0.5], [1.0, 2.0]])
    assert_close(fn(x), -np.sin(x))


def test_trace_stack_is_clean_after_an_error_inside_jvp():
    def bad(x):
        raise RuntimeError("boom")
    with pytest.raises(RuntimeError, match="boom"):
        tg.jvp(bad, (X,), (V,))
    assert trace_stack() == ()


def test_python_control_flow_on_a_forward_tracer_uses_the_primal():
    out, t = tg.jvp(lambda x: x * 2.0 if x > 0 else -x, (np.array(1.5),), (np.array(1.0),))
    assert float(t) == 2.0
