"""The Python-float loop executor (``tapegrad._jit.scalar``) against the generic one: the step's
compiled program run once per step on 0-d arrays. Bit-identical for the exact operations, to a few
ulps for the transcendental ones; None (the caller's signal to rerun generically) wherever NumPy
would return inf/NaN with a warning; None for every program it cannot run faithfully."""
from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

import tapegrad as tg
import tapegrad.numpy as tnp
from _device import xp as device_xp
from _tol import assert_close
from tapegrad._core import Primitive, ShapedArray, bind
from tapegrad._jit.codegen import compile_program
from tapegrad._jit.passes import optimize
from tapegrad._jit.scalar import _GLOBALS, SCALAR_FUNCTIONS, Scalar, compile_scalar_loop
from tapegrad._jit.staging import stage
from tapegrad.extend import def_fusion

RNG = np.random.default_rng(14)


# ---- helpers -----------------------------------------------------------------------------------------
def staged(fun, carries, xs=(), consts=(), backend=np):
    """The program of ``fun(*carries, *x_slices, *consts) -> (*carries, *ys)`` on the values' types."""
    xs = [np.asarray(x) for x in xs]
    avals = ([ShapedArray(np.shape(v), np.asarray(v).dtype) for v in carries]
             + [ShapedArray(x.shape[1:], x.dtype) for x in xs]
             + [ShapedArray(np.shape(v), np.asarray(v).dtype) for v in consts])
    program = stage(lambda *ins: list(fun(*ins)), avals, [backend] * len(avals))[0]
    return optimize(program)


def generic(program, n_carry, carries, xs, consts, length, reverse=False):
    """The reference: the step's compiled program run once per step, results stacked."""
    run = compile_program(program)
    carry, rows = [np.asarray(c) for c in carries], []
    for i in (range(length - 1, -1, -1) if reverse else range(length)):
        outs = run(*carry, *[x[i] for x in xs], *consts)
        carry, y = outs[:n_carry], outs[n_carry:]
        rows.append(y)
    if reverse:
        rows.reverse()
    dtypes = [np.asarray(x.value).dtype if not hasattr(x, "aval") else x.aval.dtype
              for x in program.outputs[n_carry:]]
    ys = [np.array([row[k] for row in rows], dtype).reshape(length) for k, dtype in enumerate(dtypes)]
    return [np.asarray(c) for c in carry], ys


def assert_same_bits(actual, desired):
    assert actual.dtype == desired.dtype and actual.shape == desired.shape, (actual, desired)
    assert actual.tobytes() == desired.tobytes(), (actual, desired)


def run_both(fun, carries, xs=(), consts=(), length=None, reverse=False):
    xs = [np.asarray(x) for x in xs]
    consts = [np.asarray(c) for c in consts]
    length = len(xs[0]) if length is None else length
    program = staged(fun, carries, xs, consts)
    loop = compile_scalar_loop(program, len(carries), len(xs))
    assert loop is not None, f"not eligible:\n{program}"
    carries = [np.asarray(c) for c in carries]
    got = loop(carries, xs, consts, length, reverse)
    return got, generic(program, len(carries), carries, xs, consts, length, reverse), loop


def uniform(lo, hi, n=50):
    return RNG.uniform(lo, hi, n)


# ---- the exact operations: bit-identical, in loops ----------------------------------------------------
def euler(x, v, k, c):
    return x + 0.01 * v, v + 0.01 * (-k * x - c * v), x


def arithmetic(a, b):
    return (a + b) / (b * b + 1.0) - (-a) * 0.5, a - b / 3


def selects(a, b):
    return tnp.where(b > a, b, a * 0.5), a <= b, tnp.where(a != b, 1.0, 2.0)


def roots(a, b):
    return tnp.sqrt(tnp.abs(a) + tnp.square(b)) * 0.9, tnp.reciprocal(b), tnp.maximum(a, b), tnp.minimum(b, -0.0)


def logic(flag, count, b):
    flag = tnp.logical_or(tnp.logical_not(flag), b > 0.9)
    both = tnp.logical_and(flag, b < 0.5)
    return flag, count + tnp.where(flag, 1.0, 0.0) + tnp.astype(both, np.float64), both, b >= 0.25


def operators(flag, b):  # Python's | and & on traced bools bind bitwise_or / bitwise_and
    flag = (flag & (b < 0.8)) | (b > 0.95)
    return flag, flag | (b < 0.1), (b > 0.2) & (b < 0.4)


def casts(a, b):
    return tg.stop_gradient(a) * 0.5 + tnp.astype(b > 0.5, np.float64), tnp.astype(b, np.bool_)


EXACT = {
    "euler": (lambda x, v, i, k, c: euler(x, v, k, c), [1.0, 0.0], [np.arange(40)], [1.5, 0.2]),
    "arithmetic": (arithmetic, [0.3], [uniform(-2, 2)], []),
    "selects": (selects, [0.1], [uniform(-1, 1)], []),
    "roots": (roots, [2.0], [uniform(0.5, 3)], []),
    "logic": (logic, [np.bool_(True), 0.0], [uniform(0, 1)], []),
    "operators": (operators, [np.bool_(True)], [uniform(0, 1)], []),
    "casts": (casts, [1.0], [np.concatenate([uniform(0, 1, 20), [0.0, -0.0]])], []),
}


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("name", sorted(EXACT))
def test_exact_bodies_are_bit_identical(name, reverse):
    fun, carries, xs, consts = EXACT[name]
    (carry, ys), (carry_ref, ys_ref), _ = run_both(fun, carries, xs, consts, reverse=reverse)
    assert len(carry) == len(carry_ref) and len(ys) == len(ys_ref)
    for a, b in zip(carry + ys, carry_ref + ys_ref):
        assert_same_bits(a, b)


@pytest.mark.parametrize("name", sorted(EXACT))
def test_length_zero_returns_the_carries_and_empty_ys(name):
    fun, carries, xs, consts = EXACT[name]
    (carry, ys), (carry_ref, ys_ref), _ = run_both(fun, carries, [x[:0] for x in xs], consts, length=0)
    for a, b in zip(carry + ys, carry_ref + ys_ref):
        assert_same_bits(a, b)
    assert all(y.shape == (0,) for y in ys)


def test_final_carries_are_fresh_arrays():
    carries = [np.array(1.0), np.array(0.0)]
    (carry, _), _, loop = run_both(EXACT["euler"][0], carries, [np.arange(0)], [1.5, 0.2], length=0)
    assert all(type(c) is np.ndarray and c.shape == () and c.flags.owndata for c in carry)
    assert not any(np.shares_memory(c, d) for c in carry for d in carries)


def test_reverse_reads_the_last_slice_first_and_returns_ys_in_order_of_xs():
    xs = [np.array([1.0, 2.0, 4.0])]
    (carry, ys), _, _ = run_both(lambda s, x: (s * 10.0 + x, s), [0.0], xs, reverse=True)
    assert float(carry[0]) == 421.0  # 4, then 2, then 1
    assert ys[0].tolist() == [42.0, 4.0, 0.0]  # the carry each slice met, in the order of xs


def test_the_loop_is_straight_line_python_with_the_carries_in_locals():
    _, _, loop = run_both(EXACT["euler"][0], [1.0, 0.0], [np.arange(3)], [1.5, 0.2])
    assert "for _i in" in loop.source and "float(carries[0])" in loop.source
    assert "X0" not in loop.source  # the integer index is never read: it is not even converted


# ---- each scalar spelling on special values, bit for bit ----------------------------------------------
SPECIAL = [0.0, -0.0, 1.0, -2.5, 1e308, -1e-310, math.inf, -math.inf, math.nan]
BINARY_EXACT = {"add": np.add, "subtract": np.subtract, "multiply": np.multiply, "divide": np.divide,
                "maximum": np.maximum, "minimum": np.minimum, "equal": np.equal, "not_equal": np.not_equal,
                "less": np.less, "less_equal": np.less_equal, "greater": np.greater,
                "greater_equal": np.greater_equal, "logical_and": np.logical_and, "logical_or": np.logical_or}
UNARY_EXACT = {"negative": np.negative, "absolute": np.absolute, "sqrt": np.sqrt, "square": np.square,
               "reciprocal": np.reciprocal, "logical_not": np.logical_not}


def _spelled(name, *values):
    """The scalar spelling of NumPy's ``name`` evaluated on Python floats; None where Python raises."""
    names = "xyz"[:len(values)]
    text = SCALAR_FUNCTIONS[name](*[Scalar(n, "f") for n in names]).text
    try:
        return eval(text, dict(_GLOBALS), dict(zip(names, values)))  # noqa: S307 — our own spelling
    except (ArithmeticError, ValueError):
        return None


@pytest.mark.parametrize("name", sorted(BINARY_EXACT) + sorted(UNARY_EXACT))
def test_each_exact_spelling_matches_numpy_bit_for_bit_or_raises(name):
    ufunc = BINARY_EXACT.get(name) or UNARY_EXACT[name]
    pairs = [(x, y) for x in SPECIAL for y in SPECIAL] if name in BINARY_EXACT else [(x,) for x in SPECIAL]
    raised = 0
    for values in pairs:
        got = _spelled(name, *values)
        with np.errstate(all="ignore"):
            want = ufunc(*[np.array(v) for v in values])
        if got is None:  # only where NumPy's answer is inf or NaN: the loop then falls back
            raised += 1
            assert not np.isfinite(want), (name, values)
            continue
        assert_same_bits(np.array(got, want.dtype), np.asarray(want))
    assert raised < len(pairs)


def test_where_selects_without_promoting():
    text = SCALAR_FUNCTIONS["where"](Scalar("c", "b"), Scalar("x", "f"), Scalar("y", "f")).text
    for c in (True, False):
        for x, y in [(-0.0, 0.0), (math.nan, 1.0), (math.inf, -math.inf)]:
            got = eval(text, {}, {"c": c, "x": x, "y": y})  # noqa: S307
            assert_same_bits(np.array(got), np.where(np.array(c), np.array(x), np.array(y)))


# ---- transcendental functions: the C library's, within a few ulps of NumPy's loops ----------------------
def transcendental(a, b):
    return (tnp.sin(a) * tnp.exp(-b * b) + tnp.tanh(b) + tnp.log1p(b * b) * 0.1 + tnp.cos(b) * 0.01,
            tnp.power(b, 1.5) + tnp.log(b) + tnp.arctan2(a, b) + tnp.sqrt(b), b ** 2)


def test_transcendental_bodies_agree_to_a_few_ulps():
    (carry, ys), (carry_ref, ys_ref), loop = run_both(transcendental, [0.2], [uniform(0.1, 2.0, 200)])
    for a, b in zip(carry + ys[:1], carry_ref + ys_ref[:1]):
        assert_close(a, b, ulps=8)
    assert_same_bits(ys[1], ys_ref[1])  # b ** 2 is b * b, as NumPy's power computes it
    assert "_pow(" in loop.source and "_sin(" in loop.source


# ---- NaN and inf: propagated where they stay inside, the generic loop wherever they come out -------------
def test_nan_and_inf_inside_the_step_propagate_as_in_numpy():
    xs = [np.array([1.0, math.nan, math.inf, -math.inf, -0.0, 2.0])]

    def body(a, b):
        finite = tnp.logical_and(b == b, tnp.abs(b) < math.inf)
        return a + tnp.where(finite, b, 0.0), tnp.maximum(b, 0.0) != tnp.minimum(b, 0.0), finite

    (carry, ys), (carry_ref, ys_ref), _ = run_both(body, [0.0], xs)
    for a, b in zip(carry + ys, carry_ref + ys_ref):
        assert_same_bits(a, b)


def test_a_non_finite_result_hands_the_loop_back():
    xs = [np.array([1.0, math.nan, 2.0])]
    program = staged(lambda a, b: (a + b, b * 2.0), [0.0], xs)
    assert compile_scalar_loop(program, 1, 1)([np.array(0.0)], xs, [], 3, False) is None
    _, ys = generic(program, 1, [np.array(0.0)], xs, [], 3)  # NaN in, NaN out, no warning: the generic loop
    assert np.isnan(ys[0][1])


FALLBACKS = {  # a step where NumPy returns inf or NaN with a RuntimeWarning; Python raises or overflows
    "divide by zero": (lambda a, b: (a / b,), 0.0),
    "zero / zero": (lambda a, b: (a * 0.0 / b,), 0.0),
    "reciprocal of zero": (lambda a, b: (tnp.reciprocal(b) + a,), 0.0),
    "log of zero": (lambda a, b: (a + tnp.log(b),), 0.0),
    "log of a negative": (lambda a, b: (a + tnp.log(b),), -1.0),
    "exp overflows": (lambda a, b: (a + tnp.exp(b),), 1000.0),
    "sqrt of a negative": (lambda a, b: (a + tnp.sqrt(b),), -1.0),
    "power of a negative base": (lambda a, b: (a + tnp.power(b, 1.0 / 3.0),), -8.0),
    "product overflows": (lambda a, b: (a + b * 1e300,), 1e300),
    "sin of inf": (lambda a, b: (a + tnp.sin(b),), math.inf),
}


@pytest.mark.parametrize("name", sorted(FALLBACKS))
def test_where_numpy_warns_the_loop_hands_back(name):
    fun, bad = FALLBACKS[name]
    xs = [np.array([1.0, bad, 2.0])]
    program = staged(fun, [1.0], xs)
    loop = compile_scalar_loop(program, 1, 1)
    assert loop is not None
    assert loop([np.array(1.0)], [xs[0][[0, 2]]], [], 2, False) is not None  # the good slices alone run
    assert loop([np.array(1.0)], xs, [], 3, False) is None
    # what the caller's rerun gives: NumPy's value and warning (under NumPy's default errstate, set here
    # so that no floating-point state another test left behind can change it)
    with np.errstate(all="warn"), pytest.warns(RuntimeWarning):
        carry, _ = generic(program, 1, [np.array(1.0)], xs, [], 3)
    assert not np.isfinite(carry[0])


def test_errstate_that_reports_underflow_hands_back():
    xs = [np.array([1e-200, 1e-200])]
    program = staged(lambda a, b: (a * b,), [1e-200], xs)
    loop = compile_scalar_loop(program, 1, 1)
    assert loop([np.array(1e-200)], xs, [], 2, False) is not None
    with np.errstate(under="raise"):
        assert loop([np.array(1e-200)], xs, [], 2, False) is None
        with pytest.raises(FloatingPointError):
            generic(program, 1, [np.array(1e-200)], xs, [], 2)


def test_overflow_under_errstate_raise_is_not_silent():
    xs = [np.array([1e300])]
    program = staged(lambda a, b: (a * b,), [1e300], xs)
    with np.errstate(over="raise"):
        assert compile_scalar_loop(program, 1, 1)([np.array(1e300)], xs, [], 1, False) is None


# ---- what is not eligible -----------------------------------------------------------------------------
def _unregistered(name, impl, template):
    """A primitive kept out of the registry (whose tests ask every entry for all its rules)."""
    prim = Primitive(name)
    prim.def_impl(impl)
    prim.def_abstract_eval(lambda *avals: avals[0])
    def_fusion(prim, template)
    return prim


_fusion_if_p = _unregistered("test_scalar_if", np.abs, lambda f, x: x if x > 0 else -x)  # branches on x
_fmod_p = _unregistered("test_scalar_fmod", np.fmod, "fmod")  # a NumPy name with no scalar spelling


INELIGIBLE = {
    "float32 carry": (lambda a, b: (a * 2.0, b), [np.float32(1.0)], [uniform(0, 1, 3)]),
    "vector carry": (lambda a, b: (a * b, b), [np.ones(2)], [uniform(0, 1, 3)]),
    "matmul": (lambda a, b: (tnp.matmul(a, a) + a, b), [np.ones(2)], [uniform(0, 1, 3)]),
    "integer arithmetic": (lambda a, i: (a + 1,), [np.int64(0)], [np.arange(3)]),
    "integer read": (lambda a, i: (a * i,), [1.0], [np.arange(3)]),
    "no template (floor)": (lambda a, b: (tnp.floor(a) + b,), [1.0], [uniform(0, 1, 3)]),
    "bool arithmetic": (lambda a, b: (a + (b > 0.5),), [np.bool_(True)], [uniform(0, 1, 3)]),
    "template that branches": (lambda a, b: (bind(_fusion_if_p, a) + b,), [1.0], [uniform(0, 1, 3)]),
    "a function with no scalar spelling": (lambda a, b: (bind(_fmod_p, a, b),), [1.0], [uniform(0, 1, 3)]),
    "several results": (lambda a, b: (tnp.linalg.eigh(a * np.eye(2) + b)[0][0] + a, b), [1.0],
                        [uniform(0, 1, 3)]),
}


@pytest.mark.parametrize("name", sorted(INELIGIBLE))
def test_ineligible_programs_give_none(name):
    fun, carries, xs = INELIGIBLE[name]
    program = staged(fun, carries, xs)
    assert compile_scalar_loop(program, len(carries), len(xs)) is None


def test_a_device_backend_is_not_eligible():
    program = staged(lambda a, b: (a * b,), [1.0], [uniform(0, 1, 3)], backend=device_xp)
    assert compile_scalar_loop(program, 1, 1) is None


def test_an_unread_integer_input_is_eligible():
    program = staged(lambda a, i: (a * 2.0, a), [1.0], [np.arange(3)])
    loop = compile_scalar_loop(program, 1, 1)
    carry, ys = loop([np.array(1.0)], [np.arange(3)], [], 3, False)
    assert float(carry[0]) == 8.0 and ys[0].tolist() == [1.0, 2.0, 4.0]


# ---- the bodies jit(grad(...)) of a scalar ODE produces ---------------------------------------------------
def _ode_loss(k, c, x0, v0):
    x, v = tg.fori_loop(0, 30, lambda i, s: (s[0] + 0.01 * s[1], s[1] + 0.01 * (-k * s[0] - c * s[1])), (x0, v0))
    return (x - 0.5) ** 2 + v ** 2


def _ode_scan_loss(k, c, x0, v0):
    def step(s, _):
        s = (s[0] + 0.01 * s[1], s[1] + 0.01 * (-k * s[0] - c * s[1]))
        return s, s[0]
    _, xs = tg.scan(step, (x0, v0), None, length=30)
    return tnp.sum(xs ** 2)


@pytest.mark.parametrize("loss", [_ode_loss, _ode_scan_loss])
def test_every_loop_of_the_ode_gradient_program_runs_as_scalars(loss):
    args = [np.array(1.5), np.array(0.2), np.array(1.0), np.array(0.0)]
    program = tg.make_program(tg.grad(loss, (0, 1)))(*args)
    scans = [eqn for eqn in program.eqns if eqn.prim.name == "scan"]
    assert len(scans) == 2  # the forward loop and its reverse-mode twin
    for eqn in scans:
        body, n_carry, n_xs = eqn.params["body"], eqn.params["n_carry"], eqn.params["n_xs"]
        body_program = optimize(body.program)
        loop = compile_scalar_loop(body_program, n_carry, n_xs)
        assert loop is not None, f"not eligible:\n{body_program}"
        avals = [v.aval for v in body_program.invars]
        carries = [np.asarray(RNG.standard_normal(), a.dtype) for a in avals[:n_carry]]
        xs = [np.asarray(RNG.standard_normal(eqn.params["length"]) * 3, a.dtype) for a in avals[n_carry:n_carry + n_xs]]
        consts = [np.asarray(RNG.standard_normal(), a.dtype) for a in avals[n_carry + n_xs:]]
        for reverse in (False, True):
            got = loop(carries, xs, consts, eqn.params["length"], reverse)
            want = generic(body_program, n_carry, carries, xs, consts, eqn.params["length"], reverse)
            for a, b in zip(got[0] + got[1], want[0] + want[1]):
                assert_same_bits(a, b)


def test_no_warning_escapes_a_clean_loop():
    fun, carries, xs, consts = EXACT["euler"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        run_both(fun, carries, xs, consts)
