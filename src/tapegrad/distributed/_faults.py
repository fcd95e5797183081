"""Faults, not hangs: a rank that raises ends the whole job.

In a collective every rank waits for all the others, so one rank that dies of an exception would leave
the rest waiting for ever. ``MPI_Abort`` ends every process of the communicator, and ``mpiexec`` then
exits with a non-zero status. The failing rank prints its traceback first, prefixed with its rank, so
the message is not lost among the others' output.
"""
from __future__ import annotations

import contextlib
import sys
import time
import traceback
from collections.abc import Iterator
from typing import Any

_FORWARD_S = 0.25  # seconds between printing the traceback and MPI_Abort


def _report_and_abort(comm, exc_type, exc, tb) -> None:
    text = "".join(traceback.format_exception(exc_type, exc, tb))
    sys.stderr.write("".join(f"[rank {comm.rank}] {line}\n" for line in text.rstrip().splitlines()))
    sys.stderr.write(f"[rank {comm.rank}] ending the job (MPI_Abort): the other ranks would wait for this one\n")
    sys.stderr.flush()
    # MPI_Abort kills every process at once, mpiexec's output proxies included: a moment for them to
    # forward the message first (under load it was sometimes lost, leaving a job that ended unexplained)
    time.sleep(_FORWARD_S)
    comm.comm.Abort(1)


def install_excepthook(comm) -> None:
    """Make an uncaught exception on this rank print and abort the job (the previous hook is kept for
    ``KeyboardInterrupt``'s usual exit only when there is one process)."""
    def hook(exc_type, exc, tb):
        _report_and_abort(comm, exc_type, exc, tb)
    sys.excepthook = hook


@contextlib.contextmanager
def abort_on_error(comm: Any = None) -> Iterator[Any]:
    """Within the block, an exception on this rank prints its traceback and ends the job (``MPI_Abort``).

    ``init()`` installs the same behaviour for uncaught exceptions (``sys.excepthook``); this is for code
    that would catch them (a notebook, a test runner, a ``try`` around a training loop). With a single
    process the exception propagates as usual: nobody waits on it.

    Args:
        comm: a :class:`Communicator` or mpi4py communicator whose processes are ended; None is the
            job's (:func:`init`).

    Yields:
        The :class:`Communicator` (``with abort_on_error() as comm:``).

    Raises:
        BaseException: with one process, whatever the block raised, unchanged. With more, nothing
            returns: the job ends with exit code 1.
        ImportError: mpi4py is not installed.

    Example:
        >>> with abort_on_error():            # doctest: +SKIP
        ...     for step in range(steps):
        ...         train_step(...)
    """
    from tapegrad.distributed._comm import resolve
    comm = resolve(comm)
    try:
        yield comm
    except BaseException:
        if comm.size == 1:
            raise  # nobody waits on a single process: an ordinary exception
        _report_and_abort(comm, *sys.exc_info())
