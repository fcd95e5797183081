"""``x.at[idx].set/add/multiply/min/max(v)`` refuse a ``v`` whose dtype does not cast to x's by NumPy's
``same_kind`` rule (complex into real, float into integer), under every transform, instead of
dropping the imaginary or fractional part; what does cast (float64 into float32, ints into floats,
Python scalars) still works and gives the right numbers."""
from __future__ import annotations

import numpy as np
import pytest

import tapegrad as tg
import tapegrad.numpy as tnp
from _tol import assert_close

ROWS = np.array([0, 2, 0])
UPDATES = {
    "set": lambda x, v: x.at[1].set(v),
    "add": lambda x, v: x.at[ROWS].add(v),
    "add to a slice": lambda x, v: x.at[0:3].add(v),
    "multiply": lambda x, v: x.at[1:3].multiply(v),
    "min": lambda x, v: x.at[1].min(v),
    "max": lambda x, v: x.at[np.array([1, 3])].max(v),
}
ROUTES = {
    "jit": lambda f: tg.jit(f),
    "grad": lambda f: tg.grad(lambda x: tnp.sum(tnp.real(f(x)))),
    "vmap": lambda f: tg.vmap(f),
}


def _operand(route, dtype):
    x = np.arange(4.0).astype(dtype)
    return np.stack([x, x + 1]) if route == "vmap" else x


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("update", UPDATES)
@pytest.mark.parametrize("value", [1j, np.complex64(2 - 1j), np.array([1j, 2.0, 3.0])], ids=["py", "np", "array"])
def test_complex_values_into_a_real_array_raise(route, update, value):
    fn = ROUTES[route](lambda x: UPDATES[update](x, value))
    with pytest.raises(TypeError, match=r"x\.at\[idx\]\.\w+\(values\).*complex.*float64.*imaginary part.*astype"):
        fn(_operand(route, np.float64))


@pytest.mark.parametrize("route", ROUTES)
def test_float_values_into_an_integer_array_raise(route):
    fn = ROUTES["jit" if route == "grad" else route](lambda x: x.at[1].add(2.5))
    with pytest.raises(TypeError, match="a Python float cannot be written into x of dtype int64.*fractional part"):
        fn(_operand(route, np.int64))


def test_the_values_are_named_by_their_dtype_and_traced_values_are_checked_too():
    with pytest.raises(TypeError, match="values of dtype complex64 cannot be written into x of dtype float32"):
        tg.jit(lambda x, v: x.at[0].set(v))(np.zeros(2, np.float32), np.ones(1, np.complex64))
    with pytest.raises(TypeError, match="a Python complex cannot"):
        tg.jit(lambda x: x.at[0].set(1j))(np.zeros(2))


def test_after_the_error_the_same_update_with_a_complex_array_works():
    fn = tg.jit(lambda x: x.at[ROWS].add(1j))
    with pytest.raises(TypeError):
        fn(np.zeros(4))
    out = fn(np.zeros(4, np.complex128))
    assert_close(out, np.array([2j, 0, 1j, 0]))


@pytest.mark.parametrize("route", ROUTES)
def test_same_kind_values_still_cast(route):
    """float64 into float32 (same kind), ints and bools into floats: as NumPy's ``x[idx] += v``."""
    x = _operand(route, np.float32)
    fn = ROUTES[route](lambda x: x.at[0:2].add(np.array([1.5, 2.5])).at[2].set(3).at[3].max(True))
    got = fn(x)
    if route == "grad":
        assert_close(got, np.array([1.0, 1.0, 0.0, 1.0], np.float32))  # x[3]=3 beats True: it flows
        return
    want = np.array(x, copy=True)
    want[..., 0:2] += np.array([1.5, 2.5])
    want[..., 2] = 3
    want[..., 3] = np.maximum(want[..., 3], 1)
    assert got.dtype == np.float32
    assert_close(got, want)


def test_a_list_of_traced_values_is_stacked_differentiably():
    """``x.at[i:j].set([t1, t2])`` (and ``.add``, ``.max``) stack the list as ``tnp.array`` does."""
    def f(x, a):
        return (tnp.sum(x.at[0:2].set([a, a * 2]) * tnp.arange(4.0)) + tnp.sum(x.at[2:4].add((a, a)))
                + tnp.sum(x.at[1:3].max([a, 0.0])))
    gx, ga = tg.grad(f, (0, 1))(np.ones(4), 3.0)
    np.testing.assert_array_equal(gx, [2.0, 1.0, 4.0, 5.0])  # closed form: the positions each term keeps
    assert ga == 5.0  # 0 * 1 + 1 * 2 from set, 2 from add, 1 from max(1, a)
    assert tg.jit(lambda x, a: tg.value_and_grad(f, (0, 1))(x, a))(np.ones(4), 3.0)[0] == 27.0  # 11 + 10 + 6
