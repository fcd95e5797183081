"""The tester is tested: check_grads must catch a wrong first-order rule and a wrong second-order one,
and name the route."""
import numpy as np
import pytest

import tapegrad as tg
import tapegrad.numpy as tnp
from tapegrad._core import bind
from tapegrad.numpy._rules import defvjp, primitive
from tapegrad.testing import check_grads

# sin with the wrong sign in its derivative
bad_sin_p = primitive("bad_sin", lambda x: np.sin(x))
defvjp(bad_sin_p, lambda ct, ans, x: -ct * tnp.cos(x))

# cos whose value is right but whose own derivative is wrong (+sin)
bad_cos_p = primitive("bad_cos", lambda x: np.cos(x))
defvjp(bad_cos_p, lambda ct, ans, x: ct * tnp.sin(x))

# sin whose first derivative is right, computed with bad_cos: only the second order is wrong
sin2_p = primitive("sin2", lambda x: np.sin(x))
defvjp(sin2_p, lambda ct, ans, x: ct * bind(bad_cos_p, x))


def bad_sin(x):
    return bind(bad_sin_p, x)


def sin2(x):
    return bind(sin2_p, x)


def test_wrong_first_order_rule_is_caught_and_named():
    with pytest.raises(AssertionError, match="vjp of bad_sin"):
        check_grads(bad_sin, (np.array([0.3, 1.2]),), order=1)


def test_wrong_second_order_rule_is_caught_only_at_order_two():
    x = np.array([0.3, 1.2, -0.7])
    check_grads(sin2, (x,), order=1)
    with pytest.raises(AssertionError, match="vjp of vjp of sin2"):
        check_grads(sin2, (x,), order=2)


def test_correct_rules_pass_to_order_three():
    check_grads(lambda x, y: tnp.sin(x) * tnp.exp(y), (np.array([0.3, 1.2]), np.array(0.5)), order=3)


def test_forward_mode_is_not_available_yet():
    with pytest.raises(NotImplementedError, match="modes=\\('rev',\\)"):
        check_grads(tnp.sin, (np.ones(2),), modes=("fwd", "rev"))


def test_float32_inputs_use_float32_tolerances():
    check_grads(tnp.tanh, (np.linspace(-1, 1, 5).astype(np.float32),))
    assert tg.grad(lambda x: tnp.tanh(x).sum())(np.ones(2, np.float32)).dtype == np.float32
