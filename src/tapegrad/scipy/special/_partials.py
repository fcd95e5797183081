"""Elementwise special-function primitives of any number of operands, declared by their partial
derivatives, and the rule that refuses a derivative no closed form gives.

``elementwise(name, partials)`` generalises ``_impl.unary``/``_impl.binary`` to the three and four
operands of ``betainc``, ``hyp1f1``, ``hyp2f1`` and ``sph_harm_y``. Each partial is a function
``d(*operands, ans)`` written in tapegrad operations (so the rule differentiates again), registered as
both the vjp (broadcasting undone) and the jvp rule; None marks an integer order, which carries no
derivative; :func:`no_derivative` marks a real parameter whose derivative has no closed form in terms
of the functions of this package: differentiating through it raises, rather than giving a silent zero.
"""
from __future__ import annotations

import operator

from tapegrad._backend import namespace_of
from tapegrad.errors import ConcretizationError
from tapegrad.extend import def_dependency, defbatch_elementwise, defjvp, defvjp, primitive
from tapegrad.numpy._shape import unbroadcast
from tapegrad.scipy.special._impl import _cast, float_dtype, scipy_impl, special_function


class no_derivative:  # noqa: N801 - a marker used like a function in the partials' lists
    """The partial derivative in operand ``arg`` of ``fn`` is not implemented: its vjp and jvp rules
    raise ``NotImplementedError`` naming the argument (they run only when that operand carries a
    derivative, so constant arguments cost nothing)."""

    def __init__(self, fn: str, arg: str, hint: str = ""):
        self.message = (f"{fn}: the derivative with respect to {arg!r} has no closed form and is not "
                        f"implemented; pass {arg} as a constant (or through tg.stop_gradient){hint}")

    def __call__(self, *args, **params):
        raise NotImplementedError(self.message)


def _vjp(d, argnum):
    if d is None:
        return None
    if isinstance(d, no_derivative):
        return d
    return lambda ct, ans, *ops, **params: unbroadcast(ct * d(*ops, ans, **params), ops[argnum])


def _jvp(d):
    if d is None or isinstance(d, no_derivative):
        return d
    return lambda t, ans, *ops, **params: t * d(*ops, ans, **params)


def elementwise(name: str, partials, impl=None, dtype_from=None):
    """An elementwise primitive (NumPy broadcasting) of ``len(partials)`` operands.

    Args:
        name: the primitive's name; also the ``scipy.special`` function its default impl calls.
        partials: one entry per operand: ``d(*operands, ans, **params)``, the partial derivative
            (tapegrad operations; ``params`` are the primitive's static parameters, such as the order of
            a derivative primitive); None for an integer order (no derivative); or a
            :class:`no_derivative`.
        impl: the impl, if not ``scipy.special.<name>``.
        dtype_from: the operands that decide the result dtype (default all), for the default impl.
    """
    prim = primitive(name, impl or scipy_impl(name, dtype_from=dtype_from))
    defvjp(prim, *[_vjp(d, i) for i, d in enumerate(partials)])
    defjvp(prim, *[_jvp(d) for d in partials])
    defbatch_elementwise(prim)
    def_dependency(prim, "elementwise")
    return prim


def scipy_part(name: str, index: int):
    """An impl returning result ``index`` of ``scipy.special.<name>`` (``sici``, ``fresnel``: functions
    that return a pair), in the operand's float dtype."""
    def impl(x):
        xp = namespace_of(x)
        return _cast(special_function(xp, name)(x)[index], float_dtype(xp, x))
    impl.__name__ = f"{name}_{index}_impl"
    return impl


def static_count(fn: str, arg: str, value) -> int:
    """``value`` as a non-negative Python integer: an argument that sets a result's length (``n`` of
    ``bernoulli``, ``v`` of ``bessel_jn``).

    Raises:
        ConcretizationError: ``value`` is traced (under ``jit``: mark it static with ``static_argnums``).
        ValueError: it is not a non-negative integer.
    """
    try:
        if isinstance(value, bool):
            raise TypeError
        count = operator.index(value)
    except ConcretizationError:
        raise
    except TypeError:
        count = -1
    if count < 0:
        raise ValueError(f"{fn}: {arg} must be a non-negative Python integer (it sets the result's length), "
                         f"got {value!r}")
    return count
