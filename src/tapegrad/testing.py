"""``check_grads``: derivatives checked against central finite differences, in both modes, to any order.

The checks (HIPS autograd's ``check_vjp``/``check_jvp``, with JAX's conventions for complex values): a
tangent ``v`` in input space and a cotangent ``u`` in output space, and ``d``, the derivative of ``f``
along ``v`` by finite differences. Forward mode: ``<w, jvp(v)>`` must match ``<w, d>``. Reverse mode:
``<v, conj(vjp(conj(u)))>`` must match ``<d, u>``. Here ``<a, b> = Re(vdot(a, b))``; for real values
the conjugations vanish and this is the usual ``<vjp(u), v> = <u, J v>``.

The directions are drawn so that these sums do not cancel: every entry of ``u`` and ``v`` has a size
between 1/2 and 1; in reverse mode ``v`` takes the signs (phases) of the analytic ``vjp(u)``, and in
forward mode the output weights ``w`` those of the analytic ``jvp(v)``. A rule off by 1% then moves its
projection by 1% of the projection's whole size, which the tolerance (see :func:`check_grads`) is
measured against.

For order ``k > 1`` the same checks run on the derivative itself: in forward mode on
``(x, v) -> jvp(f, x, v)``, in reverse mode on ``(x, u) -> vjp(u)``. So at order 2 with both modes
every route is checked: "jvp of jvp of f", "vjp of jvp of f", "jvp of vjp of f", "vjp of vjp of f"
(JAX's ``check_grads`` recursion).
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from tapegrad import _tree
from tapegrad._api import jvp, vjp
from tapegrad._backend import namespace_of

__all__ = ["check_grads"]

# the finite-difference step by the least precise float dtype among the inputs
_STEPS = {np.dtype(np.float16): 3e-2, np.dtype(np.float32): 1e-2, np.dtype(np.float64): 1e-6}
_MODES = ("fwd", "rev")
# the accuracy of a derivative through an iterative solver: a hundred times the tolerance they stop at by
# default, sqrt(eps(float64)) (SciPy's 1.49e-8, odeint's 1.4e-8); their global error is some times that
_SOLVERS = 100 * float(np.sqrt(np.finfo(np.float64).eps))


def check_grads(fn: Callable[..., Any], args: Any, order: int = 2, modes: Any = ("fwd", "rev"),
                eps: float | None = None, rtol: float | None = None, atol: float | None = None, seed: int = 0,
                name: str | None = None) -> None:
    """Check ``fn``'s derivatives at ``args`` against finite differences, up to ``order``.

    Each route (``"jvp of f"``, ``"vjp of jvp of f"``, ...) compares one number, a projection of the
    analytic derivative along random directions whose terms add up without cancelling (see the module
    notes), with the same projection of ``f``'s derivative estimated by the four-point central stencil
    ``(8 (f(x + h/2 v) - f(x - h/2 v)) - (f(x + h v) - f(x - h v))) / 6h``, ``h = eps``. Its truncation
    error is ``O(h^4)``; ``v`` is the direction the rounded points ``x +- s h v`` really differ along
    (so rounding the points costs nothing).

    The two may differ by ``atol + rtol * size + truncation + rounding``, where

    - ``size`` is the projection's size without cancellation, ``sum_i |w_i| |(J v)_i|``, the larger
      of the analytic and the numeric one (``rtol`` of it: the analytic side's own accuracy);
    - ``truncation = sum_i |w_i| |d_4 - d_2|_i``, with ``d_2`` the two-point quotient of step ``h/2``:
      the ``h^2`` term the four-point stencil cancelled, a bound on what is left of it;
    - ``rounding = 6 eps(dtype) sum_i |w_i| max |f_i| / h`` bounds the rounding of ``f``'s values:
      each off by up to ``2 eps |f|`` (four roundings: a few operations, a transcendental function's
      last bits), which the stencil's coefficients, whose sizes add up to ``3 / h``, turn into this.

    Where the two stencils (``h`` and ``h/2``) differ by more than rounding and a smooth function's
    ``h^2`` term (``truncation`` above both ``rounding`` and ``1e-3 size``), ``f`` is not smooth within
    the step (a kink, a jump, a singularity close by), and the stencil of a step 16 times smaller
    decides instead, once. Where the comparison still fails, ``f``'s values may be noisier than their
    size says (a sum that cancels, a derivative that is 0 computed from terms that are not), so the
    noise is measured instead of bounded: the projection of ``f`` at 17 points ``h/32`` apart around
    ``x``, a quartic fitted to them, and the noise ``sigma`` read off its residuals (12 degrees of
    freedom; Moré and Wild's ECnoise, in a least-squares form). The check then allows ``rounding``
    replaced by six standard deviations of the stencil's noise, ``sqrt(130) sigma / h``. A kink or a
    jump that the smaller stencil still reaches fails: move the point, or pass a smaller ``eps``.

    The step trades the stencil's ``O(h^4)`` truncation against rounding, ``eps |f| / h``. With
    float32's (``1e-2``) and ``rtol = sqrt(eps) = 3.5e-4``, a rule 1% off fails where ``f``'s values
    are up to about a hundred times its derivative (every unary op of the op tables does, at their
    points: ``tests/test_testing.py`` plants such errors). float64 (``1e-6``) resolves far smaller
    errors than its ``rtol``, ``1.5e-6``: a hundred times the tolerance iterative solvers stop at by
    default, ``sqrt(eps(float64)) = 1.5e-8`` (SciPy's, and ``odeint``'s), since a derivative through
    them (``odeint``'s adaptive steps, a root finder, a special function's series) is only about that
    accurate. Pass a smaller ``rtol`` to hold a derivative to more digits.

    Args:
        fn: a function of the pytrees ``args`` (float or complex leaves) returning a pytree of arrays.
        args: a tuple of arguments (a single non-tuple argument is wrapped).
        order: how many times to differentiate (2: the rules' own derivatives are checked too).
        modes: any of ``"fwd"`` (jvp) and ``"rev"`` (vjp); each order recurses through every mode.
        eps: the finite-difference step ``h``; by default from the least precise float dtype among
            ``args`` (float16 ``3e-2``, float32/complex64 ``1e-2``, float64/complex128 ``1e-6``); no
            point is farther than ``eps`` from ``args`` in any entry (the directions' are at most 1).
        rtol: the relative tolerance on the projection's size; by default ``sqrt(eps(dtype))`` of that
            dtype, and no less than ``100 sqrt(eps(float64))``, the solvers' accuracy (float16
            ``3.1e-2``, float32 ``3.5e-4``, float64 ``1.5e-6``).
        atol: an absolute tolerance added to the rest; by default 0.
        seed: for the random directions (complex leaves get complex directions).
        name: the function's name in failure messages (default ``fn.__name__``).

    Raises:
        AssertionError: a mismatch; the message names the route (e.g. ``"jvp of vjp of tanh"``), the
            analytic and the numeric values, and each part of the tolerance.
        ValueError: an unknown mode.

    Returns:
        None; the check passed for every route.
    """
    if not isinstance(args, tuple):
        args = (args,)
    modes = (modes,) if isinstance(modes, str) else tuple(modes)
    for mode in modes:
        if mode not in _MODES:
            raise ValueError(f"check_grads: unknown mode {mode!r}; use modes=('fwd', 'rev') or a subset")
    dtype = _least_precise(args)
    checker = _Checker(modes, np.random.default_rng(seed), eps=_STEPS[dtype] if eps is None else eps,
                       rtol=max(float(np.sqrt(np.finfo(dtype).eps)), _SOLVERS) if rtol is None else rtol,
                       atol=0.0 if atol is None else atol)
    checker.check(fn, args, order, name or getattr(fn, "__name__", "fn"))


_REAL_PART: dict[np.dtype, np.dtype] = {np.dtype(np.complex64): np.dtype(np.float32),
                                        np.dtype(np.complex128): np.dtype(np.float64)}


def _least_precise(args):
    dtypes = [np.dtype(leaf.dtype) for leaf in _tree.tree_leaves(args)
              if hasattr(leaf, "dtype") and np.dtype(leaf.dtype).kind in "fc"]
    reals = [_REAL_PART.get(d, d) for d in dtypes]
    return min(reals, key=lambda d: d.itemsize) if reals else np.dtype(np.float64)


def _random_like(tree, rng):
    """Random directions drawn on the host, then put where each leaf lives (CuPy arrays: the device):
    each entry of size between 1/2 and 1 (uniform) with a random sign, or a random phase for complex
    leaves, so that every entry moves by at least half the step and none by more than the step."""
    def draw(x):
        x = np.asarray(x) if isinstance(x, (float, complex)) else x
        kind, shape = np.dtype(x.dtype).kind, tuple(x.shape)
        size = rng.uniform(0.5, 1.0, shape)
        if kind == "f":
            value = (size * rng.choice([-1.0, 1.0], shape)).astype(x.dtype)
        elif kind == "c":
            value = (size * np.exp(2j * np.pi * rng.uniform(0.0, 1.0, shape))).astype(x.dtype)
        else:
            value = np.zeros(shape, x.dtype)
        return namespace_of(x).asarray(value)
    return _tree.tree_map(draw, tree)


def _wide(x):
    """``x`` in double precision, complex kept complex, on its own backend."""
    x = namespace_of(x).asarray(x)
    return x.astype(np.complex128 if x.dtype.kind == "c" else np.float64)


def _inner(a, b) -> float:
    """``Re(vdot(a, b))`` summed over the leaves of two pytrees of one structure (on the leaves'
    backend; only the scalar comes to the host)."""
    total = 0.0
    for x, y in zip(_tree.tree_leaves(a), _tree.tree_leaves(b)):
        x, y = _wide(x), _wide(y)
        total += float(namespace_of(x, y).vdot(x, y).real)
    return total


def _axpy(alpha, v, x):
    """``x + alpha * v`` leaf by leaf, keeping each leaf's dtype."""
    return _tree.tree_map(lambda vi, xi: namespace_of(vi, xi).asarray(xi + alpha * vi, dtype=np.result_type(xi)),
                          v, x)


def _abs(tree):
    return _tree.tree_map(lambda x: namespace_of(x).abs(_wide(x)), tree)


def _conj(tree):
    return _tree.tree_map(np.conj, tree)


class _Checker:
    def __init__(self, modes, rng, eps, rtol, atol):
        self.modes, self.rng = modes, rng
        self.eps, self.rtol, self.atol = eps, rtol, atol

    def check(self, fn, args, order, route):
        out, pullback = vjp(fn, *args)  # evaluated under a trace, so what exists only on tracers works too
        u = _random_like(out, self.rng)
        if "rev" in self.modes:
            # v takes the phases of the analytic cotangent, so that <v, vjp(u)> adds up without cancelling
            cotangent = _conj(pullback(_conj(u)))
            v = _aligned(args, cotangent, self.rng)
        else:
            v = _random_like(args, self.rng)
        stencil = _Stencil(fn, args, out, v, self.eps)
        n = len(args)
        if "fwd" in self.modes:
            tangent = jvp(fn, args, stencil.direction)[1]
            w = _aligned(out, tangent, self.rng)  # the output's weights take the analytic tangent's phases

            def forward(st):
                t = tangent if st is stencil else jvp(fn, args, st.direction)[1]
                return _inner(w, t), _inner(w, st.derivative), _inner(_abs(w), _abs(t))
            self._compare("jvp of " + route, forward, stencil, w)
            if order > 1:
                self.check(lambda *xv: jvp(fn, xv[:n], xv[n:])[1], args + tuple(stencil.direction), order - 1,
                           "jvp of " + route)
        if "rev" in self.modes:
            def reverse(st):
                return (_inner(st.direction, cotangent), _inner(st.derivative, u),
                        _inner(_abs(st.direction), _abs(cotangent)))
            self._compare("vjp of " + route, reverse, stencil, u)
            if order > 1:
                self.check(lambda *xu: vjp(fn, *xu[:n])[1](xu[n]), args + (u,), order - 1, "vjp of " + route)

    def _compare(self, route, project, stencil, weights):
        """The analytic projection against the numeric one (``project(stencil) -> (analytic, numeric,
        analytic size)``, on ``weights`` in output space), with the tolerance :func:`check_grads`
        describes; on the stencil 16 times smaller where this one is not smooth."""
        got, expected, size, parts = self._measure(project, stencil, weights)
        if parts["truncation"] > max(parts["rounding"], 1e-3 * size):
            # more than rounding or a smooth function's h^2 term makes the two stencils differ: a kink,
            # a jump or a singularity within the step; a step 16 times smaller decides
            stencil = stencil.refined()
            got, expected, size, parts = self._measure(project, stencil, weights)
        error = abs(expected - got)
        common = self.atol + self.rtol * size + parts["truncation"]
        if error <= common + parts["rounding"]:
            return
        noise = stencil.measured_noise(weights)
        if error <= common + noise:
            return
        raise AssertionError(
            f"check_grads failed for {route}: analytic {got!r}, finite differences give {expected!r}; "
            f"they differ by {error:.3g}, more than the tolerance of {common + max(parts['rounding'], noise):.3g}: "
            f"rtol={self.rtol:.3g} of the projection's size {size:.3g}, atol={self.atol:.3g}, truncation "
            f"{parts['truncation']:.3g}, and the larger of the bound on rounding {parts['rounding']:.3g} and the "
            f"measured noise {noise:.3g} (step {stencil.h:.3g}"
            + (f", refined from eps={self.eps} where the stencil was not smooth" if stencil.h != self.eps else "")
            + (": is fn smooth near the point?)" if stencil.h != self.eps or noise > 10 * parts["rounding"] else ")"))

    def _measure(self, project, stencil, weights):
        got, expected, size = project(stencil)
        size = max(size, _inner(_abs(weights), _abs(stencil.derivative)))
        rounding = 6.0 * stencil.unit * _inner(_abs(weights), stencil.magnitude) / stencil.h  # 2 eps |f| x 3/h
        return got, expected, size, {"rounding": rounding, "truncation": _inner(_abs(weights), stencil.truncation)}


class _Stencil:
    """``fn``'s derivative along ``v`` at ``args`` by the four-point central stencil (steps ``h`` and
    ``h / 2``), the direction the rounded points really stand along, and what its errors are bounded by."""

    def __init__(self, fn, args, out, v, h):
        self.fn, self.args, self.out, self.v, self.h = fn, args, out, v, h
        self._refined: _Stencil | None = None
        points = {s: _axpy(s * h, v, args) for s in (1.0, -1.0, 0.5, -0.5)}
        values = {s: vjp(fn, *x)[0] for s, x in points.items()}

        def quotient(tree, s):  # (tree[s] - tree[-s]) / 2 s h, leaf by leaf in double precision
            return _tree.tree_map(lambda a, b: (_wide(a) - _wide(b)) / (2 * s * h), tree[s], tree[-s])

        wide, narrow = quotient(values, 1.0), quotient(values, 0.5)
        # (4 narrow - wide) / 3 cancels the h^2 term of the two-point truncation error (Richardson),
        # leaving O(h^4). It is linear in the values, so it is the derivative along the same combination
        # of the directions the rounded points x +- s h v really differ along: that is the tangent the
        # analytic side gets (where x is not finite, nor are the points, and the drawn v stands)
        self.derivative = _tree.tree_map(lambda a, b: (4 * b - a) / 3, wide, narrow)
        self.direction = _tree.tree_map(
            lambda a, b, d: namespace_of(d).asarray(
                namespace_of(a).where(namespace_of(a).isfinite(a + b), (4 * b - a) / 3, _wide(d)),
                dtype=np.result_type(d)),
            quotient(points, 1.0), quotient(points, 0.5), v)
        # |four-point - narrow| is the h^2 term the combination cancelled: a bound on what is left of the
        # truncation error (and, where rounding dominates, one more sample of that noise)
        self.truncation = _tree.tree_map(lambda a, b: namespace_of(a).abs(a - b) / 3, wide, narrow)
        magnitude = _abs(out)
        for value in values.values():
            magnitude = _tree.tree_map(lambda m, y: namespace_of(m).maximum(m, namespace_of(y).abs(_wide(y))),
                                       magnitude, value)
        self.magnitude = magnitude  # max |f| over the points, per output element
        self.unit = float(np.finfo(_least_precise((args, out))).eps)

    def refined(self) -> _Stencil:
        """The stencil of a step 16 times smaller, along the same ``v`` (made once per point)."""
        if self._refined is None:
            self._refined = _Stencil(self.fn, self.args, self.out, self.v, self.h / 16)
        return self._refined

    def measured_noise(self, weights) -> float:
        """Six times the standard deviation that rounding noise in ``<weights, f>`` puts into the
        stencil's projection. The noise is read off 17 values of ``<weights, f(x + t v)>``, ``t`` from
        ``-h/4`` to ``h/4`` by ``h/32``: a quartic in ``t`` fits ``f`` there to far below rounding
        (``O((h/4)^5)``), so its residuals are the noise (12 degrees of freedom, Moré and Wild's
        ECnoise in a least-squares form). The stencil's coefficients (8, -8, -1, 1 over 6h) make its
        own noise ``sqrt(130) sigma / 6h``."""
        h, steps = self.h, np.arange(-8, 9)
        values = np.array([_inner(weights, self.out if i == 0 else vjp(self.fn, *_axpy(i * h / 32, self.v,
                                                                                         self.args))[0])
                           for i in steps])
        basis = np.vander(steps / 8.0, 5)
        residuals = values - basis @ np.linalg.lstsq(basis, values, rcond=None)[0]
        sigma = float(np.sqrt(residuals @ residuals / (len(steps) - basis.shape[1])))
        return float(np.sqrt(130.0)) * sigma / h


def _aligned(tree, like, rng):
    """Random entries of size between 1/2 and 1 with the phases of ``like`` (a pytree of ``tree``'s
    structure), so that ``<result, like>`` sums without cancellation; a random sign where ``like`` is 0."""
    def draw(x, y):
        r = _random_like(x, rng)
        xp = namespace_of(r)
        if np.dtype(r.dtype).kind not in "fc":
            return r
        y = _wide(y)
        size = xp.abs(y)
        phase = xp.where(size > 0, y / xp.where(size > 0, size, 1), r / xp.abs(r))
        return xp.asarray(xp.abs(r) * phase, dtype=r.dtype)
    return _tree.tree_map(draw, tree, like)
