"""tapegrad.sparse: values against SciPy, derivatives against finite differences and the dense route,
vmap, jit's cache per pattern, the pytree, and the errors."""
import numpy as np
import pytest
import scipy.sparse as sp

import tapegrad as tg
import tapegrad.numpy as tnp
import tapegrad.sparse as ts
from tapegrad.testing import check_grads

RTOL = 1e-9  # float64 throughout: the dense route and SciPy agree to rounding


def _random(m=5, n=4, density=0.5, fmt="csr", seed=0):
    rng = np.random.default_rng(seed)
    S = sp.random_array((m, n), density=density, format=fmt, random_state=rng)
    return S, ts.asarray(S)


def _duplicated_coo():
    """A COO array with a repeated position and unsorted entries, as SciPy allows."""
    row, col = np.array([2, 0, 1, 2, 0]), np.array([1, 3, 0, 1, 0])
    data = np.array([1.5, -2.0, 0.5, 3.0, 4.0])
    return sp.coo_array((data, (row, col)), shape=(3, 4)), ts.coo_array((data, (row, col)), shape=(3, 4))


FORMATS = ["csr", "csc", "coo"]

# ---- values against SciPy -----------------------------------------------------------------------
# (name, f(A) on a tapegrad.sparse array, the same on SciPy's, both dense results)
rng0 = np.random.default_rng(1)
X1, X2, Y1, Y2 = rng0.normal(size=4), rng0.normal(size=(4, 3)), rng0.normal(size=5), rng0.normal(size=(2, 5))
ROW, COL, FULL = rng0.normal(size=4), rng0.normal(size=(5, 1)), rng0.normal(size=(5, 4))
VALUE_CASES = [
    ("matvec", lambda A: A @ X1, lambda S: S @ X1),
    ("matmat", lambda A: A @ X2, lambda S: S @ X2),
    ("vecmat", lambda A: Y1 @ A, lambda S: Y1 @ S),
    ("matmat_left", lambda A: Y2 @ A, lambda S: Y2 @ S),
    ("transpose", lambda A: A.T.toarray(), lambda S: S.T.toarray()),
    ("scale", lambda A: (2.5 * A).toarray(), lambda S: (2.5 * S).toarray()),
    ("divide", lambda A: (A / 4.0).toarray(), lambda S: (S / 4.0).toarray()),
    ("negate", lambda A: (-A).toarray(), lambda S: (-S).toarray()),
    ("multiply_row", lambda A: A.multiply(ROW).toarray(), lambda S: S.multiply(ROW).toarray()),
    ("multiply_col", lambda A: A.multiply(COL).toarray(), lambda S: S.multiply(COL).toarray()),
    ("multiply_full", lambda A: A.multiply(FULL).toarray(), lambda S: S.multiply(FULL).toarray()),
    ("sum", lambda A: A.sum(), lambda S: S.sum()),
    ("sum0", lambda A: A.sum(axis=0), lambda S: S.sum(axis=0)),
    ("sum1", lambda A: A.sum(axis=1), lambda S: S.sum(axis=1)),
    ("diagonal", lambda A: A.diagonal(), lambda S: S.diagonal()),
    ("diagonal_up", lambda A: A.diagonal(1), lambda S: S.diagonal(1)),
    ("diagonal_down", lambda A: A.diagonal(-2), lambda S: S.diagonal(-2)),
    ("tocsr", lambda A: A.tocsr().toarray(), lambda S: S.tocsr().toarray()),
    ("tocsc", lambda A: A.tocsc().toarray(), lambda S: S.tocsc().toarray()),
    ("tocoo", lambda A: A.tocoo().toarray(), lambda S: S.tocoo().toarray()),
    ("add_dense", lambda A: A + FULL, lambda S: S + FULL),
    ("sub_dense", lambda A: A - FULL, lambda S: S - FULL),
]


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("name,ours,scipys", VALUE_CASES, ids=[c[0] for c in VALUE_CASES])
def test_values_against_scipy(fmt, name, ours, scipys):
    S, A = _random(fmt=fmt)
    assert A.format == fmt and A.shape == S.shape and A.nnz == S.nnz and A.dtype == S.dtype
    np.testing.assert_allclose(np.asarray(ours(A)), np.asarray(scipys(S)), rtol=RTOL, atol=1e-14)


def test_duplicates_add_up_as_scipy():
    S, A = _duplicated_coo()
    np.testing.assert_allclose(A.toarray(), S.toarray(), rtol=RTOL)
    np.testing.assert_allclose(A @ X1, S @ X1, rtol=RTOL)
    C = A.tocsr()
    assert C.nnz == S.tocsr().nnz == 4
    np.testing.assert_array_equal(C.indptr, S.tocsr().indptr)
    np.testing.assert_array_equal(C.indices, S.tocsr().indices)
    np.testing.assert_allclose(C.data, S.tocsr().data, rtol=RTOL)
    np.testing.assert_allclose(A.tocsc().data, S.tocsc().data, rtol=RTOL)


@pytest.mark.parametrize("fa,fb", [("csr", "csr"), ("csr", "coo"), ("coo", "csc")])
def test_addition_is_the_union_of_patterns(fa, fb):
    Sa, A = _random(fmt=fa, seed=2)
    Sb, B = _random(fmt=fb, seed=3)
    total = A + B
    assert total.format == "csr"
    expected = (Sa + Sb).tocsr()
    expected.sum_duplicates()
    union = {*zip(*Sa.tocoo().coords), *zip(*Sb.tocoo().coords)}
    assert total.nnz == len(union)
    np.testing.assert_allclose(total.toarray(), expected.toarray(), rtol=RTOL)
    np.testing.assert_allclose((A - Sb).toarray(), (Sa - Sb).toarray(), rtol=RTOL)


def test_constructors_match_scipy():
    S, A = _random(fmt="csr")
    B = ts.csr_array((S.data, S.indices, S.indptr), shape=S.shape)
    assert B.pattern == A.pattern
    C = sp.csc_array(S)
    np.testing.assert_allclose(ts.csc_array((C.data, C.indices, C.indptr), shape=C.shape).toarray(), S.toarray())
    np.testing.assert_allclose(ts.csr_array(sp.csr_matrix(S)).toarray(), S.toarray())  # a *_matrix too
    np.testing.assert_allclose(ts.csr_array(S.toarray()).toarray(), S.toarray())
    np.testing.assert_allclose(ts.coo_array(A).toarray(), S.toarray())
    coo = S.tocoo()
    built = ts.csr_array((coo.data, (coo.row, coo.col)), shape=S.shape)
    assert built.pattern == A.pattern
    inferred = ts.coo_array((coo.data, (coo.row, coo.col)))
    assert inferred.shape == (int(coo.row.max()) + 1, int(coo.col.max()) + 1)
    assert isinstance(ts.asarray(sp.lil_array(S)), ts.csr_array)
    np.testing.assert_allclose(A.to_scipy().toarray(), S.toarray())


@pytest.mark.parametrize("fmt", FORMATS)
def test_eye_diags_kron_match_scipy(fmt):
    np.testing.assert_allclose(ts.eye(4, 6, k=1, format=fmt).toarray(), sp.eye_array(4, 6, k=1).toarray())
    np.testing.assert_allclose(ts.eye(3).toarray(), np.eye(3))
    diagonals, offsets = [np.arange(1.0, 5.0), np.arange(1.0, 4.0), np.arange(1.0, 3.0)], [0, 1, -2]
    D = ts.diags(diagonals, offsets, format=fmt)
    assert D.format == fmt
    np.testing.assert_allclose(D.toarray(), sp.diags_array(diagonals, offsets=offsets).toarray())
    np.testing.assert_allclose(ts.diags(2.0, 1, shape=(3, 3)).toarray(),
                               sp.diags_array([2.0], offsets=1, shape=(3, 3)).toarray())
    Sa, A = _random(3, 2, seed=4)
    Sb, B = _random(2, 3, fmt="coo", seed=5)
    K = ts.kron(A, Sb, format=fmt)
    np.testing.assert_allclose(K.toarray(), sp.kron(Sa, Sb).toarray(), rtol=RTOL)
    assert K.nnz == Sa.nnz * Sb.nnz


# ---- derivatives ----------------------------------------------------------------------------------
def _from_data(S, fmt):
    """``d -> the tapegrad.sparse array of S's pattern holding d`` (the data traced)."""
    A = ts.asarray(S.asformat(fmt))
    return lambda d: tg.tree.tree_unflatten(tg.tree.tree_structure(A), [d]), np.asarray(A.data)


def _dense_route(pattern):
    """``d -> the dense matrix holding d at pattern's positions``, as a product with a constant 0/1
    matrix: independent of tapegrad.sparse, so the dense route checks it."""
    m, n = pattern.shape
    place = np.zeros((m * n, pattern.nnz))
    place[pattern.row * n + pattern.col, np.arange(pattern.nnz)] = 1.0  # duplicates would add: none here
    return lambda d: tnp.reshape(place @ d, (m, n))


def _weighted(g, shape):
    """``sum(g(...) * w)`` with fixed weights w of g's result shape, so every output entry counts."""
    w = np.cos(np.arange(int(np.prod(shape)))).reshape(shape)
    return lambda *args: tnp.sum(g(*args) * w)


# functions of (sparse A, dense x) whose derivatives are checked, each with its dense twin on A.toarray()
DERIV_CASES = [
    ("matvec", lambda A, x: tnp.sin(A @ x), lambda M, x: tnp.sin(M @ x)),
    ("matmat", lambda A, x: tnp.tanh(A @ tnp.outer(x, x[:3])), lambda M, x: tnp.tanh(M @ tnp.outer(x, x[:3]))),
    ("vecmat", lambda A, x: tnp.sin(Y2 @ A) * x, lambda M, x: tnp.sin(Y2 @ M) * x),
    ("vecmat_traced", lambda A, x: tnp.sin((A.T @ tnp.cos(A @ x)[:, None]).T),
     lambda M, x: tnp.sin(tnp.cos(M @ x)[None, :] @ M)),
    ("transpose", lambda A, x: (A.T @ (A @ x)) ** 2, lambda M, x: (M.T @ (M @ x)) ** 2),
    ("multiply", lambda A, x: A.multiply(tnp.exp(x)).multiply(x).toarray() ** 2,
     lambda M, x: (M * tnp.exp(x) * x) ** 2),
    ("scale_sum", lambda A, x: (A * x[0]).sum(axis=0) ** 3, lambda M, x: (M * x[0]).sum(axis=0) ** 3),
    ("sum1_diag", lambda A, x: A.sum(axis=1) * A.diagonal()[:1] * x[1],
     lambda M, x: M.sum(axis=1) * tnp.diagonal(M)[:1] * x[1]),
    ("add", lambda A, x: tnp.sin((A + A.multiply(x) + A.tocoo()).toarray()),
     lambda M, x: tnp.sin(M + M * x + M)),
    ("convert", lambda A, x: tnp.cos(A.tocsc().tocoo().tocsr() @ x) * A.sum(), lambda M, x: tnp.cos(M @ x) * M.sum()),
]


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("name,f,dense", DERIV_CASES, ids=[c[0] for c in DERIV_CASES])
def test_derivatives_against_finite_differences_and_dense(fmt, name, f, dense):
    S, _ = _random(seed=6)
    build, data = _from_data(S, fmt)
    x = np.random.default_rng(7).normal(size=4)
    fn = lambda d, x: f(build(d), x)  # noqa: E731
    check_grads(fn, (data, x), order=2, modes=("fwd", "rev"))
    # the dense route: the same function of the dense matrix, data scattered into it
    to_dense = _dense_route(build(data).pattern)
    dense_fn = lambda d, x: dense(to_dense(d), x)  # noqa: E731
    loss = lambda g: _weighted(g, np.shape(fn(data, x)))  # noqa: E731
    np.testing.assert_allclose(loss(fn)(data, x), loss(dense_fn)(data, x), rtol=RTOL)
    for got, want in zip(tg.grad(loss(fn), grad_position=(0, 1))(data, x),
                         tg.grad(loss(dense_fn), grad_position=(0, 1))(data, x)):
        np.testing.assert_allclose(got, want, rtol=RTOL, atol=1e-13)
    (_, t_ours), (_, t_dense) = (tg.jvp(g, (data, x), (np.cos(data), np.sin(x))) for g in (fn, dense_fn))
    np.testing.assert_allclose(t_ours, t_dense, rtol=RTOL, atol=1e-13)


def test_constructors_are_differentiable():
    """diags and kron of traced values, and csr_array built from (data, indices, indptr) inside grad."""
    d = np.array([1.0, 2.0, -0.5, 3.0])
    u = np.array([0.3, -1.2, 0.7])
    x = np.linspace(-1.0, 1.0, 4)

    def operator(d, u):
        return ts.diags([d, u, u * d[1:]], [0, 1, -1]) + ts.kron(ts.diags(d[:2]), ts.eye(2))

    check_grads(lambda d, u: operator(d, u) @ x, (d, u), order=2)
    S, _ = _random(seed=8)
    check_grads(lambda v: tnp.sin(ts.csr_array((v, S.indices, S.indptr), shape=S.shape) @ x), (S.data,), order=2)
    check_grads(lambda v: tnp.sin(ts.csr_array((v, (S.tocoo().row, S.tocoo().col)), shape=S.shape) @ x),
                (S.tocoo().data,), order=2)


def test_gradient_wrt_a_sparse_argument_is_sparse_of_its_pattern():
    S, A = _random(seed=9)
    x = np.random.default_rng(10).normal(size=4)
    for B in (A, A.tocsc(), A.tocoo()):
        g = tg.grad(lambda B: tnp.sum(tnp.sin(B @ x)))(B)
        assert type(g) is type(B) and g.pattern == B.pattern
        # d/dB_ij sum sin(Bx) = cos(Bx)_i x_j at the stored positions
        expected = np.cos(S @ x)[B.pattern.row] * x[B.pattern.col]
        np.testing.assert_allclose(g.data, expected, rtol=RTOL)
    # jvp with a sparse tangent of the same pattern
    _, t = tg.jvp(lambda B: B @ x, (A,), (A * 2.0,))
    np.testing.assert_allclose(t, 2.0 * (S @ x), rtol=RTOL)


def test_jacobians_wrt_a_sparse_argument_stack_data():
    """jacrev and jacfwd of a vector function of A: a sparse array of A's pattern whose data holds the
    output's axes before nnz: d(Ax)_i / d data_e = x[col_e] where row_e == i."""
    S, A = _random(seed=20)
    x = np.arange(1.0, 5.0)
    p = A.pattern
    expected = (p.row[None, :] == np.arange(5)[:, None]) * x[p.col][None, :]
    for jac in (tg.jacrev, tg.jacfwd):
        J = jac(lambda B: B @ x)(A)
        assert type(J) is ts.csr_array and J.pattern == p
        np.testing.assert_allclose(J.data, expected, rtol=RTOL)
    # hessian nests the pytree: d2/d data_e d data_f sum sin(Ax) = -sin(Ax)_i x_ce x_cf on one row i
    H = tg.hessian(lambda B: tnp.sum(tnp.sin(B @ x)))(A)
    assert type(H) is ts.csr_array and type(H.data) is ts.csr_array and H.data.pattern == p
    same_row = p.row[:, None] == p.row[None, :]
    hess = -np.sin(S @ x)[p.row][:, None] * x[p.col][:, None] * x[p.col][None, :] * same_row
    np.testing.assert_allclose(H.data.data, hess, rtol=RTOL, atol=1e-15)


def test_a_parameter_holds_the_values_of_a_trainable_operator():
    S, A = _random(seed=21)
    values = tg.Parameter(A.data.copy(), name="values")
    x = np.arange(4.0)
    loss = lambda x: tnp.sum(tnp.sin(ts.csr_array((values, A.indices, A.indptr), shape=A.shape) @ x))  # noqa: E731
    g = tg.grad(loss, grad_position=None, weights=values)(x)
    np.testing.assert_allclose(g, np.cos(S @ x)[A.pattern.row] * x[A.indices], rtol=RTOL)


def test_third_order_by_two_routes():
    """d^3/dt^3 of sum(sin(A(t) x)) with A(t)'s data = d + t v: jvp of jvp of grad against jacfwd^3 of
    the dense route."""
    S, _ = _random(seed=11)
    build, data = _from_data(S, "csr")
    x = np.random.default_rng(12).normal(size=4)
    v = np.cos(np.arange(data.size))
    to_dense = _dense_route(build(data).pattern)

    def along(t, dense):
        d = data + t * v
        M = to_dense(d) if dense else build(d)
        return tnp.sum(tnp.sin(M @ x))

    sparse3 = tg.grad(tg.grad(tg.grad(lambda t: along(t, False))))(0.3)
    dense3 = tg.jacfwd(tg.jacfwd(tg.jacfwd(lambda t: along(t, True))))(0.3)
    np.testing.assert_allclose(sparse3, dense3, rtol=RTOL)
    # and the closed form: -sum(cos(M x) (V x)^3), V the direction's matrix
    M = S.toarray() + 0.3 * sp.csr_array((v, S.indices, S.indptr), shape=S.shape).toarray()
    Vx = sp.csr_array((v, S.indices, S.indptr), shape=S.shape) @ x
    np.testing.assert_allclose(sparse3, -np.sum(np.cos(M @ x) * Vx ** 3), rtol=RTOL)


# ---- vmap and jit --------------------------------------------------------------------------------
def test_vmap_over_batched_data_and_batched_right_hand_sides():
    S, A = _random(seed=13)
    rng = np.random.default_rng(14)
    D = rng.normal(size=(3, A.nnz))
    x = rng.normal(size=4)
    got = tg.vmap(lambda d: ts.csr_array((d, A.indices, A.indptr), shape=A.shape) @ x)(D)
    for i in range(3):
        np.testing.assert_allclose(got[i], sp.csr_array((D[i], S.indices, S.indptr), shape=S.shape) @ x, rtol=RTOL)
    # a batch of sparse arrays of one pattern, as a pytree with batched data
    batch = tg.tree.tree_unflatten(tg.tree.tree_structure(A), [D])
    sums = np.stack([sp.csr_array((D[i], S.indices, S.indptr), shape=S.shape).sum(axis=0) for i in range(3)])
    np.testing.assert_allclose(tg.vmap(lambda B: B.sum(axis=0))(batch), sums, rtol=RTOL)
    Xs = rng.normal(size=(6, 4))
    np.testing.assert_allclose(tg.vmap(lambda x: A @ x)(Xs), (S @ Xs.T).T, rtol=RTOL)
    Ys = rng.normal(size=(6, 5))
    np.testing.assert_allclose(tg.vmap(lambda y: A.T @ y)(Ys), Ys @ S, rtol=RTOL)
    # per-example gradients with respect to the sparse argument: vmap of grad
    grads = tg.vmap(tg.grad(lambda x: tnp.sum(tnp.sin(A @ x))))(Xs)
    np.testing.assert_allclose(grads, np.cos(Xs @ S.T) @ S, rtol=RTOL)
    gA = tg.vmap(tg.grad(lambda B, x: tnp.sum(tnp.sin(B @ x))), in_axes=(None, 0))(A, Xs)
    assert gA.pattern == A.pattern and gA.data.shape == (6, A.nnz)
    for i in range(6):
        np.testing.assert_allclose(gA.data[i], np.cos(S @ Xs[i])[A.pattern.row] * Xs[i][A.pattern.col], rtol=RTOL)


def test_jit_stages_once_per_pattern():
    stagings = []

    def f(A, x):
        stagings.append(A.pattern)
        return tnp.sum(tnp.sin(A @ x))

    jf = tg.jit(f)
    S, A = _random(seed=15)
    x = np.linspace(0.0, 1.0, 4)
    np.testing.assert_allclose(jf(A, x), np.sum(np.sin(S @ x)), rtol=RTOL)
    np.testing.assert_allclose(jf(A * 3.0, x), np.sum(np.sin(3.0 * (S @ x))), rtol=RTOL)  # new data, same pattern
    assert len(stagings) == 1
    S2, A2 = _random(seed=16)
    assert A2.pattern != A.pattern
    np.testing.assert_allclose(jf(A2, x), np.sum(np.sin(S2 @ x)), rtol=RTOL)
    assert len(stagings) == 2  # a second pattern stages again
    g = tg.jit(tg.grad(f))(A, x)
    assert g.pattern == A.pattern
    np.testing.assert_allclose(g.data, tg.grad(f)(A, x).data, rtol=RTOL)
    out = tg.jit(lambda A: A.T * 2.0)(A)  # a sparse result comes back as one
    assert isinstance(out, ts.csc_array)
    np.testing.assert_allclose(out.toarray(), 2.0 * S.T.toarray(), rtol=RTOL)


def test_numpy_operands_defer_to_the_sparse_array():
    S, A = _random(seed=17)
    y = np.arange(5.0)
    np.testing.assert_allclose(y @ A, y @ S, rtol=RTOL)
    np.testing.assert_allclose((np.float64(2.0) * A).toarray(), 2.0 * S.toarray(), rtol=RTOL)


def test_traced_value_on_the_left_of_a_sparse_array():
    """y @ A, s * A, y * A and y + A with y traced: the tracer's operators defer to the sparse array's
    reflected methods (NEP 13), in grad (both routes), vmap and jit."""
    S, A = _random(seed=19)
    y, Y, s = np.arange(5.0), np.arange(10.0).reshape(2, 5), 1.5
    np.testing.assert_allclose(tg.grad(lambda y: tnp.sum(y @ A))(y), S.sum(axis=1), rtol=RTOL)
    check_grads(lambda y: tnp.sin(y @ A), (y,), order=2, modes=("fwd", "rev"))
    check_grads(lambda Y: tnp.sin(Y @ A), (Y,), order=2, modes=("fwd", "rev"))
    np.testing.assert_allclose(tg.vmap(lambda y: y @ A)(Y), Y @ S, rtol=RTOL)
    np.testing.assert_allclose(tg.jit(lambda y: y @ A)(y), y @ S, rtol=RTOL)
    # a traced scalar times A: a sparse array of A's pattern, d/ds the sum of A's entries
    scaled = tg.grad(lambda s: (s * A).sum())(s)
    np.testing.assert_allclose(scaled, S.sum(), rtol=RTOL)
    # a traced row times A (multiply, broadcast over rows): d/dy_j the sum of column j
    row = np.arange(1.0, 5.0)
    np.testing.assert_allclose(tg.grad(lambda r: (r * A).sum())(row), S.sum(axis=0), rtol=RTOL)
    check_grads(lambda r: tnp.sin((r * A).toarray()), (row,), order=2, modes=("fwd", "rev"))
    dense = np.ones((5, 4))
    np.testing.assert_allclose(tg.grad(lambda d: tnp.sum((d + A) ** 2))(dense), 2 * (dense + S.toarray()),
                               rtol=RTOL)


# ---- errors ----------------------------------------------------------------------------------------
def test_errors_name_the_fix():
    S, A = _random(seed=18)
    with pytest.raises(ValueError, match="x must be 1-D or 2-D with 4 rows"):
        A @ np.ones(5)
    with pytest.raises(ValueError, match="with 5 columns"):
        np.ones(4) @ A
    with pytest.raises(ValueError, match="shapes .* differ"):
        A + ts.eye(3)
    with pytest.raises(ValueError, match="does not broadcast"):
        A.multiply(np.ones(3))
    fix = r"unsorted or repeated.*coo_array\(\(data, \(row, col\)\), shape\)\.tocsr\(\)"
    with pytest.raises(ValueError, match=fix):
        ts.csr_array((np.ones(2), np.array([2, 1]), np.array([0, 2, 2])), shape=(2, 3))
    with pytest.raises(ValueError, match="unsorted or repeated"):
        ts.csr_array((np.ones(2), np.array([1, 1]), np.array([0, 2, 2])), shape=(2, 3))
    with pytest.raises(ValueError, match=r"outside \[0, 3\)"):
        ts.csr_array((np.ones(1), np.array([3]), np.array([0, 1, 1])), shape=(2, 3))
    with pytest.raises(ValueError, match="indptr has 2 entries; a shape of .* needs 3"):
        ts.csr_array((np.ones(1), np.array([0]), np.array([0, 1])), shape=(2, 3))
    with pytest.raises(ValueError, match="never decrease"):
        ts.csr_array((np.ones(1), np.array([0]), np.array([0, 2, 1])), shape=(2, 3))
    with pytest.raises(ValueError, match=r"data has shape \(2,\), the pattern stores 1"):
        ts.csr_array((np.ones(2), np.array([0]), np.array([0, 1, 1])), shape=(2, 3))
    with pytest.raises(ValueError, match="row has 2 entries and col 1"):
        ts.coo_array((np.ones(2), ([0, 1], [0])), shape=(2, 2))
    with pytest.raises(ValueError, match=r"a col index is outside \[0, 2\)"):
        ts.coo_array((np.ones(1), ([0], [2])), shape=(2, 2))
    with pytest.raises(ValueError, match="shape must be a pair"):
        ts.csr_array((np.ones(1), np.array([0]), np.array([0, 1])), shape=3)
    with pytest.raises(NotImplementedError, match=r"A.toarray\(\) \+ s"):
        A + 1.0
    with pytest.raises(TypeError, match="sparse @ sparse"):
        A @ A.T
    with pytest.raises(TypeError, match="traced dense array has no static pattern"):
        tg.grad(lambda x: ts.asarray(x).sum())(np.ones((2, 2)))
    with pytest.raises(ValueError, match="diagonal at offset 1 of an array of shape"):
        ts.diags([np.ones(3), np.ones(3)], [0, 1])
    with pytest.raises(ValueError, match="repeat"):
        ts.diags([np.ones(3), np.ones(3)], [0, 0])
    with pytest.raises(ValueError, match="format must be"):
        ts.eye(3, format="dia")


def test_scipy_input_is_not_modified_and_made_canonical():
    # a SciPy CSR with unsorted indices and a duplicate: asarray sums and sorts a copy
    S = sp.csr_array((np.array([1.0, 2.0, 3.0]), np.array([2, 0, 2]), np.array([0, 3, 3])), shape=(2, 3))
    A = ts.asarray(S)
    np.testing.assert_array_equal(S.indices, [2, 0, 2])
    np.testing.assert_array_equal(A.indices, [0, 2])
    np.testing.assert_allclose(A.toarray(), S.toarray())


def test_the_guide_runs():
    """docs/sparse.md's code blocks, run in order: their asserts are the page's claims."""
    import pathlib
    import re
    page = (pathlib.Path(__file__).resolve().parent.parent / "docs" / "sparse.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", page, re.S)
    assert len(blocks) == 3
    exec(compile("\n".join(blocks), "sparse.md", "exec"), {"__name__": "sparse_guide"})
