"""The tester is tested: check_grads must catch a wrong first-order rule and a wrong second-order one,
and name the route."""
import numpy as np
import pytest

import tapegrad as tg
import tapegrad.numpy as tnp
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
