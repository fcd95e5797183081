"""Sparse Jacobians and Hessians for a given pattern: ``sparse_jacfwd``, ``sparse_jacrev``, ``sparse_hessian``.

Compression by colouring (Curtis, Powell and Reid 1974; Coleman and Moré 1983; Gebremedhin, Manne and
Pothen, "What color is your Jacobian?", SIAM Review 2005): columns of the Jacobian that share no row
get one colour, so one forward pass along the sum of their basis vectors yields all of their
entries at once, each row of the result holding at most one of them. A Jacobian then costs as many
jvp passes as column colours (``sparse_jacfwd``), or as many vjp passes as row colours
(``sparse_jacrev``, the same construction on the transpose), instead of one per column or row. The
passes are batched: ``fn`` runs once (``linearize`` or ``vjp``) and ``vmap`` sweeps the seed matrix,
as :func:`tapegrad.jacfwd` sweeps the identity.

The colourings live in :mod:`tapegrad._colouring`: DSATUR (Brélaz 1979) on the column (row)
intersection graph for Jacobians, 5 colours for the 2-D five-point stencil, the optimum, where greedy
largest-first (networkx's default, SciPy's private ``group_columns``) finds 7; and for Hessians a star
colouring with symmetric direct recovery, which never takes more colours than column colouring and often
far fewer.

The pattern is given (a Boolean array or a SciPy sparse array/matrix of shape ``(out.size, x.size)``,
whose stored entries are the positions kept, explicit zeros included) or, with ``sparsity="auto"``,
detected by :func:`tapegrad.jacobian_sparsity` / :func:`tapegrad.hessian_sparsity` once per signature of
the arguments.
Results are SciPy ``csr_array``s with exactly the pattern's entries, in its canonical order; on CuPy,
``cupyx.scipy.sparse.csr_matrix`` (``tapegrad._backend.scipy_module``'s convention), the values gathered
on the device from the compressed Jacobian, the colouring and the gather indices made on the host once.
"""
from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np

import tapegrad.numpy as tnp
from tapegrad._api import _differentiable_leaf, grad, linearize, vjp
from tapegrad._backend import namespace_of, scipy_module, to_host
from tapegrad._colouring import color_columns, pattern_of, star_colouring, symmetric_gather
from tapegrad._core import Tracer
from tapegrad._structural import reshape


class Compressed:
    """A pattern, its colouring, and where each of its entries lies in the compressed Jacobian (colours x
    positions, read as one flat array): computed once per pattern, on the host, not per call.

    ``kind`` is ``"column"`` (forward mode: ``compressed[k, i] = J[i, j]`` for the ``j`` of colour ``k``),
    ``"row"`` (reverse mode: ``compressed[k, j] = J[i, j]`` for the ``i`` of colour ``k``) or ``"star"``
    (a symmetric Hessian, forward over reverse: ``compressed[k, i] = (H S)[i, k]``, each entry read from
    its own row or from its transpose's).
    """

    def __init__(self, pattern, kind: str):
        self.pattern, self.kind, self.by_rows = pattern, kind, kind == "row"
        rows = np.repeat(np.arange(pattern.shape[0]), np.diff(pattern.indptr))
        if kind == "star":
            self.colours = star_colouring(pattern)
        else:
            self.colours = color_columns(pattern.T if self.by_rows else pattern)
        self.count = int(self.colours.max()) + 1 if self.colours.size else 0
        self.width = pattern.shape[1] if self.by_rows else pattern.shape[0]
        # the compressed entry each pattern entry is summed into (forward and star alike: H S is a product)
        claimed = self.colours[rows] * self.width + pattern.indices if self.by_rows else \
            self.colours[pattern.indices] * self.width + rows
        self.gather = symmetric_gather(pattern, self.colours) if kind == "star" else claimed
        # compressed entries no pattern entry is summed into: zero unless the pattern misses a non-zero
        self.unclaimed = np.setdiff1d(np.arange(self.count * self.width), claimed)
        self._seeds: dict[tuple, Any] = {}
        self._indices: dict[Any, tuple] = {}

    def seeds(self, xp, dtype):
        """The seed matrix of this colouring, ``(colours, positions)`` in ``dtype`` on ``xp``'s device: row
        ``k`` the sum of the basis vectors of colour ``k``; made on the first call with that dtype."""
        key = (xp, np.dtype(dtype))
        if key not in self._seeds:
            seeds = np.zeros((self.count, self.colours.size), dtype=dtype)
            seeds[self.colours, np.arange(self.colours.size)] = 1
            seeds.flags.writeable = False  # kept for the next call
            self._seeds[key] = seeds if xp is np else xp.asarray(seeds)
        return self._seeds[key]

    def indices(self, xp) -> tuple:
        """``(gather, unclaimed, indices, indptr)`` on ``xp``'s device, copied there once: the colouring
        runs on the host, the values stay on the device."""
        if xp not in self._indices:
            arrays = (self.gather, self.unclaimed, self.pattern.indices, self.pattern.indptr)
            self._indices[xp] = arrays if xp is np else tuple(xp.asarray(a) for a in arrays)
        return self._indices[xp]


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


def _check_unclaimed(compressed, flat, unclaimed, api: str):
    """Raise where the compressed Jacobian ``flat`` holds a non-zero that no entry of the pattern is summed
    into: the pattern misses a non-zero there (the misses that land on a claimed position cannot be
    seen). On a device, one Boolean comes to the host; the positions only when there is an error."""
    stray = flat[unclaimed] != 0
    if not bool(stray.any()):
        return
    stray = compressed.unclaimed[to_host(stray)]
    k, i = divmod(int(stray[0]), compressed.width)
    members = [int(j) for j in np.flatnonzero(compressed.colours == k)[:8]]
    more = "..." if len(members) == 8 else ""
    where = f"column {i}, in one of the rows {members}{more}" if compressed.by_rows else \
        f"row {i}, in one of the columns {members}{more}"
    raise ValueError(f"{api}: the Jacobian has a non-zero that the sparsity pattern does not list, at {where} "
                     f"({stray.size} such compressed entries in all); pass a pattern that contains every "
                     f"non-zero (a superset is fine), or check_pattern=False to drop them unchecked")


def _to_csr(compressed, values, api: str, check_pattern: bool):
    """The pattern's entries read from the compressed Jacobian ``values`` (colours x positions), as a
    SciPy ``csr_array`` sharing the pattern's layout, or on CuPy a ``cupyx.scipy.sparse.csr_matrix`` (the
    values never leave the device)."""
    _refuse_traced(values, api)
    xp = namespace_of(values)
    gather, unclaimed, indices, indptr = compressed.indices(xp)
    flat = values.reshape(-1)
    if check_pattern:
        _check_unclaimed(compressed, flat, unclaimed, api)
    shape = compressed.pattern.shape
    if xp is np:
        import scipy.sparse as sp
        return sp.csr_array((flat[gather], indices.copy(), indptr.copy()), shape=shape)
    # cupyx.scipy.sparse has csr_matrix (no csr_array); copies, so that the cached indices stay ours
    return scipy_module(xp, "sparse").csr_matrix((flat[gather], indices.copy(), indptr.copy()), shape=shape)


def _sweep(fn, seeds, chunk_size: int | None, empty_shape: tuple, dtype):
    """``vmap(fn)`` over the rows of ``seeds``, at most ``chunk_size`` of them per batched pass (None: all
    at once), the passes' results stacked; zeros of ``empty_shape`` when there are no seeds (an empty
    pattern)."""
    if not len(seeds):
        return tnp.zeros(empty_shape, dtype=dtype)
    from tapegrad._vmap_api import vmap  # on first use: it imports optree (tapegrad._tree)
    mapped = vmap(fn)
    step = len(seeds) if chunk_size is None else chunk_size
    pieces = [mapped(seeds[start:start + step]) for start in range(0, len(seeds), step)]
    return pieces[0] if len(pieces) == 1 else tnp.concatenate(pieces)


def _forward_passes(fn, compressed, chunk_size: int | None, api: str):
    """``(x, *args, **kwargs) -> compressed Jacobian`` of ``fn`` (colours x out.size) by forward mode:
    ``fn`` linearised once, its jvp swept over the seeds (column or star colouring)."""
    def passes(x, *args, **kwargs):
        flat = reshape(x, (-1,)) if x.ndim != 1 else x
        out, jvp_fn = linearize(_flat_fn(fn, x, args, kwargs), flat)
        _check_shape(compressed, out.size, flat.size, api)
        return _sweep(jvp_fn, compressed.seeds(namespace_of(x), x.dtype), chunk_size, (0, out.size), out.dtype)
    return passes


def _reverse_passes(fn, compressed, chunk_size: int | None, api: str):
    """``(x, *args, **kwargs) -> compressed Jacobian`` of ``fn`` (colours x x.size) by reverse mode:
    ``fn`` taped once, its vjp swept over the seeds (row colouring)."""
    def passes(x, *args, **kwargs):
        flat = reshape(x, (-1,)) if x.ndim != 1 else x
        out, vjp_fn = vjp(_flat_fn(fn, x, args, kwargs), flat)
        _check_shape(compressed, out.size, flat.size, api)
        return _sweep(lambda u: vjp_fn(u)[0], compressed.seeds(namespace_of(x), out.dtype), chunk_size,
                      (0, flat.size), x.dtype)
    return passes


def _transform(fn, passes, compressed, check_pattern: bool, jit: bool, api: str):
    """The Jacobian function: ``passes`` (staged by :func:`tapegrad.jit` with ``jit``) and the recovery."""
    if jit:
        from tapegrad._jit.api import jit as stage
        passes = stage(passes)

    @functools.wraps(fn)
    def jac_fn(x, *args, **kwargs):
        x = _differentiable_leaf(x, f"{api}: x", "pass x as a float array")
        return _to_csr(compressed, passes(x, *args, **kwargs), api, check_pattern)
    return jac_fn


def _refuse_traced(values, api: str):
    if isinstance(values, Tracer):
        raise TypeError(f"{api} returns a SciPy sparse array, which cannot carry a traced value: it cannot run "
                        f"under grad, jvp, vmap or jit yet; differentiate or map the dense tg.jacfwd/jacrev "
                        f"instead, or call {api} outside the transform")


def _check_options(check_pattern, chunk_size, jit, api: str):
    for name, value in (("check_pattern", check_pattern), ("jit", jit)):
        if not isinstance(value, bool):
            raise TypeError(f"{api}: {name} must be a bool, got {value!r}")
    if chunk_size is not None and (isinstance(chunk_size, bool) or not isinstance(chunk_size, int) or chunk_size < 1):
        raise ValueError(f"{api}: chunk_size must be a positive int (at most that many colours per batched pass) "
                         f"or None (all at once), got {chunk_size!r}")


def sparse_jacfwd(fn: Callable[..., Any], sparsity: Any = "auto", *, check_pattern: bool = True,
                  chunk_size: int | None = None, jit: bool = False) -> Callable[..., Any]:
    """The Jacobian of ``fn`` with respect to its first argument, on its sparsity pattern (given, or
    detected by tracing), by forward mode in as many jvp passes as column colours.

    Columns of the pattern that share no row are coloured alike (DSATUR on the column intersection
    graph, computed once: here for a given pattern, at the first call for a detected one); ``fn`` runs
    once (:func:`tapegrad.linearize`) and the seeds, one per colour, are swept forward in one
    ``vmap``-batched pass. It is the cheaper one when rows are dense and columns sparse-ish, e.g. a
    stencil (5 colours for the 2-D five-point stencil, whatever ``n``).

    Args:
        fn: ``fn(x, *args, **kwargs)`` returning an array; ``x`` a float array of any shape (the
            Jacobian is that of the flattened output with respect to the flattened ``x``, C order).
        sparsity: the pattern, shape ``(out.size, x.size)``: a Boolean NumPy array or a SciPy sparse
            array or matrix (its stored entries, explicit zeros included). A superset of the true
            non-zeros is exact too, at the price of possibly more colours. ``"auto"`` (the default):
            detected by :func:`tapegrad.jacobian_sparsity` at the first call with each signature of
            the arguments (``x``'s shape, dtype and backend; each argument's shape and dtype, the
            values of integer and Boolean NumPy arrays and of Python ints, strings and other
            hashables), then coloured once and kept for later calls with that signature, so a Newton
            loop detects once. Detection reads no values of ``x`` or of float arguments (about 70 ms
            for the 10^5-unknown stencil, against 0.4 s for its colouring). An integer or Boolean
            *device* array argument (an index array or mask on CuPy) is keyed by shape only: pass the
            pattern yourself when its values change between calls.
        check_pattern: after the passes, check that every compressed entry that no pattern entry
            claims is zero, and raise if not (it costs one mask over the ``colours x out.size``
            compressed Jacobian). A missing non-zero that shares a colour with a listed entry of its
            row is added into that entry silently, as in any compressed recovery: this check catches
            the others only.
        chunk_size: at most this many colours per batched pass (torch.func's and :func:`tapegrad.jacfwd`'s
            ``chunk_size``); None (the default) sweeps them all in one pass. On a CPU, when the
            batched intermediates outgrow the caches (10^5 unknowns and 5 colours), ``chunk_size=1``
            can be faster; the results are the same.
        jit: stage the passes (``fn``'s linearisation and the batched sweep of the seeds) with
            :func:`tapegrad.jit`, once per shape and dtype of ``x`` and ``args``: a program with no
            per-primitive overhead, whose primal work is shared by the colours (at 10^5 unknowns
            about 2-3 times faster than the eager passes). ``fn`` must then be traceable by ``jit``:
            ``args`` and ``kwargs`` are traced inputs (arrays and Python scalars), and arrays ``fn``
            closes over are constants of the program, as with ``jit`` itself. False (the default): the
            passes run eagerly, any ``fn`` and arguments.

    Returns:
        A function of ``(x, *args, **kwargs)`` returning a ``scipy.sparse.csr_array`` of shape
        ``(out.size, x.size)`` holding exactly the pattern's entries (in its sorted layout), of the
        dtype of ``fn``'s tangent output (``x``'s dtype for a float ``fn``); for a CuPy ``x``, a
        ``cupyx.scipy.sparse.csr_matrix`` on its device (the values are not copied to the host). The
        result is a SciPy array, so the call cannot run under grad, vmap or jit itself, but ``fn`` may
        be jitted (``sparse_jacfwd(tg.jit(f), S)``).

    Raises:
        TypeError: ``sparsity`` neither sparse nor a 2-D Boolean array; ``check_pattern`` or ``jit`` not a
            bool (at ``sparse_jacfwd(...)``); ``x`` not a float array; the call under a transform; with
            ``jit``, what :func:`tapegrad.jit` raises for an argument it cannot trace (at the call).
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
    _check_options(check_pattern, chunk_size, jit, "sparse_jacfwd")
    return by_colouring(fn, sparsity, "forward", "sparse_jacfwd", check_pattern=check_pattern, chunk_size=chunk_size,
                        jit=jit)


def sparse_jacrev(fn: Callable[..., Any], sparsity: Any = "auto", *, check_pattern: bool = True,
                  chunk_size: int | None = None, jit: bool = False) -> Callable[..., Any]:
    """The Jacobian of ``fn`` with respect to its first argument, on its sparsity pattern (given, or
    detected by tracing), by reverse mode in as many vjp passes as row colours.

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
        jit: as :func:`sparse_jacfwd`: the taped run and the batched backward sweep as one program.

    Returns:
        As :func:`sparse_jacfwd`; the dtype is that of the gradient with respect to ``x``.

    Raises:
        As :func:`sparse_jacfwd`.
    """
    _check_options(check_pattern, chunk_size, jit, "sparse_jacrev")
    return by_colouring(fn, sparsity, "reverse", "sparse_jacrev", check_pattern=check_pattern, chunk_size=chunk_size,
                        jit=jit)


_COLOURINGS = ("star", "column")


def sparse_hessian(fn: Callable[..., Any], sparsity: Any = "auto", *, colouring: str = "star",
                   check_pattern: bool = True, chunk_size: int | None = None,
                   jit: bool = False) -> Callable[..., Any]:
    """The Hessian of the scalar function ``fn`` with respect to its first argument, on its symmetric
    sparsity pattern (given, or detected by tracing), in as many Hessian-vector products (forward over
    reverse) as colours.

    ``colouring="star"`` (the default) exploits symmetry: a star colouring of the pattern's adjacency
    graph (Gebremedhin, Manne and Pothen, SIAM Review 2005: adjacent vertices differ and every path on
    four vertices has three colours) lets each ``H[i, j]`` be read from ``H S`` in row ``i`` at ``j``'s
    colour when ``j`` is the only vertex of that colour in row ``i``, else in row ``j`` at ``i``'s colour
    (symmetric direct recovery). It never needs more colours than column colouring, and often far
    fewer: 2 for an arrow pattern (a dense row and column and the diagonal) where column colouring
    needs ``n``. On a band of half-bandwidth ``b`` both take ``2b + 1``, the least any direct recovery
    can (fewer, ``b + 1``, needs recovery by substitution, which is not implemented).
    ``colouring="column"`` is :func:`sparse_jacfwd` of ``tg.grad(fn)``: column (distance-2) colouring,
    no symmetry, each entry read in its own row.

    Args:
        fn: ``fn(x, *args, **kwargs)`` returning a real scalar; ``x`` a float array of any shape.
        sparsity: the Hessian's pattern, shape ``(x.size, x.size)`` and symmetric, as in
            :func:`sparse_jacfwd`; ``"auto"`` (the default): detected by
            :func:`tapegrad.hessian_sparsity` once per signature of the arguments, as in
            :func:`sparse_jacfwd`.
        colouring: ``"star"`` or ``"column"``, as above; both give the same Hessian (up to rounding:
            star recovery reads ``H[i, j]`` and ``H[j, i]`` from the same product).
        check_pattern: as :func:`sparse_jacfwd`, on the ``colours x x.size`` product ``H S``.
        chunk_size: as :func:`sparse_jacfwd`.
        jit: as :func:`sparse_jacfwd`: the gradient's linearisation and the Hessian-vector products as
            one program.

    Returns:
        A function of ``(x, *args, **kwargs)`` returning the Hessian as a ``scipy.sparse.csr_array`` (on
        CuPy a ``cupyx.scipy.sparse.csr_matrix``) of shape ``(x.size, x.size)`` with exactly the
        pattern's entries, exactly symmetric with ``colouring="star"``.

    Raises:
        ValueError: the pattern not square or not symmetric, or ``colouring`` not one of ``"star"``,
            ``"column"`` (at ``sparse_hessian(...)``); as :func:`sparse_jacfwd` (at the call).
        TypeError: as :func:`sparse_jacfwd`; ``fn``'s output not a scalar (from ``tg.grad``).
    """
    _check_options(check_pattern, chunk_size, jit, "sparse_hessian")
    if colouring not in _COLOURINGS:
        raise ValueError(f"sparse_hessian: colouring must be 'star' (symmetric recovery, fewer passes) or 'column' "
                         f"(as sparse_jacfwd of grad), got {colouring!r}")
    return by_colouring(fn, sparsity, colouring, "sparse_hessian", check_pattern=check_pattern,
                        chunk_size=chunk_size, jit=jit)


def by_colouring(fn, sparsity, kind: str, api: str, *, check_pattern: bool = True, chunk_size: int | None = None,
                 jit: bool = False):
    """The transform behind :func:`sparse_jacfwd` (``kind="forward"``), :func:`sparse_jacrev`
    (``"reverse"``) and :func:`sparse_hessian` (``"star"`` or ``"column"``), the options checked by the
    caller; ``api`` names the caller in errors (``tapegrad.scipy.optimize`` calls it with its own name).

    Raises:
        TypeError: ``sparsity`` neither sparse nor a 2-D Boolean array.
        ValueError: a Hessian's pattern not square and symmetric.
    """
    if isinstance(sparsity, str) and sparsity == "auto":
        return _detected(fn, kind, api, check_pattern=check_pattern, chunk_size=chunk_size, jit=jit)
    pattern = pattern_of(sparsity, api)
    if kind in ("forward", "reverse"):
        compressed = Compressed(pattern, "column" if kind == "forward" else "row")
        passes = (_forward_passes if kind == "forward" else _reverse_passes)(fn, compressed, chunk_size, api)
        return _transform(fn, passes, compressed, check_pattern, jit, api)
    if pattern.shape[0] != pattern.shape[1] or (pattern != pattern.T).nnz:
        raise ValueError(f"{api}: sparsity must be square and symmetric (a Hessian's pattern), got shape "
                         f"{pattern.shape}{'' if pattern.shape[0] != pattern.shape[1] else ', not symmetric'}; "
                         f"pass S + S.T (or S | S.T) for a pattern S of one triangle")
    compressed = Compressed(pattern, kind)
    return _transform(fn, _forward_passes(grad(fn), compressed, chunk_size, api), compressed, check_pattern, jit, api)


def _detected(fn, kind: str, api: str, **options):
    """``by_colouring`` on the pattern that :func:`tapegrad.jacobian_sparsity` (a Hessian's:
    :func:`tapegrad.hessian_sparsity`) detects at the first call with each signature of the arguments
    (:func:`_signature`), coloured then and reused by later calls with that signature."""
    from tapegrad._sparsity import hessian_sparsity, jacobian_sparsity
    detect = jacobian_sparsity if kind in ("forward", "reverse") else hessian_sparsity
    transforms: dict[tuple, Callable] = {}

    @functools.wraps(fn)
    def jac_fn(x, *args, **kwargs):
        x = _differentiable_leaf(x, f"{api}: x", "pass x as a float array")
        key = _signature(x, args, kwargs)
        transform = transforms.get(key)
        if transform is None:
            pattern = detect(fn, x, *args, **kwargs)
            transform = transforms[key] = by_colouring(fn, pattern, kind, api, **options)
        return transform(x, *args, **kwargs)
    return jac_fn


def _signature(x, args, kwargs) -> tuple:
    """What decides a detected pattern: ``x``'s shape, dtype and backend, and each argument's structure,
    an array's shape and dtype (an integer or Boolean host array's values too: an index array or a mask
    makes the pattern exact where it selects), a Python float's type, another value itself (hashable)
    or its identity."""
    from tapegrad import _tree
    leaves, treedef = _tree.tree_flatten((args, kwargs))
    return (x.shape, np.dtype(x.dtype), namespace_of(x), treedef, tuple(_leaf_key(leaf) for leaf in leaves))


def _leaf_key(leaf):
    if type(leaf) in (float, complex):  # data, as a float array is: its value does not change the pattern
        return type(leaf)
    if hasattr(leaf, "shape") and hasattr(leaf, "dtype"):
        values = leaf.tobytes() if isinstance(leaf, np.ndarray) and leaf.dtype.kind in "biu" else None
        return type(leaf), leaf.shape, np.dtype(leaf.dtype), values
    try:
        hash(leaf)
    except TypeError:
        return type(leaf), id(leaf)
    return type(leaf), leaf
