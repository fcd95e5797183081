"""The tester is tested: check_grads must catch a wrong first-order rule and a wrong second-order one,
and name the route; a rule 1% off fails in float32 as in float64, in either mode, at order 1 and 2;
correct rules pass where the values are large, noisy, or not smooth farther out than the step."""
import numpy as np
import pytest

import tapegrad as tg
import tapegrad.numpy as tnp
from tapegrad import extend
from tapegrad._core import bind
from tapegrad._rules import PRIMITIVES, defjvp, defvjp, primitive
from tapegrad.testing import check_grads

# sin with the wrong sign in its derivative, in both modes
bad_sin_p = primitive("bad_sin", lambda x: np.sin(x))
defvjp(bad_sin_p, lambda ct, ans, x: -ct * tnp.cos(x))
defjvp(bad_sin_p, lambda t, ans, x: -t * tnp.cos(x))

# cos whose value is right but whose own derivative is wrong (+sin), in both modes
bad_cos_p = primitive("bad_cos", lambda x: np.cos(x))
defvjp(bad_cos_p, lambda ct, ans, x: ct * tnp.sin(x))
defjvp(bad_cos_p, lambda t, ans, x: t * tnp.sin(x))

# sin whose first derivative is right, computed with bad_cos: only the second order is wrong
sin2_p = primitive("sin2", lambda x: np.sin(x))
defvjp(sin2_p, lambda ct, ans, x: ct * bind(bad_cos_p, x))
defjvp(sin2_p, lambda t, ans, x: t * bind(bad_cos_p, x))

# sin whose jvp is right and whose vjp is right to first order only
sin3_p = primitive("sin3", lambda x: np.sin(x))
defvjp(sin3_p, lambda ct, ans, x: ct * bind(bad_cos_p, x))
defjvp(sin3_p, lambda t, ans, x: t * tnp.cos(x))

# sin whose vjp is right but whose jvp is wrong: only forward mode catches it
fwd_bad_sin_p = primitive("fwd_bad_sin", lambda x: np.sin(x))
defvjp(fwd_bad_sin_p, lambda ct, ans, x: ct * tnp.cos(x))
defjvp(fwd_bad_sin_p, lambda t, ans, x: t * tnp.sin(x))

# test-only primitives: kept out of the registry that the completeness tests walk
for _prim in (bad_sin_p, bad_cos_p, sin2_p, sin3_p, fwd_bad_sin_p):
    PRIMITIVES.remove(_prim)


def bad_sin(x):
    return bind(bad_sin_p, x)


def sin2(x):
    return bind(sin2_p, x)


def sin3(x):
    return bind(sin3_p, x)


def fwd_bad_sin(x):
    return bind(fwd_bad_sin_p, x)


@pytest.mark.parametrize("mode,route", [("rev", "vjp of bad_sin"), ("fwd", "jvp of bad_sin")])
def test_wrong_first_order_rule_is_caught_and_named(mode, route):
    with pytest.raises(AssertionError, match=route):
        check_grads(bad_sin, (np.array([0.3, 1.2]),), order=1, modes=(mode,))


@pytest.mark.parametrize("modes,route", [(("rev",), "vjp of vjp of sin2"), (("fwd",), "jvp of jvp of sin2"),
                                         (("fwd", "rev"), "jvp of jvp of sin2")])
def test_wrong_second_order_rule_is_caught_only_at_order_two(modes, route):
    x = np.array([0.3, 1.2, -0.7])
    check_grads(sin2, (x,), order=1, modes=modes)
    with pytest.raises(AssertionError, match=route):
        check_grads(sin2, (x,), order=2, modes=modes)


def test_the_route_names_forward_over_reverse():
    # the jvp rule of sin3 is right, its vjp rule is right to first order only: forward mode alone
    # passes, and the failure shows up when the vjp rule is differentiated in forward mode
    x = np.array([0.3, 1.2, -0.7])
    check_grads(sin3, (x,), order=2, modes=("fwd",))
    with pytest.raises(AssertionError, match="jvp of vjp of sin3"):
        check_grads(sin3, (x,), order=2)


def test_a_wrong_jvp_is_caught_by_forward_mode_only():
    x = np.array([0.3, 1.2])
    check_grads(fwd_bad_sin, (x,), order=1, modes=("rev",))
    with pytest.raises(AssertionError, match="jvp of fwd_bad_sin"):
        check_grads(fwd_bad_sin, (x,), order=1)


def test_correct_rules_pass_to_order_three():
    check_grads(lambda x, y: tnp.sin(x) * tnp.exp(y), (np.array([0.3, 1.2]), np.array(0.5)), order=3)


def test_an_unknown_mode_is_refused():
    with pytest.raises(ValueError, match="unknown mode 'forward'"):
        check_grads(tnp.sin, (np.ones(2),), modes=("forward",))


def test_float32_inputs_use_float32_tolerances():
    check_grads(tnp.tanh, (np.linspace(-1, 1, 5).astype(np.float32),))
    assert tg.grad(lambda x: tnp.tanh(x).sum())(np.ones(2, np.float32)).dtype == np.float32


@pytest.mark.parametrize("dtype,offset", [(np.float16, 30.0), (np.float32, 1e4), (np.float64, 1e6)])
def test_large_values_do_not_fail_a_correct_rule(dtype, offset):
    """The rounding of f's values divided by the step is finite-difference noise, not a wrong rule:
    sin(x) + offset has sin's derivative whatever the offset (a fixed atol failed 15 seeds in 20 in
    float64 at 1e6)."""
    for seed in range(20):
        x = np.random.default_rng(seed).uniform(-1, 1, 5).astype(dtype)
        check_grads(lambda a: tnp.sin(a) + offset, (x,), order=1, seed=seed)


def test_a_wrong_rule_still_fails_beside_moderate_values():
    x = np.linspace(-1.0, 1.0, 5)
    with pytest.raises(AssertionError, match="vjp of"):
        check_grads(lambda a: bad_sin(a) + 10.0, (x,), order=1, modes="rev")


# ---- planted errors of 1%, declared through tapegrad.extend ------------------------------------------
# Unregistered primitives (``extend.Primitive`` alone), so the completeness tests never see them. Each is
# tan; the rules are written in tapegrad operations, so that they differentiate again.

def _sec2(x):
    return 1.0 / tnp.cos(x) ** 2


def _declare(name, impl, jvp_derivative, vjp_derivative):
    """A unary primitive whose jvp rule multiplies by ``jvp_derivative(x)`` and whose vjp rule by
    ``vjp_derivative(x)``."""
    prim = extend.Primitive(f"test.{name}")
    prim.def_impl(impl)
    prim.def_abstract_eval(extend.unary_abstract_eval)
    extend.defjvp(prim, lambda t, ans, x: t * jvp_derivative(x))
    extend.defvjp(prim, lambda ct, ans, x: ct * vjp_derivative(x))

    def fn(x):
        return extend.bind(prim, x)
    fn.__name__ = name
    return fn


tan_ok = _declare("tan_ok", np.tan, _sec2, _sec2)
tan_jvp_off = _declare("tan_jvp_off", np.tan, lambda x: 1.01 * _sec2(x), _sec2)  # forward mode 1% large
tan_vjp_off = _declare("tan_vjp_off", np.tan, _sec2, lambda x: 0.99 * _sec2(x))  # reverse mode 1% small
# the mutation of the issue: tan's values with tanh's derivative (passed float32's old tolerances)
tan_as_tanh = _declare("tan_as_tanh", np.tan, lambda x: 1.0 - tnp.tanh(x) ** 2, lambda x: 1.0 - tnp.tanh(x) ** 2)
# right first derivative computed by a sec^2 whose own derivative is 1% large: only order 2 is wrong
sec2_off = _declare("sec2_off", lambda x: 1.0 / np.cos(x) ** 2,
                    lambda x: 1.01 * 2.0 * _sec2(x) * tnp.tan(x), lambda x: 1.01 * 2.0 * _sec2(x) * tnp.tan(x))
tan_second_off = _declare("tan_second_off", np.tan, sec2_off, sec2_off)


@tg.custom_jvp
def tan_custom_jvp_off(x):
    return tnp.tan(x)


tan_custom_jvp_off.defjvp(lambda primals, tangents: (tnp.tan(primals[0]), 1.01 * _sec2(primals[0]) * tangents[0]))


@tg.custom_vjp
def tan_custom_vjp_off(x):
    return tnp.tan(x)


tan_custom_vjp_off.defvjp(lambda x: (tnp.tan(x), x), lambda x, ct: (0.99 * _sec2(x) * ct,))

DTYPES = [np.float32, np.float64]
ORDERS = [1, 2]
ROUTE = {"fwd": "jvp of ", "rev": "vjp of "}


def _points(dtype):
    """Where the planted rules are checked: a scalar, as the op table's ``test_unary[tan-()-...]``
    draws it, and a vector."""
    return [np.asarray(np.random.default_rng(0).uniform(-0.8, 0.8), dtype), np.linspace(-1.0, 1.0, 5, dtype=dtype)]


@pytest.mark.parametrize("order", ORDERS)
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("fn,wrong,right", [(tan_jvp_off, "fwd", "rev"), (tan_vjp_off, "rev", "fwd")],
                         ids=["jvp-1%-large", "vjp-1%-small"])
def test_a_rule_1_percent_off_fails_in_its_mode_and_only_there(fn, wrong, right, dtype, order):
    route = ROUTE[wrong] + fn.__name__
    for x in _points(dtype):
        with pytest.raises(AssertionError, match=f"check_grads failed for {route}"):
            check_grads(fn, (x,), order=order, modes=(wrong,))
        with pytest.raises(AssertionError, match=f"check_grads failed for {route}"):
            check_grads(fn, (x,), order=order, modes=("fwd", "rev"))
        check_grads(fn, (x,), order=order, modes=(right,))  # the other mode never runs the wrong rule


@pytest.mark.parametrize("order", ORDERS)
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("mode", ["fwd", "rev"])
@pytest.mark.parametrize("fn", [tan_custom_jvp_off, tan_custom_vjp_off], ids=["custom_jvp", "custom_vjp"])
def test_a_custom_rule_1_percent_off_fails_in_both_modes(fn, mode, dtype, order):
    """A custom_jvp's reverse mode transposes its jvp, a custom_vjp's forward mode transposes its bwd:
    the error shows in either mode."""
    route = ROUTE[mode] + "custom tan"
    for x in _points(dtype):
        with pytest.raises(AssertionError, match=f"check_grads failed for {route}"):
            check_grads(fn, (x,), order=order, modes=(mode,), name="custom tan")


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("modes,route", [(("fwd",), "jvp of jvp of tan_second_off"),
                                         (("rev",), "vjp of vjp of tan_second_off"),
                                         (("fwd", "rev"), "jvp of jvp of tan_second_off")])
def test_a_second_derivative_1_percent_off_fails_at_order_two(modes, route, dtype):
    x = np.linspace(0.6, 1.2, 5, dtype=dtype)  # where tan'' = 2 tan sec^2 outweighs tan' in the sum
    check_grads(tan_second_off, (x,), order=1, modes=modes)
    with pytest.raises(AssertionError, match=f"check_grads failed for {route}"):
        check_grads(tan_second_off, (x,), order=2, modes=modes)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("mode", ["fwd", "rev"])
def test_tan_with_tanh_derivative_fails(mode, dtype):
    """The mutation that passed ``test_unary[tan-()-float32]`` under the old float32 tolerances
    (``rtol = atol = 1e-2`` on one unnormalised projection)."""
    for x in _points(dtype):
        with pytest.raises(AssertionError, match=f"check_grads failed for {ROUTE[mode]}tan_as_tanh"):
            check_grads(tan_as_tanh, (x,), order=2, modes=(mode,))


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_the_right_rules_pass_at_every_seed(dtype):
    """No false alarm where the planted tests find errors: the same primitive with tan's own
    derivative, at the same points and others, over many seeds (order 2, both modes)."""
    for seed in range(10):
        for x in _points(dtype) + [np.random.default_rng(seed).uniform(-1.2, 1.2, (2, 3)).astype(dtype)]:
            check_grads(tan_ok, (x,), order=2, seed=seed)
        check_grads(tan_second_off, (np.linspace(0.6, 1.2, 5, dtype=dtype),), order=1, seed=seed)


def test_explicit_tolerances_are_honoured():
    x = np.linspace(-1.0, 1.0, 5, dtype=np.float32)
    check_grads(tan_jvp_off, (x,), order=1, rtol=0.05)  # a caller who accepts 5% gets 5%
    check_grads(tan_jvp_off, (x,), order=1, atol=1.0)
    with pytest.raises(AssertionError, match=r"step 0.002"):
        check_grads(tan_jvp_off, (x,), order=1, eps=2e-3)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_a_zero_derivative_computed_from_terms_that_cancel_passes(dtype):
    """sin^2 + cos^2 - 1: values of size eps made of terms of size 1, so the bound on rounding (eps
    times the values' size) is far below the noise of the finite differences; the noise measured
    around the point lets the right (zero) derivative pass, to order 2."""
    x = np.array([0.3, 1.2, -0.7], dtype)
    check_grads(lambda a: tnp.sin(a) ** 2 + tnp.cos(a) ** 2 - 1.0, (x,), order=2)


def test_a_kink_within_the_step_is_stepped_past():
    """abs at 0.004 in float32 (step 1e-2): the two stencils disagree, and the stencil 16 times smaller
    decides. A kink that stencil still reaches fails, and the message says the step was refined."""
    check_grads(tnp.abs, (np.array([0.004, -0.5], np.float32),), order=2)
    with pytest.raises(AssertionError, match=r"refined from eps=0.01 where the stencil was not smooth"):
        check_grads(tnp.abs, (np.array([1e-4, -0.5], np.float32),), order=1)
