"""``tapegrad.scipy.optimize``: SciPy's ``minimize`` and ``root``, run by SciPy on host values, whose
solution is differentiable with respect to traced ``args`` by the implicit function theorem
(:func:`tapegrad.custom_root`): the optimality condition ``grad f(x*, args) = 0`` for ``minimize``,
``F(x*, args) = 0`` for ``root``.

SciPy runs on NumPy arrays on the host: CuPy inputs are copied to the host once per solver call
(``.get()``, a synchronisation) and the solution is copied back. Gradients, Hessians and Jacobians that
the method uses are supplied by tapegrad (``jac``, ``hess``, ``hessp``) unless given.
"""
from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from typing import Any, Literal

import numpy as np

from tapegrad._api import grad, stop_gradient, value_and_grad
from tapegrad._backend import namespace_of, to_host
from tapegrad._control_flow import custom_linear_solve, custom_root
from tapegrad._core import Tracer
from tapegrad._jacobians import hessian, jacfwd
from tapegrad.numpy import asarray, linalg, reshape

ImplicitSolve = Literal["auto", "dense", "cg", "gmres"]
_GRADIENT_FREE = {"nelder-mead", "powell", "cobyla", "cobyqa"}
_HESS = {"newton-cg", "dogleg", "trust-ncg", "trust-krylov", "trust-exact", "trust-constr"}
_BOUNDED = {"l-bfgs-b", "tnc", "slsqp", "powell", "trust-constr", "nelder-mead", "cobyla", "cobyqa"}
_ROOT_JAC = {"hybr", "lm"}
_DENSE_MAX = 200  # "auto": a dense adjoint solve up to this many unknowns, iterative (cg, gmres) above


def _concrete(args, where: str) -> list:
    """``args`` as host NumPy arrays; a value under ``vmap`` or ``jit`` has none (a TypeError)."""
    values = [stop_gradient(a) for a in args]
    for k, v in enumerate(values):
        if isinstance(v, Tracer):
            raise TypeError(f"{where}: args[{k}] is a value of vmap or jit, but SciPy's solver needs concrete host "
                            "values: call it eagerly (grad, vjp, jvp and their nestings work), or use "
                            "tg.custom_root with a solver written in tapegrad operations under vmap or jit")
    return [to_host(v) if hasattr(v, "shape") else v for v in values]


def _traced(args) -> bool:
    return any(isinstance(a, Tracer) for a in args)


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


def _tangent_solve(implicit_solve: str, n: int, symmetric: bool, where: str) -> Callable:
    kind = implicit_solve if implicit_solve != "auto" else ("dense" if n <= _DENSE_MAX else
                                                            ("cg" if symmetric else "gmres"))
    if kind == "dense":
        def dense(g, y):
            matrix = jacfwd(g)(y)
            if not isinstance(stop_gradient(matrix), Tracer):
                host = to_host(stop_gradient(matrix))
                if not np.all(np.isfinite(host)) or np.linalg.cond(host) > 1 / np.finfo(host.dtype).eps:
                    raise ValueError(f"{where}: the adjoint system of the implicit derivative is singular at the "
                                     "solution (the Hessian or Jacobian there is not invertible), so x* does not "
                                     "depend smoothly on args: the derivative is undefined")
            return linalg.solve(matrix, y)
        return dense
    solver = _host_solver(kind, where)
    if symmetric:
        return lambda g, y: custom_linear_solve(g, y, solver, symmetric=True)
    return lambda g, y: custom_linear_solve(g, y, solver, transpose_solve=solver)


def _result_x(res, x0, optimality, args, implicit_solve, symmetric, where: str):
    """``res.x`` on ``x0``'s backend and shape, through ``custom_root`` on ``optimality``."""
    xp = namespace_of(stop_gradient(x0))
    x_star = xp.asarray(np.asarray(res.x).reshape(np.shape(x0)), dtype=x0.dtype)
    if not _traced(args):
        return x_star
    guess = stop_gradient(x0)
    return custom_root(lambda x: optimality(x, *args), guess, lambda f, g: x_star,
                          _tangent_solve(implicit_solve, int(np.size(x_star)), symmetric, where), residual_tol=None)


def _check_success(res, args, where: str) -> None:
    if res.success:
        return
    message = f"{where}: SciPy's solver did not converge ({res.message!r})"
    if _traced(args):
        raise ValueError(message + "; its x is no solution, so the implicit derivative would be wrong. Raise "
                         "options['maxiter'], loosen tol, or start nearer (x0)")
    warnings.warn(message + "; res.x is not a solution", RuntimeWarning, stacklevel=3)


def minimize(fun: Callable[..., Any], x0: Any, args: Sequence[Any] = (), method: str | None = None,
             jac: Any = None, hess: Any = None, hessp: Any = None, bounds: Any = None, constraints: Any = (),
             tol: float | None = None, callback: Callable[..., Any] | None = None, options: dict | None = None,
             *, implicit_solve: ImplicitSolve = "auto") -> Any:
    """SciPy's ``scipy.optimize.minimize``, with a solution differentiable with respect to ``args``.

    SciPy's solver runs on host values (any ``method``); tapegrad supplies ``jac`` (the gradient, by
    reverse mode) to every method that uses one, and ``hess`` (the Hessian) to the methods that take
    it, unless they are given. The solution's derivative with respect to ``args`` comes from the
    optimality condition ``grad_x fun(x*, *args) = 0`` (:func:`tapegrad.custom_root`): ``dx*/dargs =
    -H^-1 d(grad_x fun)/dargs``, ``H`` the Hessian at ``x*``; both modes, every order.

    Args:
        fun: ``fun(x, *args) -> scalar``, written in tapegrad operations.
        x0: the starting point, an array (any shape; SciPy sees it flattened).
        args: extra arguments of ``fun``: arrays (traced ones are differentiated) or constants.
        method, jac, hess, hessp, bounds, constraints, tol, callback, options: SciPy's.
        implicit_solve: how the adjoint system ``H v = r`` is solved when ``x`` is differentiated:
            ``"dense"`` (forms ``H`` by forward over reverse mode, and solves it), ``"cg"`` or ``"gmres"``
            (SciPy's, matrix-free through Hessian-vector products), ``"auto"``: dense up to 200 unknowns,
            ``cg`` above.

    Returns:
        SciPy's ``OptimizeResult``; its ``x`` has ``x0``'s shape, dtype and backend and is differentiable
        with respect to the traced ``args``.

    Raises:
        TypeError: ``args`` under ``vmap`` or ``jit`` (SciPy needs concrete values).
        ValueError: when ``x`` is differentiated: the solver did not converge (eagerly without a
            derivative: a ``RuntimeWarning``), the solution lies on a bound (the unconstrained
            optimality condition does not hold there), ``constraints`` given (the condition is not a
            gradient), or the Hessian at the solution is singular; a bad ``implicit_solve``.
    """
    from scipy import optimize
    where = "tapegrad.scipy.optimize.minimize"
    _check_implicit_solve(implicit_solve, where)
    args = tuple(args)
    host_args = _concrete(args, where)
    x0_host = to_host(stop_gradient(x0)).astype(np.result_type(np.asarray(x0).dtype if not hasattr(x0, "dtype")
                                                                   else x0.dtype, np.float32))
    shape = x0_host.shape
    name = (method or ("BFGS" if bounds is None and not constraints else "L-BFGS-B" if not constraints
                       else "SLSQP")).lower() if isinstance(method, str) or method is None else ""

    def host_fun(x):
        return float(fun(x.reshape(shape), *host_args))
    objective_and_grad = value_and_grad(lambda x: fun(x, *host_args))
    if jac is None and name not in _GRADIENT_FREE:
        def host_value_and_grad(x):
            value, gradient = objective_and_grad(x.reshape(shape))
            return float(value), np.asarray(gradient, dtype=np.float64).ravel()
        host_fun, jac = host_value_and_grad, True
    if hess is None and hessp is None and name in _HESS:
        hessian_fn = hessian(lambda x: fun(reshape(x, shape), *host_args))

        def hess(x, *_):
            return np.asarray(hessian_fn(x))
    res = optimize.minimize(host_fun, x0_host.ravel(), args=(), method=method, jac=jac, hess=hess, hessp=hessp,
                            bounds=bounds, constraints=constraints, tol=tol, callback=callback, options=options)
    _check_success(res, args, where)
    if _traced(args):
        if constraints:
            raise ValueError(f"{where}: the solution of a constrained problem ({method}) is not differentiated: its "
                             "optimality condition is not a gradient equal to zero; drop constraints, or "
                             "differentiate a penalty formulation")
        if bounds is not None:
            lo, hi = (np.array([np.nan if b is None else b for b in side], dtype=float) for side in zip(
                *bounds)) if not hasattr(bounds, "lb") else (np.asarray(bounds.lb, float) * np.ones(res.x.size),
                                                              np.asarray(bounds.ub, float) * np.ones(res.x.size))
            near = np.sqrt(np.finfo(float).eps) * (1 + np.abs(res.x))
            active = np.flatnonzero((np.abs(res.x - lo) <= near) | (np.abs(res.x - hi) <= near))
            if active.size:
                raise ValueError(f"{where}: the solution lies on a bound (entries {active.tolist()}): the "
                                 "unconstrained optimality condition grad f = 0 does not hold there, so the "
                                 "implicit derivative would be wrong; loosen the bound or drop it")
    res.x = _result_x(res, asarray(x0), lambda x, *a: grad(fun)(x, *a), args, implicit_solve, True, where)
    return res


def root(fun: Callable[..., Any], x0: Any, args: Sequence[Any] = (), method: str = "hybr", jac: Any = None,
         tol: float | None = None, callback: Callable[..., Any] | None = None, options: dict | None = None,
         *, implicit_solve: ImplicitSolve = "auto") -> Any:
    """SciPy's ``scipy.optimize.root``, with a solution differentiable with respect to ``args``.

    SciPy's solver runs on host values (any ``method``); tapegrad supplies the Jacobian (forward mode)
    to ``hybr`` and ``lm`` unless ``jac`` is given. The derivative comes from ``fun(x*, *args) = 0``
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
        with respect to the traced ``args``.

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
    x0_host = to_host(stop_gradient(asarray(x0))).astype(float)
    shape = x0_host.shape

    def host_fun(x):
        return np.asarray(fun(x.reshape(shape), *host_args), dtype=float).ravel()
    if jac is None and method.lower() in _ROOT_JAC:
        jacobian_fn = jacfwd(lambda x: reshape(fun(reshape(x, shape), *host_args), (-1,)))

        def jac(x, *_):
            return np.asarray(jacobian_fn(x))
    res = optimize.root(host_fun, x0_host.ravel(), args=(), method=method, jac=jac, tol=tol, callback=callback,
                        options=options)
    _check_success(res, args, where)
    res.x = _result_x(res, asarray(x0), fun, args, implicit_solve, implicit_solve == "cg", where)
    return res


__all__ = ["minimize", "root"]
