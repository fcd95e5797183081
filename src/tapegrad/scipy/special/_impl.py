"""Where the special functions' values come from, and how a primitive gets its derivative rules.

Values run on ``scipy.special`` (NumPy arrays) or ``cupyx.scipy.special`` (CuPy arrays): SciPy is an
optional dependency, imported when a function first needs it. A few functions have a pure-Python
fallback from the ``math`` module (``erf``, ``erfc``, ``gammaln``, ``gamma``), so they work without
SciPy; the rest raise an ``ImportError`` that says ``pip install scipy``.

Derivatives are plain functions written in tapegrad operations (``derivative(x, ans)``), registered
as both the vjp and the jvp rule, so every derivative is differentiable again, in either mode.
"""
from __future__ import annotations

import math

import numpy as np

from tapegrad._backend import namespace_of, scipy_module
from tapegrad.extend import def_dependency, defbatch_elementwise, defjvp, defvjp, primitive, unary_abstract_eval
from tapegrad.numpy._shape import unbroadcast


def _module_for(xp, name: str):
    if xp is not np:
        return scipy_module(xp, "special")
    try:
        return scipy_module(np, "special")
    except ImportError:
        raise ImportError(f"tapegrad.scipy.special.{name} needs SciPy, which is not installed: "
                          "pip install scipy (or pip install 'tapegrad[dev]')") from None


def special_function(xp, name: str):
    """``scipy.special.<name>`` for arrays of ``xp`` (``cupyx.scipy.special.<name>`` for CuPy).

    Raises:
        ImportError: SciPy (or CuPy's ``cupyx``) is not installed.
        NotImplementedError: the device's module has no such function (``cupyx`` lacks some of SciPy's).
    """
    module = _module_for(xp, name)
    fn = getattr(module, name, None)
    if fn is None:
        fix = "upgrade SciPy" if xp is np else "compute it on NumPy arrays"
        raise NotImplementedError(f"tapegrad.scipy.special.{name} has no kernel for {xp.__name__} arrays: "
                                  f"{module.__name__}.{name} does not exist; {fix}")
    return fn


def float_dtype(xp, *operands):
    """The dtype of the result: the operands' promoted dtype (Python scalars are weak, as NumPy 2 has
    them), or float64 for integer and boolean operands."""
    dtype = xp.result_type(*operands)
    return dtype if dtype.kind in "fc" else np.dtype(np.float64)


def _cast(out, dtype):
    # SciPy's ufuncs resolve Python scalars as float64 (xlogy(float32, 2.0) is float64): cast back
    return out if out.dtype == dtype else out.astype(dtype)


def scipy_impl(name: str, fallback=None, dtype_from=None):
    """An impl that calls ``scipy.special.<name>`` (``cupyx.scipy.special.<name>`` on CuPy).

    Args:
        name: the function's name in both modules.
        fallback: a scalar function from ``math`` used elementwise when SciPy is missing.
        dtype_from: indices of the operands that decide the result dtype (default: all of them).
    """
    def impl(*operands):
        xp = namespace_of(*operands)
        dtype = float_dtype(xp, *(operands if dtype_from is None else [operands[i] for i in dtype_from]))
        try:
            fn = special_function(xp, name)
        except ImportError:
            if fallback is None or xp is not np:  # the math fallback runs on the host only
                raise
            fn = np.frompyfunc(fallback, len(operands), 1)
        return _cast(fn(*operands), dtype)
    impl.__name__ = f"{name}_impl"
    return impl


def unary(name: str, derivative, fallback=None):
    """A unary elementwise primitive with value ``scipy.special.<name>`` and derivative
    ``derivative(x, ans)`` (tapegrad operations), registered for both reverse and forward mode."""
    prim = primitive(name, scipy_impl(name, fallback), unary_abstract_eval)
    defvjp(prim, lambda ct, ans, x: ct * derivative(x, ans))
    defjvp(prim, lambda t, ans, x: t * derivative(x, ans))
    defbatch_elementwise(prim)
    def_dependency(prim, "elementwise")
    return prim


def binary(name: str, d_x, d_y, impl=None):
    """A binary elementwise primitive (NumPy broadcasting) with partial derivatives ``d_x(x, y, ans)``
    and ``d_y(x, y, ans)``; ``d_y=None`` marks ``y`` as non-differentiable (an integer order)."""
    prim = primitive(name, impl or scipy_impl(name))
    defvjp(prim, lambda ct, ans, x, y: unbroadcast(ct * d_x(x, y, ans), x),
           None if d_y is None else (lambda ct, ans, x, y: unbroadcast(ct * d_y(x, y, ans), y)))
    defjvp(prim, lambda t, ans, x, y: t * d_x(x, y, ans),
           None if d_y is None else (lambda t, ans, x, y: t * d_y(x, y, ans)))
    defbatch_elementwise(prim)
    def_dependency(prim, "elementwise")
    return prim


SQRT_PI = math.sqrt(math.pi)
SQRT_2 = math.sqrt(2.0)
SQRT_2PI = math.sqrt(2.0 * math.pi)
