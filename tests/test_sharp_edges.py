"""Sharp edges a new user hits: each once gave a wrong answer or an unhelpful error."""
from __future__ import annotations

import dataclasses
import warnings

import numpy as np
import pytest
import scipy.linalg
import scipy.special

import tapegrad as tg
import tapegrad.nn.functional as F
import tapegrad.numpy as tnp
from _tol import assert_close
from tapegrad.testing import check_grads


# ---- std and var ---------------------------------------------------------------------------------
@pytest.mark.parametrize("fn", [tnp.std, tnp.var])
def test_std_and_var_of_one_element_have_derivative_zero_at_every_order(fn):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no 0 * inf along the way
        for x in (3.5, np.array([3.5]), np.array([[1.0], [2.0]])):
            f = (lambda a: tnp.sum(fn(a, axis=-1))) if np.ndim(x) == 2 else fn
            g = tg.grad(f)(x)
            np.testing.assert_array_equal(g, np.zeros_like(g))
            np.testing.assert_array_equal(tg.jvp(f, (x,), (np.ones_like(x),))[1], 0.0)
            np.testing.assert_array_equal(tg.hessian(f)(x), np.zeros(np.shape(x) * 2))
            np.testing.assert_array_equal(tg.grad(lambda a, f=f: tnp.sum(tg.grad(f)(a)))(x), np.zeros_like(g))


@pytest.mark.parametrize("fn,ref", [(tnp.var, np.var), (tnp.std, np.std)])
@pytest.mark.parametrize("ddof", [0, 1])
def test_std_and_var_of_complex_input_equal_numpy(fn, ref, ddof):
    x = np.array([1 + 2j, 3 - 1j, -0.5 + 0.25j])
    out = fn(x, ddof=ddof)
    assert np.result_type(out) == np.float64
    assert_close(out, ref(x, ddof=ddof))
    check_grads(lambda a: fn(a, ddof=ddof), (x,), order=2)
    x32 = x.astype(np.complex64)
    assert np.result_type(fn(x32)) == np.float32


# ---- ranges with traced endpoints -------------------------------------------------------------------
def test_linspace_with_a_traced_start_is_differentiable():
    """JAX and autograd give 2.5: sum_i (1 - i/4) over five samples."""
    for f in (lambda a: tnp.sum(tnp.linspace(a, 3.4, 5)), lambda a: np.sum(np.linspace(a, 3.4, 5))):
        assert_close(tg.grad(f)(1.2), 2.5)


@pytest.mark.parametrize("kw", [dict(num=5), dict(num=5, endpoint=False), dict(num=1), dict(num=0),
                                dict(num=4, axis=1), dict(num=3, axis=-1), dict(num=4, dtype=np.float32)])
def test_linspace_with_traced_endpoints_equals_numpy(kw):
    start, stop = np.array([1.0, 2.0]), np.array([3.0, -1.0])
    out = tg.vjp(lambda a, b: tnp.linspace(a, b, **kw), start, stop)[0]
    ref = np.linspace(start, stop, **kw)
    assert out.shape == ref.shape and out.dtype == ref.dtype
    assert_close(out, ref)
    if kw["num"] > 0 and "dtype" not in kw:  # finite differences of a float32 output are too coarse
        check_grads(lambda a, b: tnp.linspace(a, b, **kw), (start, stop), order=2)


def test_linspace_retstep_and_dtypes_follow_numpy():
    samples, step = tg.vjp(lambda a: tnp.linspace(a, 3.0, 5, retstep=True), 1.0)[0]
    ref, ref_step = np.linspace(1.0, 3.0, 5, retstep=True)
    assert_close(samples, ref)
    assert_close(step, ref_step)
    out = tg.vjp(lambda a: tnp.linspace(a, np.float32(1), 3), np.float32(0))[0]
    assert out.dtype == np.float32


def test_logspace_and_geomspace_with_traced_endpoints():
    start, stop = np.array([1.0, 2.0]), np.array([3.0, 5.0])
    assert_close(tg.vjp(lambda a: tnp.logspace(a, stop, 4), start)[0], np.logspace(start, stop, 4))
    assert_close(tg.vjp(lambda a: tnp.logspace(a, stop, 4, base=2.0), start)[0], np.logspace(start, stop, 4, base=2.0))
    assert_close(tg.vjp(lambda a: tnp.geomspace(a, stop, 4), start)[0], np.geomspace(start, stop, 4))
    assert_close(tg.vjp(lambda a: tnp.geomspace(-a, -stop, 4), start)[0], np.geomspace(-start, -stop, 4))
    check_grads(lambda a, b: tnp.logspace(a, b, 4, base=2.0), (start, stop), order=2)
    check_grads(lambda a, b: tnp.geomspace(a, b, 4, endpoint=False), (start, stop), order=2)
    with pytest.raises(ValueError, match="cannot include zero"):
        tg.grad(lambda a: tnp.sum(tnp.geomspace(a, 1.0, 3)))(0.0)


def test_ranges_with_traced_endpoints_under_jit_and_vmap():
    assert_close(tg.jit(lambda a: tnp.linspace(a, 3.0, 5))(1.0), np.linspace(1.0, 3.0, 5))
    assert_close(tg.vmap(lambda a: tnp.linspace(a, 3.0, 3))(np.array([0.0, 1.0])),
                 np.stack([np.linspace(0.0, 3.0, 3), np.linspace(1.0, 3.0, 3)]))


# ---- vjp cotangents --------------------------------------------------------------------------------
def test_vjp_fn_takes_a_python_complex_cotangent():
    z = np.array(1.0 + 2.0j)
    (g,) = tg.vjp(lambda a: a * 3.0, z)[1](1j)
    assert g.dtype == np.complex128 and g == 3j
    with pytest.raises(TypeError, match="dtype"):
        tg.vjp(lambda a: a * 3.0, np.array(1.0))[1](1j)  # a complex cotangent for a real output


def test_the_cotangent_of_a_boolean_output_is_ignored():
    """JAX and autograd: nothing flows back through a comparison, whatever cotangent it is given."""
    x = np.array([-1.0, 2.0, 3.0])
    out, vjp_fn = tg.vjp(lambda a: (a > 0, a * 2.0), x)
    (g,) = vjp_fn((np.ones(3), np.ones(3)))
    np.testing.assert_array_equal(g, np.full(3, 2.0))
    (g,) = tg.vjp(lambda a: a > 0, x)[1](np.ones(3))
    np.testing.assert_array_equal(g, np.zeros(3))
    with pytest.raises(ValueError, match="shape"):
        tg.vjp(lambda a: a > 0, x)[1](np.ones(2))


# ---- losses ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("loss", [F.mse_loss, F.binary_cross_entropy_with_logits])
def test_losses_refuse_input_and_target_of_different_shapes(loss):
    with pytest.raises(ValueError, match=r"\(2, 1\).*\(2,\).*reshape") as info:
        loss(np.array([[1.0], [2.0]]), np.array([1.0, 0.0]))
    assert loss.__name__ in str(info.value)
    assert_close(loss(np.array([[1.0], [2.0]]), np.array([[1.0], [0.0]])),
                 loss(np.array([1.0, 2.0]), np.array([1.0, 0.0])))


# ---- errors that point the way ---------------------------------------------------------------------
def test_np_mean_of_a_list_of_traced_values_names_tnp_mean():
    """NumPy converts a list argument itself, before any dispatch protocol sees the traced values in
    it, and np.mean then builds np.float64(...) of the sum: no protocol can return a traced value from
    there. The error says what works: tnp.mean of the same list."""
    with pytest.raises(TypeError, match=r"numpy\.mean .*tapegrad\.numpy\.mean"):
        tg.grad(lambda a, b: np.mean([a, b]))(1.0, 2.0)
    assert tg.grad(lambda a, b: tnp.mean([a, b]), grad_position=(0, 1))(1.0, 2.0) == (0.5, 0.5)
    assert tg.grad(lambda a, b: tnp.mean(tnp.array([a, b])))(1.0, 2.0) == 0.5


@pytest.mark.parametrize("call,ours", [  # (scipy.special's ufuncs dispatch instead: test_scipy_dispatch.py)
    (lambda a: scipy.special.logsumexp(a), "tapegrad.scipy.special.logsumexp"),
    (lambda a: tnp.sum(scipy.linalg.expm(a)), "tapegrad.scipy.linalg.expm"),
])
def test_a_scipy_function_on_a_traced_value_names_ours(call, ours):
    with pytest.raises(TypeError, match=ours.replace(".", r"\.")):
        tg.grad(lambda a: tnp.sum(call(a)))(np.eye(2) + 1.0)


@pytest.mark.parametrize("api", [tg.grad, tg.value_and_grad, tg.jacrev, tg.jacfwd, tg.hessian])
def test_argnums_points_to_grad_position(api):
    with pytest.raises(TypeError, match="grad_position"):
        api(lambda a, b: a * b, argnums=1)


def test_a_dataclass_input_names_register_node():
    @dataclasses.dataclass
    class Weights:
        w: np.ndarray

    for transform in (tg.grad, tg.jit, tg.vmap):
        with pytest.raises(TypeError, match="tapegrad.tree.register_node"):
            transform(lambda d: tnp.sum(d.w))(Weights(np.ones(3)))


# ---- lists among a primitive's operands --------------------------------------------------------------
def test_list_operands_of_traced_values_stack_differentiably():
    """``tnp.multiply([x, 3x], 2)``: the list reaches ``bind``, which stacks it through NumPy's
    ``__array_function__`` (the traced values' own ``stack``), so the derivative flows through it in
    every transform; a nested list with plain numbers stacks level by level."""
    f = lambda x: tnp.sum(tnp.multiply([[x, 1.0], [x, 2.0 * x]], 2.0))  # 2(x + 1 + x + 2x) = 8x + 2
    assert_close(tg.grad(f)(1.5), np.float64(8.0))
    assert_close(tg.jit(f)(1.5), np.asarray(14.0))
    assert_close(tg.vmap(f)(np.arange(3.0)), 8.0 * np.arange(3.0) + 2.0)
    assert_close(tg.jvp(f, (1.5,), (1.0,))[1], np.float64(8.0))
    assert_close(tnp.sin([1.0, 2.0]), np.sin([1.0, 2.0]))  # no traced value: NumPy's own conversion
    p = tg.Parameter(np.float64(3.0))
    assert_close(tg.grad(lambda: tnp.sum(tnp.add([p, 1.0], 1.0)), grad_position=None, weights=p)(), np.float64(1.0))
