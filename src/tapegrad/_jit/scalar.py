"""A loop over a step program on 0-d float64 and bool values, run as straight-line Python float code.

A ``scan`` whose body works on scalars (an ODE integrated step by step, its reverse-mode twin) spends
almost all its time in fixed per-call overhead when each step runs the body's compiled program: a
NumPy ufunc call on 0-d arrays costs ~0.5 us, a Python float operation 30-60 ns. So a body made only
of elementwise operations on 0-d float64 (or bool) values becomes one generated Python function
that holds the carries in local float variables and runs every step in one ``for`` loop.

What is eligible (:func:`compile_scalar_loop` returns None otherwise): every variable of the program
is 0-d, on NumPy, of dtype float64 or bool (an integer input that no equation reads and no output
returns, such as ``fori_loop``'s index, is allowed: integer arithmetic is not, since Python ints do
not wrap as int64 does); every equation is single-result and either has a fusion template
(``def_fusion``) whose functions all have a scalar spelling below, or is ``astype`` to float64 or
bool, ``stop_gradient``, or a ``reshape``/``broadcast_to`` of a 0-d value to shape ``()``; every
literal is a Python bool, int or float, typed as NumPy 2 types it beside the equation's operands.

Faithfulness. ``+ - * /``, negation, ``square``, ``reciprocal``, comparisons, ``sqrt``, ``abs``,
``maximum``/``minimum`` (NaN-propagating, with NumPy's choice between signed zeros), ``where`` and
the logical operations give bit-identical results to NumPy float64 (IEEE 754 rounds them correctly,
in C as in Python). The transcendental functions (``exp``, ``log``, ``sin``, ``tanh``, ``power``, ...)
call the C library's through ``math``, while NumPy may use its own SIMD loops: results may differ
from NumPy's in the last bit (measured on 20,000 random arguments with NumPy 2.4: at most 1 ulp for
``exp``, ``log``, ``log1p``, ``power`` and ``arctan2``, 2 ulps for ``tanh``; ``sin`` and ``cos``
agreed). ``power`` by the literal 2 is ``x * x``, which is what NumPy's loop computes.

Where NumPy would return inf or NaN with a floating-point warning (``x / 0``, ``log(0)``,
``exp(1000)``, ``sqrt(-1)``, ``power`` of a negative base), Python raises (ZeroDivisionError,
OverflowError, ValueError) or returns the same inf/NaN silently (an overflowing ``*``). Either way the
loop gives up and returns None, and the caller reruns the loop with the generic executor, which
reproduces NumPy's values, warnings and ``np.errstate`` behaviour: the loop returns None when
Python raised, when any returned value is not finite, or when ``np.errstate`` asks to hear about
underflow (which NumPy reports and Python does not). One difference remains: an intermediate inf or
NaN that reaches no returned value (``1 / (1 / 0.0)`` raises and falls back, but ``where(c, x, y)``
with an overflowed unselected ``y`` does not) gives the same numbers without NumPy's warning.
"""
from __future__ import annotations

import math
import types

import numpy as np

from tapegrad._jit.fusion import _apply, literal_dtype
from tapegrad._jit.program import Literal, Program, Var
from tapegrad._structural import astype_p, broadcast_to_p, reshape_p, stop_gradient_p

FLOAT, BOOL = "f", "b"  # the kinds of scalar a generated loop holds: Python float, Python bool
_KINDS = {np.dtype(np.float64): FLOAT, np.dtype(np.bool_): BOOL}
_FROM_ARRAY = {FLOAT: "float", BOOL: "bool"}  # a 0-d array to the loop's Python scalar
_TO_ARRAY = {FLOAT: "_float64", BOOL: "_bool"}  # the dtype of the arrays a loop returns


class Ineligible(Exception):
    """The program (or one of its equations) has no faithful Python-float form."""


# ---- symbolic scalars: a fusion template applied to them writes Python source ----------------------
class Scalar:
    """A Python expression (``text``) of kind :data:`FLOAT` or :data:`BOOL`, built by a fusion
    template through its operators and the functions of :data:`SCALAR_FUNCTIONS`."""

    __slots__ = ("text", "kind")

    def __init__(self, text: str, kind: str):
        self.text, self.kind = text, kind

    __add__, __radd__ = (lambda x, y: _arith("+", x, y)), (lambda x, y: _arith("+", y, x))
    __sub__, __rsub__ = (lambda x, y: _arith("-", x, y)), (lambda x, y: _arith("-", y, x))
    __mul__, __rmul__ = (lambda x, y: _arith("*", x, y)), (lambda x, y: _arith("*", y, x))
    __truediv__, __rtruediv__ = (lambda x, y: _arith("/", x, y)), (lambda x, y: _arith("/", y, x))
    __pow__, __rpow__ = (lambda x, y: _power(x, y)), (lambda x, y: _power(y, x))
    # == and != build the text of a comparison, as NumPy arrays return arrays: not object's bool
    __eq__, __ne__ = (lambda x, y: _compare("==", x, y)), (lambda x, y: _compare("!=", x, y))  # type: ignore[assignment,return-value]
    __lt__, __le__ = (lambda x, y: _compare("<", x, y)), (lambda x, y: _compare("<=", x, y))
    __gt__, __ge__ = (lambda x, y: _compare(">", x, y)), (lambda x, y: _compare(">=", x, y))
    __and__ = __rand__ = lambda x, y: _logical("and", x, y)
    __or__ = __ror__ = lambda x, y: _logical("or", x, y)
    __hash__ = None  # type: ignore[assignment]  # unhashable: == builds an expression

    def __neg__(self):
        return Scalar(f"(-{_float(self).text})", FLOAT)

    def __invert__(self):
        if self.kind != BOOL:
            raise Ineligible("~ of a float (bitwise not) has no scalar form")
        return Scalar(f"(not {self.text})", BOOL)

    def __abs__(self):
        return _call("abs", self)

    def __bool__(self):  # a template's Python ``if`` on a value: no static answer
        raise Ineligible("a fusion template branches on a value")


def literal(value, kind: str) -> Scalar:
    """A Python number as a scalar of ``kind`` (the dtype NumPy 2 gives it beside the operands)."""
    if kind == BOOL and isinstance(value, (bool, np.bool_)):
        return Scalar(repr(bool(value)), BOOL)
    if kind != FLOAT or not isinstance(value, (bool, int, float)):
        raise Ineligible(f"literal {value!r} has no {kind!r} scalar form")
    try:
        value = float(value)  # as NumPy converts a weak Python int to float64: rounded to nearest
    except OverflowError:  # NumPy refuses such an int too
        raise Ineligible(f"literal {value!r} does not fit a float64") from None
    if math.isfinite(value):
        return Scalar(f"({value!r})", FLOAT)
    return Scalar("_NAN" if math.isnan(value) else ("_INF" if value > 0 else "(-_INF)"), FLOAT)


def _lift(x) -> Scalar:
    """A template's operand: a :class:`Scalar`, or a Python number met inside the template (weak)."""
    if isinstance(x, Scalar):
        return x
    return literal(x, BOOL if isinstance(x, bool) else FLOAT)


def _float(x) -> Scalar:
    x = _lift(x)
    if x.kind != FLOAT:  # NumPy's bool arithmetic is logical (True + True is True): not Python's
        raise Ineligible("arithmetic on bool values has no scalar form")
    return x


def _truth(x) -> str:
    """The Python bool text of ``x`` (a float is true when nonzero, NaN included, as in NumPy)."""
    x = _lift(x)
    return x.text if x.kind == BOOL else f"({x.text} != 0.0)"


def _arith(op: str, x, y) -> Scalar:
    return Scalar(f"({_float(x).text} {op} {_float(y).text})", FLOAT)


def _compare(op: str, x, y) -> Scalar:
    x, y = _lift(x), _lift(y)
    if x.kind != y.kind or (x.kind == BOOL and op not in ("==", "!=")):
        raise Ineligible(f"comparison {op} of {x.kind} and {y.kind} has no scalar form")
    return Scalar(f"({x.text} {op} {y.text})", BOOL)


def _logical(op: str, x, y) -> Scalar:
    return Scalar(f"({_truth(x)} {op} {_truth(y)})", BOOL)


def _call(fn: str, *args) -> Scalar:
    return Scalar(f"{fn}({', '.join(_float(a).text for a in args)})", FLOAT)


def _where(c, x, y) -> Scalar:
    x, y = _lift(x), _lift(y)
    if x.kind != y.kind:
        raise Ineligible("where of a float and a bool has no scalar form")
    return Scalar(f"({x.text} if {_truth(c)} else {y.text})", x.kind)


def _extremum(op: str):
    """NumPy's maximum (``op`` ``>``) or minimum (``<``) of two float64 scalars: NaN propagates (the
    first NaN operand is the result) and of two equal values the second wins (``maximum(0.0, -0.0)``
    is ``-0.0``, as NumPy's loop gives)."""
    def extremum(x, y):
        x, y = _float(x), _float(y)
        return Scalar(f"({x.text} if ({x.text} {op} {y.text} or {x.text} != {x.text}) else {y.text})", FLOAT)
    return extremum


def _function(fn: str):
    return lambda *args: _call(fn, *args)


def _power(x, y):
    """``math.pow`` (which raises where Python's ``**`` would return a complex number); ``x * x`` for
    the literal exponent 2, which NumPy's loop computes exactly so (and ``grad`` writes often)."""
    if _lift(y).text == "(2.0)":
        return _arith("*", x, x)
    return _call("_pow", x, y)


# NumPy's name -> its scalar spelling: the functions a fusion template (``def_fusion``) may call
_MATH = {"sqrt": "_sqrt", "sin": "_sin", "cos": "_cos", "tan": "_tan", "arcsin": "_asin", "arccos": "_acos",
         "arctan": "_atan", "sinh": "_sinh", "cosh": "_cosh", "tanh": "_tanh", "exp": "_exp", "expm1": "_expm1",
         "log": "_log", "log1p": "_log1p", "log10": "_log10", "arctan2": "_atan2",
         "absolute": "abs"}
SCALAR_FUNCTIONS = {
    "add": lambda x, y: _arith("+", x, y), "subtract": lambda x, y: _arith("-", x, y),
    "multiply": lambda x, y: _arith("*", x, y), "divide": lambda x, y: _arith("/", x, y),
    "negative": lambda x: -_float(x), "square": lambda x: _arith("*", x, x),
    "reciprocal": lambda x: _arith("/", 1.0, x),
    "equal": lambda x, y: _compare("==", x, y), "not_equal": lambda x, y: _compare("!=", x, y),
    "less": lambda x, y: _compare("<", x, y), "less_equal": lambda x, y: _compare("<=", x, y),
    "greater": lambda x, y: _compare(">", x, y), "greater_equal": lambda x, y: _compare(">=", x, y),
    "logical_and": lambda x, y: _logical("and", x, y), "logical_or": lambda x, y: _logical("or", x, y),
    "logical_not": lambda x: Scalar(f"(not {_truth(x)})", BOOL),
    "where": _where, "maximum": _extremum(">"), "minimum": _extremum("<"),
    **{name: _function(fn) for name, fn in _MATH.items()},
    "power": _power,
}

# the globals of a generated loop: the math functions its text calls, and non-finite literals
_GLOBALS = {"_sqrt": math.sqrt, "_sin": math.sin, "_cos": math.cos, "_tan": math.tan, "_asin": math.asin,
            "_acos": math.acos, "_atan": math.atan, "_sinh": math.sinh, "_cosh": math.cosh, "_tanh": math.tanh,
            "_exp": math.exp, "_expm1": math.expm1, "_log": math.log, "_log1p": math.log1p,
            "_log10": math.log10, "_atan2": math.atan2, "_pow": math.pow, "_INF": math.inf, "_NAN": math.nan,
            "_isfinite": math.isfinite, "_array": np.array, "_np_isfinite": np.isfinite, "_geterr": np.geterr,
            "_float64": np.float64, "_bool": np.bool_}


# the ``f`` of a fusion template here: a name it lacks raises AttributeError, and the program is ineligible
_SCALAR_NAMESPACE = types.SimpleNamespace(**SCALAR_FUNCTIONS)


# ---- one equation, one program ------------------------------------------------------------------------
def _kind(dtype) -> str:
    """:data:`FLOAT`, :data:`BOOL`, or ``"i"`` for another dtype (an input no equation may read)."""
    return _KINDS.get(np.dtype(dtype), "i")


def _astype(x: Scalar, dtype) -> Scalar:
    kind = _kind(dtype)
    if kind == x.kind:
        return x
    if kind == FLOAT:
        return Scalar(f"(1.0 if {x.text} else 0.0)", FLOAT)
    if kind == BOOL:
        return Scalar(f"({x.text} != 0.0)", BOOL)  # NaN is true, as NumPy casts it
    raise Ineligible(f"astype to {np.dtype(dtype).name} has no scalar form")


def equation(eqn, read) -> Scalar:
    """The scalar expression of ``eqn``, its variable operands read by ``read(var)``.

    Raises:
        Ineligible: the equation has no faithful scalar form.
    """
    if len(eqn.outs) != 1:
        raise Ineligible(f"{eqn.prim.name} has several results")
    args = [literal(x.value, _kind(literal_dtype(eqn, i))) if isinstance(x, Literal) else read(x)
            for i, x in enumerate(eqn.inputs)]
    prim = eqn.prim
    if prim in (stop_gradient_p, reshape_p, broadcast_to_p):  # identities on a 0-d value
        result = args[0]
    elif prim is astype_p:
        result = _astype(args[0], eqn.params["dtype"])
    elif prim.fusion is not None:
        result = _lift(_apply(prim.fusion.template, _SCALAR_NAMESPACE, args, eqn.params))
    else:
        raise Ineligible(f"{prim.name} has no scalar form")
    if result.kind != _kind(eqn.out.aval.dtype):
        raise Ineligible(f"{prim.name} gives {result.kind} where the program has {eqn.out.aval.dtype}")
    return result


class _Names:
    """The Python name and kind of each variable of a program (its validity checked once)."""

    def __init__(self):
        self.scalars, self.kinds = {}, {}

    def define(self, var, text: str) -> None:
        if not isinstance(var, Var) or tuple(var.aval.shape) != () or var.backend is not np:
            raise Ineligible(f"{var!r} is not a 0-d NumPy value")
        kind = _kind(var.aval.dtype)
        self.kinds[id(var)] = kind
        self.scalars[id(var)] = Scalar(text, kind)

    def read(self, x) -> Scalar:
        if isinstance(x, Literal):
            kind = BOOL if isinstance(x.value, (bool, np.bool_)) else FLOAT
            if not isinstance(x.value, (bool, np.bool_, float)):
                raise Ineligible(f"literal output {x.value!r} is not a float or bool")
            return literal(x.value, kind)
        scalar = self.scalars[id(x)]
        if scalar.kind not in (FLOAT, BOOL):
            raise Ineligible(f"{x!r} is read: only float64 and bool values have a scalar form")
        return scalar


def _used(program: Program) -> set:
    """The ids of the variables that an equation reads or that the program returns."""
    used = {id(x) for x in program.outputs if isinstance(x, Var)}
    for eqn in program.eqns:
        used.update(id(x) for x in eqn.inputs if isinstance(x, Var))
    return used


def source(program: Program, n_carry: int, n_xs: int) -> str:
    """The text of ``loop(carries, xs, consts, length, reverse)`` (see :func:`compile_scalar_loop`).

    Raises:
        Ineligible: the program is not eligible (the module docstring says what is).
    """
    names, used = _Names(), _used(program)
    carry_in, xs_in, consts_in = (program.invars[:n_carry], program.invars[n_carry:n_carry + n_xs],
                                  program.invars[n_carry + n_xs:])
    head = ["def loop(carries, xs, consts, length, reverse):",
            "    if _geterr()['under'] != 'ignore':  # NumPy would report underflow: the generic loop does",
            "        return None"]
    for k, v in enumerate(carry_in):
        names.define(v, f"a{k}")
        if names.kinds[id(v)] in _FROM_ARRAY:
            head.append(f"    a{k} = {_FROM_ARRAY[names.kinds[id(v)]]}(carries[{k}])")
    step = []
    for j, v in enumerate(xs_in):
        names.define(v, f"x{j}")
        if id(v) in used and names.kinds[id(v)] in _FROM_ARRAY:
            head.append(f"    X{j} = xs[{j}].tolist()")
            step.append(f"x{j} = X{j}[_i]")
    for j, v in enumerate(consts_in):
        names.define(v, f"k{j}")
        if id(v) in used and names.kinds[id(v)] in _FROM_ARRAY:
            head.append(f"    k{j} = {_FROM_ARRAY[names.kinds[id(v)]]}(consts[{j}])")
    for v, c in zip(program.constvars, program.consts):
        names.define(v, "")
        if names.kinds[id(v)] in _FROM_ARRAY:  # a constant of the program: written into the source
            names.scalars[id(v)] = literal(c.item(), names.kinds[id(v)])
    for k, eqn in enumerate(program.eqns):
        expr = equation(eqn, names.read)
        names.define(eqn.out, f"v{k}")
        step.append(f"v{k} = {expr.text}")
    carries_out = [names.read(x) for x in program.outputs[:n_carry]]
    if [c.kind for c in carries_out] != [names.kinds[id(v)] for v in carry_in]:
        raise Ineligible("a carry changes kind between steps")
    ys_out = [names.read(x) for x in program.outputs[n_carry:]]
    for j in range(len(ys_out)):
        head.append(f"    y{j} = []")
        head.append(f"    y{j}_append = y{j}.append")
        step.append(f"y{j}_append({ys_out[j].text})")
    if n_carry:
        step.append(f"{', '.join(f'a{k}' for k in range(n_carry))}, = "
                    f"{', '.join(c.text for c in carries_out)},")
    return "\n".join(head + _loop(step) + _tail(carries_out, ys_out))


def _loop(step) -> list:
    return (["    try:",
             "        for _i in (range(length - 1, -1, -1) if reverse else range(length)):"]
            + [f"            {line}" for line in step or ["pass"]]
            + ["    except (ArithmeticError, ValueError):  # where NumPy gives inf or NaN: the generic loop",
               "        return None"])


def _tail(carries_out, ys_out) -> list:
    """Reverse the ys of a reverse loop, give up on any non-finite result (NumPy would have warned),
    and return fresh arrays."""
    lines = [f"    if reverse: y{j}.reverse()" for j in range(len(ys_out))]
    lines += [f"    Y{j} = _array(y{j}, {_TO_ARRAY[y.kind]})" for j, y in enumerate(ys_out)]
    finite = [f"_isfinite(a{k})" for k, c in enumerate(carries_out) if c.kind == FLOAT]
    finite += [f"_np_isfinite(Y{j}).all()" for j, y in enumerate(ys_out) if y.kind == FLOAT]
    if finite:
        lines += [f"    if not ({' and '.join(finite)}):", "        return None"]
    carries = [f"_array(a{k}, {_TO_ARRAY[c.kind]})" for k, c in enumerate(carries_out)]
    lines.append(f"    return [{', '.join(carries)}], [{', '.join(f'Y{j}' for j in range(len(ys_out)))}]")
    return lines


def compile_scalar_loop(program: Program, n_carry: int, n_xs: int):
    """A Python-float executor of the loop whose step is ``program``, or None when ``program`` is not
    eligible (module docstring).

    Args:
        program: the step, as a ``scan`` body: inputs ``(*carries, *x_slices, *consts)``, outputs
            ``(*carries, *ys)``. Pass it optimised (``passes.optimize``): dead code costs here too.
        n_carry: how many carries lead its inputs and outputs.
        n_xs: how many slices of ``xs`` follow the carries among the inputs.

    Returns:
        None, or ``loop(carries, xs, consts, length, reverse)``: ``carries`` and ``consts`` are
        sequences of 0-d arrays, ``xs`` of arrays of shape ``(length,)``; it runs ``length`` steps
        (from the last slice to the first when ``reverse``) and returns ``(final_carries, ys)``: the
        carries as fresh 0-d arrays, each ``ys`` stacked in a fresh array of shape ``(length,)`` in
        the order of ``xs``. It returns None instead when Python arithmetic raised or a result is not
        finite (or ``np.errstate`` asks to hear about underflow): the caller then reruns the loop
        with the generic executor, which gives NumPy's inf/NaN and its warnings. The generated text is
        the loop's ``source`` attribute.
    """
    try:
        text = source(program, n_carry, n_xs)
    except (Ineligible, TypeError, AttributeError):  # a template used what Scalar or f does not define
        return None
    namespace = dict(_GLOBALS)
    exec(compile(text, "<tapegrad scalar loop>", "exec"), namespace)  # noqa: S102 — our own generated source
    loop = namespace.pop("loop")
    loop.source = text  # type: ignore[attr-defined]  # a function takes attributes; exec's namespace is untyped
    return loop
