"""The communicator: which process this is, how many there are, and the MPI communicator they share.

mpi4py is imported here, on first use, so that ``import tapegrad.distributed`` stays cheap and works
without it (its functions then raise an ``ImportError`` saying what to install). :func:`cuda_aware_mpi`
is the one place that decides whether MPI is handed device (CuPy) memory directly.
"""
from __future__ import annotations

import ctypes
import functools
import os
from typing import Any

from tapegrad._typing import PyTree

CUDA_AWARE_ENV = "TAPEGRAD_CUDA_AWARE_MPI"


def mpi():
    """mpi4py's ``MPI`` module, or an ImportError naming the extra to install."""
    try:
        from mpi4py import MPI
    except ImportError as e:
        raise ImportError("tapegrad.distributed needs mpi4py and an MPI library: pip install "
                          "'tapegrad[distributed]' (mpi4py and mpich), or mpi4py built against the cluster's "
                          "MPI") from e
    return MPI


class Communicator:
    """A group of processes (MPI ranks) that take part in the same collectives.

    Args:
        comm: an ``mpi4py.MPI.Comm``; None takes ``MPI.COMM_WORLD`` (every process ``mpiexec`` started).

    Attributes:
        comm: the mpi4py communicator.
        rank: this process's index, ``0 <= rank < size``.
        size: the number of processes.

    Raises:
        ImportError: mpi4py is not installed (``pip install 'tapegrad[distributed]'``).
    """

    def __init__(self, comm: Any = None) -> None:
        self.comm = mpi().COMM_WORLD if comm is None else comm
        self.rank, self.size = self.comm.Get_rank(), self.comm.Get_size()
        self.agreed: set = set()  # signatures of trees every rank has shown to hold alike (see _collectives)

    def barrier(self) -> None:
        """Wait until every rank has called it (``MPI_Barrier``)."""
        self.comm.Barrier()

    def allreduce(self, tree: PyTree, op: str = "mean") -> Any:
        """``tapegrad.distributed.allreduce(tree, op, comm=self)``."""
        from tapegrad.distributed._collectives import allreduce
        return allreduce(tree, op, comm=self)

    def broadcast(self, tree: PyTree, root: int = 0) -> Any:
        """``tapegrad.distributed.broadcast(tree, root, comm=self)``."""
        from tapegrad.distributed._collectives import broadcast
        return broadcast(tree, root, comm=self)

    def __repr__(self):
        return f"Communicator(rank={self.rank}, size={self.size})"


_world: Communicator | None = None


def init(comm: Any = None) -> Communicator:
    """The communicator of every process of the job (idempotent: later calls return the first one).

    With more than one process it also makes a rank that raises end the whole job (see
    :func:`tapegrad.distributed.abort_on_error`): the others would otherwise wait in their next
    collective for ever.

    Args:
        comm: an ``mpi4py.MPI.Comm`` for the first call (None: ``MPI.COMM_WORLD``); refused afterwards if
            it is another one.

    Returns:
        The job's :class:`Communicator` (``.rank``, ``.size``, ``.comm``), the same object at every
        call.

    Raises:
        ImportError: mpi4py is not installed.
        ValueError: a later call passes another communicator.
    """
    global _world
    if _world is None:
        _world = Communicator(comm)
        if _world.size > 1:
            from tapegrad.distributed._faults import install_excepthook
            install_excepthook(_world)
    elif comm is not None and comm is not _world.comm:
        raise ValueError("tapegrad.distributed.init: already initialised with another communicator; pass "
                         "comm=Communicator(your_comm) to each collective instead")
    return _world


def rank() -> int:
    """This process's rank in the job, ``init().rank`` (MPI's ``Comm.Get_rank``; Horovod's ``hvd.rank()``).

    Returns:
        An int, ``0 <= rank() < size()``; 0 in a job of one process.

    Raises:
        ImportError: mpi4py is not installed.
    """
    return init().rank


def size() -> int:
    """The number of processes in the job, ``init().size`` (MPI's ``Comm.Get_size``; Horovod's
    ``hvd.size()``).

    Returns:
        An int ``>= 1`` (what ``mpiexec -n`` was given; 1 without ``mpiexec``).

    Raises:
        ImportError: mpi4py is not installed.
    """
    return init().size


def resolve(comm) -> Communicator:
    """``comm`` as a :class:`Communicator`: None is the job's, an mpi4py communicator is wrapped."""
    if comm is None:
        return init()
    return comm if isinstance(comm, Communicator) else Communicator(comm)


def cuda_aware_mpi() -> bool:
    """Whether this process's MPI reads and writes CUDA device memory, so that the collectives hand CuPy
    buffers to mpi4py as they are instead of staging them through the host.

    ``TAPEGRAD_CUDA_AWARE_MPI=1`` (or ``0``) decides it, for an MPI whose own answer is missing or wrong;
    otherwise MPI's ``MPIX_Query_cuda_support()`` does (Open MPI's extension, also exported by MPICH):
    mpi4py 4.1 has no binding for it, so it is looked up in the MPI library mpi4py loaded. An MPI without
    it counts as not CUDA-aware: staging is slower but always correct, whereas handing device memory to
    an MPI that cannot read it crashes. The collectives read this through the module, so a test can
    monkeypatch it.

    Returns:
        True to pass device buffers to MPI directly, False to stage them through the host.

    Raises:
        ValueError: ``TAPEGRAD_CUDA_AWARE_MPI`` is set to something other than ``0`` or ``1``.
        ImportError: mpi4py is not installed.
    """
    setting = os.environ.get(CUDA_AWARE_ENV)
    if setting is None:
        return _mpix_query_cuda_support()
    if setting.strip() not in ("0", "1"):
        raise ValueError(f"{CUDA_AWARE_ENV} must be 1 (MPI reads device memory: CuPy buffers go to MPI directly) "
                         f"or 0 (stage them through the host), got {setting!r}; unset it to ask MPI")
    return setting.strip() == "1"


@functools.cache
def _mpix_query_cuda_support() -> bool:
    """MPI's own answer, asked once per process (it cannot change after ``MPI_Init``, which importing
    mpi4py's ``MPI`` has done)."""
    library = ctypes.CDLL(mpi().__file__)  # the loaded extension: dlsym also searches the libmpi it links
    try:
        query = library.MPIX_Query_cuda_support
    except AttributeError:  # an MPI without the extension: it gives no sign of reading device memory
        return False
    query.restype, query.argtypes = ctypes.c_int, []
    return query() == 1
