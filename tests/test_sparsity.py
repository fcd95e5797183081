"""Sparsity detection by tracing (tg.jacobian_sparsity, tg.hessian_sparsity): the detected pattern holds
every non-zero of the dense Jacobian (Hessian) at random points, always, and equals their pattern on
programs whose primitives all have exact rules; the dense fallback is reported; bad arguments are named."""
import warnings

import numpy as np
import pytest

sp = pytest.importorskip("scipy.sparse")

import importlib  # noqa: E402
import pkgutil  # noqa: E402

import tapegrad as tg  # noqa: E402
import tapegrad.numpy as tnp  # noqa: E402
import tapegrad.scipy.special as special  # noqa: E402
from tapegrad import extend  # noqa: E402
from tapegrad._control_flow import _dependencies  # noqa: E402


def true_pattern(f, x, hessian=False, points=3, seed=0):
    """The union of the non-zeros of the dense Jacobian (Hessian) at ``points`` random points."""
    rng = np.random.default_rng(seed)
    found = None
    for _ in range(points):
        dense = np.asarray((tg.hessian if hessian else tg.jacfwd)(f)(rng.uniform(0.5, 1.5, x.shape)))
        nz = dense.reshape(-1, x.size) != 0
        found = nz if found is None else found | nz
    return found


def check(f, x, exact=True, hessian=False):
    """Detect, compare with the true pattern (superset always; equal where ``exact``), return it."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # every primitive met here has a rule: no fallback
        detected = (tg.hessian_sparsity if hessian else tg.jacobian_sparsity)(f, x)
    true = true_pattern(f, x, hessian)
    assert isinstance(detected, sp.csr_array) and detected.dtype == bool and detected.has_sorted_indices
    assert detected.shape == true.shape
    dense = detected.toarray()
    missing = np.argwhere(true & ~dense)
    assert missing.size == 0, f"non-zeros missing from the detected pattern at {missing[:5].tolist()}"
    if exact:
        extra = np.argwhere(dense & ~true)
        assert extra.size == 0, f"entries detected where the Jacobian is zero: {extra[:5].tolist()}"
    return detected


def stencil(n):
    """A nonlinear five-point stencil on an n x n grid, zero outside it."""
    def f(x):
        u = x.reshape(n, n)
        p = tnp.pad(u, 1)
        return (p[:-2, 1:-1] + p[2:, 1:-1] + p[1:-1, :-2] + p[1:-1, 2:] - 4 * u + u ** 3).ravel()
    return f


A = np.diag(np.arange(1.0, 9.0)) + np.diag(np.ones(6), 2)  # a constant with a pattern of its own
MASK = np.arange(8) % 3 == 0

EXACT = {
    "stencil": (stencil(5), (25,)),
    "chain": (lambda x: tnp.sin(x[1:]) * x[:-1] + tnp.exp(x[1:]), (8,)),
    "sum axis 0": (lambda x: tnp.sum(tnp.tanh(x.reshape(3, 4)), axis=0), (12,)),
    "sum keepdims": (lambda x: x.reshape(3, 4) * tnp.sum(x.reshape(3, 4), axis=1, keepdims=True), (12,)),
    "prod": (lambda x: tnp.prod(x.reshape(2, 4), axis=1), (8,)),
    "mean broadcast": (lambda x: x - tnp.mean(x), (6,)),
    "cumsum": (lambda x: tnp.cumsum(x.reshape(2, 3) ** 2, axis=1), (6,)),
    "matmul constant": (lambda x: A @ tnp.sin(x), (8,)),
    "vector matmul": (lambda x: tnp.sin(x) @ A, (8,)),
    "batched matmul": (lambda x: tnp.matmul(x.reshape(2, 3, 2), x.reshape(2, 2, 3)).ravel(), (12,)),
    "einsum": (lambda x: tnp.einsum("ij,jk->ik", x.reshape(2, 3), x.reshape(3, 2)).ravel(), (6,)),
    "einsum trace": (lambda x: tnp.einsum("ii->i", x.reshape(3, 3)) * 2.0, (9,)),
    "fancy index": (lambda x: x[np.array([3, 0, 3, 5])] * x[:4], (6,)),
    "int and step": (lambda x: x.reshape(3, 4)[1, ::-2] ** 2, (12,)),
    "transpose": (lambda x: (x.reshape(3, 4).T * np.arange(1.0, 4.0)).ravel(), (12,)),
    "flip roll": (lambda x: tnp.flip(x) * tnp.roll(x, 2), (7,)),
    "concatenate": (lambda x: tnp.concatenate([x[:2] ** 2, x, tnp.sum(x, keepdims=True)]), (5,)),
    "broadcast": (lambda x: (x[:, None] * x[None, :3]).ravel(), (4,)),
    "where constant mask": (lambda x: tnp.where(MASK, tnp.sin(x), x[::-1]), (8,)),
    "at add": (lambda x: x.at[np.array([0, 0, 2])].add(x[3:6] ** 2), (6,)),
    "at set": (lambda x: x.at[1:3].set(tnp.sin(x[3:5])) * x, (6,)),
    "astype": (lambda x: x.astype(np.float32) * 2.0, (4,)),
    "integer path": (lambda x: x * tnp.argmax(x), (4,)),
    "scan": (lambda x: tg.scan(lambda c, xi: (c * xi, c + xi), x[0], x[1:])[1], (6,)),
    "fori_loop": (lambda x: tg.fori_loop(0, 3, lambda i, y: y * tnp.roll(y, 1), x), (7,)),
    "fori index": (lambda x: tg.fori_loop(0, 4, lambda i, y: y.at[i + 1].add(tnp.sin(y[i])), x), (6,)),
    "known cond": (lambda x: tg.cond(True, lambda y: tnp.sin(y[1:]), lambda y: y[:-1], x), (5,)),
    "vmap": (lambda x: tg.vmap(lambda r: tnp.sin(r) * r[::-1])(x.reshape(3, 3)).ravel(), (9,)),
    "jit": (tg.jit(stencil(4)), (16,)),
    "custom_jvp": (lambda x: _custom_sin(x[::2]) * x[1::2], (8,)),
    "rfft": (lambda x: tnp.abs(tnp.fft.rfft(x.reshape(2, 5))).ravel(), (10,)),
    "irfft": (lambda x: tnp.fft.irfft(x.reshape(2, 3) * (1 + 1j)).ravel(), (6,)),
    "special": (lambda x: special.erf(x) * special.gammaln(x[::-1]) + special.expit(x) + special.polygamma(1, x),
                (5,)),
    "sinc ldexp modf": (lambda x: tnp.sinc(x) * tnp.ldexp(x, 2) + tnp.modf(x)[0] * x[::-1], (5,)),
    "known permutation": (lambda x: tnp.take_along_axis(x.reshape(2, 3), np.array([[2, 0, 1], [1, 2, 0]]),
                                                        axis=1).ravel() ** 2, (6,)),
}


@tg.custom_jvp
def _custom_sin(x):
    return tnp.sin(x)


_custom_sin.defjvp(lambda primals, tangents: (tnp.sin(primals[0]), tnp.cos(primals[0]) * tangents[0]))


@pytest.mark.parametrize("name", sorted(EXACT))
def test_exact_on_declared_primitives(name):
    f, shape = EXACT[name]
    check(f, np.zeros(shape))


@tg.custom_vjp
def _straight_through(x):
    """round(x), differentiated as the identity (a straight-through estimator): the rule, not the
    function, says what the Jacobian is."""
    return tnp.round(x)


_straight_through.defvjp(lambda x: (tnp.round(x), None), lambda residuals, g: (g,))
EXACT["custom_vjp straight-through"] = (lambda x: _straight_through(x[::-1]) * x, (5,))


def _diagonal_solve(x):
    """A linear solve whose solver stops gradients: its derivative comes from custom_linear_solve's rule."""
    d = np.arange(1.0, 6.0)
    return tg.custom_linear_solve(lambda v: d * v, x ** 2, solve=lambda matvec, b: b / d, symmetric=True)


CONSERVATIVE = {
    "custom_linear_solve": (_diagonal_solve, (5,)),
    "amax": (lambda x: tnp.max(x.reshape(2, 3), axis=1) * x[:2], (6,)),
    "traced condition": (lambda x: tnp.where(x > 1.0, x, x[::-1]), (5,)),
    "traced index": (lambda x: x[tnp.argmax(x)] * x, (4,)),
    "sort": (lambda x: tnp.sort(x.reshape(2, 3), axis=1).ravel() * 2.0, (6,)),
    "cond": (lambda x: tg.cond(x[0] > 0, lambda y: tnp.sin(y[1:]), lambda y: y[:-1] * 2.0, x), (6,)),
    "while_loop": (lambda x: tg.while_loop(lambda c: c[1] < 2, lambda c: (c[0] * tnp.roll(c[0], 1), c[1] + 1),
                                           (x, 0))[0], (6,)),
    "long scan": (lambda x: tg.scan(lambda c, xi: (c * 0.5 + xi, c), x[:2],
                                    tnp.broadcast_to(x[2:4], (300, 2)))[1].ravel(), (4,)),
}


@pytest.mark.parametrize("name", sorted(CONSERVATIVE))
def test_superset_where_values_decide(name):
    f, shape = CONSERVATIVE[name]
    check(f, np.zeros(shape), exact=False)


def test_conservative_forms():
    """Control flow whose path depends on values: a traced cond takes the union of its branches, a
    while_loop the union over any number of steps (here the whole cycle), a scan longer than
    UNROLL_STEPS every step's slice of xs."""
    cond = tg.jacobian_sparsity(CONSERVATIVE["cond"][0], np.zeros(6)).toarray()
    np.testing.assert_array_equal(cond, np.eye(5, 6, 0, dtype=bool) | np.eye(5, 6, 1, dtype=bool))
    loop = tg.jacobian_sparsity(CONSERVATIVE["while_loop"][0], np.zeros(6)).toarray()
    assert loop.all()
    f = CONSERVATIVE["long scan"][0]
    assert 300 > _dependencies.UNROLL_STEPS
    got = tg.jacobian_sparsity(f, np.zeros(4)).toarray()  # ys[t] = carry before step t: x[:2], then x[2:4] too
    np.testing.assert_array_equal(got, np.tile(np.eye(2, 4, dtype=bool) | np.eye(2, 4, 2, dtype=bool), (300, 1)))


def test_five_point_stencil_and_sparse_jacfwd():
    """The pattern of the 2-D stencil is the five-point one, and sparse_jacfwd with it (5 colours)
    recovers the dense Jacobian."""
    n = 7
    f = stencil(n)
    pattern = check(f, np.zeros(n * n))
    assert pattern.nnz == 5 * n * n - 4 * n
    x = np.random.default_rng(1).standard_normal(n * n)
    recovered = tg.sparse_jacfwd(f, pattern)(x)
    np.testing.assert_allclose(recovered.toarray(), tg.jacfwd(f)(x), rtol=0, atol=0)


def test_large_stencil():
    """1e5 unknowns: detection touches each of the 5e5 entries a few times (docs/sparsity.md gives the
    time); only the result is checked here."""
    n = 317
    pattern = tg.jacobian_sparsity(stencil(n), np.zeros(n * n))
    assert pattern.shape == (n * n, n * n) and pattern.nnz == 5 * n * n - 4 * n
    assert (pattern != pattern.T).nnz == 0


def test_arguments_are_constants():
    """args and kwargs are held fixed, and their values are read (a mask selects exactly)."""
    def f(x, mask, *, scale):
        return tnp.where(mask, x * scale, 0.0)
    mask = np.array([True, False, True])
    got = tg.jacobian_sparsity(f, np.zeros(3), mask, scale=2.0).toarray()
    np.testing.assert_array_equal(got, np.diag(mask))


def test_float32_and_2d_input():
    x = np.zeros((3, 4), np.float32)
    got = tg.jacobian_sparsity(lambda x: tnp.sum(x, axis=0), x)
    assert got.shape == (4, 12)
    np.testing.assert_array_equal(got.toarray(), np.tile(np.eye(4, dtype=bool), 3))


def test_scalars_and_complex():
    np.testing.assert_array_equal(tg.jacobian_sparsity(lambda x: tnp.sin(x) * 2.0, np.float64(1.0)).toarray(), [[True]])
    np.testing.assert_array_equal(tg.jacobian_sparsity(tnp.sum, np.zeros(3)).toarray(), [[True] * 3])
    check(lambda x: x * 1j + tnp.conj(x[::-1]), np.zeros(3, complex), exact=False)  # conj: not holomorphic
    got = tg.jacobian_sparsity(lambda x: x * 1j + tnp.conj(x[::-1]), np.zeros(3, complex)).toarray()
    np.testing.assert_array_equal(got, np.eye(3, dtype=bool) | np.eye(3, dtype=bool)[::-1])


def test_hessian_through_while_loop_reports_its_reverse_mode():
    """A while_loop's reverse mode under staging (while_grad) has no rule: dense, and named."""
    f = lambda x: tnp.sum(tg.while_loop(lambda c: c[1] < 2, lambda c: (c[0] * tnp.roll(c[0], 1), c[1] + 1),  # noqa: E731
                                        (x, 0))[0])
    with pytest.warns(UserWarning, match="while_grad"):
        got = tg.hessian_sparsity(f, np.zeros(4))
    assert got.nnz == 16 and not (true_pattern(f, np.zeros(4), hessian=True) & ~got.toarray()).any()


def test_constant_output():
    got = tg.jacobian_sparsity(lambda x: np.ones(3) + tnp.floor(x), np.zeros(3))
    assert got.shape == (3, 3) and got.nnz == 0


# ---- random programs ------------------------------------------------------------------------------
def random_program(seed: int, n: int = 6, steps: int = 8):
    """A program of exactly declared primitives (sin, tanh, multiply, add, slices, reshape and sum,
    roll, concatenate, cumsum, a gather, a product by a sparse constant, where with a constant mask,
    an at-add, a short fori_loop) applied at random to 1-D values; ``f`` returns the last two values
    concatenated."""
    rng = np.random.default_rng(seed)
    ops = []
    for _ in range(steps):
        kind = rng.choice(["unary", "binary", "slice", "roll", "sum", "concat", "cumsum", "gather", "matmul",
                           "where", "at add", "loop"])
        ops.append((str(kind), int(rng.integers(1 << 30)), int(rng.integers(1 << 30))))

    def f(x):
        values = [x]
        for kind, a, b in ops:
            u, v = values[a % len(values)], values[b % len(values)]
            if kind == "unary":
                out = (tnp.sin, tnp.tanh, lambda t: t * t)[b % 3](u)
            elif kind == "binary":
                m = min(u.shape[0], v.shape[0])
                out = u[:m] * v[-m:] if b % 2 else u[:m] + v[:m]
            elif kind == "slice" and u.shape[0] > 2:
                out = (u[1:], u[::2], u[::-1])[b % 3]
            elif kind == "roll":
                out = tnp.roll(u, 1 + b % 3)
            elif kind == "sum" and u.shape[0] % 2 == 0:
                out = tnp.sum(u.reshape(2, -1), axis=b % 2)
            elif kind == "concat" and u.shape[0] + v.shape[0] <= 24:
                out = tnp.concatenate([u, v])
            elif kind == "cumsum":
                out = tnp.cumsum(u)
            elif kind == "gather":
                out = u[np.random.default_rng(b).integers(0, u.shape[0], 4)]
            elif kind == "matmul":  # no row all zero: an output that is zero whatever x is has no dependency
                r = np.random.default_rng(b)
                kept = r.random((5, u.shape[0])) < 0.3
                kept[np.arange(5), r.integers(0, u.shape[0], 5)] = True
                out = (r.uniform(0.5, 1.5, kept.shape) * kept) @ u
            elif kind == "where":
                out = tnp.where(np.random.default_rng(b).random(u.shape[0]) < 0.5, u, tnp.roll(u, 1))
            elif kind == "at add":
                at = np.random.default_rng(b).integers(0, u.shape[0], min(3, v.shape[0]))
                out = u.at[at].add(v[:at.size])
            elif kind == "loop":
                out = tg.fori_loop(0, 2, lambda i, y: y * tnp.roll(y, 1), u)
            else:
                out = tnp.cos(u)
            values.append(out)
        return tnp.concatenate([values[-1], values[-2]])
    return f, np.zeros(n)


@pytest.mark.parametrize("seed", range(40))
def test_random_programs_exact(seed):
    f, x = random_program(seed)
    check(f, x)


@pytest.mark.parametrize("seed", range(12))
def test_random_programs_hessian_exact(seed):
    f, x = random_program(seed)
    check(lambda x: tnp.sum(tnp.sin(f(x))), x, hessian=True)


@pytest.mark.parametrize("seed", range(6))
def test_random_programs_under_value_dependent_control(seed):
    """The same programs inside a traced cond and behind a traced condition: superset only."""
    f, x = random_program(seed)
    check(lambda x: tg.cond(x[0] > 1.0, f, lambda y: f(y[::-1]), x), x, exact=False)
    check(lambda x: tnp.where(x[:1] > 1.0, f(x), f(x) * 2.0), x, exact=False)


# ---- Hessians -------------------------------------------------------------------------------------
HESSIANS = {
    "rosenbrock": lambda x: tnp.sum(100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1.0 - x[:-1]) ** 2),
    "chain": lambda x: tnp.sum(tnp.sin(x[1:]) * x[:-1]),
    "quadratic form": lambda x: x @ A @ x,
    "separable": lambda x: tnp.sum(tnp.exp(x) + tnp.log(x)),
    "stencil energy": lambda x: tnp.sum(stencil(4)(x) ** 2),
    "pairs": lambda x: tnp.sum(x[::2] * x[1::2]) + tnp.sum(x ** 3),
    "linear part": lambda x: tnp.sum(x * np.arange(8.0)) + x[0] * x[7],
    "cumsum": lambda x: tnp.sum(tnp.cumsum(x[:4]) ** 2),
}


@pytest.mark.parametrize("name", sorted(HESSIANS))
def test_hessian_exact(name):
    n = 16 if name == "stencil energy" else 8
    pattern = check(HESSIANS[name], np.zeros(n), hessian=True)
    assert (pattern != pattern.T).nnz == 0


def test_hessian_superset_through_control_flow():
    f = lambda x: tg.cond(x[0] > 1.0, lambda y: tnp.sum(y[1:] * y[:-1]), lambda y: tnp.sum(y ** 3), x)  # noqa: E731
    check(f, np.zeros(6), exact=False, hessian=True)


def test_sparse_hessian_from_detected_pattern():
    f = HESSIANS["rosenbrock"]
    x = np.random.default_rng(2).uniform(0.5, 1.5, 10)
    pattern = tg.hessian_sparsity(f, np.zeros(10))
    np.testing.assert_allclose(tg.sparse_hessian(f, pattern)(x).toarray(), tg.hessian(f)(x), rtol=1e-12, atol=0)


# ---- the dense fallback and declared rules ---------------------------------------------------------
# differentiable primitives of tapegrad.numpy and tapegrad.scipy.special with no rule (the dense
# fallback, reported): the linear algebra, whose results mix whole matrices. May only shrink.
UNDECLARED = {"cholesky", "det", "eig", "eigh", "inv", "pinv", "polynomial_roots", "qr", "slogdet", "solve", "svd"}


def test_numpy_and_special_declare_their_rules():
    found = {}
    for package in (tnp, special):
        for info in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
            for value in vars(importlib.import_module(info.name)).values():
                if isinstance(value, extend.Primitive):
                    found[value.name] = value
    undeclared = {name for name, p in found.items() if p.dependency is None and not p.nondiff}
    assert undeclared <= UNDECLARED, f"declare a dependency rule for {sorted(undeclared - UNDECLARED)}"
    assert len(found) > 150


def _toy(name, impl=np.cbrt):
    """A primitive left out of the registry (whose tests ask every entry for all of its rules)."""
    prim = extend.Primitive(f"test_sparsity.{name}")
    prim.def_impl(impl)
    prim.def_abstract_eval(lambda x: extend.ShapedArray(tuple(x.shape), np.dtype(x.dtype)))
    return prim


def test_undeclared_primitive_is_dense_and_reported():
    toy = _toy("undeclared")
    extend.defjvp(toy, lambda t, ans, x: t / (3.0 * ans * ans))
    f = lambda x: extend.bind(toy, x[1:]) * 2.0  # noqa: E731
    with pytest.warns(UserWarning, match=r"no dependency rule for test_sparsity\.undeclared.*def_dependency"):
        got = tg.jacobian_sparsity(f, np.zeros(4))
    np.testing.assert_array_equal(got.toarray(), np.eye(3, 4, 1, dtype=bool).any(axis=0)[None].repeat(3, 0))


def test_declared_primitive_is_exact():
    toy = _toy("declared")
    extend.defjvp(toy, lambda t, ans, x: t / (3.0 * ans * ans))
    extend.defvjp(toy, lambda ct, ans, x: ct / (3.0 * ans * ans))
    extend.def_dependency(toy, "elementwise")
    check(lambda x: extend.bind(toy, x[1:]) * x[:-1], np.zeros(5))


def test_structural_dependency_of_a_user_primitive():
    """A copy declared with StructuralDependency: the map comes from the impl on index arrays."""
    toy = _toy("swap_halves", lambda x: np.concatenate([x[x.shape[0] // 2:], x[:x.shape[0] // 2]]))
    extend.deflinear(toy)
    extend.def_dependency(toy, extend.StructuralDependency())
    got = tg.jacobian_sparsity(lambda x: extend.bind(toy, x), np.zeros(4)).toarray()
    np.testing.assert_array_equal(got, np.roll(np.eye(4, dtype=bool), 2, axis=1))


def test_bad_kind_names_the_kinds():
    with pytest.raises(ValueError, match="'diagonal' is not a kind.*elementwise"):
        extend.def_dependency(_toy("bad_kind"), "diagonal")


# ---- errors ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("x", [[1.0, 2.0], 3.0, None])
def test_x_must_be_an_array(x):
    with pytest.raises(TypeError, match="jacobian_sparsity: x must be a NumPy or CuPy array"):
        tg.jacobian_sparsity(tnp.sin, x)


def test_x_must_be_inexact():
    with pytest.raises(TypeError, match="x must have a float or complex dtype.*int64"):
        tg.jacobian_sparsity(tnp.sin, np.arange(3))


@pytest.mark.parametrize("out", [lambda x: (x, x), lambda x: {"a": x}, lambda x: 1.0])
def test_f_must_return_one_array(out):
    with pytest.raises(TypeError, match="jacobian_sparsity: f must return one array"):
        tg.jacobian_sparsity(out, np.zeros(3))


def test_hessian_needs_a_scalar():
    with pytest.raises(ValueError, match=r"hessian_sparsity: f must return a scalar.*\(3,\)"):
        tg.hessian_sparsity(tnp.sin, np.zeros(3))
    with pytest.raises(TypeError, match="hessian_sparsity: x must be"):
        tg.hessian_sparsity(tnp.sum, [1.0])


def test_the_page_runs():
    """docs/sparsity.md's code blocks, run in order: their asserts are the page's claims."""
    import pathlib
    import re
    page = (pathlib.Path(__file__).resolve().parent.parent / "docs" / "sparsity.md").read_text()
    blocks = re.findall(r"^```python\n(.*?)^```", page, re.S | re.M)
    assert len(blocks) == 3
    namespace = {"__name__": "sparsity_guide"}
    try:
        exec(compile("\n".join(blocks), "sparsity.md", "exec"), namespace)
    finally:  # the page's primitive leaves the registry (other tests walk it)
        from tapegrad._rules import PRIMITIVES
        if namespace.get("cube_root_p") in PRIMITIVES:
            PRIMITIVES.remove(namespace["cube_root_p"])


def test_checkpoint_is_walked():
    f = lambda x: tg.checkpoint(lambda y: tnp.sin(y[1:]) * y[:-1])(x)  # noqa: E731
    check(f, np.zeros(5))


def test_device_arrays_give_the_host_pattern():
    """On the device double (CuPy's rules): x, a constant index array and a mask live on the device; the
    constants are copied to the host explicitly for the rules that read them."""
    import _device
    xp = _device.xp
    order, mask = np.arange(25)[::-1], (np.arange(25) % 2).astype(float)

    def f(x, order, mask):
        return stencil(5)(x)[order] * mask

    host = tg.jacobian_sparsity(f, np.zeros(25), order, mask)
    device = tg.jacobian_sparsity(f, xp.zeros(25), xp.asarray(order), xp.asarray(mask))
    rows_kept = tg.jacobian_sparsity(stencil(5), np.zeros(25)).toarray()[order][mask != 0]  # zero rows dropped
    assert (host != device).nnz == 0 and host.nnz == np.count_nonzero(rows_kept)
    check(lambda x: f(x, order, mask), np.zeros(25))


def test_docstring_example_runs():
    import doctest

    import tapegrad._sparsity
    result = doctest.testmod(tapegrad._sparsity)
    assert result.attempted >= 1 and result.failed == 0


def test_structural_rule_whose_impl_refuses_integers_is_reported():
    def floats_only(x):
        if x.dtype.kind != "f":
            raise TypeError("floats only")
        return x[::-1].copy()
    toy = _toy("floats_only", floats_only)
    extend.deflinear(toy)
    extend.def_dependency(toy, "structural")
    with pytest.warns(UserWarning, match=r"floats_only \(its impl failed on index arrays: floats only\)"):
        got = tg.jacobian_sparsity(lambda x: extend.bind(toy, x), np.zeros(3))
    assert got.toarray().all()
