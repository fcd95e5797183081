"""Forward mode for the array primitives (reductions, shapes, indexing, products) and ``cumprod``:
a table checked by check_grads to order 2 in both modes, values against NumPy, and the numerical care
cases (products with zeros, ties of max/min) through the public ``tg.grad`` and ``tg.jvp``."""
from __future__ import annotations

import numpy as np
import pytest

import tapegrad as tg
import tapegrad.numpy as tnp
from _tol import assert_close
from tapegrad.numpy._indexing import IndexUpdateHelper as _at  # .at on a constant array
from tapegrad.testing import check_grads

DTYPES = [np.float64, np.float32]
BOTH = ("fwd", "rev")


def _rand(shape, dtype, seed=0, lo=-2.0, hi=2.0):
    return np.asarray(np.random.default_rng(seed).uniform(lo, hi, shape), dtype=dtype)


# ---- the table: one case per primitive (and per spelling that reaches it differently) ----------
# (name, fn, reference or None for "checked elsewhere", input shapes)
CASES = [
    ("sum", lambda x: tnp.sum(x, axis=1), lambda x: np.sum(x, axis=1), [(3, 4)]),
    ("sum-keepdims", lambda x: tnp.sum(x, axis=0, keepdims=True), lambda x: np.sum(x, 0, keepdims=True), [(3, 4)]),
    ("amax", lambda x: tnp.amax(x, axis=0), lambda x: np.amax(x, axis=0), [(3, 4)]),
    ("amin-all", tnp.amin, np.amin, [(3, 4)]),
    ("prod", lambda x: tnp.prod(x, axis=-1), lambda x: np.prod(x, axis=-1), [(3, 5)]),
    ("prod-keepdims", lambda x: tnp.prod(x, axis=(0, 2), keepdims=True),
     lambda x: np.prod(x, axis=(0, 2), keepdims=True), [(2, 3, 3)]),
    ("cumsum", lambda x: tnp.cumsum(x, axis=0), lambda x: np.cumsum(x, axis=0), [(3, 4)]),
    ("cumprod", lambda x: tnp.cumprod(x, axis=1), lambda x: np.cumprod(x, axis=1), [(3, 5)]),
    ("cumprod-flat", tnp.cumprod, np.cumprod, [(2, 3)]),
    ("cumprod-axis0", lambda x: tnp.cumprod(x, axis=0), lambda x: np.cumprod(x, axis=0), [(7, 2)]),
    ("cumprod-middle", lambda x: tnp.cumprod(x, axis=-2), lambda x: np.cumprod(x, axis=-2), [(2, 4, 3)]),
    ("cumprod-length1", lambda x: tnp.cumprod(x, axis=1), lambda x: np.cumprod(x, axis=1), [(3, 1)]),
    ("reshape", lambda x: tnp.reshape(x, (2, 6)), lambda x: np.reshape(x, (2, 6)), [(3, 4)]),
    ("transpose", lambda x: tnp.transpose(x, (1, 2, 0)), lambda x: np.transpose(x, (1, 2, 0)), [(2, 3, 4)]),
    ("broadcast_to", lambda x: tnp.broadcast_to(x, (2, 3, 4)), lambda x: np.broadcast_to(x, (2, 3, 4)), [(3, 1)]),
    ("concatenate", lambda x, y: tnp.concatenate([x, y, x], axis=1), lambda x, y: np.concatenate([x, y, x], 1),
     [(3, 2), (3, 4)]),
    ("concatenate-const", lambda x: tnp.concatenate([x, np.ones((1, 4))]),
     lambda x: np.concatenate([x, np.ones((1, 4))]), [(3, 4)]),
    ("stack", lambda x, y: tnp.stack([x, y], axis=-1), lambda x, y: np.stack([x, y], axis=-1), [(3, 4), (3, 4)]),
    ("pad", lambda x: tnp.pad(x, ((1, 2), (0, 1)), constant_values=3.0),
     lambda x: np.pad(x, ((1, 2), (0, 1)), constant_values=3.0), [(3, 4)]),
    ("getitem-basic", lambda x: x[1:, ::-2], lambda x: x[1:, ::-2], [(3, 4)]),
    ("getitem-array", lambda x: x[np.array([2, 0, 2]), 1:], lambda x: x[np.array([2, 0, 2]), 1:], [(3, 4)]),
    ("getitem-mask", lambda x: x[np.arange(12).reshape(3, 4) % 2 == 0],
     lambda x: x[np.arange(12).reshape(3, 4) % 2 == 0], [(3, 4)]),
    ("at-add", lambda x, v: x.at[np.array([0, 2, 0])].add(v), None, [(3, 4), (3, 4)]),
    ("at-add-x-only", lambda x: x.at[1].add(np.ones(4)), None, [(3, 4)]),
    ("at-add-v-only", lambda v: _at(np.ones((3, 4)))[np.array([2, 2])].add(v), None, [(2, 4)]),
    ("at-set", lambda x, v: x.at[:, 1].set(v), None, [(3, 4), (3,)]),
    ("at-set-repeated", lambda x, v: x.at[np.array([1, 1, 0])].set(v), None, [(3, 4), (3, 4)]),
    ("at-set-broadcast", lambda x, v: x.at[1:].set(v), None, [(3, 4), (4,)]),
    ("at-set-x-only", lambda x: x.at[0, 1:].set(2.0), None, [(3, 4)]),
    ("at-set-v-only", lambda v: _at(np.ones((3, 4)))[:, 0].set(v), None, [(3,)]),
    ("matmul", tnp.matmul, np.matmul, [(2, 3, 4), (4, 2)]),
    ("matmul-vec", tnp.matmul, np.matmul, [(4,), (3, 4, 2)]),
    ("einsum", lambda a, b, c: tnp.einsum("bij,bjk,bk->bi", a, b, c),
     lambda a, b, c: np.einsum("bij,bjk,bk->bi", a, b, c), [(2, 3, 4), (2, 4, 5), (2, 5)]),
    ("einsum-broadcast1", lambda a, b: tnp.einsum("...i,...i->...", a, b),
     lambda a, b: np.einsum("...i,...i->...", a, b), [(1, 4), (3, 4)]),
    ("tensordot", lambda a, b: tnp.tensordot(a, b, axes=([0, 2], [2, 0])),
     lambda a, b: np.tensordot(a, b, axes=([0, 2], [2, 0])), [(2, 3, 4), (4, 5, 2)]),
]


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("name,fn,ref,shapes", CASES, ids=[c[0] for c in CASES])
def test_array_primitives_both_modes(name, fn, ref, shapes, dtype):
    args = tuple(_rand(s, dtype, seed=i) for i, s in enumerate(shapes))
    if ref is not None:
        assert_close(fn(*args), ref(*args), rtol=1e-5 if dtype == np.float32 else 1e-12)
    check_grads(fn, args, order=2, modes=BOTH, name=name)
    out, t_out = tg.jvp(fn, args, tuple(np.ones_like(a) for a in args))
    assert t_out.dtype == np.asarray(out).dtype and t_out.shape == np.shape(out)


def test_cumprod_values_and_dtype_argument():
    x = _rand((3, 4), np.float64)
    assert_close(tnp.cumprod(x), np.cumprod(x))
    assert_close(tnp.cumprod(x, axis=-1), np.cumprod(x, axis=-1))
    assert tnp.cumprod(np.arange(1, 5), dtype=np.float32).dtype == np.float32
    assert_close(tnp.cumprod([1.0, 2.0, 3.0]), [1.0, 2.0, 6.0])


def test_linear_jvps_keep_float32():
    x = _rand((3, 4), np.float32)
    for fn in (lambda x: tnp.sum(x, 0), tnp.cumsum, lambda x: x.T, lambda x: x[1:], lambda x: tnp.pad(x, 1),
               lambda x: tnp.concatenate([x, x]), lambda x: x @ x.T):
        assert tg.jvp(fn, (x,), (x,))[1].dtype == np.float32


# ---- products with zeros: exact, finite, to second order, in both modes --------------------------
def _prod_of_others(x, i):
    return np.prod(np.delete(x, i))


@pytest.mark.parametrize("x", [np.array([2.0, 0.0, 3.0, 5.0]), np.array([2.0, 0.0, 0.0, 5.0]),
                               np.array([0.0, 0.0, 0.0])], ids=["one-zero", "two-zeros", "all-zeros"])
def test_prod_with_zeros(x):
    n = len(x)
    analytic = np.array([_prod_of_others(x, i) for i in range(n)])
    np.testing.assert_array_equal(tg.grad(tnp.prod)(x), analytic)
    for i in range(n):  # jvp along a basis vector: one column of the Jacobian
        np.testing.assert_array_equal(tg.jvp(tnp.prod, (x,), (np.eye(n)[i],))[1], analytic[i])
    hessian = np.array([[0.0 if i == j else np.prod(np.delete(x, [i, j])) for j in range(n)] for i in range(n)])
    for i in range(n):
        e = np.eye(n)[i]
        along_e = lambda x, e=e: tg.jvp(tnp.prod, (x,), (e,))[1]  # forward mode: d prod along e
        np.testing.assert_array_equal(tg.grad(lambda x, i=i: tg.grad(tnp.prod)(x)[i])(x), hessian[i])  # rev of rev
        np.testing.assert_array_equal(tg.jvp(tg.grad(tnp.prod), (x,), (e,))[1], hessian[i])      # fwd of rev
        np.testing.assert_array_equal(tg.grad(along_e)(x), hessian[i])                            # rev of fwd
        np.testing.assert_array_equal([tg.jvp(along_e, (x,), (f,))[1] for f in np.eye(n)], hessian[i])  # fwd of fwd
    check_grads(tnp.prod, (x,), order=3, modes=BOTH)


def _cumprod_jacobian(x):
    """``d cumprod(x)[k] / d x[i]`` = product of ``x[:k+1]`` without ``x[i]`` (k >= i), by brute force."""
    n = len(x)
    return np.array([[np.prod(np.delete(x[:k + 1], i)) if i <= k else 0.0 for i in range(n)] for k in range(n)])


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("x", [[2.0, 0.0, 3.0, 5.0, 1.5], [2.0, 0.0, 3.0, 0.0, 1.5], [0.0, 0.0, 4.0]],
                         ids=["one-zero", "two-zeros", "leading-zeros"])
def test_cumprod_with_zeros(x, dtype):
    x = np.asarray(x, dtype)
    n = len(x)
    jac = _cumprod_jacobian(x.astype(np.float64))
    rows = [tg.vjp(tnp.cumprod, x)[1](np.eye(n, dtype=dtype)[k])[0] for k in range(n)]
    cols = [tg.jvp(tnp.cumprod, (x,), (np.eye(n, dtype=dtype)[i],))[1] for i in range(n)]
    assert_close(np.array(rows), jac, rtol=1e-6)
    assert_close(np.array(cols).T, jac, rtol=1e-6)
    assert np.all(np.isfinite(rows)) and np.all(np.isfinite(cols))
    assert_close(tg.grad(lambda x: tnp.cumprod(x).sum())(x), jac.sum(axis=0), rtol=1e-6)
    check_grads(tnp.cumprod, (x,), order=2, modes=BOTH)


def test_cumprod_second_derivative_at_zeros():
    x = np.array([[2.0, 0.0, 3.0, 0.0], [0.0, 1.5, 0.0, 2.0]])
    check_grads(lambda x: tnp.cumprod(x, axis=1), (x,), order=3, modes=BOTH)
    check_grads(lambda x: tnp.cumprod(x, axis=0), (x,), order=3, modes=BOTH)
    # d^2/dx0 dx2 of the last entry of cumprod([x0, x1, x2, x3]) is x1 * x3
    v = np.array([1.0, 2.0, 0.0, 5.0])
    last = lambda x: tnp.cumprod(x)[-1]  # noqa: E731
    assert tg.grad(lambda x: tg.grad(last)(x)[0])(v)[2] == 10.0
    assert tg.jvp(tg.grad(last), (v,), (np.eye(4)[2],))[1][0] == 10.0


# ---- max and min: ties split evenly in both modes (JAX's convention) ------------------------------
def test_max_min_ties_split_evenly():
    x = np.array([1.0, 3.0, 3.0, 3.0, 2.0])
    t = np.array([10.0, 1.0, 2.0, 6.0, 7.0])
    assert_close(tg.grad(tnp.max)(x), [0, 1 / 3, 1 / 3, 1 / 3, 0])
    assert_close(tg.jvp(tnp.max, (x,), (t,))[1], (1.0 + 2.0 + 6.0) / 3)
    y = -x
    assert_close(tg.grad(tnp.min)(y), [0, 1 / 3, 1 / 3, 1 / 3, 0])
    assert_close(tg.jvp(tnp.min, (y,), (t,))[1], 3.0)
    m = np.array([[1.0, 1.0, 0.0], [5.0, 2.0, 5.0]])
    tm = np.array([[4.0, 2.0, 9.0], [1.0, 8.0, 3.0]])
    assert_close(tg.jvp(lambda m: tnp.amax(m, axis=1, keepdims=True), (m,), (tm,))[1], [[3.0], [2.0]])
    assert_close(tg.grad(lambda m: tnp.amax(m, axis=1).sum())(m), [[0.5, 0.5, 0], [0.5, 0, 0.5]])
    assert_close(tg.jvp(lambda m: tnp.amin(m, axis=0), (m,), (tm,))[1], [4.0, 2.0, 9.0])
    # jvp and vjp are transposes of each other at a tie, too
    u = np.array([[2.0], [-1.0]])
    fwd = np.sum(u * tg.jvp(lambda m: tnp.amax(m, axis=1, keepdims=True), (m,), (tm,))[1])
    rev = np.sum(tm * tg.vjp(lambda m: tnp.amax(m, axis=1, keepdims=True), m)[1](u)[0])
    assert_close(fwd, rev)


# ---- a repeated index within one operand (a diagonal): both modes -------------------------------------
def test_einsum_with_a_repeated_index():
    a = _rand((3, 3), np.float64)
    b = _rand((3, 3, 4), np.float64)
    for subscripts in ("ii->i", "ii", "ij,jj->i", "iij->ij", "iij,ij->j"):
        if subscripts == "ij,jj->i":
            fn, args = (lambda a: tnp.einsum("ij,jj->i", a, a)), (a,)
        elif subscripts == "iij,ij->j":
            fn, args = (lambda b, a: tnp.einsum("iij,ij->j", b, a[:, :1] * np.ones(4))), (b, a)
        else:
            fn, args = (lambda x, s=subscripts: tnp.einsum(s, x)), ((b,) if "j" in subscripts else (a,))
        check_grads(fn, args, order=2, name=f"einsum {subscripts}")
    assert_close(tg.jvp(lambda a: tnp.einsum("ii", a), (a,), (np.eye(3),))[1], 3.0)
    # the trace's gradient is the identity; the diagonal's vjp writes the cotangent onto the diagonal
    np.testing.assert_array_equal(tg.grad(lambda a: tnp.einsum("ii", a))(a), np.eye(3))
    np.testing.assert_array_equal(tg.vjp(lambda a: tnp.einsum("ii->i", a), a)[1](np.array([1.0, 2.0, 3.0]))[0],
                                  np.diag([1.0, 2.0, 3.0]))


def test_integer_and_boolean_outputs_have_zero_tangents():
    x = np.array([[1.0, 5.0, 2.0], [7.0, 0.0, 3.0]])
    out, t = tg.jvp(lambda x: tnp.argmax(x, axis=1), (x,), (np.ones_like(x),))
    np.testing.assert_array_equal(out, [1, 0])
    np.testing.assert_array_equal(t, [0, 0])
    _, t = tg.jvp(lambda x: x.ravel()[tnp.argmax(x)] * tnp.all(x > -1.0), (x,), (np.arange(6.0).reshape(2, 3),))
    assert_close(t, 3.0)
