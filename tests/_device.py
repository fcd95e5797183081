"""A strict device-array test double: CuPy's rules on NumPy's numbers, for machines without a GPU.

``DeviceArray`` wraps a NumPy array and behaves as a ``cupy.ndarray`` does where it matters to a
library that must never copy between host and device behind the user's back:

- ``numpy.asarray(x)`` / ``__array__`` raises ``TypeError`` with CuPy's message, and there is no
  buffer protocol (``memoryview(x)`` raises), so any implicit device-to-host conversion fails;
- an operation that mixes a device array with a host ``numpy.ndarray`` (0-d included) raises
  ``TypeError``, as CuPy does; Python and NumPy scalars mix freely, as in CuPy;
- NumPy's ufuncs and functions dispatch through ``__array_ufunc__`` / ``__array_function__`` to the
  namespace ``xp`` below, whose results are device arrays again; a NumPy function the namespace does
  not implement is refused (``NotImplemented``, so NumPy raises ``TypeError``), never run on the host;
- reductions return 0-d device arrays, never NumPy scalars (CuPy's behaviour);
- ``float()``, ``int()``, ``complex()``, ``bool()`` of a one-element array, ``.item()`` and
  ``.tolist()`` are allowed (CuPy synchronises and copies); ``.get()`` and ``xp.asnumpy(x)`` are the
  explicit device-to-host copies, ``xp.asarray(host)`` the explicit host-to-device one; host index
  arrays and lists in ``x[idx]``, ``x[idx] = v`` and ``ufunc.at`` are accepted (CuPy copies them);
- each of those device-to-host reads, and each operation whose result's shape depends on the data
  (``nonzero``, a boolean mask...), declares a synchronisation where CuPy's ``get()`` does: under
  ``devicearrayx.allow_synchronize(False)`` it raises ``devicearrayx.DeviceSynchronized``, as CuPy's
  ``cupyx`` does (the rules and where they were read: ``tests/_device_cupyx.py``).

``xp`` is the namespace, a module like ``cupy``: creation functions, the ufuncs, array functions,
``linalg``, ``fft``, ``lib.stride_tricks``, the dtypes and ``fuse``, each implemented by calling NumPy
on the unwrapped data and wrapping the result; ``devicearrayx.scipy.special`` and ``.linalg`` stand
for ``cupyx.scipy``. Where CuPy behaves otherwise than NumPy and that matters to tapegrad (``cupyx``'s
``polygamma``, ``expm`` of one matrix only, ``linalg.solve``'s shape rule), ``tests/_device_cupyx.py``
models it. A name it does not list raises ``AttributeError``: an
implementation that needs it must be added here on purpose, after checking that CuPy has it.
As on CuPy 14 (and 13), the arrays have no ``__array_namespace__``: tapegrad recognises them the way it
recognises CuPy's, by their type's package. ``DeviceArray.__module__`` is ``"devicearray"`` and
``sys.modules["devicearray"]`` is ``xp``, whose ``ndarray`` is ``DeviceArray``, just as
``cupy.ndarray`` lives under the imported ``cupy`` module.

``TAPEGRAD_DEVICE=cupy`` (``make test-gpu``) replaces the double by real CuPy for every test that
imports it: ``xp`` is ``cupy``, ``DeviceArray`` is ``cupy.ndarray``, and ``Fused`` counts the launches
of the ``cupy.fuse`` kernels (see the end of this file).
"""
from __future__ import annotations

import copy
import functools
import os
import sys
import types

import numpy as np

import _device_cupyx
from _device_cupyx import declare_synchronize

_IMPLICIT = ("Implicit conversion to a NumPy array is not allowed. Please use `.get()` to construct a "
             "NumPy array explicitly.")


def _host_operand_error(what: str):
    """CuPy's own error for a host array among a kernel's operands, word for word (CuPy 13 and 14):
    it names neither the operation nor a fix, which is why tapegrad checks the operands itself when a
    kernel raises (``what``, the operation, is kept for the double's own debugging only)."""
    del what
    return TypeError("Unsupported type <class 'numpy.ndarray'>")


def _unwrap(x, what: str):
    """``x`` with every device array replaced by its NumPy data; a host ndarray anywhere raises."""
    if type(x) is DeviceArray:
        return x._data
    if isinstance(x, np.ndarray):
        raise _host_operand_error(what)
    if type(x) in (list, tuple):
        return type(x)(_unwrap(v, what) for v in x)
    return x


def _unwrap_index(idx):
    """An index with its device arrays unwrapped. Host index arrays and lists are accepted: CuPy copies
    them to the device (``_prepare_slice_list``), the one place it converts host arrays implicitly."""
    if type(idx) is DeviceArray:
        return idx._data
    if type(idx) is tuple:
        return tuple(_unwrap_index(i) for i in idx)
    return idx


def _wrap(x):
    """NumPy results as device arrays: arrays and NumPy scalars (CuPy returns 0-d arrays), inside
    tuples and lists too; Python values (shapes, dtypes, bools of predicates) as they are."""
    if isinstance(x, (np.ndarray, np.generic)):
        return DeviceArray(np.asarray(x))
    if type(x) in (list, tuple):
        return type(x)(_wrap(v) for v in x)
    if isinstance(x, tuple) and hasattr(x, "_fields"):  # a named tuple (slogdet, eigh, qr, svd)
        return type(x)(*(_wrap(v) for v in x))
    return x


def _size(x) -> int:
    return x.size if isinstance(x, (DeviceArray, np.ndarray)) else int(np.size(x))


def _repeats_read(a, *rest, **kwargs) -> bool:
    """CuPy's ``repeat`` reads a sequence or an array of repeats on the host (``reps_arr.item()`` or
    ``int(boundaries[-1])``); a Python int it takes as it is."""
    repeats = kwargs["repeats"] if "repeats" in kwargs else rest[0]
    return not isinstance(repeats, (int, np.integer)) and _size(repeats) > 0


# the operations whose result's shape depends on the data: CuPy reads a count on the host (a
# synchronisation) when the data is not empty; by name (function and method), with the test
_DATA_DEPENDENT = {
    "nonzero": lambda a, *r, **k: _size(a) > 0,
    "argwhere": lambda a, *r, **k: _size(a) > 0,
    "flatnonzero": lambda a, *r, **k: _size(a) > 0,
    "unique": lambda a, *r, **k: _size(a) > 0,
    "where": lambda *args, **k: len(args) + len(k) == 1 and _size((args or tuple(k.values()))[0]) > 0,
    "compress": lambda condition, *r, **k: _size(condition) > 0,
    "repeat": _repeats_read,
}


def _device_call(fn, name: str, method_of=None):
    """``fn`` (a NumPy function) on device arrays: operands unwrapped, results wrapped. ``method_of``:
    the array whose method ``fn`` is (it is then the first operand of the synchronisation test)."""
    reads = _DATA_DEPENDENT.get(name.rsplit(".", 1)[-1])

    @functools.wraps(fn)
    def call(*args, **kwargs):
        if reads is not None and reads(*((method_of,) if method_of is not None and name != "ndarray.compress"
                                          else ()), *args, **kwargs):
            declare_synchronize()
        out = kwargs.get("out")
        result = fn(*_unwrap(args, name), **{k: _unwrap(v, name) for k, v in kwargs.items()})
        return out if type(out) is DeviceArray else _wrap(result)
    call.__name__ = name
    return call


class Ufunc:
    """A NumPy ufunc run on device arrays, with its methods (CuPy's ufuncs have them too)."""

    def __init__(self, ufunc: np.ufunc):
        self._ufunc = ufunc
        self.__name__ = ufunc.__name__
        self.nin, self.nout, self.nargs = ufunc.nin, ufunc.nout, ufunc.nargs

    def __call__(self, *args, **kwargs):
        return _apply_ufunc(self._ufunc, "__call__", args, kwargs)

    def __getattr__(self, method):
        if method not in ("reduce", "accumulate", "reduceat", "outer", "at"):
            raise AttributeError(f"device ufunc {self.__name__!r} has no attribute {method!r}")
        return lambda *args, **kwargs: _apply_ufunc(self._ufunc, method, args, kwargs)

    def __repr__(self):
        return f"<device ufunc {self.__name__!r}>"


def _apply_ufunc(ufunc, method, args, kwargs):
    what = f"{ufunc.__name__}.{method}" if method != "__call__" else ufunc.__name__
    out = kwargs.get("out")
    if method == "at":  # (a, indices, b): the indices as in indexing
        ufunc.at(_unwrap(args[0], what), _unwrap_index(args[1]), *_unwrap(args[2:], what))
        return None
    result = getattr(ufunc, method)(*_unwrap(args, what), **{k: _unwrap(v, what) for k, v in kwargs.items()})
    if out is not None:  # written in place: hand back the caller's device arrays
        return out[0] if isinstance(out, tuple) and len(out) == 1 else out
    return _wrap(result)


# ---- the array ---------------------------------------------------------------------------------
_METHODS = ("astype", "reshape", "transpose", "ravel", "flatten", "squeeze", "swapaxes", "copy", "sum",
            "prod", "mean", "var", "std", "max", "min", "argmax", "argmin", "any", "all", "cumsum",
            "cumprod", "conj", "conjugate", "clip", "round", "dot", "diagonal", "trace", "nonzero",
            "repeat", "take", "fill", "sort", "argsort", "view", "searchsorted", "partition",
            "argpartition", "choose", "compress", "put")


class DeviceArray:
    """A NumPy array standing for an array on another device (see the module docstring)."""

    __slots__ = ("_data",)
    __array_priority__ = 100  # as cupy.ndarray
    __hash__ = None

    def __init__(self, data: np.ndarray):
        assert type(data) is np.ndarray, type(data)
        self._data = data

    # -- the refusals --
    def __array__(self, dtype=None, copy=None):
        raise TypeError(_IMPLICIT)

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        operands = inputs + tuple(kwargs.get("out", ()))
        if any(isinstance(x, np.ndarray) for x in operands):
            raise _host_operand_error(ufunc.__name__)
        if not all(_is_operand(x) for x in operands):
            return NotImplemented  # a tracer, a Parameter...: let its own protocol run
        return _apply_ufunc(ufunc, method, inputs, kwargs)

    def __array_function__(self, func, types_, args, kwargs):
        if not all(issubclass(t, DeviceArray) for t in types_):
            return NotImplemented
        impl = _namespace_function(func)
        return NotImplemented if impl is None else impl(*args, **kwargs)

    # -- explicit copies and conversions (CuPy synchronises and allows these) --
    # Each goes through get(), which declares the synchronisation as CuPy's does: of a non-empty array
    # only, before the copy; item() and bool() check the size first, float()/int()/complex() after.
    def get(self) -> np.ndarray:
        """The explicit device-to-host copy."""
        if self._data.size:
            declare_synchronize()
        return self._data.copy()

    def item(self, *args):
        if self._data.size != 1:
            raise ValueError("can only convert an array of size 1 to a Python scalar")
        return self.get().item(*args)

    def tolist(self):
        return self.get().tolist()

    def __float__(self):
        self.get()
        return float(self._scalar("float"))

    def __int__(self):
        self.get()
        return int(self._scalar("int"))

    def __complex__(self):
        self.get()
        return complex(self._scalar("complex"))

    def __bool__(self):
        value = self._scalar("bool")
        self.get()
        return bool(value)

    def _scalar(self, what):
        if self._data.size != 1:
            raise TypeError(f"only 1-element device arrays can be converted with {what}(), got shape "
                            f"{self._data.shape}")
        return self._data.reshape(()).item()

    # -- attributes --
    shape = property(lambda self: self._data.shape)
    dtype = property(lambda self: self._data.dtype)
    ndim = property(lambda self: self._data.ndim)
    size = property(lambda self: self._data.size)
    itemsize = property(lambda self: self._data.itemsize)
    nbytes = property(lambda self: self._data.nbytes)
    strides = property(lambda self: self._data.strides)
    T = property(lambda self: DeviceArray(self._data.T))
    mT = property(lambda self: DeviceArray(self._data.mT))
    real = property(lambda self: DeviceArray(self._data.real))
    imag = property(lambda self: DeviceArray(self._data.imag))
    base = property(lambda self: None if self._data.base is None else DeviceArray(np.asarray(self._data.base)))
    device = property(lambda self: "device:0")

    @property
    def flags(self):
        # CuPy's flags: contiguity and ownership only (no `writeable`)
        f = self._data.flags
        return types.SimpleNamespace(c_contiguous=f.c_contiguous, f_contiguous=f.f_contiguous,
                                     owndata=f.owndata)

    def __getattr__(self, name):
        if name in _METHODS:
            return _device_call(getattr(self._data, name), f"ndarray.{name}", self)
        raise AttributeError(f"'DeviceArray' object has no attribute {name!r} (not in the double's list)")

    def __len__(self):
        return len(self._data)

    def __iter__(self):
        if self._data.ndim == 0:
            raise TypeError("iteration over a 0-d array")
        return (DeviceArray(np.asarray(row)) for row in self._data)

    def __getitem__(self, idx):
        _check_mask(idx)
        return _wrap(self._data[_unwrap_index(idx)])

    def __setitem__(self, idx, value):
        _check_mask(idx)
        self._data[_unwrap_index(idx)] = _unwrap(value, "assignment")

    def __copy__(self):
        return DeviceArray(self._data.copy())

    def __deepcopy__(self, memo):
        return DeviceArray(copy.deepcopy(self._data, memo))

    def __reduce__(self):  # CuPy pickles the host copy
        return (DeviceArray, (self.get(),))

    # printing reads the values: get(), as CuPy's __repr__, __str__ and __format__
    def __repr__(self):
        return "device_" + repr(self.get())

    def __str__(self):
        return str(self.get())

    def __format__(self, spec):
        host = self.get()
        return format(host.item() if host.ndim == 0 else host, spec)


def _check_mask(idx) -> None:
    """A boolean mask in an index (a device or host array, non-empty) makes CuPy count its true
    entries on the host (``int(mask_scanned[-1])`` in ``_prepare_mask_indexing_single``)."""
    for i in idx if type(idx) is tuple else (idx,):
        if isinstance(i, (DeviceArray, np.ndarray)) and i.dtype == np.bool_ and i.size:
            declare_synchronize()


def _is_operand(x) -> bool:
    return type(x) is DeviceArray or isinstance(x, (int, float, complex, bool, np.generic)) or x is None


def _binary(ufunc, reflected=False):
    def op(self, other):
        if not _is_operand(other):
            if isinstance(other, np.ndarray):
                raise _host_operand_error(ufunc.__name__)
            return NotImplemented
        return _apply_ufunc(ufunc, "__call__", (other, self) if reflected else (self, other), {})
    return op


def _inplace(ufunc):
    def op(self, other):
        _apply_ufunc(ufunc, "__call__", (self, other), {"out": (self,)})
        return self
    return op


for _name, _uf in [("add", np.add), ("sub", np.subtract), ("mul", np.multiply), ("truediv", np.true_divide),
                   ("floordiv", np.floor_divide), ("mod", np.remainder), ("pow", np.power),
                   ("matmul", np.matmul), ("and", np.bitwise_and), ("or", np.bitwise_or),
                   ("xor", np.bitwise_xor), ("lshift", np.left_shift), ("rshift", np.right_shift),
                   ("divmod", np.divmod)]:
    setattr(DeviceArray, f"__{_name}__", _binary(_uf))
    setattr(DeviceArray, f"__r{_name}__", _binary(_uf, reflected=True))
    if _name != "divmod":
        setattr(DeviceArray, f"__i{_name}__", _inplace(_uf))
for _name, _uf in [("lt", np.less), ("le", np.less_equal), ("gt", np.greater), ("ge", np.greater_equal),
                   ("eq", np.equal), ("ne", np.not_equal)]:
    setattr(DeviceArray, f"__{_name}__", _binary(_uf))
for _name, _uf in [("neg", np.negative), ("pos", np.positive), ("abs", np.absolute), ("invert", np.invert)]:
    setattr(DeviceArray, f"__{_name}__", lambda self, _uf=_uf: _apply_ufunc(_uf, "__call__", (self,), {}))


# ---- the namespace -----------------------------------------------------------------------------
def _asarray(a, dtype=None, order=None, *, copy=None):
    """The explicit host-to-device copy (a device array: a cast, or itself)."""
    if type(a) is DeviceArray:
        data = a._data if dtype is None else a._data.astype(dtype, copy=False)
        return DeviceArray(data.copy() if copy else data) if data is not a._data or copy else a
    return DeviceArray(np.array(_unwrap_sequence(a), dtype=dtype, order=order or "K", copy=True))


def _ascontiguousarray(a, dtype=None):
    """CuPy's: a C-contiguous device array, copied when ``a`` is not one (code that views the memory
    with ``as_strided`` relies on the layout)."""
    out = _asarray(a, dtype)
    return out if out._data.flags.c_contiguous else DeviceArray(np.ascontiguousarray(out._data))


def _array(a, dtype=None, copy=True, order="K", ndmin=0):
    data = a._data if type(a) is DeviceArray else _unwrap_sequence(a)
    return DeviceArray(np.array(data, dtype=dtype, copy=True, order=order, ndmin=ndmin))


def _unwrap_sequence(a):
    """Device arrays inside a (nested) list as their data: ``cupy.asarray([x, y])`` stacks them."""
    if type(a) is DeviceArray:
        return a._data
    if type(a) in (list, tuple):
        return type(a)(_unwrap_sequence(v) for v in a)
    return a


def _asnumpy(a, **kwargs):
    """The explicit device-to-host copy (``get()``, which synchronises); a host array passes through
    (as ``cupy.asnumpy``)."""
    return a.get() if type(a) is DeviceArray else np.asarray(a, **kwargs)


def _result_type(*arrays_and_dtypes):
    return np.result_type(*[a.dtype if type(a) is DeviceArray else a for a in arrays_and_dtypes])


_FUNCTIONS = """
zeros ones empty full zeros_like ones_like empty_like full_like arange linspace logspace geomspace eye
identity tri tril triu diag diagflat diagonal trace meshgrid indices
reshape transpose moveaxis swapaxes rollaxis broadcast_to broadcast_arrays expand_dims squeeze ravel
concatenate stack hstack vstack dstack column_stack split array_split atleast_1d atleast_2d atleast_3d
flip fliplr flipud roll rot90 repeat tile pad take take_along_axis put_along_axis
where clip round around real imag conjugate conj angle sinc iscomplexobj isrealobj isscalar
sum prod mean var std max min amax amin argmax argmin any all cumsum cumprod average median
nansum nanprod nanmean nanvar nanstd nanmax nanmin nanargmax nanargmin nancumsum nancumprod
sort argsort partition argpartition searchsorted unique nonzero count_nonzero argwhere flatnonzero
dot vdot inner outer tensordot einsum kron cross diff ediff1d convolve
shape ndim size copy copyto may_share_memory shares_memory isclose allclose array_equal
can_cast promote_types
""".split()
_UFUNC_NAMES = [n for n in dir(np) if isinstance(getattr(np, n), np.ufunc)]
_LINALG = ("solve inv pinv eigh eigvalsh eig eigvals qr cholesky det slogdet svd norm lstsq matrix_power "
           "matrix_rank").split()
_FFT = """fft ifft fft2 ifft2 fftn ifftn rfft irfft rfft2 irfft2 rfftn irfftn hfft ihfft fftfreq rfftfreq
fftshift ifftshift""".split()
_CONSTANTS = "pi e inf nan newaxis euler_gamma".split()
_TYPES = """dtype float16 float32 float64 complex64 complex128 int8 int16 int32 int64 uint8 uint16 uint32 uint64
bool_ intp integer floating complexfloating inexact number signedinteger unsignedinteger generic finfo
iinfo""".split()


def _module(name, functions, source):
    module = types.ModuleType(name)
    for fn in functions:
        setattr(module, fn, _device_call(getattr(source, fn), f"{name}.{fn}"))
    return module


xp = _module("devicearray", _FUNCTIONS, np)
DeviceArray.__module__ = xp.__name__  # packaged as CuPy is: the type lives under the module that names it
sys.modules[xp.__name__] = xp
xp.__doc__ = "The double's namespace: a module like ``cupy`` (see tests/_device.py)."
for _n in _UFUNC_NAMES:
    setattr(xp, _n, Ufunc(getattr(np, _n)))
for _n in _CONSTANTS + _TYPES:
    setattr(xp, _n, getattr(np, _n))
xp.ndarray = DeviceArray
xp.asarray, xp.array, xp.asnumpy, xp.result_type = _asarray, _array, _asnumpy, _result_type
xp.ascontiguousarray = _ascontiguousarray
xp.linalg = _module("devicearray.linalg", _LINALG, np.linalg)
xp.fft = _module("devicearray.fft", _FFT, np.fft)
xp.lib = types.ModuleType("devicearray.lib")
xp.lib.stride_tricks = _module("devicearray.lib.stride_tricks", ["as_strided"], np.lib.stride_tricks)

def _fusion_signature(args) -> tuple:
    """What CuPy's ``Fusion.__call__`` (cupy/_core/fusion.pyx) keys its kernels by: each array's dtype
    and ndim, each NumPy scalar's dtype, each Python scalar's type (never a shape or a value)."""
    return tuple((a.dtype.char,) if isinstance(a, np.generic) else (a.dtype.char, a.ndim) if hasattr(a, "dtype")
                 else (type(a),) for a in args)


class Fused:
    """What ``xp.fuse(fn)`` returns: ``fn`` run on device arrays, as one "kernel" (CuPy's ``fuse``
    compiles the body; here it runs eagerly on the double). ``calls`` counts the launches, so tests
    can see that a fused program ran; host arrays are refused, as by any device kernel.

    Compilations are counted as CuPy makes them: a ``cupy.fuse`` object traces ``fn`` and builds an
    ``ElementwiseKernel`` at the first call with each new signature (:func:`_fusion_signature`) and
    memoises it on itself (``Fusion._memo``). A second fuse object of the same function, or of an
    equal one, starts with an empty memo and traces and builds again. ``signatures`` holds this
    object's, ``compiled`` counts them over all kernels. (CuPy then runs NVRTC only for a kernel
    source it has not compiled in this process nor finds in its on-disk cache; tracing and building
    are the per-object cost counted here.)"""

    launches = 0  # over all kernels
    compiled = 0  # (fuse object, signature) pairs traced and built, over all kernels

    def __init__(self, fn):
        self.fn, self.calls, self.signatures = fn, 0, set()

    def __call__(self, *args):
        if any(isinstance(a, np.ndarray) for a in args):
            raise _host_operand_error("fuse")
        signature = _fusion_signature(args)
        if signature not in self.signatures:
            self.signatures.add(signature)
            Fused.compiled += 1
        self.calls += 1
        Fused.launches += 1
        return self.fn(*args)


xp.fuse = Fused

# ``cupyx.scipy`` (tapegrad finds it as ``<module>x.scipy.<name>``): what CuPy has of SciPy, spelled and
# behaving as CuPy's does, in a file of its own (imported at the top)
_device_cupyx.install(xp, _module)

_SUBMODULES = {"numpy": xp, "numpy.linalg": xp.linalg, "numpy.fft": xp.fft}


def _namespace_function(func):
    """The namespace's version of the NumPy function ``func`` (CuPy's ``__array_function__`` rule: the
    function of the same name in the matching module), or None."""
    module = _SUBMODULES.get(getattr(func, "__module__", None))
    return None if module is None else getattr(module, func.__name__, None)


def asarray(a, dtype=None):
    """Shorthand for tests: ``xp.asarray`` mapped over a pytree's array leaves (host arrays and
    NumPy scalars move to the device; Python scalars stay as they are)."""
    import tapegrad as tg
    return tg.tree.tree_map(lambda x: _asarray(x, dtype) if isinstance(x, (np.ndarray, np.generic)) else x, a)


def get(a):
    """Shorthand for tests: ``.get()`` mapped over a pytree's device leaves."""
    import tapegrad as tg
    return tg.tree.tree_map(lambda x: x.get() if type(x) is DeviceArray else x, a)


# ``cupyx``'s counterpart: ``xpx.allow_synchronize(False)`` makes any synchronisation raise
# ``xpx.DeviceSynchronized``, on the double as on CuPy
xpx = sys.modules[f"{xp.__name__}x"]


def synchronizations() -> int | None:
    """How many synchronisations the double has declared so far (allowed or not); None on real CuPy,
    which counts none."""
    return _device_cupyx.synchronizations if xp.__name__ == "devicearray" else None


# ---- real CuPy in place of the double ------------------------------------------------------------
def _use_cupy():
    """``TAPEGRAD_DEVICE=cupy``: every name above that tests import stands for CuPy's own, so the device
    tests run unchanged on a GPU. ``cupy.fuse`` is wrapped to count launches, as ``Fused`` does."""
    global xp, DeviceArray, Fused, _asarray
    import cupy
    compile_kernel = cupy.fuse

    class CountingFuse(Fused):
        """``cupy.fuse(fn)``, counting its launches and its compilations (the signatures its
        ``Fusion`` object builds a kernel for)."""

        def __init__(self, fn):
            super().__init__(compile_kernel(fn))

    global xpx
    import cupyx
    xp, DeviceArray, Fused, xpx = cupy, cupy.ndarray, CountingFuse, cupyx
    _asarray = cupy.asarray
    cupy.fuse = CountingFuse


if os.environ.get("TAPEGRAD_DEVICE", "double") == "cupy":
    _use_cupy()
elif os.environ.get("TAPEGRAD_DEVICE", "double") != "double":
    raise ValueError(f"TAPEGRAD_DEVICE must be 'double' or 'cupy', got {os.environ['TAPEGRAD_DEVICE']!r}")
