"""BLAS thread counts, through threadpoolctl: ``set_blas_threads(n)`` for the whole process, as
``torch.set_num_threads``, and ``with blas_threads(n):`` for a block.

Small products run fastest on one thread: a BLAS's threads wait for each other by spinning, and on
a machine whose cores are busy with other work they wait for the cores too (docs/getting_started.md,
"BLAS threads"). Environment variables (``OPENBLAS_NUM_THREADS``) work only before NumPy is imported;
threadpoolctl changes the count of the BLAS libraries already loaded, at any time.

threadpoolctl (the ``threads`` extra) is imported on first use, not by ``import tapegrad``.
"""
from __future__ import annotations

import contextlib
import operator
import warnings
from collections.abc import Iterator
from typing import Any

# a limiter that limits nothing, made at the first call of either function below: it holds the counts the BLAS
# libraries had before tapegrad changed them, which set_blas_threads(None) restores
_STARTED: list[Any] = []


def _threadpoolctl(caller: str) -> Any:
    """The threadpoolctl module, or an ImportError that says how to install it."""
    try:
        import threadpoolctl
    except ImportError as error:
        raise ImportError(f"tapegrad.{caller} needs threadpoolctl, which is not installed: "
                          "pip install 'tapegrad[threads]' (or pip install threadpoolctl)") from error
    return threadpoolctl


def _thread_count(n: Any, caller: str) -> int | None:
    """``n`` as a positive int, or None; a TypeError or ValueError naming ``caller``'s argument ``n``."""
    if n is None:
        return None
    if isinstance(n, bool):  # an int to operator.index, but True threads is a mistake
        raise TypeError(f"tapegrad.{caller}: n must be a positive int or None, got {n!r}")
    try:
        count = operator.index(n)
    except TypeError:
        raise TypeError(f"tapegrad.{caller}: n must be a positive int or None, got {n!r} "
                        f"({type(n).__name__})") from None
    if count < 1:
        raise ValueError(f"tapegrad.{caller}: n must be a positive int or None, got {count}; "
                         "1 is the count for small workloads")
    return count


def set_blas_threads(n: int | None) -> None:
    """Set how many threads the loaded BLAS libraries (OpenBLAS, MKL, BLIS: NumPy's, SciPy's) use,
    for the whole process, as ``torch.set_num_threads``.

    threadpoolctl's ``threadpool_limits(limits=n, user_api="blas")``, kept in force. It reaches the
    BLAS libraries loaded when it runs: NumPy's is loaded with ``import tapegrad``; one that loads
    later (SciPy's own OpenBLAS, on ``import scipy.linalg``) keeps its count until the next call.

    Args:
        n: the thread count, a positive int; 1 is fastest for small arrays (products of matrices up to
            a few hundred rows) and on a machine whose cores are busy. None restores the counts the
            libraries had before tapegrad first changed them (by either function).

    Returns:
        None, as ``torch.set_num_threads``; ``threadpoolctl.threadpool_info()`` reads the counts back.

    Raises:
        TypeError: ``n`` is not an int or None.
        ValueError: ``n`` is below 1.
        ImportError: threadpoolctl is not installed (``pip install 'tapegrad[threads]'``).

    Example:
        >>> import tapegrad as tg
        >>> tg.set_blas_threads(1)
        >>> tg.set_blas_threads(None)  # back to the counts the process started with
    """
    count = _thread_count(n, "set_blas_threads")
    threadpoolctl = _threadpoolctl("set_blas_threads")
    if count is None:
        if _STARTED:
            _STARTED[0].restore_original_limits()
        return
    _limiter(threadpoolctl, count, "set_blas_threads", stacklevel=3)


def blas_threads(n: int | None) -> contextlib.AbstractContextManager[None]:
    """A block in which the loaded BLAS libraries use ``n`` threads: ``with tg.blas_threads(1): ...``.

    threadpoolctl's ``threadpool_limits(limits=n, user_api="blas")`` as a context manager: on leaving
    the block (normally or by an exception) each library gets back the count it had on entering, a
    :func:`set_blas_threads` inside the block included. The count is the process's, not the thread's:
    BLAS libraries have one.

    Args:
        n: the thread count in the block, a positive int, or None to leave the counts as they are
            (so that ``with tg.blas_threads(args.threads):`` serves an optional setting).

    Returns:
        A context manager; ``with ... as`` binds None.

    Raises:
        TypeError: ``n`` is not an int or None.
        ValueError: ``n`` is below 1.
        ImportError: threadpoolctl is not installed (``pip install 'tapegrad[threads]'``); raised
            here, when ``n`` is not None, not on entering the block.

    Example:
        >>> import numpy as np
        >>> import tapegrad as tg
        >>> with tg.blas_threads(1):
        ...     g = tg.grad(lambda w: (w @ w).sum())(np.eye(3))
    """
    count = _thread_count(n, "blas_threads")
    if count is None:
        return contextlib.nullcontext()
    return _limited(_threadpoolctl("blas_threads"), count)


@contextlib.contextmanager
def _limited(threadpoolctl: Any, count: int) -> Iterator[None]:
    with _limiter(threadpoolctl, count, "blas_threads", stacklevel=4):  # through contextlib's __enter__
        yield


def _limiter(threadpoolctl: Any, count: int, caller: str, stacklevel: int) -> Any:
    """threadpoolctl's limiter of the BLAS libraries to ``count`` threads, in force from now; a warning when
    it found none, so that a count that changed nothing does not pass for one that did."""
    if not _STARTED:
        _STARTED.append(threadpoolctl.threadpool_limits(limits=None, user_api="blas"))
    limiter = threadpoolctl.threadpool_limits(limits=count, user_api="blas")
    if limiter.get_original_num_threads().get("blas") is None:
        warnings.warn(f"tapegrad.{caller}({count}): threadpoolctl found no BLAS library it controls among those "
                      "loaded (python -m threadpoolctl -i numpy lists them), so no thread count changed; "
                      "Apple's Accelerate, for one, sets its own", RuntimeWarning, stacklevel=stacklevel)
    return limiter
