"""The strict device double's ``cupyx.scipy``: the functions of SciPy that CuPy's ``cupyx.scipy`` has,
under the names it uses, behaving as CuPy's do where that matters to tapegrad (the GPU run of
2026-11-27 showed where). A function CuPy lacks is absent here too (``jv``), so that tapegrad's own
fallback or error is what a test sees.

``install(xp, module)`` registers ``devicearrayx`` (with ``allow_synchronize`` and
``DeviceSynchronized``), ``devicearrayx.scipy.special`` and ``.linalg`` in ``sys.modules``, and
``.sparse`` and ``.sparse.linalg`` (``tests/_device_sparse.py``, CuPy's sparse classes and solvers); tapegrad
finds them by its ``<module>x.scipy.<name>`` convention, as it finds ``cupyx.scipy``.

What is CuPy's own here (CuPy 14.2, read in its source), beyond the list of names:

- ``special.polygamma(n, x)`` ends in ``cupy.where(n == 0, digamma(x), ...)``, and ``cupy.where``
  calls ``condition.astype``: a Python number ``n`` (whose ``n == 0`` is a ``bool``) fails with
  ``AttributeError: 'bool' object has no attribute 'astype'`` (``cupyx/scipy/special/_polygamma.py``);
- ``linalg.expm`` is for one matrix: it starts with ``cupy.diag(a)``, which refuses any other number
  of dimensions with ``ValueError: Input must be 1- or 2-d.`` (``cupyx/scipy/linalg/_matfuncs.py``,
  ``cupy/_creation/matrix.py``);
- ``xp.linalg.solve`` (on the namespace itself, not ``cupyx``) does not broadcast the stacks of ``a``
  and ``b`` as NumPy 2 does: see :func:`_stacks_equal` (``cupy/linalg/_solve.py``);
- ``cupyx.allow_synchronize(allow)`` and ``cupyx.DeviceSynchronized``: see :func:`allow_synchronize`
  (``cupy/_core/syncdetect.py``).

Synchronisation detection, as CuPy 14 does it (read in ``cupy/_core/syncdetect.py``, ``core.pyx``,
``cuda/device.pyx``, ``_core/_routines_indexing.pyx`` and ``_routines_manipulation.pyx``). CuPy
declares a synchronisation in exactly two places: ``ndarray.get()`` of a non-empty array, before its
device-to-host copy, and ``cuda.Device.synchronize()``; ``Stream.synchronize()`` and
``Event.synchronize()`` are not checked. Everything else that reads device memory on the host goes
through ``get()``: ``cupy.asnumpy``, ``item()`` (after its size check), ``tolist()``, ``int()``,
``float()``, ``complex()``, ``bool()`` of a one-element array, ``repr``/``str``/``format`` and
pickling; and so do the operations whose result's shape depends on the data, which read a count with
``int(scan[-1])``: ``nonzero``, ``argwhere``, ``flatnonzero``, one-argument ``where``, ``compress``,
``unique``, indexing and assignment with a boolean mask, and ``repeat`` with a sequence or array of
repeats. The double declares a synchronisation at each of those (:func:`declare_synchronize`), counts
them (:data:`synchronizations`, the double's own, for reports), and raises ``DeviceSynchronized``
under ``allow_synchronize(False)``; the double has no ``cuda`` module, so no ``Device.synchronize``.
"""
from __future__ import annotations

import contextlib
import functools
import sys
import threading
import types
import warnings

import numpy as np

# names of cupyx.scipy.special (CuPy 14.2's __init__; a gpu test checks each against CuPy): those
# tapegrad calls, and the gamma family's other names there, psi (digamma) and multigammaln
_SPECIAL = """betaln xlog1py xlogy polygamma digamma psi multigammaln entr erf erfc erfcx erfinv gamma
gammaln i0 i0e i1 i1e log_ndtr ndtr ndtri expit logit j0 j1 y0 y1 k0 k1 k0e k1e zeta gammainc gammaincc
beta""".split()
_SCIPY_LINALG = ["solve_triangular", "expm"]


class DeviceSynchronized(RuntimeError):
    """CuPy's ``cupyx.DeviceSynchronized``: a synchronisation under ``allow_synchronize(False)``."""

    def __init__(self, message=None):
        super().__init__("Device synchronization was detected while disallowed." if message is None else message)


_thread_local = threading.local()  # CuPy's state is per thread too
synchronizations = 0  # every synchronisation declared, allowed or not (the double's own, for reports)


def _is_allowed() -> bool:
    return getattr(_thread_local, "allowed", True)


def declare_synchronize() -> None:
    """CuPy's ``syncdetect._declare_synchronize``: count one, and raise if this thread disallows them."""
    global synchronizations
    synchronizations += 1
    if not _is_allowed():
        raise DeviceSynchronized()


@contextlib.contextmanager
def allow_synchronize(allow):
    """CuPy's ``cupyx.allow_synchronize``: allow or disallow synchronisation in this thread until the
    block ends (the innermost block wins); like CuPy's, it warns that it is deprecated on each entry."""
    warnings.warn("cupyx.allow_synchronize will be removed in future releases as it is not possible to "
                  "reliably detect synchronizations.", stacklevel=3)
    old = _is_allowed()
    _thread_local.allowed = allow
    try:
        yield
    finally:
        _thread_local.allowed = old


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


def _one_matrix(expm):
    """CuPy's ``expm``: ``cupy.diag(a)`` comes first, and takes 1 or 2 dimensions only."""
    @functools.wraps(expm)
    def call(a):
        if a.ndim not in (1, 2):
            raise ValueError("Input must be 1- or 2-d.")
        return expm(a)
    return call


def _stacks_equal(solve, xp):
    """CuPy's ``linalg.solve``: ``a`` of shape ``(..., M, M)``; ``b`` of shape ``(M,)`` (solved
    against every matrix) or ``(..., M, K)`` with the *same* leading axes as ``a``, where NumPy 2
    broadcasts them. Its checks, in its order and with its messages."""
    @functools.wraps(solve)
    def call(a, b):
        for x in (a, b):
            if not isinstance(x, xp.ndarray):
                raise np.linalg.LinAlgError("cupy.linalg only supports cupy.ndarray")
        if a.ndim < 2:
            raise np.linalg.LinAlgError(f"{a.ndim}-dimensional array given. Array must be at least "
                                        "two-dimensional")
        if a.shape[-2] != a.shape[-1]:
            raise np.linalg.LinAlgError("Last 2 dimensions of the array must be square")
        if b.ndim == 0:
            raise ValueError("b must have at least one dimension")
        if b.ndim == 1 and a.shape[-1] != b.size:
            raise ValueError("a must have (..., M, M) shape and b must have (M,) for one-dimensional b")
        if b.ndim > 1 and a.shape[:-1] != b.shape[:-1]:
            raise ValueError("a must have (..., M, M) shape and b must have (..., M, K) for "
                             "multidimensional b")
        return solve(a, b)
    return call


def install(xp, module) -> None:
    """Register the double's ``cupyx.scipy`` for the namespace ``xp``, and give ``xp.linalg.solve``
    CuPy's shape rule; ``module(name, functions, source)`` wraps ``source``'s functions to run on
    device arrays."""
    import scipy.linalg
    import scipy.special
    prefix = f"{xp.__name__}x"
    scipy_ns = types.ModuleType(f"{prefix}.scipy")
    scipy_ns.special = module(f"{prefix}.scipy.special", _SPECIAL, scipy.special)
    scipy_ns.special.polygamma = _refuse_python_order(scipy_ns.special.polygamma)
    scipy_ns.linalg = module(f"{prefix}.scipy.linalg", _SCIPY_LINALG, scipy.linalg)
    scipy_ns.linalg.expm = _one_matrix(scipy_ns.linalg.expm)
    xp.linalg.solve = _stacks_equal(xp.linalg.solve, xp)
    top = types.ModuleType(prefix)
    top.scipy, top.allow_synchronize, top.DeviceSynchronized = scipy_ns, allow_synchronize, DeviceSynchronized
    sys.modules.update({prefix: top, f"{prefix}.scipy": scipy_ns,
                        f"{prefix}.scipy.special": scipy_ns.special, f"{prefix}.scipy.linalg": scipy_ns.linalg})
    import _device_sparse  # cupyx.scipy.sparse and .sparse.linalg, in a file of their own
    _device_sparse.install(xp, scipy_ns)
