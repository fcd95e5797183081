"""``tapegrad.debug``: look at values inside ``jit``, ``vmap`` and ``grad`` (JAX's ``jax.debug``).

:func:`print` and :func:`callback` call Python on the concrete values a traced function computes,
wherever it runs: eagerly, inside a ``jit`` program (in program order, on the Python executor: a program
holding one does not compile whole, and ``jit(f).explain(...)`` says so), in a loop body at each step,
once per example under ``vmap`` (:func:`batch_index` tells which), and on the primal values only under
``grad`` and ``jvp`` (a callback has no derivative and is not run again by the backward pass). The
values arrive as NumPy arrays (CuPy arrays are copied to the host). For a callback that returns values
into the computation, see :func:`tapegrad.pure_callback`; for NaNs, ``tg.config.debug_nans``.
"""
from __future__ import annotations

import builtins
from collections.abc import Callable
from typing import Any

from tapegrad._callback import batch_index, debug_callback

__all__ = ["batch_index", "callback", "print"]


def callback(callback: Callable[..., Any], *args: Any, ordered: bool = False, **kwargs: Any) -> None:
    """Call ``callback(*args, **kwargs)`` on the concrete values, from inside any transform (JAX's
    ``jax.debug.callback``).

    Args:
        callback: a function of NumPy arrays (and of the non-array leaves of ``args``/``kwargs``, passed
            as they are); what it returns is ignored.
        *args: pytrees of arrays or traced values.
        ordered: accepted for JAX's signature; tapegrad always calls in program order.
        **kwargs: pytrees of arrays or traced values, passed by keyword.

    Returns:
        None. Under ``jit`` the call happens each time the compiled function runs, not when it is
        staged; under ``vmap`` once per example (with :func:`batch_index` set), under ``grad`` once,
        with the primal values.

    Raises:
        TypeError: ``callback`` is not callable. What ``callback`` raises propagates from the call (under
        ``jit``, from the compiled function's call).
    """
    del ordered  # the executors run equations in program order
    debug_callback(callback, args, kwargs, "tapegrad.debug.callback")


def print(fmt: str, *args: Any, ordered: bool = False, **kwargs: Any) -> None:  # noqa: A001 — JAX's name
    """Print ``fmt.format(*args, **kwargs)`` with the concrete values, from inside any transform (JAX's
    ``jax.debug.print``).

    Args:
        fmt: a ``str.format`` template: ``"loss {} at step {i}"``; a format spec such as ``{:.3f}``
            applies to a 0-d array as to a number.
        *args: pytrees of arrays or traced values, for the positional fields.
        ordered: accepted for JAX's signature; prints always come in program order.
        **kwargs: pytrees of arrays or traced values, for the named fields.

    Returns:
        None. The line is printed to ``sys.stdout`` when the value is computed (eagerly at once, under
        ``jit`` at each call of the compiled function, under ``vmap`` once per example).

    Raises:
        TypeError: ``fmt`` is not a string. A field ``fmt`` names but is not given raises from the
            print (under ``jit``, from the call).
    """
    if not isinstance(fmt, str):
        raise TypeError(f"tapegrad.debug.print: fmt must be a format string, got {fmt!r}")
    del ordered
    debug_callback(lambda *a, **k: builtins.print(fmt.format(*a, **k)), args, kwargs, "tapegrad.debug.print")
