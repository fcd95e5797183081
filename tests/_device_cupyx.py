"""The strict device double's ``cupyx.scipy``: the functions of SciPy that CuPy's ``cupyx.scipy`` has,
under the names it uses, behaving as CuPy's do where that matters to tapegrad (the GPU run of
2026-11-27 showed where). A function CuPy lacks is absent here too (``jv``), so that tapegrad's own
fallback or error is what a test sees.

``install(xp, module)`` registers ``devicearrayx.scipy.special`` and ``.linalg`` in ``sys.modules``;
tapegrad finds them by its ``<module>x.scipy.<name>`` convention, as it finds ``cupyx.scipy``.

What is CuPy's own here (CuPy 14.2, read in its source), beyond the list of names:

- ``special.polygamma(n, x)`` ends in ``cupy.where(n == 0, digamma(x), ...)``, and ``cupy.where``
  calls ``condition.astype``: a Python number ``n`` (whose ``n == 0`` is a ``bool``) fails with
  ``AttributeError: 'bool' object has no attribute 'astype'`` (``cupyx/scipy/special/_polygamma.py``).
"""
from __future__ import annotations

import functools
import sys
import types

# cupyx.scipy.special's names (CuPy 14.2's __init__) that tapegrad calls; psi and multigammaln are
# there too (psi is digamma under SciPy's other name)
_SPECIAL = """betaln xlog1py xlogy polygamma digamma psi multigammaln entr erf erfc erfcx erfinv gamma
gammaln i0 i0e i1 i1e log_ndtr ndtr ndtri expit logit j0 j1 y0 y1 k0 k1 k0e k1e zeta gammainc gammaincc
beta""".split()
_SCIPY_LINALG = ["solve_triangular", "expm"]


def _refuse_python_order(polygamma):
    """CuPy's ``polygamma``: the order must be an array (or a NumPy scalar), as its ``cupy.where``
    calls ``(n == 0).astype``; a Python number fails there, with CuPy's message."""
    @functools.wraps(polygamma)
    def call(n, x):
        condition = n == 0
        if not hasattr(condition, "astype"):
            raise AttributeError(f"'{type(condition).__name__}' object has no attribute 'astype'")
        return polygamma(n, x)
    return call


def install(xp, module) -> None:
    """Register the double's ``cupyx.scipy`` for the namespace ``xp``; ``module(name, functions,
    source)`` wraps ``source``'s functions to run on device arrays."""
    import scipy.linalg
    import scipy.special
    prefix = f"{xp.__name__}x"
    scipy_ns = types.ModuleType(f"{prefix}.scipy")
    scipy_ns.special = module(f"{prefix}.scipy.special", _SPECIAL, scipy.special)
    scipy_ns.special.polygamma = _refuse_python_order(scipy_ns.special.polygamma)
    scipy_ns.linalg = module(f"{prefix}.scipy.linalg", _SCIPY_LINALG, scipy.linalg)
    sys.modules.update({prefix: types.ModuleType(prefix), f"{prefix}.scipy": scipy_ns,
                        f"{prefix}.scipy.special": scipy_ns.special, f"{prefix}.scipy.linalg": scipy_ns.linalg})
