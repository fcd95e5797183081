"""Graph colourings that compress a sparse Jacobian or Hessian, and where each entry is read back.

- **Column colouring** (Curtis, Powell and Reid 1974; Coleman and Moré 1983): columns of a Jacobian that
  share no row get one colour, a proper colouring of the column intersection graph (the pattern of
  ``SᵀS``). The colouring is DSATUR (Brélaz 1979).
- **Star colouring** (Coleman and Moré 1984; Gebremedhin, Manne and Pothen, "What color is your
  Jacobian? Graph coloring for computing derivatives", SIAM Review 47(4), 2005, the greedy star
  colouring): for a symmetric pattern, a proper colouring of its adjacency graph in which every path
  on four vertices uses at least three colours. Then each off-diagonal ``H[i, j]`` is alone in its
  colour in row ``i`` or in row ``j``, so it is read directly from ``H S`` (symmetric direct recovery),
  with no more colours than a column colouring and often far fewer (an arrow pattern: 2 against ``n``).

All of it runs once per pattern, on the host (the pattern is static).
"""
from __future__ import annotations

import heapq
from typing import cast

import numpy as np


def pattern_of(sparsity, api: str):
    """``sparsity`` as a canonical Boolean ``csr_array`` (sorted indices, no duplicates): its stored
    entries are the positions a Jacobian may hold.

    Raises:
        TypeError: ``sparsity`` neither a SciPy sparse array or matrix nor a 2-D Boolean array.
    """
    import scipy.sparse as sp  # SciPy is needed here only: `import tapegrad` stays without it
    if sp.issparse(sparsity):
        pattern = sp.csr_array(sparsity, copy=True)
        pattern.data = np.ones(pattern.nnz, dtype=bool)  # a stored zero is still a position of the pattern
    else:
        dense = np.asarray(sparsity)
        if dense.ndim != 2 or dense.dtype != bool:
            raise TypeError(f"{api}: sparsity must be 'auto', a scipy.sparse array or matrix or a 2-D Boolean array "
                            f"of shape (out.size, x.size), got {type(sparsity).__name__} with dtype {dense.dtype} "
                            f"and shape {dense.shape}; pass e.g. jacobian != 0, scipy.sparse.csr_array(mask), or "
                            f"'auto' to detect it by tracing")
        pattern = sp.csr_array(dense)
    pattern.sum_duplicates()  # also sorts the indices: the layout the result shares
    return pattern


def _ints(a: np.ndarray) -> list[int]:
    """``a``'s items as a list of Python ints, which the colourings' loops read faster than an array's. Cast,
    as NumPy's stubs type ``tolist()`` by a number of dimensions they do not know here (2.2's give a union)."""
    return cast("list[int]", a.tolist())


def _dsatur(indptr: np.ndarray, indices: np.ndarray) -> np.ndarray:
    """A proper colouring of the graph with adjacency lists ``indices[indptr[v]:indptr[v + 1]]`` (self
    loops ignored) by DSATUR: the next vertex is the uncoloured one with the most distinct colours
    among its neighbours (ties: the higher degree, then the lower index), given the smallest colour
    none of them has. A heap with lazy deletion keeps it O(E log V)."""
    n = len(indptr) - 1
    ptr, adj, degree = _ints(indptr), _ints(indices), _ints(np.diff(indptr))
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


def color_columns(pattern) -> np.ndarray:
    """A colour (0, 1, ...) for each column of the Boolean sparse ``pattern`` such that no two columns of
    one colour have an entry in the same row, by DSATUR on the column intersection graph (``SᵀS``)."""
    import scipy.sparse as sp
    s = sp.csr_array(pattern, dtype=np.int32)  # int: a Boolean product would be fine, but SciPy upcasts anyway
    s.data[:] = 1
    graph = (s.T @ s).tocsr()
    return _dsatur(graph.indptr, graph.indices)


def star_colouring(pattern) -> np.ndarray:
    """A star colouring of the adjacency graph of the square symmetric Boolean ``pattern`` (an edge
    ``i - j`` for each stored off-diagonal entry): a colour (0, 1, ...) per vertex, adjacent vertices
    differing, and no path on four vertices coloured with two colours only.

    Greedy, as Gebremedhin, Manne and Pothen (2005) colour a star colouring: vertices in order of
    decreasing degree (ties: the lower index), each given the smallest colour that keeps the coloured
    part a star colouring. For a vertex ``v`` that means avoiding the colours of (a) its coloured
    neighbours ``w``; (b) each coloured ``x`` on a path ``v - w - x - y`` with ``y`` coloured like ``w``
    (``v`` coloured like ``x`` would make it two-coloured); (c) each coloured ``y`` on a path
    ``w' - v - w - y`` with ``w'`` coloured like ``w``. Keeping, for every vertex, how many of its
    coloured neighbours have each colour makes both tests O(1), so the whole is O(n d²) for degree
    ``d`` rather than the O(n d³) of a search for the fourth vertex.
    """
    n = pattern.shape[0]
    ptr, adj = _ints(pattern.indptr), _ints(pattern.indices)
    neighbours = [[u for u in adj[ptr[v]:ptr[v + 1]] if u != v] for v in range(n)]
    colour = [-1] * n
    seen: list[dict[int, int]] = [{} for _ in range(n)]  # per vertex: colour -> its coloured neighbours of it
    for v in _ints(np.argsort(-np.diff(pattern.indptr), kind="stable")):
        forbidden = set()
        for w in neighbours[v]:
            cw = colour[w]
            if cw < 0:
                continue
            forbidden.add(cw)                                    # (a)
            twice = seen[v][cw] >= 2                             # another neighbour of v has w's colour: (c)
            for x in neighbours[w]:
                cx = colour[x]
                if cx < 0 or x == v:
                    continue
                if twice or seen[x].get(cw, 0) >= 2:             # (c), or (b): x has a y != w coloured like w
                    forbidden.add(cx)
        c = 0
        while c in forbidden:
            c += 1
        colour[v] = c
        for u in neighbours[v]:
            seen[u][c] = seen[u].get(c, 0) + 1
    return np.asarray(colour, dtype=np.intp)


def symmetric_gather(pattern, colours: np.ndarray) -> np.ndarray:
    """Where each stored entry of the symmetric ``pattern`` lies in ``H S`` read as ``(colours, n)``
    (``compressed[k, i] = sum of H[i, j] over the j of colour k``), for a star colouring: ``(k, i)`` with
    ``k = colours[j]`` when ``j`` is the only vertex of colour ``k`` in row ``i``, else ``(colours[i], j)``
    (then ``i`` is the only one of its colour in row ``j``: a star colouring guarantees one of the two).
    ``H[j, i]`` is read from the same position as ``H[i, j]``, so the Hessian comes out exactly symmetric.

    Raises:
        ValueError: ``colours`` is not a star colouring of ``pattern`` (neither position holds the entry alone).
    """
    n = pattern.shape[0]
    count = int(colours.max()) + 1 if colours.size else 0
    rows = np.repeat(np.arange(n), np.diff(pattern.indptr))
    cols = pattern.indices
    members = np.bincount(rows * count + colours[cols], minlength=n * count)  # entries of each (row, colour)
    alone_in_row = members[rows * count + colours[cols]] == 1
    alone_in_column = members[cols * count + colours[rows]] == 1
    if not np.all(alone_in_row | alone_in_column):
        bad = int(np.flatnonzero(~(alone_in_row | alone_in_column))[0])
        raise ValueError(f"the colouring is not a star colouring: entry ({rows[bad]}, {cols[bad]}) shares its "
                         f"colour with another entry in both its row and its column")
    gather = np.where(alone_in_row, colours[cols] * n + rows, colours[rows] * n + cols)
    # H[j, i] is read where H[i, j] is (i < j): one value per pair, so the result is exactly symmetric
    return np.where(rows <= cols, gather, gather[_transposed_entry(pattern)])


def _transposed_entry(pattern) -> np.ndarray:
    """For each stored entry ``(i, j)`` of the symmetric ``pattern``, the position of ``(j, i)`` among its
    stored entries (both in the canonical CSR order)."""
    import scipy.sparse as sp
    ids = sp.csr_array((np.arange(pattern.nnz), pattern.indices, pattern.indptr), shape=pattern.shape)
    transposed = ids.T.tocsr()
    transposed.sort_indices()  # the same layout as pattern's: it is symmetric
    return transposed.data
