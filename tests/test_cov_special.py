"""tapegrad.scipy.special, the functions that complete jax.scipy.special and the Bessel family: values
against SciPy, derivatives against finite differences to order 2 in both modes (float64, float32 and
complex where the function takes it), one vmap and one jit check per function, and the traps: the
parameter derivatives that raise rather than give zero, integer orders, derivatives against SciPy's
own (``jvp``/``ivp``/``kvp``/``yvp``), the removable singularities (``boxcox`` at ``lmbda = 0``,
``spence`` at 1, ``sici`` at 0), and the regions outside a function's support."""
from __future__ import annotations

import numpy as np
import pytest
import scipy.integrate
import scipy.special as ss
import scipy.stats

import tapegrad as tg
import tapegrad.scipy.special as tsp
from _specs import OpSpec
from _tol import assert_close
from _vmapcheck import check_vmap_mixes
from tapegrad.errors import ConcretizationError
from tapegrad.testing import check_grads

DOMAINS = {
    "real": (-2.0, 2.0),
    "pos": (0.5, 2.5),
    "unit": (0.15, 0.85),
    "small": (0.1, 0.6),     # hyp2f1's argument, well inside its disc of convergence
    "near1": (0.5, 1.8),     # spence around its removable singularity at 1
    "negoff": (-2.9, -2.1),  # gamma functions between poles
    "lmbda": (-1.5, 1.5),
    "angle": (0.3, 2.8),     # polar angles away from the poles
    "wide": (0.5, 12.0),     # gammainc's a-derivative through both its series and its continued fraction
    "gt1": (1.2, 4.0),       # zeta's exponent, right of the pole
    "crit": (0.2, 0.9),      # the Riemann zeta function left of its pole (SciPy's continuation)
}
DTYPES = [np.float64, np.float32]
INT_ORDERS = np.array([0, 1, 3])


def _draw(domain, shape, dtype, rng):
    lo, hi = DOMAINS[domain]
    return np.asarray(rng.uniform(lo, hi, shape), dtype=dtype)


def _pair(f, i):
    return lambda *a: f(*a)[i]


# each op takes its differentiable arguments only (parameters without a derivative are fixed here)
SPECS = [
    OpSpec("beta", tsp.beta, ss.beta, ("pos", "pos")),
    OpSpec("poch", tsp.poch, ss.poch, ("pos", "pos")),
    OpSpec("rgamma", tsp.rgamma, ss.rgamma, ("pos",)),
    OpSpec("rgamma-neg", tsp.rgamma, ss.rgamma, ("negoff",)),
    OpSpec("loggamma", tsp.loggamma, ss.loggamma, ("pos",)),
    OpSpec("factorial", tsp.factorial, lambda n: ss.factorial(n), ("pos",)),
    OpSpec("comb", lambda n, k: tsp.comb(n + 2.0, k), lambda n, k: ss.comb(n + 2.0, k), ("pos", "pos")),
    OpSpec("comb-repetition", lambda n, k: tsp.comb(n, k, repetition=True),
           lambda n, k: ss.comb(n, k, repetition=True), ("pos", "pos")),
    OpSpec("gammainc", lambda x: tsp.gammainc(1.7, x), lambda x: ss.gammainc(1.7, x), ("pos",)),
    OpSpec("gammaincc", lambda x: tsp.gammaincc(0.6, x), lambda x: ss.gammaincc(0.6, x), ("pos",)),
    OpSpec("gammainc-a-x", tsp.gammainc, ss.gammainc, ("pos", "pos")),
    OpSpec("gammaincc-a-x", tsp.gammaincc, ss.gammaincc, ("pos", "wide")),
    OpSpec("betainc", lambda x: tsp.betainc(1.5, 2.5, x), lambda x: ss.betainc(1.5, 2.5, x), ("unit",)),
    OpSpec("betainc-a-b-x", tsp.betainc, ss.betainc, ("pos", "wide", "unit")),
    OpSpec("zeta", lambda q: tsp.zeta(2.5, q), lambda q: ss.zeta(2.5, q), ("pos",)),
    OpSpec("zeta-x-q", tsp.zeta, ss.zeta, ("gt1", "pos")),
    OpSpec("zeta-riemann", tsp.zeta, ss.zeta, ("crit",)),
    OpSpec("expi", tsp.expi, ss.expi, ("pos",)),
    OpSpec("expi-neg", tsp.expi, ss.expi, ("negoff",)),
    OpSpec("exp1", tsp.exp1, ss.exp1, ("pos",)),
    OpSpec("expn", lambda x: tsp.expn(INT_ORDERS[:, None], x), lambda x: ss.expn(INT_ORDERS[:, None], x), ("pos",)),
    OpSpec("dawsn", tsp.dawsn, ss.dawsn, ("real",)),
    OpSpec("spence", tsp.spence, ss.spence, ("near1",)),
    OpSpec("sici-si", _pair(tsp.sici, 0), _pair(ss.sici, 0), ("real",)),
    OpSpec("sici-ci", _pair(tsp.sici, 1), _pair(ss.sici, 1), ("pos",)),
    OpSpec("fresnel-s", _pair(tsp.fresnel, 0), _pair(ss.fresnel, 0), ("real",)),
    OpSpec("fresnel-c", _pair(tsp.fresnel, 1), _pair(ss.fresnel, 1), ("real",)),
    OpSpec("owens_t", tsp.owens_t, ss.owens_t, ("real", "real")),
    OpSpec("hyp1f1", lambda x: tsp.hyp1f1(0.7, 1.9, x), lambda x: ss.hyp1f1(0.7, 1.9, x), ("real",)),
    OpSpec("hyp2f1", lambda x: tsp.hyp2f1(0.7, 1.2, 2.1, x), lambda x: ss.hyp2f1(0.7, 1.2, 2.1, x), ("small",)),
    OpSpec("kl_div", tsp.kl_div, ss.kl_div, ("pos", "pos")),
    OpSpec("rel_entr", tsp.rel_entr, ss.rel_entr, ("pos", "pos")),
    OpSpec("boxcox", tsp.boxcox, ss.boxcox, ("pos", "lmbda")),
    OpSpec("boxcox1p", tsp.boxcox1p, ss.boxcox1p, ("unit", "lmbda")),
    OpSpec("jv", lambda z: tsp.jv(1.5, z), lambda z: ss.jv(1.5, z), ("pos",)),
    OpSpec("jn", lambda z: tsp.jn(INT_ORDERS[:, None], z), lambda z: ss.jn(INT_ORDERS[:, None], z), ("real",)),
    OpSpec("yv", lambda z: tsp.yv(0.7, z), lambda z: ss.yv(0.7, z), ("pos",)),
    OpSpec("yn", lambda z: tsp.yn(INT_ORDERS[:, None], z), lambda z: ss.yn(INT_ORDERS[:, None], z), ("pos",)),
    OpSpec("iv", lambda z: tsp.iv(2.5, z), lambda z: ss.iv(2.5, z), ("pos",)),
    OpSpec("ive", lambda z: tsp.ive(1, z), lambda z: ss.ive(1, z), ("real",)),
    OpSpec("kv", lambda z: tsp.kv(0.3, z), lambda z: ss.kv(0.3, z), ("pos",)),
    OpSpec("kve", lambda z: tsp.kve(2, z), lambda z: ss.kve(2, z), ("pos",)),
    OpSpec("j0", tsp.j0, ss.j0, ("real",)),
    OpSpec("j1", tsp.j1, ss.j1, ("real",)),
    OpSpec("y0", tsp.y0, ss.y0, ("pos",)),
    OpSpec("y1", tsp.y1, ss.y1, ("pos",)),
    OpSpec("bessel_jn", lambda z: tsp.bessel_jn(z, v=3),
           lambda z: np.stack([ss.jv(k, z) for k in range(4)]), ("real",)),
    OpSpec("sph_harm_y", lambda t, p: tsp.sph_harm_y(INT_ORDERS[:, None] + 1, INT_ORDERS[:, None] - 1, t, p),
           lambda t, p: ss.sph_harm_y(INT_ORDERS[:, None] + 1, INT_ORDERS[:, None] - 1, t, p), ("angle", "real")),
    OpSpec("wofz", tsp.wofz, ss.wofz, ("real",)),
]
SHAPES = {1: [(), (2,)], 2: [((), ()), ((2,), ()), ((1, 2), (3, 1))], 3: [((), (), ()), ((2,), (), (3, 1))]}
CASES = [(spec, shapes) for spec in SPECS for shapes in SHAPES[len(spec.domains)]]


def _args(spec, shapes, dtype, seed=0):
    rng = np.random.default_rng(seed)
    shapes = (shapes,) if len(spec.domains) == 1 else shapes
    return tuple(_draw(d, s, dtype, rng) for d, s in zip(spec.domains, shapes))


def _result_dtype(spec, dtype):
    complex_valued = spec.name in ("wofz", "sph_harm_y")
    return np.result_type(dtype, np.complex64) if complex_valued else np.dtype(dtype)


def _value_tol(dtype):
    return dict(rtol=2e-5, atol=1e-6) if dtype == np.float32 else dict(rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("spec,shapes", CASES, ids=[f"{s.name}-{sh}" for s, sh in CASES])
def test_values_and_derivatives(spec, shapes, dtype):
    args = _args(spec, shapes, dtype)
    out = spec.op(*args)
    expected = spec.ref(*[a.astype(np.float64) for a in args])
    assert np.result_type(out) == _result_dtype(spec, dtype) and np.shape(out) == np.shape(expected)
    assert_close(out, expected, **_value_tol(dtype))
    check_grads(spec.op, args, order=2, modes=("fwd", "rev"), name=spec.name)
    grads = tg.grad(lambda *a: tg.numpy.real(spec.op(*a)).sum(), grad_position=tuple(range(len(args))))(*args)
    for g, a in zip(grads, args):
        assert g.shape == a.shape and g.dtype == dtype


@pytest.mark.parametrize("spec", SPECS, ids=repr)
def test_vmap(spec):
    check_vmap_mixes(spec.op, _args(spec, SHAPES[len(spec.domains)][1], np.float64, seed=1))


@pytest.mark.parametrize("spec", SPECS, ids=repr)
def test_jit_value_and_grad(spec):
    args = _args(spec, SHAPES[len(spec.domains)][1], np.float64, seed=2)
    assert_close(tg.jit(spec.op)(*args), spec.op(*args))
    loss = lambda *a: tg.numpy.real(spec.op(*a)).sum()  # noqa: E731
    grad = tg.grad(loss, grad_position=tuple(range(len(args))))
    for got, want in zip(tg.jit(grad)(*args), grad(*args)):
        assert_close(got, want)


@pytest.mark.parametrize("dtype", [np.complex128, np.complex64], ids=lambda d: np.dtype(d).name)
def test_wofz_complex(dtype):
    z = (np.array([0.3, -1.2, 2.5]) + 1j * np.array([0.5, -0.2, 1.0])).astype(dtype)
    out = tsp.wofz(z)
    assert out.dtype == dtype
    assert_close(out, ss.wofz(z.astype(np.complex128)), **_value_tol(np.float32 if dtype == np.complex64 else 1))
    check_grads(tsp.wofz, (z,), order=2, name="wofz")
    # holomorphic: the jvp is w'(z) t with w' = -2 z w + 2i/sqrt(pi)
    _, t = tg.jvp(tsp.wofz, (z,), (np.ones_like(z),))
    assert_close(t, -2 * z * out + 2j / np.sqrt(np.pi))


def test_loggamma_complex_first_derivative():
    z = np.array([1.5 + 0.5j, 0.3 - 2.0j])
    assert_close(tsp.loggamma(z), ss.loggamma(z))
    check_grads(tsp.loggamma, (z,), order=1, name="loggamma")
    assert_close(tg.jvp(tsp.loggamma, (z,), (np.ones_like(z),))[1], ss.digamma(z))


# ---- derivatives against SciPy's own and closed forms -------------------------------------------
@pytest.mark.parametrize("name,derivative", [("jv", ss.jvp), ("yv", ss.yvp), ("iv", ss.ivp), ("kv", ss.kvp)])
@pytest.mark.parametrize("v", [0, 1.5, -0.7, 3])
def test_bessel_derivatives_match_scipy(name, derivative, v):
    z = np.array([0.4, 1.3, 4.0, 9.5])
    f = lambda z: getattr(tsp, name)(v, z)  # noqa: E731
    d1 = tg.grad(lambda z: f(z).sum())
    assert_close(d1(z), derivative(v, z, 1), rtol=1e-12)
    assert_close(tg.grad(lambda z: d1(z).sum())(z), derivative(v, z, 2), rtol=1e-11)
    assert_close(tg.jvp(f, (z,), (np.ones(4),))[1], derivative(v, z, 1), rtol=1e-12)


def test_scaled_bessel_derivatives():
    z = np.array([-3.0, -0.5, 0.7, 6.0])
    assert_close(tg.grad(lambda z: tsp.ive(1.0, z).sum())(z),
                 np.exp(-np.abs(z)) * (ss.ivp(1.0, z) - np.sign(z) * ss.iv(1.0, z)), rtol=1e-12)
    zp = np.abs(z)
    assert_close(tg.grad(lambda z: tsp.kve(0.5, z).sum())(zp), np.exp(zp) * (ss.kvp(0.5, zp) + ss.kv(0.5, zp)),
                 rtol=1e-12)
    for f, ref in [(tsp.j0, lambda z: ss.jvp(0, z)), (tsp.j1, lambda z: ss.jvp(1, z)),
                   (tsp.y0, lambda z: ss.yvp(0, zp)), (tsp.y1, lambda z: ss.yvp(1, zp))]:
        arg = zp if f in (tsp.y0, tsp.y1) else z
        assert_close(tg.grad(lambda x, f=f: f(x).sum())(arg), ref(z), rtol=1e-12)
    assert float(tg.grad(tsp.j1)(0.0)) == 0.5  # j0 - j1/x, with j1/x from its series near 0: no 0/0


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("name", ["j0", "j1", "y0", "y1"])
def test_bessel_01_derivatives_to_order_3_match_scipy(name, dtype):
    """Written with j0, j1, y0, y1 and 1/x alone (j1' = j0 - j1/x): exact to rounding up to order 3,
    also near 0, where j1/x comes from its series (its quotient's derivatives would cancel)."""
    v, reference = int(name[1]), (ss.jvp if name[0] == "j" else ss.yvp)
    z = np.array([0.0, 1e-3, 0.2, 0.9, 1.0, 1.1, 4.0, 9.5]) * (1 if name[0] == "y" else [-1, 1, 1, -1, 1, 1, -1, 1])
    z = (z[1:] if name[0] == "y" else z).astype(dtype)  # y0, y1: x > 0
    d = getattr(tsp, name)
    for order in (1, 2, 3):
        d = tg.grad(lambda x, d=d: d(x).sum())
        expected = reference(v, z.astype(np.float64), order)
        if name[0] == "y":  # its derivatives grow as x**-(order + 1) at 0: each relative to its own size
            assert_close(d(z) / expected, np.ones_like(expected), dtype=dtype, err_msg=f"{name}, order {order}")
        else:
            assert_close(d(z), expected, dtype=dtype, err_msg=f"{name}, order {order}")


def test_incomplete_gamma_and_beta_derivatives_are_the_densities():
    x = np.array([0.0, 0.2, 1.0, 3.5])
    for a in (0.5, 1.0, 2.5):
        d = tg.grad(lambda x, a=a: tsp.gammainc(a, x).sum())
        want = scipy.stats.gamma.pdf(x, a)
        if a < 1:  # the density is infinite at 0
            x, want = x[1:], want[1:]
        assert_close(d(x), want, rtol=1e-13)
        assert_close(tg.grad(lambda x, a=a: tsp.gammaincc(a, x).sum())(x), -want, rtol=1e-13)
    u = np.array([0.0, 0.3, 0.9, 1.0])
    assert_close(tg.grad(lambda u: tsp.betainc(1.0, 2.0, u).sum())(u), scipy.stats.beta.pdf(u, 1.0, 2.0), rtol=1e-13)


def test_other_closed_forms():
    x = np.array([0.4, 1.1, 2.7])
    assert_close(tg.grad(lambda q: tsp.zeta(3.0, q).sum())(x), -3.0 * ss.zeta(4.0, x), rtol=1e-13)
    assert_close(tg.grad(lambda x: tsp.hyp1f1(0.5, 1.5, x).sum())(x), 0.5 / 1.5 * ss.hyp1f1(1.5, 2.5, x), rtol=1e-13)
    assert_close(tg.grad(lambda x: tsp.expn(0, x).sum())(x), -np.exp(-x) / x * (1 + 1 / x), rtol=1e-13)
    assert_close(tg.grad(lambda x: tsp.expn(2, x).sum())(x), -ss.expn(1, x), rtol=1e-13)
    gz, gm = tg.grad(lambda z, m: tsp.poch(z, m), grad_position=(0, 1))(1.3, 2.2)
    assert_close(gz, ss.poch(1.3, 2.2) * (ss.digamma(3.5) - ss.digamma(1.3)), rtol=1e-13)
    assert_close(gm, ss.poch(1.3, 2.2) * ss.digamma(3.5), rtol=1e-13)
    gh, ga = tg.grad(tsp.owens_t, grad_position=(0, 1))(0.8, 1.7)
    h = 1e-5  # Owen's T has no derivative in SciPy: a central difference checks the closed forms
    assert_close(gh, (ss.owens_t(0.8 + h, 1.7) - ss.owens_t(0.8 - h, 1.7)) / (2 * h), rtol=1e-8)
    assert_close(ga, (ss.owens_t(0.8, 1.7 + h) - ss.owens_t(0.8, 1.7 - h)) / (2 * h), rtol=1e-8)


def _gamma_density_da_integral(a, x, order):
    """d^order/da^order gammainc(a, x) by quadrature of the density's a-derivative (the upper tail,
    negated, beyond the mode)."""
    def integrand(t):
        u = np.log(t) - ss.digamma(a)
        return scipy.stats.gamma.pdf(t, a) * (u if order == 1 else u * u - ss.polygamma(1, a))
    if x > a + 1:
        return -scipy.integrate.quad(integrand, x, np.inf, epsabs=0, epsrel=1e-13, limit=500)[0]
    return scipy.integrate.quad(integrand, 0, x, epsabs=1e-16, epsrel=1e-12, limit=500)[0]


@pytest.mark.parametrize("a,x", [(0.7, 0.3), (0.5, 1e-3), (2.5, 1.0), (2.5, 6.0), (10.0, 3.0), (10.0, 15.0),
                                 (30.0, 29.0), (3.0, 3.99), (3.0, 4.01), (1.0, 50.0), (100.0, 110.0),
                                 (0.0176, 17.6), (800.0, 700.0)])
def test_gammainc_derivatives_in_a_match_quadrature(a, x):
    d1 = tg.grad(tsp.gammainc)
    assert_close(d1(a, x), _gamma_density_da_integral(a, x, 1), rtol=1e-12)
    assert_close(tg.grad(d1)(a, x), _gamma_density_da_integral(a, x, 2), rtol=1e-12)
    assert_close(tg.grad(tsp.gammaincc)(a, x), -_gamma_density_da_integral(a, x, 1), rtol=1e-12)
    assert_close(tg.jvp(lambda a: tsp.gammainc(a, x), (a,), (1.0,))[1], d1(a, x), rtol=1e-14)


def test_gammainc_derivatives_in_a_at_the_edges():
    a = np.array([2.0, 2.0, 0.5])
    x = np.array([0.0, np.inf, 4.0])
    g = tg.grad(lambda a: tsp.gammainc(a, x).sum())(a)
    assert g[0] == 0.0 and g[1] == 0.0 and np.isfinite(g[2])  # P is 0 and 1 there, whatever a
    assert np.isnan(tg.grad(tsp.gammainc)(-1.0, 2.0))  # outside the domain, as the value
    check_grads(tsp.gammainc, (np.array([1.5, 4.0]), np.array([2.0, 5.1])), order=3, name="gammainc")


def _beta_density_dab_integral(a, b, x, order, epsabs=0.0):
    """The ``order`` partial of betainc in (a, b) by quadrature of the density's partials, over the
    lighter side of ``x`` (the derivatives of the whole integral are 0), in a variable that takes the
    density's singularity at that end away (``u = t^a`` below, ``v = (1 - t)^b`` above)."""
    da, db = ss.digamma(a + b) - ss.digamma(a), ss.digamma(a + b) - ss.digamma(b)
    factors = {
        (1, 0): lambda t: np.log(t) + da,
        (0, 1): lambda t: np.log1p(-t) + db,
        (2, 0): lambda t: (np.log(t) + da) ** 2 - ss.polygamma(1, a) + ss.polygamma(1, a + b),
        (1, 1): lambda t: (np.log(t) + da) * (np.log1p(-t) + db) + ss.polygamma(1, a + b),
    }
    scale = np.exp(-ss.betaln(a, b))
    if x <= a / (a + b):
        def below(u):
            t = u ** (1 / a)
            return (1 - t) ** (b - 1) * scale / a * factors[order](t)
        return scipy.integrate.quad(below, 0, x ** a, epsabs=epsabs, epsrel=1e-12, limit=500)[0]

    def above(v):
        t = 1 - v ** (1 / b)
        return t ** (a - 1) * scale / b * factors[order](t)
    return -scipy.integrate.quad(above, 0, (1 - x) ** b, epsabs=epsabs, epsrel=1e-12, limit=500)[0]


@pytest.mark.parametrize("a,b,x", [(2.0, 3.0, 0.3), (0.7, 1.5, 0.8), (10.0, 4.0, 0.5), (50.0, 60.0, 0.45),
                                   (1.5, 0.8, 0.1), (3.0, 3.0, 0.5), (0.0103, 97.2, 0.172), (2.15, 3.32, 0.99977),
                                   (400.0, 0.05, 0.9995)])
def test_betainc_derivatives_in_a_and_b_match_quadrature(a, b, x):
    ga, gb = tg.grad(tsp.betainc, grad_position=(0, 1))(a, b, x)
    ref_a = _beta_density_dab_integral(a, b, x, (1, 0))
    assert_close(ga, ref_a, rtol=1e-11)
    assert_close(gb, _beta_density_dab_integral(a, b, x, (0, 1)), rtol=1e-11)
    gaa, gab = tg.grad(lambda a, b: tg.grad(tsp.betainc)(a, b, x), grad_position=(0, 1))(a, b)
    # the mixed partial vanishes at a = b, x = 1/2 (by symmetry): compared at the scale of the first
    tiny = 1e-13 * abs(ref_a)
    assert_close(gaa, _beta_density_dab_integral(a, b, x, (2, 0), tiny), rtol=1e-10, scale=abs(ga))
    assert_close(gab, _beta_density_dab_integral(a, b, x, (1, 1), tiny), rtol=1e-10, scale=abs(ga))
    # the symmetry I_x(a, b) = 1 - I_(1-x)(b, a) holds for the derivatives too
    ga_swapped = tg.grad(lambda a: 1.0 - tsp.betainc(b, a, 1.0 - x))(a)
    assert_close(ga_swapped, ga, rtol=1e-12)


@pytest.mark.parametrize("fn,args", [
    (tsp.gammainc, (np.array([0.7, 2.5, 10.0]), np.array([0.3, 6.0, 9.0]))),
    (tsp.betainc, (np.array([0.7, 2.5, 10.0]), np.array([1.5, 3.0, 4.0]), np.array([0.3, 0.6, 0.9]))),
], ids=["gammainc", "betainc"])
def test_parameter_gradients_under_vmap_and_jit(fn, args):
    grad = tg.grad(fn, grad_position=tuple(range(len(args))))
    check_vmap_mixes(grad, args)
    for got, want in zip(tg.jit(tg.vmap(grad))(*args), tg.vmap(grad)(*args)):
        assert_close(got, want)


def test_zeta_derivatives_in_x():
    # known constants: zeta'(2), zeta''(2), zeta'(3), zeta'(1/2)
    d1 = tg.grad(tsp.zeta)
    assert_close(d1(2.0), -0.93754825431584375370, rtol=1e-14)
    assert_close(tg.grad(d1)(2.0), 1.98928023429890102342, rtol=1e-14)
    assert_close(d1(3.0), -0.19812624288563685333, rtol=1e-14)
    assert_close(d1(0.5), -3.92264613920915172283, rtol=1e-13)
    # zeta(s, 1/2) = (2^s - 1) zeta(s), and zeta(s, q) = q^-s + zeta(s, q + 1), differentiated in s
    s = np.array([1.3, 2.0, 5.5])
    hurwitz = tg.grad(lambda s: tsp.zeta(s, 0.5).sum())(s)
    riemann = tg.grad(lambda s: tsp.zeta(s).sum())(s)
    assert_close(hurwitz, 2 ** s * np.log(2) * ss.zeta(s) + (2 ** s - 1) * riemann, rtol=1e-13)
    q = np.array([0.2, 1.7, 9.0])
    step = tg.grad(lambda s: (tsp.zeta(s, q) - tsp.zeta(s, q + 1)).sum())(s)
    assert_close(step, -np.log(q) * q ** -s, rtol=1e-12)
    assert np.isnan(d1(-0.5)) and np.isnan(d1(1.0))  # documented: x > 0 only, and the pole


# ---- removable singularities ---------------------------------------------------------------------
def test_boxcox_lambda_derivatives_at_and_near_zero():
    x = np.array([0.3, 2.0, 7.0])
    L = np.log(x)
    for lmbda in (0.0, 1e-9, -3e-6):
        d1 = tg.grad(lambda lm: tsp.boxcox(x, lm).sum())
        d2 = tg.grad(d1)
        # d/dl expm1(l L)/l = L^2/2 + l L^3/3 + l^2 L^4/8 + ...
        assert_close(d1(lmbda), np.sum(L ** 2 / 2 + lmbda * L ** 3 / 3 + lmbda ** 2 * L ** 4 / 8), rtol=1e-13)
        assert_close(d2(lmbda), np.sum(L ** 3 / 3 + lmbda * L ** 4 / 4), rtol=1e-9)
    assert_close(tg.grad(lambda lm: tsp.boxcox1p(1e-3, lm))(0.0), np.log1p(1e-3) ** 2 / 2, rtol=1e-14)
    # both sides of the series radius agree with the closed form
    for lmbda in (0.99e-3 / L[2], 1.01e-3 / L[2]):
        want = (L[2] * x[2] ** lmbda - ss.boxcox(x[2], lmbda)) / lmbda
        assert_close(tg.grad(lambda lm: tsp.boxcox(x[2], lm))(lmbda), want, rtol=1e-9)


def test_spence_and_sici_at_their_removable_points():
    assert float(tg.grad(tsp.spence)(1.0)) == -1.0
    assert_close(tg.grad(tg.grad(tsp.spence))(1.0), 0.5, rtol=1e-14)
    z = np.array([1 - 2e-3, 1 - 0.9e-3, 1 + 0.9e-3, 1 + 2e-3])  # both sides of the series radius
    assert_close(tg.grad(lambda z: tsp.spence(z).sum())(z), np.log(z) / (1 - z), rtol=1e-13)
    assert float(tg.grad(lambda x: tsp.sici(x)[0])(0.0)) == 1.0


def test_factorial_and_comb_outside_their_support_are_zero_with_zero_gradient():
    n = np.array([-1.5, -1.0, 0.0, 3.0])
    assert_close(tsp.factorial(n), ss.factorial(n))
    assert_close(tg.grad(lambda n: tsp.factorial(n).sum())(n), [0.0, 0.0, ss.digamma(1.0), 6 * ss.digamma(4.0)])
    N, k = np.array([5.0, 3.0, -1.0, 4.0]), np.array([2.0, 4.0, 1.0, -1.0])
    assert_close(tsp.comb(N, k), ss.comb(N, k))
    gN, gk = tg.grad(lambda N, k: tsp.comb(N, k).sum(), grad_position=(0, 1))(N, k)
    assert np.all(np.isfinite(gN)) and np.all(gN[1:] == 0) and np.all(gk[1:] == 0)
    assert_close(tsp.comb(np.arange(6), 2), ss.comb(np.arange(6), 2))


# ---- parameters without a derivative -------------------------------------------------------------
NO_DERIVATIVE = [
    ("hyp1f1", "a", lambda a: tsp.hyp1f1(a, 2.0, 0.4)),
    ("hyp1f1", "b", lambda b: tsp.hyp1f1(1.0, b, 0.4)),
    ("hyp2f1", "a", lambda a: tsp.hyp2f1(a, 1.0, 2.0, 0.4)),
    ("hyp2f1", "b", lambda b: tsp.hyp2f1(1.0, b, 2.0, 0.4)),
    ("hyp2f1", "c", lambda c: tsp.hyp2f1(1.0, 1.0, c, 0.4)),
] + [(name, "v", lambda v, name=name: getattr(tsp, name)(v, 1.3)) for name in ("jv", "yv", "iv", "ive", "kv", "kve")]


@pytest.mark.parametrize("name,arg,fn", NO_DERIVATIVE, ids=[f"{n}-{a}" for n, a, _ in NO_DERIVATIVE])
def test_parameter_derivatives_without_closed_form_raise_naming_the_argument(name, arg, fn):
    for route in (lambda: tg.grad(fn)(1.5), lambda: tg.jvp(fn, (1.5,), (1.0,))):
        with pytest.raises(NotImplementedError, match=rf"{name}: the derivative with respect to '{arg}'"):
            route()
    assert np.isfinite(fn(1.5))  # the value is fine, and the library still works after the error
    check_grads(lambda x: tsp.gammainc(1.5, x), (np.array([0.7]),), order=1, name="gammainc")


def test_integer_orders_carry_no_derivative_and_keep_the_argument_dtype():
    z = np.array([0.5, 1.5], np.float32)
    for f in (tsp.jn, tsp.yn, tsp.expn):
        assert f(INT_ORDERS[:, None], z).dtype == np.float32
        assert tg.grad(lambda z, f=f: f(2, z).sum())(z).dtype == np.float32
    assert tsp.bessel_jn(z, v=2).shape == (3, 2)


def test_piecewise_constant_gammasgn():
    x = np.array([-2.5, -1.5, 0.5, 3.0])
    assert_close(tsp.gammasgn(x), ss.gammasgn(x))
    assert_close(tg.grad(lambda x: tsp.gammasgn(x).sum())(x), np.zeros(4))
    check_vmap_mixes(tsp.gammasgn, (x,))


def test_bernoulli():
    assert_close(tsp.bernoulli(6), ss.bernoulli(6))
    assert tsp.bernoulli(0).shape == (1,)


@pytest.mark.parametrize("call,match", [
    (lambda: tsp.bernoulli(-1), "non-negative"),
    (lambda: tsp.bernoulli(2.5), "non-negative"),
    (lambda: tsp.bessel_jn(1.0, v=-1), "v must be"),
    (lambda: tsp.bessel_jn(1.0, v=2.0), "v must be"),
    (lambda: tsp.factorial(3, exact=True), "exact=True"),
    (lambda: tsp.comb(5, 2, exact=True), "exact=True"),
])
def test_bad_arguments_raise_value_error(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_lengths_under_jit_must_be_static():
    with pytest.raises(ConcretizationError, match="static_argnums"):
        tg.jit(tsp.bernoulli)(3)
    assert_close(tg.jit(tsp.bernoulli, static_argnums=0)(3), ss.bernoulli(3))
    with pytest.raises(ConcretizationError):
        tg.jit(lambda z, v: tsp.bessel_jn(z, v=v))(1.0, 2)


def test_sph_harm_y_diff_n_refused():
    with pytest.raises(NotImplementedError, match="diff_n"):
        tsp.sph_harm_y(2, 1, 0.5, 0.3, diff_n=1)


def test_sph_harm_y_derivatives_at_the_top_order_stay_finite():
    theta, phi = np.array([0.4, 1.1, 2.0]), np.array([0.3, -1.0, 2.2])
    n = np.array([1, 2, 3])
    check_grads(lambda t, p: tsp.sph_harm_y(n, n, t, p), (theta, phi), order=2, name="sph_harm_y")


def test_scipy_calls_on_traced_values_dispatch_to_the_tapegrad_function():
    # scipy.special's ufuncs hand traced values to tapegrad.scipy.special (__array_ufunc__)
    assert_close(tg.grad(lambda z: ss.jv(1.5, z))(1.0), tg.grad(lambda z: tsp.jv(1.5, z))(1.0))
    with pytest.raises(TypeError, match=r"tapegrad\.scipy\.special\.jv"):  # a keyword it cannot pass on
        tg.grad(lambda z: ss.jv(1.5, z, dtype=np.float64))(1.0)


def test_a_device_without_the_kernel_says_so():
    import _device  # the strict device double: its scipy.special lacks jv, as cupyx.scipy.special does
    x = _device.xp.asarray(np.array([0.5, 1.0]))
    with pytest.raises(NotImplementedError, match="has no kernel"):
        tsp.jv(1.5, x)
