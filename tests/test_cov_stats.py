"""tapegrad.scipy.stats, the distributions beyond norm and multivariate_normal (issue 15): values
against scipy.stats in float64 and float32, derivatives in every argument against finite differences
to order 2 in both modes, one vmap and one jit check per function, and the traps: values outside the
support (SciPy's -inf / 0 / 1, with finite derivatives), tails, and the derivatives that raise."""
from __future__ import annotations

import numpy as np
import pytest
import scipy.stats

import tapegrad as tg
import tapegrad.scipy.stats as tss
from _device_check import check_route, grid, to_device
from _specs import OpSpec
from _tol import assert_close
from _vmapcheck import check_vmap
from tapegrad.testing import check_grads

# the domain of each argument, drawn uniformly; "z" is the standardized point, placed at
# loc + scale * z when the spec ends with loc and scale
DOMAINS = {
    "real": (-2.0, 2.0),
    "z_pos": (0.1, 3.0),        # expon, gamma, chi2
    "z_unit": (0.1, 0.9),       # beta
    "z_pareto": (1.1, 3.0),
    "z_circle": (-3.0, 3.0),    # vonmises
    "z_wrap": (0.2, 6.0),       # wrapcauchy
    "z_trunc": (-0.4, 1.4),     # truncnorm, inside (a, b) below
    "z_nonzero": (0.3, 2.0),    # gennorm: |z|**beta is smooth away from 0 (signs mixed below)
    "prob": (0.1, 0.9),
    "shape": (1.2, 3.0),
    "small_shape": (0.5, 0.9),
    "c": (0.1, 0.8),
    "a_trunc": (-1.0, -0.5),
    "b_trunc": (1.5, 2.0),
    "loc": (-1.0, 1.0),
    "scale": (0.5, 2.0),
}
LOC_SCALE = ("loc", "scale")


def _specs(dist, fns, domains, q_fns=()):
    """OpSpecs ``dist.fn`` for each of ``fns`` (first argument drawn from ``domains[0]``) and
    ``q_fns`` (first argument a probability)."""
    module, ref = getattr(tss, dist), getattr(scipy.stats, dist)
    specs = [OpSpec(f"{dist}.{fn}", getattr(module, fn), getattr(ref, fn), domains) for fn in fns]
    return specs + [OpSpec(f"{dist}.{fn}", getattr(module, fn), getattr(ref, fn), ("prob",) + domains[1:])
                    for fn in q_fns]


DENSITY = ("logpdf", "pdf")
TAILS = ("cdf", "logcdf", "sf", "logsf")
INVERSE = ("ppf", "isf")
CONTINUOUS = (
    _specs("expon", DENSITY + TAILS, ("z_pos",) + LOC_SCALE, INVERSE)
    + _specs("cauchy", DENSITY + TAILS, ("real",) + LOC_SCALE, INVERSE)
    + _specs("logistic", DENSITY + TAILS, ("real",) + LOC_SCALE, INVERSE)
    + _specs("laplace", DENSITY + TAILS, ("real",) + LOC_SCALE, INVERSE)
    + _specs("gumbel_r", DENSITY + TAILS, ("real",) + LOC_SCALE, INVERSE)
    + _specs("gumbel_l", DENSITY + TAILS, ("real",) + LOC_SCALE, INVERSE)
    + _specs("uniform", DENSITY + TAILS, ("z_unit",) + LOC_SCALE, INVERSE)
    + _specs("pareto", DENSITY + TAILS, ("z_pareto", "shape") + LOC_SCALE, INVERSE)
    + _specs("gamma", DENSITY + TAILS, ("z_pos", "shape") + LOC_SCALE, INVERSE)
    + _specs("chi2", DENSITY + TAILS, ("z_pos", "shape") + LOC_SCALE, INVERSE)
    + _specs("beta", DENSITY + TAILS, ("z_unit", "shape", "shape") + LOC_SCALE, INVERSE)
    + _specs("t", DENSITY + TAILS, ("real", "shape") + LOC_SCALE, INVERSE)
    + _specs("gennorm", DENSITY + TAILS, ("z_nonzero", "shape") + LOC_SCALE, INVERSE)
    + _specs("gennorm", DENSITY + TAILS, ("z_nonzero", "small_shape") + LOC_SCALE, INVERSE)
    + _specs("vonmises", DENSITY, ("z_circle", "shape") + LOC_SCALE)
    + _specs("wrapcauchy", DENSITY + TAILS, ("z_wrap", "c") + LOC_SCALE, INVERSE)
    + _specs("truncnorm", DENSITY + TAILS, ("z_trunc", "a_trunc", "b_trunc") + LOC_SCALE, INVERSE)
)
# values from SciPy (vonmises.cdf): differentiable in x, loc and scale, not in kappa (frozen below;
# test_scipy_valued_shape_derivatives_raise checks that)
SCIPY_VALUED = _specs("vonmises", ("cdf", "sf"), ("z_circle", "shape") + LOC_SCALE)
# (x shape, shape of every other argument): broadcasting both ways
SHAPES = [((3,), (3,)), ((2, 3), (3,)), ((4,), ())]


def _draw(spec, x_shape, p_shape, dtype, seed=0):
    rng = np.random.default_rng(seed)
    args = [rng.uniform(*DOMAINS[d], x_shape if i == 0 else p_shape) for i, d in enumerate(spec.domains)]
    if spec.domains[0] == "z_nonzero":
        args[0] = args[0] * np.where(rng.random(x_shape) < 0.5, -1.0, 1.0)
    if spec.domains[-2:] == LOC_SCALE and spec.domains[0] != "prob":
        args[0] = args[-2] + args[-1] * args[0]
    return tuple(np.asarray(a, dtype) for a in args)


def _value_tol(dtype):
    return dict(rtol=2e-5, atol=1e-6) if dtype == np.float32 else dict(rtol=1e-12, atol=1e-14)


def _check_values(spec, args, dtype):
    out = spec.op(*args)
    assert np.result_type(out) == dtype, (spec.name, np.result_type(out))
    ref = spec.ref(*[a.astype(np.float64) for a in args])
    assert np.shape(out) == np.shape(ref)
    assert_close(out, ref, err_msg=spec.name, **_value_tol(dtype))


@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["float64", "float32"])
@pytest.mark.parametrize("shapes", SHAPES, ids=str)
@pytest.mark.parametrize("spec", CONTINUOUS + SCIPY_VALUED, ids=repr)
def test_values(spec, shapes, dtype):
    _check_values(spec, _draw(spec, *shapes, dtype), dtype)


def _uses_incomplete(spec):
    """The functions built on the incomplete gamma and beta functions (their shape derivatives run the
    functions' series in Taylor arithmetic: slower, so checked in float64 at one shape only; their
    float32 values are checked in test_values)."""
    dist, fn = spec.name.split(".")
    return dist in ("gamma", "chi2", "beta", "gennorm", "t") and fn in TAILS + INVERSE


DERIVATIVE_CASES = [(spec, shapes, dtype) for spec in CONTINUOUS
                    for shapes, dtype in ((SHAPES[0], np.float64), (SHAPES[1], np.float64), (SHAPES[0], np.float32))
                    if not (_uses_incomplete(spec) and (shapes, dtype) != (SHAPES[0], np.float64))]


@pytest.mark.parametrize("spec,shapes,dtype", DERIVATIVE_CASES,
                         ids=[f"{c[0].name}-{np.dtype(c[2]).name}-{c[1][0]}" for c in DERIVATIVE_CASES])
def test_derivatives_in_every_argument(spec, shapes, dtype):
    args = _draw(spec, *shapes, dtype)
    check_grads(spec.op, args, order=2, modes=("fwd", "rev"), name=spec.name)
    grads = tg.grad(lambda *a: spec.op(*a).sum(), grad_position=tuple(range(len(args))))(*args)
    assert all(g.dtype == dtype and g.shape == a.shape for g, a in zip(grads, args))


def _x_loc_scale(spec, args):
    """The function of ``x, loc, scale`` only, the shape parameters held at their values."""
    shapes = args[1:-2]
    return (lambda x, loc, scale: spec.op(x, *shapes, loc, scale)), (args[0], args[-2], args[-1])


@pytest.mark.parametrize("shapes", SHAPES[:2], ids=str)
@pytest.mark.parametrize("spec", SCIPY_VALUED, ids=repr)
def test_scipy_valued_derivatives_in_x_loc_scale(spec, shapes):
    fn, args = _x_loc_scale(spec, _draw(spec, *shapes, np.float64))
    check_grads(fn, args, order=2, modes=("fwd", "rev"), name=spec.name)


@pytest.mark.parametrize("spec", [s for s in SCIPY_VALUED if s.name.endswith(".cdf")], ids=repr)
def test_scipy_valued_shape_derivatives_raise(spec):
    args = _draw(spec, (3,), (3,), np.float64)
    for mode in (lambda f, a: tg.grad(f, grad_position=1)(*a),
                 lambda f, a: tg.jvp(lambda s: f(a[0], s, *a[2:]), (a[1],), (np.ones_like(a[1]),))):
        with pytest.raises(NotImplementedError, match="derivative of .* in operand .*grad_position"):
            mode(lambda *a: spec.op(*a).sum(), args)
    # the failed call left nothing behind: the derivative in x still works, and equals the density
    g = tg.grad(lambda x: spec.op(x, *args[1:]).sum())(args[0])
    assert_close(g, getattr(scipy.stats, spec.name.split(".")[0]).pdf(*args), rtol=1e-10)


@pytest.mark.parametrize("dist,shapes", [("t", (3.5,)), ("gamma", (2.5,)), ("beta", (2.5, 1.5))])
def test_quantile_derivatives_are_the_implicit_ones(dist, shapes):
    """d ppf / dq = 1 / pdf(ppf) and, in a shape s, d ppf / ds = -(dF/ds) / pdf(ppf), F = cdf."""
    op, ref = getattr(tss, dist), getattr(scipy.stats, dist)
    q, shapes = np.array([0.1, 0.45, 0.9]), tuple(np.asarray(s) for s in shapes)
    x = ref.ppf(q, *shapes)
    assert_close(tg.grad(lambda q: op.ppf(q, *shapes).sum())(q), 1.0 / ref.pdf(x, *shapes), rtol=1e-10)
    dF = tg.jacfwd(lambda s: op.cdf(x, s, *shapes[1:]))(shapes[0])
    dppf = tg.jacfwd(lambda s: op.ppf(q, s, *shapes[1:]))(shapes[0])
    assert_close(dppf, -dF / ref.pdf(x, *shapes), rtol=1e-9)


@pytest.mark.parametrize("spec", CONTINUOUS + SCIPY_VALUED, ids=repr)
def test_vmap_and_jit(spec):
    args = _draw(spec, (3,), (3,), np.float64)
    check_vmap(spec.op, args, in_axes=(0,) + (None,) * (len(args) - 2) + (0,), slack=10.0)
    assert_close(tg.jit(spec.op)(*args), spec.op(*args), rtol=1e-13)


# ---- outside the support: SciPy's values, and derivatives that are finite (the where trap) ---------
# (distribution, its shape parameters, points on both sides of and at the support's ends)
SUPPORTS = [
    ("expon", (), [-1.0, 0.0, 0.5]),
    ("uniform", (), [-0.5, 0.0, 1.0, 1.5]),
    ("pareto", (2.5,), [0.5, 1.0, 1.5]),
    ("gamma", (2.5,), [-1.0, 0.5]),
    ("chi2", (3.0,), [-1.0, 0.5]),
    ("beta", (2.5, 1.5), [-0.5, 0.5, 1.5]),
    ("wrapcauchy", (0.4,), [-1.0, 1.0, 7.0]),
    ("truncnorm", (-0.5, 1.0), [-1.0, -0.5, 0.2, 1.0, 2.0]),
]
SUPPORT_CASES = [(dist, shapes, x, fn) for dist, shapes, x in SUPPORTS
                 for fn in DENSITY + TAILS if hasattr(getattr(tss, dist), fn)]


@pytest.mark.parametrize("dist,shapes,x,fn", SUPPORT_CASES, ids=[f"{c[0]}.{c[3]}" for c in SUPPORT_CASES])
def test_outside_the_support(dist, shapes, x, fn):
    op = getattr(getattr(tss, dist), fn)
    x, shapes = np.array(x), tuple(np.asarray(s) for s in shapes)
    loc, scale = np.asarray(0.0), np.asarray(1.0)
    with np.errstate(all="raise"):  # no log(0), 0 * inf or inf - inf on the way
        out = op(x, *shapes, loc, scale)
    assert_close(out, getattr(getattr(scipy.stats, dist), fn)(x, *shapes), rtol=1e-12)
    grads = tg.grad(lambda *a: op(*a).sum(), grad_position=tuple(range(len(shapes) + 3)))(x, *shapes, loc, scale)
    for g in grads:
        assert not np.isnan(g).any(), (dist, fn, grads)


# ---- discrete distributions: values at and off the support, derivatives in the parameters ----------
# (distribution, parameters, functions); k runs over whole numbers in and out of the support, and a
# non-integer; every function is differentiated in its continuous parameters only (k is discrete)
DISCRETE = [
    ("bernoulli", (0.3,), ("logpmf", "pmf") + TAILS + ("ppf",)),
    ("binom", (7.0, 0.3), ("logpmf", "pmf") + TAILS + ("ppf",)),
    ("betabinom", (7.0, 1.5, 2.5), ("logpmf", "pmf", "ppf")),
    ("geom", (0.3,), ("logpmf", "pmf") + TAILS + ("ppf",)),
    ("nbinom", (3.5, 0.4), ("logpmf", "pmf") + TAILS + ("ppf",)),
    ("poisson", (2.5,), ("logpmf", "pmf") + TAILS + ("ppf",)),
]
IN_SUPPORT = {"bernoulli": [0.0, 1.0, 1.0, 0.0, 1.0], "geom": [1.0, 2.0, 3.0, 5.0, 1.0]}
DISCRETE_CASES = [(dist, params, fn) for dist, params, fns in DISCRETE for fn in fns]
DISCRETE_IDS = [f"{d}.{fn}" for d, _, fn in DISCRETE_CASES]
K = np.array([-1.0, 0.0, 0.5, 1.0, 2.0, 3.0, 5.0, 7.0, 11.0])
Q = np.array([0.0, 0.05, 0.2, 0.5, 0.65, 0.8, 0.95, 1.0])  # no q at a float tie with a cdf value
# the parameters in which a function is differentiable (positions among the parameters)
DIFFERENTIABLE = {"binom": (1,)}  # n is a count: binom.cdf holds it, and the table does not vary it


def _discrete(dist, fn):
    return getattr(getattr(tss, dist), fn), getattr(getattr(scipy.stats, dist), fn)


@pytest.mark.parametrize("loc", [0, 2])
@pytest.mark.parametrize("dist,params,fn", DISCRETE_CASES, ids=DISCRETE_IDS)
def test_discrete_values(dist, params, fn, loc):
    op, ref = _discrete(dist, fn)
    k = Q if fn == "ppf" else K + loc
    with np.errstate(all="raise"):
        out = op(k, *params, loc)
    assert_close(out, ref(k, *params, loc), rtol=1e-12)
    if fn != "ppf":  # float32 parameters keep a float32 result
        out32 = op(k.astype(np.float32), *[np.float32(p) for p in params], loc)
        assert np.result_type(out32) == np.float32
        assert_close(out32, ref(k, *params, loc), rtol=2e-5, atol=1e-6)


@pytest.mark.parametrize("dist,params,fn", [c for c in DISCRETE_CASES if c[2] != "ppf"],
                         ids=[i for i, c in zip(DISCRETE_IDS, DISCRETE_CASES) if c[2] != "ppf"])
def test_discrete_derivatives_in_the_parameters(dist, params, fn):
    op, _ = _discrete(dist, fn)
    positions = DIFFERENTIABLE.get(f"{dist}.{fn}", DIFFERENTIABLE.get(dist, tuple(range(len(params)))))
    k = np.array(IN_SUPPORT.get(dist, [0.0, 1.0, 2.0, 3.0, 5.0]))
    if dist == "bernoulli" and fn == "logsf":
        k = np.zeros(5)  # log sf(1) = log 0
    rng = np.random.default_rng(4)

    def at(k, *free):
        """``op`` at ``k`` with the differentiable parameters ``free``, the others held."""
        full = list(params)
        for i, v in zip(positions, free):
            full[i] = v
        return op(k, *full)

    def on_support(*free):
        return at(k, *free)
    free = tuple(np.asarray(params[i] * (1.0 + 0.05 * rng.uniform(-1, 1, 5))) for i in positions)
    check_grads(on_support, free, order=2, modes=("fwd", "rev"), name=f"{dist}.{fn}")
    # vmap over the parameters and jit
    check_vmap(on_support, free, in_axes=0, slack=10.0)
    assert_close(tg.jit(on_support)(*free), on_support(*free), rtol=1e-13)
    # zero, not NaN, derivatives in k and in the parameters off the support
    g = tg.grad(lambda k, *free: at(k, *free).sum(),
                grad_position=tuple(range(1 + len(positions))))(K, *[np.asarray(params[i]) for i in positions])
    assert_close(g[0], np.zeros_like(K))
    assert all(np.isfinite(v).all() for v in g[1:])


@pytest.mark.parametrize("dist,params", [(d, p) for d, p, fns in DISCRETE if "ppf" in fns], ids=lambda v: str(v))
def test_discrete_ppf_is_not_differentiable_but_transforms(dist, params):
    op, ref = _discrete(dist, "ppf")
    q = np.array([0.05, 0.3, 0.5, 0.9])
    assert_close(tg.jit(lambda q: op(q, *params))(q), ref(q, *params))
    check_vmap(lambda q: op(q, *params), (q,), in_axes=0, draw=lambda rng: (rng.uniform(0.05, 0.95, 4),))
    assert_close(tg.grad(lambda q: op(q, *params).sum())(q), np.zeros(4))
    assert op(q.astype(np.float32), *params).dtype == np.float32


def test_the_derivatives_of_the_discrete_cdfs_are_the_closed_forms():
    k, n, p, mu = np.array([0.0, 2.0, 4.0]), 7.0, 0.3, 2.5
    # d/dp P(Binom(n, p) <= k) = -n P(Binom(n - 1, p) = k); d/dmu P(Poisson(mu) <= k) = -P(Poisson(mu) = k)
    assert_close(tg.grad(lambda p: tss.binom.cdf(k, n, p).sum())(p),
                 -n * scipy.stats.binom.pmf(k, n - 1, p).sum(), rtol=1e-12)
    assert_close(tg.grad(lambda mu: tss.poisson.cdf(k, mu).sum())(mu), -scipy.stats.poisson.pmf(k, mu).sum(),
                 rtol=1e-12)


@pytest.mark.parametrize("a,b", [(-0.5, 2.0), (30.2, 30.8), (-30.8, -30.2), (1.0, 3.0), (-np.inf, 2.0),
                                 (-3.0, np.inf)])
def test_truncnorm_quantiles_in_the_tails(a, b):
    """Far-tail intervals and tail probabilities: the quantile inverts tapegrad's own cdf and sf to
    the precision of q (SciPy's isf is ~1e-9 off in these cases), and the ends come back at 0 and 1."""
    q = np.array([1e-10, 0.02, 0.5, 0.98, 1.0 - 1e-10])
    x = tss.truncnorm.ppf(q, a, b)
    assert_close(tss.truncnorm.cdf(x[:3], a, b), q[:3], rtol=1e-9)
    assert_close(tss.truncnorm.sf(tss.truncnorm.isf(q[:3], a, b), a, b), q[:3], rtol=1e-9)
    assert_close(x, scipy.stats.truncnorm.ppf(q, a, b), rtol=1e-8)
    assert_close(tss.truncnorm.ppf(np.array([0.0, 1.0]), a, b), np.array([a, b]))
    interior = x[1:4]
    g = tg.grad(lambda q: tss.truncnorm.ppf(q, a, b).sum())(q[1:4])
    assert_close(g, 1.0 / scipy.stats.truncnorm.pdf(interior, a, b), rtol=1e-8)


def test_poisson_entropy():
    mu = np.array([0.0, 1e-3, 0.1, 1.0, 5.0, 30.0, 99.9, 100.0, 150.0])
    with np.errstate(divide="raise", invalid="raise"):  # underflow of the far terms is fine
        out = tss.poisson.entropy(mu)
    assert_close(out, scipy.stats.poisson.entropy(mu), rtol=1e-9)
    # far out SciPy's own sum stops converging; the Gaussian limit log(2 pi e mu) / 2 - 1 / (12 mu) holds
    big = np.array([1e4, 1e8])
    assert_close(tss.poisson.entropy(big), 0.5 * np.log(2 * np.pi * np.e * big) - 1 / (12 * big), rtol=1e-9)
    assert tss.poisson.entropy(np.float32(2.0)).dtype == np.float32
    assert tss.poisson.entropy(mu[2:5, None], np.zeros(2)).shape == (3, 2)
    check_grads(tss.poisson.entropy, (np.array([0.3, 5.0, 60.0, 150.0]),), order=2, name="poisson.entropy")
    check_vmap(tss.poisson.entropy, (np.array([0.3, 5.0, 150.0]),), in_axes=0, slack=10.0)
    assert_close(tg.jit(tss.poisson.entropy)(mu), out, rtol=1e-13)


def test_multinomial():
    x = np.array([[1.0, 2.0, 3.0], [0.0, 6.0, 0.0], [1.0, 1.0, 1.0], [2.5, 2.5, 1.0], [-1.0, 4.0, 3.0]])
    p = np.array([0.2, 0.3, 0.5])
    for fn in ("logpmf", "pmf"):
        assert_close(getattr(tss.multinomial, fn)(x, 6.0, p), getattr(scipy.stats.multinomial, fn)(x, 6, p),
                     rtol=1e-12)
    check_grads(lambda p: tss.multinomial.logpmf(x[:2], 6.0, p), (p,), order=2, name="multinomial.logpmf")
    g = tg.grad(lambda p: tss.multinomial.logpmf(x, 6.0, p).sum())(p)
    assert np.isfinite(g).all()
    p_batch = np.array([[0.2, 0.3, 0.5], [0.6, 0.1, 0.3]])
    check_vmap(lambda p: tss.multinomial.pmf(x[0], 6.0, p), (p_batch[0],), in_axes=0,
               draw=lambda rng: (rng.dirichlet(np.ones(3)),))
    assert_close(tg.jit(tss.multinomial.logpmf)(x, 6.0, p), tss.multinomial.logpmf(x, 6.0, p))


def test_dirichlet():
    alpha = np.array([1.5, 2.0, 3.0])
    x = np.random.default_rng(0).dirichlet(alpha, 4).T  # (K, N)
    for fn in ("logpdf", "pdf"):
        ref = getattr(scipy.stats.dirichlet, fn)(x, alpha)
        assert_close(getattr(tss.dirichlet, fn)(x, alpha), ref, rtol=1e-12)
        assert_close(getattr(tss.dirichlet, fn)(x[:2], alpha), ref, rtol=1e-12)  # K - 1 components
        assert_close(getattr(tss.dirichlet, fn)(x[:, 0], alpha), ref[0], rtol=1e-12)
    # derivatives on the simplex: in the free K - 1 components, and in alpha
    check_grads(tss.dirichlet.logpdf, (x[:2], alpha), order=2, name="dirichlet.logpdf")
    check_vmap(tss.dirichlet.logpdf, (x[:2, 0], alpha), in_axes=(0, None), slack=10.0)
    assert_close(tg.jit(tss.dirichlet.logpdf)(x, alpha), tss.dirichlet.logpdf(x, alpha))
    # off the simplex: -inf (SciPy raises), with finite derivatives
    off = np.array([[0.5, 1.2], [0.6, -0.1], [0.2, -0.1]])
    assert np.all(tss.dirichlet.logpdf(off, alpha) == -np.inf)
    assert np.isfinite(tg.grad(lambda a: tss.dirichlet.logpdf(off, a).sum())(alpha)).all()
    with pytest.raises(ValueError, match="first axis"):
        tss.dirichlet.logpdf(np.ones((5, 2)) / 5, alpha)


# ---- statistics: sem (differentiable), rankdata and mode (not) ---------------------------------------
@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["float64", "float32"])
@pytest.mark.parametrize("axis,ddof,keepdims", [(0, 1, False), (1, 0, True), (None, 1, False), (-1, 2, False),
                                               ((0, 1), 1, False)])
def test_sem(axis, ddof, keepdims, dtype):
    a = np.asarray(np.random.default_rng(5).standard_normal((4, 5)), dtype)
    out = tss.sem(a, axis=axis, ddof=ddof, keepdims=keepdims)
    assert np.result_type(out) == dtype
    assert_close(out, scipy.stats.sem(a.astype(np.float64), axis=axis, ddof=ddof, keepdims=keepdims),
                 **_value_tol(dtype))
    if dtype == np.float64:
        fn = lambda a: tss.sem(a, axis=axis, ddof=ddof, keepdims=keepdims)  # noqa: E731
        check_grads(fn, (a,), order=2, modes=("fwd", "rev"), name="sem")
        check_vmap(fn, (a,), in_axes=0, slack=10.0)
        assert_close(tg.jit(fn)(a), fn(a), rtol=1e-13)


def test_sem_nan_policy():
    a = np.array([[1.0, np.nan, 3.0, 4.0], [2.0, 2.5, 0.5, 1.0]])
    assert_close(tss.sem(a, axis=1, nan_policy="omit"), scipy.stats.sem(a, axis=1, nan_policy="omit"))
    assert_close(tss.sem(a, axis=1), scipy.stats.sem(a, axis=1))  # propagate: NaN in the first row
    with pytest.raises(ValueError, match="nan_policy.*isnan"):
        tss.sem(a, nan_policy="raise")


TIES = np.array([[3.0, 1.0, 3.0, 2.0, 1.0], [0.5, 0.5, 0.5, 2.0, -1.0], [4.0, 3.0, 2.0, 1.0, 0.0]])


@pytest.mark.parametrize("axis", [None, 0, 1, -1])
@pytest.mark.parametrize("method", ["average", "min", "max", "dense", "ordinal"])
def test_rankdata(method, axis):
    out = tss.rankdata(TIES, method, axis=axis)
    ref = scipy.stats.rankdata(TIES, method, axis=axis)
    assert out.dtype == ref.dtype and out.shape == ref.shape
    np.testing.assert_array_equal(out, ref)
    fn = lambda a: tss.rankdata(a, method, axis=axis)  # noqa: E731
    np.testing.assert_array_equal(tg.jit(fn)(TIES), ref)
    np.testing.assert_array_equal(tg.vmap(fn)(np.stack([TIES, TIES[::-1]])),
                                  np.stack([ref, scipy.stats.rankdata(TIES[::-1], method, axis=axis)]))
    # not differentiable: a zero derivative, in both modes
    assert_close(tg.grad(lambda a: tss.rankdata(a, "average", axis=axis).sum())(TIES), np.zeros_like(TIES))
    assert_close(tg.jvp(lambda a: tss.rankdata(a, "average", axis=axis), (TIES,), (np.ones_like(TIES),))[1], 0.0)


def test_rankdata_nan_policy_and_errors():
    a = np.array([3.0, np.nan, 3.0, 2.0])
    for policy in ("propagate", "omit"):
        np.testing.assert_array_equal(tss.rankdata(a, nan_policy=policy), scipy.stats.rankdata(a, nan_policy=policy))
    with pytest.raises(ValueError, match="method must be one of"):
        tss.rankdata(a, "mean")
    with pytest.raises(ValueError, match="nan_policy must be one of"):
        tss.rankdata(a, nan_policy="ignore")


@pytest.mark.parametrize("keepdims", [False, True])
@pytest.mark.parametrize("axis", [None, 0, 1, -1])
def test_mode(axis, keepdims):
    out = tss.mode(TIES, axis=axis, keepdims=keepdims)
    ref = scipy.stats.mode(TIES, axis=axis, keepdims=keepdims)
    for o, r in zip(out, ref):
        assert np.shape(o) == np.shape(r) and np.asarray(o).dtype == np.asarray(r).dtype
        np.testing.assert_array_equal(o, r)
    fn = lambda a: tss.mode(a, axis=axis, keepdims=keepdims)  # noqa: E731
    for o, r in zip(tg.jit(fn)(TIES), ref):
        np.testing.assert_array_equal(o, r)
    batched = tg.vmap(fn)(np.stack([TIES, TIES[::-1]]))
    for o, r, r2 in zip(batched, ref, scipy.stats.mode(TIES[::-1], axis=axis, keepdims=keepdims)):
        np.testing.assert_array_equal(o, np.stack([r, r2]))
    with pytest.raises(ValueError, match="nan_policy"):
        tss.mode(TIES, nan_policy="skip")


def test_mode_derivative_is_the_gather_s():
    """The mode is gathered from the data: its derivative is 1 at the element chosen (the first
    occurrence of the mode), which is the minimum where all values differ."""
    g = tg.grad(lambda a: tss.mode(a, axis=1).mode.sum())(TIES)
    expected = np.zeros_like(TIES)
    expected[0, 1] = expected[1, 0] = expected[2, 4] = 1.0  # 1 (first of two), 0.5 (first of three), 0
    assert_close(g, expected)
    distinct = np.array([[0.3, 0.7, 0.1], [0.9, 0.4, 0.6]])
    check_grads(lambda a: tss.mode(a, axis=0).mode, (distinct,), order=2, name="mode")
    assert_close(tss.mode(distinct, axis=None).mode, distinct.min())
    nan = np.array([1.0, np.nan, np.nan, 2.0])
    for policy in ("propagate", "omit"):
        ours, ref = tss.mode(nan, nan_policy=policy), scipy.stats.mode(nan, nan_policy=policy)
        np.testing.assert_array_equal(ours.mode, ref.mode)
        np.testing.assert_array_equal(ours.count, ref.count)


# ---- gaussian_kde --------------------------------------------------------------------------------
KDE_DATA = np.random.default_rng(7).standard_normal((2, 12))
KDE_WEIGHTS = np.random.default_rng(8).uniform(0.5, 1.5, 12)
KDE_POINTS = np.random.default_rng(9).standard_normal((2, 4))


@pytest.mark.parametrize("weights", [None, KDE_WEIGHTS], ids=["equal", "weighted"])
@pytest.mark.parametrize("bw_method", [None, "silverman", 0.4, lambda kde: 0.3], ids=["scott", "silverman", "scalar",
                                                                                      "callable"])
def test_gaussian_kde_against_scipy(bw_method, weights):
    ours, ref = tss.gaussian_kde(KDE_DATA, bw_method, weights), scipy.stats.gaussian_kde(KDE_DATA, bw_method, weights)
    for name in ("factor", "neff", "covariance", "inv_cov"):
        assert_close(getattr(ours, name), getattr(ref, name), rtol=1e-12)
    for method in ("evaluate", "pdf", "logpdf", "__call__"):
        assert_close(getattr(ours, method)(KDE_POINTS), getattr(ref, method)(KDE_POINTS), rtol=1e-12)
    assert_close(ours.integrate_gaussian([0.1, 0.2], np.eye(2)), ref.integrate_gaussian([0.1, 0.2], np.eye(2)),
                 rtol=1e-12)
    other = scipy.stats.gaussian_kde(KDE_DATA[:, :5])
    assert_close(ours.integrate_kde(tss.gaussian_kde(KDE_DATA[:, :5])), ref.integrate_kde(other), rtol=1e-12)


def test_gaussian_kde_one_dimensional():
    data = KDE_DATA[0]
    ours, ref = tss.gaussian_kde(data), scipy.stats.gaussian_kde(data)
    x = np.linspace(-2.0, 2.0, 5)
    assert_close(ours(x), ref(x), rtol=1e-12)
    assert_close(ours.logpdf(0.3), ref.logpdf(0.3), rtol=1e-12)
    assert_close(ours.integrate_box_1d(-0.5, 1.0), ref.integrate_box_1d(-0.5, 1.0), rtol=1e-12)
    draws = ours.resample(4000, seed=0)
    assert draws.shape == (1, 4000)
    assert abs(draws.mean() - data.mean()) < 4 * np.sqrt(ours.covariance[0, 0] + data.var()) / np.sqrt(4000)
    with pytest.raises(ValueError, match="one-dimensional"):
        tss.gaussian_kde(KDE_DATA).integrate_box_1d(0.0, 1.0)
    with pytest.raises(ValueError, match="points have dimension 3"):
        tss.gaussian_kde(KDE_DATA)(np.zeros((3, 2)))
    with pytest.raises(ValueError, match="weights must have shape"):
        tss.gaussian_kde(KDE_DATA, weights=np.ones(3))


def test_gaussian_kde_derivatives_vmap_jit():
    def log_density(points, data, weights, bw):
        return tss.gaussian_kde(data, bw, weights).logpdf(points)
    args = (KDE_POINTS, KDE_DATA[:, :6], KDE_WEIGHTS[:6], np.asarray(0.5))
    check_grads(log_density, args, order=2, modes=("fwd", "rev"), name="gaussian_kde.logpdf")
    check_grads(lambda data: tss.gaussian_kde(data).integrate_gaussian(np.zeros(2), np.eye(2)), (KDE_DATA[:, :6],),
                order=2, name="gaussian_kde.integrate_gaussian")
    check_vmap(lambda p, d: tss.gaussian_kde(d)(p), (KDE_POINTS, KDE_DATA), in_axes=(None, 0), slack=10.0)
    assert_close(tg.jit(log_density)(*args), log_density(*args), rtol=1e-13)
    # the reparameterized draws are differentiable in the data set
    g = tg.grad(lambda d: tss.gaussian_kde(d).resample(5, seed=1).sum())(KDE_DATA)
    assert g.shape == KDE_DATA.shape and np.isfinite(g).all()


# ---- multivariate_normal: allow_singular and entropy -----------------------------------------------
def test_mvn_allow_singular():
    rng = np.random.default_rng(10)
    basis = rng.standard_normal((3, 2))
    cov, mean = basis @ basis.T, rng.standard_normal(3)  # rank 2
    x = mean + (basis @ rng.standard_normal((2, 4))).T  # on the support
    ref = scipy.stats.multivariate_normal(mean, cov, allow_singular=True)
    assert_close(tss.multivariate_normal.logpdf(x, mean, cov, allow_singular=True), ref.logpdf(x), rtol=1e-10)
    assert_close(tss.multivariate_normal.pdf(x, mean, cov, allow_singular=True), ref.pdf(x), rtol=1e-10)
    off = x + 0.1
    assert np.all(tss.multivariate_normal.logpdf(off, mean, cov, allow_singular=True) == -np.inf)
    assert np.all(ref.logpdf(off) == -np.inf)
    # the derivative in x is -pinv(cov) (x - mean), and in mean its opposite
    gx, gm = tg.grad(lambda x, m: tss.multivariate_normal.logpdf(x, m, cov, allow_singular=True).sum(),
                     grad_position=(0, 1))(x, mean)
    expected = -(x - mean) @ np.linalg.pinv(cov)
    assert_close(gx, expected, rtol=1e-9)
    assert_close(gm, -expected.sum(0), rtol=1e-9)
    # a full-rank cov: the same values and derivatives (cov too) as the Cholesky route
    full = cov + np.eye(3)
    fn = lambda x, m, c: tss.multivariate_normal.logpdf(x, m, c, allow_singular=True)  # noqa: E731
    assert_close(fn(x, mean, full), tss.multivariate_normal.logpdf(x, mean, full), rtol=1e-12)
    check_grads(fn, (x, mean, full), order=2, modes=("fwd", "rev"), name="multivariate_normal.logpdf singular")
    check_vmap(fn, (x, mean, cov), in_axes=(0, None, None))
    assert_close(tg.jit(fn)(x, mean, cov), fn(x, mean, cov), rtol=1e-12)
    with pytest.raises(np.linalg.LinAlgError):
        tss.multivariate_normal.logpdf(x, mean, cov)  # without the flag, singular is an error
    with pytest.raises(ValueError, match="positive semidefinite"):
        tss.multivariate_normal.logpdf(x, mean, -full, allow_singular=True)


def test_mvn_entropy():
    rng = np.random.default_rng(11)
    a = rng.standard_normal((3, 3))
    cov, mean = a @ a.T + 0.5 * np.eye(3), rng.standard_normal(3)
    assert_close(tss.multivariate_normal.entropy(mean, cov), scipy.stats.multivariate_normal(mean, cov).entropy())
    assert_close(tss.multivariate_normal.entropy(mean, 2.0), scipy.stats.multivariate_normal(mean, 2.0).entropy())
    assert_close(tss.multivariate_normal.entropy(None, 2.0), scipy.stats.multivariate_normal(None, 2.0).entropy())
    # d/dcov (log det cov) / 2 = inv(cov) / 2
    assert_close(tg.grad(lambda c: tss.multivariate_normal.entropy(mean, c))(cov), 0.5 * np.linalg.inv(cov),
                 rtol=1e-12)
    check_grads(lambda c: tss.multivariate_normal.entropy(mean, c), (cov,), order=2, name="multivariate_normal.entropy")
    covs = np.stack([cov, cov + np.eye(3)])
    check_vmap(lambda c: tss.multivariate_normal.entropy(mean, c), (covs[0],), in_axes=0,
               draw=lambda rng: (covs[1],))
    assert_close(tg.jit(lambda c: tss.multivariate_normal.entropy(mean, c))(cov),
                 tss.multivariate_normal.entropy(mean, cov))


def test_plain_scipy_rankdata_on_a_traced_value_names_ours():
    with pytest.raises(TypeError, match="tapegrad.scipy.stats.rankdata"):
        tg.grad(lambda x: scipy.stats.rankdata(x).sum())(np.array([1.0, 3.0, 2.0]))


@pytest.mark.parametrize("spec", CONTINUOUS + SCIPY_VALUED, ids=repr)
def test_python_number_parameters_keep_float32(spec):
    """Shape parameters, loc and scale given as Python numbers are weak: float32 data stays float32."""
    args = _draw(spec, (3,), (), np.float32)
    params = [float(a) for a in args[1:]]
    out = spec.op(args[0], *params)
    assert np.result_type(out) == np.float32
    assert_close(out, spec.ref(args[0].astype(np.float64), *params), **_value_tol(np.float32))


# ---- on the strict device double (CuPy's rules): the compositions never touch the host ---------------
# (the incomplete gamma and beta functions and their inverses need cupyx.scipy.special's kernels,
# which the double does not list: not checked here)
ON_DEVICE = [s for s in CONTINUOUS if not _uses_incomplete(s)]


@pytest.mark.parametrize("spec,route", grid(ON_DEVICE, ids=(repr,)))
def test_device_routes(spec, route):
    check_route(route, spec.op, _draw(spec, (3,), (3,), np.float64))


@pytest.mark.parametrize("spec", ON_DEVICE[::7], ids=repr)
def test_device_python_number_parameters(spec):
    args = _draw(spec, (3,), (), np.float32)
    out = spec.op(to_device(args[0]), *[float(a) for a in args[1:]])
    assert type(out).__name__ == "DeviceArray" and out.dtype == np.float32
    assert_close(out.get(), spec.op(args[0], *[float(a) for a in args[1:]]))


@pytest.mark.parametrize("dist,params,fn,route", grid(
    [c for c in DISCRETE_CASES if c[2] in ("logpmf", "pmf")], unpack=True, ids=(lambda c: f"{c[0]}.{c[2]}",)))
def test_device_discrete(dist, params, fn, route):
    op, _ = _discrete(dist, fn)
    check_route(route, op, (np.array([0.0, 1.0, 2.0, 9.0]),) + tuple(np.asarray(p) for p in params))


def test_device_kde_sem_and_the_host_only_statistics():
    data, points = to_device(KDE_DATA), to_device(KDE_POINTS)
    out = tss.gaussian_kde(data).logpdf(points)
    assert type(out).__name__ == "DeviceArray"
    assert_close(out.get(), tss.gaussian_kde(KDE_DATA).logpdf(KDE_POINTS), rtol=1e-12)
    assert_close(tss.sem(data, axis=1).get(), tss.sem(KDE_DATA, axis=1), rtol=1e-12)
    with pytest.raises(NotImplementedError, match=r"only NumPy arrays.*\.get\(\)"):
        tss.rankdata(data)
    with pytest.raises(NotImplementedError, match=r"only NumPy arrays.*\.get\(\)"):
        tss.mode(data)
