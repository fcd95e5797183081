"""``check_grads``: derivatives checked against central finite differences, in both modes, to any order.

The checks (HIPS autograd's ``check_vjp``/``check_jvp``, with JAX's conventions for complex values):
pick a random tangent ``v`` in input space and a random cotangent ``u`` in output space, and let
``d = (f(x + eps v) - f(x - eps v)) / 2 eps``. Forward mode: ``<u, jvp(v)>`` must match ``<u, d>``.
Reverse mode: ``<v, conj(vjp(conj(u)))>`` must match ``<d, u>``. Here ``<a, b> = Re(vdot(a, b))``;
for real values the conjugations vanish and this is the usual ``<vjp(u), v> = <u, J v>``.

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

# eps and tolerances by the lowest float precision among the inputs
_SETTINGS = {
    np.dtype(np.float16): dict(eps=3e-2, rtol=1e-1, atol=1e-1),
    np.dtype(np.float32): dict(eps=1e-3, rtol=1e-2, atol=1e-2),
    np.dtype(np.float64): dict(eps=1e-6, rtol=1e-5, atol=1e-6),
}
_MODES = ("fwd", "rev")


def check_grads(fn: Callable[..., Any], args: Any, order: int = 2, modes: Any = ("fwd", "rev"),
                eps: float | None = None, rtol: float | None = None, atol: float | None = None, seed: int = 0,
                name: str | None = None) -> None:
    """Check ``fn``'s derivatives at ``args`` against finite differences, up to ``order``.

    Args:
        fn: a function of the pytrees ``args`` (float or complex leaves) returning a pytree of arrays.
        args: a tuple of arguments (a single non-tuple argument is wrapped).
        order: how many times to differentiate (2: the rules' own derivatives are checked too).
        modes: any of ``"fwd"`` (jvp) and ``"rev"`` (vjp); each order recurses through every mode.
        eps, rtol, atol: finite-difference step and tolerances; by default chosen from the least
            precise float dtype among ``args`` (float32/complex64: 1e-3 and 1e-2; float64/complex128:
            1e-6, 1e-5, 1e-6).
        seed: for the random directions (complex leaves get complex directions).
        name: the function's name in failure messages (default ``fn.__name__``).

    Raises:
        AssertionError: a mismatch; the message names the route (e.g. ``"jvp of vjp of tanh"``), the
            analytic and the numeric values.
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
    settings = dict(_SETTINGS[_least_precise(args)])
    settings.update({k: v for k, v in dict(eps=eps, rtol=rtol, atol=atol).items() if v is not None})
    checker = _Checker(modes, np.random.default_rng(seed), **settings)
    checker.check(fn, args, order, name or getattr(fn, "__name__", "fn"))


_REAL_PART: dict[np.dtype, np.dtype] = {np.dtype(np.complex64): np.dtype(np.float32),
                                        np.dtype(np.complex128): np.dtype(np.float64)}


def _least_precise(args):
    dtypes = [np.dtype(leaf.dtype) for leaf in _tree.tree_leaves(args)
              if hasattr(leaf, "dtype") and np.dtype(leaf.dtype).kind in "fc"]
    reals = [_REAL_PART.get(d, d) for d in dtypes]
    return min(reals, key=lambda d: d.itemsize) if reals else np.dtype(np.float64)


def _random_like(tree, rng):
    """Random directions drawn on the host, then put where each leaf lives (CuPy arrays: the device)."""
    def draw(x):
        x = np.asarray(x) if isinstance(x, (float, complex)) else x
        kind, shape = np.dtype(x.dtype).kind, tuple(x.shape)
        if kind == "f":
            value = rng.standard_normal(shape).astype(x.dtype)
        elif kind == "c":
            value = (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(x.dtype)
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
        out = vjp(fn, *args)[0]  # evaluated under a trace, so what exists only on tracers works too
        v, u = _random_like(args, self.rng), _random_like(out, self.rng)
        numeric = self._directional(fn, args, v)
        expected = _inner(u, numeric)
        noise = self._rounding_noise(out, u)
        if "fwd" in self.modes:
            self._compare("jvp of " + route, _inner(u, jvp(fn, args, v)[1]), expected, noise)
            if order > 1:
                n = len(args)
                self.check(lambda *xv: jvp(fn, xv[:n], xv[n:])[1], args + v, order - 1, "jvp of " + route)
        if "rev" in self.modes:
            got = _inner(v, _conj(vjp(fn, *args)[1](_conj(u))))
            self._compare("vjp of " + route, got, _inner(numeric, u), noise)
            if order > 1:
                n = len(args)
                self.check(lambda *xu: vjp(fn, *xu[:n])[1](xu[n]), args + (u,), order - 1, "vjp of " + route)

    def _rounding_noise(self, out, u) -> float:
        """The error the rounding of ``fn``'s values puts into ``<u, finite difference>``: each value
        is off by about ``eps(dtype) |f|``, and the difference quotient divides that by the step, so
        a correct derivative of a function with large values (``sin(x) + 1e4`` in float32) is not
        reported wrong. Four times the estimate, for the two evaluations and their sum."""
        dtype_eps = float(np.finfo(_least_precise((out,))).eps)
        magnitude = _inner(_abs(u), _abs(out))
        return 4.0 * dtype_eps * magnitude / self.eps

    def _directional(self, fn, args, v):
        eps = self.eps
        hi, lo = vjp(fn, *_axpy(eps, v, args))[0], vjp(fn, *_axpy(-eps, v, args))[0]
        return _tree.tree_map(lambda h, low: (_wide(h) - _wide(low)) / (2 * eps), hi, lo)

    def _compare(self, route, got, expected, noise):
        if not abs(expected - got) <= self.atol + noise + self.rtol * max(abs(expected), abs(got)):
            raise AssertionError(
                f"check_grads failed for {route}: analytic {got!r}, finite differences give {expected!r} "
                f"(eps={self.eps}, rtol={self.rtol}, atol={self.atol}, rounding noise of the values "
                f"{noise:.3g})")
