"""``check_grads``: derivatives checked against central finite differences, to any order.

The check (HIPS autograd's ``check_vjp``): pick a random tangent ``v`` in input space and a random
cotangent ``u`` in output space; then ``<u, (f(x + eps v) - f(x - eps v)) / 2 eps>`` must match
``<vjp(u), v>``. For order ``k > 1`` the same check runs on the function ``(x, u) -> vjp(u)``, which
differentiates the derivative rules themselves ("vjp of vjp of sin").
"""
from __future__ import annotations

import numpy as np

from tapegrad import _tree
from tapegrad._api import vjp

# eps and tolerances by the lowest float precision among the inputs
_SETTINGS = {
    np.dtype(np.float16): dict(eps=3e-2, rtol=1e-1, atol=1e-1),
    np.dtype(np.float32): dict(eps=1e-3, rtol=1e-2, atol=1e-2),
    np.dtype(np.float64): dict(eps=1e-6, rtol=1e-5, atol=1e-6),
}


def check_grads(fn, args, order: int = 2, modes=("rev",), eps=None, rtol=None, atol=None, seed: int = 0,
                name: str | None = None) -> None:
    """Check ``fn``'s derivatives at ``args`` against finite differences, up to ``order``.

    Args:
        fn: a function of the pytrees ``args`` (float leaves) returning a pytree of arrays.
        args: a tuple of arguments (a single non-tuple argument is wrapped).
        order: how many times to differentiate (2: the vjp rules' own vjps are checked too).
        modes: ``("rev",)``; forward mode (``"fwd"``) arrives with ``jvp`` and raises
            ``NotImplementedError`` until then.
        eps, rtol, atol: finite-difference step and tolerances; by default chosen from the least
            precise float dtype among ``args`` (float32: 1e-3 and 1e-2; float64: 1e-6, 1e-5, 1e-6).
        seed: for the random directions.
        name: the function's name in failure messages (default ``fn.__name__``).

    Raises:
        AssertionError: a mismatch; the message names the route (e.g. ``"vjp of vjp of sin"``), the
            analytic and numeric values.
        NotImplementedError: a mode other than ``"rev"``.
    """
    if not isinstance(args, tuple):
        args = (args,)
    for mode in modes:
        if mode != "rev":
            raise NotImplementedError(f"check_grads: mode {mode!r} is not available; forward mode (jvp) "
                                      "is not implemented yet, use modes=('rev',)")
    settings = dict(_SETTINGS[_least_precise(args)])
    settings.update({k: v for k, v in dict(eps=eps, rtol=rtol, atol=atol).items() if v is not None})
    rng = np.random.default_rng(seed)
    route = name or getattr(fn, "__name__", "fn")
    _check_rev(fn, args, order, route, rng, **settings)


def _least_precise(args):
    dtypes = [np.dtype(leaf.dtype) for leaf in _tree.tree_leaves(args)
              if hasattr(leaf, "dtype") and np.dtype(leaf.dtype).kind == "f"]
    return min(dtypes, key=lambda d: d.itemsize) if dtypes else np.dtype(np.float64)


def _random_like(tree, rng):
    def draw(x):
        x = np.asarray(x) if isinstance(x, float) else x
        if np.dtype(x.dtype).kind != "f":
            return np.zeros_like(x)
        return rng.standard_normal(np.shape(x)).astype(x.dtype)
    return _tree.tree_map(draw, tree)


def _inner(a, b) -> float:
    return float(sum(np.vdot(np.asarray(x, np.float64), np.asarray(y, np.float64))
                     for x, y in zip(_tree.tree_leaves(a), _tree.tree_leaves(b))))


def _axpy(alpha, v, x):
    """``x + alpha * v`` leaf by leaf, keeping each leaf's dtype."""
    return _tree.tree_map(lambda vi, xi: np.asarray(xi + alpha * vi, dtype=np.result_type(xi)), v, x)


def _check_rev(fn, args, order, route, rng, eps, rtol, atol):
    out, vjp_fn = vjp(fn, *args)
    v = _random_like(args, rng)
    u = _random_like(out, rng)
    # evaluated under a trace, so what exists only on traced values (x.at[...]) works here too
    hi, lo = vjp(fn, *_axpy(eps, v, args))[0], vjp(fn, *_axpy(-eps, v, args))[0]
    numeric = _tree.tree_map(lambda h, l: (np.asarray(h, np.float64) - np.asarray(l, np.float64)) / (2 * eps), hi, lo)
    expected = _inner(u, numeric)
    got = _inner(vjp_fn(u), v)
    if not abs(expected - got) <= atol + rtol * max(abs(expected), abs(got)):
        raise AssertionError(f"check_grads failed for {'vjp of ' + route}: analytic <vjp(u), v> = {got!r}, "
                             f"finite differences give {expected!r} (eps={eps}, rtol={rtol}, atol={atol})")
    if order > 1:
        n = len(args)

        def vjp_of_fn(*args_and_ct):
            return vjp(fn, *args_and_ct[:n])[1](args_and_ct[n])
        _check_rev(vjp_of_fn, args + (u,), order - 1, "vjp of " + route, rng, eps, rtol, atol)
