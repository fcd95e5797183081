"""tg.config.debug_nans / debug_infs: FloatingPointError at the first primitive that makes a NaN or an
infinity, naming the primitive, the shapes, the pass and the user's line; eagerly, under every transform,
and under jit (whose outputs are checked, the function then rerun op by op)."""
from __future__ import annotations

import inspect
import os
import subprocess
import sys

import numpy as np
import pytest

import tapegrad as tg
import tapegrad.numpy as tnp
from tapegrad import _config
from tapegrad._core import trace_stack

try:
    import numba  # noqa: F401
    HAVE_NUMBA = True
except ImportError:
    HAVE_NUMBA = False

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")  # NumPy's own "invalid value" warnings


def _switched_on(name: str):
    """``tg.config.<name>`` on for one test, and off again whatever the test does."""
    setattr(tg.config, name, True)
    try:
        yield
    finally:
        setattr(tg.config, name, False)


@pytest.fixture
def nans():
    yield from _switched_on("debug_nans")


@pytest.fixture
def infs():
    yield from _switched_on("debug_infs")


def _line_of(fn, text: str) -> int:
    lines, start = inspect.getsourcelines(fn)
    return start + next(k for k, line in enumerate(lines) if text in line)


def loss(x):
    y = tnp.log(x)  # the NaN: log of a negative number
    return tnp.sum(y * 2.0)


X_BAD = np.array([1.0, -1.0])


def _raises_at_log(run, pass_: str = "forward pass"):
    with pytest.raises(FloatingPointError) as info:
        run()
    message = str(info.value)
    assert "primitive 'log' made a NaN" in message and pass_ in message
    assert f"line {_line_of(loss, 'tnp.log(x)')}, in loss: y = tnp.log(x)" in message
    assert "Operands: float64[2]; result: float64[2] (holds NaN)" in message
    assert trace_stack() == ()
    return info.value


@pytest.mark.parametrize("route", ["eager", "grad", "value_and_grad", "vjp", "jvp", "vmap", "hessian",
                                   "jacfwd"])
def test_forward_nan_found_under_every_transform(nans, route):
    run = {"eager": lambda: loss(X_BAD), "grad": lambda: tg.grad(loss)(X_BAD),
           "value_and_grad": lambda: tg.value_and_grad(loss)(X_BAD), "vjp": lambda: tg.vjp(loss, X_BAD),
           "jvp": lambda: tg.jvp(loss, (X_BAD,), (np.ones(2),)), "hessian": lambda: tg.hessian(loss)(X_BAD),
           "jacfwd": lambda: tg.jacfwd(loss)(X_BAD),
           "vmap": lambda: tg.vmap(loss)(X_BAD[None])}[route]
    if route == "vmap":
        with pytest.raises(FloatingPointError, match=r"'log' made a NaN in the forward pass. Operands: float64\[1, "):
            run()
    else:
        _raises_at_log(run)


def norm(x):
    return tnp.sqrt(tnp.sum(x * x))  # at 0: sqrt' = inf, times x = 0 in the vjp of x * x: NaN


@pytest.mark.parametrize("compiled", [False, True])
@pytest.mark.parametrize("route", ["jit", "jit_grad", "jit_vmap", "grad_jit"])
def test_jit_reruns_op_by_op(nans, monkeypatch, compiled, route):
    if compiled and not HAVE_NUMBA:
        pytest.skip("the compiled executor needs numba")
    monkeypatch.setattr(tg.config, "compiled_executor", compiled)
    zero = np.zeros(2)
    run = {"jit": lambda: tg.jit(loss)(X_BAD), "jit_grad": lambda: tg.jit(tg.grad(norm))(zero),
           "jit_vmap": lambda: tg.jit(tg.vmap(loss))(X_BAD[None]), "grad_jit": lambda: tg.grad(tg.jit(norm))(zero)}
    with pytest.raises(FloatingPointError) as info:
        run[route]()
    message = str(info.value)
    if route in ("jit", "jit_vmap"):
        assert "primitive 'log' made a NaN in the forward pass" in message
    else:
        assert "the vjp rule of 'multiply' made a NaN in the cotangent of operand 0, in the reverse pass" in message
    if route != "grad_jit":  # under grad, jit's program runs through bind, primitive by primitive
        assert "output 0 holds a NaN" in str(info.value.__cause__)
    assert trace_stack() == ()
    # a good input passes, with the same numbers as without the check
    np.testing.assert_allclose(tg.jit(tg.grad(loss))(np.array([1.0, 2.0])), 2 / np.array([1.0, 2.0]), rtol=1e-15)


def test_reverse_pass_names_the_rule(nans):
    """The forward pass is clean (sqrt(0) = 0); the backward pass multiplies sqrt'(0) = inf by x = 0 (with
    NumPy's own product: the rule's result is what is checked)."""
    with pytest.raises(FloatingPointError) as info:
        tg.grad(norm)(np.zeros(2))
    message = str(info.value)
    assert "the vjp rule of 'multiply' made a NaN in the cotangent of operand 0, in the reverse pass" in message
    assert "Operands: float64[2], float64[2]; the cotangent of operand 0: float64[2] (holds NaN)" in message
    assert f"line {_line_of(test_reverse_pass_names_the_rule, 'tg.grad(norm)')}" in message


def test_jvp_pass(nans):
    with pytest.raises(FloatingPointError, match="jvp rule of 'multiply' made a NaN in the tangent, in the jvp pass"):
        tg.jvp(lambda x: x ** 0.5 * 0.0, (np.zeros(2),), (np.ones(2),))
    with pytest.raises(FloatingPointError, match="jvp pass"):
        tg.jacfwd(lambda x: x ** 0.5 * 0.0)(np.zeros(2))


def test_infs(infs):
    with pytest.raises(FloatingPointError, match=r"tg.config.debug_infs: the primitive 'log' made an infinity"):
        tnp.log(np.array([0.0, 1.0]))
    with pytest.raises(FloatingPointError, match="vjp rule of 'power' made an infinity in the cotangent of operand 0"):
        tg.jit(tg.grad(lambda x: tnp.sum(x ** 0.5)))(np.array([0.0]))
    tnp.log(np.array([-1.0]))  # a NaN is not an infinity: only debug_nans catches it


def test_off_by_default_and_silent():
    assert tg.config.debug_nans is False and tg.config.debug_infs is False and _config.checking is False
    assert np.isnan(loss(X_BAD))
    assert np.isnan(tg.jit(tg.grad(norm))(np.zeros(2))).all()


def test_what_is_not_checked(nans):
    """Integer results, and a NaN that the input already held but no primitive made... is made again by
    the first primitive that reads it: debug_nans reports that one (JAX does the same)."""
    assert tnp.sum(np.arange(3)) == 3
    with pytest.raises(FloatingPointError, match="'multiply' made a NaN"):
        tg.grad(lambda x: tnp.sum(x * 2.0))(np.array([np.nan]))


def test_state_is_intact_after_the_error(nans):
    p = tg.Parameter(np.array([1.0, 2.0]), name="p")

    @tg.jit
    def step(x):
        p.assign(p.value + x)
        return tnp.log(p.value)
    with pytest.raises(FloatingPointError):
        step(np.array([-5.0, 0.0]))
    np.testing.assert_array_equal(p.value, [1.0, 2.0])  # checked before any Parameter changes
    assert trace_stack() == ()
    tg.config.debug_nans = False
    step(np.array([1.0, 0.0]))
    np.testing.assert_array_equal(p.value, [2.0, 2.0])


def test_switch_types_and_environment(monkeypatch):
    with pytest.raises(TypeError, match="config.debug_nans must be a bool"):
        tg.config.debug_nans = 1
    for name, value, expected in [("TAPEGRAD_DEBUG_NANS", "1", True), ("TAPEGRAD_DEBUG_INFS", "off", False)]:
        monkeypatch.setenv(name, value)
        fresh = _config.Config()
        assert getattr(fresh, name[len("TAPEGRAD_"):].lower()) is expected
    assert _config.checking is False  # another instance switches nothing
    monkeypatch.setenv("TAPEGRAD_DEBUG_NANS", "maybe")
    with pytest.raises(ValueError, match="TAPEGRAD_DEBUG_NANS"):
        _config.Config()


def test_environment_variable_turns_it_on_at_import():
    code = ("import numpy as np, tapegrad.numpy as tnp\ntry:\n    tnp.log(np.array([-1.0]))\n"
            "except FloatingPointError as e:\n    print('raised', 'log' in str(e))")
    out = subprocess.run([sys.executable, "-W", "ignore", "-c", code], capture_output=True, text=True, check=True,
                         env={**os.environ, "TAPEGRAD_DEBUG_NANS": "1"})
    assert out.stdout.strip() == "raised True"
