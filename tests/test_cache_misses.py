"""``tg.config.explain_cache_misses``: a ``jit`` cache miss after the first call logs, on the logger
``"tapegrad.jit"``, what changed, naming the argument; and the switch's own checks."""
from __future__ import annotations

import logging
import os
import subprocess
import sys

import numpy as np
import pytest

import tapegrad as tg
import tapegrad.numpy as tnp


@pytest.fixture
def explained(caplog):
    """The switch on for one test (restored after it), and the records of ``tapegrad.jit``."""
    tg.config.explain_cache_misses = True
    caplog.set_level(logging.WARNING, logger="tapegrad.jit")
    try:
        yield caplog
    finally:
        tg.config.explain_cache_misses = False


def messages(caplog) -> list:
    return [r.getMessage() for r in caplog.records if r.name == "tapegrad.jit"]


def scale(x, params, n=1, *, factor=1.0):
    return tnp.sum(x) * tnp.sum(params["w"]) * n * tnp.sum(factor)


def test_no_message_on_the_first_call_nor_on_a_hit(explained):
    f = tg.jit(scale)
    f(np.ones(3), {"w": np.ones(3)})
    f(np.ones(3), {"w": np.ones(3)})
    assert messages(explained) == []


@pytest.mark.parametrize("second, expected", [
    ((np.ones(4), {"w": np.ones(3)}), "argument 0 (x): shape (3,) -> (4,)"),
    ((np.ones(3, np.float32), {"w": np.ones(3)}), "argument 0 (x): dtype float64 -> float32"),
    ((np.ones(3), {"w": np.ones(3), "b": 1.0}), "argument 1 (params): pytree structure"),
    ((np.ones(3), {"w": np.ones(2)}), "argument 1 (params)['w']: shape (3,) -> (2,)"),
    ((2.0, {"w": np.ones(3)}), "argument 0 (x): a float64 array of shape (3,) -> a Python float"),
    ((np.ones(3), {"w": np.ones(3)}, 2), "argument 2 (n) is passed now"),
])
def test_a_miss_names_the_argument_and_what_changed(explained, second, expected):
    f = tg.jit(scale)
    f(np.ones(3), {"w": np.ones(3)})
    f(*second)
    (message,) = messages(explained)
    assert message.startswith("jit: staging scale again (1 program(s) cached)")
    assert expected in message
    assert message.count("argument") == 1, message  # only what changed is named


def test_a_keyword_argument_is_named(explained):
    f = tg.jit(scale)
    f(np.ones(3), {"w": np.ones(3)}, factor=np.ones(3))
    f(np.ones(3), {"w": np.ones(3)}, factor=np.ones(5))
    assert "argument 'factor': shape (3,) -> (5,)" in messages(explained)[0]


def test_a_static_value_is_named(explained):
    f = tg.jit(lambda x, k: x * k, static_argnums=1)
    f(np.ones(2), 3)
    f(np.ones(2), 4)
    assert "static argument 1 (k): 3 -> 4" in messages(explained)[0]


def test_the_closest_cached_program_is_compared(explained):
    f = tg.jit(scale)
    f(np.ones(3), {"w": np.ones(3)})
    f(np.ones(4), {"w": np.ones(4)})
    f(np.ones(4), {"w": np.ones(5)})  # one leaf away from the second program, two from the first
    last = messages(explained)[-1]
    assert "(2 program(s) cached)" in last
    assert "argument 1 (params)['w']: shape (4,) -> (5,)" in last and "argument 0" not in last


class Net(tg.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = tg.Parameter(np.ones(3))
        self.drop = tg.nn.Dropout(0.5)

    @tg.jit
    def __call__(self, x):
        return self.drop(x * self.w)


def test_module_mode_and_new_instance_are_named(explained):
    net = Net()
    net(np.ones(3))
    net.eval()
    net(np.ones(3))
    Net()(np.ones(3))
    mode, instance = messages(explained)
    assert "module mode changed: Dropout.training True -> False" in mode
    assert "first call on this instance" in instance


def test_a_parameter_cast_by_astype_is_named(explained):
    net = tg.nn.Dense(2, 3, seed=0)
    f = tg.jit(lambda x: net(x))
    x = np.ones((1, 2), np.float32)
    f(x)
    net.astype(np.float64)
    assert f(x).dtype == np.float64
    (message,) = messages(explained)
    assert "Parameter 'weight' changed type: float32[3, 2] -> float64[3, 2]" in message
    assert "Parameter 'bias' changed type: float32[3] -> float64[3]" in message


def test_nothing_is_logged_when_the_switch_is_off(caplog):
    caplog.set_level(logging.WARNING, logger="tapegrad.jit")
    f = tg.jit(scale)
    f(np.ones(3), {"w": np.ones(3)})
    f(np.ones(4), {"w": np.ones(4)})
    assert messages(caplog) == []


def test_a_full_cache_says_so(explained):
    f = tg.jit(lambda x: x + 1, cache_size=1)
    f(np.ones(1))
    f(np.ones(2))
    assert "the cache is full: cache_size=1" in messages(explained)[-1]


def test_the_switch_takes_only_bools_and_known_names():
    with pytest.raises(TypeError, match="explain_cache_misses must be a bool"):
        tg.config.explain_cache_misses = 1
    assert tg.config.explain_cache_misses is False  # unchanged by the refused value
    with pytest.raises(AttributeError):
        tg.config.explain_cache_miss = True


def _config_in_subprocess(value: str):
    env = dict(os.environ, TAPEGRAD_EXPLAIN_CACHE_MISSES=value)
    return subprocess.run([sys.executable, "-c", "import tapegrad; print(tapegrad.config.explain_cache_misses)"],
                          env=env, capture_output=True, text=True)


@pytest.mark.parametrize("value, expected", [("1", "True"), ("true", "True"), ("0", "False"), ("", "False")])
def test_the_environment_variable_sets_the_default(value, expected):
    result = _config_in_subprocess(value)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == expected


def test_a_bad_environment_value_names_the_variable():
    result = _config_in_subprocess("maybe")
    assert result.returncode != 0
    assert "TAPEGRAD_EXPLAIN_CACHE_MISSES='maybe' is not a boolean" in result.stderr
