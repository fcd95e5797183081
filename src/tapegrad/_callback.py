"""Host callbacks inside transforms: ``tg.pure_callback`` and the primitive under ``tapegrad.debug``.

Two primitives call a Python function on concrete host values from wherever the program runs (eagerly,
in a ``jit`` program on either executor, in a loop body, once per example under ``vmap``):

- ``debug_callback`` has no results and an effect (``Primitive.effectful``): ``jit``'s passes keep it
  where nothing reads it, never merge two of them and never run one at compile time, and the executors
  run the equations in program order, so the calls come in the order the function made them. It
  carries no derivative: under ``grad``/``jvp`` it sees the primal values only, once.
- ``pure_callback`` has declared results (JAX's semantics): it is pure, so ``jit`` may drop it where
  nothing reads its results, and it has no derivative of its own (``custom_vjp``/``custom_jvp`` give it
  one, as in JAX).

The function gets NumPy arrays: a CuPy operand is copied to the host (the one place tapegrad copies a
device array to the host, asked for by name), a NumPy operand is copied too, so that the function may
keep what it is given while ``jit`` reuses the buffer. ``pure_callback``'s results come back on the
operands' backend.

Under ``vmap`` the batch rule records, in the parameter ``batched``, one ``(size, flags)`` pair per
vmapped level (the outermost first; ``flags`` says which operands that level batches, at axis 0), and
the impl loops over the examples, setting :func:`batch_index` for the function to read.
"""
from __future__ import annotations

import contextvars
from collections.abc import Callable
from typing import Any

import numpy as np

from tapegrad import _tree
from tapegrad._backend import default_namespace, is_array, namespace_of
from tapegrad._batching import batch_size, defbatch, to_front
from tapegrad._core import Boxed, Primitive, ShapedArray, Tracer, bind, trace_stack
from tapegrad._jit.staging import StagingTrace
from tapegrad._lowerings import NotLowerable
from tapegrad._rules import def_lowering, defvjp_argnum, register
from tapegrad._structural import broadcast_to, expand_dims

_batch_index: contextvars.ContextVar[tuple[int, ...]] = contextvars.ContextVar("tapegrad_batch_index", default=())
VMAP_METHODS = ("sequential", "sequential_unrolled", "expand_dims", "broadcast_all", None)


def batch_index() -> tuple[int, ...]:
    """The example a callback is called for under ``vmap``: one index per vmapped level, the outermost
    first; ``()`` outside ``vmap`` (and for ``pure_callback``'s ``expand_dims``/``broadcast_all``, which
    call once for the whole batch)."""
    return _batch_index.get()


class ShapeDtypeStruct:
    """The shape and dtype of an array, without its values (JAX's ``jax.ShapeDtypeStruct``): what
    :func:`pure_callback` is told its callback returns.

    Args:
        shape: a tuple of ints (an int is one axis).
        dtype: anything ``numpy.dtype`` accepts.

    Attributes:
        shape: the tuple of ints. dtype: the ``numpy.dtype``. ndim, size: as an array's.
    """

    __slots__ = ("shape", "dtype")

    def __init__(self, shape: Any, dtype: Any) -> None:
        try:
            self.shape = tuple(int(d) for d in ((shape,) if isinstance(shape, (int, np.integer)) else shape))
        except TypeError:
            raise TypeError(f"ShapeDtypeStruct: shape must be a tuple of ints, got {shape!r}") from None
        if any(d < 0 for d in self.shape):
            raise ValueError(f"ShapeDtypeStruct: shape must not have negative sizes, got {self.shape}")
        self.dtype = np.dtype(dtype)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ShapeDtypeStruct) and (self.shape, self.dtype) == (other.shape, other.dtype)

    def __hash__(self) -> int:
        return hash((self.shape, self.dtype))

    def __repr__(self):
        return f"ShapeDtypeStruct(shape={self.shape}, dtype={self.dtype.name})"


class HostFunction:
    """The user's function with what rebuilds its arguments: the flat operands go back into the
    pytree of ``(args, kwargs)``, whose non-array leaves (strings, None...) are kept here. A static
    parameter of the primitives: hashed by identity, so ``jit`` never merges two calls."""

    __slots__ = ("fn", "treedef", "static", "name")

    def __init__(self, fn: Callable[..., Any], treedef, static: dict, name: str) -> None:
        self.fn, self.treedef, self.static, self.name = fn, treedef, static, name

    def __call__(self, operands) -> Any:
        leaves, it = [], iter(operands)
        for k in range(self.treedef.num_leaves):
            leaves.append(self.static[k] if k in self.static else next(it))
        args, kwargs = _tree.tree_unflatten(self.treedef, leaves)
        return self.fn(*args, **kwargs)

    def __repr__(self):
        return f"<host function {self.name}>"


def flatten_call(fn: Callable[..., Any], args: tuple, kwargs: dict, api: str) -> tuple[HostFunction, list]:
    """``fn`` and its arguments as a :class:`HostFunction` and the flat list of array operands."""
    if not callable(fn):
        raise TypeError(f"{api}: the callback must be callable, got {fn!r}")
    leaves, treedef = _tree.tree_flatten((args, kwargs))
    static, operands = {}, []
    for k, leaf in enumerate(leaves):
        if isinstance(leaf, (Tracer, Boxed)) or is_array(leaf) or isinstance(leaf, (bool, int, float, complex,
                                                                                      np.generic)):
            operands.append(leaf)
        else:
            static[k] = leaf
    return HostFunction(fn, treedef, static, getattr(fn, "__qualname__", repr(fn))), operands


def _to_host(x):
    """A host copy of an operand: NumPy arrays for arrays (CuPy's via ``.get()``), Python scalars as
    they are."""
    if isinstance(x, np.ndarray):
        return x.copy()
    if is_array(x):
        return x.get()
    return x


def _examples(args, batched):
    """``(index, operands)`` for each example of the ``batched`` levels, the outermost level first."""
    if not batched:
        yield (), list(args)
        return
    (size, flags), inner = batched[0], batched[1:]
    for b in range(size):
        picked = [a[b] if flag else a for a, flag in zip(args, flags)]
        for index, operands in _examples(picked, inner):
            yield (b,) + index, operands


def _call_at(callback: HostFunction, index: tuple, operands) -> Any:
    token = _batch_index.set(_batch_index.get() + index)
    try:
        return callback([_to_host(x) for x in operands])
    finally:
        _batch_index.reset(token)


# ---- debug_callback: no results, an effect ------------------------------------------------------------------
debug_callback_p = Primitive("debug_callback", multiple_results=True)
register(debug_callback_p)
debug_callback_p.effectful = True
debug_callback_p.nondiff = True


@debug_callback_p.def_impl
def _debug_callback_impl(*args, callback: HostFunction, batched: tuple = ()):
    for index, operands in _examples(args, batched):
        _call_at(callback, index, operands)
    return []


debug_callback_p.def_abstract_eval(lambda *avals, callback, batched=(): [])


def _batched_level(vals, dims) -> tuple[list, tuple]:
    """The operands with this level's batch axis at 0, and the level's ``(size, flags)``."""
    flags = tuple(d is not None for d in dims)
    return [v if d is None else to_front(v, d) for v, d in zip(vals, dims)], (batch_size(vals, dims), flags)


def _host_call(ctx, *operands, **params):
    """The compiled executor's lowering of a host call: a refusal, so the program (or loop) keeps the
    Python executor and ``jit(f).explain`` says why."""
    raise NotLowerable("it calls Python (a host callback), which native code cannot")


def _debug_callback_batch(vals, dims, *, callback, batched=()):
    moved, level = _batched_level(vals, dims)
    return bind(debug_callback_p, *moved, callback=callback, batched=(level,) + batched), []


defbatch(debug_callback_p, _debug_callback_batch)
def_lowering(debug_callback_p, _host_call)


def debug_callback(fn: Callable[..., Any], args: tuple, kwargs: dict, api: str) -> None:
    """Bind ``debug_callback`` for ``fn(*args, **kwargs)``."""
    callback, operands = flatten_call(fn, args, kwargs, api)
    if not any(isinstance(x, Tracer) for x in operands):
        staging = _innermost_staging()
        if staging is not None:  # a call of constants inside jit or a loop body: at each run, not once now
            staging.process_primitive(debug_callback_p, tuple(operands), dict(callback=callback))
            return
    bind(debug_callback_p, *operands, callback=callback)


def _innermost_staging():
    """The trace of the innermost staging transform open (jit's, or a loop body's), or None. ``bind``
    follows the operands, and a call of constants has none to follow."""
    for main in reversed(trace_stack()):
        if main.trace_type is StagingTrace:
            return main.trace
    return None


# ---- pure_callback: declared results, pure --------------------------------------------------------------------
pure_callback_p = Primitive("pure_callback", multiple_results=True)
register(pure_callback_p)


@pure_callback_p.def_impl
def _pure_callback_impl(*args, callback: HostFunction, result_avals: tuple, out_treedef, vmap_method, batched=()):
    arrays = [a for a in args if is_array(a)]
    xp = namespace_of(*arrays) if arrays else default_namespace()
    examples = [_results(callback, _call_at(callback, index, operands), result_avals, out_treedef)
                for index, operands in _examples(args, batched)]
    if not batched:
        return [xp.asarray(r) for r in examples[0]]
    sizes = tuple(size for size, _ in batched)
    return [xp.asarray(np.stack([e[k] for e in examples]).reshape(sizes + aval.shape))
            for k, aval in enumerate(result_avals)]


def _results(callback: HostFunction, out, result_avals: tuple, out_treedef) -> list:
    """The callback's result as NumPy arrays, checked against the declared shapes and dtypes."""
    try:
        leaves = out_treedef.flatten_up_to(out)
    except (ValueError, TypeError):
        raise TypeError(f"pure_callback: {callback.name} returned {_tree.tree_structure(out)}, but "
                        f"result_shape_dtypes declares {out_treedef}; return the declared structure") from None
    results = []
    for k, (leaf, aval) in enumerate(zip(leaves, result_avals)):
        value = np.asarray(leaf.get() if is_array(leaf) and not isinstance(leaf, np.ndarray) else leaf)
        if value.shape != aval.shape or value.dtype != aval.dtype:
            raise TypeError(
                f"pure_callback: {callback.name} returned, as result {k}, an array of shape {value.shape} and dtype "
                f"{value.dtype}, but result_shape_dtypes declares shape {aval.shape} and dtype {aval.dtype}; "
                "return that (cast with .astype) or declare what it returns")
        results.append(value)
    return results


@pure_callback_p.def_abstract_eval
def _pure_callback_aval(*avals, callback, result_avals, out_treedef, vmap_method, batched=()):
    sizes = tuple(size for size, _ in batched)
    return [ShapedArray(sizes + aval.shape, aval.dtype) for aval in result_avals]


def _no_derivative(*args, **params):
    raise ValueError(
        "tg.pure_callback has no derivative: tapegrad cannot see inside the Python function. Give it one "
        "with tg.custom_vjp (or tg.custom_jvp) around the function that calls pure_callback, as in JAX, "
        "or stop the gradient (tg.stop_gradient) of its operands if none is meant")


pure_callback_p.jvp_rule = _no_derivative
defvjp_argnum(pure_callback_p, _no_derivative)


def _pure_callback_batch(vals, dims, *, callback, result_avals, out_treedef, vmap_method, batched=()):
    if vmap_method is None:
        raise NotImplementedError(
            f"pure_callback of {callback.name} under vmap: say how to batch it with vmap_method= "
            "'sequential' (one call per example), 'expand_dims' (one call, unbatched operands given a "
            "leading axis of size 1) or 'broadcast_all' (one call, every operand broadcast to the batch), "
            "as JAX asks")
    moved, (size, flags) = _batched_level(vals, dims)
    params = dict(callback=callback, out_treedef=out_treedef, vmap_method=vmap_method)
    if vmap_method in ("sequential", "sequential_unrolled"):
        return bind(pure_callback_p, *moved, result_avals=result_avals, batched=((size, flags),) + batched,
                    **params), [0] * len(result_avals)
    if batched:  # an inner level looped; this one cannot call the whole batch at once around it
        raise NotImplementedError(f"pure_callback of {callback.name}: vmap_method={vmap_method!r} around an "
                                  "inner vmap_method='sequential' is not supported; use one method for both")
    widened = [m if flag else _widen(m, size, vmap_method) for m, flag in zip(moved, flags)]
    batched_avals = tuple(ShapedArray((size,) + aval.shape, aval.dtype) for aval in result_avals)
    return bind(pure_callback_p, *widened, result_avals=batched_avals, **params), [0] * len(result_avals)


def _widen(x, size: int, vmap_method: str):
    """An unbatched operand with a leading axis: of size 1 (``expand_dims``) or ``size``
    (``broadcast_all``)."""
    x = x if hasattr(x, "shape") else np.asarray(x)
    x = expand_dims(x, 0)
    return x if vmap_method == "expand_dims" else broadcast_to(x, (size,) + tuple(x.shape[1:]))


defbatch(pure_callback_p, _pure_callback_batch)
def_lowering(pure_callback_p, _host_call)


def pure_callback(callback: Callable[..., Any], result_shape_dtypes: Any, *args: Any,
                  vmap_method: str | None = None, **kwargs: Any) -> Any:
    """Call a pure Python function on host values from inside a transform, with declared results
    (JAX's ``jax.pure_callback``).

    ``callback(*args, **kwargs)`` runs on NumPy arrays (CuPy operands are copied to the host; Python
    scalars stay scalars) and returns a pytree of arrays matching ``result_shape_dtypes``; the results
    come back as arrays of the operands' backend (the default backend when no operand is an array).
    Eagerly it is a call; under ``jit`` it is an equation of the program, run by the Python executor
    (``jit(f).explain(...)`` says so: the compiled executor cannot call Python); under ``vmap`` it is
    batched as ``vmap_method`` says. It is pure: ``jit`` may drop a call whose results nothing reads,
    and may call it more than once. It has no derivative: differentiating through it raises unless it
    sits inside a ``tg.custom_vjp`` or ``tg.custom_jvp`` function, which is how a SciPy routine joins a
    differentiated, jitted function.

    Args:
        callback: the function; it must not raise on purpose (under transforms, as in JAX, an exception
            inside it is an error of the program).
        result_shape_dtypes: a pytree whose leaves have ``shape`` and ``dtype`` (``tg.ShapeDtypeStruct``,
            or arrays): the structure, shapes and dtypes ``callback`` returns.
        *args: its positional arguments, pytrees of arrays (non-array leaves are passed as they are).
        vmap_method: under ``vmap``, ``"sequential"`` (or ``"sequential_unrolled"``: one call per
            example, results stacked), ``"expand_dims"`` (one call; batched operands get the batch as
            a leading axis, unbatched ones a leading axis of size 1; ``callback`` returns the batch) or
            ``"broadcast_all"`` (as ``expand_dims``, every operand broadcast to the batch). None (the
            default): ``vmap`` raises ``NotImplementedError``, as JAX 0.10 does.
        **kwargs: its keyword arguments, pytrees of arrays.

    Returns:
        The results, in the structure of ``result_shape_dtypes``, as arrays of the declared shapes and
        dtypes (under ``vmap``, with the batch axis at 0).

    Raises:
        TypeError: a leaf of ``result_shape_dtypes`` has no shape or dtype; at the call, ``callback``
            returned another structure, shape or dtype than declared.
        ValueError: a derivative was asked of it (JAX's error), or ``vmap_method`` is unknown.
        NotImplementedError: under ``vmap`` without ``vmap_method``.
    """
    if vmap_method not in VMAP_METHODS:
        raise ValueError(f"pure_callback: vmap_method must be one of {list(VMAP_METHODS)}, got {vmap_method!r} "
                         "(JAX's 'legacy_vectorized' is 'expand_dims' here)")
    avals, out_treedef = _tree.tree_flatten(result_shape_dtypes)
    for k, leaf in enumerate(avals):
        if not (hasattr(leaf, "shape") and hasattr(leaf, "dtype")):
            raise TypeError(f"pure_callback: result_shape_dtypes leaf {k} ({leaf!r}) has no shape and dtype; "
                            "declare each result as tg.ShapeDtypeStruct(shape, dtype)")
    result_avals = tuple(ShapedArray(tuple(leaf.shape), np.dtype(leaf.dtype)) for leaf in avals)
    host, operands = flatten_call(callback, args, kwargs, "pure_callback")
    outs = bind(pure_callback_p, *operands, callback=host, result_avals=result_avals, out_treedef=out_treedef,
                vmap_method=vmap_method)
    return _tree.tree_unflatten(out_treedef, outs)
