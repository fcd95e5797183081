"""``tapegrad.scipy.special``: ``erf``, ``expit``, ``logit``, ``logsumexp``.

``erf`` runs on ``scipy.special.erf`` where SciPy is installed (``cupyx.scipy.special`` on CuPy) and
on ``math.erf`` elementwise otherwise, so the core needs only NumPy.
"""
from __future__ import annotations

import math

import numpy as np

from tapegrad._backend import namespace_of
from tapegrad._core import bind
from tapegrad.numpy import _elementwise as ew
from tapegrad.numpy import _reductions as red
from tapegrad.numpy._creation import as_operand
from tapegrad.numpy._rules import defvjp, primitive, unary_abstract_eval

_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)


def _erf_impl(x):
    xp = namespace_of(x)
    if xp is not np:
        import cupyx.scipy.special
        return cupyx.scipy.special.erf(x)
    try:
        from scipy.special import erf as scipy_erf
    except ImportError:
        x = np.asarray(x)
        return np.frompyfunc(math.erf, 1, 1)(x).astype(x.dtype if x.dtype.kind == "f" else np.float64)
    return scipy_erf(x)


erf_p = primitive("erf", _erf_impl, unary_abstract_eval)
defvjp(erf_p, lambda ct, ans, x: ct * (_TWO_OVER_SQRT_PI * ew.exp(-(x * x))))


def erf(x):
    """The error function ``2/sqrt(pi) * integral_0^x exp(-t**2) dt``, elementwise."""
    return bind(erf_p, x)


expit_p = primitive("expit", lambda x: namespace_of(x).exp(-namespace_of(x).logaddexp(0, -x)),
                    unary_abstract_eval)
defvjp(expit_p, lambda ct, ans, x: ct * (ans * (1.0 - ans)))


def expit(x):
    """The logistic sigmoid ``1 / (1 + exp(-x))``, computed as ``exp(-logaddexp(0, -x))`` so that it
    keeps full relative precision in both tails."""
    return bind(expit_p, x)


def logit(x):
    """``log(x / (1 - x))``, the inverse of :func:`expit`."""
    return ew.log(x) - ew.log1p(-x)


def logsumexp(a, axis=None, b=None, keepdims=False):
    """``log(sum(b * exp(a)))`` over ``axis``, shifted by the maximum for stability.

    The shift goes through ``stop_gradient``: the result does not depend on it, so its gradient is
    exactly ``softmax(a)`` (times ``b``).
    """
    a = as_operand(a)
    shift = red.amax(ew.stop_gradient(a), axis=axis, keepdims=True)
    shift = ew.where(ew.isfinite(shift), shift, 0.0)
    e = ew.exp(a - shift)
    if b is not None:
        e = e * b
    out = ew.log(red.sum(e, axis=axis, keepdims=True)) + shift
    if keepdims:
        return out
    from tapegrad.numpy._shape import squeeze
    return squeeze(out, axis) if axis is not None else squeeze(out)
