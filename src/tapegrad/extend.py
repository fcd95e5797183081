"""Declaring primitives: the public API that tapegrad's own operations are declared with.

A primitive is a named operation with its rules, declared in one place (``docs/extending.md`` walks
through one, from a NumPy kernel to ``grad``, ``jvp``, ``vmap``, ``jit`` and second order)::

    from tapegrad import extend

    logcosh_p = extend.primitive("mylib.logcosh", logcosh_kernel, extend.unary_abstract_eval)
    extend.defvjp(logcosh_p, lambda ct, ans, x: ct * tnp.tanh(x))
    extend.defjvp(logcosh_p, lambda t, ans, x: t * tnp.tanh(x))
    extend.defbatch_elementwise(logcosh_p)

    def logcosh(x):
        return extend.bind(logcosh_p, x)

The rules, and the helper that sets each (array operands are positional, static parameters keyword-only
and hashable; rules are written in tapegrad operations, so derivatives differentiate again):

- ``impl(*arrays, **params) -> array``: runs on concrete arrays (:func:`primitive`,
  ``Primitive.def_impl``);
- ``abstract_eval(*avals, **params) -> ShapedArray``: shape and dtype for staging; by default a NumPy
  ufunc impl's own type resolution, or else the impl run on zero-stride dummies, which costs what the
  impl costs (a product runs the product): :func:`def_shape_rule` gives a rule that may decline
  operands (None) and leave them to the dummies (:func:`primitive`, ``Primitive.def_abstract_eval``,
  :func:`unary_abstract_eval`, :func:`broadcast_shapes`, :func:`result_dtype`,
  :func:`reduction_abstract_eval`, :func:`aval_of`);
- vjp, one rule per operand, ``rule(ct, ans, *primals, **params) -> cotangent of that operand``
  (:func:`defvjp`; :func:`defvjp_argnum` for any number of operands); None means a zero cotangent;
  a primitive with several results may also say how reverse mode applies it, keeping residuals for
  its rule (:func:`defvjp_fwd`);
- jvp, ``rule(t, ans, *primals, **params) -> output tangent due to that operand's tangent t``, summed
  over operands (:func:`defjvp`, :func:`defjvp_argnum`), or one joint rule
  ``rule(tangents, ans, *primals, **params)`` (:func:`defjvp_joint`); :func:`deflinear` for a
  primitive linear in its operands; :func:`def_nondiff` for one whose derivative is zero;
- batch (vmap), ``rule(vals, dims, **params) -> (out, out_dim)`` (:func:`defbatch`), or a family:
  :func:`defbatch_elementwise`, :func:`defbatch_reduction`, :func:`defbatch_single_axis`,
  :func:`defbatch_front`, with the axis helpers they are built from;
- helpers for the rules themselves: :func:`unbroadcast` (sums a cotangent back to a broadcast
  operand's shape: every binary vjp needs it) and :func:`keep_reduced` (a reduction's cotangent
  reshaped to broadcast against its operand);
- ``out=`` form for jit's buffer reuse, ``out_impl(*arrays, out)`` (:func:`def_out_impl`);
- fusion template for jit's elementwise fusion (:func:`def_fusion`);
- dependency for sparsity detection (``tg.jacobian_sparsity``), how outputs depend on inputs: a kind
  by name (``"elementwise"``, ``"structural"``, ``"reduction"``...) or a rule of a
  :class:`DependencyNode` (:func:`def_dependency`, :class:`StructuralDependency`); without one a
  primitive gets the dense pattern, which detection reports;
- lowering for jit's compiled (numba) executor (:func:`def_lowering`; :func:`elementwise_lowering` of
  a fusion template for an elementwise primitive).

Several results: see :class:`Primitive` (``multiple_results``).

Every primitive declared with :func:`primitive` is in the registry, :func:`primitives`, under a name no
other primitive has.
"""
from __future__ import annotations

from tapegrad._batching import (
    all_at_front,
    at_front,
    batch_axis_map,
    batch_size,
    bind_batched,
    broadcast_batch,
    defbatch,
    defbatch_elementwise,
    defbatch_front,
    defbatch_reduction,
    defbatch_single_axis,
    example_shape,
    is_identity_basis,
    lead_batch,
    ndim_of,
    shape_of,
    to_front,
)
from tapegrad._core import Primitive, ShapedArray, bind
from tapegrad._dependency import Node as DependencyNode
from tapegrad._dependency import Structural as StructuralDependency
from tapegrad._dependency import def_dependency
from tapegrad._lowerings import NotLowerable
from tapegrad._lowerings import elementwise as elementwise_lowering
from tapegrad._rules import (
    ARITHMETIC_NS,
    PRIMITIVES,
    Fusion,
    ShapeRule,
    aval_of,
    broadcast_shapes,
    def_fusion,
    def_lowering,
    def_nondiff,
    def_out_impl,
    def_shape_rule,
    defjvp,
    defjvp_argnum,
    defjvp_joint,
    deflinear,
    defvjp,
    defvjp_argnum,
    defvjp_fwd,
    import_unimported,
    primitive,
    reduction_abstract_eval,
    register,
    result_dtype,
    strong_dtype,
    summed_dtype,
    unary_abstract_eval,
)
from tapegrad._structural import keep_reduced, unbroadcast


def primitives() -> tuple:
    """The registry: every primitive declared with :func:`primitive` (or :func:`register`).

    Returns:
        A tuple of :class:`Primitive` objects, tapegrad's own (``tapegrad.numpy``, ``scipy``, ``nn``, ``random``)
        and the user's, in declaration order; their names are all different. A new tuple each call:
        changing it changes nothing.
    """
    import_unimported()  # the packages ``import tapegrad`` leaves for first use declare theirs on import
    return tuple(PRIMITIVES)


__all__ = [
    "ARITHMETIC_NS", "DependencyNode", "Fusion", "StructuralDependency", "def_dependency",
    "Primitive", "ShapeRule", "ShapedArray", "all_at_front", "at_front", "aval_of",
    "batch_axis_map", "batch_size", "bind", "bind_batched", "broadcast_batch", "broadcast_shapes", "def_fusion",
    "def_lowering", "elementwise_lowering", "NotLowerable", "def_nondiff", "def_out_impl", "def_shape_rule",
    "defbatch", "defbatch_elementwise",
    "defbatch_front", "defbatch_reduction", "defbatch_single_axis", "defjvp", "defjvp_argnum", "defjvp_joint",
    "deflinear", "defvjp", "defvjp_argnum", "defvjp_fwd", "example_shape", "is_identity_basis", "keep_reduced",
    "lead_batch", "ndim_of", "primitive", "primitives",
    "reduction_abstract_eval", "register", "result_dtype", "shape_of", "strong_dtype", "summed_dtype", "to_front",
    "unary_abstract_eval", "unbroadcast",
]
