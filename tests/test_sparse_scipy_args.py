"""SciPy's sparse classes as arguments and results of the transforms: the function sees a
tapegrad.sparse array, a gradient comes back of the argument's SciPy class and pattern, jit stages once
per pattern, non-canonical and unsupported formats are refused with the fix, and the classes are
registered when scipy.sparse is imported, never by ``import tapegrad``."""
import subprocess
import sys

import numpy as np
import pytest
import scipy.sparse as sp

import tapegrad as tg
import tapegrad.numpy as tnp
import tapegrad.sparse as ts
from tapegrad.testing import check_grads

RTOL = 1e-9
CLASSES = [sp.csr_array, sp.csc_array, sp.coo_array, sp.csr_matrix, sp.csc_matrix, sp.coo_matrix]
X = np.random.default_rng(1).normal(size=4)


def _scipy(cls, seed=0):
    S = sp.random_array((5, 4), density=0.5, format="csr", random_state=np.random.default_rng(seed))
    return cls(S)


def _positions(S):
    """The (row, col) of each stored entry in ``S.data``'s order."""
    C = S.tocoo() if S.format != "coo" else S
    if S.format == "csc":  # tocoo of a CSC keeps its column-major order
        C = sp.coo_array((S.data, (S.indices, np.repeat(np.arange(S.shape[1]), np.diff(S.indptr)))), S.shape)
    return np.asarray(C.row), np.asarray(C.col)


def _loss(A):
    return tnp.sum(tnp.sin(A @ X)) + A.multiply(A.toarray()).sum()


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_gradient_is_of_the_argument_class_and_pattern(cls):
    S = _scipy(cls)
    seen = []
    g = tg.grad(lambda A: seen.append(type(A)) or _loss(A))(S)
    assert seen == [getattr(ts, f"{S.format}_array")]  # the function computes on a tapegrad.sparse array
    assert type(g) is cls and g.shape == S.shape
    assert np.array_equal(_positions(g), _positions(S))
    row, col = _positions(S)
    dense = S.toarray()
    expected = np.cos(dense @ X)[row] * X[col] + 2 * S.data  # d/d data of sum sin(Ax) + sum A*A
    np.testing.assert_allclose(g.data, expected, rtol=RTOL)
    # value_and_grad, and jvp with a SciPy tangent of the same pattern
    value, g2 = tg.value_and_grad(_loss)(S)
    np.testing.assert_allclose(value, np.sum(np.sin(dense @ X)) + np.sum(dense ** 2), rtol=RTOL)
    np.testing.assert_allclose(g2.data, g.data, rtol=RTOL)
    out, tangent = tg.jvp(lambda A: A @ X, (S,), (S * 2.0,))
    np.testing.assert_allclose(tangent, 2.0 * (dense @ X), rtol=RTOL)


@pytest.mark.parametrize("cls", [sp.csr_matrix, sp.coo_array], ids=lambda c: c.__name__)
def test_derivatives_to_second_order_and_the_dense_route(cls):
    S = _scipy(cls, seed=2)
    check_grads(lambda A: tnp.sin(A @ X) * A.sum(), (S,), order=2, modes=("fwd", "rev"))
    row, col = _positions(S)

    one_hot = np.zeros((S.nnz,) + S.shape)
    one_hot[np.arange(S.nnz), row, col] = 1.0

    def dense_route(data):
        return tnp.sum(tnp.sin(tnp.tensordot(data, one_hot, 1) @ X))

    g = tg.grad(lambda A: tnp.sum(tnp.sin(A @ X)))(S)
    np.testing.assert_allclose(g.data, tg.grad(dense_route)(S.data), rtol=RTOL)


def test_duplicated_coo_entries_each_get_their_position_derivative():
    data, row, col = np.array([1.0, 2.0, 3.0]), np.array([1, 0, 1]), np.array([2, 0, 2])
    S = sp.coo_array((data, (row, col)), shape=(2, 3))
    x = np.array([0.5, -1.0, 2.0])
    g = tg.grad(lambda A: tnp.sum((A @ x) ** 2))(S)
    assert type(g) is sp.coo_array and np.array_equal(g.row, row) and np.array_equal(g.col, col)
    y = S.toarray() @ x
    np.testing.assert_allclose(g.data, 2 * y[row] * x[col], rtol=RTOL)


def test_vjp_vmap_and_tree_functions():
    S = _scipy(sp.csr_array, seed=3)
    out, pullback = tg.vjp(lambda A: A @ X, S)
    (ct,) = pullback(np.ones(5))
    assert type(ct) is sp.csr_array
    np.testing.assert_allclose(ct.data, X[S.indices], rtol=RTOL)
    # a per-example gradient: batched data has no SciPy class, so it comes back as tapegrad.sparse's
    Xs = np.random.default_rng(4).normal(size=(3, 4))
    gs = tg.vmap(tg.grad(lambda A, x: tnp.sum(tnp.sin(A @ x))), in_axes=(None, 0))(S, Xs)
    assert type(gs) is ts.csr_array and gs.data.shape == (3, S.nnz)
    for i in range(3):
        np.testing.assert_allclose(gs.data[i], np.cos(S @ Xs[i])[_positions(S)[0]] * Xs[i][S.indices], rtol=RTOL)
    # an unbatched SciPy argument stays SciPy's inside vmap: asarray makes it computable with traced values
    got = tg.vmap(lambda A, x: ts.asarray(A) @ x, in_axes=(None, 0))(S, Xs)
    np.testing.assert_allclose(got, Xs @ S.T, rtol=RTOL)
    assert tg.tree.tree_leaves(S)[0] is S.data
    doubled = tg.tree.tree_map(lambda d: 2 * d, S)
    assert type(doubled) is sp.csr_array and np.array_equal(doubled.indices, S.indices)
    assert doubled.indices is not S.indices  # its own indices: SciPy's in-place methods may write them


def test_jit_stages_once_per_pattern_and_returns_scipy_classes():
    stagings = []

    def f(A):
        stagings.append(type(A))
        return A.T * 2.0, tnp.sum(A @ X)

    jf = tg.jit(f)
    S = _scipy(sp.csr_matrix, seed=5)
    for scale in (1.0, 3.0):
        T, s = jf(S * scale)
        np.testing.assert_allclose(s, scale * np.sum(S @ X), rtol=RTOL)
        assert isinstance(T, ts.csc_array)  # built inside: tapegrad's class
        np.testing.assert_allclose(T.toarray(), 2 * scale * S.T.toarray(), rtol=RTOL)
    assert stagings == [ts.csr_array]
    jf(_scipy(sp.csr_matrix, seed=6))
    assert len(stagings) == 2  # a new pattern stages again
    passed = tg.jit(lambda A: A)(S)  # what the function returns is what it saw: tapegrad's class
    assert type(passed) is ts.csr_array and np.array_equal(passed.toarray(), S.toarray())
    loss = lambda A: tnp.sum(tnp.sin(A @ X))  # noqa: E731
    outer = tg.grad(tg.jit(loss))(S)  # grad outermost sees the SciPy argument: SciPy's class
    inner = tg.jit(tg.grad(loss))(S)  # grad under jit sees tapegrad's array: tapegrad's class
    assert type(outer) is sp.csr_matrix and type(inner) is ts.csr_array
    np.testing.assert_allclose(outer.data, inner.data, rtol=RTOL)


def test_refusals_name_the_fix():
    unsorted = sp.csr_array((np.ones(2), np.array([1, 0]), np.array([0, 2])), shape=(1, 2))
    with pytest.raises(ValueError, match=r"canonical format.*sum_duplicates\(\)"):
        tg.grad(lambda A: A.sum())(unsorted)
    with pytest.raises(TypeError, match=r"dia_array cannot enter.*tocsr\(\)"):
        tg.grad(lambda A: A.sum())(sp.dia_array(np.eye(3)))
    with pytest.raises(tg.errors.TracerArrayConversionError, match=r"tapegrad.sparse.asarray\(A\) @ x"):
        tg.grad(lambda A, x: tnp.sum(A @ x), grad_position=1)(_scipy(sp.csr_array), X)


def _run(code):
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout


def test_registration_is_lazy_and_follows_the_import_of_scipy_sparse():
    assert _run("import sys, tapegrad; print('scipy' in sys.modules)").strip() == "False"
    assert _run("import sys, tapegrad.sparse; print('scipy' in sys.modules)").strip() == "False"
    # tapegrad.sparse first, scipy.sparse afterwards: registered when scipy.sparse finishes importing
    code = ("import numpy as np, tapegrad as tg, tapegrad.sparse\nimport scipy.sparse as sp\n"
            "g = tg.grad(lambda A: (A @ np.ones(2)).sum())(sp.eye_array(2, format='csr'))\n"
            "print(type(g).__name__, g.data.tolist())")
    assert _run(code).split() == ["csr_array", "[1.0,", "1.0]"]
