"""``allreduce`` and ``broadcast`` over pytrees: one contiguous buffer and one MPI call per backend and dtype.

Device (CuPy) buffers are staged through the host, or handed to MPI as they are when
:func:`tapegrad.distributed._comm.cuda_aware_mpi` says MPI reads device memory; either way each leaf
comes back on its own backend.

Before a tree's first collective, the ranks check that they hold the same tree (structure, shapes,
dtypes) with one small ``allgather`` of a hash; a mismatch raises on every rank, naming the first
differing leaf, instead of reducing unrelated bytes or waiting for ever. A signature that passed is
remembered, so a training loop pays it once.
"""
from __future__ import annotations

import hashlib
from typing import Any

import numpy as np
import optree

from tapegrad._backend import array_module, is_array, namespace_of, to_host
from tapegrad._core import Tracer
from tapegrad._params import Parameter
from tapegrad._typing import PyTree
from tapegrad.distributed import _comm
from tapegrad.distributed._comm import mpi, resolve

_OPS = ("mean", "sum", "max", "min")


def allreduce(tree: PyTree, op: str = "mean", comm: Any = None) -> Any:
    """Reduce every array of ``tree`` over all ranks: each rank gets the mean (or sum, max, min).

    The leaves are packed into one contiguous buffer per backend and dtype, and each buffer is reduced
    in place by one ``MPI_Allreduce``, as Horovod's tensor fusion does; a group of a single contiguous
    leaf is reduced from it directly, with no packing copy. The results are views into those buffers.
    CuPy leaves are packed on the device and either staged through the host (one explicit copy each
    way per buffer) or, with a CUDA-aware MPI, handed to MPI as they are (``docs/distributed.md``).

    Args:
        tree: a pytree of NumPy or CuPy arrays (or Parameters, read as their values) with the same
            structure, shapes, dtypes and backends on every rank. Host and device leaves may be mixed:
            they are reduced in separate buffers and each comes back on its own backend.
        op: ``"mean"`` (floating and complex leaves only), ``"sum"``, ``"max"`` or ``"min"``.
        comm: a :class:`Communicator` or mpi4py communicator; None is the job's (``init()``).

    Returns:
        A tree of the same structure; each leaf has its input's shape, dtype and backend (a CuPy leaf
        comes back as a CuPy array on the current device).

    Raises:
        ValueError: an unknown ``op``; ``"mean"`` of an integer or bool leaf; ranks whose trees
            differ (raised on every rank, naming the first differing leaf); a bad
            ``TAPEGRAD_CUDA_AWARE_MPI`` setting.
        TypeError: a leaf is a traced value (a collective inside ``jit``, ``grad`` or ``vmap``: run it
            outside, see ``docs/distributed.md``), or not an array.
    """
    if op not in _OPS:
        raise ValueError(f"allreduce: op must be one of {_OPS}, got {op!r}")
    comm = resolve(comm)
    paths, leaves, treedef = _leaves(tree, "allreduce")
    direct = _direct(leaves)
    _agree(comm, paths, leaves, treedef, "allreduce")
    if op == "mean":
        for path, leaf in zip(paths, leaves):
            if not np.issubdtype(leaf.dtype, np.inexact):
                raise ValueError(f"allreduce: op='mean' of the {leaf.dtype} leaf {_name(path)}; use op='sum' "
                                 "for integer or bool arrays")
    MPI = mpi()
    mpi_op = {"mean": MPI.SUM, "sum": MPI.SUM, "max": MPI.MAX, "min": MPI.MIN}[op]
    out = list(leaves)
    for indices, buf, packed in _groups(leaves):
        wire, home = _to_wire(buf, direct)
        if packed:  # a buffer of our own: reduced in place
            comm.comm.Allreduce(MPI.IN_PLACE, wire, op=mpi_op)
            result = wire
        else:  # the caller's leaf (or a host copy of it): read, never written
            result = namespace_of(wire).empty_like(wire)
            comm.comm.Allreduce(wire, result, op=mpi_op)
        if op == "mean":
            result /= comm.size
        _unpack(home(result), indices, leaves, out)
    return optree.tree_unflatten(treedef, out)


def broadcast(tree: PyTree, root: int = 0, comm: Any = None) -> Any:
    """Every rank gets ``root``'s arrays: one packed buffer and one ``MPI_Bcast`` per backend and dtype.

    Args:
        tree: a pytree of NumPy or CuPy arrays (or Parameters) with the same structure, shapes, dtypes
            and backends on every rank (the values of the other ranks are ignored; zeros of the right
            shape will do). Host and device leaves may be mixed; each comes back on its own backend.
        root: the rank whose values everyone gets.
        comm: a :class:`Communicator` or mpi4py communicator; None is the job's.

    Returns:
        A new tree with ``root``'s values, in new arrays on every rank (the input's arrays are never
        written).

    Raises:
        ValueError: ``root`` out of range; ranks whose trees differ (on every rank, naming the leaf); a
            bad ``TAPEGRAD_CUDA_AWARE_MPI`` setting.
        TypeError: a traced or non-array leaf.
    """
    comm = resolve(comm)
    if not (isinstance(root, (int, np.integer)) and 0 <= root < comm.size):
        raise ValueError(f"broadcast: root must be a rank in [0, {comm.size}), got {root!r}")
    paths, leaves, treedef = _leaves(tree, "broadcast")
    direct = _direct(leaves)
    _agree(comm, paths, leaves, treedef, "broadcast")
    out = list(leaves)
    for indices, buf, packed in _groups(leaves):
        if not packed:  # the caller's own leaf: MPI_Bcast writes into a copy (made before the device sync)
            buf = buf.copy()
        wire, home = _to_wire(buf, direct)
        comm.comm.Bcast(wire, root=int(root))
        _unpack(home(wire), indices, leaves, out)
    return optree.tree_unflatten(treedef, out)


# ---- trees and buffers -----------------------------------------------------------------------------
def _leaves(tree, what: str):
    paths, leaves, treedef = optree.tree_flatten_with_path(tree, namespace="tapegrad")
    values = []
    for path, leaf in zip(paths, leaves):
        if isinstance(leaf, Parameter):
            leaf = leaf.value
        if isinstance(leaf, Tracer):
            raise TypeError(f"{what}: the leaf {_name(path)} is a traced value: collectives run outside jit, grad "
                            "and vmap (an MPI call inside a staged program could be removed or reordered). Jit "
                            "the gradient and the update separately and reduce in between: grads = "
                            "jit(grad_fn)(x, y); opt.step(allreduce(grads))")
        if not (is_array(leaf) or isinstance(leaf, np.generic)):
            raise TypeError(f"{what}: the leaf {_name(path)} is a {type(leaf).__name__}, not an array; pass NumPy "
                            "or CuPy arrays (numpy.asarray(x) for a Python number)")
        values.append(leaf if not isinstance(leaf, np.generic) else np.asarray(leaf))
    return paths, values, treedef


def _groups(leaves):
    """``(indices, buffer, packed)`` per backend and dtype, in a fixed order (every rank must make the
    same calls): the one contiguous leaf itself (``packed`` False), or the leaves raveled into one new
    buffer of their backend. A buffer never mixes host and device arrays."""
    by_key: dict = {}
    for i, leaf in enumerate(leaves):
        by_key.setdefault((array_module(leaf).__name__, np.dtype(leaf.dtype).str), []).append(i)
    for _, indices in sorted(by_key.items()):
        if len(indices) == 1 and _contiguous(leaves[indices[0]]):
            yield indices, leaves[indices[0]], False
        else:
            xp = namespace_of(*(leaves[i] for i in indices))
            yield indices, xp.concatenate([xp.reshape(leaves[i], (-1,)) for i in indices]), True


def _contiguous(a) -> bool:
    flags = getattr(a, "flags", None)  # NumPy's and CuPy's flags both have c_contiguous
    return flags is not None and bool(flags.c_contiguous)


def _unpack(buf, indices, leaves, out) -> None:
    flat = buf.reshape(-1)
    offset = 0
    for i in indices:
        n = leaves[i].size
        out[i] = flat[offset:offset + n].reshape(leaves[i].shape)
        offset += n


# ---- host and device buffers -----------------------------------------------------------------------
def _direct(leaves) -> bool:
    """Whether device buffers go to MPI as they are: asked (of :func:`_comm.cuda_aware_mpi`, the one
    place that decides) only when there are device leaves, and before any MPI call, so that a bad
    setting raises on every rank instead of leaving some inside a collective."""
    if all(array_module(leaf) is np for leaf in leaves):
        return False
    return _comm.cuda_aware_mpi()


def _to_wire(buf, direct: bool):
    """``(wire, home)``: the buffer to hand to MPI, and the function that takes MPI's result back to
    ``buf``'s backend. Host buffers go as they are, and so do device buffers when MPI reads device
    memory (``direct``); other device buffers are staged, with one explicit copy to the host now and
    one back (``xp.asarray``) after: MPI cannot read device memory, and tapegrad never copies between
    host and device on its own."""
    xp = namespace_of(buf)
    if xp is np:
        return buf, _as_is
    if direct:
        _sync(xp)
        return buf, _as_is
    return to_host(buf), xp.asarray


def _as_is(a):
    return a


def _sync(xp) -> None:
    """A device buffer's pending kernels (the packing copy) must finish before MPI reads it: a CUDA-aware
    MPI reads device memory through ``__cuda_array_interface__``, outside CuPy's stream order. (The
    staged path needs no sync: CuPy's ``get()`` waits for the stream.)"""
    xp.cuda.get_current_stream().synchronize()


# ---- the signature check ---------------------------------------------------------------------------
def _signature(paths, leaves, treedef) -> list:
    # the backend is part of it: a leaf on the host on one rank and on the device on another would be
    # packed into different buffers, and the ranks' MPI calls would no longer match
    return [repr(treedef)] + [f"{_name(p)}: {tuple(a.shape)} {np.dtype(a.dtype).str} on {array_module(a).__name__}"
                              for p, a in zip(paths, leaves)]


def _agree(comm, paths, leaves, treedef, what: str) -> None:
    """Raise on every rank if the ranks' trees differ; a signature found alike is not checked again."""
    if comm.size == 1:
        return
    signature = _signature(paths, leaves, treedef)
    digest = hashlib.sha1("\n".join(signature).encode()).hexdigest()
    if digest in comm.agreed:
        return
    digests = comm.comm.allgather(digest)
    if len(set(digests)) == 1:
        comm.agreed.add(digest)
        return
    signatures = comm.comm.allgather(signature)  # every rank takes this branch: the digests are shared
    raise ValueError(f"{what}: the ranks hold different trees, so their arrays cannot be combined; "
                     f"{_first_difference(signatures)}")


def _first_difference(signatures: list) -> str:
    if len({s[0] for s in signatures}) > 1:
        return "the structures differ: " + "; ".join(f"rank {r}: {s[0]}" for r, s in enumerate(signatures))
    for k in range(1, max(len(s) for s in signatures)):
        entries = [s[k] if k < len(s) else "(missing)" for s in signatures]
        if len(set(entries)) > 1:
            return "first differing leaf: " + "; ".join(f"rank {r} has {e}" for r, e in enumerate(entries))
    return "their signatures differ"


def _name(path) -> str:
    return "'" + ".".join(str(k) for k in path) + "'" if path else "(the root)"
