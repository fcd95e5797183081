"""A reference for stacks of matrices built from a one-matrix routine: SciPy's linalg functions took one
matrix at a time before SciPy 1.16, so the tests loop over the stack themselves, on every SciPy version."""
import numpy as np


def per_matrix(fn, a, *others):
    """``fn(a[i], *others_i)`` over the leading axes of ``a`` (all but its last two), stacked.

    An array of ``others`` with as many axes as ``a`` is indexed alongside it; any other argument is
    passed whole to every call. ``fn`` may return an array or a tuple of arrays.
    """
    if a.ndim <= 2:
        return fn(a, *others)
    batch = a.shape[:-2]
    results = [fn(a[i], *[o[i] if np.ndim(o) == a.ndim else o for o in others]) for i in np.ndindex(*batch)]
    if isinstance(results[0], tuple):
        return tuple(np.stack(part).reshape(batch + part[0].shape) for part in zip(*results))
    return np.stack(results).reshape(batch + np.shape(results[0]))
