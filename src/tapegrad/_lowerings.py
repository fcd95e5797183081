"""The lowerings of tapegrad's own primitives for jit's compiled executor (``tapegrad._jit.native``),
declared beside each primitive with ``tapegrad.extend.def_lowering``; no numba here, only source text.

A lowering is ``lowering(ctx, *operands, **params) -> str`` (a numba-compilable expression; a list of
them for several results). A 0-d value is a scalar in the generated code, any other an array
(``Operand.ndim``), so a lowering spells both where they differ.
"""
from __future__ import annotations

import dataclasses
import math

import numpy as np


class NotLowerable(Exception):
    """This equation (or program) has no lowering: the program runs with the Python executor."""


@dataclasses.dataclass(frozen=True)
class Operand:
    text: str  # a numba expression: a name, or a literal's text
    shape: tuple
    dtype: np.dtype

    @property
    def ndim(self) -> int:
        return len(self.shape)


def dtype_text(dtype) -> str:
    return f"np.{np.dtype(dtype).name}" if np.dtype(dtype) != np.bool_ else "np.bool_"


def literal_text(value) -> str:
    """A Python scalar literal as source (non-finite floats through ``np``)."""
    if isinstance(value, (bool, np.bool_)):
        return repr(bool(value))
    if isinstance(value, (int, np.integer)):
        return repr(int(value))
    if isinstance(value, (float, np.floating)):
        value = float(value)
        if math.isnan(value):
            return "np.nan"
        if math.isinf(value):
            return "np.inf" if value > 0 else "(-np.inf)"
        return repr(value)
    raise NotLowerable(f"literal {value!r}")


# NumPy's elementwise functions that numba compiles for scalars and arrays alike, under NumPy's name
UFUNCS = frozenset({
    "add", "subtract", "multiply", "divide", "negative", "exp", "log", "sin", "cos", "tan", "tanh", "sinh",
    "cosh", "sqrt", "square", "reciprocal", "expm1", "log1p", "arcsin", "arccos", "arctan", "absolute",
    "equal", "not_equal", "less", "less_equal", "greater", "greater_equal", "logical_and", "logical_or",
    "logical_not", "maximum", "minimum", "arctan2", "power"})


def ufunc_lowering(name: str):
    """The lowering ``np.<name>(*operands)`` of a NumPy elementwise function."""
    if name not in UFUNCS:
        raise ValueError(f"no numba lowering for numpy.{name}")

    def lowering(ctx, *xs):
        return f"np.{name}({', '.join(x.text for x in xs)})"
    return lowering


def where_lowering(ctx, c, x, y):
    if c.ndim == x.ndim == y.ndim == 0:
        return f"({x.text} if {c.text} else {y.text})"
    return f"np.where({c.text}, {x.text}, {y.text})"


def identity_lowering(ctx, x, **params):
    return x.text


def astype_lowering(ctx, x, *, dtype, **params):
    if np.dtype(dtype) not in (np.dtype(np.float64), np.dtype(np.int64), np.dtype(np.bool_)):
        raise NotLowerable(f"astype to {np.dtype(dtype).name}")
    if x.ndim == 0:
        return f"{dtype_text(dtype)}({x.text})"
    return f"{x.text}.astype({dtype_text(dtype)})"


def reshape_lowering(ctx, x, *, shape):
    shape = tuple(shape)
    if shape == ():
        return x.text if x.ndim == 0 else f"{x.text}.flat[0]"
    if x.ndim == 0:
        return f"np.full({shape!r}, {x.text})"
    return f"np.ascontiguousarray({x.text}).reshape({shape!r})"


def broadcast_to_lowering(ctx, x, *, shape):
    shape = tuple(shape)
    if shape == ():
        return x.text
    if x.ndim == 0:
        return f"np.full({shape!r}, {x.text})"
    return f"np.ascontiguousarray(np.broadcast_to({x.text}, {shape!r}))"


def concatenate_lowering(ctx, *xs, axis):
    if any(x.ndim == 0 for x in xs) or len({x.dtype for x in xs}) != 1:
        raise NotLowerable("concatenate of scalars or of mixed dtypes")
    return f"np.concatenate(({''.join(x.text + ', ' for x in xs)}), axis={axis})"


def sum_lowering(ctx, x, *, axis, keepdims):
    if x.ndim == 0 and not keepdims:
        return x.text
    if keepdims:
        raise NotLowerable("sum with keepdims")
    if axis is None or tuple(np.atleast_1d(axis)) == tuple(range(x.ndim)):
        return f"np.sum({x.text})"
    if isinstance(axis, int) or (isinstance(axis, tuple) and len(axis) == 1):
        return f"np.sum({x.text}, axis={axis if isinstance(axis, int) else axis[0]})"
    raise NotLowerable(f"sum over axes {axis!r}")


def index_text(idx) -> str:
    """A static index spec (ints and slices only) as source."""
    items = []
    for item in idx:
        if item[0] == "int":
            items.append(repr(int(item[1])))
        elif item[0] == "slice":
            items.append(":".join("" if v is None else repr(int(v)) for v in item[1:]))
        else:
            raise NotLowerable(f"index item {item!r}")
    return ", ".join(items) + ("," if len(items) == 1 else "")


def getitem_lowering(ctx, x, *arrays, idx):
    if arrays or x.ndim == 0:
        raise NotLowerable("getitem with array indices")
    return f"{x.text}[{index_text(idx)}]"


def scatter_add_lowering(ctx, ct, *arrays, idx, shape, dtype):
    if arrays:
        raise NotLowerable("scatter_add with array indices")
    out = ctx.fresh()
    ctx.emit(f"{out} = np.zeros({tuple(shape)!r}, {dtype_text(dtype)})")
    ctx.emit(f"{out}[{index_text(idx)}] += {ct.text}")
    return out
