"""Array behaviour for tracers and Parameters: Python operators, the methods users reach for, and
NumPy's dispatch protocols (``__array_ufunc__``, ``__array_function__``), so ``np.sin(x)`` and
``np.einsum(...)`` inside a transformed function trace like ``tnp.sin(x)``.

What is not handled fails loudly (a ``TypeError`` naming the function), never by silently dropping
the gradient; ``__array__`` raises :class:`~tapegrad.errors.TracerArrayConversionError`. NumPy indexing
one of its own arrays with a traced value (``y[0] = x``, ``table[i]``) gets that error with the fix for
that case (``tapegrad._subscripts``), through ``__array__`` and the spine's conversions.
"""
from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from tapegrad._core import bind
from tapegrad._subscripts import numpy_subscript_error
from tapegrad._typing import Array, ArrayLike, Axis, DTypeLike
from tapegrad.errors import TracerArrayConversionError
from tapegrad.numpy import _complex, _indexing, _linalg, _shape
from tapegrad.numpy import _elementwise as ew
from tapegrad.numpy import _reductions as red
from tapegrad.numpy import _ufuncs as uf

floor_divide_p, floor_divide = ew._binary("floor_divide", nondiff=True)


def _shape_args(args):
    """``reshape(2, 3)`` and ``reshape((2, 3))`` both mean shape ``(2, 3)``."""
    return args[0] if len(args) == 1 and not isinstance(args[0], (int, np.integer)) else args


class ArrayOperators:
    """The operators and methods of traced values and Parameters, each one call into
    ``tapegrad.numpy`` (arithmetic binds its primitive directly: it is the hottest path of every
    traced program). :func:`install` copies them onto the spine's ``Tracer`` and ``Boxed``."""

    __slots__ = ()
    __array_priority__ = 1000

    if TYPE_CHECKING:  # the spine's Tracer and Boxed, which these methods are installed on, have them
        def carries_derivative(self) -> bool: ...
        def __len__(self) -> int: ...

    # arithmetic. An operand whose class sets ``__array_ufunc__ = None`` (a tapegrad.sparse array) opts out
    # of NumPy's protocols (NEP 13): the forward operator returns NotImplemented, so its reflected method
    # (``A.__rmatmul__`` for ``y @ A``) runs. One getattr on the type: this is the hottest path.
    def __add__(self, other):
        return NotImplemented if getattr(type(other), "__array_ufunc__", 0) is None else bind(ew.add_p, self, other)
    def __radd__(self, other): return bind(ew.add_p, other, self)
    def __sub__(self, other):
        return (NotImplemented if getattr(type(other), "__array_ufunc__", 0) is None
                else bind(ew.subtract_p, self, other))
    def __rsub__(self, other): return bind(ew.subtract_p, other, self)
    def __mul__(self, other):
        return (NotImplemented if getattr(type(other), "__array_ufunc__", 0) is None
                else bind(ew.multiply_p, self, other))
    def __rmul__(self, other): return bind(ew.multiply_p, other, self)
    def __truediv__(self, other):
        return (NotImplemented if getattr(type(other), "__array_ufunc__", 0) is None
                else bind(ew.divide_p, self, other))
    def __rtruediv__(self, other): return bind(ew.divide_p, other, self)
    def __floordiv__(self, other):
        return NotImplemented if getattr(type(other), "__array_ufunc__", 0) is None else floor_divide(self, other)
    def __rfloordiv__(self, other): return floor_divide(other, self)
    def __mod__(self, other):
        return NotImplemented if getattr(type(other), "__array_ufunc__", 0) is None else uf.remainder(self, other)
    def __rmod__(self, other): return uf.remainder(other, self)
    def __pow__(self, other):
        return NotImplemented if getattr(type(other), "__array_ufunc__", 0) is None else bind(ew.power_p, self, other)
    def __rpow__(self, other): return bind(ew.power_p, other, self)
    def __matmul__(self, other):
        return NotImplemented if getattr(type(other), "__array_ufunc__", 0) is None else _linalg.matmul(self, other)
    def __rmatmul__(self, other): return _linalg.matmul(other, self)
    def __neg__(self): return bind(ew.negative_p, self)
    def __pos__(self): return self
    def __abs__(self): return ew.abs(self)

    # comparisons and logic (elementwise, not differentiable)
    def __lt__(self, other): return ew.less(self, other)
    def __le__(self, other): return ew.less_equal(self, other)
    def __gt__(self, other): return ew.greater(self, other)
    def __ge__(self, other): return ew.greater_equal(self, other)
    def __eq__(self, other): return ew.equal(self, other)
    def __ne__(self, other): return ew.not_equal(self, other)
    def __and__(self, other): return ew.bitwise_and(self, other)
    def __rand__(self, other): return ew.bitwise_and(other, self)
    def __or__(self, other): return ew.bitwise_or(self, other)
    def __ror__(self, other): return ew.bitwise_or(other, self)
    def __xor__(self, other): return ew.bitwise_xor(self, other)
    def __rxor__(self, other): return ew.bitwise_xor(other, self)
    def __invert__(self): return ew.invert(self)
    __hash__ = None  # type: ignore[assignment]  # unhashable, as NumPy arrays are: == is elementwise

    # indexing
    def __getitem__(self, idx): return _indexing.getitem(self, idx)

    def __setitem__(self, idx, value):
        raise TypeError("traced arrays are immutable: instead of x[idx] = v write x = x.at[idx].set(v) "
                        "(or .add(v)), which returns the updated array")

    @property
    def at(self) -> Array:
        """Functional updates: ``x.at[idx].set(v)``, ``.add(v)``, ``.get()``."""
        return _indexing.IndexUpdateHelper(self)

    def __iter__(self):
        for i in range(len(self)):
            yield self[i]

    # methods
    @property
    def T(self) -> Array: return _shape.transpose(self)
    def sum(self, axis: Axis = None, dtype: DTypeLike = None, keepdims: bool = False) -> Array:
        return red.sum(self, axis, dtype, keepdims)
    def mean(self, axis: Axis = None, dtype: DTypeLike = None, keepdims: bool = False) -> Array:
        return red.mean(self, axis, dtype, keepdims)
    def var(self, axis: Axis = None, dtype: DTypeLike = None, ddof: int = 0, keepdims: bool = False) -> Array:
        return red.var(self, axis, dtype, ddof, keepdims)
    def std(self, axis: Axis = None, dtype: DTypeLike = None, ddof: int = 0, keepdims: bool = False) -> Array:
        return red.std(self, axis, dtype, ddof, keepdims)
    def prod(self, axis: Axis = None, dtype: DTypeLike = None, keepdims: bool = False) -> Array:
        return red.prod(self, axis, dtype, keepdims)
    def max(self, axis: Axis = None, keepdims: bool = False) -> Array: return red.amax(self, axis, keepdims)
    def min(self, axis: Axis = None, keepdims: bool = False) -> Array: return red.amin(self, axis, keepdims)
    def argmax(self, axis: Axis = None, keepdims: bool = False) -> Array: return red.argmax(self, axis, keepdims)
    def argmin(self, axis: Axis = None, keepdims: bool = False) -> Array: return red.argmin(self, axis, keepdims)
    def all(self, axis: Axis = None, keepdims: bool = False) -> Array: return red.all(self, axis, keepdims)
    def any(self, axis: Axis = None, keepdims: bool = False) -> Array: return red.any(self, axis, keepdims)
    def cumsum(self, axis: Axis = None, dtype: DTypeLike = None) -> Array: return red.cumsum(self, axis, dtype)
    def cumprod(self, axis: Axis = None, dtype: DTypeLike = None) -> Array: return red.cumprod(self, axis, dtype)
    def reshape(self, *shape: Any, order: str = "C") -> Array: return _shape.reshape(self, _shape_args(shape), order)
    def transpose(self, *axes: Any) -> Array: return _shape.transpose(self, _shape_args(axes) if axes else None)
    def swapaxes(self, axis1: int, axis2: int) -> Array: return _shape.swapaxes(self, axis1, axis2)
    def squeeze(self, axis: Axis = None) -> Array: return _shape.squeeze(self, axis)
    def ravel(self) -> Array: return _shape.ravel(self)
    def flatten(self) -> Array: return _shape.ravel(self)
    def repeat(self, repeats: Any, axis: int | None = None) -> Array: return _shape.repeat(self, repeats, axis)
    def take(self, indices: ArrayLike, axis: int | None = None) -> Array: return _indexing.take(self, indices, axis)
    def astype(self, dtype: DTypeLike) -> Array: return ew.astype(self, dtype)
    def clip(self, min: ArrayLike = None, max: ArrayLike = None) -> Array: return ew.clip(self, min, max)
    def round(self, decimals: int = 0) -> Array: return ew.round(self, decimals)
    def dot(self, other: Any) -> Array: return _linalg.dot(self, other)
    def copy(self) -> Array: return self

    # complex parts
    @property
    def real(self) -> Array: return _complex.real(self)
    @property
    def imag(self) -> Array: return _complex.imag(self)
    def conj(self) -> Array: return _complex.conj(self)
    def conjugate(self) -> Array: return _complex.conj(self)

    # NumPy protocols
    def __dlpack__(self, *args, **kwargs):
        raise TracerArrayConversionError(
            f"cannot export a traced value ({self!r}) through DLPack (np.from_dlpack, another library's "
            "from_dlpack): it has no memory of its own to share; call tapegrad.numpy.from_dlpack, which "
            "returns a traced value as it is")

    def __array__(self, dtype=None, copy=None):
        error = numpy_subscript_error(self, sys._getframe(1))  # NumPy indexing its own array: y[i] = x
        if error is not None:
            raise error
        if self.carries_derivative():
            loss = ("the derivative would be lost; compute with tapegrad.numpy (import tapegrad.numpy as "
                    "tnp) or plain NumPy functions, which dispatch to it, or convert tg.stop_gradient(x) "
                    "if the value is meant as a constant")
        else:
            loss = ("compute with tapegrad.numpy (import tapegrad.numpy as tnp) or plain NumPy "
                    "functions, which dispatch to it, instead of np.asarray / np.array")
        raise TracerArrayConversionError(
            f"cannot convert a traced value ({self!r}) to a NumPy array or scalar (np.asarray, np.array, "
            f"np.float32(x), or a NumPy function given a list that holds it): {loss}"
            f"{_foreign_hint()}")

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        if not kwargs and method == "__call__":  # an array times a tracer (a rule's g * cos(x)): bind
            prim = _UFUNC_PRIMITIVES.get(ufunc)
            if prim is not None:
                return bind(prim, *inputs)
        if kwargs.get("out") is not None:
            raise TypeError(f"numpy.{ufunc.__name__}: out= is not supported on traced values; "
                            "use the returned array (tapegrad never writes into arrays)")
        kwargs.pop("out", None)
        if method == "reduce" and ufunc.__name__ in _UFUNC_REDUCTIONS and set(kwargs) <= {"axis", "keepdims"}:
            kwargs.setdefault("axis", 0)  # ufunc.reduce's default, unlike sum/max's None
            return _UFUNC_REDUCTIONS[ufunc.__name__](*inputs, **kwargs)
        # NumPy's own ufunc (one lookup, the hot path), or another library's (scipy.special.gammaln)
        numpys = getattr(np, ufunc.__name__, None) is ufunc
        foreign = None if numpys else _foreign_ufunc(ufunc)
        fn = _UFUNCS.get(ufunc.__name__) if numpys else _foreign_function(ufunc)
        if method != "__call__" or fn is None or kwargs:
            spelled = f"{foreign or 'numpy'}.{ufunc.__name__}" + ("" if method == "__call__" else f".{method}")
            extra = f" with {sorted(kwargs)}" if kwargs and fn is not None else ""
            hint = _ALTERNATIVES.get(f"{foreign}.{ufunc.__name__}")
            advice = f"call {hint}, which traces" if hint else "rewrite it with supported tapegrad.numpy functions"
            raise TypeError(f"{spelled}{extra} is not supported on traced values by tapegrad; {advice}")
        return fn(*inputs)

    def __array_function__(self, func, types, args, kwargs):
        fn = _FUNCTIONS.get(func)
        if fn is None:  # maybe one of a package imported on first use (tapegrad.numpy.linalg): import, retry
            _import_deferred()
            fn = _FUNCTIONS.get(func)
        if fn is None:
            raise TypeError(f"numpy.{_qualified(func)} is not supported on traced values: tapegrad.numpy "
                            "does not implement it; rewrite it with supported tapegrad.numpy functions")
        if kwargs.get("out") is not None:
            raise TypeError(f"numpy.{_qualified(func)}: out= is not supported on traced values")
        kwargs = {k: v for k, v in kwargs.items() if k != "out"}
        return fn(*args, **kwargs)


_ALTERNATIVES: dict = {}  # "scipy.special.gammaln" -> "tapegrad.scipy.special.gammaln"
_FOREIGN_MODULES: set = set()  # the registered modules that are not NumPy's ("scipy.special")


def register_alternatives(foreign: str, ours: str, names) -> None:
    """Name ``ours.<name>`` in the error raised when ``foreign.<name>`` (a module of another library,
    ``"scipy.special"``) is called on a traced value. Filled by the packages above this one."""
    for name in names:
        _ALTERNATIVES[f"{foreign}.{name}"] = f"{ours}.{name}"
    if foreign.split(".")[0] != "numpy":
        _FOREIGN_MODULES.add(foreign)


def register_hints(hints: dict) -> None:
    """Name what to call instead of a foreign function (``"scipy.sparse.__matmul__"``, as
    :func:`_foreign_hint` spells the outermost frame) in the error raised when it converts a traced
    value: ``{"scipy.sparse.__matmul__": "tapegrad.sparse.asarray(A) @ x"}``."""
    _ALTERNATIVES.update(hints)


_FOREIGN_UFUNCS: dict = {}  # scipy.special.gammaln (the ufunc object) -> tapegrad.scipy.special.gammaln
_PENDING_UFUNCS: dict = {}  # "scipy.special" -> our namespace, until that module has been imported


def register_foreign_ufuncs(foreign: str, namespace: dict) -> None:
    """Dispatch each ufunc of the module ``foreign`` (``"scipy.special"``) whose name ``namespace``
    defines to our function of that name, when it is called on a traced value (NumPy's
    ``__array_ufunc__`` protocol hands it over: ``scipy.special.gammaln(x)`` then traces).

    Nothing is imported here: a traced value can meet ``foreign``'s ufuncs only after the program has
    imported ``foreign`` itself, so the ufuncs are looked up then (:func:`_foreign_function`), and
    ``import tapegrad`` does not pay for SciPy (about 250 ms)."""
    _PENDING_UFUNCS[foreign] = namespace


_DEFERRED: dict = {}  # "scipy" -> "tapegrad.scipy", until a traced value first meets that library


def defer_registrations(library: str, ours: str) -> None:
    """Import our package ``ours`` (``"tapegrad.scipy"``, which registers its alternatives and foreign
    ufuncs) only when a traced value first meets a ufunc or function of ``library`` (``"scipy"``),
    so that ``import tapegrad`` imports neither."""
    _DEFERRED[library] = ours


def _import_deferred() -> None:
    """Import the deferred packages of the libraries the program has imported (see above)."""
    for library in [name for name in _DEFERRED if name in sys.modules]:
        importlib.import_module(_DEFERRED.pop(library))


def _foreign_function(ufunc):
    """Our function for another library's ufunc, or None; first registers the pending modules that
    have been imported since."""
    fn = _FOREIGN_UFUNCS.get(ufunc)
    if fn is None:
        _import_deferred()
        for foreign in [name for name in _PENDING_UFUNCS if name in sys.modules]:
            module, namespace = sys.modules[foreign], _PENDING_UFUNCS.pop(foreign)
            for name, ours in namespace.items():
                theirs = getattr(module, name, None)
                if isinstance(theirs, np.ufunc) and callable(ours):
                    _FOREIGN_UFUNCS[theirs] = ours
        fn = _FOREIGN_UFUNCS.get(ufunc)
    return fn


def _foreign_ufunc(ufunc):
    """The module (``"scipy.special"``) of a ufunc that is not NumPy's, among those registered."""
    _import_deferred()
    for foreign in _FOREIGN_MODULES:
        module = sys.modules.get(foreign)
        if module is not None and getattr(module, ufunc.__name__, None) is ufunc:
            return foreign
    return None


def _foreign_hint() -> str:
    """For the error of a traced value converted inside another library's function (``np.mean`` of a
    list that holds it, ``scipy.linalg.expm`` calling ``np.asarray``): the function of ours to call
    instead, found as the outermost frame of that library on the call stack."""
    frame, outermost = sys._getframe(2), None
    while frame is not None:
        module = frame.f_globals.get("__name__", "")
        package = module.split(".")[0]
        if package in ("numpy", "scipy"):
            parts = module.split(".")
            sub = parts[:2] if package == "scipy" else parts[:1] + [p for p in parts[1:2] if p in ("linalg", "fft")]
            outermost = f"{'.'.join(sub)}.{_distribution_of(frame)}{frame.f_code.co_name}"
        elif outermost is not None:
            break
        frame = frame.f_back
    if outermost is not None:
        _import_deferred()
    hint = _ALTERNATIVES.get(outermost) if outermost else None
    return (f". {outermost} converts its arguments to NumPy arrays before tapegrad can see the traced "
            f"values in them; call {hint}, which traces" if hint else "")


def _distribution_of(frame) -> str:
    """``"norm."`` when ``frame`` is a method of a ``scipy.stats`` distribution (``norm.logpdf``), so
    that the error names ``tapegrad.scipy.stats.norm.logpdf``; else the empty string."""
    owner = frame.f_locals.get("self") if frame.f_globals.get("__name__", "").startswith("scipy.stats") else None
    name = getattr(owner, "name", None)
    return f"{name}." if isinstance(name, str) else ""


def _qualified(func) -> str:
    module = getattr(func, "__module__", "") or ""
    return ("linalg." if "linalg" in module else "") + func.__name__


_UFUNCS: dict[str, Callable[..., Any]] = {
    "add": ew.add, "subtract": ew.subtract, "multiply": ew.multiply, "divide": ew.divide,
    "true_divide": ew.divide, "power": ew.power, "float_power": ew.float_power, "negative": ew.negative,
    "positive": lambda x: x, "absolute": ew.abs, "fabs": uf.fabs, "sign": ew.sign, "exp": ew.exp,
    "expm1": ew.expm1, "log": ew.log, "log1p": ew.log1p, "log2": ew.log2, "log10": ew.log10,
    "sqrt": ew.sqrt, "square": ew.square, "reciprocal": ew.reciprocal, "sin": ew.sin, "cos": ew.cos,
    "tan": ew.tan, "tanh": ew.tanh, "sinh": ew.sinh, "cosh": ew.cosh, "arcsin": ew.arcsin,
    "arccos": ew.arccos, "arctan": ew.arctan, "floor": ew.floor, "ceil": ew.ceil,
    "maximum": ew.maximum, "minimum": ew.minimum, "logaddexp": ew.logaddexp, "arctan2": ew.arctan2,
    "equal": ew.equal, "not_equal": ew.not_equal, "less": ew.less, "less_equal": ew.less_equal,
    "greater": ew.greater, "greater_equal": ew.greater_equal, "logical_and": ew.logical_and,
    "logical_or": ew.logical_or, "logical_xor": ew.logical_xor, "logical_not": ew.logical_not,
    "isfinite": ew.isfinite, "isnan": ew.isnan, "isinf": ew.isinf, "matmul": _linalg.matmul,
    "bitwise_and": ew.bitwise_and, "bitwise_or": ew.bitwise_or, "bitwise_xor": ew.bitwise_xor,
    "invert": ew.invert, "floor_divide": floor_divide, "conjugate": _complex.conj, "exp2": uf.exp2,
    "cbrt": uf.cbrt, "arcsinh": uf.arcsinh, "arccosh": uf.arccosh, "arctanh": uf.arctanh,
    "deg2rad": uf.deg2rad, "rad2deg": uf.rad2deg, "radians": uf.deg2rad, "degrees": uf.rad2deg,
    "trunc": uf.trunc, "signbit": uf.signbit, "fmax": uf.fmax, "fmin": uf.fmin,
    "logaddexp2": uf.logaddexp2, "remainder": uf.remainder, "fmod": uf.fmod, "hypot": uf.hypot,
    "copysign": uf.copysign,
}


# NumPy's arithmetic ufuncs whose tapegrad function is the primitive's bind itself: __array_ufunc__
# binds them with no lookup by name (an array on the left of an operator lands there, not in __rmul__)
_UFUNC_PRIMITIVES = {getattr(np, prim.name): prim for prim in (
    ew.add_p, ew.subtract_p, ew.multiply_p, ew.divide_p, ew.power_p, ew.negative_p, ew.exp_p, ew.log_p,
    ew.sin_p, ew.cos_p, ew.tanh_p, ew.sqrt_p, ew.maximum_p, ew.minimum_p)}


def register_ufuncs(namespace: dict) -> None:
    """Serve each NumPy ufunc whose name ``namespace`` defines (``"ldexp"``) with our function of that
    name, when it is called on a traced value (``__array_ufunc__``): for the ufuncs of modules that
    ``tapegrad.numpy`` imports after this one."""
    _UFUNCS.update(namespace)


_UFUNC_REDUCTIONS: dict[str, Callable[..., Any]] = {
    "add": red.sum, "multiply": red.prod, "maximum": red.amax, "minimum": red.amin}

_FUNCTIONS: dict = {}  # numpy function -> tapegrad.numpy function; filled by tapegrad.numpy's __init__


def register_numpy_functions(namespace: dict, module=np) -> None:
    """Map every function of NumPy's ``module`` (``numpy``, ``numpy.linalg``, ``numpy.fft``) whose
    name ``namespace`` defines to our version of it, for ``__array_function__``."""
    for name, fn in namespace.items():
        np_fn = getattr(module, name, None)
        if callable(fn) and callable(np_fn) and not isinstance(np_fn, (type, np.ufunc)):
            # NumPy 2's array-API aliases are its older functions under a new name
            # (np.permute_dims is np.transpose): the function is served by our function of its own
            # name, whose defaults are NumPy's (our permute_dims requires axes; np.transpose(x) does not)
            canonical = getattr(np_fn, "__name__", name)
            if name != canonical and callable(namespace.get(canonical)):
                continue
            _FUNCTIONS[np_fn] = fn


_NOT_COPIED = frozenset(["__module__", "__qualname__", "__doc__", "__slots__", "__dict__", "__weakref__"])


def install(*classes) -> None:
    """Give ``classes`` (the spine's ``Tracer`` and ``Boxed``) the array behaviour of
    :class:`ArrayOperators`. Done once, when ``tapegrad.numpy`` is imported: the spine sits below this
    package and cannot import it, as JAX's ``numpy/array_methods.py`` installs the operators of its
    tracers. A subclass's own definitions (``Parameter.__array__``, ``__hash__``) still take precedence."""
    for cls in classes:
        for name, value in vars(ArrayOperators).items():
            if name not in _NOT_COPIED:
                setattr(cls, name, value)
