"""SciPy's and cupyx's sparse classes as pytree nodes: ``data`` the one leaf, the pattern static.

A ``scipy.sparse`` ``csr_array``, ``csc_array``, ``coo_array`` or ``csr_matrix``, ``csc_matrix``,
``coo_matrix`` (and cupyx's ``*_matrix``) passed to ``grad``, ``vjp``, ``jvp``, ``vmap`` or ``jit``
flattens to its ``data`` and a :class:`~tapegrad.sparse._pattern.Pattern` kept in the treedef, so
``jit`` caches one program per pattern. It is rebuilt by this rule:

- a leaf that is a concrete 1-D array of the class's own array module (NumPy for SciPy, CuPy for
  cupyx) of length nnz becomes the same SciPy (cupyx) class on the same pattern: a gradient with
  respect to a SciPy argument, or an argument returned as it is;
- any other leaf (a traced value inside the function, a batched ``data`` out of ``vmap``, the
  ``(out..., nnz)`` data of a Jacobian) becomes the :mod:`tapegrad.sparse` array of that format, which
  carries traced and batched ``data`` where SciPy's classes cannot.

CSR and CSC must be in SciPy's canonical format (indices sorted within each row/column, no
duplicates; ``has_canonical_format``): otherwise flattening refuses with the fix
(``A.sum_duplicates()``), because sorting the entries would reorder ``data``, and the gradient would
no longer line up entry by entry with the argument. COO needs nothing: its entries may repeat and
come in any order, as in :class:`tapegrad.sparse.coo_array` (repeated entries add up, so each one's
derivative is its position's). BSR, DIA, LIL and DOK are refused with the conversion to use.

The classes are registered when their module is first imported (``tapegrad._post_import``), never
by ``import tapegrad``.
"""
from __future__ import annotations

import functools
from types import ModuleType

import numpy as np

from tapegrad._backend import array_module, to_host
from tapegrad.numpy._operators import register_hints
from tapegrad.sparse import _pattern
from tapegrad.sparse._arrays import SparseArray
from tapegrad.sparse._pattern import Pattern
from tapegrad.tree import register_node

SUPPORTED = ("csr_array", "csc_array", "coo_array", "csr_matrix", "csc_matrix", "coo_matrix")
REFUSED = ("bsr_array", "dia_array", "lil_array", "dok_array", "bsr_matrix", "dia_matrix", "lil_matrix",
           "dok_matrix")
_done: set[str] = set()


def register(module: ModuleType) -> None:
    """Register the sparse classes of ``module`` (``scipy.sparse``, ``cupyx.scipy.sparse``, or a
    module of the same API) as pytree nodes in tapegrad's namespace; a second call does nothing.

    Args:
        module: the sparse module; the classes of :data:`SUPPORTED` it defines flatten to their
            ``data``, those of :data:`REFUSED` raise a TypeError naming the conversion.
    """
    if module.__name__ in _done:
        return
    _done.add(module.__name__)
    for name in SUPPORTED:
        cls = getattr(module, name, None)
        if isinstance(cls, type):
            register_node(cls, _flatten, functools.partial(_unflatten, cls))
    for name in REFUSED:
        cls = getattr(module, name, None)
        if isinstance(cls, type):
            register_node(cls, _refuse, _never)


# SciPy's operators convert a traced operand with np.asarray, which fails: the error then names the fix
_HINTS = {f"scipy.sparse.{name}": f"tapegrad.sparse.asarray(A){spelled} (a SciPy sparse argument that is "
          "not differentiated or batched reaches the function as SciPy's, whose operators take no traced values)"
          for name, spelled in (("__matmul__", " @ x"), ("__rmatmul__", ": x @ A"), ("dot", ".dot(x)"),
                                ("__mul__", " * x"), ("__rmul__", ": x * A"), ("multiply", ".multiply(x)"),
                                ("__add__", " + x"), ("__radd__", ": x + A"), ("__sub__", " - x"),
                                ("__rsub__", ": x - A"))}
register_hints(_HINTS)


def _flatten(a):
    return (a.data,), pattern_of(a)


def pattern_of(a) -> Pattern:
    """The :class:`Pattern` of a SciPy (cupyx) CSR, CSC or COO array or matrix, its indices read on the
    host (for cupyx, one explicit device-to-host copy: a pattern is host data, hashed for ``jit``).

    Raises:
        ValueError: a CSR/CSC not in canonical format, or a COO array of other than 2 dimensions.
    """
    name = type(a).__name__
    if a.format == "coo":
        if len(a.shape) != 2:
            raise ValueError(f"{name} of shape {a.shape}: tapegrad.sparse holds 2-D arrays only; reshape it "
                             "to 2-D (A.reshape((m, n))) before passing it to a transform")
        return _pattern.interned(_pattern.coordinates(a.shape, to_host(a.row), to_host(a.col)))
    if not a.has_canonical_format:
        raise ValueError(
            f"a {name} passed to a tapegrad transform must be in canonical format (indices sorted within each "
            f"{'row' if a.format == 'csr' else 'column'}, no duplicates), so that its data lines up entry by "
            "entry with its gradient; call A.sum_duplicates() on it first (which sorts in place and adds "
            "duplicates), or pass A.tocoo(), whose entries may repeat")
    return _pattern.interned(_pattern.compressed(a.format, a.shape, to_host(a.indices), to_host(a.indptr)))


def _unflatten(cls, pattern: Pattern, children):
    data = children[0]
    if _holds(cls, data, pattern):
        return build(cls, data, pattern)
    return SparseArray._make(data, pattern)


def _holds(cls, data, pattern: Pattern) -> bool:
    """Whether ``data`` is a concrete 1-D array of ``cls``'s own module (NumPy for ``scipy.sparse``,
    the device module ``X`` for ``Xx.scipy.sparse``), one value per stored entry."""
    module = array_module(data)
    if module is None or getattr(type(data), "array_namespace", None) is not None:  # a tracer
        return False
    owner = cls.__module__.split(".")[0]
    ours = module is np if owner == "scipy" else f"{module.__name__}x" == owner
    return ours and getattr(data, "shape", None) == (pattern.nnz,)


def build(cls, data, pattern: Pattern):
    """The SciPy (cupyx) class ``cls`` on ``pattern`` holding the concrete ``data`` (not copied), with
    its own copies of the indices (SciPy's in-place methods may write them), made in ``data``'s array
    module from the pattern's (on a device: a device-to-device copy)."""
    xp = array_module(data)

    def index(name):
        return pattern.on(xp, name).copy()

    if pattern.fmt == "coo":
        return cls((data, (index("row"), index("col"))), shape=pattern.shape)
    return cls((data, index("col" if pattern.fmt == "csr" else "row"), index("indptr")), shape=pattern.shape)


def _refuse(a):
    raise TypeError(f"a {type(a).__name__} cannot enter a tapegrad transform: tapegrad.sparse has CSR, CSC and "
                    f"COO arrays only; convert it first with A.tocsr() (or tocsc(), tocoo())")


def _never(aux, children):  # pragma: no cover - _refuse raises before any treedef exists
    raise AssertionError("unreachable")
