"""jit: staging, the cache, Parameters as implicit inputs and outputs, and the composition routes."""
import numpy as np
import pytest

import tapegrad as tg
import tapegrad.numpy as tnp
from tapegrad._core import trace_stack

RNG = np.random.default_rng(0)
X, Y = RNG.normal(size=3), RNG.normal(size=3)


def f(x, y):
    return tnp.sum(tnp.sin(x) * y + 2.0)


def test_make_program_prints_the_equations_and_typechecks():
    program = tg.make_program(f)(X, Y)
    text = str(program)
    for word in ("sin a", "multiply", "add", "sum[axis=None keepdims=False]", "a:f64[3]", "in (f)"):
        assert word in text
    program.typecheck()


def test_jit_agrees_with_eager_and_caches_by_signature():
    jf = tg.jit(f)
    np.testing.assert_allclose(jf(X, Y), f(X, Y), rtol=1e-15)
    jf(X + 1.0, Y)  # same shapes: no new program
    assert jf._cache_size() == 1
    jf(X[:2], Y[:2])
    assert jf._cache_size() == 2
    jf(X.astype(np.float32), Y.astype(np.float32))
    assert jf._cache_size() == 3


@pytest.mark.parametrize("route", ["grad(jit)", "jit(grad)", "vmap(jit)", "jit(vmap(grad))", "jit(jit)",
                                   "jvp(jit)", "grad(grad(jit))"])
def test_composition_routes_agree_with_eager(route):
    xs, ys = np.stack([X, 2 * X]), np.stack([Y, Y])
    cases = {
        "grad(jit)": (lambda: tg.grad(tg.jit(f))(X, Y), lambda: tg.grad(f)(X, Y)),
        "jit(grad)": (lambda: tg.jit(tg.grad(f))(X, Y), lambda: tg.grad(f)(X, Y)),
        "vmap(jit)": (lambda: tg.vmap(tg.jit(f))(xs, ys), lambda: tg.vmap(f)(xs, ys)),
        "jit(vmap(grad))": (lambda: tg.jit(tg.vmap(tg.grad(f)))(xs, ys), lambda: tg.vmap(tg.grad(f))(xs, ys)),
        "jit(jit)": (lambda: tg.jit(tg.jit(f))(X, Y), lambda: f(X, Y)),
        "jvp(jit)": (lambda: tg.jvp(tg.jit(f), (X, Y), (Y, X))[1], lambda: tg.jvp(f, (X, Y), (Y, X))[1]),
        "grad(grad(jit))": (lambda: tg.grad(tg.grad(tg.jit(lambda x: tnp.sin(x) ** 3)))(0.3),
                            lambda: tg.grad(tg.grad(lambda x: tnp.sin(x) ** 3))(0.3)),
    }
    got, expected = cases[route]
    np.testing.assert_allclose(got(), expected(), rtol=1e-13)
    assert trace_stack() == ()


def test_parameters_are_read_fresh_and_written_back():
    p = tg.Parameter(np.ones(3))
    g = tg.jit(lambda x: tnp.sum(p * x))
    np.testing.assert_allclose(g(X), np.sum(X))
    p.assign(2.0 * np.ones(3))
    np.testing.assert_allclose(g(X), 2.0 * np.sum(X))  # not baked in as a constant
    assert g._cache_size() == 1

    def step(x):
        grads = tg.grad(lambda x: tnp.sum((p * x) ** 2), grad_position=None, weights=p)(x)
        p.assign(p - 0.1 * grads)
        return tnp.sum(p)
    before = np.array(p.value)
    out = tg.jit(step)(X)
    expected = before - 0.1 * 2.0 * before * X ** 2
    np.testing.assert_allclose(p.value, expected, rtol=1e-14)
    np.testing.assert_allclose(out, expected.sum(), rtol=1e-14)


def test_errors():
    with pytest.raises(tg.errors.ConcretizationError, match="static_argnums"):
        tg.jit(lambda x: x if x[0] > 0 else -x)(X)
    with pytest.raises(ValueError, match="not hashable"):
        tg.jit(lambda x, n: x * n[0], static_argnums=1)(X, [1])
    np.testing.assert_allclose(tg.jit(lambda x, n: x * n[0], static_argnums=1)(X, (3,)), 3 * X)
    assert trace_stack() == ()
