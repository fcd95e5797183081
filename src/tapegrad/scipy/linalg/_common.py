"""What the modules of ``tapegrad.scipy.linalg`` share: SciPy's module for the operands' backend, and
the loop that runs a one-matrix SciPy routine over a stack."""
from __future__ import annotations

import numpy as np

from tapegrad._backend import namespace_of, scipy_module


def scipy_linalg(*arrays):
    """``scipy.linalg``, or ``cupyx.scipy.linalg`` for CuPy arrays."""
    return scipy_module(namespace_of(*arrays), "linalg")


def over_stack(fn, *arrays):
    """``fn`` of one matrix (or of matrices broadcast together) run over the leading (stack) axes of
    ``arrays``, its results stacked back: for SciPy routines that take one matrix at a time.
    ``fn`` returns an array or a tuple of arrays."""
    xp = namespace_of(*arrays)
    batch = tuple(np.broadcast_shapes(*[a.shape[:-2] for a in arrays]))
    if not batch:
        return fn(*arrays)
    arrays = [xp.broadcast_to(a, batch + a.shape[-2:]) for a in arrays]
    results = [fn(*[a[index] for a in arrays]) for index in np.ndindex(*batch)]
    if isinstance(results[0], tuple):
        return tuple(xp.stack(parts).reshape(batch + parts[0].shape) for parts in zip(*results))
    return xp.stack(results).reshape(batch + results[0].shape)
