"""The type aliases of tapegrad's annotations.

tapegrad's functions take NumPy arrays, CuPy arrays and, inside a transform, traced values that stand
for either; Python scalars and (nested) lists are accepted wherever NumPy accepts them. Parameters are
annotated :data:`ArrayLike`, which is ``Any``: no static type names all that NumPy converts (CuPy is not
installed where most type checking runs), and a narrower one would refuse a user's valid call.

Results are the structural type ``tapegrad.Array`` (``tapegrad._array_type``), which NumPy arrays, CuPy
arrays and tracers all satisfy, so that a typed user program keeps its types through tapegrad instead of
receiving ``Any``: ``tapegrad.numpy`` and ``tapegrad.nn`` annotate their results with it. :data:`Array`
here is still ``Any``: the modules that import it (``tapegrad.scipy``, ``tapegrad.random``, the
transforms) have results annotated ``Array`` that are tuples or named results, which the protocol would
reject; each moves to ``tapegrad._array_type.Array`` as its annotations are made exact, and then this
alias becomes that protocol. The other aliases are precise.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeAlias, TypeVar

Array: TypeAlias = Any
"""An array: a NumPy or CuPy ``ndarray``, or a traced value standing for one inside a transform (``Any``
until every module's results are exact; ``tapegrad._array_type.Array`` is the precise type)."""

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
