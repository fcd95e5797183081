"""Special functions with complex values: the Faddeeva function ``wofz`` and the spherical harmonics
``sph_harm_y``.

Both return the complex dtype of their arguments' precision (complex64 for float32/complex64, as JAX;
SciPy computes in double precision, and the value is rounded). Derivatives use JAX's convention for
complex values (no conjugation: ``vjp(ct) = ct * f'(z)``; a real argument gets the real part):

    wofz'(z) = -2 z wofz(z) + 2i / sqrt(pi)                                 (DLMF 7.10)
    d/dphi Y_n^m = i m Y_n^m
    d/dtheta Y_n^m = m cot(theta) Y_n^m + sqrt((n - m)(n + m + 1)) e^(-i phi) Y_n^(m+1)

the last with SciPy's normalisation and Condon-Shortley phase (``Y_n^(n+1) = 0``).
"""
from __future__ import annotations

from typing import Any

import numpy as np

import tapegrad.numpy as tnp
from tapegrad._backend import namespace_of
from tapegrad._core import bind
from tapegrad._typing import Array, ArrayLike
from tapegrad.scipy.special._impl import SQRT_PI, special_function
from tapegrad.scipy.special._partials import elementwise


def _complex_impl(name, real_operands):
    """``scipy.special.<name>`` in the complex dtype of the precision of ``real_operands``."""
    def impl(*operands):
        xp = namespace_of(*operands)
        dtype = xp.result_type(*[operands[i] for i in real_operands], np.complex64)
        return special_function(xp, name)(*operands).astype(dtype, copy=False)
    impl.__name__ = f"{name}_impl"
    return impl


wofz_p = elementwise("wofz", [lambda z, ans: -2.0 * z * ans + 2j / SQRT_PI], impl=_complex_impl("wofz", (0,)))


def _real_like(value, ans):
    # integer orders enter the rules as reals of the result's precision (no upcast of float32)
    return tnp.asarray(value, dtype=tnp.real(ans).dtype)


def _sph_dtheta(n, m, theta, phi, ans):
    n_, m_ = _real_like(n, ans), _real_like(m, ans)
    # Y_n^(m+1) is 0 beyond m = n; clamping keeps the next order's coefficient real there (0, not nan)
    raising = tnp.sqrt(tnp.maximum((n_ - m_) * (n_ + m_ + 1.0), 0.0)) * tnp.exp(-1j * phi)
    return m_ / tnp.tan(theta) * ans + raising * sph_harm_y(n, m + 1, theta, phi)


sph_harm_y_p = elementwise(
    "sph_harm_y",
    [None, None, _sph_dtheta, lambda n, m, theta, phi, ans: 1j * _real_like(m, ans) * ans],
    impl=_complex_impl("sph_harm_y", (2, 3)),
)


def wofz(z: ArrayLike) -> Array:
    """The Faddeeva function ``w(z) = exp(-z^2) erfc(-i z)``, as ``scipy.special.wofz``.

    Args:
        z: real or complex; the result is complex (complex64 for float32/complex64 input).

    Derivative ``-2 z w(z) + 2i/sqrt(pi)`` (holomorphic; JAX's convention for complex derivatives).
    """
    return bind(wofz_p, z)


def sph_harm_y(n: int, m: Any, theta: ArrayLike, phi: ArrayLike, diff_n: int = 0, n_max: int | None = None) -> Array:
    """The spherical harmonic ``Y_n^m(theta, phi)`` of degree ``n`` and order ``m``, with ``theta`` the
    polar and ``phi`` the azimuthal angle, as ``scipy.special.sph_harm_y`` (SciPy >= 1.15, orthonormal
    with the Condon-Shortley phase), broadcast.

    Args:
        n, m: integer degree and order, ``|m| <= n`` (0 beyond); not differentiable.
        theta, phi: real angles; the result is complex (complex64 for float32 angles).
        diff_n: must be 0 (derivatives come from ``grad``/``jvp`` instead of SciPy's ``diff_n``).
        n_max: accepted for JAX's signature; ignored (each element is computed for its own ``n``).

    Derivatives: ``i m Y`` in ``phi``; ``m cot(theta) Y + sqrt((n-m)(n+m+1)) e^(-i phi) Y_n^(m+1)`` in
    ``theta`` (infinite at the poles ``theta = 0, pi`` for ``m != 0``, where the function is not smooth
    in these coordinates).

    Raises:
        NotImplementedError: ``diff_n`` is not 0.
    """
    if diff_n not in (0, None):
        raise NotImplementedError(f"sph_harm_y: diff_n={diff_n!r} is not supported; take derivatives "
                                  "with tg.grad/tg.jvp in theta and phi instead (diff_n=0)")
    return bind(sph_harm_y_p, n, m, theta, phi)
