"""Sparsity detection by tracing: ``jacobian_sparsity`` and ``hessian_sparsity`` (docs/sparsity.md).

The function is staged on the input's shape and dtype (as ``tg.make_program`` stages it: no value of
the input is read), and its program walked equation by equation, each value carrying a Boolean
dependency matrix (rows: its raveled elements; columns: the input's), mapped through each primitive by
the rule it declares (``tapegrad._dependency``). The input's matrix is the identity. Values that
depend on no input (literals, constants, arrays of ``arange``) are evaluated along the way, so that an
index or a mask built from them is known to the rules that read one (a gather, ``where``).

What comes out always holds every entry that the Jacobian can have (a superset of its non-zeros), and
exactly those for programs of primitives whose rules are exact (docs/sparsity.md lists them). A
primitive without a rule gets the dense pattern (each output element on every input element its
operands depend on) and is named in a ``UserWarning``. Integer and Boolean values carry no dependency
(their derivative is zero), nor do the outputs of primitives declared non-differentiable.

Hessians are detected as the Jacobian pattern of the gradient (``tg.grad`` staged, then walked the
same way), made symmetric.
"""
from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

from tapegrad._api import grad
from tapegrad._backend import is_array, to_host
from tapegrad._core import ShapedArray, Tracer, is_inexact
from tapegrad._dependency import Node, Undetermined, dense, size_of
from tapegrad._jit.api import make_program
from tapegrad._jit.program import Literal, Program, Var


def jacobian_sparsity(f: Callable[..., Any], x: Any, *args: Any, **kwargs: Any) -> Any:
    """The sparsity pattern of the Jacobian of ``f`` at any ``x`` of its shape and dtype, by tracing.

    No value of ``x`` is used: ``f(x, *args, **kwargs)`` is staged on ``x``'s shape and dtype and its
    program walked primitive by primitive (docs/sparsity.md). ``args`` and ``kwargs`` are constants of
    the staged program: their values are used (a mask or an index array among them makes the pattern
    exact where it selects).

    Args:
        f: a function of an array returning one array (its other arguments are ``args`` and ``kwargs``).
        x: a NumPy or CuPy array (or NumPy scalar) of a float or complex dtype (its values are not read).
        *args: further positional arguments of ``f``, held fixed.
        **kwargs: keyword arguments of ``f``, held fixed.

    Returns:
        A Boolean SciPy ``csr_array`` of shape ``(out.size, x.size)`` over the raveled (C order) output
        and input, with sorted indices: True where the Jacobian may hold a non-zero. It is a superset
        of the non-zeros at every ``x``, and exact (for generic values of ``x``) for programs of
        primitives with exact rules. It is the pattern ``tg.sparse_jacfwd(f, sparsity)`` takes.

    Raises:
        TypeError: ``x`` is not an array of a float or complex dtype, or ``f`` does not return one array.

    Warns:
        UserWarning: some primitives declare no dependency rule; the warning names them. Their
            outputs were given the dense pattern (correct, but maybe far from tight): declare a rule
            with ``tapegrad.extend.def_dependency``.

    Example:
        >>> import numpy as np, tapegrad as tg, tapegrad.numpy as tnp
        >>> tg.jacobian_sparsity(lambda x: tnp.sin(x[1:]) * x[:-1], np.zeros(4)).toarray().astype(int)
        array([[1, 1, 0, 0],
               [0, 1, 1, 0],
               [0, 0, 1, 1]])
    """
    x = _check_input(x, "jacobian_sparsity")
    program = _stage(lambda x: f(x, *args, **kwargs), x, "jacobian_sparsity")
    return _detect(program, size_of(np.shape(x)), "jacobian_sparsity")


def hessian_sparsity(f: Callable[..., Any], x: Any, *args: Any, **kwargs: Any) -> Any:
    """The sparsity pattern of the Hessian of the scalar function ``f`` at any ``x`` of its shape and
    dtype, by tracing: the Jacobian pattern of ``tg.grad(f)`` (:func:`jacobian_sparsity` of the
    staged gradient), made symmetric (docs/sparsity.md says why this route).

    Args:
        f: a function of an array returning a scalar (an array of one element).
        x: a NumPy or CuPy array of a float dtype (its values are not read).
        *args: further positional arguments of ``f``, held fixed.
        **kwargs: keyword arguments of ``f``, held fixed.

    Returns:
        A symmetric Boolean SciPy ``csr_array`` of shape ``(x.size, x.size)``, True where the Hessian
        may hold a non-zero (a superset of its non-zeros at every ``x``), the form
        ``tg.sparse_hessian(f, sparsity)`` takes.

    Raises:
        TypeError: ``x`` is not an array of a float dtype, or ``f`` does not return one array.
        ValueError: ``f`` returns more than one element.

    Warns:
        UserWarning: primitives of the gradient's program without a dependency rule (see
            :func:`jacobian_sparsity`).
    """
    x = _check_input(x, "hessian_sparsity")

    def scalar(x):
        out = f(x, *args, **kwargs)
        _check_output(out, "hessian_sparsity")
        if size_of(np.shape(out)) != 1:
            raise ValueError(f"hessian_sparsity: f must return a scalar (one element), got shape {np.shape(out)}; "
                             "for a vector function take jacobian_sparsity, or sum its outputs")
        return out.reshape(())

    program = _stage(grad(scalar), x, "hessian_sparsity")
    pattern = _detect(program, size_of(np.shape(x)), "hessian_sparsity")
    symmetric = (pattern + pattern.T).tocsr()
    symmetric.sort_indices()
    return symmetric


# ---- arguments -----------------------------------------------------------------------------------
def _check_input(x, api: str):
    """``x`` as an array (a NumPy scalar as a 0-d one), checked."""
    if isinstance(x, np.generic):
        x = np.asarray(x)
    if not is_array(x) or isinstance(x, Tracer):
        raise TypeError(f"{api}: x must be a NumPy or CuPy array (its shape and dtype are traced, its values "
                        f"unused), got {type(x).__name__}; pass e.g. numpy.zeros(n)")
    if not is_inexact(x):
        raise TypeError(f"{api}: x must have a float or complex dtype (a Jacobian is taken with respect to "
                        f"it), got {x.dtype}; pass x.astype(float)")
    return x


def _check_output(out, api: str) -> None:
    if not (isinstance(out, Tracer) or is_array(out)):
        raise TypeError(f"{api}: f must return one array, got {type(out).__name__}; for several outputs "
                        "return tnp.concatenate([a.ravel(), b.ravel()])")


def _stage(fn: Callable, x, api: str) -> Program:
    def checked(x):
        out = fn(x)
        _check_output(out, api)
        return out
    return make_program(checked)(x)


# ---- the walk ------------------------------------------------------------------------------------
def _detect(program: Program, width: int, api: str):
    import scipy.sparse as sp  # SciPy is needed here only: `import tapegrad` stays without it
    identity = sp.eye_array(width, dtype=bool, format="csr")
    fallbacks: set[str] = set()
    inputs = [identity] + [None] * (len(program.invars) - 1)  # captured values and Parameters: constants
    (out,), _ = _propagate(program, inputs, [None] * len(program.invars), width, fallbacks)
    aval = program.outputs[0].aval if isinstance(program.outputs[0], Var) else None
    rows = 1 if aval is None else size_of(aval.shape)
    pattern = sp.csr_array((rows, width), dtype=bool) if out is None else sp.csr_array(out, dtype=bool)
    pattern.sum_duplicates()
    if fallbacks:
        warnings.warn(f"{api}: no dependency rule for {', '.join(sorted(fallbacks))}: each of their outputs was "
                      "taken to depend on every input element their operands depend on (the dense pattern, a "
                      "superset); declare a rule with tapegrad.extend.def_dependency to make it tight",
                      UserWarning, stacklevel=3)
    return pattern


def _live(program: Program) -> list:
    """The equations the outputs need, in order (a dead equation adds nothing and may lack a rule)."""
    needed = {id(x) for x in program.outputs if isinstance(x, Var)}
    live = []
    for eqn in reversed(program.eqns):
        if eqn.prim.effectful or any(id(v) in needed for v in eqn.outs):
            live.append(eqn)
            needed.update(id(x) for x in eqn.inputs if isinstance(x, Var))
    return live[::-1]


def _propagate(program: Program, deps: list, values: list, width: int, fallbacks: set) -> tuple[list, list]:
    """The dependency matrices (None: none) of ``program``'s outputs and the values known of them (None:
    unknown), given those of its inputs; primitives met without a rule are added to ``fallbacks``."""
    env: dict[int, Any] = {}
    known: dict[int, Any] = {}
    for v, dep, value in zip(program.invars, deps, values):
        env[id(v)] = dep
        if value is not None:
            known[id(v)] = value
    for v, c in zip(program.constvars, program.consts):
        known[id(v)] = to_host(c)

    def recurse(sub: Program, sub_deps: list, sub_values: list) -> tuple[list, list]:
        return _propagate(sub, sub_deps, sub_values, width, fallbacks)

    for eqn in _live(program):
        in_deps = [None if isinstance(x, Literal) else env.get(id(x)) for x in eqn.inputs]
        in_values = [x.value if isinstance(x, Literal) else known.get(id(x)) for x in eqn.inputs]
        if all(d is None for d in in_deps):
            outs: list = [None] * len(eqn.outs)
            _fold(eqn, in_values, known)
        elif eqn.prim.nondiff:
            outs = [None] * len(eqn.outs)
        else:
            rule = eqn.prim.dependency
            if rule is None:
                fallbacks.add(eqn.prim.name)
                rule = dense
            avals = [_aval(x) for x in eqn.inputs]
            node = Node(eqn.prim, in_deps, in_values, avals, [v.aval for v in eqn.outs], eqn.params, width, recurse)
            try:
                outs = rule(node)
            except Undetermined as why:
                fallbacks.add(f"{eqn.prim.name} ({why})")
                outs = dense(node)
        for v, dep in zip(eqn.outs, outs):
            env[id(v)] = dep if dep is not None and is_inexact(v.aval) and dep.nnz else None
    return ([None if isinstance(x, Literal) else env.get(id(x)) for x in program.outputs],
            [x.value if isinstance(x, Literal) else known.get(id(x)) for x in program.outputs])


def _aval(x):
    return ShapedArray((), type(x.value)) if isinstance(x, Literal) else x.aval


def _fold(eqn, in_values: list, known: dict) -> None:
    """Evaluate an equation of known operands (an index or a mask computed from constants), so that
    rules reading it have its value; an effectful one, or one that fails, stays unknown."""
    if eqn.prim.effectful or any(v is None for v in in_values):
        return
    try:
        outs = eqn.prim.impl(*in_values, **eqn.params)
    except Exception:  # noqa: BLE001 (a value left unknown only makes a rule conservative)
        return
    for v, out in zip(eqn.outs, outs if eqn.prim.multiple_results else [outs]):
        known[id(v)] = to_host(out)
