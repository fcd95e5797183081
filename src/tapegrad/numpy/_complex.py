"""Complex parts: ``real``, ``imag``, ``conj`` and ``angle``, differentiable under JAX's convention.

These functions are not holomorphic, so their rules are written as JAX writes them: the jvp is the
R-linear map of the tangent (``real(t)``, ``imag(t)``, ``conj(t)``), and the vjp is its transpose
under the bilinear pairing ``<a, b> = Re(sum(a * b))``:

- ``real``: ``t -> Re(t)``, transposed ``ct -> ct + 0j``;
- ``imag``: ``t -> Im(t)``, transposed ``ct -> -1j * ct``;
- ``conj``: ``t -> conj(t)``, transposed ``ct -> conj(ct)``.

On real inputs ``real`` and ``conj`` return their argument and ``imag`` returns constant zeros, as
NumPy does; no primitive is recorded.
"""
from __future__ import annotations

import numpy as np

from tapegrad._array_type import Array
from tapegrad._backend import namespace_of
from tapegrad._core import bind
from tapegrad._structural import astype
from tapegrad._typing import ArrayLike
from tapegrad.extend import def_dependency, defbatch_elementwise, deflinear, defvjp, primitive
from tapegrad.numpy._creation import as_operand, zeros_like


def is_complex(x) -> bool:
    """Whether ``x`` (array, tracer or Python scalar) has a complex dtype."""
    dtype = getattr(x, "dtype", None)
    return isinstance(x, complex) if dtype is None else np.dtype(dtype).kind == "c"

real_p = primitive("real", lambda x: namespace_of(x).real(x))
defvjp(real_p, lambda ct, ans, x: astype(ct, x.dtype))
deflinear(real_p)

imag_p = primitive("imag", lambda x: namespace_of(x).imag(x))
defvjp(imag_p, lambda ct, ans, x: astype(ct, x.dtype) * -1j)
deflinear(imag_p)

conj_p = primitive("conjugate", lambda x: namespace_of(x).conjugate(x))
defvjp(conj_p, lambda ct, ans, x: conj(ct))
deflinear(conj_p)
defbatch_elementwise(real_p, imag_p, conj_p)
def_dependency(real_p, "elementwise", imag_p, conj_p)


def real(val: ArrayLike) -> Array:
    """The real part of ``val``, as ``numpy.real``: a real array of the matching precision
    (complex64 -> float32); ``val`` itself when it is real.

    Derivative (JAX's convention): jvp ``Re(t)``; vjp ``ct`` as a complex cotangent.
    """
    val = as_operand(val)
    return bind(real_p, val) if is_complex(val) else val


def imag(val: ArrayLike) -> Array:
    """The imaginary part of ``val``, as ``numpy.imag``; constant zeros of ``val``'s shape and
    dtype when it is real.

    Derivative (JAX's convention): jvp ``Im(t)``; vjp ``-1j * ct``.
    """
    val = as_operand(val)
    return bind(imag_p, val) if is_complex(val) else zeros_like(val)


def conj(x: ArrayLike) -> Array:
    """The complex conjugate, elementwise, as ``numpy.conj``; ``x`` itself when it is real.

    Derivative (JAX's convention): jvp ``conj(t)``; vjp ``conj(ct)``.
    """
    x = as_operand(x)
    return bind(conj_p, x) if is_complex(x) else x


conjugate = conj
