"""Results the caller owns: every array a transform hands back is a writable buffer of its own.

A backward pass produces views freely: the gradient of ``sum`` is a broadcast of the cotangent (a
read-only, zero-stride view), two inputs of an ``add`` receive the same cotangent object, and the vjp
of the identity returns the cotangent it was given. Returned as they are, ``g *= 0.5`` would fail, or
scale another gradient too, or write into the caller's own array. PyTorch and autograd hand back
distinct buffers; so does tapegrad, copying only where a result is not already its own.
"""
from __future__ import annotations

import numpy as np

from tapegrad._backend import namespace_of
from tapegrad._core import Tracer

_SCALARS = (bool, int, float, complex)


def owned(results, caller=()) -> list:
    """``results`` (a list of leaves), each an array no one else holds: a NumPy scalar becomes a 0-d
    array, and an array that is a view, read-only, repeated in ``results``, or one of the ``caller``'s
    own arrays (inputs, cotangents, constants) is copied. Python scalars and tracers (results inside
    an outer transform, which are not arrays at rest) pass through."""
    seen = set(map(id, caller))
    out = []
    for x in results:
        kind = type(x)
        if kind is np.ndarray:  # the common case, decided without the generic attribute probes
            if x.base is not None or id(x) in seen or not x.flags.writeable:
                x = x.copy(order="K")
        elif isinstance(x, np.generic):
            x = np.asarray(x)
        elif kind not in _SCALARS and hasattr(x, "shape") and not isinstance(x, Tracer) and _shared(x, seen):
            x = namespace_of(x).array(x, copy=True)
        seen.add(id(x))
        out.append(x)
    return out


def _shared(x, seen) -> bool:
    """For another backend's array (CuPy): a view (``base``), read-only where it has the flag, or seen."""
    if id(x) in seen or getattr(x, "base", None) is not None:
        return True
    flags = getattr(x, "flags", None)
    return flags is not None and not getattr(flags, "writeable", True)
