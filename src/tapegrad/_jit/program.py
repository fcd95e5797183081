"""The staged program: inputs, equations, outputs and constants (JAX's jaxpr), its printer and its type
check.

A :class:`Var` is one array-valued variable with its abstract value (shape, dtype, backend). An
:class:`Eqn` applies one primitive, with its static parameters, to variables or literals (Python
scalars, kept weak as NumPy 2 treats them) and defines its output variables (one per result: several
for a primitive with ``multiple_results``). A :class:`Program` lists
its input variables (the function's array arguments, then the implicit inputs: Parameters read and
values captured from outer transforms), its constant variables with their arrays, its equations in
order, and its outputs (variables or literals).
"""
from __future__ import annotations

import dataclasses
import itertools
from typing import Any

import numpy as np

from tapegrad._core import Primitive, ShapedArray


class Var:
    """One variable of a program; compared by identity."""

    __slots__ = ("aval", "backend", "count")
    _counter = itertools.count()

    def __init__(self, aval: ShapedArray, backend=np):
        self.aval = aval
        self.backend = backend
        self.count = next(Var._counter)

    def __repr__(self):
        return f"Var({self.count}, {type_string(self.aval)})"


@dataclasses.dataclass(frozen=True)
class Literal:
    """A Python scalar operand written into the program (weakly typed, as NumPy 2 treats it)."""

    value: Any


@dataclasses.dataclass(slots=True)  # no __dict__: a long program holds one per operation
class Eqn:
    prim: Primitive
    inputs: list  # Var or Literal
    params: dict
    outs: list  # Var, one per result of the primitive

    @property
    def out(self) -> Var:
        """The output of a single-result equation (the passes that handle only those read it).

        Raises:
            ValueError: the equation has several outputs.
        """
        (out,) = self.outs
        return out


@dataclasses.dataclass
class Program:
    invars: list
    constvars: list
    consts: list
    eqns: list
    outputs: list  # Var or Literal

    def __str__(self):
        return pretty(self)

    def typecheck(self) -> None:
        """Every variable is defined once before use, and every equation's outputs have the abstract
        values its primitive's ``abstract_eval`` gives for its inputs.

        Raises:
            TypeError: naming the equation and the mismatch.
        """
        defined = set(map(id, self.invars)) | set(map(id, self.constvars))
        for k, eqn in enumerate(self.eqns):
            for x in eqn.inputs:
                if isinstance(x, Var) and id(x) not in defined:
                    raise TypeError(f"program equation {k} ({eqn.prim.name}) uses {x!r} before it is defined")
            avals = [_aval_of_operand(x) for x in eqn.inputs]
            expected = eqn.prim.abstract_eval(*avals, **eqn.params)
            if not eqn.prim.multiple_results:
                expected = [expected]
            if len(expected) != len(eqn.outs):
                raise TypeError(f"program equation {k} ({eqn.prim.name}) has {len(eqn.outs)} outputs but "
                                f"abstract evaluation gives {len(expected)}")
            for out, aval in zip(eqn.outs, expected):
                if tuple(aval.shape) != tuple(out.aval.shape) or np.dtype(aval.dtype) != out.aval.dtype:
                    raise TypeError(f"program equation {k} ({eqn.prim.name}): output is {type_string(out.aval)} "
                                    f"but abstract evaluation gives {type_string(aval)}")
                if id(out) in defined:
                    raise TypeError(f"program equation {k} ({eqn.prim.name}) redefines {out!r}")
                defined.add(id(out))
        for x in self.outputs:
            if isinstance(x, Var) and id(x) not in defined:
                raise TypeError(f"program output {x!r} is never defined")


def _aval_of_operand(x):
    if isinstance(x, Literal):
        return ShapedArray((), type(x.value))
    return x.aval


# ---- printing -------------------------------------------------------------------------------------
_SHORT_DTYPES = {"float64": "f64", "float32": "f32", "float16": "f16", "int64": "i64", "int32": "i32",
                 "bool": "bool", "complex128": "c128", "complex64": "c64", "uint8": "u8", "int8": "i8",
                 "int16": "i16"}


def type_string(aval) -> str:
    dtype = aval.dtype
    name = dtype.__name__ if isinstance(dtype, type) else np.dtype(dtype).name
    return f"{_SHORT_DTYPES.get(name, name)}[{','.join(map(str, aval.shape))}]"


def _names():
    for n in itertools.count():
        s, n = "", n
        while True:
            s = chr(ord("a") + n % 26) + s
            n = n // 26 - 1
            if n < 0:
                break
        yield s


def pretty(program: Program, indent: str = "") -> str:
    """A readable listing in the style of ``jax.make_jaxpr``::

        { lambda c:f64[3] ; a:f64[3] b:f64[3]. let
            d:f64[3] = mul a b
            e:f64[3] = add d c
          in (e) }

    An equation of a primitive with several results declares each output: ``f:f64[3] g:f64[3,3] = eigh e``.
    A parameter that holds programs (``switch``'s ``branches``, ``scan``'s ``body``: objects with a
    ``program``) lists each one below the equation, indented, with names of its own.
    """
    names, fresh = {}, _names()

    def name(x):
        if isinstance(x, Literal):
            return repr(x.value)
        if id(x) not in names:
            names[id(x)] = next(fresh)
        return names[id(x)]

    def decl(v):
        return f"{name(v)}:{type_string(v.aval)}"

    consts = " ".join(decl(v) for v in program.constvars)
    ins = " ".join(decl(v) for v in program.invars)
    lines = [f"{{ lambda {consts} ; {ins}. let"]
    for eqn in program.eqns:
        params = "".join(f" {k}={_param_string(v, indent + '      ')}" for k, v in eqn.params.items())
        args = " ".join(name(x) for x in eqn.inputs)
        outs = " ".join(decl(v) for v in eqn.outs)
        lines.append(f"{indent}    {outs} = {eqn.prim.name}{'[' + params.strip() + ']' if params else ''} {args}")
    lines.append(f"{indent}  in ({', '.join(name(x) for x in program.outputs)}) }}")
    return "\n".join(lines)


def _programs_in(value):
    """The programs a parameter holds (an object with a ``program``, or a tuple of them), or None."""
    if isinstance(getattr(value, "program", None), Program):
        return [value.program]
    if isinstance(value, tuple) and value and all(isinstance(getattr(v, "program", None), Program) for v in value):
        return [v.program for v in value]
    return None


def _param_string(value, indent: str = "") -> str:
    programs = _programs_in(value)
    if programs is not None:  # one sub-listing per program, below the equation's line
        return "(\n" + "\n".join(indent + pretty(p, indent) for p in programs) + f"\n{indent[:-2]})"
    if isinstance(value, np.dtype) or (isinstance(value, type) and issubclass(value, np.generic)):
        return np.dtype(value).name
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."
