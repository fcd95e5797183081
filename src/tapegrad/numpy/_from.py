"""Arrays made from other things: a function of the indices (``fromfunction``), a Python function
made elementwise (``frompyfunc``), another library's array (``from_dlpack``)."""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from tapegrad._array_type import Array
from tapegrad._core import Tracer
from tapegrad._typing import ArrayLike
from tapegrad.numpy import _shape


def fromfunction(function: Callable[..., Any], shape: Sequence[int], *, dtype: Any = float, **kwargs: Any) -> Array:
    """``function(*indices)``, where ``indices`` are the coordinate arrays of ``shape`` (of ``dtype``),
    as ``numpy.fromfunction``: ``function`` is called once, on whole arrays, and may use
    ``tapegrad.numpy`` (its result is differentiable in whatever it closes over)."""
    return function(*np.indices(tuple(int(n) for n in shape), dtype=dtype), **kwargs)


class _PyFunc:
    """A Python function of scalars made elementwise: broadcast, flatten, ``vmap``, reshape."""

    def __init__(self, func, nin: int, nout: int, identity):
        self.func, self.nin, self.nout, self.identity = func, nin, nout, identity
        self.__name__ = getattr(func, "__name__", "pyfunc")

    def __call__(self, *args):
        if len(args) != self.nin:
            raise TypeError(f"{self.__name__}: takes {self.nin} arguments (nin), got {len(args)}")
        args = _shape.broadcast_arrays(*args)
        shape = tuple(args[0].shape) if args else ()
        from tapegrad._vmap_api import vmap  # on first use: it imports optree (tapegrad._tree)
        outs = vmap(self.func)(*[_shape.ravel(a) for a in args])
        if self.nout == 1:
            return _shape.reshape(outs, shape)
        return tuple(_shape.reshape(o, shape) for o in outs)


def frompyfunc(func: Callable[..., Any], /, nin: int, nout: int, *, identity: Any = None) -> Callable[..., Any]:
    """``func`` (a function of ``nin`` scalars returning ``nout`` of them) as an elementwise function
    with broadcasting, as ``numpy.frompyfunc`` and JAX's: the arguments are broadcast together and
    ``func`` is ``vmap``-ped over their elements, so it must be written with traceable operations, and
    the results are differentiable. Unlike NumPy's it returns arrays of the computed dtype (not
    ``object``), and has no ``reduce``/``accumulate`` methods.

    Raises:
        TypeError: the call passes other than ``nin`` arguments.
    """
    return _PyFunc(func, int(nin), int(nout), identity)


def from_dlpack(x: ArrayLike, /, *, device: Any = None, copy: bool | None = None) -> Array:
    """An array sharing the memory of ``x`` (any object with ``__dlpack__``: a PyTorch tensor, a CuPy
    array), as ``numpy.from_dlpack``; a traced value is already tapegrad's and is returned as it is."""
    if isinstance(x, Tracer):
        return x
    return np.from_dlpack(x, device=device, copy=copy)
