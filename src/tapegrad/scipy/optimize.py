"""``tapegrad.scipy.optimize``: SciPy's ``minimize``, ``root``, ``root_scalar``, ``fixed_point`` and
``least_squares``, run by SciPy on host values, whose solution is differentiable with respect to traced
``args`` by the implicit function theorem (:func:`tapegrad.custom_root`) on each one's optimality
condition: ``grad f(x*, args) = 0`` (``minimize``), ``F(x*, args) = 0`` (``root``, ``root_scalar``),
``g(x*, args) - x* = 0`` (``fixed_point``), ``J^T r = 0`` (``least_squares``).

SciPy runs on NumPy arrays on the host: CuPy inputs are copied to the host once per solver call
(``.get()``, a synchronisation) and the solution is copied back. Gradients, Hessians and Jacobians that
the method uses are supplied by tapegrad (``jac``, ``hess``, ``hessp``) unless given. The functions SciPy
calls are staged by ``jit`` once per (function, shapes and dtypes) and kept on the function
(``tapegrad.scipy._staged``), ``args`` being inputs of the program; the result's ``executor`` says how
they ran, ``"eager"`` (with ``executor_reason``) where ``jit`` could not stage them.
"""
from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from typing import Any, Literal

import numpy as np

import tapegrad.numpy as tnp
from tapegrad import _tree
from tapegrad._api import grad, stop_gradient
from tapegrad._backend import namespace_of, to_host
from tapegrad._control_flow import custom_linear_solve
from tapegrad._control_flow._solves import root_with_context
from tapegrad._core import Tracer
from tapegrad._jacobians import jacfwd
from tapegrad.numpy import asarray, linalg, reshape
from tapegrad.scipy._minimize_traced import minimize_traced
from tapegrad.scipy._sparse_optimize import (
    check_hess_sparsity,
    sparse_hessian_for_scipy,
    sparse_jacobian_for_scipy,
)
from tapegrad.scipy._staged import Route

ImplicitSolve = Literal["auto", "dense", "cg", "gmres"]
_GRADIENT_FREE = {"nelder-mead", "powell", "cobyla", "cobyqa"}
# the methods that use second derivatives: those that take a Hessian-vector product get one (matrix-free,
# the cost of a few gradients per product), the others (dogleg, trust-exact factorise it) the Hessian
_HESSP = {"newton-cg", "trust-ncg", "trust-krylov", "trust-constr"}
_HESS = {"dogleg", "trust-exact"}
_BOUNDED = {"l-bfgs-b", "tnc", "slsqp", "powell", "trust-constr", "nelder-mead", "cobyla", "cobyqa"}
_ROOT_JAC = {"hybr", "lm"}
_DENSE_MAX = 200  # "auto": a dense adjoint solve up to this many unknowns, iterative (cg, gmres) above


def _concrete(args, where: str) -> list:
    """``args`` with every array leaf (of a pytree argument too) as a host NumPy array; a value under
    ``vmap`` or ``jit`` has none (a TypeError)."""
    if _plain(args):  # the common case, without the tree walks: SciPy calls the solver in a loop
        return list(args)
    values = [_tree.tree_map(stop_gradient, a) for a in args]
    for k, v in enumerate(values):
        if any(isinstance(leaf, Tracer) for leaf in _tree.tree_leaves(v)):
            raise TypeError(f"{where}: args[{k}] is (or holds) a value of vmap or jit, but SciPy's solver needs "
                            "concrete host values: call it eagerly (grad, vjp, jvp and their nestings work), or use "
                            "tg.custom_root with a solver written in tapegrad operations under vmap or jit")
    return [_tree.tree_map(lambda leaf: to_host(leaf) if hasattr(leaf, "shape") else leaf, v) for v in values]


def _plain(args) -> bool:
    """Whether every argument is a host NumPy array or a Python number: nothing traced, nothing to copy."""
    return all(type(a) is np.ndarray or type(a) in (float, int) for a in args)


def _held_by_vmap_or_jit(x0, args) -> bool:
    """Whether ``x0`` or a leaf of ``args`` is a value of ``vmap`` or ``jit`` (a derivative's tracer is
    only stopped: its primal is what SciPy gets)."""
    if type(x0) is not np.ndarray and isinstance(stop_gradient(asarray(x0)), Tracer):
        return True
    return not _plain(args) and any(isinstance(stop_gradient(leaf), Tracer) for leaf in _tree.tree_leaves(list(args))
                                    if hasattr(leaf, "shape") or isinstance(leaf, Tracer))


def _value_and_flat_grad(out) -> tuple:
    """``(value, gradient)`` as SciPy's ``jac=True`` takes them: a float and a flat float64 array."""
    return float(out[0]), np.asarray(out[1], dtype=np.float64).ravel()


def _flat_float(out) -> np.ndarray:
    return np.asarray(out, dtype=float).ravel()


def _floats(out) -> Any:
    """``root_scalar``'s ``f`` value as SciPy takes it: a float, or a tuple of floats (``fprime=True``)."""
    return tuple(float(o) for o in out) if isinstance(out, tuple) else float(out)


def _traced(args) -> bool:
    """Whether any leaf of ``args`` (a dict, tuple or list argument's too) is traced: its solution is then
    differentiated."""
    return not _plain(args) and any(isinstance(leaf, Tracer) for leaf in _tree.tree_leaves(list(args)))


def _check_implicit_solve(implicit_solve, where: str) -> None:
    if implicit_solve not in ("auto", "dense", "cg", "gmres"):
        raise ValueError(f"{where}: implicit_solve must be 'auto', 'dense', 'cg' or 'gmres', got {implicit_solve!r}")


def _host_solver(kind: str, where: str) -> Callable:
    """A solve ``(matvec, b) -> x`` of SciPy's ``cg`` or ``gmres`` through a ``LinearOperator``; on a
    batched (``vmap``) right-hand side, which SciPy cannot take, a dense solve in tapegrad operations."""
    from scipy.sparse import linalg as sparse

    def solve(matvec, b):
        if isinstance(b, Tracer):  # under vmap (jacrev, hessian batch their sweeps): SciPy cannot see it
            return linalg.solve(jacfwd(matvec)(b), b)
        n = b.size
        operator = sparse.LinearOperator((n, n), matvec=lambda v: to_host(matvec(np.asarray(v).reshape(b.shape))),
                                         dtype=np.dtype(b.dtype))
        method = sparse.cg if kind == "cg" else sparse.gmres
        x, info = method(operator, to_host(b).ravel(), rtol=1e-12, atol=0.0, maxiter=10 * n)
        if info != 0:
            raise ValueError(f"{where}: the adjoint system of the implicit derivative did not converge with {kind} "
                             f"(info={info}): it is singular or ill-conditioned at the solution; try "
                             "implicit_solve='dense', or check that the solution is a strict optimum/regular root")
        return namespace_of(b).asarray(x.reshape(b.shape), dtype=b.dtype)
    return solve


_OTHER_SOLVE = {"dense": "implicit_solve='cg' (symmetric) or 'gmres' (matrix-free: no matrix is formed)",
                "cg": "implicit_solve='dense' (or 'gmres' when the system is not symmetric)",
                "gmres": "implicit_solve='dense'"}


def _solve_kind(implicit_solve: str, n: int, symmetric: bool) -> str:
    return implicit_solve if implicit_solve != "auto" else ("dense" if n <= _DENSE_MAX else
                                                            ("cg" if symmetric else "gmres"))


def _solve_of_kind(kind: str, symmetric: bool, where: str) -> Callable:
    if kind == "dense":
        def dense(g, y):
            # on x flattened: a 0-d x (root_scalar) or an x of several axes is one vector of unknowns
            shape = y.shape
            matrix = jacfwd(lambda v: reshape(g(reshape(v, shape)), (-1,)))(reshape(y, (-1,)))
            if not isinstance(stop_gradient(matrix), Tracer):
                host = to_host(stop_gradient(matrix))
                if not np.all(np.isfinite(host)) or np.linalg.cond(host) > 1 / np.finfo(host.dtype).eps:
                    raise ValueError(f"{where}: the adjoint system of the implicit derivative is singular at the "
                                     "solution (the Hessian or Jacobian there is not invertible), so x* does not "
                                     "depend smoothly on args: the derivative is undefined")
            return reshape(linalg.solve(matrix, reshape(y, (-1,))), shape)
        return dense
    solver = _host_solver(kind, where)
    if symmetric:
        return lambda g, y: custom_linear_solve(g, y, solver, symmetric=True)
    return lambda g, y: custom_linear_solve(g, y, solver, transpose_solve=solver)


def _implicit_solution(x_host, like, optimality, args, implicit_solve, symmetric, where: str):
    """SciPy's solution ``x_host`` with ``like``'s shape, dtype and backend, differentiable with respect to
    the traced ``args`` through ``custom_root`` on ``optimality(x, *args) = 0``."""
    if type(like) is np.ndarray and not _traced(args):  # the common case, without the backend's probes
        return np.asarray(x_host).reshape(like.shape).astype(like.dtype, copy=False)
    like = stop_gradient(like)
    xp = namespace_of(like)
    x_star = xp.asarray(np.asarray(x_host).reshape(like.shape), dtype=like.dtype)
    if not _traced(args):
        return x_star
    # the condition in x's dtype: float64 args with a float32 x0 would give f another dtype than x
    kind = _solve_kind(implicit_solve, int(np.size(x_star)), symmetric)
    hints = {"f": "f is the optimality condition; the implicit derivative differentiates it in x and in args, in "
                  "both modes, so every operation of the function needs its jvp and vjp rules",
             "tangent_solve": f"It is the adjoint solve of the Hessian or Jacobian at the solution, "
                              f"implicit_solve={kind!r}; try {_OTHER_SOLVE[kind]}"}
    return root_with_context(lambda x: tnp.astype(optimality(x, *args), like.dtype), like, lambda f, g: x_star,
                             _solve_of_kind(kind, symmetric, where), where=where, hints=hints)


def _check_success(success: bool, message: Any, args, where: str,
                   fix: str = "raise options['maxiter'], loosen tol, or start nearer (x0)") -> None:
    """A solver that did not converge: a ValueError when its solution is differentiated (the implicit
    derivative holds only at a solution), a RuntimeWarning otherwise."""
    if success:
        return
    text = f"{where}: SciPy's solver did not converge ({message!r})"
    if _traced(args):
        raise ValueError(text + f"; its x is no solution, so the implicit derivative would be wrong: {fix}")
    warnings.warn(text + "; the result is not a solution", RuntimeWarning, stacklevel=3)


def _check_bounds(x, lower, upper, where: str) -> None:
    """An entry of ``x`` on a bound (``lower``, ``upper``: scalars or sequences of ``x``'s size, NaN or
    inf where there is none) is a ValueError: the unconstrained optimality condition does not hold there."""
    x = np.asarray(x, dtype=float).ravel()
    lower, upper = (np.broadcast_to(np.asarray(b, dtype=float), x.shape) for b in (lower, upper))
    near = np.sqrt(np.finfo(float).eps) * (1 + np.abs(x))
    active = np.flatnonzero((np.abs(x - lower) <= near) | (np.abs(x - upper) <= near))
    if active.size:
        raise ValueError(f"{where}: the solution lies on a bound (entries {active.tolist()}): the "
                         "unconstrained optimality condition does not hold there, so the implicit derivative "
                         "would be wrong; loosen the bound or drop it")


def _with_args(fn: Any, kind: str, shape, host_args, host_kwargs=None) -> Any:
    """A user's derivative called as SciPy calls it, ``fn(x, *extra, *args, **kwargs)`` (``extra``:
    ``hessp``'s ``p``), SciPy itself being handed ``args=()``: ``x`` (and ``p``) in ``x0``'s shape, as
    ``fun`` gets it, and the result flattened as SciPy takes it, by ``kind``: ``"grad"`` (``n``),
    ``"hess"`` (``(n, n)``), ``"hessp"`` (``n``) or ``"jacobian"`` (``(m, n)``). Anything else
    (``True``, a finite-difference scheme's name, None) passes unchanged."""
    if not callable(fn):
        return fn
    kwargs, n = dict(host_kwargs or {}), int(np.prod(shape))
    flat = {"grad": (-1,), "hess": (n, n), "hessp": (-1,), "jacobian": (-1, n)}[kind]

    def with_args(x, *extra):
        if kind == "hessp":
            extra = (np.asarray(extra[0]).reshape(shape), *extra[1:])
        return np.asarray(fn(np.asarray(x).reshape(shape), *extra, *host_args, **kwargs)).reshape(flat)
    return with_args


def _given(**options: Any) -> dict:
    """The options that are not None: SciPy's own default, and how a SciPy that predates an option or
    its None (``least_squares``' ``callback`` and ``workers``, and ``x_scale=None``, new in 1.16; the
    floor is 1.15) is still called."""
    return {name: value for name, value in options.items() if value is not None}


def _float_like(x0) -> Any:
    """``x0`` as an array of a floating dtype (float64 for integers), on its backend, without a derivative."""
    if type(x0) is np.ndarray and x0.dtype.kind == "f":  # as the general case gives it, without its cost
        return x0
    x0 = asarray(stop_gradient(x0))
    dtype = np.result_type(np.dtype(x0.dtype), np.float32)
    return namespace_of(x0).asarray(x0, dtype=dtype)


def minimize(fun: Callable[..., Any], x0: Any, args: Sequence[Any] = (), method: str | None = None,
             jac: Any = None, hess: Any = None, hessp: Any = None, bounds: Any = None, constraints: Any = (),
             tol: float | None = None, callback: Callable[..., Any] | None = None, options: dict | None = None,
             *, implicit_solve: ImplicitSolve = "auto", hess_sparsity: Any = None) -> Any:
    """SciPy's ``scipy.optimize.minimize``, with a solution differentiable with respect to ``args``.

    SciPy's solver runs on host values (any ``method``); tapegrad supplies ``jac`` (the gradient, by
    reverse mode) to every method that uses one, ``hessp`` (Hessian-vector products, forward over
    reverse mode) to ``Newton-CG``, ``trust-ncg``, ``trust-krylov`` and ``trust-constr``, and ``hess``
    (the Hessian) to ``dogleg`` and ``trust-exact``, unless ``jac``, ``hess`` or ``hessp`` are given.
    The function and these derivatives are staged by :func:`tapegrad.jit` once per (function, shapes
    and dtypes), kept on ``fun`` and reused by later calls, ``args`` being inputs of the staged
    program (a new value of them does not stage again; one that is not an array, a string say, is a
    static argument, part of the key), while an array ``fun`` reads from a closure or a global is a
    constant of the program, as with ``jit``: data that changes between calls goes in ``args``. A
    function ``jit`` cannot stage runs eagerly, and the result says so (``executor``,
    ``executor_reason``). The solution's derivative with respect to ``args``
    comes from the optimality condition ``grad_x fun(x*, *args) = 0`` (:func:`tapegrad.custom_root`):
    ``dx*/dargs = -H^-1 d(grad_x fun)/dargs``, ``H`` the Hessian at ``x*``; both modes, every order.

    Args:
        fun: ``fun(x, *args) -> scalar``, written in tapegrad operations.
        x0: the starting point, an array (any shape; SciPy sees it flattened).
        args: extra arguments of ``fun``: arrays (traced ones are differentiated) or constants.
        method, jac, hess, hessp, bounds, constraints, tol, callback, options: SciPy's.
        implicit_solve: how the adjoint system ``H v = r`` is solved when ``x`` is differentiated:
            ``"dense"`` (forms ``H`` by forward over reverse mode, and solves it), ``"cg"`` or ``"gmres"``
            (SciPy's, matrix-free through Hessian-vector products), ``"auto"``: dense up to 200 unknowns,
            ``cg`` above.
        hess_sparsity: the pattern of the Hessian, for ``method="trust-constr"`` (named after
            ``least_squares``' ``jac_sparsity``: SciPy's ``minimize`` has no such keyword): a SciPy
            sparse array or matrix (its stored entries) or a dense array (its non-zeros), ``(n, n)`` and
            symmetric for the flattened ``x``. ``hess`` is then the Hessian by star colouring
            (:func:`tapegrad.sparse_hessian`: as many Hessian-vector products as colours, staged by
            ``jit`` for the solve), a ``scipy.sparse.csr_array`` that ``trust-constr`` uses as it is,
            in place of the matrix-free ``hessp`` tapegrad gives it otherwise. None (the default): not.

    Returns:
        SciPy's ``OptimizeResult``; its ``x`` has ``x0``'s shape, dtype and backend and is differentiable
        with respect to the traced ``args``; ``executor``: how SciPy's calls ran (``"numba"``,
        ``"python+numba"`` or ``"python"``: ``jit``'s executors, the least compiled of the functions
        handed to SciPy; ``"eager"``: not staged), ``executor_reason``: why eager (else None).

    Under ``jit`` or ``vmap`` (``x0`` or ``args`` a value of either), SciPy cannot run: the solve is
    BFGS or L-BFGS written in tapegrad's own ``while_loop`` (``method`` None, ``"BFGS"`` or
    ``"L-BFGS-B"`` without bounds), as ``jax.scipy.optimize.minimize``, with the same derivative;
    its result is an ``OptimizeResults`` named tuple of arrays (docs/solvers.md,
    "Minimising inside jit and vmap").

    Raises:
        ValueError: under ``jit`` or ``vmap``, a method other than BFGS and L-BFGS-B, or bounds.
        ValueError: when ``x`` is differentiated: the solver did not converge (eagerly without a
            derivative: a ``RuntimeWarning``), the solution lies on a bound (the unconstrained
            optimality condition does not hold there), ``constraints`` given (the condition is not a
            gradient), or the Hessian at the solution is singular; a bad ``implicit_solve``.
        ValueError: ``hess_sparsity`` with a method other than ``trust-constr`` or with ``hess`` or
            ``hessp``; a pattern not square and symmetric, of the wrong shape, or missing a non-zero
            that the colouring exposes.
    """
    from scipy import optimize
    where = "tapegrad.scipy.optimize.minimize"
    _check_implicit_solve(implicit_solve, where)
    if hess_sparsity is not None:
        check_hess_sparsity(method, hess, hessp, where)
    args = tuple(args)
    if _held_by_vmap_or_jit(x0, args):  # SciPy needs host values: BFGS and L-BFGS in tapegrad's own loop
        return minimize_traced(fun, x0, args, method, tol, options, bounds=bounds, constraints=constraints, jac=jac,
                               hess=hess, hessp=hessp, callback=callback, implicit_solve=implicit_solve)
    host_args = _concrete(args, where)
    like = _float_like(x0)
    x0_host = to_host(like)
    shape, n = x0_host.shape, x0_host.size
    name = (method or ("BFGS" if bounds is None and not constraints else "L-BFGS-B" if not constraints
                       else "SLSQP")).lower() if isinstance(method, str) or method is None else ""
    route = Route(fun, host_args)
    jac, hess, hessp = (_with_args(fn, kind, shape, host_args) for fn, kind in ((jac, "grad"), (hess, "hess"),
                                                                                (hessp, "hessp")))
    if hess_sparsity is not None:  # a sparse Hessian by colouring, which trust-constr takes as it is
        hess = sparse_hessian_for_scipy(fun, hess_sparsity, shape, host_args, where)
    if jac is None and name not in _GRADIENT_FREE:
        host_fun, jac = route.host("value_and_grad", _value_and_flat_grad, shape), True
    else:
        host_fun = route.host("value", float, shape)
    if hess is None and hessp is None and name in _HESSP:
        host_hessp = route.host("hessp", _flat_float, shape)

        def hessp(x, p, *_):  # trust-constr's first product is with an int8 zero vector: p in x's dtype
            return host_hessp(x, np.asarray(p, dtype=x.dtype))
    elif hess is None and hessp is None and name in _HESS:
        hess = route.host("hessian", lambda h: np.asarray(h).reshape(n, n), shape)
    res = optimize.minimize(host_fun, x0_host.ravel(), args=(), method=method, jac=jac, hess=hess, hessp=hessp,
                            bounds=bounds, constraints=constraints, tol=tol, callback=callback, options=options)
    _check_success(res.success, res.message, args, where)
    if _traced(args):
        if constraints:
            raise ValueError(f"{where}: the solution of a constrained problem ({method}) is not differentiated: its "
                             "optimality condition is not a gradient equal to zero; drop constraints, or "
                             "differentiate a penalty formulation")
        if bounds is not None:
            lo, hi = (bounds.lb, bounds.ub) if hasattr(bounds, "lb") else (
                [np.nan if b is None else b for b in side] for side in zip(*bounds))
            _check_bounds(res.x, lo, hi, where)
    res.x = _implicit_solution(res.x, like, lambda x, *a: grad(fun)(x, *a), args, implicit_solve, True,
                               where)
    return route.report(res)


def root(fun: Callable[..., Any], x0: Any, args: Sequence[Any] = (), method: str = "hybr", jac: Any = None,
         tol: float | None = None, callback: Callable[..., Any] | None = None, options: dict | None = None,
         *, implicit_solve: ImplicitSolve = "auto") -> Any:
    """SciPy's ``scipy.optimize.root``, with a solution differentiable with respect to ``args``.

    SciPy's solver runs on host values (any ``method``); tapegrad supplies the Jacobian (forward mode)
    to ``hybr`` and ``lm`` unless ``jac`` is given. ``fun`` and its Jacobian are staged by ``jit``, as in
    :func:`minimize`. The derivative comes from ``fun(x*, *args) = 0``
    (:func:`tapegrad.custom_root`): ``dx*/dargs = -J^-1 dfun/dargs``; both modes, every order.

    Args:
        fun: ``fun(x, *args) -> array`` of ``x``'s shape, written in tapegrad operations.
        x0: the starting point, an array.
        args: extra arguments of ``fun``: arrays (traced ones are differentiated) or constants.
        method, jac, tol, callback, options: SciPy's.
        implicit_solve: the adjoint system's solve: ``"dense"``, ``"gmres"`` (matrix-free, through
            Jacobian-vector products), ``"cg"`` (only for a symmetric Jacobian) or ``"auto"`` (dense up to
            200 unknowns, ``gmres`` above).

    Returns:
        SciPy's ``OptimizeResult``; its ``x`` has ``x0``'s shape, dtype and backend and is differentiable
        with respect to the traced ``args``; ``executor`` and ``executor_reason`` as :func:`minimize`'s.

    Raises:
        TypeError: ``args`` under ``vmap`` or ``jit``.
        ValueError: when ``x`` is differentiated, the solver did not converge (otherwise a
            ``RuntimeWarning``) or the Jacobian at the root is singular; a bad ``implicit_solve``.
    """
    from scipy import optimize
    where = "tapegrad.scipy.optimize.root"
    _check_implicit_solve(implicit_solve, where)
    args = tuple(args)
    host_args = _concrete(args, where)
    like = _float_like(x0)
    x0_host = to_host(like).astype(float)
    shape = x0_host.shape

    route = Route(fun, host_args)
    host_fun = route.host("value", _flat_float, shape)
    if jac is None and method.lower() in _ROOT_JAC:
        jac = route.host("jacobian", lambda j: np.asarray(j).reshape(-1, x0_host.size), shape)
    else:
        jac = _with_args(jac, "jacobian", shape, host_args)
    res = optimize.root(host_fun, x0_host.ravel(), args=(), method=method, jac=jac, tol=tol, callback=callback,
                        options=options)
    _check_success(res.success, res.message, args, where)
    res.x = _implicit_solution(res.x, like, fun, args, implicit_solve, implicit_solve == "cg", where)
    return route.report(res)


_BRACKETED = {"bisect", "ridder", "brentq", "brenth", "toms748"}


def root_scalar(f: Callable[..., Any], args: Sequence[Any] = (), method: str | None = None, bracket: Any = None,
                fprime: Any = None, fprime2: Any = None, x0: Any = None, x1: Any = None, xtol: float | None = None,
                rtol: float | None = None, maxiter: int | None = None, options: dict | None = None) -> Any:
    """SciPy's ``scipy.optimize.root_scalar``, with a root differentiable with respect to ``args``.

    SciPy's solver runs on host floats (any ``method``, chosen as SciPy chooses it when ``None``);
    tapegrad supplies ``fprime`` (by reverse mode) to ``newton`` and ``halley``, and ``fprime2`` to
    ``halley``, unless they are given; ``f`` and these derivatives are staged by ``jit``, as in
    :func:`minimize`. The derivative comes from ``f(x*, *args) = 0``
    (:func:`tapegrad.custom_root`): ``dx*/dargs = -(df/dargs) / f'(x*)``; both modes, every order.

    Args:
        f: ``f(x, *args) -> scalar``, written in tapegrad operations (with ``fprime=True``: returning
            ``(f, f')``, with ``fprime2=True``: ``(f, f', f'')``, as in SciPy).
        args: extra arguments of ``f``: arrays (traced ones are differentiated) or constants.
        method, bracket, fprime, fprime2, x0, x1, xtol, rtol, maxiter, options: SciPy's.

    Returns:
        SciPy's ``RootResults``; its ``root`` is a 0-d array (``x0``'s dtype and backend, float64
        without ``x0``) differentiable with respect to the traced ``args``; ``executor`` and
        ``executor_reason`` as :func:`minimize`'s.

    Raises:
        TypeError: ``args`` under ``vmap`` or ``jit`` (SciPy needs concrete values).
        ValueError: when ``root`` is differentiated: the solver did not converge (``converged=False``;
            eagerly without a derivative, a ``RuntimeWarning``) or ``f'(x*) = 0`` (a multiple root:
            ``x*`` does not depend smoothly on ``args``).
    """
    from scipy import optimize
    where = "tapegrad.scipy.optimize.root_scalar"
    args = tuple(args)
    host_args = _concrete(args, where)
    value = (lambda x, *a: f(x, *a)[0]) if fprime is True or fprime2 is True else f
    if not method:  # SciPy's choice, on the derivatives the caller gave: supplying ours must not change it
        method = ("brentq" if bracket is not None else None if x0 is None else
                  ("halley" if fprime2 else "newton") if fprime else "secant" if x1 is not None else "newton")
    name = method.lower() if method else ""
    like = _float_like(np.float64(0.0) if x0 is None else x0)

    route = Route(f, host_args)
    first = "[0]" if value is not f else ""  # f returns (f, f'[, f'']): derivatives of its first value
    host_f = route.host("value", _floats, (), like.dtype)
    if name in ("newton", "halley") and not fprime:
        fprime = route.host("grad" + first, float, (), like.dtype)
    if name == "halley" and not fprime2:
        fprime2 = route.host("grad2" + first, float, (), like.dtype)
    x0_host = None if x0 is None else float(to_host(stop_gradient(asarray(x0))))
    x1_host = None if x1 is None else float(to_host(stop_gradient(asarray(x1))))
    bracket_host = None if bracket is None else [float(to_host(stop_gradient(asarray(b)))) for b in bracket]
    sol = optimize.root_scalar(host_f, args=(), method=method, bracket=bracket_host,
                               fprime=fprime if fprime is not True else True,
                               fprime2=fprime2 if fprime2 is not True else True, x0=x0_host, x1=x1_host,
                               xtol=xtol, rtol=rtol, maxiter=maxiter, options=options)
    _check_success(sol.converged, sol.flag, args, where,
                   "raise maxiter, give a bracket with a sign change, or start nearer (x0)")
    sol.root = _implicit_solution(np.asarray(sol.root), like, value, args, "dense", False, where)
    return route.report(sol)


def fixed_point(func: Callable[..., Any], x0: Any, args: Sequence[Any] = (), xtol: float = 1e-08,
                maxiter: int = 500, method: str = "del2", *, implicit_solve: ImplicitSolve = "auto") -> Any:
    """SciPy's ``scipy.optimize.fixed_point``, with a fixed point differentiable with respect to ``args``.

    SciPy iterates on host values (``method`` ``"del2"`` or ``"iteration"``), calling ``func`` staged by
    ``jit``, as in :func:`minimize`. The derivative comes from
    ``func(x*, *args) - x* = 0`` (:func:`tapegrad.custom_root`): ``dx*/dargs = (I - G)^-1 dfunc/dargs``,
    ``G`` the Jacobian of ``func`` in ``x`` at ``x*``; both modes, every order.

    Args:
        func: ``func(x, *args) -> array`` of ``x``'s shape, written in tapegrad operations.
        x0: the starting point, an array (or a scalar).
        args: extra arguments of ``func``: arrays (traced ones are differentiated) or constants.
        xtol, maxiter, method: SciPy's.
        implicit_solve: the adjoint system's solve: ``"dense"``, ``"gmres"`` (matrix-free) or ``"auto"``
            (dense up to 200 unknowns, ``gmres`` above); ``"cg"`` only where ``I - G`` is symmetric.

    Returns:
        The fixed point, an array of ``x0``'s shape, dtype and backend (SciPy returns an ndarray),
        differentiable with respect to the traced ``args``. An array has no room to say how ``func`` ran:
        ``tg.jit(func).executor(x0, *args)`` says which executor a staged ``func`` gets, and calling
        ``tg.jit(func)(x0, *args)`` raises the error that keeps it eager, if one does.

    Raises:
        TypeError: ``args`` under ``vmap`` or ``jit``.
        RuntimeError: the iteration did not converge within ``maxiter`` (SciPy's error, with its cause).
        ValueError: when differentiated, ``I - G`` is singular at ``x*`` (``func``'s Jacobian has the
            eigenvalue 1); a bad ``implicit_solve``.
    """
    from scipy import optimize
    where = "tapegrad.scipy.optimize.fixed_point"
    _check_implicit_solve(implicit_solve, where)
    args = tuple(args)
    host_args = _concrete(args, where)
    like = _float_like(x0)
    shape = like.shape

    host_func = Route(func, host_args).host("value", lambda out: np.asarray(out, dtype=float), shape, like.dtype)
    try:
        x_host = optimize.fixed_point(host_func, to_host(like).astype(float), args=(), xtol=xtol, maxiter=maxiter,
                                      method=method)
    except RuntimeError as error:
        raise RuntimeError(f"{where}: SciPy's iteration did not converge ({error}); raise maxiter, loosen xtol, "
                           "start nearer (x0), or try method='iteration' (del2's acceleration can stall)") from error
    return _implicit_solution(x_host, like, lambda x, *a: func(x, *a) - x, args, implicit_solve,
                              implicit_solve == "cg", where)


# SciPy's named losses rho(z) of z = (r / f_scale)^2 (scipy.optimize.least_squares's documentation),
# in tapegrad operations so that the optimality condition, the gradient of the cost, is differentiable
_ROBUST_LOSSES: dict[str, Callable[[Any], Any]] = {
    "linear": lambda z: z,
    "soft_l1": lambda z: 2.0 * (tnp.sqrt(1.0 + z) - 1.0),
    "huber": lambda z: tnp.where(z <= 1.0, z, 2.0 * tnp.sqrt(z) - 1.0),
    "cauchy": tnp.log1p,
    "arctan": tnp.arctan,
}


def least_squares(fun: Callable[..., Any], x0: Any, jac: Any = None, bounds: Any = (-np.inf, np.inf),
                  method: str = "trf", ftol: float | None = 1e-08, xtol: float | None = 1e-08,
                  gtol: float | None = 1e-08, x_scale: Any = None, loss: Any = "linear", f_scale: float = 1.0,
                  diff_step: Any = None, tr_solver: str | None = None, tr_options: dict | None = None,
                  jac_sparsity: Any = None, max_nfev: int | None = None, verbose: int = 0,
                  args: Sequence[Any] = (), kwargs: dict | None = None, callback: Callable[..., Any] | None = None,
                  workers: Any = None, *, implicit_solve: ImplicitSolve = "auto") -> Any:
    """SciPy's ``scipy.optimize.least_squares``, with a solution differentiable with respect to ``args``.

    SciPy's solver runs on host values (any ``method``); tapegrad supplies the Jacobian of the
    residuals (forward mode) unless ``jac`` is given (``jac=None``, the default here, where SciPy's
    default is ``"2-point"``: pass a string for SciPy's finite differences); ``fun`` and the Jacobian
    are staged by ``jit``, as in :func:`minimize` (``kwargs`` too are inputs of the program). The derivative comes from
    the normal equations ``J^T r = 0``, the gradient of the cost ``C = 0.5 sum fun^2`` (of SciPy's robust
    cost with another ``loss``):
    ``dx*/dargs = -H^-1 d(J^T r)/dargs``, ``H`` the full Hessian of ``C`` (not its Gauss-Newton part
    ``J^T J``); both modes, every order.

    Args:
        fun: ``fun(x, *args, **kwargs) -> 1-d array`` of residuals, written in tapegrad operations.
        x0: the starting point, an array (SciPy sees it flattened).
        loss: SciPy's; any runs, and the named ones (``"linear"``, ``"soft_l1"``, ``"huber"``,
            ``"cauchy"``, ``"arctan"``) are differentiated through the gradient of SciPy's cost
            ``0.5 f_scale^2 sum rho((r / f_scale)^2)``; a callable loss is not.
        args, kwargs: extra arguments of ``fun``: arrays (traced ones are differentiated) or constants.
        jac, bounds, method, ftol, xtol, gtol, x_scale, f_scale: SciPy's.
        diff_step, tr_solver, tr_options, max_nfev, verbose, callback, workers: SciPy's.
        jac_sparsity: SciPy's keyword, with tapegrad's derivative: with ``jac=None``, the Jacobian of
            ``fun`` (flattened, in the flattened ``x``) is computed by column colouring of this pattern
            (:func:`tapegrad.sparse_jacfwd`: as many jvp passes as colours, staged by ``jit`` for the
            solve) and handed to SciPy as a ``scipy.sparse.csr_array``, so SciPy uses
            ``tr_solver="lsmr"``, as with its own sparse finite differences. A SciPy sparse array or
            matrix (its stored entries) or a dense array (its non-zeros), shape ``(m, n)``; not for
            ``method="lm"``. With a ``jac`` given, it goes to SciPy unchanged.
        implicit_solve: the adjoint system's solve, as in :func:`minimize`: ``"dense"``, ``"cg"``,
            ``"gmres"`` or ``"auto"`` (dense up to 200 unknowns, ``cg`` above).

    Returns:
        SciPy's ``OptimizeResult``; its ``x`` has ``x0``'s shape, dtype and backend and is differentiable
        with respect to the traced ``args`` and ``kwargs``; ``executor`` and ``executor_reason`` as
        :func:`minimize`'s.

    Raises:
        TypeError: ``args`` or ``kwargs`` under ``vmap`` or ``jit``.
        ValueError: when ``x`` is differentiated: the solver did not converge (``status <= 0``;
            otherwise a ``RuntimeWarning``), the solution lies on a bound, ``loss`` is a callable,
            or the Hessian of the cost at ``x*`` is singular (the
            parameters are not identifiable); a bad ``implicit_solve``; ``jac_sparsity`` with
            ``method="lm"``, of the wrong shape, or missing a non-zero that the colouring exposes.
    """
    from scipy import optimize
    where = "tapegrad.scipy.optimize.least_squares"
    _check_implicit_solve(implicit_solve, where)
    args, kwargs = tuple(args), dict(kwargs or {})
    keys = list(kwargs)
    traced = args + tuple(kwargs.values())
    host = _concrete(traced, where)
    host_args, host_kwargs = host[:len(args)], dict(zip(keys, host[len(args):]))
    like = _float_like(x0)
    shape = like.shape

    def residuals(x, *values):
        return reshape(fun(reshape(x, shape), *values[:len(args)], **dict(zip(keys, values[len(args):]))), (-1,))

    route = Route(fun, host_args, host_kwargs)
    host_fun = route.host("value", _flat_float, shape)
    if jac is None and jac_sparsity is not None:  # a sparse Jacobian by colouring; SciPy then picks lsmr
        jac = sparse_jacobian_for_scipy(fun, jac_sparsity, shape, host_args, host_kwargs, method, where)
        jac_sparsity = None  # it is for SciPy's finite differences, which no longer run
    elif jac is None:
        n = int(np.prod(shape))
        jac = route.host("jacobian", lambda j: np.asarray(j, dtype=float).reshape(-1, n), shape)
    else:
        jac = _with_args(jac, "jacobian", shape, host_args, host_kwargs)
    res = optimize.least_squares(host_fun, to_host(like).astype(float).ravel(), jac=jac, bounds=bounds,
                                 method=method, ftol=ftol, xtol=xtol, gtol=gtol, loss=loss,
                                 f_scale=f_scale, diff_step=diff_step, tr_solver=tr_solver, tr_options=tr_options,
                                 jac_sparsity=jac_sparsity, max_nfev=max_nfev, verbose=verbose,
                                 **_given(x_scale=x_scale, callback=callback, workers=workers))
    _check_success(res.status > 0, res.message, traced, where, "raise max_nfev, loosen ftol/xtol/gtol, or start "
                   "nearer (x0)")
    if _traced(traced):
        if loss not in _ROBUST_LOSSES:
            raise ValueError(f"{where}: the solution of a fit with loss={loss!r} is not differentiated: only SciPy's "
                             f"named losses {sorted(_ROBUST_LOSSES)} are (a callable loss is NumPy code tapegrad "
                             "cannot differentiate); use one of them, or minimize with the cost written in "
                             "tapegrad operations")
        lb, ub = (bounds.lb, bounds.ub) if hasattr(bounds, "lb") else bounds
        _check_bounds(res.x, lb, ub, where)

    rho = _ROBUST_LOSSES.get(loss) if isinstance(loss, str) else None

    def cost(x, *values):  # SciPy's cost: 0.5 f_scale^2 sum rho((r / f_scale)^2)
        z = (residuals(x, *values) / f_scale) ** 2
        return 0.5 * f_scale ** 2 * tnp.sum(rho(z) if rho is not None else z)
    res.x = _implicit_solution(res.x, like, lambda x, *a: grad(cost)(x, *a), traced, implicit_solve, True, where)
    return route.report(res)


__all__ = ["fixed_point", "least_squares", "minimize", "root", "root_scalar"]
