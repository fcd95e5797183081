"""Conversions that would drop a derivative raise ``ConcretizationError`` under every derivative
transform; ``bool`` and values without a derivative keep converting as NumPy does."""
from __future__ import annotations

import math
import operator

import numpy as np
import pytest

import tapegrad as tg
import tapegrad.numpy as tnp
from tapegrad._core import trace_stack
from tapegrad.errors import ConcretizationError, TracerArrayConversionError

# each conversion of a 0-d value to a Python or NumPy scalar (or list), and how its error names it
CONVERSIONS = {
    "float": (float, "float()"),
    "int": (int, "int()"),
    "complex": (complex, "complex()"),
    "operator.index": (operator.index, "operator.index()"),
    "item": (lambda x: x.item(), ".item()"),
    "tolist": (lambda x: x.tolist(), ".tolist()"),
    "round": (round, "round()"),
    "math.exp": (math.exp, "float()"),
    "math.sqrt": (math.sqrt, "float()"),
    "format": (lambda x: f"{x:.3f}", "format spec"),
    "np.float64": (np.float64, "NumPy array or scalar"),
    "np.float32": (np.float32, "NumPy array or scalar"),
    "np.int64": (np.int64, "NumPy array or scalar"),
    "np.complex128": (np.complex128, "NumPy array or scalar"),
}


def _custom_vjp_converting_in_bwd(convert):
    """A custom_vjp whose bwd rule converts its residual: fine at first order (the residual is
    concrete), a lost derivative at second order, where the residual is traced."""
    @tg.custom_vjp
    def square(x):
        return x * x

    square.defvjp(lambda x: (x * x, x), lambda x, ct: (ct * 2.0 * convert(x),))
    return square


# each derivative transform, as a function of (f, x) that runs f under it
TRANSFORMS = {
    "grad": lambda f, x: tg.grad(lambda a: tnp.sum(a * f(a)))(x),
    "value_and_grad": lambda f, x: tg.value_and_grad(lambda a: tnp.sum(a * f(a)))(x),
    "vjp": lambda f, x: tg.vjp(lambda a: a * f(a), x),
    "jvp": lambda f, x: tg.jvp(lambda a: a * f(a), (x,), (np.ones_like(x),)),
    "linearize": lambda f, x: tg.linearize(lambda a: a * f(a), x),
    "jacrev": lambda f, x: tg.jacrev(lambda a: a * f(a))(x),
    "jacfwd": lambda f, x: tg.jacfwd(lambda a: a * f(a))(x),
    "hessian": lambda f, x: tg.hessian(lambda a: tnp.sum(a * f(a)))(x),
    "checkpoint": lambda f, x: tg.grad(tg.checkpoint(lambda a: tnp.sum(a * f(a))))(x),
    # the outer transform's value converted inside the inner one
    "grad of grad": lambda f, x: tg.grad(lambda b: tnp.sum(tg.grad(lambda a: tnp.sum(a * a * f(b)))(b)))(x),
    "custom_vjp rule, second order": lambda f, x: tg.grad(tg.grad(_custom_vjp_converting_in_bwd(f)))(x),
}


# checkpoint's forward pass runs its function on plain arrays (it keeps no tape): a conversion there
# succeeds as NumPy's, and the error comes when the backward pass recomputes it on a tape; these
# conversions NumPy itself refuses on a 0-d float array, so NumPy's TypeError comes first
REFUSED_BY_NUMPY = {"operator.index", "round", "format"}


@pytest.mark.parametrize("transform", list(TRANSFORMS))
@pytest.mark.parametrize("conversion", list(CONVERSIONS))
def test_conversion_of_a_differentiated_value_raises(conversion, transform):
    convert, named = CONVERSIONS[conversion]
    x = np.array(1.5)
    if transform == "checkpoint" and conversion in REFUSED_BY_NUMPY:
        with pytest.raises(TypeError):
            TRANSFORMS[transform](convert, x)
        return
    with pytest.raises(ConcretizationError) as info:
        TRANSFORMS[transform](convert, x)
    message = str(info.value)
    assert named in message
    assert "derivative would be lost" in message
    assert "tapegrad.numpy" in message and "stop_gradient" in message
    assert trace_stack() == ()


@pytest.mark.parametrize("transform", ["grad", "jvp", "vjp", "jacfwd", "checkpoint"])
def test_bool_and_comparisons_stay_eager(transform):
    """Python control flow on values works under derivative transforms, as in autograd and PyTorch."""
    def branchy(a):
        return 2.0 if bool(a > 0) and a > 1.0 else -1.0
    TRANSFORMS[transform](branchy, np.array(1.5))


def test_branches_pick_the_right_derivative():
    f = tg.grad(lambda a: a * a if a > 0 else -a)
    assert f(3.0) == 6.0 and f(-3.0) == -1.0
    t = tg.jvp(lambda a: a * a if a > 0 else -a, (np.array(-2.0),), (np.array(1.0),))[1]
    assert t == -1.0


def test_values_without_a_derivative_convert():
    """Integer results, stopped values and plain arrays convert as NumPy's do."""
    def f(a):
        k = int(tnp.argmax(a))
        scale = float(tg.stop_gradient(a[0]))
        n = operator.index(tnp.sum(a > 0))
        assert isinstance(tg.stop_gradient(a).tolist(), list)
        return a[k] * scale * n
    g = tg.grad(f)(np.array([1.0, 3.0, 2.0]))
    np.testing.assert_array_equal(g, [0.0, 3.0, 0.0])


def test_the_second_order_custom_rule_works_when_it_does_not_convert():
    square = _custom_vjp_converting_in_bwd(lambda r: r)
    assert tg.grad(square)(3.0) == 6.0
    assert tg.grad(tg.grad(square))(3.0) == 2.0


def test_first_order_custom_rule_may_convert():
    """In a custom rule at first order the residuals are concrete: converting them is the user's
    choice, and the derivative is the rule's."""
    square = _custom_vjp_converting_in_bwd(float)
    assert tg.grad(square)(3.0) == 6.0


def test_np_scalar_types_raise_the_array_conversion_error():
    """NumPy's scalar types other than float64 convert through ``__array__``: the error is the array
    one, which is a ConcretizationError (and a TypeError)."""
    with pytest.raises(TracerArrayConversionError, match="derivative would be lost"):
        tg.grad(lambda a: a * np.float32(a))(np.float32(2.0))
    assert issubclass(TracerArrayConversionError, ConcretizationError)
    assert issubclass(ConcretizationError, TypeError)


@pytest.mark.parametrize("conversion", ["float", "int", "item", "round", "math.exp"])
def test_jit_and_vmap_keep_their_own_errors(conversion):
    convert, _ = CONVERSIONS[conversion]
    with pytest.raises(ConcretizationError, match=r"tg\.cond.*tnp\.where") as info:
        tg.jit(lambda a: a * convert(a))(np.array(1.5))
    assert "static_argnums" not in str(info.value)  # an array cannot be static
    with pytest.raises(ConcretizationError, match="static_argnums"):
        tg.jit(lambda a: a * convert(a))(1.5)  # a Python scalar can
    with pytest.raises(ConcretizationError, match="tnp.where"):
        tg.vmap(lambda a: a * convert(a))(np.array([1.5, 2.5]))
    assert trace_stack() == ()


def test_after_the_error_the_next_call_is_right():
    with pytest.raises(ConcretizationError):
        tg.grad(lambda a: a * float(a))(2.0)
    assert tg.grad(lambda a: a * a)(2.0) == 4.0
