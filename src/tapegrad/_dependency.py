"""How a primitive's outputs depend on its inputs: the rules that sparsity detection propagates
(``tg.jacobian_sparsity``, docs/sparsity.md).

Detection stages a function and walks its program equation by equation, keeping for each value a
*dependency matrix*: a Boolean SciPy ``csr_array`` with one row per element of the value (raveled in
C order) and one column per element of the input, True where the element may depend on that input
element (where the Jacobian may hold a non-zero). A primitive's rule maps its operands' matrices to
its results': ``rule(node) -> list`` with one matrix per result, None standing for "depends on no
input" (a constant, an integer or Boolean value, whose Jacobian is zero).

The kinds below cover most primitives; each is exact for generic values (it marks an entry only where
some values of the operands make it non-zero), except where its docstring says it is conservative:

- :func:`elementwise`: each output element depends on the operand elements at its position, after
  broadcasting;
- :class:`Structural`: copies (reshape, transpose, slicing, gathers, concatenate, pad, broadcast_to,
  ``where``...): the map is found by running the primitive's own impl on index arrays;
- :func:`reduction` (``axis``/``keepdims`` parameters) and :func:`cumulative` (``axis``): groupings;
- :class:`Contraction`: ``matmul`` and ``einsum``, every element along a contracted axis;
- :class:`Update`: scatter-adds and at-updates (``index_add``, ``index_set``, ``scatter_add``);
- :func:`dense`: every output element on every input element of every operand (the default of a
  primitive that declares nothing, which detection reports);
- :func:`none`: no dependency (a primitive whose derivative is zero is treated so without a rule).

Control flow declares rules of its own (``tapegrad._control_flow``), which propagate through their
staged sub-programs with :attr:`Node.propagate`.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from tapegrad._core import Primitive


class Node:
    """What a dependency rule sees of one equation (detection makes it; a rule reads its attributes,
    which are its arguments).

    Args:
        prim: the primitive.
        deps: one per operand: its dependency matrix (a Boolean ``scipy.sparse.csr_array`` of shape
            ``(operand.size, width)``), or None where the operand depends on no input.
        values: one per operand: its value as a host NumPy array (or Python scalar) where detection
            knows it (a literal, a constant of the program, or computed from those alone), else None.
        avals: one ``ShapedArray`` per operand.
        out_avals: one ``ShapedArray`` per result.
        params: the equation's static parameters.
        width: the number of input elements (the columns of every matrix).
        propagate: ``propagate(program, deps, values) -> (deps, values)``: the dependency matrices
            (or None) and known values (or None) of a staged sub-program's outputs, given one matrix
            (or None) and one value (or None) per input variable of the program (its constants are
            known to it): how control flow recurses.
    """

    __slots__ = ("prim", "deps", "values", "avals", "out_avals", "params", "width", "propagate")

    def __init__(self, prim: Primitive, deps: list, values: list, avals: list, out_avals: list, params: dict,
                 width: int, propagate: Callable) -> None:
        self.prim, self.deps, self.values, self.avals = prim, deps, values, avals
        self.out_avals, self.params, self.width, self.propagate = out_avals, params, width, propagate


class Undetermined(Exception):
    """Raised by a rule that cannot say how this equation's outputs depend on its inputs (a sub-program
    that cannot be staged): detection then gives it the dense pattern and reports it, as for a
    primitive without a rule."""


# ---- matrices --------------------------------------------------------------------------------------
def _sp():
    import scipy.sparse as sp  # SciPy is needed only here: `import tapegrad` stays without it
    return sp


def size_of(shape: Sequence[int]) -> int:
    """The number of elements of an array of ``shape``."""
    return int(np.prod(shape, dtype=np.int64))


def connection(rows: np.ndarray, cols: np.ndarray, shape: tuple[int, int]):
    """The Boolean connectivity matrix with True at ``(rows[i], cols[i])`` (duplicates merged)."""
    sp = _sp()
    m = sp.csr_array((np.ones(len(rows), dtype=bool), (rows, cols)), shape=shape)
    m.sum_duplicates()
    return m


def apply(connectivity, dep):
    """The dependency of a value whose element ``i`` reads the elements ``j`` of an operand where
    ``connectivity[i, j]``: ``connectivity @ dep``, None for an operand without dependency."""
    if dep is None:
        return None
    out = connectivity @ dep
    out.sum_duplicates()
    return out


def gather(index: np.ndarray, dep):
    """The rows ``index`` (flat, -1 for none) of ``dep``: a value whose elements each copy at most one
    operand element."""
    if dep is None:
        return None
    index = np.asarray(index, dtype=np.int64).ravel()
    if index.size == dep.shape[0] and (index == np.arange(index.size)).all():
        return dep  # every row in place (a reshape): nothing to copy
    if index.size and index.min() >= 0:
        return dep[index]  # row indexing of a csr_array: no product needed
    valid = np.flatnonzero(index >= 0)
    return apply(connection(valid, index[valid], (index.size, dep.shape[0])), dep)


def union(parts: Sequence[Any]):
    """The elementwise OR of the matrices in ``parts`` (None: no dependency), None if all are None."""
    out = None
    for part in parts:
        if part is not None:
            out = part if out is None else out + part
    return out


def same(a, b) -> bool:
    """Whether two dependency matrices (or None) hold the same entries."""
    if a is None or b is None:
        return (a is None or a.nnz == 0) and (b is None or b.nnz == 0)
    return a.shape == b.shape and (a != b).nnz == 0


def everything(rows: int, deps: Sequence[Any], width: int):
    """A ``(rows, width)`` matrix whose every row holds every column held by any of ``deps``."""
    held = [d.indices for d in deps if d is not None and d.nnz]
    if not held:
        return None
    cols = np.unique(np.concatenate(held))
    sp = _sp()
    return sp.csr_array((np.ones(rows * cols.size, dtype=bool), np.tile(cols, rows),
                         np.arange(rows + 1, dtype=np.int64) * cols.size), shape=(rows, width))


# ---- the kinds -------------------------------------------------------------------------------------
def none(node: Node) -> list:
    """No result depends on any input (a derivative that is zero everywhere)."""
    return [None] * len(node.out_avals)


def dense(node: Node) -> list:
    """Conservative: every element of every result depends on every input element that any operand
    depends on. The default of a primitive without a rule."""
    return [everything(size_of(a.shape), node.deps, node.width) for a in node.out_avals]


def broadcast_index(shape: Sequence[int], out_shape: Sequence[int]) -> np.ndarray:
    """For each element of ``out_shape`` (raveled), the flat index of the element of an operand of
    ``shape`` that NumPy broadcasting reads there."""
    flat = np.arange(size_of(shape), dtype=np.int64).reshape(tuple(shape))
    return np.broadcast_to(flat, tuple(out_shape)).ravel()


def elementwise(node: Node) -> list:
    """Each output element depends on the operand elements at its position, after NumPy broadcasting
    (every result of a several-results elementwise primitive alike). Exact for generic values."""
    out_shape = tuple(node.out_avals[0].shape)
    parts = []
    for dep, aval in zip(node.deps, node.avals):
        if dep is not None:
            same_shape = tuple(aval.shape) == out_shape
            parts.append(dep if same_shape else gather(broadcast_index(aval.shape, out_shape), dep))
    return [union(parts)] * len(node.out_avals)


def product(node: Node) -> list:
    """A product (``multiply``): elementwise, but a factor known to be zero at a position (a zero
    cotangent in a gradient's program, a mask of zeros and ones) cuts the other factor's dependency
    there, since the product is then zero whatever that factor is. Exact for generic values."""
    out_shape = tuple(node.out_avals[0].shape)
    parts = []
    for k, (dep, aval) in enumerate(zip(node.deps, node.avals)):
        if dep is None:
            continue
        index = broadcast_index(aval.shape, out_shape)
        other = node.values[1 - k]
        if other is not None:
            index = np.where(np.broadcast_to(np.asarray(other) != 0, out_shape).ravel(), index, -1)
        parts.append(gather(index, dep))
    return [union(parts)]


class Structural:
    """Copies: each output element is a copy of at most one element of one operand, where it is is
    found by running the primitive's own impl on index arrays.

    The data operands are replaced by ``arange(size) + 1`` (int64; the others of them by zeros), the
    other operands (integer indices, masks) by their values; the impl runs twice, the second time
    with the indices shifted by the operand's size, so that an output element copied from the operand
    is told apart from a constant (a pad value) by having moved by exactly that shift.

    Args:
        data: the positions of the operands that are copied (None: all); the others must be known
            values for the exact map.
        otherwise: the rule used where one of the other operands is not known (a traced index):
            :func:`dense` by default.
    """

    def __init__(self, data: Sequence[int] | None = None, otherwise: Callable = dense) -> None:
        self.data = None if data is None else tuple(data)
        self.otherwise = otherwise

    def __call__(self, node: Node) -> list:
        data = range(len(node.deps)) if self.data is None else self.data
        if any(node.values[k] is None for k in range(len(node.deps)) if k not in data):
            return self.otherwise(node)
        outs: list = [None] * len(node.out_avals)
        for k in data:
            if node.deps[k] is not None:
                for r, index in enumerate(self.sources(node, k, data)):
                    outs[r] = union([outs[r], gather(index, node.deps[k])])
        return outs

    @staticmethod
    def sources(node: Node, k: int, data: Sequence[int]) -> list:
        """For each result, the flat index in operand ``k`` of the element each output element copies
        (-1: none)."""
        n = size_of(node.avals[k].shape)
        runs = []
        for shift in (0, n):
            args = [np.zeros(tuple(a.shape), dtype=np.int64) if j in data else node.values[j]
                    for j, a in enumerate(node.avals)]
            args[k] = np.arange(1 + shift, n + 1 + shift, dtype=np.int64).reshape(tuple(node.avals[k].shape))
            try:
                out = node.prim.impl(*args, **node.params)
            except Exception as error:  # noqa: BLE001 (an impl that takes no integers: reported, dense)
                raise Undetermined(f"its impl failed on index arrays: {error}") from error
            runs.append(out if node.prim.multiple_results else [out])
        return [np.where(np.asarray(b) - np.asarray(a) == n, np.asarray(a) - 1, -1).ravel()
                for a, b in zip(*runs)]


def reduction(node: Node) -> list:
    """A reduction over ``axis`` (None: all; a tuple of non-negative ints) with ``keepdims``: each output
    element depends on the elements it reduces. Exact for ``sum`` and ``prod``; conservative for
    ``amax``/``amin``, whose derivative reaches only the extreme element (known from values alone)."""
    (x,), axis = node.avals, node.params["axis"]  # keepdims changes no element's order: not read
    shape = tuple(x.shape)
    axis = tuple(range(len(shape))) if axis is None else tuple(axis)
    kept = tuple(1 if i in axis else d for i, d in enumerate(shape))
    group = broadcast_index(kept, shape)  # for each input element, its output element
    m = connection(group, np.arange(group.size), (size_of(kept), group.size))
    return [apply(m, node.deps[0])]


def cumulative(node: Node) -> list:
    """``cumsum``/``cumprod`` along ``axis`` (None: the raveled array): each output element depends on
    the elements before it, itself included, on its line. Exact for generic values."""
    (x,), axis = node.avals, node.params.get("axis")
    shape = (size_of(x.shape),) if axis is None else tuple(x.shape)
    axis = 0 if axis is None else axis % len(shape)
    flat = np.arange(size_of(shape), dtype=np.int64).reshape(shape)
    lines = np.moveaxis(flat, axis, -1).reshape(-1, shape[axis])  # one row per line, along the axis
    i, j = np.tril_indices(shape[axis])
    rows, cols = lines[:, i].ravel(), lines[:, j].ravel()
    return [apply(connection(rows, cols, (flat.size, flat.size)), node.deps[0])]


def letter_map(letters: str, shape: Sequence[int], out_letters: str, out_shape: Sequence[int]):
    """The connectivity of an output (``out_letters``) on one factor (``letters``) of a product summed
    over the letters the output lacks (an einsum term): output and factor elements are connected when
    they agree on every letter both have (a factor's axis of length 1 against a longer output axis is
    broadcast, and agrees with all); a letter repeated in the factor (a diagonal) keeps only the
    elements whose coordinates agree on it."""
    shape, out_shape = tuple(shape), tuple(out_shape)
    coords = np.indices(shape).reshape(len(shape), -1) if shape else np.zeros((0, 1), dtype=np.int64)
    keep = np.ones(coords.shape[1], dtype=bool)
    first: dict[str, int] = {}
    for a, c in enumerate(letters):
        if c in first:
            keep &= coords[a] == coords[first[c]]
        else:
            first[c] = a
    shared = [c for c in first if c in out_letters and shape[first[c]] == out_shape[out_letters.index(c)]]
    sizes = [shape[first[c]] for c in shared]
    in_key = np.ravel_multi_index(tuple(coords[first[c]] for c in shared), sizes) if shared else \
        np.zeros(coords.shape[1], dtype=np.int64)
    out_coords = np.indices(out_shape).reshape(len(out_shape), -1) if out_shape else np.zeros((0, 1), np.int64)
    out_key = np.ravel_multi_index(tuple(out_coords[out_letters.index(c)] for c in shared), sizes) if shared else \
        np.zeros(out_coords.shape[1], dtype=np.int64)
    keys = size_of(sizes)
    onehot_out = connection(np.arange(out_key.size), out_key, (out_key.size, keys))
    kept = np.flatnonzero(keep)
    onehot_in = connection(kept, in_key[kept], (coords.shape[1], keys))
    return onehot_out @ onehot_in.T


class Contraction:
    """A sum of products (``matmul``, ``einsum``): each output element depends on every element of each
    factor along the contracted letters. Of two factors, where the other is a known constant (a
    matrix closed over), only the products with its non-zero elements count, so ``x @ A`` has the
    pattern of ``A``; exact for generic values. Conservative where a constant with zeros meets two
    or more traced factors.

    Args:
        subscripts: ``subscripts(node) -> (letters per operand, output letters)``.
    """

    def __init__(self, subscripts: Callable[[Node], tuple[Sequence[str], str]]) -> None:
        self.subscripts = subscripts

    def __call__(self, node: Node) -> list:
        ins, out = self.subscripts(node)
        out_shape = node.out_avals[0].shape
        parts = []
        for k, (letters, aval, dep) in enumerate(zip(ins, node.avals, node.deps)):
            if dep is not None:
                m = letter_map(letters, aval.shape, out, out_shape)
                if len(ins) == 2 and node.values[1 - k] is not None:
                    m = self.through_constant(m, letters, aval.shape, ins[1 - k], node.values[1 - k], out, out_shape)
                parts.append(apply(m, dep))
        return [union(parts)]

    @staticmethod
    def through_constant(m, letters, shape, other_letters, other, out, out_shape):
        """``m`` (output on this factor) kept where some non-zero element of the known factor ``other``
        agrees with both on their shared letters: ``m .* (P_out,other diag(other != 0) P_other,this)``."""
        other = np.asarray(other)
        mask = connection(*(np.flatnonzero(other.ravel() != 0),) * 2, (other.size, other.size))
        with_other = letter_map(other_letters, other.shape, out, out_shape)  # (out, other)
        other_this = letter_map(letters, shape, other_letters, other.shape)  # (other, this): shared letters agree
        reach = with_other @ mask @ other_this
        kept = m.multiply(reach).tocsr()
        kept.eliminate_zeros()
        return kept.astype(bool)


class Update:
    """An update at an index (``x[idx] += y``, ``x[idx] = y``, or zeros with ``y`` added at it): the
    written positions come from the gather of the same index (``getitem``) run on an index array.

    Args:
        gather_prim: the gather of the same index spelling (``getitem``).
        base: the position of ``x`` among the operands, or None (zeros of the ``shape`` parameter).
        overwrite: whether written positions lose ``x``'s dependency (``index_set``); a position
            written twice keeps both writes' (conservative: the last one wins).
    """

    def __init__(self, gather_prim: Primitive, base: int | None, overwrite: bool) -> None:
        self.gather_prim, self.base, self.overwrite = gather_prim, base, overwrite

    def __call__(self, node: Node) -> list:
        y = 0 if self.base is None else self.base + 1
        indices = node.values[y + 1:]
        if any(v is None for v in indices):
            return dense(node)
        shape = tuple(node.out_avals[0].shape)
        n = size_of(shape)
        params = {"idx": node.params["idx"]}
        written = np.asarray(self.gather_prim.impl(np.arange(n, dtype=np.int64).reshape(shape), *indices, **params))
        source = broadcast_index(node.avals[y].shape, written.shape)  # y broadcast to the written part
        scattered = apply(connection(written.ravel(), source, (n, size_of(node.avals[y].shape))), node.deps[y])
        base = None if self.base is None else node.deps[self.base]
        if base is not None and self.overwrite:
            kept = np.ones(n, dtype=bool)
            kept[written.ravel()] = False
            base = gather(np.where(kept, np.arange(n), -1), base)
        return [union([base, scattered])]


KINDS: dict[str, Callable[[Node], list]] = {
    "elementwise": elementwise, "product": product, "structural": Structural(), "reduction": reduction,
    "cumulative": cumulative, "dense": dense, "none": none}


def def_dependency(prim: Primitive, rule: str | Callable[[Node], list], *more: Primitive) -> None:
    """Declare how ``prim``'s outputs depend on its inputs, for sparsity detection
    (``tg.jacobian_sparsity``, ``tg.hessian_sparsity``; docs/sparsity.md).

    Args:
        prim: the primitive.
        rule: a kind by name: ``"elementwise"`` (each output element on the operand elements at its
            position, after broadcasting), ``"product"`` (elementwise, where a factor known to be zero
            cuts the other's dependency: a binary product), ``"structural"`` (copies: the map is found by running the
            impl on index arrays; every operand is copied), ``"reduction"`` (``axis``/``keepdims``
            parameters), ``"cumulative"`` (``axis``), ``"dense"`` (every output on every input of
            every operand: what a primitive without a rule gets, but declared, so not reported) or
            ``"none"`` (no dependency); or a rule ``rule(node) -> list`` taking a :class:`Node` and
            returning one dependency matrix (or None) per result, such as ``Structural(data=(0,))``
            for a gather whose other operands are indices, or ``Contraction(subscripts)``.
        *more: further primitives that get the same rule (a family declared in one line).

    Returns:
        None; ``prim.dependency`` (and each of ``more``'s) is set.

    Raises:
        ValueError: an unknown kind name.
    """
    if isinstance(rule, str):
        if rule not in KINDS:
            raise ValueError(f"def_dependency: rule {rule!r} is not a kind; use one of {sorted(KINDS)} or a "
                             "callable rule(node) -> list")
        rule = KINDS[rule]
    for p in (prim, *more):
        p.dependency = rule


class Lines:
    """Each output element depends on every element of its line (or block) along the axes named by the
    parameter ``param`` (an int or a tuple of ints; None: all axes): ``fft`` over ``axes``, a sort or a
    permutation by a traced order along ``axis``. The output's length along those axes may differ
    (``rfft``); the other axes are matched element to element. Exact for generic values of a transform
    that mixes its whole line (an FFT); conservative for a permutation."""

    def __init__(self, param: str = "axis") -> None:
        self.param = param

    def __call__(self, node: Node) -> list:
        (x,), out = node.avals[:1], node.out_avals[0]
        ndim = len(x.shape)
        axes = node.params.get(self.param)
        axes = range(ndim) if axes is None else [axes] if isinstance(axes, int) else axes
        axes = {a % ndim for a in axes}
        letters = "".join(chr(ord("a") + i) for i in range(ndim))
        out_letters = "".join(chr(ord("A") + i) if i in axes else c for i, c in enumerate(letters))
        return [apply(letter_map(letters, x.shape, out_letters, out.shape), node.deps[0])] * len(node.out_avals)
