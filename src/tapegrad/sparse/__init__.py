"""Differentiable sparse arrays: a static pattern and traced stored values, as ``scipy.sparse``.

``csr_array``, ``csc_array`` and ``coo_array`` are built as SciPy's are (``csr_array((data, indices,
indptr), shape)``, ``coo_array((data, (row, col)), shape)``, or from a SciPy sparse array) with ``data``
possibly traced. Each is a pytree whose only leaf is ``data`` and whose pattern (format, shape, indices)
is in the tree structure: ``grad`` differentiates ``data`` (a gradient with respect to a sparse argument
is a sparse array of its pattern), ``vmap`` batches it, ``jit`` stages one program per pattern. The
operations (``@`` with dense vectors and matrices, ``.T``, scaling, ``multiply``, ``+``, ``sum``,
``diagonal``, ``toarray``, format conversions, ``eye``/``diags``/``kron``) are gathers and scatter-adds
of ``tapegrad.numpy`` at the static coordinates: derivatives of every order, and no dense ``m × n``
unless the result is one. SciPy's (and cupyx's) own CSR, CSC and COO classes are pytrees of the same
kind (``_foreign``): inside a transformed function they are these arrays, and a gradient with respect
to one is of its class. The guide is ``docs/sparse.md``.
"""
from tapegrad import _post_import
from tapegrad.sparse import _foreign
from tapegrad.sparse._arrays import SparseArray, asarray, coo_array, csc_array, csr_array, issparse
from tapegrad.sparse._construct import diags, eye, kron
from tapegrad.sparse._pattern import Pattern

# SciPy's and cupyx's sparse classes become pytree nodes once their modules are imported (_foreign)
for _module in ("scipy.sparse", "cupyx.scipy.sparse"):
    _post_import.when_imported(_module, _foreign.register)

__all__ = ["Pattern", "SparseArray", "asarray", "coo_array", "csc_array", "csr_array", "diags", "eye",
           "issparse", "kron"]
