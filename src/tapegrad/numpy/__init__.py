"""``tapegrad.numpy``: NumPy's functions, traceable and differentiable.

Import as ``import tapegrad.numpy as tnp``. Names, signatures and broadcasting follow NumPy; on plain
arrays the functions compute what NumPy computes, and inside a transform they record primitives.
"""
import importlib
from typing import TYPE_CHECKING

import numpy as _np
from numpy import (
    bool_,
    complex64,
    complex128,
    dtype,
    e,
    float16,
    float32,
    float64,
    inf,
    int8,
    int16,
    int32,
    int64,
    nan,
    newaxis,
    pi,
    uint8,
)

from tapegrad import _core, _rules
from tapegrad.numpy import _operators
from tapegrad.numpy._complex import conj, conjugate, imag, real
from tapegrad.numpy._creation import (
    arange,
    array,
    asarray,
    empty,
    empty_like,
    eye,
    full,
    full_like,
    identity,
    ones,
    ones_like,
    zeros,
    zeros_like,
)
from tapegrad.numpy._elementwise import (
    abs,
    absolute,
    add,
    angle,
    arccos,
    arcsin,
    arctan,
    arctan2,
    around,
    astype,
    bitwise_and,
    bitwise_or,
    bitwise_xor,
    ceil,
    clip,
    cos,
    cosh,
    divide,
    equal,
    exp,
    expm1,
    float_power,
    floor,
    greater,
    greater_equal,
    invert,
    isfinite,
    isinf,
    isnan,
    less,
    less_equal,
    log,
    log1p,
    log2,
    log10,
    logaddexp,
    logical_and,
    logical_not,
    logical_or,
    logical_xor,
    maximum,
    minimum,
    multiply,
    negative,
    not_equal,
    power,
    reciprocal,
    round,
    sign,
    sin,
    sinh,
    sqrt,
    square,
    subtract,
    tan,
    tanh,
    true_divide,
)
from tapegrad.numpy._indexing import take, take_along_axis
from tapegrad.numpy._linalg import dot, einsum, inner, matmul, outer, tensordot, vdot
from tapegrad.numpy._operators import (
    defer_registrations,
    floor_divide,
    register_alternatives,
    register_numpy_functions,
    register_ufuncs,
)
from tapegrad.numpy._ranges import geomspace, linspace, logspace
from tapegrad.numpy._reductions import (
    all,
    amax,
    amin,
    any,
    argmax,
    argmin,
    cumprod,
    cumsum,
    max,
    mean,
    min,
    prod,
    std,
    sum,
    var,
)
from tapegrad.numpy._shape import (
    broadcast_arrays,
    broadcast_to,
    concatenate,
    expand_dims,
    flip,
    moveaxis,
    ndim,
    pad,
    ravel,
    repeat,
    reshape,
    result_type,
    shape,
    size,
    split,
    squeeze,
    stack,
    swapaxes,
    tile,
    transpose,
)
from tapegrad.numpy._ufuncs import (
    arccosh,
    arcsinh,
    arctanh,
    cbrt,
    copysign,
    deg2rad,
    degrees,
    exp2,
    fabs,
    fmax,
    fmin,
    fmod,
    hypot,
    logaddexp2,
    mod,
    nan_to_num,
    rad2deg,
    radians,
    remainder,
    signbit,
    sinc,
    trunc,
)

_operators.install(_core.Tracer, _core.Boxed)  # the array behaviour of traced values and Parameters

__all__ = [
    "abs", "absolute", "add", "all", "amax", "amin", "any", "arange", "arccos", "arcsin", "arctan",
    "arctan2", "argmax", "argmin", "around", "array", "asarray", "astype", "bitwise_and", "bitwise_or",
    "bitwise_xor", "broadcast_arrays", "broadcast_to", "ceil", "clip", "concatenate", "cos", "cosh",
    "cumprod", "cumsum", "divide", "dot", "einsum", "empty", "empty_like", "equal", "exp", "expand_dims", "expm1",
    "eye", "flip", "float_power", "floor", "floor_divide", "full", "full_like", "greater", "greater_equal", "identity",
    "inner", "invert", "isfinite", "isinf", "isnan", "less", "less_equal", "linalg", "linspace", "log",
    "logspace", "geomspace",
    "log1p", "log2", "log10", "logaddexp", "logical_and", "logical_not", "logical_or", "logical_xor",
    "matmul", "max", "maximum", "mean", "min", "minimum", "moveaxis", "multiply", "negative",
    "not_equal", "ones", "ones_like", "outer", "pad", "power", "prod", "ravel", "reciprocal", "repeat",
    "reshape", "result_type", "round", "shape", "size", "ndim", "sign", "sin", "sinh", "split", "sqrt", "square",
    "squeeze", "stack", "std",
    "subtract", "sum", "swapaxes", "take", "take_along_axis", "tan", "tanh", "tensordot", "tile",
    "transpose", "true_divide", "var", "vdot", "where", "zeros", "zeros_like",
    "bool_", "complex64", "complex128", "dtype", "e", "float16", "float32", "float64", "inf", "int8",
    "int16", "int32", "int64", "nan", "newaxis", "pi", "uint8",
]

# ---- ufuncs and complex parts ----

__all__ += [
    "angle", "arccosh", "arcsinh", "arctanh", "cbrt", "conj", "conjugate", "copysign", "deg2rad", "degrees",
    "exp2", "fabs", "fmax", "fmin", "fmod", "hypot", "imag", "logaddexp2", "mod", "nan_to_num", "rad2deg",
    "radians", "real", "remainder", "signbit", "sinc", "trunc",
]
# ---- end block: ufuncs and complex parts ----

# ---- block: array functions (sorting, stacking, matrices, nan-reductions, statistics) ----
from tapegrad.numpy._arrays import diff, fliplr, flipud, roll, rot90, select  # noqa: E402
from tapegrad.numpy._matrices import cross, diag, diagflat, diagonal, kron, trace, tril, triu  # noqa: E402
from tapegrad.numpy._nanreductions import (  # noqa: E402
                                      nanargmax,
                                      nanargmin,
                                      nancumprod,
                                      nancumsum,
                                      nanmax,
                                      nanmean,
                                      nanmedian,
                                      nanmin,
                                      nanpercentile,
                                      nanprod,
                                      nanquantile,
                                      nanstd,
                                      nansum,
                                      nanvar,
)
from tapegrad.numpy._sorting import argpartition, argsort, partition, sort  # noqa: E402
from tapegrad.numpy._stacking import (  # noqa: E402
                                      array_split,
                                      atleast_1d,
                                      atleast_2d,
                                      atleast_3d,
                                      column_stack,
                                      dsplit,
                                      dstack,
                                      hsplit,
                                      hstack,
                                      vsplit,
                                      vstack,
)
from tapegrad.numpy._statistics import average, median, percentile, ptp, quantile  # noqa: E402

__all__ += [
    "argpartition", "argsort", "array_split", "atleast_1d", "atleast_2d", "atleast_3d", "average",
    "column_stack", "cross", "diag", "diagflat", "diagonal", "diff", "dsplit", "dstack", "fliplr",
    "flipud", "hsplit", "hstack", "kron", "median", "nanargmax", "nanargmin", "nancumprod", "nancumsum",
    "nanmax", "nanmean", "nanmedian", "nanmin", "nanpercentile", "nanprod", "nanquantile", "nanstd",
    "nansum", "nanvar", "partition", "percentile", "ptp", "quantile", "roll", "rot90", "select", "sort",
    "trace", "tril", "triu", "vsplit", "vstack",
]
# ---- end block: array functions ----

# ---- block: type and shape queries, reordering, flat indices, predicates, arrays from other things ----
from tapegrad.numpy._from import from_dlpack, fromfunction, frompyfunc  # noqa: E402
from tapegrad.numpy._predicates import isneginf, isposinf  # noqa: E402
from tapegrad.numpy._queries import (  # noqa: E402
    broadcast_shapes,
    can_cast,
    einsum_path,
    isdtype,
    isscalar,
    issubdtype,
    iterable,
    promote_types,
)
from tapegrad.numpy._reorder import (  # noqa: E402
    copy,
    lexsort,
    mask_indices,
    place,
    ravel_multi_index,
    resize,
    sort_complex,
    trim_zeros,
    unravel_index,
)

__all__ += [
    "broadcast_shapes", "can_cast", "copy", "einsum_path", "from_dlpack", "frompyfunc", "fromfunction",
    "isdtype", "isneginf", "isposinf", "isscalar", "issubdtype", "iterable", "lexsort", "mask_indices", "place",
    "promote_types", "ravel_multi_index", "resize", "sort_complex", "trim_zeros", "unravel_index",
]
# ---- end block: type and shape queries, reordering, flat indices, predicates, arrays from other things ----

# ---- block: numerical functions (polynomials, calculus, convolution, covariance, floating point, windows) ----
from tapegrad.numpy._bessel import i0  # noqa: E402
from tapegrad.numpy._calculus import ediff1d, gradient, interp, trapezoid, unwrap  # noqa: E402
from tapegrad.numpy._comparison import (  # noqa: E402
    allclose,
    array_equal,
    array_equiv,
    isclose,
    iscomplex,
    iscomplexobj,
    isreal,
    isrealobj,
    real_if_close,
)
from tapegrad.numpy._convolve import convolve, correlate  # noqa: E402
from tapegrad.numpy._covariance import corrcoef, cov  # noqa: E402
from tapegrad.numpy._cumulative import cumulative_prod, cumulative_sum  # noqa: E402
from tapegrad.numpy._floating import (  # noqa: E402
    divmod,
    fix,
    frexp,
    gcd,
    heaviside,
    lcm,
    ldexp,
    modf,
    nextafter,
    positive,
    rint,
    spacing,
)
from tapegrad.numpy._polynomial import (  # noqa: E402
    poly,
    polyadd,
    polyder,
    polydiv,
    polyfit,
    polyint,
    polymul,
    polysub,
    polyval,
    roots,
    vander,
)
from tapegrad.numpy._windows import bartlett, blackman, hamming, hanning, kaiser  # noqa: E402

__all__ += [
    "allclose", "array_equal", "array_equiv", "bartlett", "blackman", "convolve", "corrcoef", "correlate",
    "cov", "cumulative_prod", "cumulative_sum", "divmod", "ediff1d", "euler_gamma", "fix", "frexp", "gcd",
    "gradient", "hamming", "hanning", "heaviside", "i0", "interp", "isclose", "iscomplex", "iscomplexobj",
    "isreal", "isrealobj", "kaiser", "lcm", "ldexp", "modf", "nextafter", "poly", "polyadd", "polyder",
    "polydiv", "polyfit", "polyint", "polymul", "polysub", "polyval", "positive", "real_if_close", "rint",
    "roots", "spacing", "trapezoid", "unwrap", "vander",
]
euler_gamma = _np.euler_gamma
register_ufuncs({name: globals()[name] for name in (
    "divmod", "frexp", "gcd", "heaviside", "lcm", "ldexp", "modf", "nextafter", "positive", "rint", "spacing")})
# ---- end block: numerical functions ----

# ---- block: shape, indexing, sets, searching and the array-API spellings ----
from tapegrad.numpy._apply import (  # noqa: E402
    apply_along_axis,
    apply_over_axes,
)
from tapegrad.numpy._array_api import (  # noqa: E402
    acos,
    acosh,
    asin,
    asinh,
    atan,
    atan2,
    atanh,
    bitwise_count,
    bitwise_invert,
    bitwise_left_shift,
    bitwise_not,
    bitwise_right_shift,
    concat,
    left_shift,
    matrix_transpose,
    matvec,
    permute_dims,
    pow,
    right_shift,
    unstack,
    vecdot,
    vecmat,
)
from tapegrad.numpy._histograms import (  # noqa: E402
    bincount,
    histogram,
    histogram2d,
    histogram_bin_edges,
    histogramdd,
)
from tapegrad.numpy._index_tricks import (  # noqa: E402
    c_,
    diag_indices,
    diag_indices_from,
    index_exp,
    indices,
    ix_,
    meshgrid,
    mgrid,
    ogrid,
    r_,
    rollaxis,
    s_,
    tri,
    tril_indices,
    tril_indices_from,
    triu_indices,
    triu_indices_from,
)
from tapegrad.numpy._insertion import (  # noqa: E402
    append,
    block,
    delete,
    fill_diagonal,
    insert,
    put,
    put_along_axis,
)
from tapegrad.numpy._searching import (  # noqa: E402
    argwhere,
    compress,
    count_nonzero,
    digitize,
    extract,
    flatnonzero,
    nonzero,
    searchsorted,
    where,  # the three-argument form is _elementwise's; this one adds NumPy's where(condition)
)
from tapegrad.numpy._selection import (  # noqa: E402
    choose,
    piecewise,
)
from tapegrad.numpy._setops import (  # noqa: E402
    intersect1d,
    isin,
    setdiff1d,
    setxor1d,
    union1d,
    unique,
    unique_all,
    unique_counts,
    unique_inverse,
    unique_values,
)

__all__ += [
    "acos", "acosh", "append", "apply_along_axis", "apply_over_axes", "argwhere", "asin", "asinh", "atan",
    "atan2", "atanh", "bincount", "bitwise_count", "bitwise_invert", "bitwise_left_shift", "bitwise_not",
    "bitwise_right_shift", "block", "c_", "choose", "compress", "concat", "count_nonzero", "delete",
    "diag_indices", "diag_indices_from", "digitize", "extract", "fill_diagonal", "flatnonzero", "histogram",
    "histogram2d", "histogram_bin_edges", "histogramdd", "index_exp", "indices", "insert", "intersect1d",
    "isin", "ix_", "left_shift", "matrix_transpose", "matvec", "meshgrid", "mgrid", "nonzero", "ogrid",
    "permute_dims", "piecewise", "pow", "put", "put_along_axis", "r_", "right_shift", "rollaxis", "s_",
    "searchsorted", "setdiff1d", "setxor1d", "tri", "tril_indices", "tril_indices_from", "triu_indices",
    "triu_indices_from", "union1d", "unique", "unique_all", "unique_counts", "unique_inverse",
    "unique_values", "unstack", "vecdot", "vecmat",
]
register_ufuncs({name: globals()[name] for name in (
    "bitwise_count", "left_shift", "matvec", "right_shift", "vecdot", "vecmat")})  # NumPy 2 ufuncs
# ---- end block: shape, indexing, sets, searching and the array-API spellings ----

# ---- block: linalg and fft submodules ----
# imported on first use (__getattr__ below), or when a traced value first meets a NumPy function that is not
# registered yet (np.linalg.solve(x): _operators' deferred registrations); each registers its NumPy functions
# itself. Together they were a sixth of `import tapegrad`, and NumPy imports numpy.fft on first use too
_SUBPACKAGES = ("fft", "linalg")
__all__ += ["fft"]
for _name in _SUBPACKAGES:
    defer_registrations(f"numpy.{_name}", f"{__name__}.{_name}")
_rules.UNIMPORTED.extend(f"{__name__}.{name}" for name in _SUBPACKAGES)  # they declare primitives

if TYPE_CHECKING:  # what __getattr__ imports, spelled out for type checkers only
    from tapegrad.numpy import fft, linalg
else:  # to a checker, a name that is neither above nor in the block just above is an error
    def __getattr__(name: str) -> object:
        if name in _SUBPACKAGES:
            return importlib.import_module(f"{__name__}.{name}")  # binds it here too: the next access is direct
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *_SUBPACKAGES})
# ---- end block: linalg and fft submodules ----


register_numpy_functions({name: globals()[name] for name in __all__ if name not in _SUBPACKAGES})
# np.mean([t0, t1]) converts the list before dispatch can see the tracers: its error names ours
register_alternatives("numpy", "tapegrad.numpy", __all__)
