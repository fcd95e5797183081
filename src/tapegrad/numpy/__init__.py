"""``tapegrad.numpy``: NumPy's functions, traceable and differentiable.

Import as ``import tapegrad.numpy as tnp``. Names, signatures and broadcasting follow NumPy; on plain
arrays the functions compute what NumPy computes, and inside a transform they record primitives.
"""
import numpy as _np

from tapegrad import _core
from tapegrad.numpy import linalg
from tapegrad.numpy._creation import (arange, array, asarray, empty, empty_like, eye, full, full_like,
                                      identity, linspace, ones, ones_like, zeros, zeros_like)
from tapegrad.numpy._elementwise import (abs, absolute, add, arccos, arcsin, arctan, arctan2, around, astype,
                                         bitwise_and, bitwise_or, bitwise_xor, ceil, clip, cos, cosh,
                                         divide, equal, exp, expm1, float_power, floor, greater, greater_equal, invert,
                                         isfinite, isinf, isnan, less, less_equal, log, log1p, log2, log10,
                                         logaddexp, logical_and, logical_not, logical_or, logical_xor,
                                         maximum, minimum, multiply, negative, not_equal, power, reciprocal,
                                         round, sign, sin, sinh, sqrt, square, subtract, tan, tanh,
                                         true_divide, where)
from tapegrad.numpy._indexing import take, take_along_axis
from tapegrad.numpy._linalg import dot, einsum, inner, matmul, outer, tensordot, vdot
from tapegrad.numpy._operators import floor_divide, register_numpy_functions
from tapegrad.numpy._reductions import (all, amax, amin, any, argmax, argmin, cumsum, max, mean, min, prod,
                                        std, sum, var)
from tapegrad.numpy._shape import (broadcast_arrays, broadcast_to, concatenate, expand_dims, flip,
                                   moveaxis, ndim, pad, ravel, repeat, reshape, result_type, shape, size,
                                   split, squeeze, stack, swapaxes, tile, transpose)
from numpy import (bool_, complex64, complex128, dtype, e, float16, float32, float64, inf, int8, int16,
                   int32, int64, nan, newaxis, pi, uint8)

_core.sequence_to_array = array

__all__ = [
    "abs", "absolute", "add", "all", "amax", "amin", "any", "arange", "arccos", "arcsin", "arctan",
    "arctan2", "argmax", "argmin", "around", "array", "asarray", "astype", "bitwise_and", "bitwise_or",
    "bitwise_xor", "broadcast_arrays", "broadcast_to", "ceil", "clip", "concatenate", "cos", "cosh",
    "cumsum", "divide", "dot", "einsum", "empty", "empty_like", "equal", "exp", "expand_dims", "expm1",
    "eye", "flip", "float_power", "floor", "floor_divide", "full", "full_like", "greater", "greater_equal", "identity",
    "inner", "invert", "isfinite", "isinf", "isnan", "less", "less_equal", "linalg", "linspace", "log",
    "log1p", "log2", "log10", "logaddexp", "logical_and", "logical_not", "logical_or", "logical_xor",
    "matmul", "max", "maximum", "mean", "min", "minimum", "moveaxis", "multiply", "negative",
    "not_equal", "ones", "ones_like", "outer", "pad", "power", "prod", "ravel", "reciprocal", "repeat",
    "reshape", "result_type", "round", "shape", "size", "ndim", "sign", "sin", "sinh", "split", "sqrt", "square", "squeeze", "stack", "std",
    "subtract", "sum", "swapaxes", "take", "take_along_axis", "tan", "tanh", "tensordot", "tile",
    "transpose", "true_divide", "var", "vdot", "where", "zeros", "zeros_like",
    "bool_", "complex64", "complex128", "dtype", "e", "float16", "float32", "float64", "inf", "int8",
    "int16", "int32", "int64", "nan", "newaxis", "pi", "uint8",
]

# Issue 3's additions, one block per family; each block imports its names and extends __all__.
# ---- block: ufuncs and complex parts ----
# ---- end block: ufuncs and complex parts ----

# ---- block: array functions (sorting, stacking, matrices, nan-reductions, statistics) ----
# ---- end block: array functions ----

# ---- block: linalg and fft submodules ----
# ---- end block: linalg and fft submodules ----

register_numpy_functions({name: globals()[name] for name in __all__ if name != "linalg"})
register_numpy_functions({"norm": linalg.norm}, _np.linalg)
