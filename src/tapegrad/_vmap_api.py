"""``vmap``: the pytree wrapper of ``vmap_flat`` with JAX's ``in_axes``/``out_axes`` rules, ``axis_size``
and functorch's ``chunk_size``; every argument error names the path of the offending entry."""
from __future__ import annotations

import functools
import importlib
import operator
from collections.abc import Callable
from typing import Any, ParamSpec, overload

import numpy as np
import optree

from tapegrad import _tree
from tapegrad._array_type import Array
from tapegrad._core import Boxed, for_jit
from tapegrad._owned import owned
from tapegrad._structural import concatenate
from tapegrad._typing import PyTree
from tapegrad._vmap import MappedOutputError, vmap_flat

P = ParamSpec("P")

_ARRAY_TYPES = frozenset([np.ndarray])
_LEAF = object()  # stands for the treedef of an argument that is one array


def _count(n: int, one: str, many: str) -> str:
    return f"{n} {one if n == 1 else many}"


def _path_str(path) -> str:
    return "".join(f"[{k!r}]" for k in path)


def _check_axes_spec(spec, name: str):
    """Every leaf of ``in_axes``/``out_axes`` is an int or None."""
    for path, leaf in zip(*optree.tree_flatten_with_path(spec, none_is_leaf=True, namespace=_tree.NAMESPACE)[:2]):
        if leaf is not None and (isinstance(leaf, bool) or not isinstance(leaf, (int, np.integer))):
            raise TypeError(f"vmap: {name}{_path_str(path)} is {leaf!r}; each entry of {name} must be an int "
                            "(the mapped axis) or None (not mapped)")


def _check_size(value, name: str):
    if value is not None and (isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1):
        raise ValueError(f"vmap: {name} must be a positive int or None, got {value!r}")


def _leaf_axes(prefix, tree, name: str, where: str):
    """``(paths, leaves, axes)`` of ``tree`` with ``prefix`` (an int, None or a pytree prefix of
    ``tree``) broadcast to its leaves."""
    try:
        full = optree.tree_broadcast_prefix(prefix, tree, none_is_leaf=True, namespace=_tree.NAMESPACE)
    except ValueError:
        spec = optree.tree_structure(prefix, none_is_leaf=True, namespace=_tree.NAMESPACE)
        actual = optree.tree_structure(tree, none_is_leaf=True, namespace=_tree.NAMESPACE)
        raise ValueError(f"vmap: {name} is not a pytree prefix of {where} (structure {spec} against {actual}); "
                         f"give an int, None, or a container shaped like {where}") from None
    paths, leaves, _ = optree.tree_flatten_with_path(tree, none_is_leaf=True, namespace=_tree.NAMESPACE)
    axes = optree.tree_leaves(full, none_is_leaf=True, namespace=_tree.NAMESPACE)
    return paths, leaves, axes


def _normalize_in_axis(axis, leaf, name: str, where: str):
    if axis is None or leaf is None:
        return None
    if not hasattr(leaf, "ndim") and not isinstance(leaf, (bool, int, float, complex)):
        raise TypeError(f"vmap: {where} is a {type(leaf).__name__}, which cannot be mapped; pass arrays, or "
                        f"in_axes=None for it{_tree.unregistered_container_hint(leaf)}")
    ndim = np.ndim(leaf) if not hasattr(leaf, "ndim") else leaf.ndim
    if not -ndim <= axis < ndim:
        raise ValueError(f"vmap: {name} = {axis} maps {where} of shape {tuple(np.shape(leaf))} along axis {axis}, "
                         f"which is out of range for rank {ndim}; use an axis in [{-ndim}, {ndim}) or None")
    return operator.index(axis) % ndim


class _Inputs:
    """The flat leaves of ``(args, kwargs)`` with their batch axes and the batch size."""

    def __init__(self, in_axes, args, kwargs, axis_size):
        if isinstance(in_axes, list):
            in_axes = tuple(in_axes)
        if isinstance(in_axes, tuple) and len(in_axes) != len(args):
            raise ValueError(f"vmap: in_axes has {_count(len(in_axes), 'entry', 'entries')} but the function got "
                             f"{_count(len(args), 'positional argument', 'positional arguments')}; give one entry "
                             "per positional argument, or one int/None for all")
        per_arg = in_axes if isinstance(in_axes, tuple) else (in_axes,) * len(args)
        self.leaves, self.dims, self.names, self.trees = [], [], [], []
        for i, (axes, arg) in enumerate(zip(per_arg, args)):
            self._add(axes, arg, f"in_axes[{i}]", f"argument {i}")
        for key in sorted(kwargs):  # keyword arguments are mapped along axis 0 (as JAX)
            self._add(0, kwargs[key], f"in_axes for keyword {key!r} (always 0)", f"keyword argument {key!r}")
        self.size = self._batch_size(axis_size)

    def _add(self, axes, arg, name, where):
        if type(arg) in _ARRAY_TYPES and (axes is None or type(axes) is int):  # the common case, no pytree work
            self.trees.append(_LEAF)
            self.leaves.append(arg)
            self.dims.append(_normalize_in_axis(axes, arg, name, where))
            self.names.append(where)
            return
        paths, leaves, axes_list = _leaf_axes(axes, arg, name, where)
        treedef = optree.tree_structure(arg, none_is_leaf=True, namespace=_tree.NAMESPACE)
        self.trees.append(treedef)
        for path, leaf, axis in zip(paths, leaves, axes_list):
            if isinstance(leaf, Boxed):
                leaf = leaf.unbox()
            leaf_where = f"{where}{_path_str(path)}"
            self.leaves.append(leaf)
            self.dims.append(_normalize_in_axis(axis, leaf, f"{name}{_path_str(path)}" if path else name,
                                                leaf_where))
            self.names.append(leaf_where)

    def _batch_size(self, axis_size):
        sizes = {}
        for leaf, d, name in zip(self.leaves, self.dims, self.names):
            if d is not None:
                sizes[name] = leaf.shape[d]
        distinct = set(sizes.values())
        if len(distinct) > 1:
            listing = ", ".join(f"{name}: {n}" for name, n in sizes.items())
            raise ValueError(f"vmap got mapped axes of different sizes ({listing}); every mapped argument "
                             "must have the same length along its mapped axis")
        if axis_size is not None and distinct and distinct != {axis_size}:
            raise ValueError(f"vmap: axis_size={axis_size} but the mapped arguments have size {distinct.pop()}")
        if not distinct:
            if axis_size is None:
                raise ValueError("vmap: no argument is mapped (every in_axes entry is None); pass axis_size= "
                                 "to say how many examples to produce")
            return axis_size
        return distinct.pop()

    def rebuild(self, leaves, kwarg_keys):
        """The positional and keyword arguments from flat leaves."""
        out, k = [], 0
        for treedef in self.trees:
            if treedef is _LEAF:
                out.append(leaves[k])
                k += 1
                continue
            n = treedef.num_leaves
            out.append(optree.tree_unflatten(treedef, leaves[k:k + n]))
            k += n
        n_args = len(out) - len(kwarg_keys)
        return out[:n_args], dict(zip(kwarg_keys, out[n_args:]))


class _Outputs:
    """The output treedef and each leaf's ``out_axes`` entry, known once ``fn`` has run."""

    def __init__(self, out_axes):
        self.out_axes = out_axes
        self.treedef: Any = None  # both set by flatten, which runs before the other methods
        self.paths: Any = None

    def flatten(self, out):
        self.paths, leaves, self.treedef = optree.tree_flatten_with_path(out, none_is_leaf=True,
                                                                          namespace=_tree.NAMESPACE)
        return leaves

    def dims(self, leaves):
        if self.out_axes is None or type(self.out_axes) is int:  # one entry for every leaf
            axes = [self.out_axes] * len(leaves)
        else:
            _, _, axes = _leaf_axes(self.out_axes, optree.tree_unflatten(self.treedef, leaves), "out_axes",
                                    "the function's output")
        dims: list[int | None] = []
        for path, leaf, axis in zip(self.paths, leaves, axes):
            if axis is None or leaf is None:
                dims.append(None)
                continue
            rank = len(getattr(leaf, "shape", ())) + 1
            if not -rank <= axis < rank:
                raise ValueError(f"vmap: out_axes{_path_str(path)} = {axis} is out of range for output"
                                 f"{_path_str(path)}, which has rank {rank} with the batch axis; use an axis "
                                 f"in [{-rank}, {rank})")
            dims.append(axis % rank)
        self.last_dims = dims
        return dims

    def mapped_error(self, err: MappedOutputError):
        path = _path_str(self.paths[err.index])
        return ValueError(f"vmap: out_axes{path} is None, but output{path} varies over the batch; give it an "
                          "int out_axes (None is only for outputs every example shares)")


# The vmapped function takes fn's parameters (a batched array is still an Array). Its result is an Array
# when fn returns one (the batch axis added); any other result type is not kept: batching turns a Python
# or NumPy scalar into an array, and a pytree's leaves into batched arrays, which no type here can spell.
@overload
def vmap(fn: Callable[P, Array], in_axes: PyTree = 0, out_axes: PyTree = 0, axis_size: int | None = None,
         chunk_size: int | None = None) -> Callable[P, Array]: ...
@overload
def vmap(fn: Callable[P, Any], in_axes: PyTree = 0, out_axes: PyTree = 0, axis_size: int | None = None,
         chunk_size: int | None = None) -> Callable[P, Any]: ...
def vmap(fn: Callable[P, Any], in_axes: PyTree = 0, out_axes: PyTree = 0, axis_size: int | None = None,
         chunk_size: int | None = None) -> Callable[P, Any]:
    """Vectorize ``fn`` over a batch axis: ``vmap(fn)(xs)`` computes ``stack([fn(x) for x in xs])`` in one
    batched pass, with no Python loop over the examples (JAX's ``vmap``).

    Args:
        fn: a function of pytrees of arrays, written for one example.
        in_axes: where each positional argument holds its batch axis. An int (the same axis for every
            array leaf, negative counting from the end), None (not mapped: every example sees the same
            value), or a tuple with one entry per positional argument, each an int, None, or a pytree
            prefix of that argument (``in_axes=(0, {"w": None, "b": 0})``). Keyword arguments are mapped
            along axis 0.
        out_axes: where each output gets its batch axis, with the same forms (a prefix of the output
            pytree). An output every example shares is broadcast along that axis; None returns it
            unbatched.
        axis_size: the batch size when no argument is mapped (``in_axes=None``); must agree otherwise.
        chunk_size: run the batch in chunks of at most this many examples and concatenate the results
            (functorch's ``chunk_size``): bounds the memory of the batched intermediates at the price
            of one pass per chunk. None runs the whole batch at once.

    Returns:
        A function with ``fn``'s parameters. Each output leaf of shape ``s`` becomes shape ``s`` with the
        batch size inserted at its ``out_axes`` entry; dtypes are ``fn``'s. Its static type: an ``Array``
        where ``fn`` returns one, else ``Any``.

    Raises:
        ValueError: the message names the path of the offending entry. Mapped arguments of different
            sizes (or not of ``axis_size``); an ``in_axes`` tuple whose length is not the number of
            positional arguments, or that is not a pytree prefix of an argument; an axis out of range
            for its array (a Python scalar has rank 0, so it cannot be mapped); ``out_axes`` None for
            an output that varies over the batch; nothing mapped and no ``axis_size``; an
            ``axis_size`` or ``chunk_size`` that is not a positive int.
        TypeError: an ``in_axes``/``out_axes`` entry that is not an int or None; a mapped leaf that
            is not an array or a Python number (an unregistered container: the message says how to
            register it).

    ``vmap`` composes with every transform: ``vmap(grad(f))`` gives per-example gradients,
    ``grad(lambda x: vmap(f)(x).sum())`` differentiates through the batch, ``vmap(vmap(f))`` maps
    two axes, and ``jacrev``/``jacfwd``/``hessian`` are built on it.
    """
    _check_axes_spec(in_axes, "in_axes")
    _check_axes_spec(out_axes, "out_axes")
    _check_size(axis_size, "axis_size")
    _check_size(chunk_size, "chunk_size")

    @functools.wraps(fn)
    def vmapped(*args, **kwargs):
        inputs = _Inputs(in_axes, args, kwargs, axis_size)
        outputs = _Outputs(out_axes)
        keys = sorted(kwargs)

        def flat_fun(*leaves):
            call_args, call_kwargs = inputs.rebuild(list(leaves), keys)
            return outputs.flatten(fn(*call_args, **call_kwargs))

        try:
            out_leaves = _run(flat_fun, inputs, outputs, chunk_size)
        except MappedOutputError as err:
            raise outputs.mapped_error(err) from None
        return optree.tree_unflatten(outputs.treedef, owned(out_leaves, caller=inputs.leaves))

    return vmapped


def _run(flat_fun, inputs, outputs, chunk_size: int | None):
    """The output leaves: a loop over the batch where ``jit`` stages it and one example compiles, else
    one batched pass, or one per chunk of ``chunk_size`` examples."""
    if chunk_size is not None and inputs.size > chunk_size:
        return _chunked(flat_fun, inputs, outputs, chunk_size)
    out_leaves = _batch_as_loop(flat_fun, inputs, outputs) if chunk_size is None and for_jit.get() else None
    if out_leaves is None:
        out_leaves = vmap_flat(flat_fun, inputs.leaves, inputs.dims, outputs.dims, inputs.size)
    return out_leaves


def _batch_as_loop(flat_fun, inputs, outputs):
    """A ``vmap`` that ``jit`` stages as a loop over the batch, or None where the batched program serves
    (``tapegrad._control_flow._batch_loop``: a layer above, which stages loops; imported by name, on the
    first vmap that jit stages, as ``import tapegrad`` leaves control flow to its first use)."""
    loop = importlib.import_module("tapegrad._control_flow._batch_loop")
    return loop.batch_as_loop(flat_fun, inputs.leaves, inputs.dims, outputs.dims, inputs.size)


def _chunked(flat_fun, inputs, outputs, chunk_size: int):
    """One ``vmap_flat`` per chunk of examples, the mapped outputs concatenated along their axes."""
    pieces = []
    for start in range(0, inputs.size, chunk_size):
        stop = min(start + chunk_size, inputs.size)
        leaves = [x if d is None else x[(slice(None),) * d + (slice(start, stop),)]
                  for x, d in zip(inputs.leaves, inputs.dims)]
        pieces.append(vmap_flat(flat_fun, leaves, inputs.dims, outputs.dims, stop - start))
    dims = outputs.last_dims
    return [first if d is None else concatenate([p[i] for p in pieces], axis=d)
            for i, (first, d) in enumerate(zip(pieces[0], dims))]
