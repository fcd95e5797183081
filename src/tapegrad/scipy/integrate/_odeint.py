"""``odeint``: adaptive Dormand-Prince (RK45) integration, differentiable by the adjoint method.

The design is JAX's ``jax.experimental.ode`` (after autograd's ``scipy.integrate.odeint``), in
tapegrad operations:

- forward: a ``scan`` over the output times; between two of them a ``while_loop`` takes Dormand-Prince
  steps, accepting a step where the mixed relative/absolute error estimate is at most 1 and resizing
  it (Hairer, Norsett and Wanner, "Solving ODEs I", II.4), and the value at the output time is read
  from the 4th-order interpolating polynomial of the last step (Shampine 1986);
- reverse (``custom_vjp``): a reverse ``scan`` over the output intervals, each integrating the adjoint
  ODE (Pontryagin; Chen et al. 2018, "Neural ODEs") backwards from its output time to the previous one,
  with the same solver: the state ``y``, its cotangent ``y_bar`` (``dy_bar/dt = -y_bar^T df/dy``) and
  the cotangent of the arguments (``dargs_bar/dt = -y_bar^T df/dargs``), plus the cotangent of each
  output time (``t_bar_i = g_i . f(y_i, t_i)``, and ``t_0``'s by integrating ``-y_bar^T df/dt``). Each
  adjoint solve is a call of the ``custom_vjp`` itself, which a staged scan body keeps whole: a reverse
  mode around the backward pass (grad of grad) meets the rule, never the solver's ``while_loop``.

The solver and the backward pass are each a ``jit`` staged once per ``func``, options, shapes and dtypes
(:class:`_Staged`): eager calls run those programs, and an outer ``jit`` stages them inline into its own.

The state may be any pytree of float arrays; it is flattened into one vector for the solver.
"""
from __future__ import annotations

import functools
import math
import weakref
from collections.abc import Callable
from typing import Any

import numpy as np

import tapegrad.numpy as tnp
from tapegrad import _tree
from tapegrad._api import vjp
from tapegrad._control_flow import scan
from tapegrad._control_flow._while import forward_only_while_loop
from tapegrad._custom import custom_vjp
from tapegrad._jit import jit
from tapegrad._typing import Array, ArrayLike
from tapegrad.scipy.integrate._runge_kutta import RK45

# ---- the Dormand-Prince tableau (solve_ivp's RK45), its last stage at the solution itself ---------
_ALPHA = RK45.C[1:] + (1.0,)
_BETA = RK45.A[1:] + (RK45.B,)
_C_SOL = RK45.B + (0.0,)
# JAX's error weights (5th order minus 4th) and midpoint, which odeint's steps follow
_C_ERROR = (35 / 384 - 1951 / 21600, 0.0, 500 / 1113 - 22642 / 50085, 125 / 192 - 451 / 720,
            -2187 / 6784 + 12231 / 42400, 11 / 84 - 649 / 6300, -1.0 / 60.0)
_C_MID = (6025192743 / 30085553152 / 2, 0.0, 51252292925 / 65400821598 / 2, -2691868925 / 45128329728 / 2,
          187940372067 / 1594534317056 / 2, -1776094331 / 19743644256 / 2, 11237099 / 235043384 / 2)


def _interp_weights(first, last, solution, midpoint):
    """The weights on the seven stages of ``first dy0 + last dy1 + solution y1 + midpoint y_mid`` (over
    ``dt``), where ``y1`` and ``y_mid`` are ``y0`` plus ``dt`` times a combination of the stages and the
    weights of ``y0``, ``y1`` and ``y_mid`` add up to zero."""
    return tuple(first * (i == 0) + last * (i == 6) + solution * c + midpoint * m
                 for i, (c, m) in enumerate(zip(_C_SOL, _C_MID)))


# The interpolating polynomial of a step (Shampine 1986): the 4th-order polynomial in the step's fraction
# s that matches y and dy/dt at both ends and the midpoint estimate y0 + dt sum(_C_MID k). Its
# coefficients of s^4, s^3 and s^2 are combinations of the stages (those of y0 cancel), and of s, dt k0;
# so p(s) = y0 + dt sum_i w_i(s) k_i, with w_i(s) = s (d_i + s (c_i + s (b_i + s a_i))). The stages
# with a weight (all but the second) are kept from the last accepted step (the last one is its f), and
# the polynomial is evaluated once per output time, not fitted at every step.
_S4, _S3, _S2 = (_interp_weights(-2.0, 2.0, -8.0, 16.0), _interp_weights(5.0, -3.0, 14.0, -32.0),
                 _interp_weights(-4.0, 1.0, -5.0, 16.0))
_DENSE = tuple((i, (1.0 if i == 0 else 0.0, _S2[i], _S3[i], _S4[i])) for i in range(7) if _S4[i] or _S3[i] or _S2[i])


def _combine(coefficients, k):
    """``sum_i c_i k_i`` over the non-zero coefficients."""
    return functools.reduce(lambda acc, term: acc + term, [c * ki for c, ki in zip(coefficients, k) if c])


def _runge_kutta_step(func, y0, f0, t0, dt):
    """One Dormand-Prince step: the 5th-order solution, its derivative, the error estimate (5th minus
    4th order) and the seven stages. The tableau's last row is the solution's weights, so the last stage
    is evaluated at the solution: it is the next step's first ("first same as last")."""
    k, y1 = [f0], y0
    for alpha, beta in zip(_ALPHA, _BETA):
        y1 = y0 + dt * _combine(beta, k)
        k.append(func(y1, t0 + dt * alpha))
    return y1, k[-1], dt * _combine(_C_ERROR, k), k


def _interpolate(y0, stages, span, s):
    """The interpolating polynomial (``_DENSE``) of the step from ``y0`` of length ``span``, at its
    fraction ``s``: ``stages`` are that step's stages that have a weight, in ``_DENSE``'s order."""
    terms = []
    for k, (_, (d, c, b, a)) in zip(stages, _DENSE):
        terms.append(s * (d + s * (c + s * (b + s * a))) * k)
    return y0 + span * functools.reduce(lambda acc, term: acc + term, terms)


def _error_ratio(error, rtol, atol, y0, y1):
    """The root-mean-square of the error over its tolerance, ``atol + rtol * max(|y0|, |y1|)``."""
    ratio = error / (atol + rtol * tnp.maximum(tnp.abs(y0), tnp.abs(y1)))
    return tnp.sqrt(tnp.mean(ratio * ratio))


def _optimal_step(last_step, ratio, safety=0.9, ifactor=10.0, dfactor=0.2, order=5.0):
    """The next step: grown at most ``ifactor`` times, and shrunk at most to ``dfactor`` of a rejected
    step (Hairer, Norsett and Wanner, II.4)."""
    dfactor = tnp.where(ratio < 1.0, 1.0, dfactor)
    safe = tnp.where(ratio == 0.0, 1.0, ratio)
    factor = tnp.minimum(ifactor, tnp.maximum(safe ** (-1.0 / order) * safety, dfactor))
    return tnp.where(ratio == 0.0, last_step * ifactor, last_step * factor)


def _initial_step(func, t0, y0, order, rtol, atol, f0):
    """Hairer, Norsett and Wanner's starting step (II.4, algorithm of p. 169)."""
    scale = atol + tnp.abs(y0) * rtol
    d0, d1 = tnp.linalg.norm(y0 / scale), tnp.linalg.norm(f0 / scale)
    h0 = tnp.where((d0 < 1e-5) | (d1 < 1e-5), 1e-6, 0.01 * d0 / tnp.where(d1 == 0.0, 1.0, d1))
    f1 = func(y0 + h0 * f0, t0 + h0)
    d2 = tnp.linalg.norm((f1 - f0) / scale) / h0
    large = tnp.maximum(d1, d2)
    h1 = tnp.where((d1 <= 1e-15) & (d2 <= 1e-15), tnp.maximum(1e-6, h0 * 1e-3),
                   (0.01 / tnp.where(large == 0.0, 1.0, large)) ** (1.0 / (order + 1.0)))
    return tnp.minimum(100.0 * h0, h1)


def _limit(step, hmax, like):
    """``step`` at most ``hmax`` (no operation for an infinite one), in ``like``'s dtype. Steps are
    never negative: the initial step is positive and a resize multiplies by a positive factor."""
    return tnp.astype(tnp.minimum(step, hmax) if hmax < math.inf else step, tnp.result_type(like))


def _integrate(func, rtol, atol, mxstep, hmax, y0, ts):
    """The solution of ``dy/dt = func(y, t)`` (``y`` a vector) at the times ``ts[1:]``,
    ``(len(ts) - 1, n)``, and the number of accepted steps (an int64 scalar)."""
    def advance(carry, target_t):
        def cond_fun(state):
            i, _, _, t, dt, *_ = state
            going = (t < target_t) & (dt > 0.0)
            return going & (i < mxstep) if mxstep < math.inf else going

        def body_fun(state):
            i, y, f, t, dt, last_t, last_y, stages, accepted = state
            next_y, next_f, error, k = _runge_kutta_step(func, y, f, t, dt)
            ratio = _error_ratio(error, rtol, atol, y, next_y)
            accept = ratio <= 1.0
            new = (next_y, next_f, t + dt, t, y, *(k[j] for j, _ in _DENSE[:-1]))
            old = (y, f, t, last_t, last_y, *stages)
            y, f, t, last_t, last_y, *stages = [tnp.where(accept, a, b) for a, b in zip(new, old)]
            return (i + 1, y, f, t, _limit(_optimal_step(dt, ratio), hmax, dt), last_t, last_y, tuple(stages),
                    accepted + tnp.astype(accept, np.int64))

        _, *carry = forward_only_while_loop(cond_fun, body_fun, (0, *carry))
        _, f, t, _, last_t, last_y, stages, _ = carry
        span = t - last_t  # the last accepted step (zero before the first)
        s = (target_t - last_t) / tnp.where(span == 0.0, 1.0, span)
        return tuple(carry), _interpolate(last_y, [*stages, f], span, s)

    f0 = func(y0, ts[0])
    dt = _limit(_initial_step(func, ts[0], y0, 4, rtol, atol, f0), hmax, ts[0])
    # the stages are separate values, not one stacked array: a small state's stay unrolled (compiled)
    carry = (y0, f0, ts[0], dt, ts[0], y0, (f0,) * (len(_DENSE) - 1), tnp.zeros((), np.int64))
    if tnp.shape(ts)[0] == 2:  # one interval (each of the adjoint's solves): no scan around its loop
        carry, y1 = advance(carry, ts[1])
        return y1[None], carry[-1]
    carry, ys = scan(advance, carry, ts[1:])
    return ys, carry[-1]


# ---- pytrees of states ---------------------------------------------------------------------------
def _ravel(tree):
    """The leaves of ``tree`` as one vector, and the function that rebuilds the tree from one."""
    leaves, treedef = _tree.tree_flatten(tree)
    shapes = [tnp.shape(leaf) for leaf in leaves]
    sizes = [math.prod(s) for s in shapes]
    flat = tnp.concatenate([tnp.reshape(leaf, (-1,)) for leaf in leaves]) if leaves else tnp.zeros(0)

    def unravel(vector, lead=()):
        """The tree from ``vector`` (``lead + (n,)``: leading axes are kept on every leaf)."""
        parts, start = [], 0
        for shape, size in zip(shapes, sizes):
            parts.append(tnp.reshape(vector[..., start:start + size], tuple(lead) + tuple(shape)))
            start += size
        return _tree.tree_unflatten(treedef, parts)
    return flat, unravel


def _solve(func, rtol, atol, mxstep, hmax, y0, ts, args):
    """``odeint`` on pytrees: the state flattened for :func:`_integrate`, the solution unflattened
    with the time axis first on every leaf."""
    flat0, unravel = _ravel(y0)

    def flat_func(y, t):
        return _ravel(func(unravel(y), t, *args))[0]
    later, accepted = _integrate(flat_func, rtol, atol, mxstep, hmax, flat0, ts)
    # joined leaf by leaf, not as one (len(ts), n) array: each leaf of a small state stays small
    ys = _tree.tree_map(lambda first, rest: tnp.concatenate([tnp.asarray(first)[None], rest]), y0,
                        unravel(later, lead=tnp.shape(later)[:1]))
    return ys, accepted


# ---- the solver and its adjoint, staged once per function ----------------------------------------
class _Staged:
    """``odeint``'s solver and backward pass for one ``func`` and one set of options, each a ``jit``
    of its own: an eager call runs their compiled programs (staged once per shapes and dtypes), and a
    call under an outer ``jit`` stages them inline. ``augmented`` is the adjoint system of ``func``,
    one object per ``func`` so that its own solvers are staged once too.

    Only a weak reference to ``func`` is kept: the cache (keyed weakly on ``func``) then never keeps it,
    or what it closes over, alive."""

    def __init__(self, func, options):
        func_ref = _reference(func)
        rtol, atol, mxstep, hmax = options

        def augmented(state, minus_t, *args):
            """The state and its adjoint, run in reversed time ``-t``."""
            y, y_bar, _, _ = state
            y_dot, pullback = vjp(func_ref(), y, -minus_t, *args)
            y_bar_dot, t_bar_dot, *args_bar_dot = pullback(y_bar)
            return (_tree.tree_map(lambda v: -v, y_dot), y_bar_dot, t_bar_dot, tuple(args_bar_dot))
        self.augmented = augmented
        # each returns what _solve and _backward do: (ys, accepted steps), and the cotangents
        self.solve = jit(lambda y0, ts, args: _solve(func_ref(), rtol, atol, mxstep, hmax, y0, ts, args))
        self.backward = jit(lambda residuals, g: _backward(func_ref(), augmented, options, residuals, g))


_STAGED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # func -> {options: _Staged}


def _reference(func):
    """A weak reference to ``func``, or (an object without weak references) a strong one."""
    try:
        return weakref.ref(func)
    except TypeError:
        return lambda: func


def _staged(func, options) -> _Staged:
    """The cached :class:`_Staged` of ``func`` and ``options``; a ``func`` that takes no weak reference
    (a builtin) gets a new one, staged again at every call."""
    try:
        per_func = _STAGED.setdefault(func, {})
    except TypeError:
        per_func = {}
    staged = per_func.get(options)
    if staged is None:
        staged = per_func[options] = _Staged(func, options)
    return staged


def _closure_error(error: TypeError) -> TypeError:
    """The error to raise for ``error``: reverse mode reaches the solver's while_loop only when a traced
    value is not among the arguments the custom rule accounts for, so it came in by a closure."""
    if "while_loop: reverse-mode" not in str(error):
        return error
    return TypeError("odeint: func uses a value traced by the running transform that is not one of its "
                     "differentiable arguments (a closure over a traced value): pass that value to odeint "
                     "in *args, after t, and take it as an argument of func")


@functools.partial(custom_vjp, nondiff_argnums=(0, 1, 2, 3, 4))
def _odeint(func, rtol, atol, mxstep, hmax, y0, ts, *args):
    try:
        return _staged(func, (rtol, atol, mxstep, hmax)).solve(y0, ts, args)[0]
    except TypeError as error:
        raise _closure_error(error) from error


def _odeint_fwd(func, rtol, atol, mxstep, hmax, y0, ts, *args):
    # through _odeint itself, not _solve: under nested reverse mode the outer transform then sees the
    # custom rule too, not the solver's while_loop (which reverse mode cannot differentiate)
    ys = _odeint(func, rtol, atol, mxstep, hmax, y0, ts, *args)
    return ys, (ys, ts, args)


def _dot(a, b):
    """``sum(a * b)`` over every leaf of two pytrees of one structure."""
    return sum(tnp.sum(x * y) for x, y in zip(_tree.tree_leaves(a), _tree.tree_leaves(b)))


def _backward(func, augmented, options, residuals, g):
    """The cotangents of ``y0``, ``ts`` and ``args``: a reverse ``scan`` over the output intervals,
    each integrating the adjoint system from ``ts[i]`` back to ``ts[i - 1]``."""
    ys, ts, args = residuals

    def interval(carry, x):
        y_bar, t0_bar, args_bar = carry
        y_i, g_i, g_before, t_i, t_before = x
        t_bar = _dot(func(y_i, t_i, *args), g_i)  # moving output time i moves y_i along f
        # through _odeint, the custom_vjp: an outer reverse mode (grad of grad) meets its rule inside
        # this scan body, never the solver's while_loop
        state = _odeint(augmented, *options, (y_i, y_bar, t0_bar - t_bar, args_bar),
                        tnp.stack([-t_i, -t_before]), *args)
        _, y_bar, t0_bar, args_bar = _tree.tree_map(lambda leaf: leaf[1], state)
        return (_tree.tree_map(lambda a, b: a + b, y_bar, g_before), t0_bar, args_bar), t_bar

    last = _tree.tree_map(lambda leaf: leaf[-1], g)
    init = (last, tnp.zeros((), dtype=ts.dtype), _tree.tree_map(tnp.zeros_like, tuple(args)))
    xs = (*_tree.tree_map(lambda leaf: leaf[1:], (ys, g)), _tree.tree_map(lambda leaf: leaf[:-1], g),
          ts[1:], ts[:-1])
    (y_bar, t0_bar, args_bar), ts_bar = scan(interval, init, xs, reverse=True)
    return (y_bar, tnp.concatenate([t0_bar[None], ts_bar]), *args_bar)


def _odeint_bwd(func, rtol, atol, mxstep, hmax, residuals, g):
    return _staged(func, (rtol, atol, mxstep, hmax)).backward(residuals, g)


_odeint.defvjp(_odeint_fwd, _odeint_bwd)


def odeint(func: Callable[..., Any], y0: ArrayLike, t: ArrayLike, *args: Any, rtol: float = 1.4e-8,
           atol: float = 1.4e-8, mxstep: float = np.inf, hmax: float = np.inf) -> Array:
    """The solution of ``dy/dt = func(y, t, *args)``, ``y(t[0]) = y0``, at the times ``t``, as JAX's
    ``jax.experimental.ode.odeint`` (and autograd's ``scipy.integrate.odeint``).

    Args:
        func: ``func(y, t, *args)``, the derivative, a pytree like ``y``, written in tapegrad
            operations. It must not close over a value traced by a transform running around
            ``odeint``: pass such values in ``args`` (a ``TypeError`` says so).
        y0: the initial state: a float array or a pytree of them.
        t: 1-D increasing times; ``t[0]`` is the initial time.
        *args: extra arguments of ``func`` (arrays or pytrees), differentiable. Note SciPy's
            ``odeint`` takes them as ``args=(...)`` instead.
        rtol, atol: the relative and absolute tolerance of each step's error estimate.
        mxstep: the most steps between two output times (then the solver stops where it is).
        hmax: the largest step.

    Returns:
        The states at the times ``t``, in ``y0``'s structure, each leaf with ``len(t)`` in front.

    Derivatives: reverse mode, in ``y0``, ``t`` and ``args``, by the adjoint method (module notes); the
    adjoint is solved with the same tolerances, so gradients are as accurate as the solution.
    Forward mode (``jvp``) transposes that reverse rule; both nest to any order. Under ``vmap`` every
    example takes the steps of the slowest.

    Speed: the solver and its adjoint are each staged once per ``func`` (the function object: a new
    lambda at every call stages again), options, shapes and dtypes, with ``tg.jit``, and an eager call
    runs those programs: ``grad`` of an eager ``odeint`` runs two. Under an outer ``jit`` they are staged
    into its program instead. Whether they run compiled (numba) or on the Python executor is ``jit``'s
    choice, by their size: :func:`odeint_explain` says which, and why (docs/jit.md, "The compiled
    executor").

    Raises:
        ValueError: ``t`` not 1-D.
        TypeError: ``func`` closing over a traced value (above); an option that is not a number.
    """
    ts, y0, options = _prepare(y0, t, rtol, atol, mxstep, hmax)
    return _odeint(func, *options, y0, ts, *args)


def odeint_explain(func: Callable[..., Any], y0: ArrayLike, t: ArrayLike, *args: Any, rtol: float = 1.4e-8,
                   atol: float = 1.4e-8, mxstep: float = np.inf, hmax: float = np.inf) -> str:
    """Which executor runs each of :func:`odeint`'s programs (JAX's ``jax.experimental.ode.odeint``,
    staged) for these arguments, and why where it is not numba, as ``tg.jit(f).explain``: two lines,
    ``"solver: ..."`` (the forward solve) and ``"backward: ..."`` (the backward pass of ``grad``). It
    stages both programs and caches them, as calls would, and runs the forward solve once (the backward
    pass is staged on its output).

    Args:
        func: as :func:`odeint`.
        y0: as :func:`odeint`, a concrete array (or pytree of them).
        t: as :func:`odeint`, concrete.
        *args: as :func:`odeint`, concrete.
        rtol, atol, mxstep, hmax: as :func:`odeint`.

    Returns:
        Two lines, for example ``solver: numba: the program is compiled whole`` and then
        ``backward: python+numba: not compiled whole because ...; its loops compile alone``.
    """
    ts, y0, options = _prepare(y0, t, rtol, atol, mxstep, hmax)
    staged = _staged(func, options)
    ys = staged.solve(y0, ts, args)[0]
    return (f"solver: {staged.solve.explain(y0, ts, args)}\n"
            f"backward: {staged.backward.explain((ys, ts, args), ys)}")


def _accepted_steps(func, y0, t, *args, rtol=1.4e-8, atol=1.4e-8, mxstep=np.inf, hmax=np.inf) -> int:
    """The number of steps :func:`odeint`'s forward solve accepts (benchmarks and tests compare it with
    JAX's)."""
    ts, y0, options = _prepare(y0, t, rtol, atol, mxstep, hmax)
    return int(_staged(func, options).solve(y0, ts, args)[1])


def _prepare(y0, t, rtol, atol, mxstep, hmax):
    """The times and state as floats, and the options as the Python floats the cache keys on."""
    ts = tnp.asarray(t)
    if tnp.ndim(ts) != 1:
        raise ValueError(f"odeint: t must be a 1-D array of times, got shape {tnp.shape(ts)}")
    ts = ts if np.dtype(ts.dtype).kind == "f" else tnp.astype(ts, np.float64)
    y0 = _tree.tree_map(lambda leaf: leaf if np.dtype(tnp.asarray(leaf).dtype).kind in "fc"
                        else tnp.astype(leaf, np.float64), y0)
    options = []
    for name, value in (("rtol", rtol), ("atol", atol), ("mxstep", mxstep), ("hmax", hmax)):
        try:
            options.append(float(value))
        except TypeError as error:
            raise TypeError(f"odeint: {name} must be a number (the solver is staged for its value), got "
                            f"{type(value).__name__}") from error
    return ts, y0, tuple(options)
