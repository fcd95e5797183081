"""The strong-Wolfe line search of :mod:`tapegrad.scipy._minimize_traced`, written as a state machine that
takes one trial step per call, so that the minimiser's single ``while_loop`` evaluates the objective
exactly once per trip.

It is Nocedal & Wright's Algorithm 3.5 (bracketing: the step doubles until it brackets a point that
satisfies the strong Wolfe conditions) and 3.6 (zoom: cubic, quadratic or bisection interpolation inside
the bracket), as in SciPy's ``scalar_search_wolfe2`` and JAX's ``jax.scipy.optimize.line_search``; the
conditions are the same: sufficient decrease ``phi(a) <= phi(0) + c1 a phi'(0)`` and curvature
``|phi'(a)| <= c2 |phi'(0)|``. Where JAX nests a loop per zoom inside a loop of bracketing steps, this is
one step function whose ``phase`` says which of the two it is in: under ``vmap`` every example spends each
trip on a useful evaluation, and the staged program holds the objective's value and gradient once.

The two phases share their state, which keeps the compiled loop small: ``lo`` is the best point so far
(bracketing: the last trial, ``0`` at first), ``hi`` the zoom's other end (bracketing: the next trial). A
trial that meets both conditions is not stored: :func:`update` says so, and the caller takes the step in
the same trip.

Two differences from JAX, both SciPy's behaviour: the zoom interval's width is taken in absolute value
(JAX compares the signed ``a_hi - a_lo`` with its threshold, so a zoom whose low end lies to the right
fails at once), and a non-finite ``phi(a)`` counts as failing sufficient decrease (the step went too far:
it is bisected back instead of doubled).
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

import tapegrad.numpy as tnp
from tapegrad._typing import Array

BRACKET, ZOOM = 0, 1
ZOOM_MAXITER = 30  # JAX's bound on the zoom's trials (SciPy's is 10); a zoom past it fails the search
_CUBIC_MARGIN, _QUAD_MARGIN = 0.2, 0.1  # an interpolated trial this close to an end is replaced (SciPy's delta1, 2)


class LineSearch(NamedTuple):
    """The search along ``x + a p``: ``phi(a) = f(x + a p)``, ``dphi(a) = grad f(x + a p) . p``."""
    phase: Array  # BRACKET or ZOOM (int)
    n: Array  # trials made in this phase (int)
    failed: Array  # no step can be found (a bool): the caller stops
    phi0: Array  # phi(0)
    dphi0: Array  # phi'(0), negative for a descent direction
    a_lo: Array  # bracketing: the last trial; zoom: the end with the lower phi (sufficient decrease holds)
    phi_lo: Array
    dphi_lo: Array
    a_hi: Array  # bracketing: the next trial; zoom: the other end
    phi_hi: Array
    dphi_hi: Array
    a_rec: Array  # zoom: the end replaced last, the cubic's third point
    phi_rec: Array


def start(phi0, dphi0, first_step) -> LineSearch:
    """A search from ``a = 0`` (``phi0``, ``dphi0``) whose first trial is ``first_step``; the direction
    must descend (``dphi0 < 0``), else the search has failed."""
    zero = tnp.zeros_like(phi0)
    return LineSearch(phase=tnp.asarray(BRACKET), n=tnp.asarray(0), failed=~(dphi0 < 0), phi0=phi0, dphi0=dphi0,
                      a_lo=zero, phi_lo=phi0, dphi_lo=dphi0, a_hi=first_step, phi_hi=phi0, dphi_hi=dphi0,
                      a_rec=zero, phi_rec=phi0)


def _cubic_min(a, fa, fpa, b, fb, c, fc):
    """The minimiser of the cubic through ``(a, fa)`` with slope ``fpa``, ``(b, fb)`` and ``(c, fc)``
    (SciPy's ``_cubicmin``); NaN where it has none (coincident points, no real minimum), which the
    interval check then rejects. Divisions are guarded, so that no trip warns."""
    db, dc = b - a, c - a
    denom = (db * dc) ** 2 * (db - dc)
    safe = tnp.where(denom == 0, 1.0, denom)
    rb, rc = fb - fa - fpa * db, fc - fa - fpa * dc
    A = (dc ** 2 * rb - db ** 2 * rc) / safe
    B = (-dc ** 3 * rb + db ** 3 * rc) / safe
    radical = B * B - 3.0 * A * fpa
    ok = (denom != 0) & (A != 0) & (radical >= 0)
    value = a + (-B + tnp.sqrt(tnp.where(ok, radical, 0.0))) / (3.0 * tnp.where(ok, A, 1.0))
    return tnp.where(ok, value, np.nan)


def _quad_min(a, fa, fpa, b, fb):
    """The minimiser of the quadratic through ``(a, fa)`` with slope ``fpa`` and ``(b, fb)``; NaN where
    the points coincide or the quadratic is flat."""
    db = b - a
    curvature = (fb - fa - fpa * db) / tnp.where(db == 0, 1.0, db ** 2)
    ok = (db != 0) & (curvature != 0)
    return tnp.where(ok, a - fpa / (2.0 * tnp.where(ok, curvature, 1.0)), np.nan)


def _zoom_trial(ls: LineSearch):
    """The zoom's next trial: the cubic's minimiser (from the second trial on) unless within 20 % of the
    interval's width of an end, else the quadratic's unless within 10 %, else the midpoint."""
    a, b = tnp.minimum(ls.a_lo, ls.a_hi), tnp.maximum(ls.a_lo, ls.a_hi)
    width = b - a
    cubic = _cubic_min(ls.a_lo, ls.phi_lo, ls.dphi_lo, ls.a_hi, ls.phi_hi, ls.a_rec, ls.phi_rec)
    use_cubic = (ls.n > 0) & (cubic > a + _CUBIC_MARGIN * width) & (cubic < b - _CUBIC_MARGIN * width)
    quad = _quad_min(ls.a_lo, ls.phi_lo, ls.dphi_lo, ls.a_hi, ls.phi_hi)
    use_quad = (quad > a + _QUAD_MARGIN * width) & (quad < b - _QUAD_MARGIN * width)
    return tnp.where(use_cubic, cubic, tnp.where(use_quad, quad, 0.5 * (a + b)))


def trial(ls: LineSearch):
    """The step to evaluate next."""
    return tnp.where(ls.phase == ZOOM, _zoom_trial(ls), ls.a_hi)


def update(ls: LineSearch, a, phi, dphi, *, c1: float, c2: float, maxiter: int) -> tuple[LineSearch, object]:
    """``(search, accepted)`` after evaluating ``phi(a)`` and ``dphi(a)`` at the trial ``a``: ``accepted``
    (a bool) where ``a`` meets the strong Wolfe conditions, the search's end.

    Both phases follow one rule (Algorithms 3.5 and 3.6): ``a`` becomes ``hi`` when it went too far
    (sufficient decrease fails, ``phi`` is not finite, or ``phi`` did not fall below ``lo``'s); it is
    accepted when it meets the curvature condition; else it becomes ``lo``, the old ``lo`` becoming ``hi``
    when the slope at ``a`` points back past it. Bracketing moves to the zoom when ``hi`` is set from a
    trial, and otherwise doubles the step (at most ``maxiter`` trials)."""
    zooming, live = ls.phase == ZOOM, ~ls.failed
    high = live & (~tnp.isfinite(phi) | (phi > ls.phi0 + c1 * a * ls.dphi0)
                   | ((phi >= ls.phi_lo) & (zooming | (ls.n > 0))))
    accepted = live & ~high & (tnp.abs(dphi) <= -c2 * ls.dphi0)
    low = live & ~high & ~accepted
    back = low & (dphi * (ls.a_hi - ls.a_lo) >= 0)  # bracketing: a_hi > a_lo, so it is dphi >= 0
    grow = low & ~back & ~zooming

    def pick(at_high, at_back, at_grow, old):
        return tnp.where(high, at_high, tnp.where(back, at_back, tnp.where(grow, at_grow, old)))
    enter = ~zooming & (high | back)
    n = tnp.where(enter, 0, ls.n + 1)
    new = ls._replace(
        phase=tnp.where(enter, ZOOM, ls.phase), n=n,
        a_lo=tnp.where(low, a, ls.a_lo), phi_lo=tnp.where(low, phi, ls.phi_lo),
        dphi_lo=tnp.where(low, dphi, ls.dphi_lo),
        a_hi=pick(a, ls.a_lo, 2.0 * a, ls.a_hi), phi_hi=pick(phi, ls.phi_lo, ls.phi_hi, ls.phi_hi),
        dphi_hi=pick(dphi, ls.dphi_lo, ls.dphi_hi, ls.dphi_hi),
        a_rec=tnp.where(high | back, ls.a_hi, tnp.where(low, ls.a_lo, ls.a_rec)),
        phi_rec=tnp.where(high | back, ls.phi_hi, tnp.where(low, ls.phi_lo, ls.phi_rec)))
    # the zoom's interval shrunk to rounding (JAX's widths: 1e-10 in float64, 1e-5 below), or too many trials
    collapsed = tnp.abs(new.a_hi - new.a_lo) <= (1e-10 if np.dtype(ls.a_lo.dtype).itemsize >= 8 else 1e-5)
    stuck = (grow & (n >= maxiter)) | (zooming & live & ~accepted & (collapsed | (n >= ZOOM_MAXITER)))
    return new._replace(failed=ls.failed | stuck), accepted
