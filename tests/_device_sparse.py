"""The strict device double's ``cupyx.scipy.sparse`` and ``cupyx.scipy.sparse.linalg``: CuPy 14.2's sparse
classes and solvers, on SciPy's numbers, with CuPy's signatures, refusals and synchronisations.

Read in CuPy 14.2's source (tag ``v14.2.0``): ``cupyx/scipy/sparse/__init__.py``, ``_base.py``,
``_compressed.py``, ``_csr.py``, ``_csc.py``, ``_coo.py`` and ``linalg/__init__.py``, ``linalg/_solve.py``,
``linalg/_iterative.py``, ``linalg/_eigen.py``, ``linalg/_interface.py``. What is modelled:

- the classes ``csr_matrix``, ``csc_matrix``, ``coo_matrix`` and (new in CuPy 14) ``csr_array``,
  ``csc_array``, ``coo_array``, under ``spmatrix``/``sparray``; ``issparse``, ``isspmatrix``,
  ``identity``, ``eye`` and ``SparseEfficiencyWarning``. Their ``data``, ``indices``, ``indptr``
  (``row``, ``col``) are device arrays;
- construction (``_compressed.py``): ``(data, indices, indptr)`` must be 1-D device arrays
  (``ValueError: data, indices, and indptr must be 1-D cupy arrays``, host arrays included), and CuPy
  reads ``indptr[0]`` and ``indptr[-1]`` on the host (one synchronisation); ``(data, (row, col))`` for
  COO must be 1-D device arrays of one length (no synchronisation with a ``shape``); a SciPy sparse
  matrix is copied to the device (explicit), a dense device array is converted;
- ``has_canonical_format`` of CSR/CSC is computed by a kernel and read on the host when not known
  (a synchronisation; "Getting this property might synchronize the device"), then cached;
  ``sum_duplicates`` sorts in place; ``get()`` is the explicit device-to-host copy (SciPy's class of
  the same format and kind);
- ``A @ x`` with a device vector or matrix is cuSPARSE's SpMV/SpMM: no synchronisation; a host
  operand is refused;
- ``linalg``: ``spsolve(A, b)`` (cuSOLVER's ``csrlsvqr``: A sparse, b a device array, 1-D or 2-D, CSR
  wanted: another format is converted with a ``SparseEfficiencyWarning``); ``splu`` and
  ``factorized``, which copy ``A`` to the host (``A.get()``: a synchronisation) and factorise it with
  SciPy's SuperLU, then solve on the device with its factors (``SuperLU.solve(rhs, trans='N'|'T'|'H')``,
  ``rhs`` a device array, the result Fortran-ordered in the factors' dtype); ``cg``, ``gmres``,
  ``cgs``, ``bicgstab`` with keyword-only ``rtol``, ``atol``, ``maxiter``, ``M``, ``callback``
  (``gmres``: ``restart``, ``callback_type``), returning ``(x, info)`` with ``info`` a Python int and
  ``x`` of A's dtype, raveled; ``minres(A, b, x0, shift, tol, maxiter, M, callback, check)`` with
  ``tol`` (not ``rtol``); ``eigsh(a, k, *, which='LM'|'LA'|'SA', v0, ncv, maxiter, tol,
  return_eigenvectors)``, eigenvalues ascending. Each Krylov solver and ``eigsh`` read norms on the
  host in their loops (synchronisations). ``_make_system``'s checks and messages are CuPy's.
  ``expm_multiply`` and ``MatrixRankWarning`` are absent, as in CuPy 14.2.
"""
from __future__ import annotations

import sys
import types
import warnings

import numpy as np
import scipy.sparse
import scipy.sparse.linalg

from _device_cupyx import declare_synchronize

_FORMATS = ("csr", "csc", "coo")


class SparseEfficiencyWarning(UserWarning):
    """CuPy's ``cupyx.scipy.sparse.SparseEfficiencyWarning``."""


class _spbase:
    """The common base (CuPy's ``_spbase``): a SciPy sparse object standing for device memory."""

    format = ""
    _host: type

    def __init__(self, arg1, shape=None, dtype=None, copy=False):
        xp = _XP[0]
        if isinstance(arg1, _spbase):
            m = self._host(arg1._m, copy=True)
        elif scipy.sparse.issparse(arg1):  # CuPy copies a SciPy matrix to the device (explicit)
            m = self._host(arg1, copy=True)
        elif isinstance(arg1, tuple) and len(arg1) == 3 and self.format != "coo":
            data, indices, indptr = arg1
            if not all(type(a) is xp.ndarray and a.ndim == 1 for a in (data, indices, indptr)):
                raise ValueError("data, indices, and indptr must be 1-D cupy arrays")
            if len(data) != len(indices):
                raise ValueError("indices and data should have the same size")
            if indptr.size:
                declare_synchronize()  # cupy.stack((indptr[0], indptr[-1])).get()
            m = self._host((data._data, indices._data, indptr._data), shape=shape)
        elif isinstance(arg1, tuple) and len(arg1) == 2 and isinstance(arg1[1], tuple) and len(arg1[1]) == 2:
            data, (row, col) = arg1[0], arg1[1]
            if not all(type(a) is xp.ndarray and a.ndim == 1 for a in (data, row, col)):
                raise ValueError("row, column, and data arrays must be 1-D")
            if not len(data) == len(row) == len(col):
                raise ValueError("row, column, and data array must all be the same length")
            if shape is None and row.size:
                declare_synchronize()  # the shape from row.max() and col.max()
            m = getattr(scipy.sparse, f"coo_{self._kind}")((data._data, (row._data, col._data)), shape=shape)
            m = m.asformat(self.format)
        elif type(arg1) is xp.ndarray:
            m = self._host(arg1._data)
        else:
            raise ValueError("Unsupported initializer format")
        if dtype is not None:
            m = m.astype(dtype)
        self._m = m
        self._canonical = True if self.format != "coo" and scipy.sparse.issparse(arg1) else None

    @classmethod
    def _of(cls, m):
        """An instance holding the SciPy object ``m`` (already of this format and kind)."""
        out = object.__new__(cls)
        out._m, out._canonical = m, None
        return out

    # -- attributes: device arrays over the same memory --
    def _dev(self, a):
        return _XP[0].ndarray(np.asarray(a))

    shape = property(lambda self: self._m.shape)
    ndim = property(lambda self: 2)
    nnz = property(lambda self: self._m.nnz)
    dtype = property(lambda self: self._m.dtype)
    data = property(lambda self: self._dev(self._m.data))
    size = property(lambda self: self._m.nnz)

    def get(self, stream=None):
        """The explicit device-to-host copy: SciPy's class of this format and kind."""
        if self._m.nnz:
            declare_synchronize()
        return self._m.copy()

    def toarray(self, order=None, out=None):
        return self._dev(self._m.toarray(order=order))

    def tocsr(self, copy=False):
        return _class("csr", self._kind)._of(self._m.tocsr(copy=True))

    def tocsc(self, copy=False):
        return _class("csc", self._kind)._of(self._m.tocsc(copy=True))

    def tocoo(self, copy=False):
        return _class("coo", self._kind)._of(self._m.tocoo(copy=True))

    def asformat(self, format):
        return getattr(self, f"to{format}")()

    def copy(self):
        return type(self)._of(self._m.copy())

    def astype(self, t):
        return type(self)._of(self._m.astype(t))

    @property
    def T(self):
        return self.transpose()

    def transpose(self, axes=None, copy=False):
        m = self._m.transpose()
        return _class(m.format, self._kind)._of(m)

    def sum(self, axis=None, dtype=None, out=None):
        return self._dev(np.asarray(self._m.sum(axis=axis, dtype=dtype)).reshape(-1) if axis is not None
                         else np.asarray(self._m.sum(dtype=dtype)))

    def diagonal(self, k=0):
        return self._dev(self._m.diagonal(k))

    # -- products: cuSPARSE, no synchronisation --
    def __matmul__(self, other):
        if isinstance(other, _spbase):
            m = self._m @ other._m
            return _class(m.format, self._kind)._of(m)
        if type(other) is not _XP[0].ndarray:
            raise TypeError(f"Unsupported type {type(other)}" if isinstance(other, np.ndarray)
                            else "object array is not supported")
        return self._dev(self._m @ other._data)

    def dot(self, other):
        return self @ other

    def __mul__(self, other):
        if np.isscalar(other) or type(other) is _XP[0].ndarray and other.ndim == 0:
            return type(self)._of(self._m * (other if np.isscalar(other) else other._data[()]))
        if self._kind == "matrix":  # spmatrix's * is the matrix product, as SciPy's
            return self @ other
        raise NotImplementedError("elementwise * of a sparse array by a non-scalar is not modelled")

    __rmul__ = __mul__

    def __neg__(self):
        return type(self)._of(-self._m)

    def __add__(self, other):
        if not isinstance(other, _spbase):
            raise NotImplementedError("adding a dense or scalar operand is not modelled")
        m = self._m + other._m
        return _class(m.format, self._kind)._of(m)

    __radd__ = __add__

    def __sub__(self, other):
        return self + (-other)

    def __repr__(self):
        return f"<devicearrayx {type(self).__name__} of shape {self.shape} with {self.nnz} stored elements>"


class _compressed(_spbase):
    """CSR and CSC: ``indices``, ``indptr``, the canonical-format flag and ``sum_duplicates``."""

    indices = property(lambda self: self._dev(self._m.indices))
    indptr = property(lambda self: self._dev(self._m.indptr))

    @property
    def has_canonical_format(self):
        if self._canonical is None:
            if self._m.nnz:
                declare_synchronize()  # a kernel's verdict read on the host
            self._canonical = bool(self._m.has_canonical_format)
        return self._canonical

    def sum_duplicates(self):
        if self.has_canonical_format:
            return
        self._m.sum_duplicates()
        self._canonical = True


class _coo(_spbase):
    row = property(lambda self: self._dev(self._m.row))
    col = property(lambda self: self._dev(self._m.col))

    @property
    def has_canonical_format(self):
        return bool(self._m.has_canonical_format)

    def sum_duplicates(self):
        self._m.sum_duplicates()


class spmatrix:
    """CuPy's ``spmatrix``: the base of the ``*_matrix`` classes."""


class sparray:
    """CuPy's ``sparray``: the base of the ``*_array`` classes (new in CuPy 14)."""


_CLASSES: dict = {}


def _class(fmt: str, kind: str):
    return _CLASSES[(fmt, kind)]


def _make_classes(prefix: str) -> None:
    for fmt in _FORMATS:
        for kind, base in (("matrix", spmatrix), ("array", sparray)):
            name = f"{fmt}_{kind}"
            body = _coo if fmt == "coo" else _compressed
            cls = type(name, (body, base), {"format": fmt, "_kind": kind, "_host": getattr(scipy.sparse, name),
                                            "__module__": f"{prefix}.scipy.sparse._{fmt}"})
            _CLASSES[(fmt, kind)] = cls


def issparse(x):
    return isinstance(x, _spbase)


def isspmatrix(x):
    return isinstance(x, spmatrix)


def identity(n, dtype="d", format=None):
    return eye(n, dtype=dtype, format=format)


def eye(m, n=None, k=0, dtype="d", format=None):
    fmt = format or "csr"  # CuPy's default is DIA, which the double does not model
    return _class(fmt, "matrix")(scipy.sparse.eye(m, n, k=k, dtype=dtype, format=fmt))


# ---- linalg ------------------------------------------------------------------------------------------
def _device_array(x, what):
    if type(x) is not _XP[0].ndarray:
        raise TypeError(what)
    return x


def spsolve(A, b):
    """cuSOLVER's ``csrlsvqr`` (QR on the device): CuPy's checks, in its order."""
    if not issparse(A):
        raise TypeError("A must be cupyx.scipy.sparse.spmatrix")
    _device_array(b, "b must be cupy.ndarray")
    if A.shape[0] != A.shape[1]:
        raise ValueError(f"A must be a square matrix (A.shape: {A.shape})")
    if b.ndim not in (1, 2):
        raise ValueError(f"Invalid b.shape (b.shape: {b.shape})")
    if A.shape[0] != b.shape[0]:
        raise ValueError(f"matrix dimension mismatch (A.shape: {A.shape}, b.shape: {b.shape})")
    if A.format != "csr":
        warnings.warn("CSR format is required. Converting to CSR format.", SparseEfficiencyWarning, stacklevel=2)
        A = A.tocsr()
    x = scipy.sparse.linalg.spsolve(A._m.tocsc(), b._data.astype(A.dtype, copy=False))
    return A._dev(np.asfortranarray(x))


class SuperLU:
    """CuPy's ``SuperLU``: SciPy's factors moved to the device; ``solve`` runs the triangular solves there."""

    def __init__(self, obj):
        if not isinstance(obj, scipy.sparse.linalg.SuperLU):
            raise TypeError("obj must be scipy.sparse.linalg.SuperLU")
        self._lu = obj
        xp = _XP[0]
        self.shape, self.nnz = obj.shape, obj.nnz
        self.perm_r, self.perm_c = xp.asarray(obj.perm_r), xp.asarray(obj.perm_c)
        self.L = _class("csr", "matrix")(obj.L.tocsr())
        self.U = _class("csr", "matrix")(obj.U.tocsr())

    def solve(self, rhs, trans="N"):
        _device_array(rhs, "ojb must be cupy.ndarray")
        if rhs.ndim not in (1, 2):
            raise ValueError(f"rhs.ndim must be 1 or 2 (actual: {rhs.ndim})")
        if rhs.shape[0] != self.shape[0]:
            raise ValueError(f"shape mismatch (self.shape: {self.shape}, rhs.shape: {rhs.shape})")
        if trans not in ("N", "T", "H"):
            raise ValueError("trans must be 'N', 'T', or 'H'")
        x = self._lu.solve(rhs._data.astype(self.L.dtype), trans=trans)
        return _XP[0].ndarray(np.asfortranarray(x))


def splu(A, permc_spec=None, diag_pivot_thresh=None, relax=None, panel_size=None, options={}):  # noqa: B006
    """SciPy's SuperLU of ``A.get().tocsc()`` (a synchronisation), wrapped as CuPy's ``SuperLU``."""
    if not issparse(A):
        raise TypeError("A must be cupyx.scipy.sparse.spmatrix")
    if A.shape[0] != A.shape[1]:
        raise ValueError(f"A must be a square matrix (A.shape: {A.shape})")
    if A.dtype.char not in "fdFD":
        raise TypeError(f"Invalid dtype (actual: {A.dtype})")
    a = A.get().tocsc()
    return SuperLU(scipy.sparse.linalg.splu(a, permc_spec=permc_spec, diag_pivot_thresh=diag_pivot_thresh,
                                            relax=relax, panel_size=panel_size, options=options))


def factorized(A):
    return splu(A).solve


def _operator(A):
    """A matrix or preconditioner for SciPy: ours to its host object, a device array to its data."""
    if A is None or isinstance(A, scipy.sparse.linalg.LinearOperator):
        return A
    if issparse(A):
        return A._m
    if type(A) is _XP[0].ndarray:
        return A._data
    raise TypeError(f"Unsupported type {type(A)}")


def _make_system(A, M, x0, b):
    """CuPy's ``_make_system``: its checks and messages; ``b`` and ``x0`` cast to A's dtype and raveled."""
    n = A.shape[0]
    if A.shape[0] != A.shape[1]:
        raise ValueError(f"expected square matrix (shape: {A.shape})")
    if np.dtype(A.dtype).char not in "fdFD":
        raise TypeError(f"unsupprted dtype (actual: {A.dtype})")
    if not (b.shape == (n,) or b.shape == (n, 1)):
        raise ValueError("b has incompatible dimensions")
    b = _device_array(b, "b must be cupy.ndarray")._data.astype(A.dtype).ravel()
    if x0 is not None:
        if not (x0.shape == (n,) or x0.shape == (n, 1)):
            raise ValueError("x0 has incompatible dimensions")
        x0 = _device_array(x0, "x0 must be cupy.ndarray")._data.astype(A.dtype).ravel()
    if M is not None and M.shape != A.shape:
        raise ValueError("matrix and preconditioner have different shapes")
    return _operator(A), _operator(M), x0, b


def _krylov(name):
    solver = getattr(scipy.sparse.linalg, name)

    def solve(A, b, x0=None, *, rtol=1e-5, atol=0.0, maxiter=None, M=None, callback=None, **more):
        A_, M_, x0_, b_ = _make_system(A, M, x0, b)
        declare_synchronize()  # the norms each iteration compares on the host
        n = b_.size
        if maxiter is None:
            maxiter = n * 10
        wrapped = None if callback is None else (lambda xk: callback(_XP[0].ndarray(np.asarray(xk))))
        x, info = solver(A_, b_, x0=x0_, rtol=rtol, atol=atol, maxiter=maxiter, M=M_, callback=wrapped, **more)
        return _XP[0].ndarray(np.asarray(x, dtype=A.dtype)), int(info)

    solve.__name__ = name
    return solve


cg, cgs, bicgstab = _krylov("cg"), _krylov("cgs"), _krylov("bicgstab")
_gmres = _krylov("gmres")


def gmres(A, b, x0=None, *, rtol=1e-5, atol=0.0, restart=None, maxiter=None, M=None, callback=None,
          callback_type=None):
    if callback_type not in (None, "x", "pr_norm"):
        raise ValueError(f"Unknown callback_type: {callback_type}")
    return _gmres(A, b, x0, rtol=rtol, atol=atol, maxiter=maxiter, M=M, callback=callback,
                  restart=restart if restart is not None else 20,
                  callback_type=(callback_type or "pr_norm") if callback is not None else None)


def minres(A, b, x0=None, shift=0.0, tol=1e-5, maxiter=None, M=None, callback=None, check=False):
    """CuPy's ``minres``: ``tol`` (SciPy's ``rtol``), ``info`` 0 or ``maxiter``."""
    A_, M_, x0_, b_ = _make_system(A, M, x0, b)
    declare_synchronize()  # beta1.get().item() and the loop's
    if maxiter is None:
        maxiter = b_.size * 5
    wrapped = None if callback is None else (lambda xk: callback(_XP[0].ndarray(np.asarray(xk))))
    x, info = scipy.sparse.linalg.minres(A_, b_, x0=x0_, shift=shift, rtol=tol, maxiter=maxiter, M=M_,
                                         callback=wrapped, check=check)
    return _XP[0].ndarray(np.asarray(x, dtype=A.dtype)), maxiter if info == 1 else 0 if info == 0 else int(info)


def eigsh(a, k=6, *, which="LM", v0=None, ncv=None, maxiter=None, tol=0, return_eigenvectors=True):
    """CuPy's thick-restart Lanczos ``eigsh``: its checks, ``which`` in LM/LA/SA, ascending results."""
    n = a.shape[0]
    if a.ndim != 2 or a.shape[0] != a.shape[1]:
        raise ValueError(f"expected square matrix (shape: {a.shape})")
    if np.dtype(a.dtype).char not in "fdFD":
        raise TypeError(f"unsupprted dtype (actual: {a.dtype})")
    if k <= 0:
        raise ValueError(f"k must be greater than 0 (actual: {k})")
    if k >= n:
        raise ValueError(f"k must be smaller than n (actual: {k})")
    if which not in ("LM", "LA", "SA"):
        raise ValueError(f"which must be 'LM','LA'or'SA' (actual: {which})")
    declare_synchronize()  # the residual compared on the host each restart
    v0_ = None if v0 is None else _device_array(v0, "v0 must be cupy.ndarray")._data
    w, x = scipy.sparse.linalg.eigsh(_operator(a), k=k, which=which, v0=v0_, ncv=ncv, maxiter=maxiter,
                                     tol=tol)
    order = np.argsort(w)
    w, x = w[order], x[:, order]
    dev = _XP[0].ndarray
    return (dev(w), dev(np.ascontiguousarray(x))) if return_eigenvectors else dev(w)


_XP: list = []  # the double's namespace, set by install (the classes build device arrays of it)
_SPARSE = ("csr_matrix csc_matrix coo_matrix csr_array csc_array coo_array spmatrix sparray issparse "
           "isspmatrix identity eye SparseEfficiencyWarning").split()
_LINALG = "spsolve splu factorized SuperLU cg cgs gmres bicgstab minres eigsh".split()


def install(xp, scipy_ns) -> None:
    """Add ``<prefix>.scipy.sparse`` and ``.sparse.linalg`` to the double's ``scipy_ns`` and to
    ``sys.modules``, for the device namespace ``xp``."""
    _XP[:] = [xp]
    prefix = scipy_ns.__name__.rsplit(".", 1)[0]
    _make_classes(prefix)
    sparse = types.ModuleType(f"{prefix}.scipy.sparse")
    namespace = dict(globals(), **{f"{f}_{k}": c for (f, k), c in _CLASSES.items()})
    for name in _SPARSE:
        setattr(sparse, name, namespace[name])
    sparse.linalg = types.ModuleType(f"{prefix}.scipy.sparse.linalg")
    for name in _LINALG:
        setattr(sparse.linalg, name, namespace[name])
    scipy_ns.sparse = sparse
    sys.modules.update({sparse.__name__: sparse, sparse.linalg.__name__: sparse.linalg})
