"""Forward and reverse mode agree wherever both are defined, over the whole primitive registry.

For random ``x``, tangent ``v`` and cotangent ``u``: ``<u, jvp(f)(x; v)> == <vjp(f)(x)(u), v>``, the
definition of the transpose, with ``<a, b> = Re(vdot(a, b))`` and JAX's complex convention
(``<u, J v> = <v, conj(vjp(conj(u)))>``, as ``tapegrad.testing``). Unlike a finite-difference check
the two sides are computed exactly, so the tolerance is the dtype's rounding error at the magnitude
of the terms. At order 2 the same identity is checked on the derivatives themselves:
``(x, v) -> jvp(f)(x; v)`` and ``(x, u) -> vjp(f)(x)(u)`` — jvp of jvp against vjp of jvp, and jvp of
vjp against vjp of vjp.

Every differentiable primitive must be reached by some entry of ``CASES`` at order 2: a test records
the primitives bound while the checks run and compares them with the registry.
"""
from __future__ import annotations

import numpy as np
import pytest

import tapegrad as tg
import tapegrad.nn.functional as F
import tapegrad.numpy as tnp
import tapegrad.numpy.fft as tfft
import tapegrad.numpy.linalg as tla
import tapegrad.scipy.linalg as tsl
import tapegrad.scipy.signal as tss
import tapegrad.scipy.special as tsp
import tapegrad.scipy.stats as tstats
from tapegrad import _tree
from tapegrad._rules import PRIMITIVES

REAL = (np.float32, np.float64)
ALL = REAL + (np.complex64, np.complex128)
ULPS = 256  # rounding of both sides, at the magnitude of the products summed in the inner products


def _draw(rng, domain, shape, dtype):
    dtype = np.dtype(dtype)
    real = np.dtype(dtype.char.lower()) if dtype.kind == "c" else dtype
    if domain == "spd":  # symmetric (Hermitian) positive definite, well conditioned
        a = rng.standard_normal(shape)
        if dtype.kind == "c":
            a = a + 1j * rng.standard_normal(shape)
        return (a @ np.conj(np.swapaxes(a, -1, -2)) + shape[-1] * np.eye(shape[-1])).astype(dtype)
    if domain == "well":  # well conditioned square matrices
        return (rng.standard_normal(shape) + 3 * np.eye(shape[-1])).astype(dtype)
    if domain == "upper":
        return (np.triu(rng.standard_normal(shape)) + 3 * np.eye(shape[-1])).astype(dtype)
    low, high = {"real": (-2.0, 2.0), "pos": (0.5, 2.0), "unit": (-0.8, 0.8), "gt1": (1.2, 3.0),
                 "prob": (0.1, 0.9), "small": (-0.5, 0.5)}[domain]
    x = rng.uniform(low, high, shape)
    if dtype.kind == "c":
        x = x + 1j * rng.uniform(low, high, shape) * 0.5
    return x.astype(dtype if dtype.kind == "c" else real)


class Case:
    """``fn(*args)`` with ``args`` drawn from ``domains``/``shapes`` in each of ``dtypes``."""

    def __init__(self, name, fn, shapes, domains=None, dtypes=REAL, ulps=ULPS):
        self.name, self.fn, self.shapes, self.dtypes, self.ulps = name, fn, shapes, dtypes, ulps
        self.domains = domains or ("real",) * len(shapes)

    def args(self, dtype, rng):
        return tuple(_draw(rng, d, s, dtype) for d, s in zip(self.domains, self.shapes))


def _product(carry, ys):
    return ys * carry


def _unary(name, fn, domain="real", dtypes=REAL, shape=(2, 3), **kw):
    return Case(name, fn, (shape,), (domain,), dtypes, **kw)


def _binary(name, fn, domains=("real", "real"), dtypes=REAL, shapes=((2, 3), (3,)), **kw):
    return Case(name, fn, shapes, domains, dtypes, **kw)


@tg.custom_vjp
def _cube(x):
    return x * x * x


_cube.defvjp(lambda x: (x * x * x, x), lambda x, g: (3.0 * x * x * g,))


def _max_pool(x):
    return F.max_pool2d(x, 2, stride=1)


CASES = [
    # complex parts
    _unary("real", tnp.real, dtypes=ALL), _unary("imag", tnp.imag, dtypes=ALL),
    _unary("conj", tnp.conj, dtypes=ALL),
    # reductions
    _unary("sum", lambda x: tnp.sum(x, axis=1), dtypes=ALL), _unary("max", lambda x: tnp.max(x, axis=0)),
    _unary("min", lambda x: tnp.min(x, axis=1, keepdims=True)),
    _unary("prod", lambda x: tnp.prod(x, axis=1), dtypes=ALL),
    _unary("cumsum", lambda x: tnp.cumsum(x, axis=1), dtypes=ALL),
    _unary("cumprod", lambda x: tnp.cumprod(x, axis=1), dtypes=ALL),
    _unary("var", lambda x: tnp.var(x, axis=1), dtypes=ALL), _unary("std", lambda x: tnp.std(x, axis=0)),
    # unary elementwise
    _unary("negative", tnp.negative, dtypes=ALL), _unary("abs", tnp.abs, dtypes=ALL),
    _unary("exp", tnp.exp, dtypes=ALL), _unary("expm1", tnp.expm1), _unary("log", tnp.log, "pos", ALL),
    _unary("log1p", tnp.log1p, "pos"), _unary("log2", tnp.log2, "pos"), _unary("log10", tnp.log10, "pos"),
    _unary("sqrt", tnp.sqrt, "pos", ALL), _unary("square", tnp.square, dtypes=ALL),
    _unary("reciprocal", tnp.reciprocal, "pos", ALL), _unary("sin", tnp.sin, dtypes=ALL),
    _unary("cos", tnp.cos, dtypes=ALL), _unary("tan", tnp.tan, "unit", ALL), _unary("tanh", tnp.tanh, dtypes=ALL),
    _unary("sinh", tnp.sinh, dtypes=ALL), _unary("cosh", tnp.cosh, dtypes=ALL),
    _unary("arcsin", tnp.arcsin, "unit"), _unary("arccos", tnp.arccos, "unit"), _unary("arctan", tnp.arctan),
    _unary("exp2", tnp.exp2), _unary("fabs", tnp.fabs), _unary("cbrt", tnp.cbrt, "pos"),
    _unary("arcsinh", tnp.arcsinh), _unary("arccosh", tnp.arccosh, "gt1"), _unary("arctanh", tnp.arctanh, "unit"),
    _unary("deg2rad", tnp.deg2rad), _unary("rad2deg", tnp.rad2deg), _unary("sinc", tnp.sinc, "pos"),
    _unary("relu", F.relu), _unary("astype", lambda x: tnp.astype(x, np.float64) * 1.5),
    # binary elementwise
    _binary("add", tnp.add, dtypes=ALL), _binary("subtract", tnp.subtract, dtypes=ALL),
    _binary("multiply", tnp.multiply, dtypes=ALL), _binary("divide", tnp.divide, ("real", "pos"), ALL),
    _binary("maximum", tnp.maximum), _binary("minimum", tnp.minimum), _binary("logaddexp", tnp.logaddexp),
    _binary("arctan2", tnp.arctan2, ("real", "pos")), _binary("power", tnp.power, ("pos", "real")),
    _binary("fmax", tnp.fmax), _binary("fmin", tnp.fmin), _binary("logaddexp2", tnp.logaddexp2),
    _binary("remainder", tnp.remainder, ("pos", "gt1")), _binary("fmod", tnp.fmod, ("pos", "gt1")),
    _binary("hypot", tnp.hypot, ("pos", "pos")), _binary("copysign", tnp.copysign),
    Case("where", lambda x, y: tnp.where(x > 0, x, y), ((2, 3), (2, 3)), dtypes=REAL),
    _unary("clip", lambda x: tnp.clip(x, -1.0, 1.0)),
    # shapes and indexing
    _unary("reshape", lambda x: tnp.reshape(x, (3, 2)), dtypes=ALL),
    _unary("transpose", tnp.transpose, dtypes=ALL),
    _unary("broadcast_to", lambda x: tnp.broadcast_to(x, (4, 2, 3)), dtypes=ALL),
    _binary("concatenate", lambda x, y: tnp.concatenate([x, y]), shapes=((2, 3), (1, 3)), dtypes=ALL),
    _unary("pad", lambda x: tnp.pad(x, ((1, 0), (0, 2))), dtypes=ALL),
    _unary("getitem", lambda x: x[1, ::2], dtypes=ALL),
    _unary("getitem-int-array", lambda x: x[np.array([1, 0, 1])], dtypes=ALL),
    _binary("index_add", lambda x, y: x.at[0].add(y), dtypes=ALL),
    _unary("permute", lambda x: tnp.sort(x, axis=0), dtypes=ALL),  # and unpermute, its transpose
    _unary("permute-partition", lambda x: tnp.partition(x, 1, axis=-1), dtypes=ALL),
    _binary("index_set", lambda x, y: x.at[np.array([1, 0])].set(y), shapes=((2, 3), (2, 3)), dtypes=ALL),
    # products
    _binary("matmul", tnp.matmul, shapes=((2, 3), (3, 4)), dtypes=ALL),
    _binary("einsum", lambda x, y: tnp.einsum("ij,jk->ik", x, y), shapes=((2, 3), (3, 4)), dtypes=ALL),
    # linear algebra
    _unary("solve", lambda a: tla.solve(a, np.arange(3.0).astype(a.dtype)), "well", ALL, (3, 3)),
    _unary("inv", tla.inv, "well", ALL, (3, 3)), _unary("pinv", tla.pinv, "real", ALL, (3, 2), ulps=4096),
    _unary("cholesky", tla.cholesky, "spd", ALL, (3, 3)), _unary("det", tla.det, "well", ALL, (3, 3)),
    _unary("slogdet", lambda a: tla.slogdet(a)[1], "well", ALL, (3, 3)),
    _unary("slogdet-sign", lambda a: tla.slogdet(a)[0], "well", (np.complex64, np.complex128), (3, 3)),
    _unary("eigh", lambda a: tla.eigh(a)[0], "spd", ALL, (3, 3)),
    _unary("eigh-vectors", lambda a: tnp.abs(tla.eigh(a)[1]), "spd", ALL, (3, 3), ulps=4096),
    _unary("svd", lambda a: tla.svd(a, compute_uv=False), "real", ALL, (3, 2)),
    _unary("svd-u", lambda a: tla.svd(a, full_matrices=False)[0], "real", ALL, (3, 2), ulps=4096),
    _unary("svd-vh", lambda a: tla.svd(a, full_matrices=False)[2], "real", ALL, (2, 3), ulps=4096),
    _unary("eig", tla.eigvals, "well", ALL, (3, 3), ulps=4096),
    _unary("eig-vectors", lambda a: tnp.abs(tla.eig(a)[1]), "well", ALL, (3, 3), ulps=4096),
    _unary("qr", lambda a: tla.qr(a)[1], "well", ALL, (3, 3)),
    _unary("qr-q", lambda a: tla.qr(a)[0], "well", ALL, (3, 3)),
    _unary("solve_triangular", lambda a: tsl.solve_triangular(a, np.ones(3, a.dtype)), "upper", REAL, (3, 3)),
    _unary("expm", tsl.expm, "small", REAL, (3, 3)),
    _unary("lu", lambda a: tsl.lu(a)[1] + 2 * tsl.lu(a)[2], "well", ALL, (3, 3)),
    _unary("sqrtm", tsl.sqrtm, "spd", ALL, (3, 3)),
    Case("solve_sylvester", tsl.solve_sylvester, ((3, 3), (2, 2), (3, 2)), ("well", "well", "real"), ALL),
    Case("convolve", tss.convolve, ((4, 3), (2, 2)), dtypes=ALL),
    # Fourier transforms
    _unary("fft", lambda x: tfft.fft(x), dtypes=ALL), _unary("rfft", lambda x: tfft.rfft(x)),
    _unary("irfft", lambda x: tfft.irfft(x), dtypes=(np.complex64, np.complex128)),
    # special functions
    _unary("i0", tsp.i0), _unary("i1", tsp.i1), _unary("i0e", tsp.i0e, "pos"), _unary("i1e", tsp.i1e, "pos"),
    _unary("erf", tsp.erf), _unary("erfc", tsp.erfc), _unary("erfcx", tsp.erfcx, "pos"),
    _unary("erfinv", tsp.erfinv, "unit"), _unary("ndtr", tsp.ndtr), _unary("ndtri", tsp.ndtri, "prob"),
    _unary("log_ndtr", tsp.log_ndtr), _unary("gammaln", tsp.gammaln, "pos"), _unary("digamma", tsp.digamma, "pos"),
    _unary("gamma", tsp.gamma, "pos"), _binary("betaln", tsp.betaln, ("pos", "pos")),
    _unary("polygamma", lambda x: tsp.polygamma(1, x), "pos"), _unary("expit", tsp.expit),
    _binary("xlogy", tsp.xlogy, ("real", "pos")), _binary("xlog1py", tsp.xlog1py, ("real", "pos")),
    _unary("entr", tsp.entr, "pos"),
    # distribution functions and quantiles on SciPy's values (vonmises.cdf's kappa held: no derivative)
    _binary("stats.stdtr", lambda x, df: tstats.t.cdf(x, df), ("real", "gt1")),
    _binary("stats.gammaincinv", lambda q, a: tstats.gamma.ppf(q, a), ("prob", "gt1")),
    _binary("stats.gammainccinv", lambda q, a: tstats.gamma.isf(q, a), ("prob", "gt1")),
    Case("stats.betaincinv", lambda q, a, b: tstats.beta.ppf(q, a, b), ((3,), (3,), (3,)), ("prob", "gt1", "gt1")),
    Case("stats.betainccinv", lambda q, a, b: tstats.beta.isf(q, a, b), ((3,), (3,), (3,)), ("prob", "gt1", "gt1")),
    _binary("stats.stdtrit", lambda q, df: tstats.t.ppf(q, df), ("prob", "gt1")),
    _unary("stats.vonmises.cdf", lambda x: tstats.vonmises.cdf(x, 1.5)),
    # layers
    Case("random.truncated_normal", lambda lo, hi: tg.random.truncated_normal(tg.random.key(0), lo, hi),
         ((3,), (3,)), ("small", "gt1"), dtypes=(np.float64,)),
    Case("conv", lambda x, w: F.conv2d(x, w, padding=1, stride=2), ((2, 2, 5, 5), (3, 2, 3, 3))),
    _unary("max_pool", _max_pool, shape=(1, 2, 4, 4)),
    _unary("avg_pool", lambda x: F.avg_pool2d(x, 2, stride=1, padding=1), shape=(1, 2, 4, 4)),
    # control flow (the index clamped to the last branch)
    _binary("switch", lambda x, y: tg.switch(5, [lambda a, b: a * b, lambda a, b: tnp.sin(a) * b], x, y)),
    # a scan over the rows of x, carrying a vector (both results differentiated)
    _binary("scan", lambda x, y: _product(*tg.scan(lambda c, r: (tnp.sin(c) * r + c, c * r), y, x))),
    # a while_loop closing over y (reverse mode stores each step's residuals: while_stored)
    _binary("while", lambda x, y: tg.while_loop(lambda c: c[0] < 3, lambda c: (c[0] + 1, tnp.sin(c[1]) * y),
                                                (0, x))[1]),
    # a custom_vjp function in a loop body stays whole in the staged body (its rule is exact here)
    _binary("custom_call", lambda x, y: _product(*tg.scan(lambda c, r: (_cube(c) * r, c * r), y, x))),
    # numerical functions (polynomial roots, i0, floating-point pieces)
    _unary("roots", lambda p: tnp.roots(p, strip_zeros=False), shape=(4,), dtypes=ALL),
    _unary("i0", tnp.i0), _unary("modf", lambda x: tnp.modf(x)[0]), _unary("positive", tnp.positive),
    _binary("heaviside", lambda x, y: tnp.heaviside(x, y) * y),
    _unary("ldexp", lambda x: tnp.ldexp(x, np.array([1, -2, 3]))),
    _binary("nextafter", lambda x, y: tnp.nextafter(x, y) * x),
]

# ---- block: scipy.special coverage (jax.scipy.special and the Bessel family) ----
CASES += [
    _binary("beta", tsp.beta, ("pos", "pos")), _binary("poch", tsp.poch, ("pos", "pos")),
    _binary("comb", lambda n, k: tsp.comb(n + 2.0, k), ("pos", "pos")),
    _unary("rgamma", tsp.rgamma, "pos"), _unary("loggamma", tsp.loggamma, "pos"),
    _binary("gammainc", tsp.gammainc, ("pos", "pos")), _binary("gammaincc", tsp.gammaincc, ("pos", "gt1")),
    Case("betainc", tsp.betainc, ((2, 3), (3,), (3,)), ("pos", "pos", "prob")),
    _binary("zeta", tsp.zeta, ("gt1", "pos")), _unary("riemann_zeta", tsp.zeta, "gt1"),
    _unary("expi", tsp.expi, "pos"),
    _unary("exp1", tsp.exp1, "pos"), _unary("expn", lambda x: tsp.expn(2, x), "pos"),
    _unary("dawsn", tsp.dawsn), _unary("spence", tsp.spence, "pos"),
    _unary("sici", lambda x: tsp.sici(x)[0] * tsp.sici(x)[1], "pos"),
    _unary("fresnel", lambda x: tsp.fresnel(x)[0] * tsp.fresnel(x)[1]),
    _binary("owens_t", tsp.owens_t), _unary("hyp1f1", lambda x: tsp.hyp1f1(0.7, 1.9, x)),
    _unary("hyp2f1", lambda x: tsp.hyp2f1(0.7, 1.2, 2.1, x), "small"),
    _binary("kl_div", tsp.kl_div, ("pos", "pos")), _binary("rel_entr", tsp.rel_entr, ("pos", "pos")),
    _binary("boxcox", tsp.boxcox, ("pos", "real")), _binary("boxcox1p", tsp.boxcox1p, ("prob", "real")),
    _unary("jv", lambda z: tsp.jv(1.5, z), "pos"), _unary("jn", lambda z: tsp.jn(2, z)),
    _unary("yv", lambda z: tsp.yv(0.7, z), "pos"), _unary("yn", lambda z: tsp.yn(1, z), "pos"),
    _unary("iv", lambda z: tsp.iv(2.5, z), "pos"), _unary("ive", lambda z: tsp.ive(1, z)),
    _unary("kv", lambda z: tsp.kv(0.3, z), "pos"), _unary("kve", lambda z: tsp.kve(2, z), "pos"),
    _unary("j0", tsp.j0), _unary("j1", tsp.j1), _unary("y0", tsp.y0, "pos"), _unary("y1", tsp.y1, "pos"),
    _binary("sph_harm_y", lambda t, p: tsp.sph_harm_y(3, 1, t, p), ("pos", "real")),
    _unary("wofz", tsp.wofz, dtypes=ALL),
]
# ---- end block: scipy.special coverage ----

# ---- block: sparse solvers (tapegrad.scipy.sparse.linalg): the stored values of a 4 x 4 tridiagonal pattern,
# shifted to be diagonally dominant, and a dense right-hand side; the Krylov solvers at a tolerance
# below the check's (a 4 x 4 system converges in 4 steps), in float64 where float32 cannot reach it


def _sparse(data, symmetric=False):
    import tapegrad.sparse as tsparse
    indices, indptr = np.array([0, 1, 0, 1, 2, 1, 2, 3, 2, 3]), np.array([0, 2, 5, 8, 10])
    a = tsparse.csr_array((data, indices, indptr), shape=(4, 4)) + 4.0 * tsparse.eye(4, dtype=data.dtype)
    return 0.5 * (a + a.T) if symmetric else a


def _sparse_case(name, solve, dtypes=REAL, symmetric=False, **kw):
    return Case(name, lambda d, b: solve(_sparse(d, symmetric), b), ((10,), (4,)), ("real", "real"), dtypes, **kw)


def _sparse_cases():
    from tapegrad.scipy.sparse import linalg as ssl
    return [
        _sparse_case("spsolve", ssl.spsolve),
        _sparse_case("cg", lambda a, b: ssl.cg(a, b, rtol=1e-15, atol=0.0)[0], (np.float64,), symmetric=True),
        _sparse_case("gmres", lambda a, b: ssl.gmres(a, b, rtol=1e-15, atol=0.0)[0], (np.float64,)),
        Case("eigsh", lambda d: ssl.eigsh(_sparse(d, True), k=2)[0], ((10,),), dtypes=(np.float64,), ulps=4096),
        _sparse_case("expm_multiply", lambda a, b: ssl.expm_multiply(0.1 * a, b), (np.float64,), ulps=65536),
    ]


CASES += _sparse_cases()
# ---- end block: sparse solvers ----


def _inner(a, b) -> float:
    return float(sum(np.real(np.vdot(np.asarray(x, np.complex128), np.asarray(y, np.complex128)))
                     for x, y in zip(_tree.tree_leaves(a), _tree.tree_leaves(b))))


def _magnitude(a, b) -> float:
    """``sum |a| |b|``: the size of the terms an inner product adds up, for its rounding error."""
    return float(sum(np.vdot(np.abs(np.asarray(x, np.complex128)), np.abs(np.asarray(y, np.complex128))).real
                     for x, y in zip(_tree.tree_leaves(a), _tree.tree_leaves(b))))


def _random_like(tree, rng):
    def draw(x):
        x = np.asarray(x)
        if x.dtype.kind == "c":
            return (rng.standard_normal(x.shape) + 1j * rng.standard_normal(x.shape)).astype(x.dtype)
        if x.dtype.kind == "f":
            return rng.standard_normal(x.shape).astype(x.dtype)
        return np.zeros_like(x)
    return _tree.tree_map(draw, tree)


def check_modes_agree(fn, args, order, rng, eps, ulps, route="f"):
    """``<u, jvp(v)> == <v, conj(vjp(conj(u)))>`` at ``args``; at ``order > 1`` also for the two
    derivative functions. Raises AssertionError naming the route."""
    out, vjp_fn = tg.vjp(fn, *args)
    v, u = _random_like(args, rng), _random_like(out, rng)
    jv = tg.jvp(fn, args, v)[1]
    uj = tuple(np.conj(g) for g in vjp_fn(_tree.tree_map(np.conj, u)))
    forward, reverse = _inner(u, jv), _inner(v, uj)
    scale = _magnitude(u, jv) + _magnitude(v, uj)
    if not abs(forward - reverse) <= ulps * eps * scale + np.finfo(np.float64).tiny:
        raise AssertionError(f"modes disagree for {route}: <u, jvp v> = {forward!r}, <vjp u, v> = {reverse!r} "
                             f"(tolerance {ulps * eps * scale:.3g})")
    if order > 1:
        n = len(args)
        check_modes_agree(lambda *xv: tg.jvp(fn, xv[:n], xv[n:])[1], args + v, order - 1, rng, eps, ulps,
                          f"jvp of {route}")
        check_modes_agree(lambda *xu: tg.vjp(fn, *xu[:n])[1](xu[n]), args + (u,), order - 1, rng, eps, ulps,
                          f"vjp of {route}")


def _eps(dtype) -> float:
    return float(np.finfo(np.dtype(dtype)).eps)


def _run(case, dtype, seed=0):
    rng = np.random.default_rng(seed)
    args = case.args(dtype, rng)
    with np.errstate(all="ignore"):
        check_modes_agree(case.fn, args, 2, rng, _eps(dtype), case.ulps, case.name)


@pytest.mark.parametrize("case,dtype", [(c, d) for c in CASES for d in c.dtypes],
                         ids=[f"{c.name}-{np.dtype(d).name}" for c in CASES for d in c.dtypes])
@pytest.mark.parametrize("seed", [0, 1])
def test_forward_and_reverse_mode_agree(case, dtype, seed):
    _run(case, dtype, seed)


# Primitives reached only as derivatives of others: their rules are checked through those routes.
DERIVATIVE_ONLY = {"select_scatter", "window_gather", "window_sum_transpose"}
# Primitives that only jit binds (reverse mode through while_loop under jit, whose own derivatives
# raise): test_while_grad.py checks its values against the Python loop's gradient.
FORWARD_ONLY = {"while_grad"}
# Primitives with values only (their rules raise, as JAX has none): test_cov_scipy_linalg.py checks it.
VALUES_ONLY = {"scipy.linalg.funm", "scipy.linalg.hessenberg", "scipy.linalg.rsf2csf", "scipy.linalg.schur",
               "pure_callback"}  # a Python function's results: test_debug.py checks that its rules raise


def test_every_differentiable_primitive_is_checked():
    """Record every primitive bound while the float64 and complex128 checks of each case run (order 2),
    and compare
    with the registry: a primitive added without an entry here fails this test."""
    bound = set()
    saved = {}
    for prim in PRIMITIVES:
        saved[prim] = prim.impl

        def recording(*args, _prim=prim, _impl=prim.impl, **params):
            bound.add(_prim.name)
            return _impl(*args, **params)
        prim.impl = recording
    try:
        for case in CASES:
            for dtype in {np.float64, np.complex128} & set(case.dtypes):
                _run(case, dtype)
    finally:
        for prim, impl in saved.items():
            prim.impl = impl
    differentiable = {p.name for p in PRIMITIVES if not p.nondiff}
    missing = differentiable - bound - FORWARD_ONLY - VALUES_ONLY
    assert not missing, f"differentiable primitives no case reaches: {sorted(missing)}"
    assert DERIVATIVE_ONLY <= bound


def test_the_check_catches_a_rule_that_disagrees(monkeypatch):
    """A vjp rule off by 0.1%: the modes no longer agree, and the message names the route."""
    from tapegrad.numpy import _elementwise as ew
    rule = ew.sin_p.vjp_rules[0]
    monkeypatch.setattr(ew.sin_p, "vjp_rules", (lambda ct, ans, x: rule(ct, ans, x) * 1.001,))
    with pytest.raises(AssertionError, match="modes disagree for sin"):
        _run(next(c for c in CASES if c.name == "sin"), np.float64)
