"""Complex inputs through the elementwise ops, and real / imag / conj / abs / angle, under JAX's
conventions: holomorphic functions multiply by f'(z) in both modes (no conjugation); the others have
the R-linear map as jvp and its transpose under Re(sum(a * b)) as vjp. check_grads checks exactly
that (JAX's public_test_util convention) with complex directions, to order 2, in both modes."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import tapegrad as tg
import tapegrad.numpy as tnp
from _tol import assert_close
from _vmapcheck import check_vmap_mixes
from tapegrad.testing import check_grads

COMPLEX = [np.complex128, np.complex64]
REAL_OF = {np.complex128: np.float64, np.complex64: np.float32}


@pytest.fixture(autouse=True)
def _complex_warnings_are_errors():
    """A ComplexWarning means an imaginary part was dropped silently somewhere: fail on it."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", np.exceptions.ComplexWarning)
        yield


def _draw(shape, dtype, rng, domain="plane"):
    re, im = rng.uniform(-1.5, 1.5, shape), rng.uniform(-1.5, 1.5, shape)
    if domain == "right":  # Re z > 0.3: away from the branch cuts of log, sqrt and power
        re = rng.uniform(0.3, 1.5, shape)
    elif domain == "disk":  # |z| < 0.6: away from the branch cuts of arcsin, arctanh, ...
        re, im = re * 0.4, im * 0.4
    elif domain == "annulus":  # away from 0, for abs, angle, sign, reciprocal
        r, phi = rng.uniform(0.5, 1.5, shape), rng.uniform(-3.0, 3.0, shape)
        re, im = r * np.cos(phi), r * np.sin(phi)
    return np.asarray(re + 1j * im, dtype=dtype)


HOLOMORPHIC = [
    ("negative", tnp.negative, "plane"), ("exp", tnp.exp, "plane"), ("expm1", tnp.expm1, "plane"),
    ("exp2", tnp.exp2, "plane"), ("log", tnp.log, "right"), ("log1p", tnp.log1p, "right"),
    ("log2", tnp.log2, "right"), ("log10", tnp.log10, "right"), ("sqrt", tnp.sqrt, "right"),
    ("square", tnp.square, "plane"), ("reciprocal", tnp.reciprocal, "annulus"), ("sin", tnp.sin, "plane"),
    ("cos", tnp.cos, "plane"), ("tan", tnp.tan, "disk"), ("tanh", tnp.tanh, "disk"),
    ("sinh", tnp.sinh, "plane"), ("cosh", tnp.cosh, "plane"), ("arcsin", tnp.arcsin, "disk"),
    ("arccos", tnp.arccos, "disk"), ("arctan", tnp.arctan, "disk"), ("arcsinh", tnp.arcsinh, "disk"),
    ("arccosh", tnp.arccosh, "right"), ("arctanh", tnp.arctanh, "disk"), ("sinc", tnp.sinc, "plane"),
]


@pytest.mark.parametrize("dtype", COMPLEX, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("name,fn,domain", HOLOMORPHIC, ids=[c[0] for c in HOLOMORPHIC])
def test_holomorphic_unary(name, fn, domain, dtype):
    z = _draw((3, 2), dtype, np.random.default_rng(0), domain)
    out = fn(z)
    assert_close(out, getattr(np, name)(z), rtol=1e-5 if dtype == np.complex64 else 1e-12)
    assert out.dtype == dtype
    check_grads(fn, (z,), order=2, name=name)
    # holomorphic: the vjp of a unit cotangent is f'(z), not its conjugate (JAX's convention)
    eps = 1e-7 if dtype == np.complex128 else 1e-3
    z0 = z.astype(np.complex128)
    derivative = (getattr(np, name)(z0 + eps) - getattr(np, name)(z0 - eps)) / (2 * eps)
    ct = tg.vjp(fn, z)[1](np.ones_like(z))[0]
    assert_close(ct, derivative, rtol=1e-5 if dtype == np.complex128 else 2e-2)
    assert ct.dtype == dtype
    assert_close(tg.jvp(fn, (z,), (np.ones_like(z),))[1], ct, rtol=1e-6)


@pytest.mark.parametrize("dtype", COMPLEX, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("name,fn,domain", HOLOMORPHIC, ids=[c[0] for c in HOLOMORPHIC])
def test_holomorphic_unary_vmap(name, fn, domain, dtype):
    z = _draw((3, 2), dtype, np.random.default_rng(0), domain)
    check_vmap_mixes(fn, (z,))


BINARY = [
    ("add", tnp.add), ("subtract", tnp.subtract), ("multiply", tnp.multiply), ("divide", tnp.divide),
    ("power", tnp.power),
    ("where", lambda x, y: tnp.where(np.array([True, False]), x, y)),
]
# (complex, complex), (complex, real) and (real, complex), with broadcasting
KINDS = [("cc", (3, 2), (2,)), ("cr", (3, 2), (2,)), ("rc", (2,), (3, 2))]


@pytest.mark.parametrize("dtype", COMPLEX, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("kind,sx,sy", KINDS, ids=[k[0] for k in KINDS])
@pytest.mark.parametrize("name,fn", BINARY, ids=[b[0] for b in BINARY])
def test_binary_mixing_real_and_complex(name, fn, kind, sx, sy, dtype):
    rng = np.random.default_rng(1)
    x, y = _draw(sx, dtype, rng, "right"), _draw(sy, dtype, rng, "annulus")
    if kind[0] == "r":
        x = x.real.copy()
    if kind[1] == "r":
        y = y.real.copy()
    check_grads(fn, (x, y), order=2, name=name)
    gx, gy = tg.vjp(fn, x, y)[1](np.ones(np.broadcast_shapes(sx, sy), dtype))
    # each cotangent has its operand's shape and dtype: a real operand gets the real part
    assert (gx.shape, gx.dtype, gy.shape, gy.dtype) == (x.shape, x.dtype, y.shape, y.dtype)


@pytest.mark.parametrize("dtype", COMPLEX, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("kind,sx,sy", KINDS, ids=[k[0] for k in KINDS])
@pytest.mark.parametrize("name,fn", BINARY, ids=[b[0] for b in BINARY])
def test_binary_mixing_real_and_complex_vmap(name, fn, kind, sx, sy, dtype):
    rng = np.random.default_rng(1)
    x, y = _draw(sx, dtype, rng, "right"), _draw(sy, dtype, rng, "annulus")
    x, y = (x.real.copy() if kind[0] == "r" else x), (y.real.copy() if kind[1] == "r" else y)
    check_vmap_mixes(fn, (x, y))


def test_real_operand_gets_the_real_part_of_the_cotangent():
    w = np.array([1.0 + 2.0j, -0.5 + 1.0j])
    x = np.array([0.3, 0.7])
    # d/dx Re(x * w) = Re(w); d/dx Im(x * w) = Im(w)
    assert_close(tg.grad(lambda x: tnp.real(x * w).sum())(x), w.real)
    assert_close(tg.grad(lambda x: tnp.imag(x * w).sum())(x), w.imag)
    g = tg.grad(lambda x: tnp.abs(tnp.astype(x, np.complex64) * w.astype(np.complex64)).sum())(x.astype(np.float32))
    assert g.dtype == np.float32
    assert_close(g, np.abs(w), rtol=1e-6)
    # complex -> real cast keeps the real part, as NumPy (and without its warning)
    z = np.array([1.0 + 2.0j])
    np.testing.assert_array_equal(tnp.astype(z, np.float64), [1.0])
    check_grads(lambda z: tnp.astype(z, np.float64) * 3.0, (z,), name="astype c->r")
    check_grads(lambda x: tnp.astype(x, np.complex128) * w, (x,), name="astype r->c")


# ---- the parts: real, imag, conj, abs, angle, sign -----------------------------------------------
PARTS = [
    ("real", tnp.real, np.real), ("imag", tnp.imag, np.imag), ("conj", tnp.conj, np.conj),
    ("conjugate", tnp.conjugate, np.conjugate), ("abs", tnp.abs, np.abs), ("absolute", tnp.absolute, np.absolute),
    ("angle", tnp.angle, np.angle), ("angle-deg", lambda z: tnp.angle(z, deg=True), lambda z: np.angle(z, deg=True)),
    ("sign", tnp.sign, np.sign),
]


@pytest.mark.parametrize("dtype", COMPLEX, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("name,fn,ref", PARTS, ids=[p[0] for p in PARTS])
def test_parts(name, fn, ref, dtype):
    z = _draw((3, 2), dtype, np.random.default_rng(2), "annulus")
    out = fn(z)
    assert_close(out, ref(z), rtol=1e-5 if dtype == np.complex64 else 1e-12)
    assert out.dtype == ref(z).dtype
    check_grads(fn, (z,), order=2, name=name)


@pytest.mark.parametrize("dtype", COMPLEX + [np.float64], ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("name,fn,ref", PARTS, ids=[p[0] for p in PARTS])
def test_parts_vmap(name, fn, ref, dtype):
    rng = np.random.default_rng(2)  # real inputs too: real, imag, conj and angle of a real batch
    z = rng.uniform(-1.5, 1.5, (3, 2)) if dtype == np.float64 else _draw((3, 2), dtype, rng, "annulus")
    check_vmap_mixes(fn, (z,))


def test_parts_known_derivatives():
    z = np.asarray(3.0 + 4.0j)
    # JAX's autodiff cookbook: for f(z) = |z|^2 = x^2 + y^2, grad gives 2 conj(z) = 6 - 8j
    assert_close(tg.grad(lambda z: tnp.real(z) ** 2 + tnp.imag(z) ** 2)(z), 6.0 - 8.0j)
    assert_close(tg.grad(lambda z: tnp.abs(z) ** 2)(z), 6.0 - 8.0j)
    assert_close(tg.grad(tnp.abs)(z), (3.0 - 4.0j) / 5.0)  # conj(z) / |z|
    assert_close(tg.grad(tnp.real)(z), 1.0)
    assert_close(tg.grad(tnp.imag)(z), -1.0j)
    # forward mode: the R-linear maps themselves
    t = np.asarray(1.0 + 2.0j)
    assert_close(tg.jvp(tnp.abs, (z,), (t,))[1], (3.0 * 1.0 + 4.0 * 2.0) / 5.0)  # Re(conj(z) t)/|z|
    assert_close(tg.jvp(tnp.conj, (z,), (t,))[1], 1.0 - 2.0j)
    assert_close(tg.jvp(tnp.imag, (z,), (t,))[1], 2.0)
    assert_close(tg.jvp(tnp.angle, (z,), (t,))[1], (3.0 * 2.0 - 4.0 * 1.0) / 25.0)  # Im(t / z)
    # abs'(0) = 0 for complex too
    np.testing.assert_array_equal(tg.grad(lambda z: tnp.abs(z).sum())(np.zeros(2, complex)), 0.0)
    np.testing.assert_array_equal(tg.jvp(tnp.abs, (np.zeros(2, complex),), (np.ones(2, complex),))[1], 0.0)


@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=lambda d: np.dtype(d).name)
def test_real_to_complex_to_real(dtype):
    rng = np.random.default_rng(3)
    x, y = rng.uniform(-1, 1, (3,)).astype(dtype), rng.uniform(-1, 1, (3,)).astype(dtype)

    def f(x, y):
        return tnp.abs(tnp.exp(x + 1j * y))  # = exp(x)

    gx, gy = tg.grad(lambda x, y: f(x, y).sum(), (0, 1))(x, y)
    assert gx.dtype == gy.dtype == dtype
    assert_close(gx, np.exp(x), rtol=1e-6)
    assert_close(gy, 0.0, atol=1e-6)
    for g in (lambda x, y: f(x, y), lambda x, y: tnp.angle(tnp.exp(x + 1j * y) * (x - 2j)),
              lambda x, y: tnp.real(tnp.sqrt(x + 2.0 + 1j * y) * tnp.conj(x * 1j + y)),
              lambda x, y: (x + 1j * y).real * (x - 1j * y).imag):
        check_grads(g, (x, y), order=2)


def test_real_inputs_pass_through():
    x = np.array([1.5, -2.0])
    assert tnp.real(x) is x and tnp.conj(x) is x
    np.testing.assert_array_equal(tnp.imag(x), [0.0, 0.0])
    np.testing.assert_array_equal(tnp.angle(x), np.angle(x))
    np.testing.assert_array_equal(tg.grad(lambda x: (tnp.real(x) + tnp.imag(x) + tnp.conj(x)).sum())(x), 2.0)
    np.testing.assert_array_equal(tg.grad(lambda x: tnp.angle(x).sum())(x), 0.0)
    assert tnp.real([1.0 + 1j, 2.0]).tolist() == [1.0, 2.0]


def test_tracer_methods_and_numpy_dispatch():
    z = np.array([1.0 + 2.0j, -0.5 + 0.25j])

    def by_methods(z):
        return z.real * z.imag + (z.conj() * z.conjugate()).real + np.abs(z) + np.angle(z)

    def by_functions(z):
        return np.real(z) * np.imag(z) + np.real(np.conj(z) * np.conjugate(z)) + tnp.abs(z) + tnp.angle(z)

    expected = z.real * z.imag + (z.conj() * z.conjugate()).real + np.abs(z) + np.angle(z)
    assert_close(tg.vjp(by_methods, z)[0], expected)
    assert_close(tg.vjp(by_functions, z)[0], expected)
    assert_close(tg.grad(lambda z: by_methods(z).sum())(z), tg.grad(lambda z: by_functions(z).sum())(z))
    check_grads(by_methods, (z,), order=2)


def test_nested_derivatives_of_a_holomorphic_function():
    # d^2/dz^2 exp(z^2) = (2 + 4 z^2) exp(z^2), by grad of grad and by jvp of grad
    z = np.asarray(0.3 + 0.4j)
    f = lambda z: tnp.exp(z * z)  # noqa: E731
    first = lambda z: tg.vjp(f, z)[1](np.ones_like(z))[0]  # noqa: E731
    expected = (2 + 4 * z ** 2) * np.exp(z ** 2)
    assert_close(tg.vjp(first, z)[1](np.ones_like(z))[0], expected)
    assert_close(tg.jvp(first, (z,), (np.ones_like(z),))[1], expected)
