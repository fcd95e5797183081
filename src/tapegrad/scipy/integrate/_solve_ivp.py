"""``solve_ivp``: SciPy's initial value problem solver (``RK23``, ``RK45``, ``DOP853``), differentiable,
with a stiff method of its own (``Rosenbrock23``, ``_rosenbrock.py``).

Forward: one ``while_loop`` whose every iteration is one attempted step of SciPy's embedded
Runge-Kutta pair, with SciPy's error norm, step-size control and starting step (``_runge_kutta.py``),
so the accepted steps are SciPy's. An accepted step writes the outputs at the ``t_eval`` points it
passes from its interpolant (as SciPy does), into a ``(len(t_eval), n)`` buffer: one loop, static
shapes, so ``jit`` stages it whole and the compiled executor can lower it.

Derivatives, chosen by ``adjoint``:

- ``adjoint=False`` (direct): reverse mode through the ``while_loop`` (``_while_rev.py``), storing each
  attempt's residuals (memory: the number of attempts times one step's residuals). The derivative is
  the exact derivative of the discrete solver, step-size control included.
- ``adjoint=True``: a ``custom_vjp`` whose backward pass integrates the adjoint ODE (Pontryagin; Chen
  et al. 2018) backwards over each interval between output times, with the same method and
  tolerances, restarting the state from the stored outputs (JAX's ``odeint`` design). Memory: the
  outputs only; the derivative is that of the exact solution, accurate to the tolerances.

Without ``t_eval`` SciPy returns every accepted step, a number known only after the solve: a first
solve (not differentiated) finds the step times, and the differentiable solve evaluates at them,
so this path needs concrete values (eager, under ``grad`` and ``vjp`` but not ``jit``).
"""
from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

import tapegrad.numpy as tnp
from tapegrad._api import stop_gradient, vjp
from tapegrad._control_flow import cond, scan
from tapegrad._control_flow._while import forward_only_while_loop, while_loop
from tapegrad._custom import custom_vjp
from tapegrad._vmap_api import vmap
from tapegrad.errors import ConcretizationError
from tapegrad.flatten_util import ravel_pytree
from tapegrad.scipy.integrate import _runge_kutta as rk
from tapegrad.scipy.integrate._rosenbrock import ROSENBROCK23, Rosenbrock, rosenbrock_dense_rows, rosenbrock_step
from tapegrad.scipy.integrate._sparse_rosenbrock import SparseStructure

METHODS = ("RK23", "RK45", "DOP853", "Rosenbrock23")
_IMPLICIT = ("Radau", "BDF", "LSODA")
# status codes of the loop: running (and then finished), SciPy's step-too-small failure, max_steps spent
_RUNNING, _TOO_SMALL, _OUT_OF_STEPS = 0, 1, 2


class OdeResult(dict):
    """SciPy's ``OdeResult``: a dict whose keys are also attributes.

    Fields: ``t`` (``(n_points,)``), ``y`` (``(n, n_points)``), ``sol`` (an :class:`OdeSolution` with
    ``dense_output=True``, else None), ``t_events`` and ``y_events`` (None: events are not supported),
    ``nfev`` (evaluations of ``fun``, counted as SciPy counts them), ``njev`` and ``nlu`` (Rosenbrock23's
    Jacobians and LU factorizations; 0 for the explicit methods), ``status``
    (0: reached the end of ``t_span``; -1: failed), ``message``, ``success`` (``status >= 0``). Under
    ``jit`` the counts, ``status`` and ``success`` are traced arrays and ``message`` describes the codes.
    """

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None

    def __dir__(self):
        return list(self.keys())


class OdeSolution:
    """The solution between the accepted steps, as SciPy's ``OdeSolution``: ``sol(t)`` is the state at
    ``t`` (a scalar gives ``(n,)``, a 1-D array of ``m`` times ``(n, m)``), read from the interpolant of
    the step that holds ``t`` (outside ``[t_min, t_max]``, the nearest step's, extrapolated).

    It is differentiable in the solve's inputs (through each step's start state, the steps' times held
    fixed) and in ``t``.

    Attributes:
        ts: the step boundaries, ``(n_steps + 1,)``, in the direction of integration.
        t_min, t_max: the ends of the interval covered.
        n_segments: the number of steps.
    """

    def __init__(self, ts: np.ndarray, y_starts: Any, rows: Any, tableau: rk.Tableau) -> None:
        self.ts, self._y_starts, self._rows, self._tableau = ts, y_starts, rows, tableau
        self.n_segments = len(ts) - 1
        self.t_min, self.t_max = float(min(ts[0], ts[-1])), float(max(ts[0], ts[-1]))

    def __call__(self, t: Any) -> Any:
        t = tnp.asarray(t, dtype=np.float64)
        scalar = tnp.ndim(t) == 0
        ts = np.asarray(self.ts)
        ascending = ts[-1] >= ts[0]
        # the segment holding each t (SciPy's side="left" search), clipped to the steps
        grid = ts if ascending else ts[::-1]
        index = np.clip(np.searchsorted(grid, np.atleast_1d(np.asarray(stop_gradient(t))), side="left") - 1,
                        0, self.n_segments - 1)
        if not ascending:
            index = self.n_segments - 1 - index
        t_old, h = ts[index], ts[index + 1] - ts[index]
        x = (tnp.reshape(t, (-1,)) - t_old) / np.where(h == 0.0, 1.0, h)
        values = vmap(lambda rows, y, s: rk.dense_eval(self._tableau, rows, y, s))(
            self._rows[index], self._y_starts[index], x)
        return values[0] if scalar else tnp.transpose(values)


class _Options(NamedTuple):
    """The static settings of one solve (a ``custom_vjp``'s non-differentiable argument)."""
    tableau: rk.Tableau
    rtol: Any
    atol: Any
    max_step: float
    first_step: float | None
    max_steps: int


# ---- the loop ------------------------------------------------------------------------------------
def _integrate(fun, options: _Options, t0, t1, y0, t_eval, *, record_times=False, reverse=True):
    """Steps from ``t0`` to ``t1``: ``(ys, y_end, counts, status, times)``; ``ys`` the states at
    ``t_eval`` (``(m, n)``, NaN where the solve stopped short), ``counts`` the accepted, attempted and
    output-writing steps, ``times`` the accepted steps' ends (with ``record_times``,
    ``(max_steps + 1,)``, else None).

    An iteration either attempts a step or, when the last accepted step has passed the next output
    time, writes that output from the step's interpolant (``cond``: one output, not the whole buffer,
    per iteration, and no step wasted)."""
    tab, rtol, atol = options.tableau, options.rtol, options.atol
    direction = tnp.astype(tnp.where(t1 >= t0, 1.0, -1.0), y0.dtype)
    fun = _keeping_dtype(fun, y0.dtype)
    f0 = fun(t0, y0)
    h_abs = (rk.initial_step(fun, t0, y0, f0, t1, options.max_step, direction, tab.error_order, rtol, atol)
             if options.first_step is None else tnp.asarray(options.first_step, dtype=y0.dtype))
    n_eval = tnp.shape(t_eval)[0]
    zero = tnp.asarray(0)
    carry = dict(t=t0, y=y0, f=f0, h_abs=h_abs, rejected=tnp.asarray(False), n_acc=zero, n_att=zero,
                 status=zero)
    if n_eval:
        # the last accepted step (before the first one: a step of length 0 at t0, whose interpolant is y0)
        rows = tnp.zeros((_n_rows(tab),) + tnp.shape(y0), dtype=y0.dtype)
        carry.update(j=zero, n_out=zero, t_old=t0, y_old=y0, rows=rows,
                     ys=tnp.full((n_eval,) + tnp.shape(y0), np.nan, dtype=y0.dtype), last_out=tnp.asarray(-1))
    if record_times:
        carry["times"] = tnp.zeros((options.max_steps + 1,), dtype=y0.dtype) + t0

    def pending(c):
        """Whether the next output lies in the last accepted step."""
        if not n_eval:
            return tnp.asarray(False)
        t_next = tnp.take(t_eval, tnp.minimum(c["j"], n_eval - 1))
        return (c["j"] < n_eval) & (direction * (t_next - c["t"]) <= 0)

    def cond_fun(c):
        stepping = (direction * (c["t"] - t1) < 0) & (c["n_att"] < options.max_steps)
        return (c["status"] == _RUNNING) & (stepping | pending(c))

    def body_fun(c):
        if not n_eval:
            return _attempt(fun, options, direction, t1, c)
        return cond(pending(c), lambda c: _output(tab, t_eval, c), lambda c: _attempt(fun, options, direction, t1, c),
                    c)

    bound = options.max_steps + n_eval + 1
    out = (while_loop(cond_fun, body_fun, carry, max_steps=bound) if reverse
           else forward_only_while_loop(cond_fun, body_fun, carry))
    unfinished = (out["status"] == _RUNNING) & (direction * (out["t"] - t1) < 0)
    status = tnp.where(unfinished, _OUT_OF_STEPS, out["status"])
    counts = (out["n_acc"], out["n_att"], out.get("n_out", zero))
    return out.get("ys", tnp.zeros((0,) + tnp.shape(y0), dtype=y0.dtype)), out["y"], counts, status, out.get("times")


def _keeping_dtype(fun, dtype):
    """``fun`` with its value cast to the state's dtype (the loop's carries keep their dtypes)."""
    def cast(t, y):
        value = fun(t, y)
        return value if value.dtype == dtype else tnp.astype(value, dtype)
    return cast


def _step(method, fun, t, y, f, h, rtol, atol):
    """One step of ``method``: ``(y_new, f_new, stages, error_norm)``."""
    if isinstance(method, Rosenbrock):
        return rosenbrock_step(method, fun, t, y, f, h, rtol, atol)
    return rk.rk_step(method, fun, t, y, f, h, rtol, atol)


def _dense_rows(method, fun, t, y, y_new, f_new, h, k):
    if isinstance(method, Rosenbrock):
        return rosenbrock_dense_rows(fun, t, y, y_new, f_new, h, k)
    return rk.dense_rows(method, fun, t, y, y_new, f_new, h, k)


def _n_rows(method) -> int:
    """The number of rows of a step's interpolant (:func:`_dense_rows`)."""
    if isinstance(method, Rosenbrock):
        return method.n_rows
    return len(method.P[0]) if method.P else len(method.D) + 3


def _spacing(t):
    """The gap from ``t`` to the next float away from zero (SciPy's ``|nextafter(t, +-inf) - t|``, which is
    half of it stepping towards zero from a power of two), from ``log2`` (``nextafter`` has no compiled
    lowering)."""
    finfo = np.finfo(np.dtype(t.dtype))
    magnitude = tnp.abs(t)
    exponent = tnp.floor(tnp.log2(tnp.where(magnitude > finfo.tiny, magnitude, 1.0)))
    return tnp.where(magnitude > finfo.tiny, finfo.eps * tnp.exp2(exponent), finfo.smallest_subnormal)


def _attempt(fun, options, direction, t1, c):
    """One attempted step (SciPy's ``RungeKutta._step_impl``, one pass of its inner loop)."""
    tab = options.tableau
    t, y, f, rejected = c["t"], c["y"], c["f"], c["rejected"]
    min_step = 10.0 * _spacing(t)
    # a new step starts from the last |h| clipped to [min_step, max_step]; a retried one may go below
    h_abs = tnp.where(rejected, c["h_abs"], tnp.minimum(tnp.maximum(c["h_abs"], min_step), options.max_step))
    too_small = h_abs < min_step
    t_new = t + h_abs * direction
    t_new = tnp.where(direction * (t_new - t1) > 0, t1, t_new)
    h = t_new - t
    y_new, f_new, k, error_norm = _step(tab, fun, t, y, f, h, options.rtol, options.atol)
    accept = (error_norm < 1.0) & ~too_small
    new = dict(c)
    new.update(t=tnp.where(accept, t_new, t), y=tnp.where(accept, y_new, y), f=tnp.where(accept, f_new, f),
               h_abs=tnp.abs(h) * rk.step_factor(tab, error_norm, rejected), rejected=~accept,
               n_acc=c["n_acc"] + accept, n_att=c["n_att"] + ~too_small,
               status=tnp.where(too_small, _TOO_SMALL, c["status"]))
    if "rows" in c:  # keep the accepted step's interpolant for the outputs it passes
        new.update(t_old=tnp.where(accept, t, c["t_old"]), y_old=tnp.where(accept, y, c["y_old"]),
                   rows=tnp.where(accept, _dense_rows(tab, fun, t, y, y_new, f_new, h, k), c["rows"]))
    if "times" in c:
        slot = tnp.arange(tnp.shape(c["times"])[0]) == c["n_acc"] + 1
        new["times"] = tnp.where(accept & slot, t_new, c["times"])
    return new


def _output(tableau, t_eval, c):
    """Write output ``j`` from the last accepted step's interpolant (SciPy's ``t_eval`` handling)."""
    # clipped: under vmap both branches run, this one also for examples that have written every output
    j = tnp.minimum(c["j"], tnp.shape(t_eval)[0] - 1)
    span = c["t"] - c["t_old"]
    x = (tnp.take(t_eval, j) - c["t_old"]) / tnp.where(span == 0.0, 1.0, span)
    new = dict(c)
    new.update(ys=c["ys"].at[j].set(rk.dense_eval(tableau, c["rows"], c["y_old"], x)), j=c["j"] + 1,
               n_out=c["n_out"] + (c["last_out"] != c["n_acc"]), last_out=c["n_acc"])
    return new


# ---- the adjoint ---------------------------------------------------------------------------------
def _solve_adjoint(fun, options, y0, t0, t1, t_eval, *args):
    ys, _, counts, status, _ = _integrate(lambda t, y: fun(t, y, *args), options, t0, t1, y0, t_eval,
                                          reverse=False)
    return ys, counts, status


_solve_adjoint = custom_vjp(_solve_adjoint, nondiff_argnums=(0, 1))


def _adjoint_fwd(fun, options, y0, t0, t1, t_eval, *args):
    out = _solve_adjoint(fun, options, y0, t0, t1, t_eval, *args)
    return out, (out[0], y0, t0, t_eval, args)


def _adjoint_bwd(fun, options, residuals, g):
    """Backwards over ``[t_eval[i-1], t_eval[i]]`` (the last interval ending at ``t0``) the state ``y``,
    its cotangent ``a`` (``da/dt = -a^T df/dy``) and the arguments' (``db/dt = -a^T df/dargs``), adding
    output ``i``'s cotangent at ``t_eval[i]``; an output time's own cotangent is ``g_i . f(t_i, y_i)``."""
    ys, y0, t0, t_eval, args = residuals
    g_ys = g[0]
    args_flat, unravel_args = ravel_pytree(args)
    n, n_args = tnp.shape(y0)[0], tnp.shape(args_flat)[0]

    def augmented(t, state):
        y, a = state[:n], state[n:2 * n]
        f, pullback = vjp(lambda y, p: fun(t, y, *unravel_args(p)), y, args_flat)
        a_y, a_p = pullback(a)
        return tnp.concatenate([f, -a_y, -a_p])

    def interval(a_b, xs):
        y_i, g_i, t_i, t_prev = xs
        a = a_b[:n] + g_i
        state = tnp.concatenate([y_i, a, a_b[n:]])
        _, end, _, _, _ = _integrate(augmented, options, t_i, t_prev, state, tnp.zeros((0,), dtype=t_i.dtype),
                                     reverse=False)
        return end[n:], tnp.sum(g_i * fun(t_i, y_i, *args))

    starts = tnp.concatenate([tnp.reshape(t0, (1,)), t_eval[:-1]])
    init = tnp.zeros((n + n_args,), dtype=y0.dtype)
    a_b, t_bars = scan(interval, init, (ys, g_ys, t_eval, starts), reverse=True)
    a0, b = a_b[:n], a_b[n:]
    t0_bar = -tnp.sum(a0 * fun(t0, y0, *args))  # moving t0 with y0 fixed shifts the whole solution
    return (a0, t0_bar, tnp.zeros_like(t0), t_bars, *unravel_args(b))


_solve_adjoint.defvjp(_adjoint_fwd, _adjoint_bwd)


# ---- the public function -------------------------------------------------------------------------
def solve_ivp(fun: Callable[..., Any], t_span: Any, y0: Any, method: str = "RK45", t_eval: Any = None,
              dense_output: bool = False, events: Any = None, vectorized: bool = False, args: Any = None, *,
              adjoint: bool = False, max_steps: int = 10_000, **options: Any) -> OdeResult:
    """Solve ``dy/dt = fun(t, y, *args)``, ``y(t_span[0]) = y0``, as SciPy's
    ``scipy.integrate.solve_ivp``, differentiably.

    The explicit methods take SciPy's steps: its tableaus, error norm, step-size control and starting
    step, so the accepted steps (and ``nfev``) match SciPy's up to rounding.

    Args:
        fun: ``fun(t, y, *args)``, the derivative, a ``(n,)`` array like ``y``, written in tapegrad
            operations. Values a transform traces (the parameters being differentiated) must reach it
            through ``args``, or (``adjoint=False`` only) as closures.
        t_span: ``(t0, t1)``; ``t1 < t0`` integrates backwards.
        y0: the initial state, a 1-D float array ``(n,)``: the solve keeps its dtype (SciPy computes
            in float64), and integers become float64.
        method: ``"RK45"`` (Dormand-Prince 5(4)), ``"RK23"`` (Bogacki-Shampine 3(2)), ``"DOP853"``
            (8th order), or for stiff problems ``"Rosenbrock23"`` (MATLAB's ``ode23s``, not a SciPy
            method: linearly implicit, with the Jacobian from ``jacfwd``; ``adjoint=False`` only).
            SciPy's implicit methods (``"Radau"``, ``"BDF"``, ``"LSODA"``) raise a ``ValueError``.
        t_eval: the output times, 1-D, inside ``t_span``, sorted in the direction of integration, read
            from the steps' interpolants. None returns every accepted step (SciPy's default), whose
            number is only known after the solve: not available under ``jit`` (pass ``t_eval``,
            e.g. ``t_span`` for the end points).
        dense_output: also return ``sol``, an :class:`OdeSolution` (needs concrete values: not
            under ``jit``).
        events: not supported (a non-None value raises ``NotImplementedError``): SciPy's event
            location would make the end of the solve depend on a root search that this solver does
            not differentiate.
        vectorized: accepted for SciPy's signature; the explicit methods never use it.
        args: a tuple of extra arguments of ``fun`` (arrays or pytrees of them), differentiable.
        adjoint: how reverse mode differentiates the solve. False (default): through the steps, the
            exact derivative of the discrete solver, storing each attempted step's residuals (memory
            grows with the number of steps), at every order. True: the adjoint method, storing only
            the outputs (memory independent of the steps), the derivative of the exact solution,
            accurate to ``rtol``/``atol``, reverse mode of first order only (forward mode and a second
            reverse pass raise a ``TypeError``).
        max_steps: the most attempted steps (accepted and rejected). A solve that has not reached
            ``t1`` by then stops with ``status = -1``. With ``adjoint=False`` under ``jit`` it also
            sizes the compiled loop's residual stacks.
        **options: ``rtol`` (1e-3), ``atol`` (1e-6, a scalar or ``(n,)``), ``max_step`` (inf),
            ``first_step`` (None: SciPy's choice); for ``Rosenbrock23``, ``jac_sparsity`` (SciPy's option of
            its implicit methods): the pattern of ``df/dy``, a SciPy sparse array or matrix or a Boolean
            ``(n, n)`` array (``tg.jacobian_sparsity`` finds it). Each step then takes the Jacobian in as
            many ``jvp`` passes as the pattern's columns need colours, and solves with ``W`` sparse by
            ``tapegrad.scipy.sparse.linalg.spsolve``, one factorisation for the step's three solves; the
            steps and solution are the dense method's up to rounding. Other options warn and are
            ignored, as in SciPy.

    Returns:
        An :class:`OdeResult` with ``t`` ``(n_points,)`` (``t_eval``, or the accepted steps' times from
        ``t0`` to ``t1``), ``y`` ``(n, n_points)`` (NaN at outputs a failed solve did not reach),
        ``sol``, ``t_events = y_events = None``, ``nfev``, ``njev`` and ``nlu`` (Jacobians and LU
        factorizations: 0 for the explicit methods), ``status``, ``message``, ``success``. ``y`` is
        differentiable in ``y0``, ``args``, ``t_span`` and ``t_eval``; the returned step times
        (``t_eval=None``) are constants.

    Raises:
        ValueError: an unknown or implicit ``method``, ``y0`` not 1-D, ``t_eval`` not 1-D,
            outside ``t_span`` or unsorted (checked when concrete), ``dense_output`` or
            ``t_eval=None`` under ``jit``.
        NotImplementedError: ``events`` given.
        TypeError: ``args`` not a tuple.
    """
    tableau = _check_method(method)
    if events is not None:
        raise NotImplementedError("solve_ivp: events are not supported (the end of an event-terminated solve "
                                  "is a root of the event function, which this solver does not differentiate); "
                                  "leave events=None, and locate events on the returned sol, or use "
                                  "scipy.integrate.solve_ivp for the forward solve only")
    if adjoint and isinstance(tableau, Rosenbrock):
        raise ValueError("solve_ivp: adjoint=True is not available with method='Rosenbrock23': the adjoint "
                         "method integrates the state backwards in time, where a stiff problem's decaying modes "
                         "grow without bound; use adjoint=False (through the steps)")
    args = _check_args(args)
    y0 = tnp.asarray(y0)
    y0 = y0 if np.dtype(y0.dtype).kind == "f" else tnp.astype(y0, np.float64)
    if tnp.ndim(y0) != 1:
        raise ValueError(f"solve_ivp: y0 must be a 1-D array of the n states, got shape {tnp.shape(y0)}")
    t0, t1 = (tnp.astype(tnp.asarray(t), y0.dtype) for t in t_span)
    tableau = _with_sparsity(tableau, options, tnp.shape(y0)[0])
    settings = _settings(tableau, options, max_steps)
    solve = _solve_adjoint if adjoint else _solve_direct
    interpolated = t_eval is not None  # SciPy evaluates DOP853's interpolant (3 more calls) only then
    if t_eval is None:
        t_eval = _step_times(fun, settings, y0, t0, t1, args)
    t_eval = _check_t_eval(t_eval, t0, t1, y0.dtype)
    try:
        ys, counts, status = solve(fun, settings, y0, t0, t1, t_eval, *args)
    except TypeError as error:
        # the adjoint's loops are forward-only: a transform reaches them past the custom rule when fun closes
        # over a value it traces, or when it is forward mode (which transposes the rule's backward pass)
        if not adjoint or "while_loop: reverse-mode" not in str(error):
            raise
        raise TypeError("solve_ivp: with adjoint=True, the derivative is reverse mode (grad, vjp) of first order in "
                        "y0, args, t_span and t_eval: for forward mode (jvp, jacfwd) or higher orders pass "
                        "adjoint=False, and pass a traced value fun uses in args, not as a closure") from error
    sol = _dense_solution(fun, settings, y0, t0, t1, args, solve) if dense_output else None
    return _result(tableau, t_eval, ys, counts, status, sol, settings, dense_output, interpolated)


def _solve_direct(fun, options, y0, t0, t1, t_eval, *args):
    ys, _, counts, status, _ = _integrate(lambda t, y: fun(t, y, *args), options, t0, t1, y0, t_eval)
    return ys, counts, status


def _with_sparsity(tableau, options: dict, n: int):
    """Rosenbrock23 with ``jac_sparsity`` (taken out of ``options``) becomes its sparse variant; SciPy's
    explicit methods keep the option, to warn that it has no effect, as SciPy's do."""
    if not isinstance(tableau, Rosenbrock) or "jac_sparsity" not in options:
        return tableau
    sparsity = options.pop("jac_sparsity")
    return tableau if sparsity is None else tableau._replace(sparsity=SparseStructure(sparsity, n))


def _check_method(method):
    if method not in METHODS:
        hint = (f"; for a stiff problem use method='Rosenbrock23' in place of SciPy's {method}"
                if method in _IMPLICIT else "")
        raise ValueError(f"solve_ivp: method must be one of {METHODS} (tapegrad's differentiable solvers), got "
                         f"{method!r}{hint}")
    return ROSENBROCK23 if method == "Rosenbrock23" else rk.TABLEAUS[method]


def _check_args(args):
    if args is None:
        return ()
    if not isinstance(args, tuple):
        raise TypeError(f"solve_ivp: args must be a tuple of extra arguments of fun, got {type(args).__name__}; "
                        f"write args=({args!r},) for one argument")
    return args


def _settings(tableau, options, max_steps):
    known = {"rtol": 1e-3, "atol": 1e-6, "max_step": np.inf, "first_step": None}
    extra = sorted(set(options) - set(known))
    if extra:
        warnings.warn(f"solve_ivp: the following arguments have no effect for a chosen solver: {', '.join(extra)}.",
                      stacklevel=3)
    values = {**known, **{k: v for k, v in options.items() if k in known}}
    if isinstance(max_steps, bool) or not isinstance(max_steps, (int, np.integer)) or max_steps < 1:
        raise ValueError(f"solve_ivp: max_steps must be a positive int, got {max_steps!r}")
    if not values["max_step"] > 0:
        raise ValueError(f"solve_ivp: max_step must be positive, got {values['max_step']!r}")
    return _Options(tableau, values["rtol"], values["atol"], values["max_step"], values["first_step"],
                    int(max_steps))


def _step_times(fun, options, y0, t0, t1, args):
    """The accepted steps' ends from a first solve (not differentiated), as output times: ``t0`` and
    (where the solve reached it) ``t1`` themselves, differentiable; the times between them constants."""
    const = stop_gradient((y0, t0, t1, args))
    _, _, counts, status, times = _integrate(lambda t, y: fun(t, y, *const[3]), options, *const[1:3], const[0],
                                             tnp.zeros((0,), dtype=y0.dtype), record_times=True, reverse=False)
    try:
        n_acc, finished = int(counts[0]), int(status) == _RUNNING
    except ConcretizationError as error:
        raise ValueError("solve_ivp: under jit, t_eval=None (every accepted step, a number known only after the "
                         "solve) and dense_output=True are not available; pass t_eval (e.g. t_eval=t_span for "
                         "the end points) and leave dense_output False") from error
    inner = tnp.asarray(np.asarray(times)[1:n_acc + (not finished)], dtype=y0.dtype)
    parts = [tnp.reshape(t0, (1,)), inner] + ([tnp.reshape(t1, (1,))] if finished and n_acc else [])
    return tnp.concatenate(parts)


def _check_t_eval(t_eval, t0, t1, dtype):
    t_eval = tnp.asarray(t_eval)
    t_eval = tnp.astype(t_eval, dtype) if t_eval.dtype != dtype else t_eval
    if tnp.ndim(t_eval) != 1:
        raise ValueError(f"solve_ivp: t_eval must be 1-dimensional, got shape {tnp.shape(t_eval)}")
    try:
        values, lo, hi = (np.asarray(stop_gradient(v)) for v in (t_eval, t0, t1))
    except ConcretizationError:
        return t_eval  # traced under jit: the values are not checked
    if np.any(values < min(lo, hi)) or np.any(values > max(lo, hi)):
        raise ValueError(f"solve_ivp: values in t_eval are not within t_span ({float(lo)}, {float(hi)})")
    steps = np.diff(values)
    if np.any(steps <= 0) if hi > lo else np.any(steps >= 0):
        raise ValueError("solve_ivp: values in t_eval are not properly sorted (increasing for t_span[1] > "
                         "t_span[0], decreasing otherwise)")
    return t_eval


def _dense_solution(fun, options, y0, t0, t1, args, solve):
    """The :class:`OdeSolution`: each accepted step's start state (differentiable, from ``solve`` at the
    step times) and its interpolant, rebuilt by one step from it (vmapped over the steps)."""
    times = _step_times(fun, options, y0, t0, t1, args)
    ys, _, _ = solve(fun, options, y0, t0, t1, times, *args)
    ts = np.asarray(stop_gradient(times))
    if len(ts) < 2:
        ts, ys = np.array([ts[0], ts[0]]), tnp.concatenate([ys, ys])

    def rows(t, h, y):
        f = fun(t, y, *args)
        y_new, f_new, k, _ = _step(options.tableau, lambda s, z: fun(s, z, *args), t, y, f, h, options.rtol,
                                   options.atol)
        return _dense_rows(options.tableau, lambda s, z: fun(s, z, *args), t, y, y_new, f_new, h, k)
    starts = ys[:-1]
    return OdeSolution(ts, starts, vmap(rows)(ts[:-1], np.diff(ts), starts), options.tableau)


def _result(tableau, t_eval, ys, counts, status, sol, options, dense_output, interpolated):
    n_acc, n_att, n_out = counts
    # SciPy counts f(t0) and the starting step's probe, n_stages per attempt, and DOP853's three extra
    # stages per step whose interpolant it reads
    extra = (n_acc if dense_output else n_out if interpolated else 0) * 3 if tableau.D else 0
    nfev = (2 if options.first_step is None else 1) + tableau.n_stages * n_att + extra
    failed = status != _RUNNING
    # Rosenbrock23: one Jacobian per attempt; tnp.linalg.solve factors W for each of its 3 solves, spsolve
    # once for the three (its factorisation cache)
    lus_per_attempt = 1 if getattr(tableau, "sparsity", None) is not None else 3
    njev, nlu = (n_att, lus_per_attempt * n_att) if isinstance(tableau, Rosenbrock) else (0, 0)
    return OdeResult(t=t_eval, y=tnp.transpose(ys), sol=sol, t_events=None, y_events=None, nfev=nfev, njev=njev,
                     nlu=nlu, status=tnp.where(failed, -1, 0), message=_message(status, options),
                     success=~failed)


def _message(status, options):
    try:
        code = int(status)
    except ConcretizationError:
        return ("traced under jit: status 0 means the solver reached the end of the integration interval, -1 "
                "that it failed (a step below the spacing of floats, or max_steps spent)")
    return {_RUNNING: "The solver successfully reached the end of the integration interval.",
            _TOO_SMALL: "Required step size is less than spacing between numbers.",
            _OUT_OF_STEPS: f"max_steps={options.max_steps} steps (accepted and rejected) were taken before the end "
                           "of the integration interval; raise max_steps"}[code]

