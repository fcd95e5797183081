"""Embedded explicit Runge-Kutta pairs as SciPy's ``solve_ivp`` runs them (``scipy/integrate/_ivp/rk.py``),
written in tapegrad operations so that a step traces, stages under ``jit`` and differentiates.

- :data:`TABLEAUS`: ``RK23`` (Bogacki-Shampine), ``RK45`` (Dormand-Prince) and ``DOP853`` (Hairer's
  8(5,3)), with SciPy's weights, error estimators and dense-output matrices;
- :func:`rk_step`: one step, its stages and its error norm (the RMS of ``error / scale`` with
  ``scale = atol + rtol * max(|y|, |y_new|)``; DOP853's blend of its 5th- and 3rd-order estimates);
- :func:`step_factor` and :func:`initial_step`: SciPy's step-size control (safety 0.9, growth at most
  10x, shrink at most 5x, no growth right after a rejection) and its starting step (Hairer, Norsett and
  Wanner, "Solving ODEs I", II.4);
- :func:`dense_rows` and :func:`dense_eval`: the interpolant of a step, as a few rows of coefficients
  and their evaluation at fractions ``x`` of the step.

States are 1-D float vectors; ``fun(t, y)`` returns one like ``y``. Nothing here loops over steps:
``_solve_ivp.py`` does, in a ``while_loop``.
"""
from __future__ import annotations

import functools
from typing import NamedTuple

import tapegrad.numpy as tnp
from tapegrad.scipy.integrate import _dop853

SAFETY, MIN_FACTOR, MAX_FACTOR = 0.9, 0.2, 10.0


class Tableau(NamedTuple):
    """An embedded explicit pair (Butcher's notation, SciPy's names).

    ``A[s]`` weighs stages ``0 .. s-1`` in stage ``s``; the last of the ``n_stages + 1`` stages is
    ``fun(t + h, y_new)`` (first-same-as-last). ``E`` weighs all of them in the error estimate (for
    DOP853, ``E5`` and ``E3``). ``P[i]`` weighs stage ``i`` in the dense output's coefficients of
    ``x, x**2, ...`` (RK23, RK45); DOP853 instead takes ``A_EXTRA``/``C_EXTRA`` stages and ``D``.
    """
    name: str
    order: int
    error_order: int
    n_stages: int
    C: tuple
    A: tuple
    B: tuple
    E: tuple = ()
    P: tuple = ()
    E3: tuple = ()
    E5: tuple = ()
    C_EXTRA: tuple = ()
    A_EXTRA: tuple = ()
    D: tuple = ()


RK23 = Tableau(
    "RK23", order=3, error_order=2, n_stages=3, C=(0.0, 1 / 2, 3 / 4), A=((), (1 / 2,), (0.0, 3 / 4)),
    B=(2 / 9, 1 / 3, 4 / 9), E=(5 / 72, -1 / 12, -1 / 9, 1 / 8),
    P=((1.0, -4 / 3, 5 / 9), (0.0, 1.0, -2 / 3), (0.0, 4 / 3, -8 / 9), (0.0, -1.0, 1.0)))

RK45 = Tableau(
    "RK45", order=5, error_order=4, n_stages=6, C=(0.0, 1 / 5, 3 / 10, 4 / 5, 8 / 9, 1.0),
    A=((), (1 / 5,), (3 / 40, 9 / 40), (44 / 45, -56 / 15, 32 / 9),
       (19372 / 6561, -25360 / 2187, 64448 / 6561, -212 / 729),
       (9017 / 3168, -355 / 33, 46732 / 5247, 49 / 176, -5103 / 18656)),
    B=(35 / 384, 0.0, 500 / 1113, 125 / 192, -2187 / 6784, 11 / 84),
    E=(-71 / 57600, 0.0, 71 / 16695, -71 / 1920, 17253 / 339200, -22 / 525, 1 / 40),
    P=((1.0, -8048581381 / 2820520608, 8663915743 / 2820520608, -12715105075 / 11282082432),
       (0.0, 0.0, 0.0, 0.0),
       (0.0, 131558114200 / 32700410799, -68118460800 / 10900136933, 87487479700 / 32700410799),
       (0.0, -1754552775 / 470086768, 14199869525 / 1410260304, -10690763975 / 1880347072),
       (0.0, 127303824393 / 49829197408, -318862633887 / 49829197408, 701980252875 / 199316789632),
       (0.0, -282668133 / 205662961, 2019193451 / 616988883, -1453857185 / 822651844),
       (0.0, 40617522 / 29380423, -110615467 / 29380423, 69997945 / 29380423)))

DOP853 = Tableau(
    "DOP853", order=8, error_order=7, n_stages=_dop853.N_STAGES, C=_dop853.C[:_dop853.N_STAGES],
    A=_dop853.A[:_dop853.N_STAGES], B=_dop853.B, E3=_dop853.E3, E5=_dop853.E5,
    C_EXTRA=_dop853.C[_dop853.N_STAGES + 1:], A_EXTRA=_dop853.A[_dop853.N_STAGES + 1:], D=_dop853.D)

TABLEAUS = {tableau.name: tableau for tableau in (RK23, RK45, DOP853)}


def _combine(weights, k):
    """``sum_i w_i k_i`` over the non-zero weights (``k`` a list of vectors)."""
    return functools.reduce(lambda acc, term: acc + term, [w * ki for w, ki in zip(weights, k) if w])


def rms(x):
    """SciPy's ``norm``: the root-mean-square of a vector's entries."""
    return tnp.sqrt(tnp.mean(x * x))


def rk_step(tableau: Tableau, fun, t, y, f, h, rtol, atol):
    """One step of ``h`` from ``(t, y)`` with ``f = fun(t, y)``: ``(y_new, f_new, k, error_norm)``,
    ``k`` the ``n_stages + 1`` stages (the last one ``f_new``)."""
    k = [f]
    for c, a in zip(tableau.C[1:], tableau.A[1:]):
        k.append(fun(t + c * h, y + h * _combine(a, k)))
    y_new = y + h * _combine(tableau.B, k)
    k.append(fun(t + h, y_new))
    scale = atol + rtol * tnp.maximum(tnp.abs(y), tnp.abs(y_new))
    return y_new, k[-1], k, _error_norm(tableau, k, h, scale)


def _error_norm(tableau, k, h, scale):
    if not tableau.E5:
        return rms(h * _combine(tableau.E, k) / scale)
    # DOP853: |h| ||e5||^2 / sqrt(n (||e5||^2 + 0.01 ||e3||^2)), 0 when both estimates vanish
    e5, e3 = _combine(tableau.E5, k) / scale, _combine(tableau.E3, k) / scale
    e5_2, e3_2 = tnp.sum(e5 * e5), tnp.sum(e3 * e3)
    denominator = e5_2 + 0.01 * e3_2
    safe = tnp.where(denominator == 0.0, 1.0, denominator)
    return tnp.where(denominator == 0.0, 0.0, tnp.abs(h) * e5_2 / tnp.sqrt(safe * tnp.size(scale)))


def step_factor(tableau: Tableau, error_norm, rejected):
    """The factor SciPy multiplies ``|h|`` by after a step with this error norm: on acceptance
    (``error_norm < 1``) ``min(10, 0.9 error_norm**(-1/(q+1)))`` (10 for a zero error, at most 1 right
    after a rejection), else ``max(0.2, 0.9 error_norm**(-1/(q+1)))``; ``q`` the error estimator's order."""
    exponent = -1.0 / (tableau.error_order + 1)
    zero = error_norm == 0.0
    # the power of a zero error is never taken: its derivative would be inf * 0
    scaled = SAFETY * tnp.where(zero, 1.0, error_norm) ** exponent
    grow = tnp.where(zero, MAX_FACTOR, tnp.minimum(MAX_FACTOR, scaled))
    grow = tnp.where(rejected, tnp.minimum(1.0, grow), grow)
    # SciPy's Python max(0.2, scaled) keeps 0.2 for a NaN error (a step that overflowed): so does this
    shrink = tnp.where(scaled > MIN_FACTOR, scaled, MIN_FACTOR)
    return tnp.where(error_norm < 1.0, grow, shrink)


def initial_step(fun, t0, y0, f0, t_bound, max_step, direction, error_order, rtol, atol):
    """SciPy's ``select_initial_step``: the starting ``|h|`` from the sizes of ``y0``, ``f0`` and a
    difference estimate of ``f``'s derivative, at most the interval and ``max_step``."""
    interval = tnp.abs(t_bound - t0)
    scale = atol + tnp.abs(y0) * rtol
    d0, d1 = rms(y0 / scale), rms(f0 / scale)
    h0 = tnp.where((d0 < 1e-5) | (d1 < 1e-5), 1e-6, 0.01 * d0 / tnp.where(d1 == 0.0, 1.0, d1))
    h0 = tnp.minimum(h0, interval)
    safe_h0 = tnp.where(h0 == 0.0, 1.0, h0)
    f1 = fun(t0 + safe_h0 * direction, y0 + safe_h0 * direction * f0)
    d2 = rms((f1 - f0) / scale) / safe_h0
    large = tnp.maximum(d1, d2)
    h1 = tnp.where((d1 <= 1e-15) & (d2 <= 1e-15), tnp.maximum(1e-6, h0 * 1e-3),
                   (0.01 / tnp.where(large == 0.0, 1.0, large)) ** (1.0 / (error_order + 1)))
    h = tnp.minimum(tnp.minimum(100.0 * h0, h1), tnp.minimum(interval, max_step))
    return tnp.where(interval == 0.0, 0.0, h)


def dense_rows(tableau: Tableau, fun, t, y, y_new, f_new, h, k):
    """The coefficients of the step's interpolant, a ``(m, n)`` array that :func:`dense_eval` reads:
    for RK23/RK45 ``h (K^T P)^T`` (the weights of ``x, x**2, ...``), for DOP853 SciPy's ``F`` (which
    needs three more evaluations of ``fun``)."""
    if not tableau.D:
        return tnp.stack([h * _combine([p[j] for p in tableau.P], k) for j in range(len(tableau.P[0]))])
    k = list(k)
    for c, a in zip(tableau.C_EXTRA, tableau.A_EXTRA):
        k.append(fun(t + c * h, y + h * _combine(a, k)))
    delta = y_new - y
    rows = [delta, h * k[0] - delta, 2.0 * delta - h * (f_new + k[0])]
    return tnp.stack(rows + [h * _combine(d, k) for d in tableau.D])


def dense_eval(tableau: Tableau, rows, y, x):
    """The interpolant of a step from ``y`` with coefficients ``rows`` (:func:`dense_rows`) at the
    fractions ``x`` of the step: ``x`` of shape ``s`` gives ``s + (n,)``."""
    x = tnp.expand_dims(x, -1)
    if not tableau.D:
        out, power = 0.0, 1.0
        for row in rows:
            power = power * x
            out = out + row * power
        return y + out
    # DOP853 (SciPy's Dop853DenseOutput): Horner's scheme alternating x and 1 - x, last row first
    out = 0.0
    for i, row in enumerate(reversed(list(rows))):
        out = (out + row) * (x if i % 2 == 0 else 1.0 - x)
    return y + out
