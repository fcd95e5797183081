"""How primitives are declared: impl, abstract eval, vjp and jvp rules, in one place per primitive.

A vjp rule is ``rule(ct, ans, *primals, **params) -> cotangent of one operand``. A jvp rule is
``rule(t, ans, *primals, **params) -> the output tangent that operand's tangent t contributes``.
Rules are written in tapegrad operations, never raw numpy/cupy, so a derivative is itself
differentiable.

A primitive with several results (``primitive(..., multiple_results=True)``: ``eigh``, ``svd``, max
pooling's values and argmax) has the same helpers with lists where one result was: its vjp rule is
``rule(cts, ans, *primals, **params)``, ``cts`` one cotangent per result (zeros where none reached a
float or complex result, None for an integer one) and ``ans`` the list of results; a per-operand jvp
rule returns one tangent per result (None: zero), and so does a joint one (:func:`defjvp_joint`,
``rule(tangents, ans, *primals, **params) -> list``); the batch rule gives ``(outs, out_dims)``.
Integer results never get a tangent or a cotangent.

Rules take the cotangent first and are called at backward time, rather than returning a closure at
forward time (HIPS autograd's spelling): no closure is built for every forward operation, which is most
of the per-op cost of a tape.
"""
from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from typing import Any, NamedTuple, cast

import numpy as np

from tapegrad._backend import zeros_like
from tapegrad._core import Primitive, ShapedArray
from tapegrad._typing import ArrayLike, PyTree

PRIMITIVES: list = []  # every primitive declared here, in order: tests check that each has all its rules
UNIMPORTED: list = []  # tapegrad's packages left for first use (tapegrad/__init__.py), which declare more


def primitive(name: str, impl: Callable[..., Any], abstract_eval: Callable[..., Any] | None = None,
              multiple_results: bool = False) -> Primitive:
    """A new primitive, entered in the registry.

    Args:
        name: unique among registered primitives (prefix a user's with its package: ``"mylib.op"``).
        impl: ``impl(*arrays, **params) -> array`` on concrete arrays; static parameters keyword-only.
        abstract_eval: ``abstract_eval(*avals, **params) -> ShapedArray``; by default ``impl`` run once
            on zero-stride dummies of the operands' shapes and dtypes.
        multiple_results: the impl returns a tuple or list of arrays, the abstract eval a list of
            ``ShapedArray``, and ``bind`` a list (see the module notes for the rules).

    Returns:
        The :class:`Primitive`; give it rules with the ``def*`` helpers, apply it with ``bind``.

    Raises:
        ValueError: a primitive of that name is registered already.
    """
    prim = Primitive(name, multiple_results)
    _register(prim, sys._getframe(1).f_globals.get("__name__", ""))
    prim.def_impl(impl)
    prim.def_abstract_eval(abstract_eval or _default_abstract_eval(prim))
    return prim


def _default_abstract_eval(prim: Primitive):
    """A NumPy ufunc's own type resolution where the impl is one (every elementwise primitive of
    ``tapegrad.numpy``); otherwise the impl run on dummies."""
    impl = prim.impl
    if isinstance(impl, np.ufunc) and impl.nout == 1 and not prim.multiple_results:
        return ShapeRule(ufunc_abstract_eval(impl), prim)
    return _abstract_eval_by_dummies(prim)


def defvjp(prim: Primitive, *rules: Any) -> None:
    """Give ``prim`` one vjp rule per operand (autograd's ``defvjp``, with the cotangent as an argument).

    Args:
        prim: the primitive.
        *rules: one per operand, in order: ``rule(ct, ans, *primals, **params) -> cotangent of that
            operand`` (for a primitive with several results, ``cts``, one per result, and the list
            ``ans``). A None rule, or a rule returning None, means a zero cotangent for that operand.
            Write them in tapegrad operations; undo broadcasting with :func:`unbroadcast`.

    Returns:
        None; ``prim.vjp_rules`` is set.
    """
    prim.vjp_rules = tuple(_no_cotangent if rule is None else rule for rule in rules)


def _no_cotangent(ct, ans, *primals, **params):
    """The rule of an operand the output does not depend on (an index, an integer order)."""
    return None


def defjvp(prim: Primitive, *rules: Any) -> None:
    """Give ``prim`` one jvp rule per operand; the output tangent is the sum of their contributions.

    Args:
        prim: the primitive.
        *rules: one per operand: ``rule(t, ans, *primals, **params)`` is the tangent of the output
            due to that operand's tangent ``t`` (a list, one per result, for a primitive with several
            results). A None rule means the output does not depend on that operand (an index, a mask).

    Returns:
        None; ``prim.jvp_rule`` is set.
    """
    prim.jvp_rule = (_SummedJVPs if prim.multiple_results else _SummedJVP)(rules)


def defjvp_argnum(prim: Primitive, rule: Callable[..., Any]) -> None:
    """One jvp rule for every operand of a variadic primitive; the contributions are summed.

    Args:
        prim: the primitive.
        rule: ``rule(argnum, t, ans, *primals, **params)``: the output tangent due to the tangent ``t``
            of operand ``argnum``.

    Returns:
        None; ``prim.jvp_rule`` is set.
    """
    prim.jvp_rule = (_SummedJVPs if prim.multiple_results else _SummedJVP)(_ArgnumRules(rule))


def defvjp_fwd(prim: Primitive, fwd: Callable[..., Any]) -> None:
    """How reverse mode applies ``prim`` (a primitive with several results) when it records it:
    ``custom_vjp``'s ``fwd``, for a primitive. ``scan`` keeps each step's intermediates this way,
    instead of recomputing the step in the backward pass.

    Args:
        prim: a primitive declared with ``multiple_results=True``.
        fwd: ``fwd(*primals, **params) -> (ans, residuals)``: the results and what the vjp rule will
            need (any pytree), computed with ``bind`` so that outer transforms see them. The vjp rule
            then gets ``residuals=`` among its keyword arguments (and so does the jvp rule of a
            recorded application, which may ignore it).

    Returns:
        None; ``prim.vjp_fwd`` is set.

    Raises:
        ValueError: ``prim`` has a single result (its tape path has no such hook: it is every
            operation's hot path).
    """
    if not prim.multiple_results:
        raise ValueError(f"defvjp_fwd: {prim!r} has a single result; declare it with multiple_results=True "
                         "to give it a forward that keeps residuals")
    prim.vjp_fwd = fwd


def defjvp_joint(prim: Primitive, rule: Callable[..., Any]) -> None:
    """A jvp rule that sees every tangent at once. For primitives whose output tangent is not a sum of
    per-operand terms, or is cheaper computed jointly (``concatenate``, ``where``), and for primitives
    with several results.

    Args:
        prim: the primitive.
        rule: ``rule(tangents, ans, *primals, **params)``, with None in ``tangents`` for a zero
            tangent; returns the output tangent, or one per result for several results (None: zero).

    Returns:
        None; ``prim.jvp_rule`` is set.
    """
    prim.jvp_rule = rule


def deflinear(prim: Primitive) -> None:
    """Declare ``prim`` linear in its operands jointly (``negative``, ``reshape``, ``sum``,
    ``concatenate``, ``getitem``): its jvp is ``prim`` itself applied to the tangents, zeros standing
    for missing ones.

    Args:
        prim: the primitive.

    Returns:
        None; ``prim.jvp_rule`` is set. Its vjp rules are still to give (:func:`defvjp`).
    """
    def jvp(tangents, ans, *primals, **params):
        return prim.bind(*[zeros_like(p) if t is None else t for t, p in zip(tangents, primals)], **params)
    prim.jvp_rule = jvp


class _SummedJVP:
    """A jvp rule made of per-operand rules: the output tangent is the sum of their contributions."""

    __slots__ = ("rules",)

    def __init__(self, rules):
        self.rules = rules

    def __call__(self, tangents, ans, *primals, **params):
        out = None
        for i, t in enumerate(tangents):
            if t is None:
                continue
            rule = self.rules[i]
            if rule is None:
                continue
            term = rule(t, ans, *primals, **params)
            if term is not None:
                out = term if out is None else out + term
        return out


class _SummedJVPs(_SummedJVP):
    """Per-operand rules of a primitive with several results: each gives one tangent per result, and
    the contributions are summed result by result."""

    __slots__ = ()

    def __call__(self, tangents, ans, *primals, **params):
        outs = [None] * len(ans)
        for i, t in enumerate(tangents):
            rule = self.rules[i]
            if t is None or rule is None:
                continue
            terms = rule(t, ans, *primals, **params)
            for k, term in enumerate(terms):
                if term is not None:
                    outs[k] = term if outs[k] is None else outs[k] + term
        return outs


def def_nondiff(prim: Primitive) -> None:
    """Declare ``prim``'s derivative zero everywhere (comparisons, ``floor``, ``argmax``, or any primitive
    returning integers or booleans): reverse mode tapes nothing for it, and its outputs carry no
    tangent.

    Args:
        prim: the primitive.

    Returns:
        None; ``prim.nondiff`` is set.
    """
    prim.nondiff = True


# ---- abstract evaluation -------------------------------------------------------------------------

def aval_of(x: ArrayLike) -> ShapedArray:
    """The abstract value of an operand (Python scalars are weak: they take NumPy 2's promotion).

    Args:
        x: an array, a tracer or a Python scalar.

    Returns:
        A :class:`ShapedArray` ``(x.shape, x.dtype)``, or ``((), type(x))`` for a Python ``bool``,
        ``int``, ``float`` or ``complex``.
    """
    if isinstance(x, (bool, int, float, complex)):
        return ShapedArray((), type(x))
    return ShapedArray(tuple(x.shape), np.dtype(x.dtype))


def _dummy(aval: ShapedArray):
    if isinstance(aval.dtype, type) and aval.dtype in (bool, int, float, complex):
        return aval.dtype(0)
    # a zero-stride, read-only view of one zero: what np.broadcast_to gives, without its Python wrapper
    dummy: np.ndarray = np.ndarray(aval.shape, aval.dtype, buffer=np.zeros(1, aval.dtype),
                                   strides=(0,) * len(aval.shape))
    dummy.flags.writeable = False
    return dummy


def _abstract_eval_by_dummies(prim: Primitive):
    """Shape/dtype inference by running ``impl`` on zero-stride arrays of the operands' shapes.

    Exact for every primitive (NumPy itself decides shapes and promotion); used where no cheaper rule
    is written. Costs one impl call at trace time, never at run time.
    """
    def abstract_eval(*avals, **params):
        with np.errstate(all="ignore"):
            out = prim.impl(*[_dummy(a) for a in avals], **params)
        if prim.multiple_results:
            return [ShapedArray(tuple(np.shape(o)), np.result_type(o)) for o in out]
        return ShapedArray(tuple(np.shape(out)), np.result_type(out))
    return abstract_eval


class ShapeRule:
    """A primitive's abstract eval from a shape/dtype rule, with the dummy evaluation behind it
    (:func:`def_shape_rule` makes one).

    ``rule(*avals, **params)`` returns the ``ShapedArray`` (a list for several results), or None for
    operands it does not cover; where it declines, or raises (operands NumPy would refuse), the impl
    runs on dummies, so the answer or the error is NumPy's own. A rule is a few microseconds where the
    dummy evaluation of a product runs the product (milliseconds for a 512 x 512 matmul).

    Args:
        rule: the shape/dtype rule.
        prim: the primitive whose impl the dummy evaluation runs.

    Calling it, ``shape_rule(*avals, **params)``, returns the ``ShapedArray`` (or list of them).
    """

    __slots__ = ("rule", "dummies")

    def __init__(self, rule: Callable[..., Any], prim: Primitive) -> None:
        self.rule = rule
        self.dummies = _abstract_eval_by_dummies(prim)

    def __call__(self, *avals: Any, **params: Any) -> Any:
        try:
            out = self.rule(*avals, **params)
        except (TypeError, ValueError, IndexError):
            out = None
        return self.dummies(*avals, **params) if out is None else out


def def_shape_rule(prim: Primitive, rule: Callable[..., Any]) -> None:
    """Give ``prim`` an abstract eval from a shape/dtype rule, backed by the dummy evaluation
    (:class:`ShapeRule`): where the rule declines (None) or raises, the impl runs on zero-stride
    dummies.

    Args:
        prim: the primitive.
        rule: ``rule(*avals, **params) -> ShapedArray`` (a list for several results), or None for
            operands it does not cover.

    Returns:
        None; ``prim.abstract_eval`` is set.
    """
    prim.def_abstract_eval(ShapeRule(rule, prim))


_WEAK = (int, float, complex)  # Python scalar types NumPy 2 types weakly


def operand_dtype(aval: ShapedArray):
    """The dtype NumPy's type resolution takes for an operand: a weak Python type as itself (int,
    float, complex), a Python bool as NumPy's bool, else the NumPy dtype."""
    dtype = aval.dtype
    if isinstance(dtype, type) and not issubclass(dtype, np.generic):
        return dtype if dtype in _WEAK else np.dtype(dtype)
    return np.dtype(dtype)


def strong_dtype(aval: ShapedArray) -> np.dtype:
    """The NumPy dtype of an operand, a Python scalar's as NumPy makes it an array.

    Args:
        aval: a :class:`ShapedArray`.

    Returns:
        A ``numpy.dtype`` (a Python ``float`` gives float64, ``int`` int64, ``bool`` bool).
    """
    return np.dtype(aval.dtype)


def result_dtype(*avals: Any) -> np.dtype:
    """``numpy.result_type`` of the operands, Python scalars weak (as NumPy 2 types them in a call:
    ``float32 array + 1.0`` stays float32).

    Args:
        *avals: :class:`ShapedArray` values.

    Returns:
        A ``numpy.dtype``.
    """
    return np.result_type(*[a.dtype(0) if _is_weak(a) else np.dtype(a.dtype) for a in avals])


def _is_weak(aval: ShapedArray) -> bool:
    return isinstance(aval.dtype, type) and aval.dtype in _WEAK


def broadcast_shapes(*shapes: Any) -> tuple:
    """NumPy's broadcast of ``shapes`` (``numpy.broadcast_shapes``), with the common cases (all equal,
    scalars) first.

    Args:
        *shapes: tuples of ints.

    Returns:
        The broadcast shape, a tuple.

    Raises:
        ValueError: the shapes do not broadcast.
    """
    first = shapes[0]
    if all(s == first for s in shapes):
        return tuple(first)
    nonscalar = [s for s in shapes if s]
    if len(nonscalar) <= 1:
        return tuple(nonscalar[0]) if nonscalar else ()
    return np.broadcast_shapes(*shapes)


def ufunc_abstract_eval(ufunc: np.ufunc):
    """The shape rule of an elementwise primitive whose impl is ``ufunc``: the operands' broadcast
    shape, and the dtype NumPy's own type resolution gives (``ufunc.resolve_dtypes``, which types
    Python scalars weakly as a call does)."""
    def rule(*avals):
        shape = broadcast_shapes(*[a.shape for a in avals])
        # cast: the stubs of numpy 2.2.0 (the floor) lack ufunc.resolve_dtypes
        dtypes = cast(Any, ufunc).resolve_dtypes((*[operand_dtype(a) for a in avals], None))
        return ShapedArray(shape, dtypes[-1])
    rule.__name__ = rule.__qualname__ = f"{ufunc.__name__}_abstract_eval"
    return rule


def reduced_shape(shape: tuple, axis, keepdims: bool) -> tuple:
    """The shape of a reduction over ``axis`` (None: all; else a tuple of non-negative axes)."""
    if axis is None:
        return (1,) * len(shape) if keepdims else ()
    if keepdims:
        return tuple(1 if i in axis else d for i, d in enumerate(shape))
    return tuple(d for i, d in enumerate(shape) if i not in axis)


def reduction_abstract_eval(dtype_of: Callable[..., Any]) -> Any:
    """The shape rule of a reduction ``xp.<name>(x, axis=, keepdims=)``, for :func:`def_shape_rule`.

    Args:
        dtype_of: ``dtype_of(x_dtype) -> numpy.dtype`` of the result (None: not covered), e.g.
            :func:`summed_dtype` for ``sum``.

    Returns:
        ``rule(aval, *, axis, keepdims) -> ShapedArray``, the reduced shape (None reduces every axis;
        an int axis, ``argmax``'s, counts as a 1-tuple; an axis out of range declines, None).
    """
    def rule(aval, *, axis, keepdims):
        if axis is not None and not isinstance(axis, tuple):
            axis = (axis,)
        if axis is not None and not all(0 <= a < len(aval.shape) for a in axis):
            return None
        dtype = dtype_of(strong_dtype(aval))
        return None if dtype is None else ShapedArray(reduced_shape(tuple(aval.shape), axis, keepdims), dtype)
    return rule


def summed_dtype(dtype: np.dtype) -> np.dtype:
    """The dtype ``numpy.sum``/``numpy.prod`` give without ``dtype=``.

    Args:
        dtype: the operand's ``numpy.dtype``.

    Returns:
        Booleans and integers narrower than the platform's ``int_`` widen to it (unsigned ones to
        ``uint``); other dtypes are kept.
    """
    if dtype.kind == "b":
        return np.dtype(np.int_)
    if dtype.kind == "i" and dtype.itemsize < np.dtype(np.int_).itemsize:
        return np.dtype(np.int_)
    if dtype.kind == "u" and dtype.itemsize < np.dtype(np.uint).itemsize:
        return np.dtype(np.uint)
    return dtype


def unary_abstract_eval(aval: ShapedArray) -> ShapedArray:
    """The abstract eval of an elementwise float function (``sin``, ``log``): same shape; integers and
    booleans promote as NumPy does.

    Args:
        aval: the operand's :class:`ShapedArray`.

    Returns:
        ``ShapedArray(aval.shape, dtype)``, the dtype kept when floating or complex, else float64.
    """
    dtype = np.dtype(aval.dtype)
    return ShapedArray(aval.shape, dtype if dtype.kind in "fc" else np.dtype(np.float64))




def defvjp_argnum(prim: Primitive, rule: Callable[..., Any], operands: PyTree = None) -> None:
    """One vjp rule for every operand of a primitive with any number of them (``concatenate``,
    ``einsum``).

    Args:
        prim: the primitive.
        rule: ``rule(argnum, ct, ans, *primals, **params)``: the cotangent of operand ``argnum``
            (``cts`` for several results; None: zero).
        operands: optional ``operands(argnums, ct, ans, primals, **params) -> [cotangent of each
            operand in argnums]``, which the backward pass then calls once per node, so a node of N
            operands costs O(N), not the O(N^2) of N calls each unpacking all N primals (``stack`` of
            10^5 scalars).

    Returns:
        None; ``prim.vjp_rules`` is set.
    """
    prim.vjp_rules = _ArgnumRules(rule, operands)


class _ArgnumRules:
    """Indexable like a tuple of rules: ``rules[i]`` is the rule for operand ``i``; the backward pass
    calls ``all_operands`` once per node instead."""

    __slots__ = ("rule", "operands")

    def __init__(self, rule, operands=None):
        self.rule = rule
        self.operands = operands

    def __getitem__(self, argnum):
        rule = self.rule
        return lambda ct, ans, *primals, **params: rule(argnum, ct, ans, *primals, **params)

    def all_operands(self, argnums, ct, ans, primals, params):
        if self.operands is not None:
            return self.operands(argnums, ct, ans, primals, **params)
        return [self.rule(argnum, ct, ans, *primals, **params) for argnum in argnums]


# ---- the registry, out= forms and fusion templates ---------------------------------------------------

def register(prim: Primitive) -> None:
    """Add ``prim`` to the registry (:func:`primitives`), refusing a second primitive of the same name:
    jit's programs, printed programs and error messages name primitives, so two of one name would be
    confused. Nothing is added when it raises. :func:`primitive` registers what it makes; this is for
    a :class:`Primitive` made directly.

    Args:
        prim: the primitive.

    Returns:
        None.

    Raises:
        ValueError: a primitive of that name is registered already (the message names it and its
            impl).
    """
    _register(prim, sys._getframe(1).f_globals.get("__name__", ""))


def import_unimported() -> None:
    """Import tapegrad's packages that ``import tapegrad`` leaves for first use (:data:`UNIMPORTED`):
    they declare primitives too."""
    while UNIMPORTED:
        importlib.import_module(UNIMPORTED.pop(0))


def _register(prim: Primitive, caller: str) -> None:
    if UNIMPORTED and caller.split(".")[0] != "tapegrad":
        import_unimported()  # a user's primitive: a name tapegrad declares later would clash then, not now
    for known in PRIMITIVES:
        if known.name == prim.name:
            raise ValueError(
                f"a primitive named {prim.name!r} is already registered: {known!r}, impl {_where(known.impl)}; "
                f"the new {prim!r} needs another name: prefix it with your package's (\"mylib.{prim.name}\")")
    PRIMITIVES.append(prim)


def _where(fn) -> str:
    """``module.qualname`` of a function, for messages."""
    name = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", repr(fn))
    module = getattr(fn, "__module__", None)
    return f"{module}.{name}" if module else str(name)


def def_out_impl(prim: Primitive, out_impl: Callable[..., Any]) -> None:
    """Give ``prim`` an ``out=`` form, for jit's buffer reuse.

    Args:
        prim: the primitive.
        out_impl: ``out_impl(*arrays, out) -> out`` computes what ``impl`` does into ``out``, passed
            positionally: an array of the result's shape and dtype (the buffer of a dead intermediate,
            possibly one of ``arrays`` itself, read whole: read the operands before writing, as a ufunc
            does), or None (allocate). Called only for equations without static parameters, on NumPy
            arrays. A NumPy ufunc impl needs none: it is its own.

    Returns:
        None; ``prim.out_impl`` is set.
    """
    prim.out_impl = out_impl


class Fusion(NamedTuple):
    """How jit's elementwise fusion computes a primitive (a NamedTuple, set by :func:`def_fusion`).

    Args:
        template: a NumPy elementwise function's name (``"sin"``), or
            ``template(f, *operands, **params)`` building the result from ``f``'s functions.
        extra_ns: numexpr's extra time per element over NumPy's, ``(float32, float64)``, in ns.
    """

    template: object  # a NumPy function name (str) or ``template(f, *operands, **params)``
    extra_ns: tuple   # numexpr's extra time per element over NumPy's: (float32, float64), in ns


ARITHMETIC_NS = (0.6, 0.3)  # numexpr's extra ns per element for one arithmetic operation (measured)


def def_fusion(prim: Primitive, template: Any, extra_ns: tuple = ARITHMETIC_NS) -> None:
    """Let jit fuse ``prim`` with its elementwise neighbours into one kernel (numexpr on CPU, the
    backend's ``fuse`` on a device).

    Args:
        prim: an elementwise primitive (NumPy broadcasting, one result).
        template: how to compute ``prim`` from its operands: the name of a NumPy elementwise function
            (``"sin"``, ``"add"``, ``"where"``), or ``template(f, *operands, **params)`` building the
            result with operators, Python numbers (weakly typed, as NumPy 2 types them) and ``f``'s
            functions, which carry NumPy's names (``f.exp``, ``f.log1p``, ``f.absolute``, ``f.where``,
            ``f.maximum``...). On CPU the operands are numexpr expressions, on a device arrays.
        extra_ns: numexpr's extra time per element over NumPy's, in nanoseconds, for float32 and
            float64: the fusion pass weighs it against the call overhead that fusing saves.

    A template is checked when first used on each operand dtype: one that numexpr cannot compile, or
    computes in another dtype than NumPy's result, is left unfused.

    Returns:
        None; ``prim.fusion`` is set to a :class:`Fusion`.
    """
    prim.fusion = Fusion(template, tuple(extra_ns))


def def_lowering(prim: Primitive, lowering: Any) -> None:
    """Let jit's compiled executor (numba, ``tapegrad._jit.native``) compile ``prim``.

    Args:
        prim: the primitive.
        lowering: ``lowering(ctx, *operands, **params)`` returning the result as a
            ``tapegrad._lowerings.Value`` (a list of them for a primitive with several results). An
            elementwise primitive takes :func:`elementwise_lowering` of its fusion template. Otherwise
            each operand is a ``Value`` with ``shape`` and ``dtype`` (a weak Python scalar's dtype is
            ``float``, ``int`` or ``bool``), held either unrolled (``texts``: a NumPy object array of
            element expressions; every 0-d value) or as a numba array (``name``); ``ctx.texts(v)`` and
            ``ctx.array(v)`` give either form of any value, ``ctx.out`` is the result's shape and dtype,
            ``ctx.let(expr)`` binds an expression to a fresh name, ``ctx.emit`` writes a statement and
            ``ctx.inline`` a sub-program. Raise ``NotLowerable`` to decline: the program then runs with
            the Python executor. Any other exception is a bug, reported as a RuntimeError naming the
            primitive.

    Returns:
        None; ``prim.lowering`` is set.
    """
    prim.lowering = lowering
