"""The quantile functions of the discrete distributions whose inverse has no closed form (``binom``,
``poisson``, ``nbinom``, ``betabinom``), as non-differentiable elementwise primitives on SciPy's
``ppf``: integer valued and piecewise constant in every argument, their derivative is zero. They work
under ``jit`` and ``vmap``; on device arrays they raise (SciPy runs on the host only).
"""
from __future__ import annotations

import numpy as np

from tapegrad._backend import scipy_module
from tapegrad.extend import bind, def_nondiff, defbatch_elementwise, primitive
from tapegrad.scipy.special._impl import float_dtype
from tapegrad.scipy.stats._support import host_only


def _impl_of(name):
    def impl(q, *params):
        host_only(f"{name}.ppf", q, *params)
        dtype = float_dtype(np, q, *params)
        return np.asarray(getattr(scipy_module(np, "stats"), name).ppf(q, *params), dtype=dtype)
    return impl


def _ppf_primitive(name):
    prim = primitive(f"scipy.stats.{name}.ppf", _impl_of(name))
    def_nondiff(prim)
    defbatch_elementwise(prim)
    return prim


PPF = {name: _ppf_primitive(name) for name in ("binom", "poisson", "nbinom", "betabinom")}


def discrete_ppf(name, q, *params):
    """SciPy's ``<name>.ppf(q, *params)`` (``loc`` 0): the smallest ``k`` with ``cdf(k) >= q``."""
    return bind(PPF[name], q, *params)
