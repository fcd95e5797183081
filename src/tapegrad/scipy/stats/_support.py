"""What the distributions of ``tapegrad.scipy.stats`` share: standardizing ``x`` with ``loc`` and
``scale``, the log of a scale that keeps a Python number weak, and the guard against the ``where``
trap.

The trap: ``tnp.where(inside, f(x), -inf)`` differentiates ``f`` at every ``x``, the unselected ones
too (their cotangent is 0, and ``0 * inf = nan``). So every function evaluates its formula at
``guard(inside, x, safe)``, a point of the support wherever ``x`` is outside it, and only then picks
the SciPy value (``-inf`` log density, 0 density, 0 or 1 probability) outside.
"""
from __future__ import annotations

import functools
import math

import tapegrad.numpy as tnp
from tapegrad._backend import namespace_of
from tapegrad.numpy._elementwise import stop_gradient

NEG_INF = -math.inf
LOG_2 = math.log(2.0)
LOG_PI = math.log(math.pi)
LOG_2PI = math.log(2.0 * math.pi)


def promoted(fn):
    """``fn`` with its Python-number arguments made arrays of the float dtype all its arguments give
    together under NumPy 2's rules (a Python number is weak: float32 data with ``loc=0.5`` stays
    float32, and so does every ``gammaln`` of a shape parameter), on the arrays' device. Arrays pass
    unchanged."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        values = [v for v in (*args, *kwargs.values()) if not isinstance(v, (list, tuple))]
        dtype = tnp.result_type(*values, 1.0)
        xp = namespace_of(*values)

        def cast(v):
            return xp.asarray(v, dtype=dtype) if isinstance(v, (bool, int, float)) else v
        return fn(*map(cast, args), **{k: cast(v) for k, v in kwargs.items()})
    return wrapper


def host_only(what, *arrays):
    """Raise ``NotImplementedError`` for ``what`` of device arrays: it runs SciPy, on the host, and
    tapegrad never copies between devices behind the user's back."""
    xp = namespace_of(*arrays)
    if xp.__name__ != "numpy":
        raise NotImplementedError(f"{what} of a {xp.__name__} array: only NumPy arrays are supported (SciPy "
                                  "computes it on the host); copy the data explicitly (x.get()) first")


def log(a):
    """``log(a)``; a Python number stays a Python number, which NumPy 2 treats as weak (float32
    arguments elsewhere keep a float32 result)."""
    return math.log(a) if isinstance(a, (int, float)) else tnp.log(a)


def standardize(x, loc, scale):
    """``(x - loc) / scale``."""
    return (x - loc) / scale


def guard(inside, x, safe):
    """``x`` where ``inside``, else ``safe`` (a point where the formula and its derivatives are
    finite): the operand of a formula whose value ``tnp.where`` discards outside."""
    return tnp.where(inside, x, safe)


def constant(cond, if_true, if_false, like):
    """``if_true`` where ``cond`` holds, else ``if_false`` (two Python numbers), in ``like``'s dtype:
    ``tnp.where`` of two Python numbers alone would be float64."""
    return tnp.where(cond, tnp.full_like(like, if_true), if_false)


def log1mexp(a):
    """``log(1 - exp(-a))`` for ``a >= 0``, accurate at both ends (Maechler 2012, "Accurately
    computing log(1 - exp(-|a|))"): ``log(-expm1(-a))`` below ``log 2``, ``log1p(-exp(-a))`` above."""
    return tnp.where(a < LOG_2, tnp.log(-tnp.expm1(-a)), tnp.log1p(-tnp.exp(-a)))


def log_probability(p):
    """``log(p)`` for a probability ``p``: ``-inf`` where ``p == 0``, with a zero (not NaN)
    derivative there and no divide-by-zero warning."""
    positive = p > 0
    return tnp.where(positive, tnp.log(guard(positive, p, 1.0)), NEG_INF)


def is_integer(k):
    """``k`` holds a whole number (the support test of the discrete distributions)."""
    return tnp.floor(k) == k


def lattice(k, loc, low, high=None):
    """``(k - loc, inside)``, ``k - loc`` replaced by ``low`` outside: ``inside`` says ``k - loc`` is a
    whole number in ``[low, high]`` (no upper end for ``high=None``), the support of a discrete
    distribution shifted by ``loc``. ``k - loc`` carries no derivative: a pmf is a function of whole
    numbers, and the continuous extension of its formula (through ``gammaln``) is not a derivative
    anyone asked for."""
    k = stop_gradient(k - loc)
    inside = is_integer(k) & (k >= low)
    if high is not None:
        inside = inside & (k <= high)
    return guard(inside, k, low), inside
