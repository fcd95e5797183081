"""NumPy's remaining array functions (issue 15): type and shape queries, reordering and flat-index
functions, ``isposinf``/``isneginf``, and arrays made from functions: values against NumPy, the
derivatives of the float results to order 2 in both modes, one ``vmap`` and one ``jit`` check each,
plain ``np.*`` dispatch, and the errors."""
from __future__ import annotations

import numpy as np
import pytest

import tapegrad as tg
import tapegrad.numpy as tnp
from _tol import assert_close
from _vmapcheck import check_vmap
from tapegrad.errors import ConcretizationError
from tapegrad.testing import check_grads

RNG = np.random.default_rng(15)
A = RNG.standard_normal((3, 4))
Z = np.array([1 + 2j, 1 - 1j, 0.5 + 0j, 1 + 0j, -2 + 0.5j])


# ---- queries: the same answers as NumPy, traced values answered from their abstract value -------------
def test_type_and_shape_queries_answer_as_numpy():
    assert tnp.broadcast_shapes((3, 1), (1, 4)) == np.broadcast_shapes((3, 1), (1, 4))
    assert tnp.promote_types(np.float32, np.int64) == np.promote_types(np.float32, np.int64)
    assert tnp.can_cast(np.float32, np.float64) and not tnp.can_cast(np.float64, np.int8)
    assert tnp.isdtype(np.float32, "real floating") and not tnp.isdtype(np.int32, "real floating")
    assert tnp.issubdtype(np.float32, np.floating)
    assert tnp.isscalar(3.0) and not tnp.isscalar(A)
    assert tnp.iterable(A) and not tnp.iterable(3.0)
    assert tnp.einsum_path("ij,jk->ik", A, A.T)[0] == np.einsum_path("ij,jk->ik", A, A.T)[0]

    def inside(x):
        assert tnp.can_cast(x, np.float64) and not tnp.isscalar(x) and tnp.iterable(x)
        assert not tnp.iterable(x[0, 0])
        assert tnp.einsum_path("ij,jk->ik", x, x.T)[0] == ["einsum_path", (0, 1)]
        return x
    tg.jit(inside)(A)
    tg.grad(lambda x: tnp.sum(inside(x)))(A)


# ---- reordering -------------------------------------------------------------------------------------
def test_lexsort_and_sort_complex_match_numpy_and_trace():
    keys = [RNG.integers(0, 3, 8), RNG.integers(0, 2, 8).astype(float), RNG.integers(0, 3, 8)]
    np.testing.assert_array_equal(tnp.lexsort(keys), np.lexsort(keys))
    np.testing.assert_array_equal(tnp.lexsort(np.stack(keys)), np.lexsort(np.stack(keys)))
    np.testing.assert_array_equal(tg.jit(lambda *k: tnp.lexsort(list(k)))(*keys), np.lexsort(keys))
    np.testing.assert_array_equal(tnp.sort_complex(Z), np.sort_complex(Z))
    assert tnp.sort_complex(np.array([3.0, 1.0], np.float32)).dtype == np.complex64
    assert tnp.sort_complex(np.array([3, 1])).dtype == np.complex128
    distinct = np.array([1.5 + 2j, 0.2 - 1j, -0.5 + 0j, 3.0 + 1j])  # no ties a perturbation could reorder
    check_grads(tnp.sort_complex, (distinct,), order=2)
    check_vmap(tnp.sort_complex, (distinct,), 0)
    assert_close(tg.jit(tnp.sort_complex)(Z), np.sort_complex(Z))


@pytest.mark.parametrize("new_shape", [(2, 5), 7, (2,), (0, 3)])
def test_resize_repeats_the_elements(new_shape):
    x = A[:2, :3]
    assert_close(tnp.resize(x, new_shape), np.resize(x, new_shape))
    if np.prod(new_shape) > 0:
        check_grads(lambda x: tnp.resize(x, new_shape), (x,), order=2)
        check_vmap(lambda x: tnp.resize(x, new_shape), (x,), 0)
        assert_close(tg.jit(lambda x: tnp.resize(x, new_shape))(x), np.resize(x, new_shape))
    assert_close(tnp.resize(np.array([]), 3), np.resize(np.array([]), 3))


def test_place_is_functional_and_differentiable_in_arr_and_vals():
    mask, vals = A > 0.2, np.array([10.0, 20.0, 30.0])
    want = A.copy()
    np.place(want, mask, vals)
    assert_close(tnp.place(A, mask, vals, inplace=False), want)
    assert_close(tg.jit(lambda a, m, v: tnp.place(a, m, v, inplace=False))(A, mask, vals), want)  # a traced mask
    check_grads(lambda a, v: tnp.place(a, mask, v, inplace=False), (A, vals), order=2)
    check_vmap(lambda a: tnp.place(a, mask, vals, inplace=False), (A,), 0)
    with pytest.raises(ValueError, match="inplace=False"):
        tnp.place(A, mask, vals)
    with pytest.raises(ValueError, match="vals is empty"):
        tnp.place(A, mask, np.array([]), inplace=False)


def test_trim_zeros_needs_concrete_values():
    f = np.array([0.0, 0.0, 1.5, 0.0, -2.0, 0.0])
    for trim in ("fb", "f", "b", "FB"):
        assert_close(tnp.trim_zeros(f, trim), np.trim_zeros(f, trim))
    assert tnp.trim_zeros(np.zeros(3)).shape == np.trim_zeros(np.zeros(3)).shape
    # the kept elements carry their derivatives (check_grads cannot perturb here: a perturbed zero is
    # no longer trimmed, and the length changes)
    assert_close(tg.grad(lambda f: tnp.sum(tnp.trim_zeros(f) ** 3))(f), 3.0 * f ** 2)
    assert_close(tg.jvp(lambda f: tnp.trim_zeros(f, "f"), (f,), (np.arange(6.0),))[1], np.arange(2.0, 6.0))
    with pytest.raises(ConcretizationError, match="trim_zeros"):
        tg.jit(tnp.trim_zeros)(f)


def test_copy_returns_a_new_array_or_the_traced_value():
    c = tnp.copy(A)
    assert c is not A and np.shares_memory(c, A) is False
    assert_close(c, A)
    check_grads(lambda x: tnp.copy(x) * 2.0, (A,), order=2)
    assert_close(tg.grad(lambda x: tnp.sum(np.copy(x) ** 2))(A), 2.0 * A)  # np.copy dispatches


# ---- flat indices -----------------------------------------------------------------------------------
@pytest.mark.parametrize("order", ["C", "F"])
def test_ravel_and_unravel_match_numpy(order):
    dims = (3, 4, 2)
    idx = (np.array([0, 2, 1]), np.array([3, 0, 2]), np.array([1, 1, 0]))
    flat = np.ravel_multi_index(idx, dims, order=order)
    np.testing.assert_array_equal(tnp.ravel_multi_index(idx, dims, order=order), flat)
    np.testing.assert_array_equal(
        tg.jit(lambda *i: tnp.ravel_multi_index(i, dims, mode="clip", order=order))(*idx), flat)
    for got, want in zip(tg.jit(lambda f: tnp.unravel_index(f, dims, order=order))(flat),
                         np.unravel_index(flat, dims, order=order)):
        np.testing.assert_array_equal(got, want)
    for got, want in zip(tnp.unravel_index(flat, dims, order=order), np.unravel_index(flat, dims, order=order)):
        np.testing.assert_array_equal(got, want)


def test_flat_index_modes_and_errors():
    big = (np.array([5, -1]), np.array([1, 7]))
    for mode in ("clip", "wrap", ("wrap", "clip")):
        np.testing.assert_array_equal(tg.jit(lambda i, j, m=mode: tnp.ravel_multi_index((i, j), (3, 4), mode=m))(*big),
                                      np.ravel_multi_index(big, (3, 4), mode=mode))
    with pytest.raises(ConcretizationError, match="mode='clip'"):
        tg.jit(lambda i, j: tnp.ravel_multi_index((i, j), (3, 4)))(*big)
    with pytest.raises(ValueError):
        tnp.ravel_multi_index(big, (3, 4))
    # traced flat indices out of bounds are clamped (JAX), concrete ones raise (NumPy)
    np.testing.assert_array_equal(tg.jit(lambda f: tnp.unravel_index(f, (3, 4)))(np.array([12]))[0], [2])
    with pytest.raises(ValueError):
        tnp.unravel_index(np.array([12]), (3, 4))


def test_mask_indices():
    for func, k in ((np.triu, 0), (tnp.tril, -1), (np.triu, 1)):
        for got, want in zip(tnp.mask_indices(4, func, k), np.mask_indices(4, func, k)):
            np.testing.assert_array_equal(got, want)


# ---- predicates and arrays from functions ----------------------------------------------------------------
def test_isposinf_isneginf():
    x = np.array([np.inf, -np.inf, 1.0, np.nan, -0.0])
    np.testing.assert_array_equal(tnp.isposinf(x), np.isposinf(x))
    np.testing.assert_array_equal(tg.jit(tnp.isneginf)(x), np.isneginf(x))
    np.testing.assert_array_equal(tg.vmap(tnp.isposinf)(np.stack([x, -x])), np.stack([np.isposinf(x), np.isposinf(-x)]))
    assert_close(tg.grad(lambda x: tnp.sum(tnp.where(tnp.isposinf(x), 0.0, x)))(np.array([1.0, 2.0])), np.ones(2))
    with pytest.raises(TypeError, match="complex"):
        tnp.isposinf(Z)


def test_fromfunction_and_frompyfunc():
    assert_close(tnp.fromfunction(lambda i, j: i * 10 + j, (2, 3)), np.fromfunction(lambda i, j: i * 10 + j, (2, 3)))
    w = np.array(1.5)
    check_grads(lambda w: tnp.fromfunction(lambda i, j: tnp.sin(w * i) + j, (2, 3)), (w,), order=2)

    f = tnp.frompyfunc(lambda x, y: x * y + tnp.sin(x), 2, 1)
    x = A[0]
    assert_close(f(x, 2.0), x * 2.0 + np.sin(x))
    assert_close(f(A, x), A * x + np.sin(A))  # broadcasting
    check_grads(lambda x: f(x, 2.0), (x,), order=2)
    assert_close(tg.jit(lambda x: f(x, 2.0))(x), x * 2.0 + np.sin(x))
    two = tnp.frompyfunc(lambda x: (x, x * x), 1, 2)
    assert_close(two(x)[1], x * x)
    with pytest.raises(TypeError, match="nin"):
        f(x)


def test_from_dlpack():
    y = tnp.from_dlpack(A)
    assert_close(y, A)
    assert tg.jit(lambda x: tnp.from_dlpack(x) * 2.0)(A).shape == A.shape


def test_full_of_a_traced_fill_value_and_geomspace_under_jit():
    v = np.array(0.5)
    assert_close(tg.grad(lambda v: tnp.sum(tnp.full((2, 3), v) ** 2))(v), 12 * v)
    assert_close(tg.jit(lambda v: tnp.full((2, 3), v))(v), np.full((2, 3), 0.5))
    assert tg.jit(lambda v: tnp.full(3, v, np.float32))(v).dtype == np.float32
    assert_close(tg.vmap(lambda v: tnp.full((2,), v))(np.array([1.0, 2.0])), [[1.0, 1.0], [2.0, 2.0]])
    row = np.array([1.0, 2.0])
    assert_close(tg.jit(lambda r: tnp.full((3, 2), r))(row), np.full((3, 2), row))

    assert_close(tg.jit(lambda a, b: tnp.geomspace(a, b, 4))(np.array(1.0), np.array(8.0)), np.geomspace(1, 8, 4))
    assert_close(tg.vmap(lambda b: tnp.geomspace(1.0, b, 3))(np.array([4.0, 9.0])),
                 np.stack([np.geomspace(1, 4, 3), np.geomspace(1, 9, 3)]))
    with pytest.raises(ValueError, match="zero"):  # concrete under grad: still checked
        tg.grad(lambda a: tnp.sum(tnp.geomspace(a, 2.0, 3)))(np.array(0.0))
