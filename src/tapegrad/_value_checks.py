"""The NaN and Inf checker: ``tg.config.debug_nans`` and ``tg.config.debug_infs``.

With a check on, every primitive's result is tested where the primitive runs on concrete arrays
(``tapegrad._core.bind``, and the reverse- and forward-mode traces that call an impl themselves), and the
first one that holds a NaN (or an infinity) raises ``FloatingPointError``, as JAX's ``jax_debug_nans``
and PyTorch's ``detect_anomaly`` do. The message names what a user needs to find it: the primitive, the
shapes and dtypes of its operands and result, the pass that ran it, and the user's line that led there.

The pass and the line are read from the Python stack, and only when a check has failed, so a passing
check costs the test of its result and nothing else: a frame of the backward pass (``Tape._pass``) means
the reverse pass, whose record names the primitive being differentiated; a jvp rule's frame, the jvp
pass; otherwise the forward pass. The user's line is the innermost frame outside tapegrad and NumPy.

``jit`` checks its outputs instead (``tapegrad._jit.api``): the compiled program runs no primitive one by
one, so when an output is bad the function runs again without jit, op by op, which finds the primitive.
"""
from __future__ import annotations

import linecache
import os
import sys

import numpy

from tapegrad._backend import namespace_of
from tapegrad._config import config

_OWN_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep
_NUMPY_DIR = os.path.dirname(os.path.abspath(numpy.__file__)) + os.sep


def first_bad(value) -> str | None:
    """``"NaN"`` or ``"Inf"`` when ``value`` (an array or scalar) holds one the config checks for, else
    None. Integer, boolean and non-array values hold neither."""
    if hasattr(value, "_trace"):  # a tracer: checked where its concrete value is computed
        return None
    dtype = getattr(value, "dtype", None)
    if dtype is None:
        if not isinstance(value, (float, complex)):
            return None
        value = numpy.asarray(value)
        dtype = value.dtype
    if numpy.dtype(dtype).kind not in "fc":
        return None
    xp = namespace_of(value)
    if config.debug_nans and bool(xp.isnan(value).any()):
        return "NaN"
    if config.debug_infs and bool(xp.isinf(value).any()):
        return "Inf"
    return None


def made(bad: str) -> str:
    """The words for what :func:`first_bad` found: ``"a NaN"`` or ``"an infinity"``."""
    return "a NaN" if bad == "NaN" else "an infinity"


def check(prim, args, ans) -> None:
    """Raise ``FloatingPointError`` when a result of ``prim`` (``ans``: one result, or the list of a
    primitive with several) holds a NaN or an infinity that the config checks for."""
    results = ans if prim.multiple_results else (ans,)
    for k, result in enumerate(results):
        bad = first_bad(result)
        if bad is not None:
            pass_, rule_of = _pass()
            where = f"the vjp rule of '{rule_of}', in the reverse pass" if rule_of else f"the {pass_} pass"
            which = f"result {k}" if prim.multiple_results else "result"
            raise _error(bad, f"the primitive '{prim.name}'", where, args, which, result)


def check_rule(prim, kind: str, primals, result, argnum: int | None = None) -> None:
    """Raise ``FloatingPointError`` when what ``prim``'s ``kind`` rule (``"vjp"``: the cotangent of
    operand ``argnum``; ``"jvp"``: the output tangent, or the list of them) returned holds a NaN or an
    infinity the config checks for. A rule's arithmetic on concrete arrays is NumPy's own (``ct * y``),
    which no primitive check sees: this is where its NaN shows."""
    for value in result if isinstance(result, list) else [result]:
        bad = first_bad(value)
        if bad is not None:
            what = (f"the cotangent of operand {argnum}" if kind == "vjp"
                    else "a tangent" if isinstance(result, list) and len(result) > 1 else "the tangent")
            pass_ = "reverse" if kind == "vjp" else "jvp"
            raise _error(bad, f"the {kind} rule of '{prim.name}'", f"{what}, in the {pass_} pass", primals, what,
                         value)


def _error(bad: str, subject: str, where: str, operands, which: str, value) -> FloatingPointError:
    """The error both checks raise: what made the value, where, the operands, the value, the user's line
    and the switch that turns the check off."""
    switch = "debug_nans" if bad == "NaN" else "debug_infs"
    return FloatingPointError(
        f"tg.config.{switch}: {subject} made {made(bad)} in {where}. Operands: "
        f"{', '.join(_describe(a) for a in operands) or 'none'}; {which}: {_describe(value)}. {_user_line()} "
        f"(tg.config.{switch} = False, or TAPEGRAD_{switch.upper()}=0, turns the check off.)")


def _describe(x) -> str:
    shape, dtype = getattr(x, "shape", None), getattr(x, "dtype", None)
    if shape is None or dtype is None:
        return f"{type(x).__name__} {x!r}"
    bad = [kind for kind, test in (("NaN", "isnan"), ("Inf", "isinf"))
           if numpy.dtype(dtype).kind in "fc" and bool(getattr(namespace_of(x), test)(x).any())]
    return f"{numpy.dtype(dtype).name}{list(shape)}" + (f" (holds {' and '.join(bad)})" if bad else "")


def _pass() -> tuple[str, str | None]:
    """The pass running now, read from the stack (innermost frame first): ``("reverse", name of the
    primitive whose vjp rule runs)``, ``("jvp", None)`` or ``("forward", None)``."""
    frame = sys._getframe(2)
    while frame is not None:
        code = frame.f_code
        if code.co_filename.startswith(_OWN_DIR):
            module = os.path.basename(code.co_filename)
            if module == "_tape.py" and code.co_name in ("_pass", "_all_operands"):
                record = frame.f_locals.get("record")
                return "reverse", getattr(getattr(record, "prim", None), "name", "?")
            if (module == "_jvp.py" and code.co_name.startswith("apply_jvp_rule")
                    or module == "_tape.py" and code.co_name == "forward_sweep"):
                return "jvp", None
        frame = frame.f_back
    return "forward", None


def _user_line() -> str:
    """Where the user's code led to the failing primitive: the innermost frame outside tapegrad and
    NumPy (a file, a line, its source)."""
    frame = sys._getframe(1)
    while frame is not None:
        filename = os.path.abspath(frame.f_code.co_filename) if not frame.f_code.co_filename.startswith("<") \
            else frame.f_code.co_filename
        if not (filename.startswith(_OWN_DIR) or filename.startswith(_NUMPY_DIR) or filename.startswith("<frozen")
                or filename == "<tapegrad.jit program>"):
            text = linecache.getline(frame.f_code.co_filename, frame.f_lineno).strip()
            source = f": {text}" if text else ""
            return f"Your code: {frame.f_code.co_filename}, line {frame.f_lineno}, in {frame.f_code.co_name}{source}."
        frame = frame.f_back
    return "No frame outside tapegrad led there."
