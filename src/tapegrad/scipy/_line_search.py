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

Two differences from JAX, both SciPy's behaviour: the zoom interval's width is taken in absolute value
(JAX compares the signed ``a_hi - a_lo`` with its threshold, so a zoom whose low end lies to the right
fails at once), and a non-finite ``phi(a)`` counts as failing sufficient decrease (the step went too far:
it is bisected back instead of doubled).
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

import tapegrad.numpy as tnp

BRACKET, ZOOM = 0, 1
ZOOM_MAXITER = 30  # JAX's bound on the zoom's trials (SciPy's is 10); a zoom past it fails the search
_CUBIC_MARGIN, _QUAD_MARGIN = 0.2, 0.1  # an interpolated trial this close to an end is replaced (SciPy's delta1, 2)


class LineSearch(NamedTuple):
    """The search along ``x + a p``: ``phi(a) = f(x + a p)``, ``dphi(a) = grad f(x + a p) . p``."""
    phase: object  # BRACKET or ZOOM (int)
    i: object  # bracketing trials made (int)
    j: object  # zoom trials made (int)
    phi0: object  # phi(0)
    dphi0: object  # phi'(0) < 0
    start: object  # the first trial step
    a_prev: object  # bracketing: the last trial (0 at first), its phi and dphi
    phi_prev: object
    dphi_prev: object
    a_lo: object  # zoom: the end with the lower phi that satisfies sufficient decrease
    phi_lo: object
    dphi_lo: object
    a_hi: object  # zoom: the other end
    phi_hi: object
    dphi_hi: object
    a_rec: object  # zoom: the end replaced last, the cubic's third point
    phi_rec: object
    done: object  # a step satisfying the strong Wolfe conditions was found: a_star, phi_star, g_star
    failed: object
    a_star: object
    phi_star: object
    g_star: object


def start(phi0, dphi0, g0, first_step) -> LineSearch:
    """A search from ``a = 0`` (``phi0``, ``dphi0``, the gradient ``g0`` there) whose first trial is
    ``first_step``; ``p`` must be a descent direction (``dphi0 < 0``), else the search has failed."""
    zero = tnp.zeros_like(phi0)
    count = tnp.asarray(0)
    return LineSearch(phase=tnp.asarray(BRACKET), i=count, j=count, phi0=phi0, dphi0=dphi0, start=first_step,
                      a_prev=zero, phi_prev=phi0, dphi_prev=dphi0, a_lo=zero, phi_lo=phi0, dphi_lo=dphi0,
                      a_hi=zero, phi_hi=phi0, dphi_hi=dphi0, a_rec=zero, phi_rec=phi0,
                      done=tnp.asarray(False), failed=~(dphi0 < 0), a_star=zero, phi_star=phi0, g_star=g0)


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
    bracket's width of an end, else the quadratic's unless within 10 %, else the midpoint."""
    a, b = tnp.minimum(ls.a_lo, ls.a_hi), tnp.maximum(ls.a_lo, ls.a_hi)
    width = b - a
    cubic = _cubic_min(ls.a_lo, ls.phi_lo, ls.dphi_lo, ls.a_hi, ls.phi_hi, ls.a_rec, ls.phi_rec)
    use_cubic = (ls.j > 0) & (cubic > a + _CUBIC_MARGIN * width) & (cubic < b - _CUBIC_MARGIN * width)
    quad = _quad_min(ls.a_lo, ls.phi_lo, ls.dphi_lo, ls.a_hi, ls.phi_hi)
    use_quad = (quad > a + _QUAD_MARGIN * width) & (quad < b - _QUAD_MARGIN * width)
    return tnp.where(use_cubic, cubic, tnp.where(use_quad, quad, 0.5 * (a + b)))


def trial(ls: LineSearch):
    """The step to evaluate next."""
    bracket = tnp.where(ls.i == 0, ls.start, 2.0 * ls.a_prev)
    return tnp.where(ls.phase == BRACKET, bracket, _zoom_trial(ls))


def _select(flag, new: dict, ls: LineSearch) -> LineSearch:
    return ls._replace(**{name: tnp.where(flag, value, getattr(ls, name)) for name, value in new.items()})


def update(ls: LineSearch, a, phi, dphi, g, *, c1: float, c2: float, maxiter: int) -> LineSearch:
    """The search after evaluating ``phi(a)``, ``dphi(a)`` and the gradient ``g`` at the trial ``a``."""
    too_far = ~tnp.isfinite(phi) | (phi > ls.phi0 + c1 * a * ls.dphi0)  # sufficient decrease fails
    curvature = tnp.abs(dphi) <= -c2 * ls.dphi0
    found = dict(done=True, a_star=a, phi_star=phi, g_star=g)
    bracketing = (ls.phase == BRACKET) & ~ls.done & ~ls.failed
    return _zoom_update(_bracket_update(ls, bracketing, a, phi, dphi, too_far, curvature, found, maxiter),
                        (ls.phase == ZOOM) & ~ls.done & ~ls.failed, a, phi, dphi, too_far, curvature, found)


def _bracket_update(ls, active, a, phi, dphi, too_far, curvature, found, maxiter):
    """Algorithm 3.5: zoom between the last trial and ``a`` when ``a`` went too far (or did not lower
    ``phi``), accept ``a`` when it meets the curvature condition, zoom between ``a`` and the last trial
    when the slope turned, else double the step."""
    zoom_ahead = active & (too_far | ((phi >= ls.phi_prev) & (ls.i > 0)))
    accept = active & ~zoom_ahead & curvature
    zoom_back = active & ~zoom_ahead & ~accept & (dphi >= 0)
    ahead = dict(phase=ZOOM, a_lo=ls.a_prev, phi_lo=ls.phi_prev, dphi_lo=ls.dphi_prev, a_hi=a, phi_hi=phi,
                 dphi_hi=dphi, a_rec=a, phi_rec=phi)
    back = dict(phase=ZOOM, a_lo=a, phi_lo=phi, dphi_lo=dphi, a_hi=ls.a_prev, phi_hi=ls.phi_prev,
                dphi_hi=ls.dphi_prev, a_rec=ls.a_prev, phi_rec=ls.phi_prev)
    ls = _select(zoom_ahead, ahead, _select(zoom_back, back, _select(accept, found, ls)))
    grow = active & ~zoom_ahead & ~accept & ~zoom_back
    i = ls.i + tnp.where(active, 1, 0)
    return _select(grow, dict(a_prev=a, phi_prev=phi, dphi_prev=dphi, failed=i >= maxiter), ls._replace(i=i))


def _zoom_update(ls, active, a, phi, dphi, too_far, curvature, found):
    """Algorithm 3.6: ``a`` becomes the high end when it went too far or did not lower ``phi``; it is
    accepted when it meets the curvature condition; else it becomes the low end (the old low end becoming
    the high one when the slope at ``a`` points back past it)."""
    to_hi = active & (too_far | (phi >= ls.phi_lo))
    accept = active & ~to_hi & curvature
    to_lo = active & ~to_hi & ~accept
    flip = to_lo & (dphi * (ls.a_hi - ls.a_lo) >= 0)
    ls = _select(to_hi, dict(a_hi=a, phi_hi=phi, dphi_hi=dphi, a_rec=ls.a_hi, phi_rec=ls.phi_hi), ls)
    ls = _select(flip, dict(a_hi=ls.a_lo, phi_hi=ls.phi_lo, dphi_hi=ls.dphi_lo, a_rec=ls.a_hi, phi_rec=ls.phi_hi),
                 _select(to_lo & ~flip, dict(a_rec=ls.a_lo, phi_rec=ls.phi_lo), ls))
    ls = _select(to_lo, dict(a_lo=a, phi_lo=phi, dphi_lo=dphi), _select(accept, found, ls))
    j = ls.j + tnp.where(active, 1, 0)
    # the interval shrunk to rounding (JAX's widths: 1e-10 in float64, 1e-5 below), or too many trials
    collapsed = tnp.abs(ls.a_hi - ls.a_lo) <= (1e-10 if np.dtype(ls.a_lo.dtype).itemsize >= 8 else 1e-5)
    return ls._replace(j=j, failed=ls.failed | (active & ~ls.done & (collapsed | (j >= ZOOM_MAXITER))))
