"""Sparse Jacobians and Hessians for a given pattern: ``sparse_jacfwd``, ``sparse_jacrev``, ``sparse_hessian``.

Compression by colouring (Curtis, Powell and Reid 1974; Coleman and Moré 1983; Gebremedhin, Manne and
Pothen, "What color is your Jacobian?", SIAM Review 2005): columns of the Jacobian that share no row
get one colour, so one forward pass along the sum of their basis vectors yields all of their
entries at once, each row of the result holding at most one of them. A Jacobian then costs as many
jvp passes as column colours (``sparse_jacfwd``), or as many vjp passes as row colours
(``sparse_jacrev``, the same construction on the transpose), instead of one per column or row. The
passes are batched: ``fn`` runs once (``linearize`` or ``vjp``) and ``vmap`` sweeps the seed matrix,
as :func:`tapegrad.jacfwd` sweeps the identity.

The colouring is DSATUR (Brélaz 1979), greedy by saturation (the number of colours already next to a
vertex), then degree, on the column intersection graph (columns ``j`` and ``k`` are adjacent when some
row holds both: the pattern of ``SᵀS``). It is short, needs only SciPy, and finds 5 colours for the
2-D five-point stencil, the optimum; greedy largest-first (networkx's default, SciPy's private
``group_columns`` in natural order) finds 7 there. networkx's own DSATUR is not a dependency and is
quadratic in practice (0.8 s for 900 columns), so it is written here with a heap.

The pattern is given (detecting it by tracing is a later piece of the same issue): a Boolean array or
a SciPy sparse array/matrix of shape ``(out.size, x.size)``; its stored entries are the positions
kept (explicit zeros stored in a sparse pattern count as entries). Results are SciPy ``csr_array``s
with exactly the pattern's entries, in its canonical order.
"""
from __future__ import annotations

import functools
import heapq
from collections.abc import Callable
from typing import Any

import numpy as np

from tapegrad._api import _differentiable_leaf, grad, linearize, vjp
from tapegrad._backend import namespace_of
from tapegrad._core import Tracer
from tapegrad._structural import reshape


def _pattern(sparsity, api: str):
    """``sparsity`` as a canonical Boolean ``csr_array`` (sorted indices, no duplicates): its stored
    entries are the positions a Jacobian may hold."""
    import scipy.sparse as sp  # SciPy is needed here only: `import tapegrad` stays without it
    if sp.issparse(sparsity):
        pattern = sp.csr_array(sparsity, copy=True)
        pattern.data = np.ones(pattern.nnz, dtype=bool)  # a stored zero is still a position of the pattern
    else:
        dense = np.asarray(sparsity)
        if dense.ndim != 2 or dense.dtype != bool:
            raise TypeError(f"{api}: sparsity must be a scipy.sparse array or matrix or a 2-D Boolean array of "
                            f"shape (out.size, x.size), got {type(sparsity).__name__} with dtype {dense.dtype} "
                            f"and shape {dense.shape}; pass e.g. jacobian != 0 or scipy.sparse.csr_array(mask)")
        pattern = sp.csr_array(dense)
    pattern.sum_duplicates()  # also sorts the indices: the layout the result shares
    return pattern


def _dsatur(indptr: np.ndarray, indices: np.ndarray) -> np.ndarray:
    """A proper colouring of the graph with adjacency lists ``indices[indptr[v]:indptr[v + 1]]`` (self
    loops ignored) by DSATUR: the next vertex is the uncoloured one with the most distinct colours
    among its neighbours (ties: the higher degree, then the lower index), given the smallest colour
    none of them has. A heap with lazy deletion keeps it O(E log V)."""
    n = len(indptr) - 1
    ptr, adj = indptr.tolist(), indices.tolist()
    degree = np.diff(indptr).tolist()
    colour = [-1] * n
    near: list[set[int]] = [set() for _ in range(n)]  # colours of each vertex's coloured neighbours
    heap = [(0, -degree[v], v) for v in range(n)]
    heapq.heapify(heap)
    while heap:
        neg_saturation, _, v = heapq.heappop(heap)
        if colour[v] >= 0 or -neg_saturation != len(near[v]):
            continue  # coloured already, or an entry superseded by a later push
        c = 0
        while c in near[v]:
            c += 1
        colour[v] = c
        for u in adj[ptr[v]:ptr[v + 1]]:
            if colour[u] < 0 and c not in near[u]:
                near[u].add(c)
                heapq.heappush(heap, (-len(near[u]), -degree[u], u))
    return np.asarray(colour, dtype=np.intp)


def _color_columns(pattern) -> np.ndarray:
    """A colour (0, 1, ...) for each column of the Boolean sparse ``pattern`` such that no two columns of
    one colour have an entry in the same row, by DSATUR on the column intersection graph (``SᵀS``)."""
    import scipy.sparse as sp
    s = sp.csr_array(pattern, dtype=np.int32)  # int: a Boolean product would be fine, but SciPy upcasts anyway
    s.data[:] = 1
    graph = (s.T @ s).tocsr()
    return _dsatur(graph.indptr, graph.indices)


def _seeds(colours: np.ndarray, dtype) -> np.ndarray:
    """The seed matrix as a batch: row ``k`` is the sum of the basis vectors of colour ``k``."""
    count = int(colours.max()) + 1 if colours.size else 0
    seeds = np.zeros((count, colours.size), dtype=dtype)
    seeds[colours, np.arange(colours.size)] = 1
    seeds.flags.writeable = False  # kept for the next call (_Compressed.seeds)
    return seeds


class _Compressed:
    """A pattern, its colouring, and where each entry of the pattern lies in the compressed Jacobian
    (colours x positions, read as one flat array): all computed once per pattern, not per call."""

    def __init__(self, pattern, by_rows: bool):
        self.pattern = pattern
        self.by_rows = by_rows
        rows = np.repeat(np.arange(pattern.shape[0]), np.diff(pattern.indptr))
        # forward: compressed[k, i] = J[i, j] for j of colour k; reverse: compressed[k, j] = J[i, j] for i of colour k
        self.colours = _color_columns(pattern.T if by_rows else pattern)
        self.count = int(self.colours.max()) + 1 if self.colours.size else 0
        self.width = pattern.shape[1] if by_rows else pattern.shape[0]
        colour, position = (self.colours[rows], pattern.indices) if by_rows else \
            (self.colours[pattern.indices], rows)
        self.gather = colour * self.width + position  # flat index of each entry, in the pattern's layout
        # compressed entries no pattern entry claims: zero unless the pattern misses a non-zero
        self.unclaimed = np.setdiff1d(np.arange(self.count * self.width), self.gather, assume_unique=False)
        self._seeds: dict[np.dtype, np.ndarray] = {}

    def seeds(self, dtype) -> np.ndarray:
        """The seed matrix of this colouring in ``dtype``, made on the first call with that dtype."""
        dtype = np.dtype(dtype)
        if dtype not in self._seeds:
            self._seeds[dtype] = _seeds(self.colours, dtype)
        return self._seeds[dtype]


def _flat_fn(fn, x, args, kwargs):
    """``fn`` as a function of the flattened ``x`` returning its output flattened (``fn`` itself for a
    1-D input and output)."""
    def flat(v):
        out = fn(v if x.ndim == 1 else reshape(v, x.shape), *args, **kwargs)
        return out if getattr(out, "ndim", None) == 1 else reshape(out, (-1,))
    return flat


def _check_shape(compressed, out_size: int, in_size: int, api: str):
    if compressed.pattern.shape != (out_size, in_size):
        raise ValueError(f"{api}: sparsity has shape {compressed.pattern.shape}, but the Jacobian of this "
                         f"function at this x has shape (out.size, x.size) = ({out_size}, {in_size}); pass a "
                         f"pattern of that shape (rows: the flattened output, columns: the flattened input)")


def _check_unclaimed(compressed, values, api: str):
    """Raise where the compressed Jacobian holds a non-zero that no entry of the pattern claims: the
    pattern misses a non-zero there (the misses that land on a claimed position cannot be seen)."""
    stray = compressed.unclaimed[values.reshape(-1)[compressed.unclaimed] != 0]
    if stray.size:
        k, i = divmod(int(stray[0]), compressed.width)
        members = np.flatnonzero(compressed.colours == k)[:8].tolist()
        more = "..." if len(members) == 8 else ""
        where = f"column {i}, in one of the rows {members}{more}" if compressed.by_rows else \
            f"row {i}, in one of the columns {members}{more}"
        raise ValueError(f"{api}: the Jacobian has a non-zero that the sparsity pattern does not list, at {where} "
                         f"({stray.size} such compressed entries in all); pass a pattern that contains every "
                         f"non-zero (a superset is fine), or check_pattern=False to drop them unchecked")


def _to_csr(compressed, values, api: str, check_pattern: bool):
    """The pattern's entries read from the compressed Jacobian ``values`` (colours x positions), as a
    SciPy ``csr_array`` sharing the pattern's layout."""
    import scipy.sparse as sp
    _refuse_traced(values, api)
    if namespace_of(values) is not np:
        raise NotImplementedError(f"{api}: only NumPy arrays for now (the result is a scipy.sparse array); "
                                  f"pass x as a NumPy array")
    if check_pattern:
        _check_unclaimed(compressed, values, api)
    p = compressed.pattern
    return sp.csr_array((values.reshape(-1)[compressed.gather], p.indices.copy(), p.indptr.copy()), shape=p.shape)


def _sweep(fn, seeds: np.ndarray, chunk_size: int | None, empty, api: str):
    """``vmap(fn)`` over the rows of ``seeds``, at most ``chunk_size`` of them per batched pass (None: all
    at once), the passes' results stacked; ``empty`` when there are no seeds (an empty pattern)."""
    if not len(seeds):
        return empty
    from tapegrad._vmap_api import vmap  # on first use: it imports optree (tapegrad._tree)
    mapped = vmap(fn)
    step = len(seeds) if chunk_size is None else chunk_size
    pieces = [mapped(seeds[start:start + step]) for start in range(0, len(seeds), step)]
    if len(pieces) == 1:
        return pieces[0]
    for piece in pieces:
        _refuse_traced(piece, api)
    return namespace_of(pieces[0]).concatenate(pieces)


def _refuse_traced(values, api: str):
    if isinstance(values, Tracer):
        raise TypeError(f"{api} returns a SciPy sparse array, which cannot carry a traced value: it cannot run "
                        f"under grad, jvp, vmap or jit yet; differentiate or map the dense tg.jacfwd/jacrev "
                        f"instead, or call {api} outside the transform")


def _check_options(check_pattern, chunk_size, api: str):
    if not isinstance(check_pattern, bool):
        raise TypeError(f"{api}: check_pattern must be a bool, got {check_pattern!r}")
    if chunk_size is not None and (isinstance(chunk_size, bool) or not isinstance(chunk_size, int) or chunk_size < 1):
        raise ValueError(f"{api}: chunk_size must be a positive int (at most that many colours per batched pass) "
                         f"or None (all at once), got {chunk_size!r}")


def sparse_jacfwd(fn: Callable[..., Any], sparsity: Any, *, check_pattern: bool = True,
                  chunk_size: int | None = None) -> Callable[..., Any]:
    """The Jacobian of ``fn`` with respect to its first argument, for a known sparsity pattern, by
    forward mode in as many jvp passes as column colours.

    Columns of the pattern that share no row are coloured alike (DSATUR on the column intersection
    graph, computed once here); ``fn`` runs once (:func:`tapegrad.linearize`) and the seeds, one per
    colour, are swept forward in one ``vmap``-batched pass. It is the cheaper one when rows are dense
    and columns sparse-ish, e.g. a stencil (5 colours for the 2-D five-point stencil, whatever ``n``).

    Args:
        fn: ``fn(x, *args, **kwargs)`` returning an array; ``x`` a float array of any shape (the
            Jacobian is that of the flattened output with respect to the flattened ``x``, C order).
        sparsity: the pattern, shape ``(out.size, x.size)``: a Boolean NumPy array or a SciPy sparse
            array or matrix (its stored entries, explicit zeros included). A superset of the true
            non-zeros is exact too, at the price of possibly more colours.
        check_pattern: after the passes, check that every compressed entry that no pattern entry
            claims is zero, and raise if not (it costs one mask over the ``colours x out.size``
            compressed Jacobian). A missing non-zero that shares a colour with a listed entry of its
            row is added into that entry silently, as in any compressed recovery: this check catches
            the others only.
        chunk_size: at most this many colours per batched pass (torch.func's and :func:`tapegrad.jacfwd`'s
            ``chunk_size``); None (the default) sweeps them all in one pass. On a CPU, when the
            batched intermediates outgrow the caches (10^5 unknowns and 5 colours), ``chunk_size=1``
            can be faster; the results are the same.

    Returns:
        A function of ``(x, *args, **kwargs)`` returning a ``scipy.sparse.csr_array`` of shape
        ``(out.size, x.size)`` holding exactly the pattern's entries (in its sorted layout), of the
        dtype of ``fn``'s tangent output (``x``'s dtype for a float ``fn``). NumPy arrays only; the
        result is a SciPy array, so the call cannot run under grad, vmap or jit itself, but ``fn`` may
        be jitted (``sparse_jacfwd(tg.jit(f), S)``).

    Raises:
        TypeError: ``sparsity`` neither sparse nor a 2-D Boolean array; ``check_pattern`` not a bool (at
            ``sparse_jacfwd(...)``); ``x`` not a float array; the call under a transform (at the call).
        ValueError: ``chunk_size`` not a positive int or None (at ``sparse_jacfwd(...)``); the pattern's
            shape is not ``(out.size, x.size)``; with ``check_pattern``, a non-zero outside the pattern that
            the compression exposes (at the call).

    Example:
        >>> import numpy as np, scipy.sparse
        >>> import tapegrad as tg
        >>> f = lambda x: x[1:] * x[:-1]                 # out[i] reads x[i] and x[i + 1]
        >>> S = scipy.sparse.eye_array(4, 5) + scipy.sparse.eye_array(4, 5, k=1) != 0
        >>> J = tg.sparse_jacfwd(f, S)(np.arange(1.0, 6.0))  # 2 colours: 2 jvp passes, for any size
        >>> J.toarray()
        array([[2., 1., 0., 0., 0.],
               [0., 3., 2., 0., 0.],
               [0., 0., 4., 3., 0.],
               [0., 0., 0., 5., 4.]])
    """
    _check_options(check_pattern, chunk_size, "sparse_jacfwd")
    compressed = _Compressed(_pattern(sparsity, "sparse_jacfwd"), by_rows=False)

    @functools.wraps(fn)
    def jac_fn(x, *args, **kwargs):
        x = _differentiable_leaf(x, "sparse_jacfwd: x", "pass x as a float array")
        flat = reshape(x, (-1,)) if x.ndim != 1 else x
        out, jvp_fn = linearize(_flat_fn(fn, x, args, kwargs), flat)
        _check_shape(compressed, out.size, flat.size, "sparse_jacfwd")
        values = _sweep(jvp_fn, compressed.seeds(x.dtype), chunk_size,
                        np.zeros((0, out.size), dtype=out.dtype), "sparse_jacfwd")
        return _to_csr(compressed, values, "sparse_jacfwd", check_pattern)
    return jac_fn


def sparse_jacrev(fn: Callable[..., Any], sparsity: Any, *, check_pattern: bool = True,
                  chunk_size: int | None = None) -> Callable[..., Any]:
    """The Jacobian of ``fn`` with respect to its first argument, for a known sparsity pattern, by
    reverse mode in as many vjp passes as row colours.

    Rows of the pattern that share no column are coloured alike (DSATUR on the row intersection
    graph, ``SSᵀ``); ``fn`` runs once on the tape and the seeds, one per colour, are pulled back in
    one ``vmap``-batched backward pass. It is the cheaper one when columns are dense and rows sparse,
    e.g. many outputs each reading a few inputs of a shared block.

    Args:
        fn: as :func:`sparse_jacfwd`.
        sparsity: as :func:`sparse_jacfwd`.
        check_pattern: as :func:`sparse_jacfwd`, on the ``colours x x.size`` compressed Jacobian: a
            missing non-zero that shares a colour with a listed entry of its column is added into
            that entry silently; the others raise.
        chunk_size: as :func:`sparse_jacfwd`, colours of rows per batched backward pass.

    Returns:
        As :func:`sparse_jacfwd`; the dtype is that of the gradient with respect to ``x``.

    Raises:
        As :func:`sparse_jacfwd`.
    """
    _check_options(check_pattern, chunk_size, "sparse_jacrev")
    compressed = _Compressed(_pattern(sparsity, "sparse_jacrev"), by_rows=True)

    @functools.wraps(fn)
    def jac_fn(x, *args, **kwargs):
        x = _differentiable_leaf(x, "sparse_jacrev: x", "pass x as a float array")
        flat = reshape(x, (-1,)) if x.ndim != 1 else x
        out, vjp_fn = vjp(_flat_fn(fn, x, args, kwargs), flat)
        _check_shape(compressed, out.size, flat.size, "sparse_jacrev")
        values = _sweep(lambda u: vjp_fn(u)[0], compressed.seeds(out.dtype), chunk_size,
                        np.zeros((0, flat.size), dtype=x.dtype), "sparse_jacrev")
        return _to_csr(compressed, values, "sparse_jacrev", check_pattern)
    return jac_fn


def sparse_hessian(fn: Callable[..., Any], sparsity: Any, *, check_pattern: bool = True,
                   chunk_size: int | None = None) -> Callable[..., Any]:
    """The Hessian of the scalar function ``fn`` with respect to its first argument, for a known
    symmetric sparsity pattern: :func:`sparse_jacfwd` of ``tg.grad(fn)``, forward over reverse.

    The colouring is **column** colouring of the Hessian's pattern, as for any Jacobian; it does not
    exploit symmetry (star colouring, which can need fewer passes, e.g. about half for a wide band, is
    not implemented). Each pass is one Hessian-vector product; a banded Hessian of half-bandwidth
    ``b`` takes ``2b + 1`` passes, whatever its size.

    Args:
        fn: ``fn(x, *args, **kwargs)`` returning a real scalar; ``x`` a float array of any shape.
        sparsity: the Hessian's pattern, shape ``(x.size, x.size)`` and symmetric, as in
            :func:`sparse_jacfwd`.
        check_pattern: as :func:`sparse_jacfwd`.
        chunk_size: as :func:`sparse_jacfwd`.

    Returns:
        A function of ``(x, *args, **kwargs)`` returning the Hessian as a ``scipy.sparse.csr_array`` of
        shape ``(x.size, x.size)`` with exactly the pattern's entries.

    Raises:
        ValueError: the pattern not square or not symmetric (at ``sparse_hessian(...)``); as
            :func:`sparse_jacfwd` (at the call).
        TypeError: as :func:`sparse_jacfwd`; ``fn``'s output not a scalar (from ``tg.grad``).
    """
    pattern = _pattern(sparsity, "sparse_hessian")
    if pattern.shape[0] != pattern.shape[1] or (pattern != pattern.T).nnz:
        raise ValueError(f"sparse_hessian: sparsity must be square and symmetric (a Hessian's pattern), got shape "
                         f"{pattern.shape}{'' if pattern.shape[0] != pattern.shape[1] else ', not symmetric'}; "
                         f"pass S + S.T (or S | S.T) for a pattern S of one triangle")
    return sparse_jacfwd(grad(fn), pattern, check_pattern=check_pattern, chunk_size=chunk_size)
