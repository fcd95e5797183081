"""User-defined derivative rules: ``custom_vjp`` and ``custom_jvp``, as JAX spells them.

A decorated function is applied through ``bind_joint``: with no transform running it is just called;
under a transform the trace asks the call for what it needs, and each call answers both modes:

- ``custom_vjp``: reverse mode runs ``fwd`` and later ``bwd``. Forward mode (which JAX refuses) is the
  transpose of ``bwd``: since ``bwd`` is linear in the output cotangent, the vjp of
  ``g -> bwd(res, g)`` applied to the input tangents is the output tangent.
- ``custom_jvp``: forward mode runs the rule. Reverse mode transposes the rule's tangent map the same
  way: the vjp of ``t -> rule(primals, t)[1]``, at backward time.

Rules written in tapegrad operations are differentiated again by outer transforms, so both compose
with higher order and with each other.
"""
from __future__ import annotations

import functools
import inspect
import operator
from collections.abc import Callable
from typing import Any, Generic, ParamSpec, TypeVar, cast, overload

import numpy

from tapegrad import _tree
from tapegrad._backend import SCALAR_TYPES, zeros_like
from tapegrad._core import Boxed, bind_joint, is_inexact
from tapegrad._jvp import fit_rule_result, scalar_like
from tapegrad._tape import vjp_flat
from tapegrad._typing import Fn

P = ParamSpec("P")
R = TypeVar("R")


class _FlatCall:
    """A function of pytree arguments seen as a function of the flat leaves of its differentiable
    arguments (those not in ``nondiff_argnums``), the interface ``bind_joint`` expects. ``remat``
    says whether reverse mode should recompute the call rather than store its intermediates: staged
    inside a loop body, it tells ``scan`` to store only the carries."""

    remat = False

    def __repr__(self):  # how a staged program prints it (``custom_call[call=f]``)
        return self.name

    def __init__(self, name, fun, args, nondiff_argnums):
        self.name, self.user_fun, self.args = name, fun, args
        self.nondiff_argnums = nondiff_argnums
        self.diff_positions = [i for i in range(len(args)) if i not in nondiff_argnums]
        leaves, self.in_tree = _tree.tree_flatten(tuple(args[i] for i in self.diff_positions))
        self.leaves = [leaf.unbox() if isinstance(leaf, Boxed) else leaf for leaf in leaves]
        self.out_tree = None

    @property
    def nondiff_args(self):
        return [self.args[i] for i in self.nondiff_argnums]

    def diff_args(self, leaves) -> tuple:
        return _tree.tree_unflatten(self.in_tree, list(leaves))

    def full_args(self, leaves) -> list:
        full = list(self.args)
        for i, x in zip(self.diff_positions, self.diff_args(leaves)):
            full[i] = x
        return full

    def flatten_out(self, out) -> list:
        leaves, self.out_tree = _tree.tree_flatten(out)
        return leaves

    def fun(self, *leaves):
        return self.flatten_out(self.user_fun(*self.full_args(leaves)))

    def on_capture(self, args):
        raise TypeError(
            f"{self.name} uses a value traced by the running transform that is not one of its "
            "differentiable arguments (a closure over a traced value, or a traced nondiff argument), so "
            "its rule cannot account for it: pass that value as a differentiable argument")

    def result(self, out_leaves):
        return _tree.tree_unflatten(self.out_tree, list(out_leaves))

    def cts_per_leaf(self, cts, what: str) -> list:
        """A tuple of pytrees, one per differentiable argument (None: zero), as flat leaves."""
        n = len(self.diff_positions)
        if not isinstance(cts, (tuple, list)) or len(cts) != n:
            raise TypeError(f"{self.name}: {what} must return a tuple with one entry per differentiable "
                            f"argument ({n}), got {type(cts).__name__}"
                            f"{f' of length {len(cts)}' if isinstance(cts, (tuple, list)) else ''}")
        flat = []
        for i, (ct, arg) in enumerate(zip(cts, self.diff_args(self.leaves))):
            arg_leaves, arg_tree = _tree.tree_flatten(arg)
            if ct is None:
                flat += [None] * len(arg_leaves)
                continue
            ct_leaves, ct_tree = _tree.tree_flatten(ct, none_is_leaf=True)
            if ct_tree != _tree.tree_flatten(arg, none_is_leaf=True)[1]:
                raise ValueError(f"{self.name}: {what}'s entry {i} has structure {ct_tree}, but the argument "
                                 f"has {arg_tree}; return one cotangent shaped like each argument")
            flat += [self.fit(c, x, f"{what}'s entry {i}", "argument") for c, x in zip(ct_leaves, arg_leaves)]
        return flat

    def fit(self, value, like, where: str, of: str):
        """A rule's cotangent or tangent ``value`` for the leaf ``like`` (of an argument or an output).

        A scalar is broadcast to ``like``'s shape and cast to its dtype, on its backend: a Python number
        as a constant (JAX accepts ``bwd`` returning ``2.0``), and a NumPy scalar, 0-d array or 0-d
        tracer through ``broadcast_to`` and ``astype``, so that it stays differentiable. An eager
        ``tnp.sum(g)`` is a NumPy scalar where the same rule under ``jit`` gives a 0-d tracer: both are
        broadcast, so every mode gives the same numbers. Any other value must have ``like``'s shape."""
        if value is None:
            return None
        shape, dtype = _shape_dtype(like)
        like = like if hasattr(like, "dtype") else numpy.asarray(like)
        if type(value) in SCALAR_TYPES:
            if dtype is None or dtype.kind not in "fc":
                return None  # an integer argument has no cotangent
            return scalar_like(value, like, self.name)
        if not hasattr(value, "shape"):
            raise TypeError(f"{self.name}: {where} is a {type(value).__name__}; return an array of shape "
                            f"{shape} and dtype {dtype} (or a scalar, broadcast to it)")
        if shape is None:
            return value
        if tuple(value.shape) not in (shape, ()):
            raise ValueError(f"{self.name}: {where} has shape {tuple(value.shape)} (dtype {value.dtype}) where "
                             f"the {of} has shape {shape} and dtype {dtype}; return one shaped like the {of} "
                             "or a scalar, which is broadcast to it")
        return fit_rule_result(value, like, self.name, "cotangent" if of == "argument" else "tangent")


def _shape_dtype(x):
    """``(shape, dtype)`` of a leaf (an array, a tracer or a Python number); ``(None, None)`` for
    anything else (a leaf that is not an array, which gets no derivative)."""
    if hasattr(x, "shape") and hasattr(x, "dtype"):
        return tuple(x.shape), numpy.dtype(x.dtype)
    if type(x) in SCALAR_TYPES:
        return (), numpy.asarray(x).dtype
    return None, None


def _transpose(linear_fun, arg_likes, cts):
    """``vjp`` of the linear ``linear_fun`` (flat lists to flat lists) at zero, applied to ``cts``.

    Only the float/complex arguments are variables; the result has None for the others and where no
    cotangent reaches."""
    variables = [i for i, a in enumerate(arg_likes) if is_inexact(a)]
    zeros = [zeros_like(arg_likes[i]) for i in variables]

    def on_variables(*vs):
        args = [None] * len(arg_likes)
        for i, v in zip(variables, vs):
            args[i] = v
        return linear_fun(args)
    _, pullback = vjp_flat(on_variables, zeros)
    out = [None] * len(arg_likes)
    for i, ct in zip(variables, pullback(cts)):
        out[i] = ct
    return out


def _zeros_for_none(values, likes):
    return [zeros_like(like) if v is None else v for v, like in zip(values, likes)]


# ---- custom_vjp ----------------------------------------------------------------------------------
class _CustomVJPCall(_FlatCall):
    def __init__(self, f: custom_vjp, args):
        super().__init__(f.__name__, f.fun, args, f.nondiff_argnums)
        self.fwd_fun, self.bwd_fun = cast(Callable, f.fwd), cast(Callable, f.bwd)  # custom_vjp.__call__ checked both

    def forward(self, *primals):
        result = self.fwd_fun(*self.full_args(primals))
        if not isinstance(result, tuple) or len(result) != 2:
            raise TypeError(f"{self.name}: the fwd of custom_vjp must return a pair (out, residuals), got "
                            f"{type(result).__name__}")
        out, residuals = result
        return self.flatten_out(out), residuals

    def backward(self, residuals, out_cts):
        g = self.result(out_cts)
        return self.cts_per_leaf(self.bwd_fun(*self.nondiff_args, residuals, g), "bwd")

    def jvp(self, primals, tangents):
        outs, residuals = self.forward(*primals)
        tangents = _zeros_for_none(tangents, primals)
        out_tangents = _transpose(lambda g: self.backward(residuals, _zeros_for_none(g, outs)), outs,
                                  tangents)
        return outs, out_tangents


class custom_vjp(Generic[P, R]):
    """A function with a user-given vjp, as JAX's ``jax.custom_vjp``.

    Usage::

        @tg.custom_vjp
        def f(x, y): ...
        def f_fwd(x, y): return f(x, y), residuals
        def f_bwd(residuals, g): return (ct_x, ct_y)      # one entry per argument; None means zero
        f.defvjp(f_fwd, f_bwd)

    With ``nondiff_argnums`` (e.g. ``@functools.partial(tg.custom_vjp, nondiff_argnums=(0,))`` or
    ``tg.custom_vjp(nondiff_argnums=(0,))``) those arguments are passed to ``bwd`` first,
    ``bwd(*nondiff_args, residuals, g)``, and get no cotangent. ``g`` has the output's structure.
    Keyword arguments of a call are moved to their positions first (as JAX does).

    Write ``fwd`` and ``bwd`` in tapegrad operations: then the function has every derivative: grad of
    grad differentiates ``bwd``, and forward mode (``jvp``, ``jacfwd``, ``hessian``) uses the transpose
    of ``bwd``, which must therefore be linear in ``g`` (it always is for a correct rule).

    Args:
        fun: the primal function, of pytrees of arrays; left None (``tg.custom_vjp(nondiff_argnums=...)``)
            the object is a decorator that wraps the function it is applied to.
        nondiff_argnums: an int or a tuple of ints: positions of arguments that are not differentiated
            (static values, functions), passed to ``bwd`` before the residuals.

    Calling the object runs ``fun`` eagerly (``fwd`` and ``bwd`` run under a derivative transform) and
    returns ``fun``'s output, a pytree.

    Raises:
        TypeError: ``nondiff_argnums`` not non-negative ints (at construction); calling before
            ``defvjp``; a keyword argument that has no position in ``fun``'s signature; ``fwd`` not
            returning a pair; ``bwd`` not returning one entry per differentiable argument.
        ValueError: a ``bwd`` entry shaped unlike its argument.
    """

    __name__: str  # fun's, with its other attributes (functools.update_wrapper)
    fwd: Callable[..., tuple[Any, Any]] | None
    bwd: Callable[..., Any] | None

    # custom_vjp(fun) wraps fun; custom_vjp(nondiff_argnums=...) is a decorator whose call wraps a function
    @overload
    def __init__(self, fun: Callable[P, R], nondiff_argnums: int | tuple[int, ...] = ()) -> None: ...
    @overload
    def __init__(self: custom_vjp[..., Any], fun: None = None, nondiff_argnums: int | tuple[int, ...] = ()) -> None: ...
    def __init__(self, fun: Callable[P, R] | None = None, nondiff_argnums: int | tuple[int, ...] = ()) -> None:
        self.nondiff_argnums = _check_nondiff_argnums(nondiff_argnums, "custom_vjp")
        self.fun, self.fwd, self.bwd = fun, None, None
        if fun is not None:
            functools.update_wrapper(self, fun)

    def defvjp(self, fwd: Callable[P, tuple[R, Any]], bwd: Callable[..., Any]) -> custom_vjp[P, R]:
        """Set the rule (JAX's ``custom_vjp.defvjp``).

        Args:
            fwd: ``fwd(*args) -> (out, residuals)``: the primal output and what ``bwd`` needs (any
                pytree), with the same arguments as the function.
            bwd: ``bwd(*nondiff_args, residuals, g) -> cts``: ``g`` has the output's structure; ``cts``
                is a tuple with one cotangent per differentiable argument, each shaped like it (None: zero).

        Returns:
            The ``custom_vjp`` object itself.
        """
        self.fwd, self.bwd = fwd, bwd
        return self

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        if self.fun is None:  # used as custom_vjp(nondiff_argnums=...) on a function
            return cast(Any, type(self))(args[0], self.nondiff_argnums)  # a decorator: self is [..., Any]
        if self.fwd is None:
            raise TypeError(f"custom_vjp function {self.__name__!r} has no rule yet: call "
                            f"{self.__name__}.defvjp(fwd, bwd) before using it")
        call = _CustomVJPCall(self, _positional(self.fun, args, kwargs))
        return call.result(bind_joint(call, *call.leaves))


# ---- custom_jvp ----------------------------------------------------------------------------------
class _CustomJVPCall(_FlatCall):
    def __init__(self, f: custom_jvp, args):
        super().__init__(f.__name__, f.fun, args, f.nondiff_argnums)
        self.rule = cast(Callable, f.jvp_rule)  # custom_jvp.__call__ checked it

    def jvp(self, primals, tangents):
        tangents = _zeros_for_none(tangents, primals)
        result = self.rule(*self.nondiff_args, self.diff_args(primals), self.diff_args(tangents))
        if not isinstance(result, (tuple, list)) or len(result) != 2:
            raise TypeError(f"{self.name}: the custom_jvp rule must return a pair (out, tangent_out), got "
                            f"{type(result).__name__}")
        out, tangent_out = result
        outs = self.flatten_out(out)
        t_leaves, t_tree = _tree.tree_flatten(tangent_out, none_is_leaf=True)
        if t_tree != _tree.tree_flatten(out, none_is_leaf=True)[1]:
            raise ValueError(f"{self.name}: the custom_jvp rule's tangent_out has structure {t_tree}, but "
                             f"its out has {self.out_tree}; return a tangent shaped like the output")
        return outs, [self.fit(t, o, f"the custom_jvp rule's tangent_out leaf {k}", "output")
                      for k, (t, o) in enumerate(zip(t_leaves, outs))]

    def forward(self, *primals):
        return self.fun(*primals), primals

    def backward(self, primals, out_cts):
        in_cts = _transpose(lambda t: self.jvp(primals, t)[1], primals, out_cts)
        return in_cts


class custom_jvp(Generic[P, R]):
    """A function with a user-given jvp, as JAX's ``jax.custom_jvp``.

    Usage::

        @tg.custom_jvp
        def f(x): ...
        @f.defjvp
        def f_jvp(primals, tangents):        # tuples, one entry per differentiable argument
            (x,), (x_dot,) = primals, tangents
            return f(x), tangent_out

    With ``nondiff_argnums`` those arguments come first: ``rule(*nondiff_args, primals, tangents)``.
    Zero tangents arrive as zero arrays. :meth:`defjvps` builds the rule from one jvp per argument
    (JAX's other spelling). Reverse mode (``grad``, ``vjp``) transposes the rule's
    tangent map (which is linear in ``tangents``); write the rule in tapegrad operations so that
    every order works.

    Args:
        fun: the primal function, of pytrees of arrays; left None (``tg.custom_jvp(nondiff_argnums=...)``)
            the object is a decorator that wraps the function it is applied to.
        nondiff_argnums: an int or a tuple of ints: positions of arguments that are not differentiated,
            passed to the rule before ``primals``.

    Calling the object returns ``fun``'s output (a pytree); under a derivative transform the rule's
    ``out`` is used and its ``tangent_out`` (the output's structure and shapes) is the derivative.

    Raises:
        TypeError: ``nondiff_argnums`` not non-negative ints (at construction); calling before
            ``defjvp``; a keyword argument that has no position in ``fun``'s signature; a rule not
            returning a pair ``(out, tangent_out)``.
        ValueError: a ``tangent_out`` whose structure or shapes differ from the output's.
    """

    __name__: str  # fun's, with its other attributes (functools.update_wrapper)
    jvp_rule: Callable[..., tuple[Any, Any]] | None

    @overload
    def __init__(self, fun: Callable[P, R], nondiff_argnums: int | tuple[int, ...] = ()) -> None: ...
    @overload
    def __init__(self: custom_jvp[..., Any], fun: None = None, nondiff_argnums: int | tuple[int, ...] = ()) -> None: ...
    def __init__(self, fun: Callable[P, R] | None = None, nondiff_argnums: int | tuple[int, ...] = ()) -> None:
        self.nondiff_argnums = _check_nondiff_argnums(nondiff_argnums, "custom_jvp")
        self.fun, self.jvp_rule = fun, None
        if fun is not None:
            functools.update_wrapper(self, fun)

    def defjvp(self, jvp_rule: Fn) -> Fn:
        """Set the rule (JAX's ``custom_jvp.defjvp``).

        Args:
            jvp_rule: ``jvp_rule(*nondiff_args, primals, tangents) -> (out, tangent_out)``: ``primals``
                and ``tangents`` are tuples with one entry per differentiable argument (zero tangents as
                zero arrays); ``tangent_out`` has the output's structure and shapes, and is linear in
                ``tangents``.

        Returns:
            ``jvp_rule`` itself, so that ``@f.defjvp`` works as a decorator.
        """
        self.jvp_rule = jvp_rule
        return jvp_rule

    def defjvps(self, *jvps: Callable[..., Any] | None) -> None:
        """Set the rule from one jvp per differentiable argument (JAX's ``custom_jvp.defjvps``).

        The output tangent is the sum of the contributions ``jvp_i(g_i, ans, *args)``, where ``g_i`` is
        the tangent of the ``i``-th differentiable argument, ``ans`` the function's output (computed by
        calling the function, so an outer derivative of ``ans`` uses this rule again) and ``args``
        every argument in its position. A rule built on :meth:`defjvp` with these, so reverse mode
        and every order work as there when each ``jvp_i`` is written in tapegrad operations.

        Example (JAX's)::

            @tg.custom_jvp
            def f(x, y):
                return tnp.sin(x) * y
            f.defjvps(lambda x_dot, ans, x, y: tnp.cos(x) * x_dot * y,
                      lambda y_dot, ans, x, y: tnp.sin(x) * y_dot)

        Args:
            *jvps: one per differentiable argument, in order: ``jvp_i(g_i, ans, *args) -> tangent``
                with ``ans``'s structure (a scalar is broadcast to an array output), linear in ``g_i``;
                None for an argument the output does not depend on (a zero contribution). With
                ``nondiff_argnums`` there is one per remaining argument, and ``args`` still holds all
                of them (JAX refuses ``defjvps`` with ``nondiff_argnums``).

        Returns:
            None (as JAX's).

        Raises:
            TypeError: no ``jvps``, or an entry that is neither callable nor None (here); a call
                whose number of differentiable arguments is not ``len(jvps)`` (when it is
                differentiated).
            ValueError: a contribution whose structure is not the output's (when differentiated).
        """
        if not jvps or not all(j is None or callable(j) for j in jvps):
            raise TypeError(f"{self.__name__}.defjvps: give one function (or None) per differentiable argument, "
                            f"got {jvps!r}")
        self.defjvp(functools.partial(_sum_of_jvps, self, jvps))

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        if self.fun is None:
            return cast(Any, type(self))(args[0], self.nondiff_argnums)  # a decorator: self is [..., Any]
        if self.jvp_rule is None:
            raise TypeError(f"custom_jvp function {self.__name__!r} has no rule yet: decorate one with "
                            f"@{self.__name__}.defjvp")
        call = _CustomJVPCall(self, _positional(self.fun, args, kwargs))
        return call.result(bind_joint(call, *call.leaves))


def _sum_of_jvps(f: custom_jvp, jvps: tuple, *args):
    """The :meth:`custom_jvp.defjvp` rule of ``f.defjvps(*jvps)``: ``args`` is ``(*nondiff_args, primals,
    tangents)``; the tangent is the sum of ``jvp_i(g_i, ans, *all_args)`` over the jvps that are not None."""
    *nondiff, primals, tangents = args
    if len(jvps) != len(primals):
        raise TypeError(f"{f.__name__}.defjvps was given {len(jvps)} jvp functions, but the call has {len(primals)} "
                        "differentiable arguments: give one per argument (not in nondiff_argnums), None where the "
                        "output does not depend on it")
    full, rest, fixed = [], iter(primals), iter(nondiff)
    for i in range(len(primals) + len(nondiff)):
        full.append(next(fixed) if i in f.nondiff_argnums else next(rest))
    ans = f(*full)
    out_tree = _tree.tree_structure(ans)
    terms = []
    for i, (jvp, g) in enumerate(zip(jvps, tangents)):
        if jvp is None:
            continue
        term = jvp(g, ans, *full)
        if _tree.tree_structure(term) != out_tree:
            raise ValueError(f"{f.__name__}.defjvps: jvp {i} returned a tangent of structure "
                             f"{_tree.tree_structure(term)}, but the output has {out_tree}; return one shaped "
                             "like the output")
        terms.append(term)
    if not terms:
        return ans, _tree.tree_map(zeros_like, ans)
    return ans, _tree.tree_map(lambda *leaves: functools.reduce(operator.add, leaves), *terms)


def _check_nondiff_argnums(nondiff_argnums, api):
    argnums = (nondiff_argnums,) if isinstance(nondiff_argnums, int) else tuple(nondiff_argnums)
    for a in argnums:
        if isinstance(a, bool) or not isinstance(a, int) or a < 0:
            raise TypeError(f"{api}: nondiff_argnums must be non-negative ints, got {nondiff_argnums!r}")
    return tuple(sorted(set(argnums)))


def _positional(fun, args, kwargs) -> tuple:
    """Keyword arguments moved to their positions (JAX resolves them the same way)."""
    if not kwargs:
        return args
    bound = inspect.signature(fun).bind(*args, **kwargs)
    bound.apply_defaults()
    if bound.kwargs:
        raise TypeError(f"{getattr(fun, '__name__', 'fn')}: keyword arguments {sorted(bound.kwargs)} have "
                        "no position; pass them positionally or close over them")
    return bound.args
