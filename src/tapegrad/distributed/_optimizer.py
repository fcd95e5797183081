"""Data parallelism: start every rank from the same state, and average the gradients before each step.

Each rank computes the gradients of its own part of the batch; their mean over the ranks is the
gradient of the mean loss over the whole batch (for a loss that is a mean over equally sized parts), so
every rank applies the same update and the replicas stay equal (Horovod's ``DistributedOptimizer``,
MindSpore's ``DistributedGradReducer``, PyTorch's ``DistributedDataParallel``).
"""
from __future__ import annotations

from typing import Any

from tapegrad._params import Parameter
from tapegrad._typing import PyTree
from tapegrad.distributed._collectives import allreduce, broadcast
from tapegrad.distributed._comm import resolve
from tapegrad.optim import Optimizer
from tapegrad.tree import tree_map


def broadcast_parameters(obj: Any, root: int = 0, comm: Any = None) -> None:
    """Give every rank ``root``'s state, in place (Horovod's ``broadcast_parameters``).

    Args:
        obj: anything with ``state_dict``/``load_state_dict`` (a module, an optimiser, a schedule, a
            loss scaler: the whole state, in name order), or a Parameter or a list/tuple of Parameters.
            Parameters may hold NumPy or CuPy arrays (each rank the same backend for the same one);
            each keeps its backend.
        root: the rank whose values everyone gets.
        comm: a :class:`Communicator` or mpi4py communicator; None is the job's.

    Returns:
        None; on every rank, ``obj``'s Parameters hold ``root``'s values (assigned in place).

    Raises:
        TypeError: ``obj`` is none of those.
        ValueError: the ranks' states differ in names, shapes, dtypes or backends (the message names the
            first).
    """
    if callable(getattr(obj, "state_dict", None)) and callable(getattr(obj, "load_state_dict", None)):
        state = obj.state_dict()
        obj.load_state_dict(broadcast(dict(sorted(state.items())), root, comm))
        return
    params = (obj,) if isinstance(obj, Parameter) else tuple(obj) if isinstance(obj, (list, tuple)) else None
    if params is None or not all(isinstance(p, Parameter) for p in params):
        raise TypeError(f"broadcast_parameters: obj must be a module, an optimiser or Parameters, got "
                        f"{type(obj).__name__}")
    for p, value in zip(params, broadcast([p.value for p in params], root, comm)):
        p.assign(value)


class DistributedOptimizer:
    """An optimiser whose ``step`` first averages the gradients over the ranks (Horovod's spelling).

    Args:
        optimizer: a stateful ``tapegrad.optim`` optimiser (built with its Parameters).
        comm: a :class:`Communicator` or mpi4py communicator; None is the job's.
        op: how the gradients are combined: ``"mean"`` (default) or ``"sum"``.

    Everything else (``params``, ``learning_rate``, ``state``, ``state_dict``, ...) is the wrapped
    optimiser's. ``step`` reduces outside ``jit``: jit the gradient computation, and if you like the
    wrapped optimiser's step, and call this ``step`` between them (``docs/distributed.md``).

    Raises:
        TypeError: ``optimizer`` is not a stateful tapegrad optimiser.
    """

    def __init__(self, optimizer: Any, comm: Any = None, op: str = "mean") -> None:
        if not isinstance(optimizer, Optimizer) or optimizer.params is None:
            raise TypeError("DistributedOptimizer: optimizer must be a tapegrad optimiser built with its "
                            f"Parameters (tg.optim.Adam(net.trainable_params())), got {type(optimizer).__name__}")
        self.optimizer, self.comm, self.op = optimizer, resolve(comm), op

    def step(self, grads: PyTree) -> None:
        """Average (or, with ``op="sum"``, sum) ``grads`` over the ranks with one ``MPI_Allreduce`` per
        dtype, then ``optimizer.step`` them. Runs outside ``jit``, on every rank.

        Args:
            grads: one gradient per Parameter, as ``grad(..., weights=opt.params)`` returns them:
                NumPy or CuPy arrays, reduced on their own backend (see :func:`allreduce`).

        Returns:
            None.

        Raises:
            RuntimeError: as ``optimizer.step``.
            ValueError: as ``optimizer.step``.
        """
        self.optimizer.step(allreduce(tuple(grads) if isinstance(grads, list) else grads, self.op, self.comm))

    def __call__(self, grads: PyTree) -> None:
        self.step(grads)

    def __getattr__(self, name):
        return getattr(self.optimizer, name)


class DistributedGradReducer:
    """MindSpore's ``nn.DistributedGradReducer``: ``reducer(grads)`` sums the gradients over the ranks and,
    with ``mean``, divides them by ``degree``.

    Args:
        parameters: the Parameters the gradients belong to (as MindSpore takes them; kept for its
            signature, not used in the reduction).
        mean: divide the sum by ``degree`` (MindSpore's default depends on its parallel context; here True).
        degree: the divisor; None is the number of ranks.
        comm: a :class:`Communicator` or mpi4py communicator; None is the job's.

    ``reducer(grads)`` takes a pytree of gradient arrays (the same structure, shapes and dtypes on
    every rank) and returns the reduced pytree in its structure and dtypes. It must run outside
    ``jit``, on every rank.

    Raises:
        ValueError: ``degree < 1``.
        ImportError: mpi4py is not installed.
    """

    def __init__(self, parameters: Any = None, mean: bool = True, degree: int | None = None, comm: Any = None) -> None:
        self.parameters, self.mean, self.comm = parameters, bool(mean), resolve(comm)
        self.degree = self.comm.size if degree is None else int(degree)
        if self.degree < 1:
            raise ValueError(f"DistributedGradReducer: degree must be >= 1, got {degree}")

    def __call__(self, grads: PyTree) -> Any:
        """The reduced gradients, in ``grads``' structure."""
        summed = allreduce(grads, "sum", self.comm)
        if not self.mean:
            return summed
        return tree_map(lambda g: g / g.dtype.type(self.degree), summed)
