"""``tapegrad.flatten_util``: a pytree of arrays as one flat vector and back (JAX's ``jax.flatten_util``).

``ravel_pytree`` is what ``scipy.optimize``, a hand-written Newton step or a flat Hessian needs from a
parameter pytree: one 1-D array, and the function that rebuilds the tree from such an array. Both
directions are ``tapegrad.numpy`` operations (``ravel``, ``astype``, ``concatenate``, slicing,
``reshape``), so ``grad``, ``jvp``, ``vmap`` and ``jit`` go through them. It lives here, above
``tapegrad.numpy``, because it computes with it; ``tapegrad.tree`` sits below the NumPy layer and only
restructures.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

import tapegrad.numpy as tnp
from tapegrad import _tree
from tapegrad._backend import default_namespace
from tapegrad._core import Boxed, Tracer

__all__ = ["ravel_pytree"]


def _leaf_array(leaf: Any) -> Any:
    """A leaf as an array or traced value: a Parameter reads as its value, a Python or NumPy scalar
    becomes a 0-d array."""
    if isinstance(leaf, Boxed):
        leaf = leaf.unbox()
    if isinstance(leaf, Tracer) or (hasattr(leaf, "shape") and hasattr(leaf, "dtype")
                                    and not isinstance(leaf, np.generic)):
        return leaf
    if isinstance(leaf, np.generic):
        return np.asarray(leaf)
    if isinstance(leaf, (bool, int, float, complex)):  # no device of its own: the default backend's
        return default_namespace().asarray(leaf)
    raise TypeError(f"ravel_pytree: a leaf of the tree is a {type(leaf).__name__}, not an array or a number; "
                    f"pass a pytree of arrays (dicts, lists, tuples of NumPy or CuPy arrays, Parameters or "
                    f"scalars){_tree.unregistered_container_hint(leaf)}")


class _Unravel:
    """The function ``ravel_pytree`` returns: a flat vector of the raveled length back to the tree."""

    __slots__ = ("_treedef", "_shapes", "_sizes", "_dtypes", "_flat_dtype", "_size")

    def __init__(self, treedef: Any, shapes: list, sizes: list, dtypes: list, flat_dtype: np.dtype | None):
        self._treedef, self._shapes, self._sizes = treedef, shapes, sizes
        self._dtypes, self._flat_dtype = dtypes, flat_dtype  # flat_dtype None: one dtype, no casts
        self._size = sum(sizes)

    def __call__(self, flat: Any) -> Any:
        if isinstance(flat, Boxed):
            flat = flat.unbox()
        if not isinstance(flat, Tracer) and not hasattr(flat, "dtype"):
            flat = tnp.asarray(flat)  # a list or a Python sequence, as SciPy may hand back
        shape = tuple(flat.shape)
        if shape != (self._size,):
            raise ValueError(f"unravel: expected a 1-D array of length {self._size} (what ravel_pytree "
                             f"returned), got shape {shape}")
        if self._flat_dtype is not None and np.dtype(flat.dtype) != self._flat_dtype:
            raise TypeError(f"unravel: the tree's leaves had several dtypes, raveled as {self._flat_dtype}; "
                            f"it was given an array of dtype {np.dtype(flat.dtype)}: cast it with "
                            f".astype({self._flat_dtype.name!r}) first (JAX's rule)")
        traced = isinstance(flat, Tracer)
        leaves, start = [], 0
        for shape_k, size, dtype in zip(self._shapes, self._sizes, self._dtypes):
            leaf = tnp.reshape(flat[start:start + size], shape_k)
            if self._flat_dtype is not None and dtype != self._flat_dtype:
                leaf = tnp.astype(leaf, dtype)
            elif not traced:
                leaf = leaf.copy()  # an array of its own, not a view of flat (scipy reuses its buffers)
            leaves.append(leaf)
            start += size
        return _tree.tree_unflatten(self._treedef, leaves)

    def __repr__(self) -> str:
        return f"<unravel of {len(self._shapes)} leaves, {self._size} elements>"


def ravel_pytree(tree: Any) -> tuple[Any, Callable[[Any], Any]]:
    """The leaves of ``tree`` raveled and joined into one 1-D array, and the function that undoes it
    (JAX's ``jax.flatten_util.ravel_pytree``, with its dtype rules).

    Leaves are taken in ``tg.tree.tree_leaves`` order (dict keys sorted); each is raveled in C order.
    When the leaves have several dtypes, the vector has their promoted dtype (``np.result_type``: a
    float32 and a float64 leaf give float64) and ``unravel`` casts each leaf back to its own dtype and
    accepts only a vector of the promoted dtype; when they share one dtype, ``unravel`` keeps the
    vector's dtype, whatever it is. Both directions are ``tapegrad.numpy`` operations, so gradients
    flow through ``ravel_pytree`` and through ``unravel`` under every transform.

    Args:
        tree: a pytree of arrays (NumPy or CuPy, or traced values), Parameters (read as their
            values: the current value, or the substituted one inside ``grad(weights=...)``) or
            Python/NumPy scalars.

    Returns:
        The pair ``(flat, unravel)``. ``flat`` is a 1-D array of the total number of elements, on the leaves'
        backend (an empty tree gives a float64 array of length 0 on the default backend), and
        ``unravel(v)`` rebuilds a tree of ``tree``'s structure, each leaf with its shape and dtype,
        from a 1-D ``v`` of that length. The leaves ``unravel`` returns for a concrete ``v`` are
        arrays of their own, not views of ``v``; Parameters come back as arrays.

    Raises:
        TypeError: a leaf that is neither an array nor a number (a string, an object); ``unravel``
            given a vector of another dtype than the promoted one (several leaf dtypes only).
        ValueError: ``unravel`` given an array that is not 1-D of the raveled length.

    Example:
        >>> import numpy as np, tapegrad as tg
        >>> from tapegrad.flatten_util import ravel_pytree
        >>> flat, unravel = ravel_pytree({"b": np.zeros(2), "w": np.ones((2, 2))})
        >>> flat
        array([0., 0., 1., 1., 1., 1.])
        >>> unravel(flat + 1)["w"]
        array([[2., 2.],
               [2., 2.]])
    """
    leaves, treedef = _tree.tree_flatten(tree)
    arrays = [_leaf_array(leaf) for leaf in leaves]
    if not arrays:
        return default_namespace().zeros(0), _Unravel(treedef, [], [], [], None)
    dtypes = [np.dtype(a.dtype) for a in arrays]
    flat_dtype = np.result_type(*dtypes)
    mixed = any(dtype != flat_dtype for dtype in dtypes)
    parts = [tnp.ravel(tnp.astype(a, flat_dtype) if dtype != flat_dtype else a) for a, dtype in zip(arrays, dtypes)]
    shapes = [tuple(a.shape) for a in arrays]
    sizes = [int(np.prod(shape, dtype=np.int64)) for shape in shapes]
    flat = tnp.concatenate(parts)
    return flat, _Unravel(treedef, shapes, sizes, dtypes, flat_dtype if mixed else None)
