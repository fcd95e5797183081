"""Faults: an interrupt at any instant of a transform's set-up or tear-down, or an exception raised
inside ``fn``, leaves no transform, substitution, staging or write log set in the thread, and the
next call gives the right numbers.

The scopes (``new_main``, the Parameter scopes) are checked deterministically: a ``sys.settrace`` hook
raises ``KeyboardInterrupt`` before each line they run, one line per trial, every line in turn, and as
each scope's ``__enter__`` returns (CPython's window before the with block, which leaves the scope's
generator suspended until the exception goes; also with it going while a later transform runs). A
timed test then interrupts whole calls with ``SIGALRM`` at random microsecond offsets.
"""
from __future__ import annotations

import contextlib
import gc
import random
import signal
import sys
import warnings
import weakref

import numpy as np
import pytest

import tapegrad as tg
import tapegrad.numpy as tnp
from _tol import assert_close
from tapegrad import _core, _params
from tapegrad._core import trace_stack


class Net(tg.nn.Module):
    def __init__(self):
        super().__init__()
        rng = np.random.default_rng(0)
        self.w1 = tg.Parameter(rng.normal(size=(3, 4)))
        self.w2 = tg.Parameter(rng.normal(size=(4,)))

    def __call__(self, x):
        return tnp.tanh(x @ self.w1) @ self.w2


NET = Net()
X = np.random.default_rng(1).normal(size=(5, 3))
WEIGHTS = NET.trainable_params()


def _loss(x):
    return tnp.sum(NET(x) ** 2)


def _weight_grads():
    return tg.grad(_loss, grad_position=None, weights=WEIGHTS)(X)


def _reference():
    """The right numbers, written in NumPy: the forward, and the gradients of the weights."""
    w1, w2 = NET.w1.value, NET.w2.value
    h = np.tanh(X @ w1)
    y = h @ w2
    g_y = 2 * y
    g_w2 = h.T @ g_y
    g_w1 = X.T @ (np.outer(g_y, w2) * (1 - h ** 2))
    return y, (g_w1, g_w2)


# every scope whose entry or exit an interrupt could split
SCOPES = {
    _core.new_main.__wrapped__.__code__: "new_main",
    _core.MainTrace.close.__code__: "MainTrace.close",
    _core.scoped.__wrapped__.__code__: "scoped",
    _core._scope.__code__: "_scope",  # the body both delegate to
    _core._Scope.end.__code__: "_Scope.end",
    _params.substitute.__code__: "substitute",
    _params.staging_parameters.__code__: "staging_parameters",
    _params.recording_writes.__code__: "recording_writes",
}

# calls that open every scope: the tape with weights (new_main, substitute), jit staging with a
# Parameter read (staging_parameters), checkpoint under grad with weights (recording_writes), forward
# mode and vmap of grad (nested mains)
SCENARIOS = {
    "grad_weights": _weight_grads,
    "jit_staging": lambda: tg.jit(NET)(X),
    "checkpoint": lambda: tg.grad(lambda x: tnp.sum(tg.checkpoint(NET)(x)), grad_position=None, weights=WEIGHTS)(X),
    "jvp": lambda: tg.jvp(NET, (X,), (np.ones_like(X),)),
    "vmap_grad": lambda: tg.vmap(tg.grad(lambda x: NET(x[None])[0]))(X),
}


def _is_clean() -> bool:
    return (trace_stack() == () and not _params._substitutions.get() and _params._staging.get() is None
            and _params._writes.get() is None)


def _collect_until_clean():
    """Collect only when a value was left (a collection of the suite's heap is slow), up to three
    times: a generator held by a finalised cycle goes at the next collection."""
    for _ in range(3):
        if _is_clean():
            return
        gc.collect()


def _assert_clean():
    assert trace_stack() == ()
    assert not _params._substitutions.get()
    assert _params._staging.get() is None
    assert _params._writes.get() is None


def _assert_working():
    """The next plain call, grad with weights and jit of the module give the NumPy numbers."""
    y, (g_w1, g_w2) = _reference()
    assert_close(NET(X), y)
    g1, g2 = _weight_grads()
    assert_close(g1, g_w1)
    assert_close(g2, g_w2)
    assert_close(tg.jit(NET)(X), y)


def _run_traced(scenario, interrupt_at=None):
    """Run ``scenario`` with a trace hook on the scopes' frames. Returns the lines they ran, as
    ``(scope, line)``; with ``interrupt_at=k``, raises KeyboardInterrupt before the k-th of them."""
    lines = []

    def local(frame, event, arg):
        if event == "line":
            if len(lines) == interrupt_at:
                lines.append((SCOPES[frame.f_code], frame.f_lineno))
                raise KeyboardInterrupt  # CPython turns tracing off after a hook raises
            lines.append((SCOPES[frame.f_code], frame.f_lineno))
        return local
    _with_trace(scenario, local, SCOPES)
    return lines


def _with_trace(scenario, local, codes):
    """Run ``scenario`` with ``local`` as the trace function of the frames that run one of ``codes``."""
    def hook(frame, event, arg):
        return local if frame.f_code in codes else None
    previous = sys.gettrace()
    sys.settrace(hook)
    try:
        scenario()
    finally:
        sys.settrace(previous)


@pytest.mark.parametrize("name", SCENARIOS)
def test_an_interrupt_before_any_line_of_the_scopes_leaves_no_state(name):
    scenario = SCENARIOS[name]
    lines = _run_traced(scenario)
    scopes = {scope for scope, _ in lines}
    assert "new_main" in scopes and len(lines) >= 5, lines  # the hook really sees the scopes
    for k in range(len(lines)):
        with pytest.raises(KeyboardInterrupt):
            _run_traced(scenario, interrupt_at=k)
        _assert_clean()
        _assert_working()


def test_the_scenarios_cover_every_scope():
    seen, entered = set(), set()
    for scenario in SCENARIOS.values():
        seen |= {scope for scope, _ in _run_traced(scenario)}
        entered |= set(_run_entering(scenario))
    assert seen == set(SCOPES.values())
    assert entered == set(GENERATOR_SCOPES.values())


# the generator-based scopes, by the code of their generator function
GENERATOR_SCOPES = {
    _core.new_main.__wrapped__.__code__: "new_main",
    _core.scoped.__wrapped__.__code__: "scoped",
}
# contextlib's __enter__ (private, stable since Python 3.2): it runs a scope's generator to its yield
_ENTER = contextlib._GeneratorContextManager.__enter__.__code__


def _run_entering(scenario, interrupt_at=None, entered=None):
    """Run ``scenario``; returns the generator scopes it entered, in order. With ``interrupt_at=k``,
    raises KeyboardInterrupt as the k-th ``__enter__`` returns: CPython's window, in which a signal
    (checked after a call returns) leaves the scope's generator suspended, its value set and its with
    block never started, until the exception that holds it goes. A weak reference to that generator
    is appended to ``entered``."""
    names = []

    def on_return(frame, event, arg):
        gen = frame.f_locals["self"].gen if event == "return" else None
        if gen is not None and gen.gi_code in GENERATOR_SCOPES:
            names.append(GENERATOR_SCOPES[gen.gi_code])
            if len(names) - 1 == interrupt_at:
                entered.append(weakref.ref(gen))
                raise KeyboardInterrupt
        return on_return
    _with_trace(scenario, on_return, {_ENTER})
    return names


@pytest.mark.parametrize("name", SCENARIOS)
def test_an_interrupt_as_a_scope_is_entered_leaves_no_state(name):
    """A scope left suspended by an interrupt puts nothing back when it is finalised after the scopes
    around it have ended: checkpoint's substitution under grad with weights used to bring back the
    ended grad's tracers (a timed interrupt landed there now and then)."""
    scenario = SCENARIOS[name]
    names = _run_entering(scenario)
    assert "new_main" in names, names  # the hook really sees the scopes
    for k in range(len(names)):
        entered = []
        with pytest.raises(KeyboardInterrupt):
            _run_entering(scenario, interrupt_at=k, entered=entered)
        _collect_until_clean()
        assert entered[0]() is None  # the suspended scope has been finalised
        _assert_clean()
        _assert_working()


def _releasing(held, generator, seen):
    """``_loss``, which first drops the exceptions in ``held`` (so the suspended scope's ``generator``,
    a weak reference, is finalised while the transform runs) and notes in ``seen`` whether it went
    and the transforms then open."""
    def loss(x):
        held.clear()
        if generator() is not None:  # held by a cycle
            gc.collect()
        seen["finalised"], seen["stack"] = generator() is None, trace_stack()
        return _loss(x)
    return loss


@pytest.mark.parametrize("name", SCENARIOS)
def test_a_scope_finalised_while_a_later_transform_runs_changes_nothing(name):
    """A suspended scope that goes while another transform runs (the exception holding it kept, then
    dropped inside ``fn``) leaves that transform's stack and substitutions alone: it used to put back
    its own previous values over them, and grad with weights then returned zero gradients."""
    scenario = SCENARIOS[name]
    _, (g_w1, g_w2) = _reference()
    names = _run_entering(scenario)
    assert "new_main" in names, names
    for k in range(len(names)):
        held, entered, seen = [], [], {}
        try:
            _run_entering(scenario, interrupt_at=k, entered=entered)
        except KeyboardInterrupt as e:
            held.append(e)

        g1, g2 = tg.grad(_releasing(held, entered[0], seen), grad_position=None, weights=WEIGHTS)(X)
        assert seen["finalised"] and len(seen["stack"]) == 1, (k, seen)
        assert_close(g1, g_w1)
        assert_close(g2, g_w2)
        _collect_until_clean()
        _assert_clean()


@pytest.mark.skipif(not hasattr(signal, "setitimer"), reason="needs signal.setitimer (POSIX)")
@pytest.mark.python_executor  # numba's start-up is not safe against interrupts
def test_timed_interrupts_at_random_offsets_leave_no_state():
    """200 interrupts (SIGALRM raising KeyboardInterrupt) at random offsets of up to 2 ms into a
    stream of calls that open and close every scope."""
    rng = random.Random(0)
    scenarios = list(SCENARIOS.values())
    armed = [False]

    def interrupt(signum, frame):
        if armed[0]:  # a late signal, after the trial is over, must not escape the test
            armed[0] = False
            raise KeyboardInterrupt
    previous = signal.signal(signal.SIGALRM, interrupt)
    landed = 0
    # NumPy's errstate and Python's warnings filters have the same window between __enter__ and the
    # block (numpy.linalg's functions open an errstate): an interrupt there leaves NumPy's state, not
    # ours, changed, and later tests would run without NumPy's floating-point warnings. Put it back.
    numpy_errstate, warning_filters = np.geterr(), list(warnings.filters)
    try:
        for _ in range(200):
            try:
                armed[0] = True
                signal.setitimer(signal.ITIMER_REAL, rng.uniform(1e-6, 2e-3))
                for _ in range(1000):
                    rng.choice(scenarios)()
                armed[0] = False
            except KeyboardInterrupt:
                landed += 1
            armed[0] = False
            signal.setitimer(signal.ITIMER_REAL, 0)
            # an interrupt between a with statement's __enter__ and its block (CPython's own window)
            # leaves a value set until the generator behind it is finalised: the next calls must be
            # right at once, and the state clean once it is
            _assert_working()
            _collect_until_clean()
            _assert_clean()
    finally:
        armed[0] = False
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        np.seterr(**numpy_errstate)
        warnings.filters[:] = warning_filters
        getattr(warnings, "_filters_mutated", lambda: None)()  # CPython: cached filter decisions are stale
    # Python swallows (and prints) an interrupt that lands in a finalizer; nearly all land in the calls
    assert landed >= 150
    _assert_working()


def test_values_an_interrupt_leaves_set_are_ignored():
    """What CPython's window can leave set (a finished transform on the stack, its substitutions, its
    staging builder) is never used: the next plain call, grad with weights and jit are right."""
    leaked = {}

    def leak(a):
        leaked["stack"] = _core._trace_stack.get()
        leaked["subs"] = _params._substitutions.get()
        return tnp.sum(NET(a))
    tg.grad(leak, grad_position=None, weights=NET.trainable_params())(X)

    def leak_staging(a):
        leaked["staging"] = _params._staging.get()
        return NET(a)
    tg.jit(leak_staging)(X)
    tokens = [_core._trace_stack.set(leaked["stack"]), _params._substitutions.set(leaked["subs"]),
              _params._staging.set(leaked["staging"])]
    try:
        assert trace_stack() == ()
        _assert_working()
    finally:
        for var, token in zip((_core._trace_stack, _params._substitutions, _params._staging), tokens):
            var.reset(token)


# ---- exceptions raised inside fn ----------------------------------------------------------------
class Boom(Exception):
    pass


def _failing(exc_type):
    def fn(x):
        _ = tnp.sin(x) * NET.w2.value[0]  # some traced work (and a Parameter read) first
        raise exc_type("inside fn")
    return fn


TRANSFORMS = {
    "grad": lambda f: tg.grad(f)(X),
    "grad_weights": lambda f: tg.grad(f, grad_position=None, weights=WEIGHTS)(X),
    "value_and_grad": lambda f: tg.value_and_grad(f)(X),
    "vjp": lambda f: tg.vjp(f, X),
    "jvp": lambda f: tg.jvp(f, (X,), (X,)),
    "vmap": lambda f: tg.vmap(f)(X),
    "jit": lambda f: tg.jit(f)(X),
    "checkpoint": lambda f: tg.grad(tg.checkpoint(f))(X),
    "grad_of_grad": lambda f: tg.grad(lambda x: tnp.sum(tg.grad(f)(x)))(X),
    "vmap_of_grad": lambda f: tg.vmap(tg.grad(f))(X),
    "jit_of_vmap_of_grad": lambda f: tg.jit(tg.vmap(tg.grad(f)))(X),
    "grad_of_jit": lambda f: tg.grad(tg.jit(f), grad_position=None, weights=WEIGHTS)(X),
    "jacfwd_of_jacrev": lambda f: tg.jacfwd(tg.jacrev(f))(X),
}


@pytest.mark.parametrize("exc_type", [Boom, KeyboardInterrupt], ids=["Exception", "KeyboardInterrupt"])
@pytest.mark.parametrize("name", TRANSFORMS)
def test_an_exception_inside_fn_leaves_no_state(name, exc_type):
    before = [p.value.copy() for p in WEIGHTS]
    with pytest.raises(exc_type):
        TRANSFORMS[name](_failing(exc_type))
    _assert_clean()
    for p, value in zip(WEIGHTS, before):
        assert p.value is not None and np.array_equal(p.value, value)
    _assert_working()


def test_a_staged_assign_is_not_written_back_when_fn_raises():
    """Under jit, ``p.assign`` of a traced value is an output written back after the call: a call that
    raises writes nothing, and keeps no half-built program."""
    p = tg.Parameter(np.arange(3.0))
    fail = [True]

    def step(x):
        p.assign(p.value + x)
        if fail[0]:
            raise Boom("after the assign")
        return tnp.sum(p.value)
    jitted = tg.jit(step)
    with pytest.raises(Boom):
        jitted(np.ones(3))
    _assert_clean()
    assert np.array_equal(p.value, np.arange(3.0)) and jitted._cache_size() == 0
    fail[0] = False
    assert_close(jitted(np.ones(3)), np.float64(6.0))
    assert np.array_equal(p.value, np.arange(3.0) + 1) and jitted._cache_size() == 1


@pytest.mark.parametrize("where", ["grad", "checkpoint"])
def test_an_eager_assign_stays_when_fn_raises(where):
    """Outside jit staging, ``p.assign`` of a concrete value takes effect at once, as any Python side
    effect does; an exception raised later in ``fn`` does not undo it (docs/grad.md says so)."""
    p = tg.Parameter(np.zeros(2))

    def fn(x):
        p.assign(np.full(2, 7.0))
        raise Boom("after the assign")
    wrapped = tg.checkpoint(fn) if where == "checkpoint" else fn
    with pytest.raises(Boom):
        tg.grad(wrapped)(np.ones(2))
    _assert_clean()
    assert np.array_equal(p.value, np.full(2, 7.0))


def test_a_jitted_function_that_raised_for_one_signature_stages_again():
    calls = []

    def f(x, n):
        calls.append(n)
        if n == 1:
            raise Boom("n == 1")
        return x * n
    jitted = tg.jit(f, static_argnums=1)
    with pytest.raises(Boom):
        jitted(np.ones(2), 1)
    assert jitted._cache_size() == 0
    assert_close(jitted(np.ones(2), 2), np.full(2, 2.0))
    assert jitted._cache_size() == 1 and calls == [1, 2]


def test_a_transform_drops_an_ended_main_that_an_interrupt_left_on_the_stack():
    """``new_main`` leaves out mains that have ended (left by an interrupt in CPython's with-statement
    window); its end must set that filtered stack, not put the ended main back."""
    ended = _core.MainTrace(1, _core.EvalTrace, None)
    ended.close()
    token = _core._trace_stack.set((ended,))
    try:
        assert tg.grad(lambda x: x * x)(3.0) == 6.0
        assert _core._trace_stack.get() == ()
    finally:
        _core._trace_stack.reset(token)
