"""``minimize`` inside ``jit`` and ``vmap``: BFGS and L-BFGS written with tapegrad's own ``while_loop``,
the solution differentiated by the implicit function theorem (:func:`tapegrad.custom_root` on
``grad f(x*, args) = 0``), never through the iterations.

SciPy's solvers need concrete host values, so :func:`tapegrad.scipy.optimize.minimize` runs this one
when ``x0`` or ``args`` is a value of ``jit`` or ``vmap``. It follows JAX's
``jax.scipy.optimize.minimize`` (``jax/_src/scipy/optimize/bfgs.py``, ``_lbfgs.py``: Nocedal & Wright's
Algorithms 6.1 and 7.5) with the strong-Wolfe line search of :mod:`._line_search`, and SciPy's options,
stopping tests and status codes. The whole solver is one ``while_loop`` whose every trip evaluates the
objective and its gradient once (a line-search trial; a trial that is accepted also takes the
quasi-Newton step), so the staged program holds ``value_and_grad(fun)`` once and ``vmap`` keeps every
example busy until the last one has converged.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

import tapegrad.numpy as tnp
from tapegrad import _tree
from tapegrad._api import grad, stop_gradient, value_and_grad
from tapegrad._control_flow import custom_root, scan, while_loop
from tapegrad._control_flow import map as loop_map
from tapegrad._core import Tracer
from tapegrad.scipy import _line_search

WHERE = "tapegrad.scipy.optimize.minimize"

# SciPy's messages for the status codes (scipy.optimize._optimize._status_message)
MESSAGES = {0: "Optimization terminated successfully.",
            1: "Maximum number of iterations has been exceeded.",
            2: "Desired error not necessarily achieved due to precision loss.",
            3: "NaN result encountered."}


class OptimizeResults(NamedTuple):
    """The result of :func:`minimize_traced`: SciPy's ``OptimizeResult`` fields, as arrays (JAX's
    ``OptimizeResults``), so that ``jit`` and ``vmap`` return it (under ``vmap`` each field gains the
    batch axis).

    Attributes:
        x: the solution, ``x0``'s shape and dtype; differentiable with respect to ``args``.
        success: bool, ``status == 0``.
        status: int: 0 converged, 1 ``maxiter`` (or L-BFGS-B's ``maxfun``) reached, 2 the line search
            failed (SciPy's "precision loss"), 3 a NaN or infinity in ``x`` or ``fun``. SciPy's message
            for each is in :data:`MESSAGES` and, for concrete values, :attr:`message`.
        fun: ``fun(x)``, a 0-d array (no derivative).
        jac: the gradient at ``x``, ``x0``'s shape (no derivative).
        hess_inv: BFGS's estimate of the inverse Hessian, ``(n, n)`` for ``n = x0.size``; None for
            L-BFGS-B (SciPy's is an operator over its history; JAX's is None too).
        nfev, njev: the evaluations of ``fun`` and of its gradient (one ``value_and_grad`` serves both).
        nit: the quasi-Newton iterations.
    """
    x: Any
    success: Any
    status: Any
    fun: Any
    jac: Any
    hess_inv: Any
    nfev: Any
    njev: Any
    nit: Any

    @property
    def message(self) -> str | list:
        """SciPy's message for ``status`` (a list of them for a batch); needs concrete values."""
        if isinstance(self.status, Tracer):
            raise TypeError(f"{WHERE}: message needs a concrete status, not a value of jit or vmap; return status "
                            "from the transformed function and look it up in MESSAGES")
        status = np.asarray(self.status)
        return MESSAGES[int(status)] if status.ndim == 0 else [MESSAGES[int(s)] for s in status.ravel()]


# ---- options -------------------------------------------------------------------------------------
# options SciPy takes that change nothing here: printing, and the finite differences of a gradient that
# tapegrad computes exactly
_IGNORED = {"disp", "iprint", "eps", "finite_diff_rel_step", "workers"}
_KNOWN = {"bfgs": {"gtol", "norm", "maxiter", "c1", "c2", "xrtol", "hess_inv0", "return_all"},
          "l-bfgs-b": {"maxcor", "ftol", "gtol", "maxiter", "maxfun", "maxls"}}


@dataclass(frozen=True)
class _Config:
    """The solver's settings, SciPy's defaults where the caller gave none."""
    method: str  # "bfgs" or "l-bfgs-b"
    gtol: float
    norm: float
    maxiter: int
    maxfun: float
    c1: float
    c2: float
    xrtol: float
    ftol: float  # L-BFGS-B: the relative reduction of f that stops it; BFGS: none
    maxcor: int
    maxls: int  # bracketing trials per line search (SciPy's BFGS: 10, L-BFGS-B: maxls)
    hess_inv0: Any


def _config(method: str | None, tol: float | None, options: dict | None, n: int) -> _Config:
    name = "bfgs" if method is None else str(method).lower()
    if name not in _KNOWN:
        raise ValueError(f"{WHERE}: method={method!r} does not run under jit or vmap (x0 or args is traced): only "
                         "'BFGS' and 'L-BFGS-B' do; call minimize outside jit and vmap for SciPy's other methods "
                         "(grad and its nestings still differentiate the solution)")
    options = dict(options or {})
    unknown = sorted(set(options) - _KNOWN[name] - _IGNORED)
    if unknown:
        raise ValueError(f"{WHERE}: unknown options {unknown} for method={method!r} under jit or vmap; its options "
                         f"are {sorted(_KNOWN[name])}")
    if options.get("return_all"):
        raise ValueError(f"{WHERE}: options['return_all'] collects a list of iterates, which jit and vmap cannot "
                         "return; drop it, or call minimize outside jit and vmap")
    if tol is not None:  # SciPy's minimize: tol sets gtol (BFGS), ftol and gtol (L-BFGS-B)
        options.setdefault("gtol", tol)
        if name == "l-bfgs-b":
            options.setdefault("ftol", tol)
    bfgs = name == "bfgs"
    config = _Config(method=name, gtol=float(options.get("gtol", 1e-5)), norm=float(options.get("norm", np.inf)),
                     maxiter=int(options.get("maxiter", 200 * n if bfgs else 15000)),
                     maxfun=float("inf") if bfgs else float(options.get("maxfun", 15000)),
                     c1=float(options.get("c1", 1e-4)), c2=float(options.get("c2", 0.9)),
                     xrtol=float(options.get("xrtol", 0.0)),
                     ftol=-1.0 if bfgs else float(options.get("ftol", 2.220446049250313e-09)),
                     maxcor=int(options.get("maxcor", 10)), maxls=int(options.get("maxls", 10 if bfgs else 20)),
                     hess_inv0=options.get("hess_inv0"))
    if not 0 < config.c1 < config.c2 < 1:
        raise ValueError(f"{WHERE}: options c1={config.c1} and c2={config.c2} must satisfy 0 < c1 < c2 < 1 "
                         "(the strong Wolfe conditions); SciPy's defaults are 1e-4 and 0.9")
    return config


def _check_unsupported(bounds, constraints, jac, hess, hessp, callback) -> None:
    """Arguments of SciPy's ``minimize`` the traced path cannot honour: a ValueError naming each."""
    given = {"bounds": bounds is not None, "constraints": bool(constraints), "jac": jac is not None,
             "hess": hess is not None, "hessp": hessp is not None, "callback": callback is not None}
    names = [name for name, is_given in given.items() if is_given]
    if names:
        raise ValueError(f"{WHERE}: {', '.join(names)} cannot be used when x0 or args is a value of jit or vmap: "
                         "the solver that runs there is unconstrained BFGS/L-BFGS with tapegrad's exact gradient "
                         "(bounds would need a projected L-BFGS-B); drop them, or call minimize outside jit and "
                         "vmap, where SciPy solves it (its solution is still differentiable by grad)")


# ---- quasi-Newton memories -----------------------------------------------------------------------
class _BFGS:
    """The dense inverse-Hessian estimate ``H`` (Nocedal & Wright, (6.17))."""

    @staticmethod
    def init(x, config: _Config):
        n = x.shape[0]
        if config.hess_inv0 is None:
            return tnp.eye(n, dtype=x.dtype)
        h0 = tnp.astype(tnp.asarray(config.hess_inv0), x.dtype)
        if tuple(h0.shape) != (n, n):
            raise ValueError(f"{WHERE}: options['hess_inv0'] has shape {tuple(h0.shape)}, but x0 has {n} entries: "
                             f"give an ({n}, {n}) positive-definite matrix")
        return h0

    @staticmethod
    def direction(h, g):
        return -(h @ g)

    @staticmethod
    def update(h, s, y):
        """``(I - rho s y^T) H (I - rho y s^T) + rho s s^T`` with ``rho = 1 / y.s``, in O(n^2); ``H`` is kept
        where ``y.s`` is not positive (JAX keeps it where ``rho`` is not finite)."""
        ys = tnp.dot(y, s)
        rho = 1.0 / tnp.where(ys > 0, ys, 1.0)
        hy = h @ y
        # = H + s u^T - rho (H y) s^T with u = (rho + rho^2 y.Hy) s - rho H y: two outer products
        u = (rho + rho ** 2 * tnp.dot(y, hy)) * s - rho * hy
        new = h + tnp.outer(s, u) - tnp.outer(rho * hy, s)
        return tnp.where((ys > 0) & tnp.isfinite(rho), new, h)


class _LBFGS:
    """The last ``maxcor`` steps ``s`` and gradient changes ``y`` (oldest first, zeros until filled), their
    ``rho = 1 / y.s``, and the initial scaling ``gamma = s.y / y.y`` (Nocedal & Wright, Algorithm 7.4)."""

    @staticmethod
    def init(x, config: _Config):
        m, n = config.maxcor, x.shape[0]
        return (tnp.zeros((m, n), dtype=x.dtype), tnp.zeros((m, n), dtype=x.dtype), tnp.zeros((m,), dtype=x.dtype),
                tnp.ones((), dtype=x.dtype))

    @staticmethod
    def direction(memory, g):
        """The two-loop recursion, as two scans over the history; an entry not yet filled has ``rho = 0``
        and contributes nothing."""
        s_hist, y_hist, rho, gamma = memory

        def newest_first(q, pair):
            s, y, r = pair
            alpha = r * tnp.dot(s, q)
            return q - alpha * y, alpha
        q, alphas = scan(newest_first, g, (s_hist, y_hist, rho), reverse=True)

        def oldest_first(r, pair):
            s, y, rho_i, alpha = pair
            return r + s * (alpha - rho_i * tnp.dot(y, r)), None
        return -scan(oldest_first, gamma * q, (s_hist, y_hist, rho, alphas))[0]

    @staticmethod
    def update(memory, s, y):
        """The pair appended (the oldest dropped) unless ``y.s <= eps y.y``, which would lose positive
        definiteness (SciPy's L-BFGS-B skips such a pair too)."""
        s_hist, y_hist, rho, gamma = memory
        ys, yy = tnp.dot(y, s), tnp.dot(y, y)
        keep = ys > np.finfo(np.dtype(s.dtype)).eps * yy

        def append(history, new):
            return tnp.concatenate([history[1:], new[None]])
        new = (append(s_hist, s), append(y_hist, y), append(rho, 1.0 / tnp.where(keep, ys, 1.0)),
               ys / tnp.where(keep, yy, 1.0))
        return tuple(tnp.where(keep, a, b) for a, b in zip(new, memory))


# ---- the solver ----------------------------------------------------------------------------------
class _State(NamedTuple):
    x: Any
    f: Any
    g: Any
    p: Any  # the search direction from x
    memory: Any
    ls: _line_search.LineSearch  # its ``failed``: the line search failed, or p does not descend
    k: Any  # iterations done
    nfev: Any
    converged: Any


def _norm(v, order: float):
    return tnp.max(tnp.abs(v)) if order == np.inf else tnp.linalg.norm(v, ord=order)


def _first_step(config: _Config, f, old_f, dphi0, p, k):
    """BFGS: SciPy's and JAX's guess ``min(1, 1.01 * 2 (f - f_old) / phi'(0))`` (1 where it is not
    positive); L-BFGS-B: SciPy's ``1 / |p|`` on the first iteration, 1 after."""
    if config.method == "bfgs":
        guess = 1.01 * 2.0 * (f - old_f) / tnp.where(dphi0 < 0, dphi0, -1.0)
        return tnp.where(guess > 0, tnp.minimum(1.0, guess), 1.0)
    size = tnp.linalg.norm(p)
    return tnp.where((k == 0) & (size > 1.0), 1.0 / tnp.where(size > 1.0, size, 1.0), 1.0)


def _stop(config: _Config, x, f_old, f, g, s):
    """SciPy's stopping tests after a step: ``|g| <= gtol``; BFGS's ``|s| <= xrtol (xrtol + |x|)``;
    L-BFGS-B's ``(f_old - f) <= ftol max(|f_old|, |f|, 1)``."""
    done = _norm(g, config.norm) <= config.gtol
    if config.method == "bfgs":
        if config.xrtol == 0:  # SciPy's default: the test holds only for a zero step, where |g| stops it too
            return done
        return done | (tnp.linalg.norm(s) <= config.xrtol * (config.xrtol + tnp.linalg.norm(x)))
    scale = tnp.maximum(tnp.maximum(tnp.abs(f_old), tnp.abs(f)), 1.0)
    return done | (f_old - f <= config.ftol * scale)


def _search(st: _State, memory_kind, config: _Config, old_f) -> _State:
    """``st`` with a fresh line search along the quasi-Newton direction from its ``x`` (``old_f``: ``f``
    at the iterate before, for the first trial step)."""
    p = memory_kind.direction(st.memory, st.g)
    dphi0 = tnp.dot(st.g, p)
    return st._replace(p=p, ls=_line_search.start(st.f, dphi0, _first_step(config, st.f, old_f, dphi0, p, st.k)))


def _step(st: _State, a, f, g, first, memory_kind, config: _Config) -> _State:
    """The quasi-Newton step to the accepted trial ``x + a p`` (``f``, ``g`` there), and the next search.
    On the ``first`` trip, the evaluation at ``x0`` (``a = 0``, ``p = 0``): no step, no iteration, and
    ``f`` "before" ``x0`` is ``f + |g| / 2``, so that BFGS's first step is ``1.01 / |g|`` along ``-g``
    (SciPy's and JAX's start)."""
    s = a * st.p
    x = st.x + s
    converged = tnp.where(first, _norm(g, config.norm) <= config.gtol, _stop(config, x, st.f, f, g, s))
    # a zero step leaves either memory as it is (y.s = 0)
    moved = st._replace(x=x, f=f, g=g, memory=memory_kind.update(st.memory, s, g - st.g),
                        k=st.k + tnp.where(first, 0, 1), converged=converged)
    return _search(moved, memory_kind, config, tnp.where(first, f + 0.5 * tnp.linalg.norm(g), st.f))


def _run(objective: Callable, x0, config: _Config) -> _State:
    """BFGS or L-BFGS from ``x0`` (a vector) on ``objective`` (vector -> scalar), in one ``while_loop``
    whose first trip evaluates ``x0``: the objective is staged once, inside the loop."""
    memory_kind = _BFGS if config.method == "bfgs" else _LBFGS
    value_grad = value_and_grad(objective)
    zero, count = tnp.zeros((), dtype=x0.dtype), tnp.asarray(0)
    st = _State(x=x0, f=zero, g=tnp.zeros_like(x0), p=tnp.zeros_like(x0), memory=memory_kind.init(x0, config),
                ls=_line_search.start(zero, zero - 1.0, zero), k=count, nfev=count, converged=tnp.asarray(False))

    def running(st: _State):  # x0 is evaluated whatever the limits, so that fun and jac are its
        return (st.nfev == 0) | (~st.converged & ~st.ls.failed & (st.k < config.maxiter) & (st.nfev < config.maxfun))

    def body(st: _State) -> _State:
        a = _line_search.trial(st.ls)
        f, g = value_grad(st.x + a * st.p)
        f, g = tnp.astype(f, x0.dtype), tnp.astype(g, x0.dtype)
        ls, accepted = _line_search.update(st.ls, a, f, tnp.dot(g, st.p), c1=config.c1, c2=config.c2,
                                           maxiter=config.maxls)
        first = st.nfev == 0
        searching = st._replace(ls=ls, nfev=st.nfev + 1)
        stepped = _step(searching, a, f, g, first, memory_kind, config)
        return _tree.tree_map(lambda new, old: tnp.where(accepted | first, new, old), stepped, searching)
    return while_loop(running, body, st)


def _status(st: _State):
    """SciPy's status: the loop ends converged (0), at a NaN or infinity (3), with the line search failed
    (2), or else at ``maxiter`` or ``maxfun`` (1)."""
    finite = tnp.isfinite(st.f) & tnp.all(tnp.isfinite(st.x))
    return tnp.where(st.converged & finite, 0, tnp.where(~finite, 3, tnp.where(st.ls.failed, 2, 1)))


def _hessian_solve(hvp, y):
    """``H^-1 y`` for the Hessian ``H`` at the solution, given its product ``hvp(v) = H v`` (``custom_root``'s
    linearised optimality condition): ``H`` formed a column per step of a loop (``map``, not ``jacfwd``'s
    ``vmap``: the product stays one example's program, which the compiled executor takes), then solved."""
    columns = loop_map(hvp, tnp.eye(y.shape[0], dtype=y.dtype))  # row i: H e_i; H is symmetric
    return tnp.linalg.solve(columns, y)


def minimize_traced(fun: Callable[..., Any], x0: Any, args: Sequence[Any] = (), method: str | None = None,
                    tol: float | None = None, options: dict | None = None, *, bounds: Any = None,
                    constraints: Any = (), jac: Any = None, hess: Any = None, hessp: Any = None,
                    callback: Callable[..., Any] | None = None, implicit_solve: str = "auto") -> OptimizeResults:
    """BFGS or L-BFGS minimising ``fun(x, *args)``, written in tapegrad operations so that it runs inside
    ``jit`` and ``vmap``, with a solution differentiable with respect to ``args``.

    :func:`tapegrad.scipy.optimize.minimize` calls it when ``x0`` or ``args`` holds a value of ``jit`` or
    ``vmap`` (SciPy's solvers need concrete values); it runs eagerly too. The algorithms are JAX's
    ``jax.scipy.optimize.minimize`` (``method="BFGS"``; its L-BFGS for ``"L-BFGS-B"``) with a
    strong-Wolfe line search (Nocedal & Wright 3.5, 3.6; ``c1``, ``c2`` as SciPy's), and SciPy's options,
    stopping tests and status codes. ``L-BFGS-B`` here is unconstrained L-BFGS: ``bounds`` are refused
    (a ValueError), call ``minimize`` outside ``jit``/``vmap`` for them. The solution's derivative comes
    from the optimality condition ``grad_x fun(x*, *args) = 0`` (:func:`tapegrad.custom_root`):
    ``dx*/dargs = -H^-1 d(grad_x fun)/dargs``, ``H`` the Hessian at ``x*``, formed densely by forward over
    reverse mode and solved; never by differentiating the iterations. Both modes, every order.

    Under ``vmap`` the loop runs until every example has stopped (a stopped example keeps its values).
    Nothing is raised for a solve that did not converge (a traced value cannot decide an exception):
    check ``success`` or ``status``; the implicit derivative holds only where ``success`` is true.

    Args:
        fun: ``fun(x, *args) -> scalar``, written in tapegrad operations, ``x`` of ``x0``'s shape.
        x0: the starting point, a float array of any shape (integers are taken as float64); the solver
            works on it flattened, in its dtype. It gets no derivative (as in SciPy and JAX).
        args: extra arguments of ``fun``: a sequence of arrays or pytrees (traced ones are differentiated)
            or constants.
        method: ``"BFGS"`` (None) or ``"L-BFGS-B"``, any case.
        tol: SciPy's: sets ``options["gtol"]`` (and L-BFGS-B's ``"ftol"``) where not given.
        options: SciPy's names. BFGS: ``gtol`` (1e-5), ``norm`` (inf), ``maxiter`` (200 n), ``c1`` (1e-4),
            ``c2`` (0.9), ``xrtol`` (0), ``hess_inv0`` (the identity). L-BFGS-B: ``maxcor`` (10), ``ftol``
            (2.2e-9), ``gtol`` (1e-5), ``maxiter`` (15000), ``maxfun`` (15000), ``maxls`` (20). ``disp``,
            ``iprint``, ``eps``, ``finite_diff_rel_step`` and ``workers`` are accepted and change nothing
            (the gradient is exact).
        bounds, constraints, jac, hess, hessp, callback: SciPy's; must be left out (a ValueError names
            each one given).
        implicit_solve: ``"auto"`` or ``"dense"``: the adjoint system is solved densely (the Hessian
            formed by ``n`` forward-over-reverse products). ``minimize``'s ``"cg"`` and ``"gmres"`` are
            SciPy's host solvers, which cannot run on traced values (a ValueError).

    Returns:
        :class:`OptimizeResults` (``x``, ``success``, ``status``, ``fun``, ``jac``, ``hess_inv``,
        ``nfev``, ``njev``, ``nit``); ``x`` has ``x0``'s shape and dtype and is differentiable with
        respect to the traced ``args``.

    Raises:
        ValueError: a method other than BFGS and L-BFGS-B, an unknown option or ``return_all``, ``c1``
            and ``c2`` not ``0 < c1 < c2 < 1``, a ``hess_inv0`` of the wrong shape, or one of
            ``bounds``, ``constraints``, ``jac``, ``hess``, ``hessp``, ``callback`` given; an
            ``implicit_solve`` other than ``"auto"`` and ``"dense"``.
    """
    _check_unsupported(bounds, constraints, jac, hess, hessp, callback)
    if implicit_solve not in ("auto", "dense"):
        raise ValueError(f"{WHERE}: implicit_solve={implicit_solve!r} runs SciPy's host solver, which cannot take "
                         "values of jit or vmap: use 'auto' or 'dense' there (the Hessian is formed and solved), or "
                         "call minimize outside jit and vmap")
    args = tuple(args)
    like = stop_gradient(tnp.asarray(x0))  # a value of jit or vmap too: no host conversion
    like = tnp.astype(like, np.result_type(np.dtype(like.dtype), np.float32))
    shape, dtype = tuple(like.shape), like.dtype
    config = _config(method, tol, options, int(np.prod(shape, dtype=int)))

    def objective(x, *values):
        return fun(tnp.reshape(x, shape), *values)

    def optimality(x):
        return tnp.astype(grad(objective)(x, *args), dtype)

    def solve(_, guess):
        constants = _tree.tree_map(lambda a: stop_gradient(a) if hasattr(a, "dtype") else a, args)
        st = _run(lambda x: objective(x, *constants), guess, config)
        return st.x, st
    x, st = custom_root(optimality, tnp.reshape(like, (-1,)), solve, _hessian_solve, has_aux=True, residual_tol=None)
    status = _status(st)
    return OptimizeResults(x=tnp.reshape(x, shape), success=status == 0, status=status, fun=st.f,
                           jac=tnp.reshape(st.g, shape), hess_inv=st.memory if config.method == "bfgs" else None,
                           nfev=st.nfev, njev=st.nfev, nit=st.k)
