"""``custom_root`` and ``custom_linear_solve`` (JAX's ``lax.custom_root`` and ``lax.custom_linear_solve``):
a solver's result differentiated by the implicit function theorem, never through its iterations.

The function whose root is sought (``f``) and the linear operator (``matvec``) close over the values
they are differentiated with respect to. Each is staged once (``_closed._staged``, the closure
conversion of ``cond`` and ``scan``), which finds the values of outer transforms and the Parameters it
reads; the staged program is then a function of those values made explicit, ``f(theta, x)``.

The solver runs on ``stop_gradient`` of everything it is given, so no transform records its
iterations; its result enters a joint call (``bind_joint``) whose operands are ``theta`` and the
solution and whose rules are the implicit function theorem's:

- root: ``f(theta, x*) = 0`` gives ``dx* = -(d_x f)^-1 (d_theta f) dtheta``: forward mode calls
  ``tangent_solve`` on the linearisation of ``f`` in ``x``; reverse mode transposes that tangent map.
- linear solve: ``A(theta) x = b`` gives ``dx = A^-1 (db - dA x)`` (forward mode, ``solve`` again) and
  ``ct_b = A^-T ct_x``, ``ct_theta = -<ct_b, dA x>`` (reverse mode, ``transpose_solve`` on the
  transpose of ``matvec``, which reverse mode builds).

The solvers (``custom_linear_solve``'s ``solve`` and ``transpose_solve``, ``custom_root``'s
``tangent_solve``) may close over traced values too, as in JAX's canonical use
(``lambda mv, r: tnp.linalg.solve(A, r)`` with ``A`` differentiated): each is staged once
(:class:`_Solver`), and the values it reads become operands of the joint call, so a rule that runs after
the transform that traced them (reverse mode's backward pass) still has them. They get no derivative
of their own (JAX's rule: the implicit function theorem accounts for ``A`` through ``matvec`` and
``f``); a solver that cannot be staged (it iterates in Python on concrete values) is called as it is,
and must then close over no traced value.

Each rule applies the call again to its own operands, so the solution it uses is itself
differentiable by an outer transform, and every order works where ``f`` and ``tangent_solve`` are
written in tapegrad operations. The joint call's forward applies the call one level down for the same
reason: an outer transform sees the implicit-function rule, not a constant.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

import numpy as np

from tapegrad import _tree
from tapegrad._backend import SCALAR_TYPES, namespace_of, zeros_like
from tapegrad._control_flow._closed import _implicit_operands, _operand_leaf, _staged
from tapegrad._core import Tracer, bind_joint, is_inexact, trace_stack
from tapegrad._jit.codegen import evaluate
from tapegrad._jvp import jvp_flat, scalar_like
from tapegrad._structural import astype, stop_gradient
from tapegrad._tape import vjp_flat
from tapegrad._typing import PyTree
from tapegrad.numpy import copy as _copy
from tapegrad.numpy import negative, subtract


# ---- shared pieces -------------------------------------------------------------------------------
def _leaves_of(tree, where: str, what: str) -> tuple[list, Any]:
    """The leaves of ``tree`` as arrays (a Python scalar as a 0-d array of NumPy's dtype for it)."""
    leaves, treedef = _tree.tree_flatten(tree)
    leaves = [_operand_leaf(x, where, k, what) for k, x in enumerate(leaves)]
    return [np.asarray(x) if type(x) in SCALAR_TYPES else x for x in leaves], treedef


def _type(x) -> str:
    return f"{np.dtype(x.dtype).name}{list(x.shape)}"


def _check_like(where: str, who: str, got, like_leaves, like_tree, like_name: str, cast: bool = True) -> list:
    """The leaves of ``got`` (returned by ``who``), checked against ``like_leaves``: the same pytree
    structure and shapes (a ValueError naming ``who`` otherwise); a dtype that differs is cast to the
    expected one where ``cast``, else refused."""
    leaves, treedef = _tree.tree_flatten(got)
    if treedef != like_tree:
        raise ValueError(f"{where}: {who} returned a value of pytree structure {treedef}, but {like_name} has "
                         f"{like_tree}; return one of {like_name}'s structure")
    out = []
    for k, (x, like) in enumerate(zip(leaves, like_leaves)):
        if type(x) in SCALAR_TYPES:
            x = scalar_like(x, like, where)
        if not hasattr(x, "shape") or tuple(x.shape) != tuple(like.shape):
            shape = tuple(x.shape) if hasattr(x, "shape") else type(x).__name__
            raise ValueError(f"{where}: {who} returned leaf {k} of shape {shape} where {like_name} has "
                             f"{_type(like)}; return one shaped like {like_name}")
        if np.dtype(x.dtype) != np.dtype(like.dtype):
            if not cast:
                raise TypeError(f"{where}: {who} returned leaf {k} of dtype {x.dtype} where {like_name} has "
                                f"{_type(like)}; cast it with .astype")
            x = astype(x, like.dtype)
        out.append(x)
    return out


class _Explicit:
    """A function of one pytree that closes over traced values, staged: ``self(theta, leaves)`` runs its
    program with the values it closed over (``theta``) given explicitly, through ``bind``."""

    def __init__(self, fun, leaves, treedef, where: str, name: str):
        def flat(*xs):
            out = fun(_tree.tree_unflatten(treedef, list(xs)))
            return _check_like(where, name, out, xs, treedef, "its argument", cast=False)
        program, builder = _staged(flat, leaves, where, name)
        self.program = program
        self.theta = _implicit_operands(builder)

    def __call__(self, theta, xs) -> list:
        return evaluate(self.program, list(xs) + list(theta))


class _Solver:
    """A solver ``solve(fn, rhs)`` of a staged linear function (``matvec``, or ``f`` linearised), with
    the traced values it closes over made explicit (``self.consts``), as :class:`_Explicit` does for
    ``f``: ``self(theta, consts, fn, rhs_leaves)`` runs it with those values given.

    ``make_fn(theta, extra)`` builds the function handed to ``solve`` from the explicit operands
    (``extra``: more leaves it needs, the root's solution); the staged program takes
    ``(*theta, *extra, *rhs, *consts)``. A solver that reads no traced value, or cannot be staged
    (it iterates in Python on concrete values, converts with ``np.asarray``, returns non-arrays), is
    called as it is: ``consts`` is empty."""

    def __init__(self, solve, make_fn, theta, extra, rhs_leaves, treedef, where: str, name: str,
                 closes_over_nothing: bool = False):
        self.solve, self.treedef = solve, treedef
        self.program, self.consts, self.out_tree = None, [], None
        n_theta, n_extra = len(theta), len(extra)
        if closes_over_nothing or not trace_stack():  # nothing traced to close over (no transform running)
            return

        def flat(*ins):
            fn = make_fn(list(ins[:n_theta]), list(ins[n_theta:n_theta + n_extra]))
            leaves, self.out_tree = _tree.tree_flatten(solve(fn, _tree.tree_unflatten(treedef,
                                                                                      list(ins[n_theta + n_extra:]))))
            return leaves
        try:
            program, builder = _staged(flat, list(theta) + list(extra) + list(rhs_leaves), where, name)
        except (TypeError, NotImplementedError):  # not stageable (ConcretizationError and the like): then it
            return                                 # must read no traced value, and is called as it is
        consts = _implicit_operands(builder)
        if consts:
            self.program, self.consts = program, consts

    def __call__(self, theta, consts, fn, rhs_leaves, extra=()):
        if self.program is None:
            return self.solve(fn, _tree.tree_unflatten(self.treedef, list(rhs_leaves)))
        outs = evaluate(self.program, list(theta) + list(extra) + list(rhs_leaves) + list(consts))
        return _tree.tree_unflatten(self.out_tree, outs)


def _replace(values, positions, new) -> list:
    values = list(values)
    for i, v in zip(positions, new):
        values[i] = v
    return values


def _inexact_positions(theta) -> list:
    """The positions of ``theta`` that carry derivatives: float and complex values (an integer closed-over
    value gets none)."""
    return [i for i, t in enumerate(theta) if is_inexact(t)]


def _zeros_for_none(values, likes) -> list:
    return [zeros_like(like) if v is None else v for v, like in zip(values, likes)]


def _is_concrete(values) -> bool:
    return not any(isinstance(v, Tracer) for v in values)


# ---- custom_root ---------------------------------------------------------------------------------
def _linearisation(f: _Explicit, treedef) -> Callable:
    """``make(theta, sol) -> g``: ``f(theta, .)`` linearised at ``sol``, the function ``tangent_solve``
    receives, checking what it is given."""
    def make(theta, sol):
        def g(v):
            v_leaves = _check_like("custom_root", "tangent_solve's argument to g", v, sol, treedef, "initial_guess")
            _, out = jvp_flat(lambda *xs: f(theta, xs), list(sol), v_leaves)
            return _tree.tree_unflatten(treedef, _zeros_for_none(out, sol))
        return g
    return make


_STAGES = {"f": "differentiating f at the root", "tangent_solve": "in tangent_solve"}


class _RootCall:
    """The joint call of a root: operands ``theta`` (what ``f`` closed over), the values
    ``tangent_solve`` closed over and the solution's leaves; its value is the solution, its derivatives
    the implicit function theorem's."""

    remat = False
    name = "custom_root"

    def __init__(self, f: _Explicit, treedef, tangent_solver: _Solver, where: str, hints: dict):
        self.f, self.treedef, self.tangent_solver = f, treedef, tangent_solver
        self.n_theta, self.n_head = len(f.theta), len(f.theta) + len(tangent_solver.consts)
        self.linearise = _linearisation(f, treedef)
        self.where, self.hints = where, hints

    def __repr__(self):
        return self.name

    def fun(self, *leaves):
        return [_copy(x) for x in leaves[self.n_head:]]  # a copy: no result aliases an operand

    def forward(self, *primals):
        return bind_joint(self, *primals), primals  # applied again one level down: outer transforms see the rule

    def backward(self, primals, out_cts):
        from tapegrad._custom import _transpose
        return _transpose(lambda t: self.jvp(primals, t)[1], primals, out_cts)

    def jvp(self, primals, tangents):
        theta, consts = list(primals[:self.n_theta]), list(primals[self.n_theta:self.n_head])
        sol = bind_joint(self, *primals)
        live = [i for i in _inexact_positions(theta) if tangents[i] is not None]
        if not live:
            return sol, [None] * len(sol)
        _, rhs = self._stage("f", lambda: jvp_flat(lambda *v: self.f(_replace(theta, live, v), sol),
                                                   [theta[i] for i in live], [tangents[i] for i in live]))
        rhs = _zeros_for_none(rhs, sol)
        out = self._stage("tangent_solve", lambda: self.tangent_solver(theta, consts, self.linearise(theta, sol), rhs,
                                                                       extra=sol))
        dx = _check_like("custom_root", "tangent_solve", out, sol, self.treedef, "initial_guess")
        return sol, [negative(d) for d in dx]

    def _stage(self, stage: str, run: Callable) -> Any:
        """``run()``, one stage of the derivative (``f`` differentiated at the root, or ``tangent_solve``);
        where the caller gave a hint for it, a failure says so: the same exception type, its message
        naming the caller, the stage and the hint."""
        hint = self.hints.get(stage)
        try:
            return run()
        except (ValueError, TypeError, RuntimeError, NotImplementedError) as error:
            if hint is None or str(error).startswith(self.where):
                raise
            message = f"{self.where}: the implicit derivative failed {_STAGES[stage]}: {error}. {hint}"
            try:
                explained = type(error)(message)
            except TypeError:  # an exception type built otherwise: its message, in a RuntimeError
                explained = RuntimeError(message)
            raise explained from error

    def on_capture(self, args):
        raise TypeError("custom_root: tangent_solve uses a value traced by the running transform that it does not "
                        "receive, and it could not be staged to find it (it iterates in Python on concrete values, "
                        "or converts with np.asarray): write it in tapegrad operations, or compute the solution "
                        "from the linear function g and the right-hand side it is given")


def _residual_scale(values) -> float:
    return max([1.0] + [float(namespace_of(v).max(namespace_of(v).abs(v))) for v in values if v.size])


def _check_residual(f: _Explicit, theta, guess, sol, residual_tol) -> None:
    """The ValueError of ``custom_root`` when ``f(sol)`` is not near zero (only for concrete values)."""
    if residual_tol is None or not _is_concrete(list(theta) + list(sol) + list(guess)):
        return
    floats = [np.dtype(x.dtype) for x in sol if is_inexact(x)]
    if residual_tol == "auto":
        residual_tol = max([np.finfo(d).eps for d in floats] or [np.finfo(np.float64).eps]) ** 0.25
    worst = max([0.0] + [float(namespace_of(r).max(namespace_of(r).abs(r))) for r in f(theta, sol) if r.size])
    scale = _residual_scale(f(theta, guess))
    if not worst <= residual_tol * scale:  # NaN fails too
        raise ValueError(f"custom_root: solve returned a point where f is not near zero: max |f(x)| = {worst:.3g} > "
                         f"residual_tol * max(1, max |f(initial_guess)|) = {residual_tol:.3g} * {scale:.3g}; the "
                         "implicit-function derivative holds only at a root. Check that solve(f, initial_guess) "
                         "returns a root of f (let it iterate longer), or pass a larger residual_tol= (None "
                         "skips the check)")


def custom_root(f: Callable[[Any], Any], initial_guess: PyTree, solve: Callable[[Callable, Any], Any],
                tangent_solve: Callable[[Callable, Any], Any], has_aux: bool = False, *,
                residual_tol: float | Literal["auto"] | None = "auto") -> Any:
    """A root of ``f`` found by ``solve``, differentiated by the implicit function theorem (JAX's
    ``lax.custom_root``).

    ``x* = solve(f, initial_guess)`` with ``f(x*) = 0``. The derivatives are with respect to the values
    ``f`` closes over (``theta``): from ``f(theta, x*(theta)) = 0``,
    ``dx* = -(d_x f)^-1 (d_theta f) dtheta``, which forward mode computes by calling ``tangent_solve``
    on the linearisation of ``f`` in ``x`` and reverse mode by transposing that map. ``solve`` is never
    differentiated: it runs on constant (``stop_gradient``) values, so it may iterate in Python (eagerly
    it sees concrete arrays) and no transform records its iterations. ``initial_guess`` and the values
    only ``solve`` reads get no derivative (as in JAX). Both modes, every order where ``f`` and
    ``tangent_solve`` are differentiable, ``vmap`` and ``jit`` work.

    Args:
        f: ``f(x) -> y``, ``y`` of ``x``'s pytree structure, shapes and dtypes. It is staged once on the
            types of ``initial_guess`` (as a ``cond`` branch is) to find the traced values and Parameters
            it reads, so it must be written in tapegrad operations with no Python control flow on
            ``x``'s values. Integer values it closes over get no derivative.
        initial_guess: a pytree of float arrays (or Python floats, as float64), where ``solve`` starts.
        solve: ``solve(f, initial_guess) -> x*`` (``(x*, aux)`` with ``has_aux``), ``x*`` of
            ``initial_guess``'s structure and shapes (a dtype that differs is cast to the guess's).
        tangent_solve: ``tangent_solve(g, y) -> x`` with ``g(x) = y``, where ``g`` is ``f`` linearised
            in ``x`` at the root (JAX's examples: ``lambda g, y: y / g(1.0)`` for a scalar,
            ``lambda g, y: tnp.linalg.solve(tg.jacfwd(g)(y), y)`` for a small vector). Reverse mode
            differentiates it in ``y``, so write it in tapegrad operations (or with
            :func:`custom_linear_solve`). It may close over traced values (``lambda g, y:
            tnp.linalg.solve(A, y)`` with ``A`` differentiated): it is staged once, which calls it one
            more time on abstract values, and what it reads becomes an operand, with no derivative of its
            own. One that cannot be staged (it converts with ``np.asarray``) is called as it is, and must
            then read traced values only through ``g``.
        has_aux: ``solve`` returns ``(x*, aux)``; ``aux`` is returned as it is, with no derivative.
        residual_tol: the check that ``solve`` returned a root: where the values are concrete (eager
            mode, not under ``vmap`` or ``jit``, where it is not made), ``max |f(x*)|`` must be at most
            ``residual_tol * max(1, max |f(initial_guess)|)``. ``"auto"`` (the default) is
            ``eps ** 0.25`` of the least precise float dtype of ``x*`` (1.2e-4 for float64, 0.019 for
            float32): loose enough for an iterative solver, tight enough to catch a wrong one. ``None``
            skips the check. On CuPy the check reads one number from the device.

    Returns:
        ``x*``, a pytree of ``initial_guess``'s structure, shapes and dtypes; with ``has_aux``,
        ``(x*, aux)``.

    Raises:
        TypeError: ``f``, ``solve`` or ``tangent_solve`` not callable; a leaf of ``initial_guess`` not
            an array; ``f`` returning another dtype; ``has_aux`` with ``solve`` not returning a pair;
            a ``tangent_solve`` that cannot be staged reading a traced value it is not given, in the
            modes that call it while the transform runs.
        RuntimeError: the same, where it runs after the transform that traced the value (reverse mode,
            ``jacfwd``): the message names the operation that met the finished transform's value.
        ValueError: ``f``, ``solve`` or ``tangent_solve`` returning a value of another structure or shape
            than ``initial_guess``; ``f(x*)`` not near zero (``residual_tol``); ``f`` assigning a
            Parameter.
    """
    for name, fun in (("f", f), ("solve", solve), ("tangent_solve", tangent_solve)):
        if not callable(fun):
            raise TypeError(f"custom_root: {name} must be a function, got {type(fun).__name__}")
    if residual_tol is not None and residual_tol != "auto" and not (
            isinstance(residual_tol, (int, float)) and residual_tol > 0):
        raise ValueError(f"custom_root: residual_tol must be a positive number, 'auto' or None, got {residual_tol!r}")
    return _root(f, initial_guess, solve, tangent_solve, has_aux, residual_tol, "custom_root", {}, False)


def root_with_context(f: Callable[[Any], Any], initial_guess: PyTree, solve: Callable[[Callable, Any], Any],
                      tangent_solve: Callable[[Callable, Any], Any], *, where: str, hints: dict) -> Any:
    """:func:`custom_root` for a library built on it (``tapegrad.scipy.optimize``), with no residual
    check and a ``tangent_solve`` of its own that closes over nothing (so it is not staged): a failure
    of the derivative names ``where`` and adds ``hints[stage]`` for the stage that failed (``"f"``,
    differentiating ``f`` at the root; ``"tangent_solve"``)."""
    return _root(f, initial_guess, solve, tangent_solve, False, None, where, hints, True)


def _root(f, initial_guess, solve, tangent_solve, has_aux, residual_tol, where: str, hints: dict,
          tangent_solve_closes_over_nothing: bool):
    guess, treedef = _leaves_of(initial_guess, "custom_root", "initial_guess")
    explicit = _Explicit(f, guess, treedef, "custom_root", "f")
    theta = explicit.theta
    theta_sg, guess_sg = [stop_gradient(t) for t in theta], [stop_gradient(g) for g in guess]

    def f_constant(x):
        return _tree.tree_unflatten(treedef, explicit(theta_sg, _tree.tree_leaves(x)))
    result = solve(f_constant, _tree.tree_unflatten(treedef, guess_sg))
    aux = None
    if has_aux:
        if not isinstance(result, (tuple, list)) or len(result) != 2:
            raise TypeError(f"custom_root: with has_aux=True, solve must return a pair (solution, aux), got "
                            f"{type(result).__name__}")
        result, aux = result
        aux = _tree.tree_map(lambda a: stop_gradient(a) if hasattr(a, "dtype") else a, aux)
    sol = [stop_gradient(x) for x in _check_like("custom_root", "solve", result, guess, treedef, "initial_guess")]
    _check_residual(explicit, theta_sg, guess_sg, sol, residual_tol)
    tangent_solver = _Solver(tangent_solve, _linearisation(explicit, treedef), theta, guess, guess, treedef,
                             "custom_root", "tangent_solve", tangent_solve_closes_over_nothing)
    call = _RootCall(explicit, treedef, tangent_solver, where, hints)
    out = _tree.tree_unflatten(treedef, bind_joint(call, *theta, *tangent_solver.consts, *sol))
    return (out, aux) if has_aux else out


# ---- custom_linear_solve -------------------------------------------------------------------------
def _as_matvec(linear: Callable, treedef) -> Callable:
    """``make(theta, _) -> matvec``: the staged linear function on pytrees, as a solve receives it."""
    def make(theta, _):
        return lambda x: _tree.tree_unflatten(treedef, linear(theta, _tree.tree_leaves(x)))
    return make


class _LinearSolveCall:
    """The joint call of ``x = A(theta)^-1 b``: operands ``theta`` (what ``matvec`` closed over), the
    values ``solve`` and ``transpose_solve`` closed over, and the leaves of ``b``; results the leaves of
    ``x`` and of the solve's aux. Its transpose (``A^T``, with ``transpose_solve``) is another such call
    over the same operands, made once."""

    remat = False

    def __init__(self, name, matvec, vecmat, solver, transpose_solver, n_theta, own, treedef, b_leaves, has_aux,
                 transposed=None):
        self.name, self.matvec, self.vecmat = name, matvec, vecmat
        self.solver, self.transpose_solver = solver, transpose_solver
        self.n_theta, self.own = n_theta, own  # own: where among the operands this call's solver's values are
        self.treedef, self.b_leaves, self.has_aux = treedef, b_leaves, has_aux
        self.aux_tree = None
        self._transposed = transposed

    def __repr__(self):
        return self.name

    @property
    def transposed(self) -> _LinearSolveCall:
        if self.transpose_solver is None:
            raise TypeError("custom_linear_solve: reverse-mode differentiation (grad, vjp) needs transpose_solve, "
                            "the solve of the transposed system: pass transpose_solve=, or symmetric=True when "
                            "matvec is symmetric (then solve serves both), as in JAX")
        if self._transposed is None:
            # only the untransposed call gets here (its transpose is made knowing it): the transpose's values
            # come after the solve's
            start = self.own.stop
            other = slice(start, start + len(self.transpose_solver.consts))
            self._transposed = _LinearSolveCall(f"{self.name} (transposed)", self.vecmat, self.matvec,
                                                self.transpose_solver, self.solver, self.n_theta, other, self.treedef,
                                                self.b_leaves, self.has_aux, transposed=self)
        return self._transposed

    def _split(self, leaves) -> tuple[list, list, list]:
        """``(theta, the values this call's solve closed over, b)`` of its operands ``(*theta, *solve's
        values, *transpose_solve's values, *b)``."""
        return list(leaves[:self.n_theta]), list(leaves[self.own]), list(leaves[len(leaves) - len(self.b_leaves):])

    def fun(self, *leaves):
        theta, consts, b = self._split([stop_gradient(x) for x in leaves])
        result = self.solver(theta, consts, _as_matvec(self.matvec, self.treedef)(theta, ()), b)
        aux_leaves = []
        if self.has_aux:
            if not isinstance(result, (tuple, list)) or len(result) != 2:
                raise TypeError(f"{self.name}: with has_aux=True, the solve must return a pair (solution, aux), got "
                                f"{type(result).__name__}")
            result, aux = result
            aux_leaves, self.aux_tree = _tree.tree_flatten(aux)
            aux_leaves = [stop_gradient(a) for a in aux_leaves]
        who = "transpose_solve" if "transposed" in self.name else "solve"
        x = _check_like("custom_linear_solve", who, result, self.b_leaves, self.treedef, "b")
        return [_copy(stop_gradient(v)) for v in x] + aux_leaves

    def forward(self, *primals):
        outs = bind_joint(self, *primals)  # applied again one level down: outer transforms see the rule
        return outs, (list(primals), list(outs))

    def jvp(self, primals, tangents):
        head, nx = len(primals) - len(self.b_leaves), len(self.b_leaves)
        theta, outs = list(primals[:self.n_theta]), bind_joint(self, *primals)
        x = list(outs[:nx])
        live = [i for i in _inexact_positions(theta) if tangents[i] is not None]
        db = list(tangents[head:])
        if not live and all(t is None for t in db):
            return outs, [None] * len(outs)
        rhs = _zeros_for_none(db, self.b_leaves)
        if live:
            _, dax = jvp_flat(lambda *v: self.matvec(_replace(theta, live, v), x), [theta[i] for i in live],
                              [tangents[i] for i in live])
            rhs = [r if d is None else subtract(r, d) for r, d in zip(rhs, dax)]
        dx = bind_joint(self, *primals[:head], *rhs)[:nx]
        return outs, list(dx) + [None] * (len(outs) - nx)

    def backward(self, residuals, out_cts):
        primals, outs = residuals
        head, nx = len(primals) - len(self.b_leaves), len(self.b_leaves)
        theta, x = list(primals[:self.n_theta]), list(outs[:nx])
        cts = list(out_cts[:nx])
        if all(c is None for c in cts):
            return [None] * len(primals)
        ct_b = list(bind_joint(self.transposed, *primals[:head], *_zeros_for_none(cts, x))[:nx])
        ct_head: list = [None] * head  # the solves' own values get none: the theorem accounts for A in matvec
        live = _inexact_positions(theta)
        if live:
            _, pullback = vjp_flat(lambda *v: self.matvec(_replace(theta, live, v), x), [theta[i] for i in live])
            for i, ct in zip(live, pullback(ct_b)):
                ct_head[i] = None if ct is None else negative(ct)
        return ct_head + ct_b

    def on_capture(self, args):
        raise TypeError("custom_linear_solve: solve or transpose_solve uses a value traced by the running transform "
                        "that it does not receive, and it could not be staged to find it (it iterates in Python on "
                        "concrete values, or converts with np.asarray): write it in tapegrad operations, or compute "
                        "the solution from the matvec and right-hand side it is given")


def _transpose_of(matvec, b_leaves) -> Callable:
    """``vecmat(theta, y)``: the transpose of the linear ``matvec(theta, .)``, by reverse mode at zero."""
    def vecmat(theta, ys):
        _, pullback = vjp_flat(lambda *xs: matvec(theta, xs), [zeros_like(b) for b in b_leaves])
        return _zeros_for_none(pullback(list(ys)), b_leaves)
    return vecmat


def custom_linear_solve(matvec: Callable[[Any], Any], b: PyTree, solve: Callable[[Callable, Any], Any],
                        transpose_solve: Callable[[Callable, Any], Any] | None = None, symmetric: bool = False,
                        has_aux: bool = False) -> Any:
    """A matrix-free linear solve ``x = A^-1 b`` with implicitly defined derivatives (JAX's
    ``lax.custom_linear_solve``).

    ``x = solve(matvec, b)`` with ``matvec(x) = b``. The derivatives are with respect to ``b`` and the
    values ``matvec`` closes over (``theta``, the matrix): from ``A(theta) x = b``, forward mode
    computes ``dx = A^-1 (db - dA x)`` with ``solve`` and reverse mode ``ct_b = A^-T ct_x`` with
    ``transpose_solve`` on ``matvec``'s transpose (built by reverse mode), and
    ``ct_theta = -<ct_b, dA x>``. The solvers are never differentiated: they run on constant
    (``stop_gradient``) values, so they may iterate in Python eagerly. Both modes, every order, ``vmap``
    and ``jit`` work.

    Args:
        matvec: ``matvec(x) -> A x``, linear, ``x`` and the result of ``b``'s structure, shapes and dtypes.
            It is staged once on ``b``'s types (as a ``cond`` branch is) to find the traced values and
            Parameters it reads, so write it in tapegrad operations; integer values it closes over get no
            derivative.
        b: the right-hand side, a pytree of float arrays (or Python floats, as float64).
        solve: ``solve(matvec, b) -> x`` (``(x, aux)`` with ``has_aux``) with ``matvec(x) = b``, ``x`` of
            ``b``'s structure and shapes (a dtype that differs is cast to ``b``'s).
        transpose_solve: ``transpose_solve(vecmat, b) -> x`` for the transposed system (``vecmat`` is
            ``matvec``'s transpose); needed by reverse mode only. None with ``symmetric=True``: ``solve``.
        symmetric: ``matvec`` is symmetric: its own transpose (no transpose is built), and ``solve``
            serves as ``transpose_solve`` when that is None.
        has_aux: the solves return ``(x, aux)``; ``aux`` (a pytree of arrays) is returned with no derivative.

    Returns:
        ``x``, of ``b``'s structure, shapes and dtypes; with ``has_aux``, ``(x, aux)``.

    Raises:
        TypeError: a function not callable; a leaf of ``b`` not an array; ``matvec`` returning another
            dtype; ``has_aux`` with a solve not returning a pair; reverse mode without
            ``transpose_solve`` (and not ``symmetric``); a solve that cannot be staged (it converts with
            ``np.asarray``) reading a traced value it is not given. A solve that can be staged may close
            over traced values (the matrix): staging calls it one more time, on abstract values.
        ValueError: ``matvec`` or a solve returning a value of another structure or shape than ``b``;
            ``matvec`` assigning a Parameter.
    """
    for name, fun in (("matvec", matvec), ("solve", solve)):
        if not callable(fun):
            raise TypeError(f"custom_linear_solve: {name} must be a function, got {type(fun).__name__}")
    if transpose_solve is not None and not callable(transpose_solve):
        raise TypeError(f"custom_linear_solve: transpose_solve must be a function or None, got "
                        f"{type(transpose_solve).__name__}")
    if transpose_solve is None and symmetric:
        transpose_solve = solve
    b_leaves, treedef = _leaves_of(b, "custom_linear_solve", "b")
    explicit = _Explicit(matvec, b_leaves, treedef, "custom_linear_solve", "matvec")
    b_likes = [zeros_like(stop_gradient(x)) for x in b_leaves]
    vecmat = explicit if symmetric else _transpose_of(explicit, b_likes)
    theta = explicit.theta
    solver = _Solver(solve, _as_matvec(explicit, treedef), theta, (), b_leaves, treedef, "custom_linear_solve",
                     "solve")
    transpose_solver = None
    if transpose_solve is solve and symmetric:
        transpose_solver = solver
    elif transpose_solve is not None:
        transpose_solver = _Solver(transpose_solve, _as_matvec(vecmat, treedef), theta, (), b_leaves, treedef,
                                   "custom_linear_solve", "transpose_solve")
    call = _LinearSolveCall("custom_linear_solve", explicit, vecmat, solver, transpose_solver, len(theta),
                            slice(len(theta), len(theta) + len(solver.consts)), treedef, b_likes, has_aux)
    consts = list(solver.consts) + (list(transpose_solver.consts) if transpose_solver is not None else [])
    outs = bind_joint(call, *theta, *consts, *b_leaves)
    x = _tree.tree_unflatten(treedef, list(outs[:len(b_leaves)]))
    if not has_aux:
        return x
    return x, _tree.tree_unflatten(call.aux_tree, list(outs[len(b_leaves):]))
