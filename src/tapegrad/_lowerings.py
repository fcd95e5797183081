"""Lowerings for jit's compiled executor (``tapegrad._jit.native``): how a primitive is written as the
source of a numba function. No numba here, only text; each primitive declares its lowering beside
itself with ``tapegrad.extend.def_lowering``, built from the families below.

A lowering is ``lowering(ctx, *operands, **params)`` returning a :class:`Value` (a list of them for a
primitive with several results), or raising :class:`NotLowerable`. A value of the generated code has
one of two forms:

- **unrolled**: a small array (at most ``ctx.unroll_limit`` elements; every 0-d value) held as one
  scalar local per element. ``texts`` is a NumPy object array of the elements' expressions (names or
  literals), shaped as the value, so a shape operation on it is the NumPy operation on ``texts``
  (no code at all), and arithmetic is written element by element, which numba keeps in registers.
- **array**: a numba array, ``name``; for what is larger than ``ctx.unroll_limit``.

``ctx.texts(value)`` gives any value's element expressions (loading them from an array) and
``ctx.array(value)`` any value's array (building it from the elements); ``ctx.out`` is the aval of the
result being lowered.
"""
from __future__ import annotations

import ast
import math
from collections.abc import Callable

import numpy as np


class NotLowerable(Exception):
    """An equation has no lowering: the program (or loop) runs with the Python executor."""


_WEAK = {bool: np.dtype(np.bool_), int: np.dtype(np.int64), float: np.dtype(np.float64)}
DTYPES = (np.dtype(np.float64), np.dtype(np.float32), np.dtype(np.int64), np.dtype(np.bool_))


def concrete(dtype) -> np.dtype:
    """The dtype a value has in the generated code (a weak Python scalar's: float64, int64, bool)."""
    if dtype in _WEAK:
        return _WEAK[dtype]
    dtype = np.dtype(dtype)
    if dtype not in DTYPES:
        raise NotLowerable(f"dtype {dtype.name} (the compiled executor takes float64, float32, int64, bool)")
    return dtype


class Value:
    """One value of the generated code: unrolled (``texts``) or an array (``name``); ``dtype`` may be a
    weak Python type (``float``), as in the program."""

    __slots__ = ("shape", "dtype", "texts", "name")

    def __init__(self, shape, dtype, texts=None, name=None):
        self.shape, self.dtype, self.texts, self.name = tuple(shape), dtype, texts, name

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def unrolled(self) -> bool:
        return self.texts is not None

    @property
    def weak(self) -> bool:
        return self.dtype in _WEAK

    def promote_key(self):
        """What ``np.result_type`` takes for this operand: a weak one as a Python scalar."""
        return self.dtype(0) if self.weak else self.dtype


def unrolled(texts, dtype) -> Value:
    texts = np.asarray(texts, dtype=object)
    return Value(texts.shape, dtype, texts=texts)


def scalar(text: str, dtype) -> Value:
    return unrolled(np.array(text, dtype=object), dtype)


def dtype_text(dtype) -> str:
    dtype = concrete(dtype)
    return "np.bool_" if dtype == np.bool_ else f"np.{dtype.name}"


def literal_text(value, dtype) -> str:
    """A Python or NumPy scalar as source of ``dtype`` (non-finite floats through ``np``). numba types a
    Python int literal as int64 and a float literal as float64, so those are written bare: a call such
    as ``np.float64(0.5)`` costs numba as much typing as the arithmetic around it (a 1,600-statement
    loop body compiled in 17 s with such calls, 8 s without); float32 needs its call."""
    dtype = concrete(dtype)
    if dtype == np.bool_:
        return repr(bool(value))
    if dtype.kind == "i":
        return repr(int(value))
    value = float(value)
    text = "np.nan" if math.isnan(value) else ("np.inf" if value > 0 else "-np.inf") if math.isinf(value) \
        else repr(value)
    return text if dtype == np.float64 else f"np.float32({text})"


def cast(text: str, dtype) -> str:
    """A scalar expression converted to ``dtype`` (numba types ``np.float32(x)`` as float32); a bare
    literal is written as the literal of ``dtype``."""
    literal = _literal(text)
    if literal is not None and concrete(dtype).kind in "if":
        return literal_text(literal, dtype)
    return f"{dtype_text(dtype)}({text})"


def is_literal(text: str) -> bool:
    """Whether ``text`` is a bare number, which the generated code need not bind to a name."""
    return _literal(text) is not None or text in ("np.inf", "-np.inf", "np.nan", "True", "False")


def _literal(text: str) -> int | float | None:
    """The number a bare int or float literal (``2``, ``-0.5``, ``1e-08``) stands for, else None."""
    if not text or text[0] not in "-0123456789":  # a name or an expression: no parse
        return None
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return None
    return value if type(value) in (int, float) else None


# ---- elementwise ---------------------------------------------------------------------------------
class Sym:
    """An expression built by a fusion template (``def_fusion``) and the dtype numba gives it: its
    operators and the functions of :class:`_Namespace` write source, which numba compiles for scalars
    and arrays alike. Arithmetic is spelt with Python's operators where NumPy's function means the
    same, which numba types several times faster than a call."""

    __slots__ = ("text", "dtype")

    def __init__(self, text: str, dtype):
        self.text, self.dtype = text, np.dtype(dtype)

    __add__, __radd__ = (lambda x, y: _op("+", x, y)), (lambda x, y: _op("+", y, x))
    __sub__, __rsub__ = (lambda x, y: _op("-", x, y)), (lambda x, y: _op("-", y, x))
    __mul__, __rmul__ = (lambda x, y: _op("*", x, y)), (lambda x, y: _op("*", y, x))
    __truediv__, __rtruediv__ = (lambda x, y: _op("/", x, y)), (lambda x, y: _op("/", y, x))
    __pow__, __rpow__ = (lambda x, y: _call("power", x, y)), (lambda x, y: _call("power", y, x))
    __eq__, __ne__ = (lambda x, y: _op("==", x, y)), (lambda x, y: _op("!=", x, y))  # type: ignore[assignment,return-value]
    __lt__, __le__ = (lambda x, y: _op("<", x, y)), (lambda x, y: _op("<=", x, y))
    __gt__, __ge__ = (lambda x, y: _op(">", x, y)), (lambda x, y: _op(">=", x, y))
    __and__, __rand__ = (lambda x, y: _op("&", x, y)), (lambda x, y: _op("&", y, x))
    __or__, __ror__ = (lambda x, y: _op("|", x, y)), (lambda x, y: _op("|", y, x))
    __xor__, __rxor__ = (lambda x, y: _op("^", x, y)), (lambda x, y: _op("^", y, x))
    __hash__ = None  # type: ignore[assignment]

    def __neg__(self):
        return _SCALAR_NS.negative(self)  # the same spelling as a template's f.negative

    def __abs__(self):
        return _call("absolute", self)

    def __bool__(self):
        raise NotLowerable("a fusion template branches on a value")


def _sym(x, like) -> Sym:
    """A template's operand: a :class:`Sym`, or a Python number met inside the template, written in
    the dtype of the expression it meets (weak, as NumPy 2 takes it)."""
    if isinstance(x, Sym):
        return x
    if isinstance(x, (bool, int, float)):
        dtype = like.dtype if like is not None and not isinstance(x, bool) else concrete(type(x))
        if dtype.kind in "bi" and isinstance(x, float):
            dtype = np.dtype(np.float64)
        return Sym(literal_text(x, dtype), dtype)
    raise NotLowerable(f"a fusion template uses the constant {x!r}")


_OPERATORS = {"add": "+", "subtract": "-", "multiply": "*", "divide": "/", "true_divide": "/", "equal": "==",
              "not_equal": "!=", "less": "<", "less_equal": "<=", "greater": ">", "greater_equal": ">="}
_OPERATOR_NAMES = {op: name for name, op in _OPERATORS.items()}  # "/": true_divide, the later of two
_BOOL_RESULTS = frozenset({"equal", "not_equal", "less", "less_equal", "greater", "greater_equal", "logical_and",
                           "logical_or", "logical_xor", "logical_not", "isfinite", "isinf", "isnan", "signbit"})


def _result_dtype(name: str, operands) -> np.dtype:
    if name in _BOOL_RESULTS:
        return np.dtype(np.bool_)
    dtype = np.result_type(*[x.dtype for x in operands])
    if name in ("divide", "true_divide") and dtype.kind in "bi":
        return np.dtype(np.float64)
    return dtype


def _op(op: str, x, y) -> Sym:
    name = _OPERATOR_NAMES.get(op, "bitwise")
    like = x if isinstance(x, Sym) else y
    x, y = _sym(x, like), _sym(y, like)
    if name != "bitwise" and x.dtype == np.bool_ and y.dtype == np.bool_ and op in "+-*/":
        return _call(name, x, y)  # NumPy's bool arithmetic is logical, numba's Python operators' is not
    return Sym(f"({x.text} {op} {y.text})", _result_dtype(name, (x, y)))


def _call(name: str, *args) -> Sym:
    """``np.<name>(*args)``, where numba's function agrees with NumPy's on these dtypes (see
    :data:`INTEGER_SAFE` and :data:`FLOAT_UNSAFE`)."""
    like = next((a for a in args if isinstance(a, Sym)), None)
    args = tuple(_sym(a, like) for a in args)
    kind = np.result_type(*[a.dtype for a in args]).kind
    if (kind in "iub" and name not in INTEGER_SAFE) or (kind == "f" and name in FLOAT_UNSAFE):
        raise NotLowerable(f"numpy.{name} of {kind!r} values: numba's differs from NumPy's there")
    return Sym(f"np.{name}({', '.join(a.text for a in args)})", _result_dtype(name, args))


class _Namespace:
    """The ``f`` of a fusion template: NumPy's function of each name, as numba spells it for one
    element (an array's elements are computed in a loop of these)."""

    def where(self, c, x, y):
        like = x if isinstance(x, Sym) else y
        x, y = _sym(x, like), _sym(y, like)
        dtype = np.result_type(x.dtype, y.dtype)
        return Sym(f"({x.text} if {c.text} else {y.text})", dtype)

    def maximum(self, x, y):
        return self._extremum(">", x, y)

    def minimum(self, x, y):
        return self._extremum("<", x, y)

    def _extremum(self, op: str, x, y) -> Sym:
        """NumPy's ``maximum``/``minimum``: a NaN operand propagates, and of two equal values the second
        is the result (``maximum(-0.0, 0.0)`` is ``0.0``), where numba's would keep the first."""
        like = x if isinstance(x, Sym) else y
        x, y = _sym(x, like), _sym(y, like)
        first = Sym(f"(({x.text} {op} {y.text}) or ({x.text} != {x.text}))", np.bool_)
        return self.where(first, x, y)

    def sign(self, x):
        sign = _call("sign", x)  # numba's sign(-0.0) is -0.0, NumPy's 0.0: adding 0.0 makes it so
        return Sym(f"({sign.text} + {literal_text(0, x.dtype)})", x.dtype) if x.dtype.kind == "f" else sign

    def negative(self, x):
        return Sym(f"(-{x.text})", x.dtype) if x.dtype.kind in "fi" else _call("negative", x)

    def square(self, x):
        return Sym(f"({x.text} * {x.text})", x.dtype) if x.dtype.kind in "fi" else _call("square", x)

    def power(self, x, y):
        """``x ** 2`` as ``x * x`` and ``x ** 1`` as ``x`` for a float ``x`` (the same bits: NumPy's
        power takes that path too), which spares the call and its typing; else numba's power."""
        exponent = _literal(y.text) if isinstance(y, Sym) else y
        if isinstance(x, Sym) and x.dtype.kind == "f" and exponent in (1, 2) and type(exponent) is not bool:
            dtype = _result_dtype("power", (x, _sym(y, x)))
            if dtype == x.dtype:
                return x if exponent == 1 else Sym(f"({x.text} * {x.text})", dtype)
        return _call("power", x, y)

    def __getattr__(self, name: str) -> Callable:
        if name in _OPERATORS:
            return lambda x, y: _op(_OPERATORS[name], x, y)
        if name not in NUMBA_UFUNCS:
            raise NotLowerable(f"numpy.{name} has no numba spelling here")
        return lambda *args: _call(name, *args)


# NumPy's functions that numba compiles for scalars and arrays alike (numba's supported ufuncs)
NUMBA_UFUNCS = frozenset({
    "add", "subtract", "multiply", "divide", "true_divide", "negative", "positive", "power", "absolute",
    "sign", "exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sqrt", "square", "cbrt", "reciprocal",
    "sin", "cos", "tan", "arcsin", "arccos", "arctan", "arctan2", "hypot", "sinh", "cosh", "tanh", "arcsinh",
    "arccosh", "arctanh", "floor", "ceil", "trunc", "rint", "isfinite", "isinf", "isnan", "maximum", "minimum",
    "logaddexp", "logaddexp2", "equal", "not_equal", "less", "less_equal", "greater", "greater_equal",
    "logical_and", "logical_or", "logical_xor", "logical_not", "copysign", "signbit", "bitwise_and",
    "bitwise_or", "bitwise_xor", "invert", "deg2rad", "rad2deg", "floor_divide", "remainder"})
# not lowered, because numba's differ from NumPy's at edges: fmod (integer fmod of negatives), fmax and
# fmin (the sign of zero); floor_divide and remainder only on integers (on floats numba's differ at the
# infinities and in the sign of a zero result). On integers, only the functions numba computes as NumPy
# does (NumPy raises for an integer power with a negative exponent, numba wraps); INT_MIN // -1 is the
# one integer edge left that differs (0 where NumPy wraps to INT_MIN).
FLOAT_UNSAFE = frozenset({"floor_divide", "remainder"})
INTEGER_SAFE = frozenset({"add", "subtract", "multiply", "divide", "true_divide", "negative", "positive",
                          "absolute", "sign", "square", "maximum", "minimum", "equal", "not_equal", "less",
                          "less_equal", "greater", "greater_equal", "logical_and", "logical_or", "logical_xor",
                          "logical_not", "bitwise_and", "bitwise_or", "bitwise_xor", "invert", "where",
                          "floor_divide", "remainder"})
_SCALAR_NS = _Namespace()


def elementwise(template: str | Callable) -> Callable:
    """The lowering of an elementwise primitive from its fusion template: each operand converted to the
    dtype NumPy 2 computes in (weak scalars follow the arrays), the template applied element by element
    when the result is unrolled, to whole arrays otherwise, the result cast to the output's dtype.

    Args:
        template: as ``def_fusion``'s: a NumPy function's name, or ``template(f, *operands, **params)``
            built from ``f``'s functions (NumPy's names) and Python operators.

    Returns:
        The lowering, for ``def_lowering``.
    """
    def lowering(ctx, *xs, **params):
        out = ctx.out
        compute = np.result_type(*[x.promote_key() for x in (xs[1:] if template == "where" else xs)])
        if len(xs) == 1 and compute.kind == "b" and concrete(out.dtype).kind == "f":
            raise NotLowerable("a float function of a bool (NumPy computes it in float16)")
        if template == "where":
            xs = (xs[0],) + tuple(ctx.convert(x, compute) for x in xs[1:])
        else:
            xs = tuple(ctx.convert(x, compute) for x in xs)
        if ctx.unrolls(out.shape):
            operands = np.broadcast_arrays(*[ctx.texts(x) for x in xs])
            texts = np.empty(out.shape, dtype=object)
            dtypes = [concrete(x.dtype) for x in xs]
            for index in np.ndindex(*out.shape):
                result = _apply(template, _SCALAR_NS, [Sym(o[index], d) for o, d in zip(operands, dtypes)], params)
                texts[index] = ctx.let(result.text if result.dtype == concrete(out.dtype) else
                                       cast(result.text, out.dtype))
            return unrolled(texts, out.dtype)
        dtypes = [concrete(x.dtype) for x in xs]

        def element(texts):
            result = _apply(template, _SCALAR_NS, [Sym(t, d) for t, d in zip(texts, dtypes)], params)
            return result.text if result.dtype == concrete(out.dtype) else cast(result.text, out.dtype)
        return ctx.elementwise_loop(out.shape, concrete(out.dtype), list(xs), element)
    return lowering


def _apply(template, f, args, params):
    if isinstance(template, str):
        return getattr(f, template)(*args, **params)
    return template(f, *args, **params)


# ---- shape operations ------------------------------------------------------------------------------
def structural(on_texts: Callable, on_array: Callable | None = None) -> Callable:
    """A shape operation: ``on_texts(texts, **params)`` is the NumPy operation itself, run on the
    operands' element expressions (an unrolled result costs no code); ``on_array(ctx, *arrays,
    **params)`` is its numba source on arrays, for a result too large to unroll (None: not lowered)."""
    def lowering(ctx, *xs, **params):
        out = ctx.out
        xs = tuple(ctx.convert(x, out.dtype) for x in xs)  # concatenate's operands may differ in dtype
        if ctx.unrolls(out.shape):
            texts = on_texts(*[ctx.texts(x) for x in xs], **params)
            return unrolled(np.asarray(texts, dtype=object).reshape(out.shape), out.dtype)
        if on_array is None:
            raise NotLowerable("no array form")
        return ctx.array_value(on_array(ctx, *[ctx.array(x) for x in xs], **params), out.shape, out.dtype)
    return lowering


def identity(ctx, x, **params) -> Value:
    return x


def astype(ctx, x, *, dtype, **params) -> Value:
    return ctx.convert(x, concrete(dtype))


# ---- reductions ------------------------------------------------------------------------------------
def _extremum(op: str) -> Callable:
    """NumPy's max/min of two scalars: NaN propagates."""
    return lambda a, b: f"({a} if ({a} {op} {b} or {a} != {a}) else {b})"


_COMBINE = {"sum": lambda a, b: f"({a} + {b})", "prod": lambda a, b: f"({a} * {b})",
            "max": _extremum(">"), "min": _extremum("<"),
            "any": lambda a, b: f"({a} or {b})", "all": lambda a, b: f"({a} and {b})"}
_START = {"sum": 0, "prod": 1, "any": False, "all": True}  # a loop's first value


def _axes(axis, ndim: int) -> tuple:
    if axis is None:
        return tuple(range(ndim))
    return tuple(sorted(a % ndim for a in (axis if isinstance(axis, tuple) else (axis,))))


def reduction(kind: str) -> Callable:
    """``sum``, ``prod``, ``max``, ``min``, ``any`` or ``all`` over static axes: a chain of scalar
    operations in index order where the operand is unrolled (sums may round otherwise than NumPy's
    pairwise summation past 8 elements); on an array over all its axes, a loop in index order."""
    combine = _COMBINE[kind]

    def lowering(ctx, x, *, axis, keepdims, **params):
        out = ctx.out
        axes = _axes(axis, x.ndim)
        if not x.size:
            raise NotLowerable(f"{kind} of an empty array")
        if x.unrolled or ctx.unrolls(x.shape):
            texts = ctx.texts(ctx.convert(x, out.dtype)) if kind in ("sum", "prod") else ctx.texts(x)
            kept = [a for a in range(x.ndim) if a not in axes]
            moved = np.moveaxis(texts, axes, range(-len(axes), 0)) if axes else texts
            flat = moved.reshape(tuple(x.shape[a] for a in kept) + (-1,))
            result = np.empty(flat.shape[:-1], dtype=object)
            for index in np.ndindex(*result.shape):
                items = list(flat[index])
                if not items:
                    raise NotLowerable(f"{kind} of an empty array")
                expr = items[0]
                for item in items[1:]:
                    expr = ctx.let(combine(expr, item))
                result[index] = ctx.let(cast(expr, out.dtype))
            return unrolled(result.reshape(out.shape), out.dtype)
        if len(axes) != x.ndim:
            raise NotLowerable(f"{kind} over some axes of an array")
        if kind in ("max", "min") and concrete(x.dtype).kind == "f":
            raise NotLowerable(f"{kind} of a float array (numba's picks another of equal zeros than NumPy)")
        if kind in ("max", "min"):  # of integers: the first element starts the loop
            start = ctx.let(cast(f"{ctx.array(x)}.flat[0]", out.dtype))
        else:
            start = literal_text(_START[kind], out.dtype)
        x = ctx.convert(x, out.dtype) if kind in ("sum", "prod") else x
        return ctx.fold_loop(x, start, lambda acc, item: cast(combine(acc, item), out.dtype), out.dtype)
    return lowering


# ---- matrix products -------------------------------------------------------------------------------
def matmul(ctx, x, y) -> Value:
    """``x @ y`` of 1-D and 2-D operands: sums of products written out where small, numba's ``np.dot``
    (BLAS) on C-contiguous arrays otherwise."""
    out = ctx.out
    if x.ndim not in (1, 2) or y.ndim not in (1, 2):
        raise NotLowerable("matmul of stacks of matrices")
    compute = np.result_type(x.promote_key(), y.promote_key())
    x, y = ctx.convert(x, compute), ctx.convert(y, compute)
    inner = x.shape[-1]
    if not inner:
        raise NotLowerable("matmul over an empty axis")
    if ctx.unrolls(out.shape) and math.prod(out.shape) * inner <= 8 * ctx.unroll_limit:
        a = ctx.texts(x).reshape((-1, inner))
        b = ctx.texts(y).reshape((inner, -1))
        texts = np.empty((a.shape[0], b.shape[1]), dtype=object)
        for i, j in np.ndindex(*texts.shape):
            expr = f"({a[i, 0]} * {b[0, j]})"
            for k in range(1, inner):
                expr = ctx.let(f"({expr} + {a[i, k]} * {b[k, j]})")
            texts[i, j] = ctx.let(cast(expr, out.dtype))
        return unrolled(texts.reshape(out.shape), out.dtype)
    if concrete(compute).kind != "f" or not x.ndim or not y.ndim:
        raise NotLowerable("matmul of integers or of 0-d operands")
    text = f"np.dot(np.ascontiguousarray({ctx.array(x)}), np.ascontiguousarray({ctx.array(y)}))"
    if not out.shape:
        return scalar(ctx.let(text), out.dtype)
    return ctx.array_value(text, out.shape, out.dtype)


def einsum(ctx, *xs, subscripts, optimize) -> Value:
    """``einsum`` written out as sums of products over its index space, where that space is small and
    the subscripts explicit (``...`` and implicit outputs are not lowered)."""
    out = ctx.out
    if "..." in subscripts or "->" not in subscripts:
        raise NotLowerable(f"einsum {subscripts!r}")
    inputs, target = subscripts.replace(" ", "").split("->")
    terms = inputs.split(",")
    sizes = {c: n for term, x in zip(terms, xs) for c, n in zip(term, x.shape)}
    summed = [c for c in sizes if c not in target]
    if not ctx.unrolls(out.shape) or math.prod(sizes.values()) > 8 * ctx.unroll_limit:
        raise NotLowerable(f"einsum {subscripts!r} past the unroll limit")
    compute = np.result_type(*[x.promote_key() for x in xs])
    texts = [ctx.texts(ctx.convert(x, compute)) for x in xs]
    result = np.empty(out.shape, dtype=object)
    for index in np.ndindex(*out.shape):
        at = dict(zip(target, index))
        expr = None
        for inner in np.ndindex(*[sizes[c] for c in summed]):
            at.update(zip(summed, inner))
            product = " * ".join(t[tuple(at[c] for c in term)] for t, term in zip(texts, terms))
            expr = f"({product})" if expr is None else ctx.let(f"({expr} + {product})")
        result[index] = ctx.let(cast(expr if expr is not None else literal_text(0, out.dtype), out.dtype))
    return unrolled(result, out.dtype)


def cumulative(kind: str) -> Callable:
    """``cumsum`` or ``cumprod`` along a static axis (None: of the flattened value): running scalar
    operations where unrolled, numba's ``np.cumsum``/``np.cumprod`` of a 1-d array otherwise."""
    combine = _COMBINE[kind]

    def lowering(ctx, x, *, axis, **params):
        out = ctx.out
        if ctx.unrolls(out.shape):
            texts = ctx.texts(ctx.convert(x, out.dtype))
            texts = texts.reshape(-1) if axis is None else np.moveaxis(texts, axis, -1)
            result = np.empty(texts.shape, dtype=object)
            for index in np.ndindex(*texts.shape[:-1]):
                running = None
                for k, item in enumerate(texts[index]):
                    running = item if running is None else ctx.let(combine(running, item))
                    result[index + (k,)] = running
            result = result if axis is None else np.moveaxis(result, -1, axis)
            return unrolled(result.reshape(out.shape), out.dtype)
        if x.ndim != 1 or concrete(x.dtype) != concrete(out.dtype):
            raise NotLowerable(f"cum{kind} of an array other than 1-d of its result's dtype")
        return ctx.array_value(f"np.cum{kind}({ctx.array(x)})", out.shape, out.dtype)
    return lowering
