"""Results the caller owns: every array a transform returns is a writable buffer of its own, distinct
from every other result and from the caller's arrays (PyTorch and autograd hand back distinct
buffers)."""
from __future__ import annotations

import numpy as np
import pytest

import tapegrad as tg
import tapegrad.numpy as tnp


def assert_owned(results, *caller):
    """Each result is a writable array that owns its memory, shares none with another result or with
    the caller's arrays."""
    results = list(results)
    for i, r in enumerate(results):
        assert type(r) is np.ndarray, type(r)
        assert r.flags.writeable and r.flags.owndata
        for c in caller:
            assert not np.shares_memory(r, c)
        for other in results[i + 1:]:
            assert not np.shares_memory(r, other)


def test_gradients_of_an_add_are_distinct_buffers():
    a, b = np.ones(3), np.ones(3)
    gx, gy = tg.grad(lambda a, b: tnp.sum(a + b), grad_position=(0, 1))(a, b)
    assert_owned([gx, gy], a, b)
    gx *= 0.5
    np.testing.assert_array_equal(gy, np.ones(3))


@pytest.mark.parametrize("reduce", [tnp.sum, tnp.mean])
def test_the_gradient_of_a_reduction_is_writable(reduce):
    g = tg.grad(reduce)(np.ones((2, 3)))
    assert_owned([g])
    g *= 2.0
    np.testing.assert_array_equal(g, 2.0 * tg.grad(reduce)(np.ones((2, 3))))  # exact: a power of two


def test_weight_gradients_are_scaled_once():
    tok, pos = tg.Parameter(np.ones(4)), tg.Parameter(np.ones(4))
    g_tok, g_pos = tg.grad(lambda x: tnp.sum(tok + pos + x), grad_position=None, weights=[tok, pos])(np.ones(4))
    assert_owned([g_tok, g_pos], tok.value, pos.value)
    g_tok *= 0.5
    g_pos *= 0.5
    np.testing.assert_array_equal(g_tok, np.full(4, 0.5))
    np.testing.assert_array_equal(g_pos, np.full(4, 0.5))


def test_vjp_of_the_identity_returns_new_arrays():
    x, ct = np.arange(3.0), np.ones(3)
    out, vjp_fn = tg.vjp(lambda a: a, x)
    (g,) = vjp_fn(ct)
    assert_owned([out, g], x, ct)


def test_jvp_and_linearize_of_the_identity_return_new_arrays():
    x, t = np.arange(3.0), np.ones(3)
    out, tangent = tg.jvp(lambda a: a, (x,), (t,))
    assert_owned([out, tangent], x, t)
    out, jvp_fn = tg.linearize(lambda a: a, x)
    assert_owned([out, jvp_fn(t)], x, t)


def test_value_and_aux_do_not_alias_inputs():
    x = np.arange(3.0)
    (value, aux), g = tg.value_and_grad(lambda a: (tnp.sum(a), a), has_aux=True)(x)
    assert_owned([value, aux, g], x)
    out, _, aux = tg.vjp(lambda a: (a, a), x, has_aux=True)
    assert_owned([out, aux], x)


def test_vmap_and_jit_outputs_do_not_alias_inputs_or_constants():
    x, c = np.arange(3.0), np.arange(4.0)
    assert_owned([tg.vmap(lambda a: a)(x)], x)
    assert_owned([tg.vmap(lambda a: c, axis_size=2, in_axes=None)(x)], x, c)
    assert_owned([tg.jit(lambda a: a)(x)], x)
    assert_owned([tg.jit(lambda a: c)(x)], x, c)
    assert_owned([tg.jit(lambda a: a.reshape(3, 1))(x)], x)
    assert_owned(tg.jit(lambda a: (a * 2, a * 2))(x), x)


def test_jit_returns_arrays_as_the_transforms_do():
    """A 0-d result is a 0-d ndarray (an array at rest), not a NumPy scalar, as grad gives it."""
    x = np.arange(3.0)
    f = tg.value_and_grad(lambda a: tnp.sum(a * a))
    eager, staged = f(x), tg.jit(f)(x)
    for e, s in zip(eager, staged):
        assert type(e) is type(s) is np.ndarray and e.shape == s.shape and e.dtype == s.dtype
    assert type(tg.jit(tnp.sum)(x)) is np.ndarray


def test_grad_of_prod_over_an_empty_axis_is_an_empty_zero_gradient():
    x = np.ones((0, 3))
    g = tg.grad(lambda a: tnp.sum(tnp.prod(a, axis=0)))(x)
    assert g.shape == (0, 3) and g.dtype == x.dtype
    out, t = tg.jvp(lambda a: tnp.prod(a, axis=0, keepdims=True), (x,), (x,))
    np.testing.assert_array_equal(out, np.ones((1, 3)))
    np.testing.assert_array_equal(t, np.zeros((1, 3)))
    assert tg.grad(lambda a: tnp.prod(a))(np.ones(0)).shape == (0,)
