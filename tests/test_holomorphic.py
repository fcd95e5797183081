"""``holomorphic=True`` on grad, value_and_grad, vjp, jacrev, jacfwd and hessian, with JAX's semantics:
complex inputs and outputs are required (a TypeError naming the argument and the fix otherwise), and
the derivative is the complex derivative f'(z), not its conjugate. Each function of the table is
checked against its derivative in closed form, at orders 1 and 2, under jit and vmap, and (peer tests)
against jax 0.10.2's own holomorphic transforms.
"""
from __future__ import annotations

import re

import numpy as np
import pytest

import tapegrad as tg
import tapegrad.numpy as tnp
from _tol import assert_close
from tapegrad.testing import check_grads

RTOL = 1e-12


def _poly(z):
    return z ** 3 - 2.0 * z + (1.0 - 0.5j)


def _composition(z):
    return tnp.sin(tnp.exp(z)) * tnp.log(z) / (1.0 + z ** 2)


def _composition_prime(z):
    s, c, e, lg, q = np.sin(np.exp(z)), np.cos(np.exp(z)), np.exp(z), np.log(z), 1.0 + z ** 2
    return (c * e * lg + s / z) / q - s * lg * 2.0 * z / q ** 2


# (name, f, f', f''), each elementwise and holomorphic on Re z > 0 (log's branch cut is away)
FUNCTIONS = [
    ("poly", _poly, lambda z: 3.0 * z ** 2 - 2.0, lambda z: 6.0 * z),
    ("exp", tnp.exp, np.exp, np.exp),
    ("log", tnp.log, lambda z: 1.0 / z, lambda z: -1.0 / z ** 2),
    ("sin", tnp.sin, np.cos, lambda z: -np.sin(z)),
    ("composition", _composition, _composition_prime, None),
]
IDS = [f[0] for f in FUNCTIONS]


def _points(shape=(), seed=0):
    rng = np.random.default_rng(seed)
    return np.asarray(rng.uniform(0.3, 1.5, shape) + 1j * rng.uniform(-1.5, 1.5, shape))


@pytest.mark.parametrize("name,f,df,d2f", FUNCTIONS, ids=IDS)
def test_grad_is_the_complex_derivative(name, f, df, d2f):
    z = _points()
    g = tg.grad(f, holomorphic=True)(z)
    assert g.dtype == np.complex128 and g.shape == ()
    assert_close(g, df(z), rtol=RTOL)
    assert_close(g, tg.grad(f)(z), rtol=RTOL)  # the flag checks the promise; the value is the same
    value, g2 = tg.value_and_grad(f, holomorphic=True)(z)
    assert_close(value, f(z), rtol=RTOL)
    assert_close(g2, df(z), rtol=RTOL)
    check_grads(f, (z,), order=2, name=name)


@pytest.mark.parametrize("name,f,df,d2f", [c for c in FUNCTIONS if c[3] is not None], ids=IDS[:-1])
def test_second_order(name, f, df, d2f):
    z = _points()
    assert_close(tg.grad(tg.grad(f, holomorphic=True), holomorphic=True)(z), d2f(z), rtol=RTOL)
    assert_close(tg.hessian(f, holomorphic=True)(z), d2f(z), rtol=RTOL)
    zs = _points((3,), seed=1)
    summed = lambda z: tnp.sum(f(z))  # noqa: E731
    assert_close(tg.hessian(summed, holomorphic=True)(zs), np.diag(d2f(zs)), rtol=RTOL)


@pytest.mark.parametrize("name,f,df,d2f", FUNCTIONS, ids=IDS)
def test_jacobians_vjp_of_a_vector_function(name, f, df, d2f):
    zs = _points((4,), seed=2)

    def mixed(z):  # couples the entries, so the Jacobian is not diagonal
        return f(z) * z[::-1]

    expected = np.diag(df(zs) * zs[::-1]) + np.diag(f(zs))[:, ::-1]
    assert_close(tg.jacrev(mixed, holomorphic=True)(zs), expected, rtol=RTOL)
    assert_close(tg.jacfwd(mixed, holomorphic=True)(zs), expected, rtol=RTOL)
    assert_close(tg.jacrev(mixed, holomorphic=True, chunk_size=3)(zs), expected, rtol=RTOL)
    ct = np.array([1.0 - 1j, 0.5j, 2.0, -1.0 + 0.25j])
    out, vjp_fn = tg.vjp(mixed, zs, holomorphic=True)
    assert_close(vjp_fn(ct)[0], ct @ expected, rtol=RTOL)  # the transpose, not the adjoint
    # a non-scalar output is summed, as for a real one: the gradient is the Jacobian's column sums
    assert_close(tg.grad(mixed, holomorphic=True)(zs), expected.sum(axis=0), rtol=RTOL)


def test_matrix_function():
    rng = np.random.default_rng(3)
    a = rng.standard_normal((2, 2)) + 1j * rng.standard_normal((2, 2))
    square = lambda a: a @ a  # noqa: E731
    jac = tg.jacrev(square, holomorphic=True)(a)
    eye = np.eye(2)
    # d(A A)_ij / dA_kl = delta_ik A_lj + A_ik delta_jl
    expected = np.einsum("ik,lj->ijkl", eye, a) + np.einsum("ik,jl->ijkl", a, eye)
    assert_close(jac, expected, rtol=RTOL)
    assert_close(tg.jacfwd(square, holomorphic=True)(a), expected, rtol=RTOL)
    assert_close(tg.grad(lambda a: tnp.trace(a @ a @ a), holomorphic=True)(a), 3.0 * (a @ a).T, rtol=RTOL)


def test_positions_pytrees_and_aux():
    z, w = _points(seed=4), _points((2,), seed=5)

    def f(params, w):
        return tnp.sum(params["a"] * tnp.exp(params["b"] * w)), "note"

    params = {"a": z, "b": 0.5 + 0.1j + z}
    (ga, gw), aux = tg.grad(f, grad_position=(0, 1), has_aux=True, holomorphic=True)(params, w)
    assert aux == ("note",)
    e = np.exp(params["b"] * w)
    assert_close(ga["a"], np.sum(e), rtol=RTOL)
    assert_close(ga["b"], np.sum(z * w * e), rtol=RTOL)
    assert_close(gw, z * params["b"] * e, rtol=RTOL)
    jac, aux = tg.jacfwd(f, grad_position=1, has_aux=True, holomorphic=True)(params, w)
    assert_close(jac, gw, rtol=RTOL)


def test_weights():
    p = tg.Parameter(np.array([0.5 + 1j, -1.0 + 0.2j]), name="p")
    g = tg.grad(lambda x: tnp.sum(tnp.sin(p * x)), None, p, holomorphic=True)(np.array(2.0 + 0j))
    assert_close(g, 2.0 * np.cos(p.value * 2.0), rtol=RTOL)


@pytest.mark.parametrize("route", ["jit(grad)", "grad(jit)", "vmap(grad)", "jit(vmap(grad))", "jit(jacrev)",
                                   "vmap(jacfwd)"])
def test_under_jit_and_vmap(route):
    zs = _points((5,), seed=6)
    df = 3.0 * zs ** 2 - 2.0
    g = tg.grad(_poly, holomorphic=True)
    got = {
        "jit(grad)": lambda: tg.jit(tg.grad(lambda z: tnp.sum(_poly(z)), holomorphic=True))(zs),
        "grad(jit)": lambda: tg.grad(tg.jit(lambda z: tnp.sum(_poly(z))), holomorphic=True)(zs),
        "vmap(grad)": lambda: tg.vmap(g)(zs),
        "jit(vmap(grad))": lambda: tg.jit(tg.vmap(g))(zs),
        "jit(jacrev)": lambda: np.diag(tg.jit(tg.jacrev(_poly, holomorphic=True))(zs)),
        "vmap(jacfwd)": lambda: tg.vmap(tg.jacfwd(_poly, holomorphic=True))(zs),
    }[route]()
    assert_close(got, df, rtol=RTOL)


def test_errors_name_the_argument_and_the_fix():
    real, z = np.array([0.5, 1.0]), np.array([0.5 + 1j, 1.0 - 1j])
    p = tg.Parameter(np.ones(2), name="real_p")
    cases = [
        (lambda: tg.grad(tnp.sin, holomorphic=True)(real), "input at grad_position 0 has dtype float64"),
        (lambda: tg.value_and_grad(lambda z: tnp.sum(tnp.abs(z)), holomorphic=True)(z),
         "value_and_grad(holomorphic=True) needs complex inputs and outputs, but output leaf 0 has dtype float64"),
        (lambda: tg.grad(lambda x, z: tnp.sum(x * z), grad_position=(1, 0), holomorphic=True)(real, z),
         "input at grad_position 0 has dtype float64"),
        (lambda: tg.jacrev(lambda z: z.real, holomorphic=True)(z), "jacrev(holomorphic=True)"),
        (lambda: tg.jacrev(tnp.sin, holomorphic=True)(real), "jacrev(holomorphic=True)"),
        (lambda: tg.jacfwd(tnp.sin, holomorphic=True)(real), "jacfwd(holomorphic=True)"),
        (lambda: tg.jacfwd(tnp.abs, holomorphic=True)(z), "but output leaf 0 has dtype float64"),
        (lambda: tg.hessian(lambda z: tnp.sum(z ** 2), holomorphic=True)(real), "holomorphic=True"),
        (lambda: tg.vjp(tnp.abs, z, holomorphic=True), "vjp(holomorphic=True)"),
        (lambda: tg.vjp(tnp.sin, real, holomorphic=True), "primal leaf 0 has dtype float64"),
        (lambda: tg.grad(lambda x: tnp.sum(p * x), None, p, holomorphic=True)(z),
         "Parameter 'real_p' has dtype float64"),
    ]
    for call, match in cases:
        with pytest.raises(TypeError, match=re.escape(match)) as info:
            call()
        assert "x.astype(np.complex128)" in str(info.value) or "make this output complex" in str(info.value)
        assert "drop holomorphic=True" in str(info.value)
    for api in (tg.grad, tg.value_and_grad, tg.jacrev, tg.jacfwd):
        with pytest.raises(TypeError, match="holomorphic must be a bool"):
            api(tnp.sin, holomorphic="yes")
    with pytest.raises(TypeError, match="holomorphic must be a bool"):
        tg.vjp(tnp.sin, z, holomorphic=1)


# ---- peers: jax 0.10.2's holomorphic transforms on the same functions ---------------------------------
def _jax_functions():
    import jax
    jax.config.update("jax_enable_x64", True)
    jnp = jax.numpy
    return jax, {
        "poly": lambda z: z ** 3 - 2.0 * z + (1.0 - 0.5j),
        "exp": jnp.exp, "log": jnp.log, "sin": jnp.sin,
        "composition": lambda z: jnp.sin(jnp.exp(z)) * jnp.log(z) / (1.0 + z ** 2),
    }


@pytest.mark.peer("jax")
@pytest.mark.parametrize("name,f,df,d2f", FUNCTIONS, ids=IDS)
def test_matches_jax(name, f, df, d2f):
    jax, peers = _jax_functions()
    fj = peers[name]
    z, zs = _points(seed=7), _points((3,), seed=8)
    assert_close(tg.grad(f, holomorphic=True)(z), np.asarray(jax.grad(fj, holomorphic=True)(z)), rtol=RTOL)
    value, g = tg.value_and_grad(f, holomorphic=True)(z)
    value_j, g_j = jax.value_and_grad(fj, holomorphic=True)(z)
    assert_close(value, np.asarray(value_j), rtol=RTOL)
    assert_close(g, np.asarray(g_j), rtol=RTOL)
    mixed, mixed_j = (lambda z: f(z) * z[::-1]), (lambda z: fj(z) * z[::-1])
    assert_close(tg.jacrev(mixed, holomorphic=True)(zs), np.asarray(jax.jacrev(mixed_j, holomorphic=True)(zs)),
                 rtol=RTOL)
    assert_close(tg.jacfwd(mixed, holomorphic=True)(zs), np.asarray(jax.jacfwd(mixed_j, holomorphic=True)(zs)),
                 rtol=RTOL)
    ct = np.array([1.0 - 1j, 0.5j, 2.0])
    assert_close(tg.vjp(mixed, zs, holomorphic=True)[1](ct)[0], np.asarray(jax.vjp(mixed_j, zs)[1](ct)[0]),
                 rtol=RTOL)
    summed, summed_j = (lambda z: tnp.sum(mixed(z))), (lambda z: mixed_j(z).sum())
    assert_close(tg.hessian(summed, holomorphic=True)(zs), np.asarray(jax.hessian(summed_j, holomorphic=True)(zs)),
                 rtol=1e-11)


@pytest.mark.peer("jax")
def test_errors_where_jax_raises():
    jax, _ = _jax_functions()
    jnp = jax.numpy
    for ours, theirs, arg in [(tg.grad(tnp.sin, holomorphic=True), jax.grad(jnp.sin, holomorphic=True), 0.5),
                              (tg.grad(tnp.abs, holomorphic=True), jax.grad(jnp.abs, holomorphic=True), 0.5 + 1j),
                              (tg.jacfwd(tnp.abs, holomorphic=True), jax.jacfwd(jnp.abs, holomorphic=True),
                               np.array([1j])),
                              (tg.jacrev(tnp.sin, holomorphic=True), jax.jacrev(jnp.sin, holomorphic=True),
                               np.array([0.5]))]:
        with pytest.raises(TypeError, match="holomorphic=True"):
            theirs(arg)
        with pytest.raises(TypeError, match="holomorphic=True"):
            ours(np.asarray(arg))
