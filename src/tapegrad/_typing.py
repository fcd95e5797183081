"""The type aliases of tapegrad's annotations.

tapegrad's functions take and return NumPy arrays, CuPy arrays and, inside a transform, traced values
that stand for either; Python scalars and (nested) lists are accepted wherever NumPy accepts them. No
static type names all of these precisely: CuPy is not installed where most type checking runs, and a
tracer's array methods are installed on it at import (``tapegrad.numpy._operators.install``), so a
checker cannot see them. NumPy's own ``numpy.typing.NDArray`` would reject CuPy arrays and tracers.
So :data:`Array` and :data:`ArrayLike` are ``Any``: an annotation says which parameters are arrays (and
the docs page says what each function accepts), while the checker neither refuses a tracer nor
invents errors in the user's array arithmetic. The other aliases are precise.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeAlias, TypeVar

Array: TypeAlias = Any
"""An array: a NumPy or CuPy ``ndarray``, or a traced value standing for one inside a transform."""

ArrayLike: TypeAlias = Any
"""What converts to an :data:`Array`: an array, a Python or NumPy scalar, a (nested) list of them, or a
``tapegrad.Parameter``."""

PyTree: TypeAlias = Any
"""A pytree (``tapegrad.tree``): nested tuples, lists, dicts, namedtuples and registered classes whose
leaves are arrays (or other values)."""

GradPosition: TypeAlias = int | tuple[int, ...] | None
"""``grad``'s ``grad_position``: one positional input, several, or None (the weights only)."""

Weights: TypeAlias = Any
"""``grad``'s ``weights``: a ``Parameter``, a ``ParameterTuple``, a list or tuple of Parameters, or any
pytree of them (Any: a pytree's container types are open)."""

Axis: TypeAlias = int | Sequence[int] | None
"""An axis, several axes, or None (all of them), as NumPy's reductions take."""

ShapeLike: TypeAlias = int | Sequence[int]
"""A shape: an int (one dimension) or a sequence of ints."""

if TYPE_CHECKING:  # numpy.typing only for checkers: it is not needed at run time
    import numpy.typing

    DTypeLike: TypeAlias = numpy.typing.DTypeLike | None
    """A dtype, or what ``numpy.dtype`` accepts (``"float32"``, ``np.float32``); None: the default."""
else:
    DTypeLike = Any

Fn = TypeVar("Fn", bound=Callable[..., Any])
"""A function type kept by a decorator that returns the function it was given."""

__all__ = ["Array", "ArrayLike", "Axis", "DTypeLike", "Fn", "GradPosition", "PyTree", "ShapeLike", "Weights"]
