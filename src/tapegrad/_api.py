"""The differentiation API: ``grad``, ``value_and_grad``, ``get_grad``, ``vjp``, ``jvp``, ``linearize``,
``stop_gradient``.

Argument handling and MindSpore's return conventions (docs/grad.md) live here; the differentiation
itself is ``_tape.vjp_flat`` and ``_jvp.jvp_flat`` on flat lists of leaves.
"""
from __future__ import annotations

import functools
import operator
import os
import sys
import warnings
import weakref
from collections.abc import Callable, Sequence
from types import FrameType
from typing import TYPE_CHECKING, Any, Concatenate, Literal, ParamSpec, TypeVar, overload

import numpy as np

from tapegrad import _tree
from tapegrad._backend import default_namespace, namespace_of, ones_like, zeros_like
from tapegrad._config import config
from tapegrad._core import Boxed, is_inexact
from tapegrad._jvp import jvp_flat
from tapegrad._owned import owned
from tapegrad._params import Parameter, ParameterTuple, substitute
from tapegrad._structural import stop_gradient as _stop_gradient_leaf
from tapegrad._tape import forward_sweep, record_flat, sweep_order, vjp_flat
from tapegrad._typing import Array, GradPosition, PyTree, Weights
from tapegrad.errors import MissingHasAuxWarning

P = ParamSpec("P")
R = TypeVar("R")
T = TypeVar("T")
A = TypeVar("A")
if TYPE_CHECKING:  # Python 3.10 has no TypeVarTuple; only the checker needs it
    from typing_extensions import TypeVarTuple, Unpack

    Ts = TypeVarTuple("Ts")


# ---- argument checks at grad(...) time ---------------------------------------------------------
def _select_positions(grad_position):
    """``grad_position`` as ``(positions tuple or None, single)``; the one place its rules live.

    Raises:
        TypeError: not an int, a tuple of ints or None (bools are refused).
        ValueError: a negative or repeated position, or an empty tuple.
    """
    if grad_position is None:
        return None, False
    single = not isinstance(grad_position, tuple)
    items = (grad_position,) if single else grad_position
    if not items:
        raise ValueError("grad_position=() selects no input; pass an int, a non-empty tuple of ints, or "
                         "None together with weights=")
    for p in items:
        if isinstance(p, (bool, np.bool_)) or not isinstance(p, (int, np.integer)):
            raise TypeError(f"grad_position must be an int or a tuple of ints, got {grad_position!r} "
                            f"(element of type {type(p).__name__}); e.g. grad_position=0 or (0, 1)")
        if p < 0:
            raise ValueError(f"grad_position {int(p)} is negative; positions count from 0 (first "
                             "positional argument)")
    positions = tuple(operator.index(p) for p in items)
    if len(set(positions)) != len(positions):
        raise ValueError(f"grad_position {grad_position!r} repeats a position; list each input once")
    return positions, single


class _WeightsSpec:
    """The Parameters of ``weights=`` and how to rebuild their gradients' structure."""

    def __init__(self, weights):
        self.single = isinstance(weights, Parameter)
        self.as_tuple = isinstance(weights, (ParameterTuple, list, tuple))
        if self.single:
            self.params, self.treedef = [weights], None
        else:
            leaves, self.treedef = _tree.tree_flatten(list(weights) if self.as_tuple else weights)
            for leaf in leaves:
                if not isinstance(leaf, Parameter):
                    raise TypeError(f"weights must be Parameters (one, a ParameterTuple, a list/tuple or a "
                                    f"pytree of them), found a {type(leaf).__name__}; wrap arrays in "
                                    "tg.Parameter or pass them as arguments with grad_position")
            self.params = leaves

    def rebuild(self, grads):
        if self.single:
            return grads[0]
        if self.as_tuple:
            return tuple(grads)
        return _tree.tree_unflatten(self.treedef, grads)


# peers' keywords for what tapegrad spells otherwise, and where to go instead
_FOREIGN_KEYWORDS = {
    "argnums": "grad_position (JAX's argnums; grad_position=1, or (0, 1))",
    "argnum": "grad_position (autograd's argnum; grad_position=1, or (0, 1))",
    "sens_param": "vjp (vjp(fn, *args)[1](sens) takes the sensitivity)",
    "grad_outputs": "vjp (vjp(fn, *args)[1](grad_outputs) takes the cotangent)",
    "create_graph": "nothing: every gradient is differentiable again",
    "retain_graph": "nothing: grad keeps no graph; a vjp_fn may be called any number of times",
    "allow_unused": "nothing: inputs the output does not depend on get zero gradients",
}


def refuse_unknown_keywords(api: str, kwargs: dict[str, Any]) -> None:
    """A ``TypeError`` for keywords ``api`` does not take, naming tapegrad's spelling where a peer's
    (``argnums``) was used.

    Raises:
        TypeError: ``kwargs`` is not empty.
    """
    for name in kwargs:
        instead = _FOREIGN_KEYWORDS.get(name)
        hint = f"; use {instead}" if instead else ""
        raise TypeError(f"{api}() got an unexpected keyword argument {name!r}{hint}")


def _check_flag(value, name):
    if not isinstance(value, bool):
        raise TypeError(f"{name} must be a bool (True or False), got {value!r}")


class _GradSpec:
    def __init__(self, grad_position, weights, has_aux, return_ids, api: str = "grad", holomorphic: bool = False):
        _check_flag(has_aux, "has_aux")
        _check_flag(return_ids, "return_ids")
        _check_flag(holomorphic, "holomorphic")
        if grad_position is None and weights is None:
            raise ValueError("grad_position and weights are both None, so there is nothing to "
                             "differentiate: give grad_position (e.g. 0) or weights (e.g. "
                             "net.trainable_params())")
        self.positions, self.single_position = _select_positions(grad_position)
        self.weights = None if weights is None else _WeightsSpec(weights)
        self.has_aux = has_aux
        self.return_ids = return_ids
        self.api = api
        self.holomorphic = holomorphic
        self.warned = False  # MissingHasAuxWarning given for this wrapped function


# ---- leaves ------------------------------------------------------------------------------------
def _differentiable_leaf(leaf, where: str, remedy: str = "leave it out of grad_position"):
    """A leaf at a differentiated position as a float or complex array; Python scalars become 0-d arrays.

    ``remedy`` ends the error for an integer or non-array leaf: the way out that the caller's API has.
    """
    if isinstance(leaf, Boxed):
        leaf = leaf.unbox()
    if isinstance(leaf, (float, complex)):
        return default_namespace().asarray(leaf)  # a Python float has no device: the default backend's
    if isinstance(leaf, (bool, int)) or not hasattr(leaf, "dtype"):
        kind = type(leaf).__name__
        raise TypeError(f"{where} is a {kind}; gradients need floating-point arrays. Pass a float "
                        f"array (e.g. np.asarray(x, dtype=np.float32)) or {remedy}"
                        f"{_tree.unregistered_container_hint(leaf)}")
    if np.dtype(leaf.dtype).kind not in "fc":
        raise TypeError(f"{where} has dtype {leaf.dtype}; gradients need a floating (or complex) dtype. "
                        f"Cast it (x.astype(np.float32)) or {remedy}")
    return leaf


def require_complex(leaf, where: str, api: str, output: bool = False) -> None:
    """``holomorphic=True``'s promise, checked as JAX checks it: ``where`` (an input leaf, or with
    ``output`` an output leaf, of ``api``'s function) has a complex dtype.

    Raises:
        TypeError: a real (or integer) dtype, naming the two ways out.
    """
    dtype = np.dtype(leaf.dtype if hasattr(leaf, "dtype") else np.result_type(leaf))
    if dtype.kind == "c":
        return
    if output:
        fix = ("a holomorphic function returns complex values: make this output complex, or drop "
               "holomorphic=True (a real-valued function of complex inputs is differentiated without it)")
    else:
        fix = ("pass it as a complex array (x.astype(np.complex128)), or drop holomorphic=True to "
               "differentiate with respect to a real input")
    raise TypeError(f"{api}(holomorphic=True) needs complex inputs and outputs, but {where} has dtype "
                    f"{dtype}; {fix}")


def _flatten_outputs(out):
    leaves, treedef = _tree.tree_flatten(out)
    return [leaf.unbox() if isinstance(leaf, Boxed) else leaf for leaf in leaves], treedef


def _stop_gradient_tree(tree):
    return _tree.tree_map(_stop_gradient_leaf, tree)


def _owned_trees(trees, caller) -> list:
    """``trees`` (pytrees of results) with every array leaf owned by the caller (``_owned.owned``):
    no leaf is a view, read-only, one of ``caller``'s arrays, or the same object as another leaf."""
    flat = [_tree.tree_flatten(t) for t in trees]
    leaves = owned([leaf for leaves, _ in flat for leaf in leaves], caller)
    out, start = [], 0
    for tree_leaves, treedef in flat:
        out.append(_tree.tree_unflatten(treedef, leaves[start:start + len(tree_leaves)]))
        start += len(tree_leaves)
    return out


# ---- grad and value_and_grad -------------------------------------------------------------------
def _grad_call(fn, spec: _GradSpec, args, kwargs):
    """Run ``fn`` on a tape; returns ``(value, aux tuple, gradients in MindSpore's structure)``."""
    positions = spec.positions or ()
    for p in positions:
        if p >= len(args):
            raise IndexError(f"grad_position {p} is out of range: the function was called with "
                             f"{len(args)} positional argument(s); positions count from 0")
    in_trees, primals = [], []
    for p in positions:
        leaves, treedef = _tree.tree_flatten(args[p])
        primals += [_differentiable_leaf(leaf, f"the input at grad_position {p}") for leaf in leaves]
        in_trees.append((p, treedef, len(leaves)))
    params = spec.weights.params if spec.weights else []
    primals += [_differentiable_leaf(prm.value, f"Parameter {prm.name!r}", "leave it out of weights") for prm in params]
    if spec.holomorphic:
        _require_complex_inputs(primals, in_trees, params, spec.api)
    box = {}

    def flat_fun(*tracers):
        call_args, start = list(args), 0
        for p, treedef, n in in_trees:
            call_args[p] = _tree.tree_unflatten(treedef, list(tracers[start:start + n]))
            start += n
        with substitute(dict(zip(params, tracers[start:]))):  # a returned Parameter reads as its tracer
            out, box["aux"] = _split_aux(fn(*call_args, **kwargs), spec.has_aux, spec.api)
            leaves, box["treedef"] = _flatten_outputs(out)
        return leaves

    out_primals, pullback = vjp_flat(flat_fun, primals)
    for i, o in enumerate(out_primals):
        if not hasattr(o, "dtype") and type(o) not in (bool, int, float, complex):
            raise TypeError(f"{spec.api}: output leaf {i} of the function is of type {type(o).__name__!r} "
                            f"({_short_repr(o)}), not an array. " + (
                                "With has_aux=True the first output is differentiated: return the loss "
                                "first, (loss, extras...)" if spec.has_aux else
                                f"{spec.api} differentiates every output (the sum of all of them, MindSpore's "
                                "convention), so each must be a float array; if the function returns "
                                "(loss, extras...), pass has_aux=True: only the first output is "
                                "differentiated and the others are returned as they are"))
        if spec.holomorphic:
            require_complex(o, f"output leaf {i}", spec.api, output=True)
        dtype = np.result_type(o) if not hasattr(o, "dtype") else o.dtype
        if np.dtype(dtype).kind not in "fc":
            raise TypeError(f"output leaf {i} has dtype {dtype}, which is not differentiable; return float "
                            "outputs (cast with .astype(np.float32)) or pass the integer ones as aux "
                            "with has_aux=True")
    if not spec.has_aux and len(out_primals) > 1:
        _warn_if_shapes_differ(fn, spec, out_primals)
    in_cts = pullback([ones_like(o) for o in out_primals], free=True)
    grads = [ct if ct is not None else zeros_like(x) for ct, x in zip(in_cts, primals)]
    # the value's and the gradients' leaves are flat lists already: only aux is a tree to flatten
    aux_leaves, aux_treedef = _tree.tree_flatten(box["aux"])
    leaves = owned(out_primals + grads + aux_leaves, caller=primals)
    n_out, n_grads = len(out_primals), len(grads)
    value = _tree.tree_unflatten(box["treedef"], leaves[:n_out])
    aux = _tree.tree_unflatten(aux_treedef, leaves[n_out + n_grads:])
    return value, aux, _assemble(spec, in_trees, leaves[n_out:n_out + n_grads], params)


def _require_complex_inputs(primals, in_trees, params, api: str) -> None:
    """:func:`require_complex` for each differentiated leaf of ``_grad_call``, named by its position
    (or Parameter)."""
    names = [f"the input at grad_position {p}" for p, _, n in in_trees for _ in range(n)]
    names += [f"Parameter {prm.name!r}" for prm in params]
    for leaf, where in zip(primals, names):
        require_complex(leaf, where, api)


def _short_repr(x: object, limit: int = 40) -> str:
    text = repr(x)
    return text if len(text) <= limit else text[:limit - 3] + "..."


# the functions MissingHasAuxWarning was given for (by _warning_key), so that it comes once per function
_WARNED_HAS_AUX: weakref.WeakSet = weakref.WeakSet()


def _warning_key(fn: Callable[..., Any]) -> object:
    """What "once per function" counts: a function's code object (a bound method's function's, a
    ``functools.partial``'s function's, a callable object's ``__call__``'s), so that wrapping the same
    function again at each step, the closures one ``def`` makes, or a Module built again, warn once."""
    while isinstance(fn, functools.partial):
        fn = fn.func
    fn = getattr(fn, "__func__", fn)
    if not hasattr(fn, "__code__"):  # a Module or other callable object: its class's __call__, once for all
        fn = type(fn).__call__  # grad was given a callable, so its type has one
    return getattr(fn, "__code__", fn)


def _warn_if_shapes_differ(fn: Callable[..., Any], spec: _GradSpec, out_leaves: list) -> None:
    """:class:`~tapegrad.errors.MissingHasAuxWarning` when ``fn``'s output leaves (more than one, no
    ``has_aux``) are not all of one shape: the likely ``(loss, logits)`` without ``has_aux=True``.
    Once per wrapped function and per function (:func:`_warning_key`); off with
    ``config.warn_missing_has_aux = False``. Under ``vmap`` the shapes are an example's, under ``jit``
    it warns while staging."""
    if spec.warned or not config.warn_missing_has_aux:
        return
    shapes = [tuple(getattr(o, "shape", ())) for o in out_leaves]
    if all(shape == shapes[0] for shape in shapes):
        return  # a deliberate sum of losses (a tuple of scalars) is the convention's use
    key = _warning_key(fn)
    try:
        if key in _WARNED_HAS_AUX:
            spec.warned = True
            return
    except TypeError:  # an unhashable callable: once per wrapped function only
        key = None
    listed = ", ".join(str(shape) for shape in shapes[:4]) + (", ..." if len(shapes) > 4 else "")
    name = getattr(fn, "__qualname__", None) or type(fn).__name__
    warnings.warn(
        f"{spec.api}({name}) without has_aux=True: the function returned {len(shapes)} outputs of different "
        f"shapes ({listed}), and {spec.api} differentiates the sum of all of them (MindSpore's convention: "
        "every output contributes), e.g. loss + sum(logits) for (loss, logits). If the outputs after the "
        f"first are auxiliary (logits, metrics), pass has_aux=True to {spec.api}. If the sum is meant, "
        "silence this with tg.config.warn_missing_has_aux = False or "
        "warnings.filterwarnings('ignore', category=tg.errors.MissingHasAuxWarning). "
        "(Given once per function.)", MissingHasAuxWarning, **_user_frame())
    spec.warned = True
    if key is not None:
        try:
            _WARNED_HAS_AUX.add(key)
        except TypeError:  # takes no weak reference: once per wrapped function only
            pass


_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep


def _user_frame() -> dict:
    """``warnings.warn``'s ``stacklevel`` for a warning given by the caller of this function: the first
    frame outside tapegrad (the user's call of ``grad``'s wrapper, also under ``vmap`` or ``jit``), as
    Python 3.12's ``skip_file_prefixes`` would find."""
    frame: FrameType | None = sys._getframe(1)
    level = 1
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE_DIR):
        frame, level = frame.f_back, level + 1
    return {"stacklevel": level}


def _split_aux(out, has_aux: bool, api: str):
    if not has_aux:
        return out, ()
    if not isinstance(out, (tuple, list)) or len(out) < 2:
        raise ValueError(f"{api}(has_aux=True) needs the function to return a tuple (out, aux1, ...) with "
                         f"at least two elements, got {type(out).__name__}"
                         f"{'' if not isinstance(out, (tuple, list)) else f' of length {len(out)}'}; "
                         "return (loss, aux) or set has_aux=False")
    return out[0], tuple(_stop_gradient_tree(a) for a in out[1:])


def _assemble(spec, in_trees, grads, params):
    """MindSpore's return structure (docs/grad.md), with ``(id, g)`` pairs under ``return_ids``."""
    input_grads, start = [], 0
    for p, treedef, n in in_trees:
        g = _tree.tree_unflatten(treedef, grads[start:start + n])
        input_grads.append((p, g) if spec.return_ids else g)
        start += n
    weight_grads = grads[start:]
    if spec.return_ids:
        weight_grads = [(prm.name, g) for prm, g in zip(params, weight_grads)]
    inputs_part = None
    if spec.positions is not None:
        inputs_part = input_grads[0] if spec.single_position else tuple(input_grads)
    if spec.weights is None:
        return inputs_part
    weights_part = spec.weights.rebuild(weight_grads)
    return weights_part if spec.positions is None else (inputs_part, weights_part)


# grad's and value_and_grad's overloads. The common call, grad_position=0 without weights or return_ids,
# is typed exactly: the gradient has the type of fn's first parameter (Concatenate). Every other case
# gives PyTree (Any), as the docstrings say: the type of "parameter i of fn" cannot be spelled with a
# ParamSpec (an overload per position and arity would be a ladder), a tuple of positions would need one
# per arity, and a weight's gradient is an array, not the Parameter that the weights' type names.
# fn's parameters are kept (ParamSpec), so a call with the wrong arguments is caught. Every overload
# that takes positions spells fn's type alike (Concatenate[T, P]): where fn's own type holds Any, mypy
# gives Any for a call that overloads with different parameter types both match. grad_position=None
# (weights only, fn may take no positional argument) has its own overloads. docs/decisions.md ("Types").
@overload
def grad(fn: Callable[Concatenate[T, P], Any], grad_position: Literal[0] = 0, weights: None = None,
         has_aux: Literal[False] = False, return_ids: Literal[False] = False, *,
         holomorphic: bool = False) -> Callable[Concatenate[T, P], T]: ...
@overload
def grad(fn: Callable[Concatenate[T, P], Any], grad_position: Literal[0] = 0, weights: None = None, *,
         has_aux: Literal[True], return_ids: Literal[False] = False,
         holomorphic: bool = False) -> Callable[Concatenate[T, P], tuple[T, tuple[Any, ...]]]: ...
@overload
def grad(fn: Callable[Concatenate[T, P], Any], grad_position: int | tuple[int, ...] = 0,
         weights: Weights | None = None, has_aux: Literal[False] = False, return_ids: bool = False, *,
         holomorphic: bool = False) -> Callable[Concatenate[T, P], PyTree]: ...
@overload
def grad(fn: Callable[Concatenate[T, P], Any], grad_position: int | tuple[int, ...] = 0,
         weights: Weights | None = None, *, has_aux: Literal[True], return_ids: bool = False,
         holomorphic: bool = False) -> Callable[Concatenate[T, P], tuple[PyTree, tuple[Any, ...]]]: ...
@overload
def grad(fn: Callable[Concatenate[T, P], Any], grad_position: int | tuple[int, ...] = 0,
         weights: Weights | None = None, has_aux: bool = False, return_ids: bool = False, *,
         holomorphic: bool = False) -> Callable[Concatenate[T, P], Any]: ...
@overload
def grad(fn: Callable[P, Any], grad_position: None, weights: Weights, has_aux: Literal[False] = False,
         return_ids: bool = False, *, holomorphic: bool = False) -> Callable[P, PyTree]: ...
@overload
def grad(fn: Callable[P, Any], grad_position: None, weights: Weights, *, has_aux: Literal[True],
         return_ids: bool = False, holomorphic: bool = False) -> Callable[P, tuple[PyTree, tuple[Any, ...]]]: ...
@overload
def grad(fn: Callable[P, Any], grad_position: None, weights: Weights, has_aux: bool = False,
         return_ids: bool = False, *, holomorphic: bool = False) -> Callable[P, Any]: ...
def grad(fn: Callable[P, Any], grad_position: GradPosition = 0, weights: Weights | None = None,
         has_aux: bool = False, return_ids: bool = False, *, holomorphic: bool = False,
         **kwargs: Any) -> Callable[P, Any]:
    """The gradient of ``fn``, as MindSpore's ``grad``.

    Every leaf of ``fn``'s output gets a sensitivity of ones, so the result is the gradient of the sum
    of all output elements (``g_i = sum_j dy_j/dx_i``, as MindSpore, Paddle and nnabla); for other
    sensitivities use :func:`vjp`.

    Args:
        fn: a function of pytrees of arrays returning a pytree of float arrays (with ``has_aux``, a
            tuple ``(out, aux1, ...)`` of which only ``out`` is differentiated).
        grad_position: which positional inputs: an int, a tuple of ints, or None (weights only).
        weights: Parameters to differentiate: one ``Parameter``, a ``ParameterTuple``/list/tuple, or a
            pytree (a dict, say) of Parameters.
        has_aux: ``fn`` returns ``(out, aux1, ...)``; the aux outputs pass through ``stop_gradient``.
        return_ids: each input gradient becomes ``(position, g)`` and each weight gradient
            ``(param.name, g)``; :func:`get_grad` picks one out.
        holomorphic: ``fn`` is promised holomorphic (JAX's ``holomorphic``): every differentiated
            input and every output leaf must be complex, and the gradient is the complex derivative
            ``f'(z)`` (for a non-scalar output, of the sum of its elements, as for a real one).
            Without it a complex output is accepted too and gives the same value (its sensitivity
            is 1, so its real part is differentiated); the flag adds the check.

    Returns:
        A function of ``fn``'s arguments whose result, by ``grad_position`` / ``weights``, is

        - int ``i`` / None: the gradient of input ``i``, a pytree shaped like it;
        - tuple ``(i, j, ...)`` / None: a tuple of those, in that order (a 1-tuple stays a 1-tuple);
        - None / one Parameter: its gradient;
        - None / ParameterTuple, list or tuple: a tuple of gradients (``[]`` gives ``()``);
        - None / a dict or other pytree of Parameters: gradients in the same structure;
        - both given: ``(inputs_part, weights_part)``.

        With ``has_aux=True`` the function returns ``(gradients, (aux1, ...))``. Each gradient has its
        input's shape and dtype (float32 stays float32; a Python float gives a 0-d float64 array);
        inputs the output does not depend on get zeros.

        Static type: with ``grad_position=0`` (the default), no ``weights`` and no ``return_ids``,
        the gradient has the type of ``fn``'s first parameter (a Python float there gives a 0-d
        array at run time); other selections are typed :data:`~tapegrad._typing.PyTree` (Any),
        since their structure depends on values a type cannot follow.

    Raises:
        ValueError: ``grad_position`` and ``weights`` both None; a negative or repeated position; an
            empty tuple; (at the call) ``has_aux`` with fewer than two outputs.
        TypeError: a position that is not an int or tuple of ints (bools included); ``weights`` that
            are not Parameters; ``has_aux``/``return_ids``/``holomorphic`` not a bool; (at the call) an
            integer, bool or non-numeric leaf at a differentiated position; a non-float output, or one
            that is not an array at all (``(loss, "note")``: the message names ``has_aux``); with
            ``holomorphic=True``, a real input or output leaf; a keyword ``grad`` does not take (a
            peer's ``argnums`` names ``grad_position``).
        IndexError: (at the call) a position beyond the arguments given.

    Warns:
        tapegrad.errors.MissingHasAuxWarning: (at the call, once per function) without ``has_aux``,
            ``fn`` returned outputs of different shapes, such as ``(loss, logits)``: their sum is
            differentiated, which is usually a forgotten ``has_aux=True`` (JAX raises there). Off with
            ``tg.config.warn_missing_has_aux = False`` or a ``warnings`` filter on the category.

    Example:
        >>> import numpy as np, tapegrad as tg
        >>> f = lambda x, y, z: (x * y * z).sum()
        >>> x, y, z = np.array([1., 2.]), np.array([-2., 3.]), np.array([0., 1.])
        >>> tg.grad(f, grad_position=(1, 2))(x, y, z)
        (array([0., 2.]), array([-2.,  6.]))
        >>> tg.grad(lambda z: z ** 3, holomorphic=True)(np.array(1 + 2j))   # 3 z**2
        array(-9.+12.j)
    """
    refuse_unknown_keywords("grad", kwargs)
    spec = _GradSpec(grad_position, weights, has_aux, return_ids, holomorphic=holomorphic)

    @functools.wraps(fn)
    def grad_fn(*args, **kwargs):
        _, aux, grads = _grad_call(fn, spec, args, kwargs)
        return (grads, aux) if spec.has_aux else grads
    return grad_fn


@overload
def value_and_grad(fn: Callable[Concatenate[T, P], R], grad_position: Literal[0] = 0, weights: None = None,
                   has_aux: bool = False, return_ids: Literal[False] = False, *,
                   holomorphic: bool = False) -> Callable[Concatenate[T, P], tuple[R, T]]: ...
@overload
def value_and_grad(fn: Callable[Concatenate[T, P], R], grad_position: int | tuple[int, ...] = 0,
                   weights: Weights | None = None, has_aux: bool = False, return_ids: bool = False, *,
                   holomorphic: bool = False) -> Callable[Concatenate[T, P], tuple[R, PyTree]]: ...
@overload
def value_and_grad(fn: Callable[P, R], grad_position: None, weights: Weights, has_aux: bool = False,
                   return_ids: bool = False, *, holomorphic: bool = False) -> Callable[P, tuple[R, PyTree]]: ...
def value_and_grad(fn: Callable[P, R], grad_position: GradPosition = 0, weights: Weights | None = None,
                   has_aux: bool = False, return_ids: bool = False, *, holomorphic: bool = False,
                   **kwargs: Any) -> Callable[P, tuple[R, PyTree]]:
    """``fn``'s value and its gradient in one pass, as MindSpore's ``value_and_grad``.

    ``fn`` runs once on the tape; the value is its output and the gradients are :func:`grad`'s (the
    gradient of the sum of all output elements, for the inputs and Parameters selected).

    Args:
        fn: a function of pytrees of arrays returning a pytree of float arrays (with ``has_aux``, a
            tuple ``(out, aux1, ...)`` of which only ``out`` is differentiated).
        grad_position: which positional inputs: an int, a tuple of ints, or None (weights only).
        weights: Parameters to differentiate: one ``Parameter``, a ``ParameterTuple``/list/tuple, or a
            pytree of Parameters.
        has_aux: ``fn`` returns ``(out, aux1, ...)``; the aux outputs pass through ``stop_gradient``.
        return_ids: each input gradient becomes ``(position, g)`` and each weight gradient
            ``(param.name, g)``, as in :func:`grad`.
        holomorphic: as in :func:`grad`: complex inputs and outputs are required, and the gradient
            is ``f'(z)``.

    Returns:
        A function of ``fn``'s arguments that returns a pair

        - ``has_aux=False``: ``(value, gradients)``, ``value`` being ``fn``'s output (its pytree, as
          ``fn`` returned it, leaves in their dtypes);
        - ``has_aux=True``: ``((out, aux1, ...), gradients)``, the whole tuple ``fn`` returned, with
          the aux outputs through ``stop_gradient``.

        ``gradients`` has :func:`grad`'s structure for ``grad_position`` / ``weights``: the gradient
        of one input (an int position), a tuple of them (a tuple of positions), one Parameter's
        gradient, a tuple for a ``ParameterTuple``/list/tuple, the weights' own structure for a dict
        or other pytree, or ``(inputs_part, weights_part)`` when both are given; with
        ``return_ids=True`` each gradient is an ``(id, g)`` pair (see :func:`get_grad`).

        Static type: ``tuple[R, T]``, ``R`` being ``fn``'s return type (with ``has_aux`` the whole
        tuple ``fn`` returns) and ``T`` its first parameter's type, for ``grad_position=0`` without
        ``weights`` or ``return_ids``; otherwise ``tuple[R, PyTree]`` (as :func:`grad`).

    Raises:
        ValueError: ``grad_position`` and ``weights`` both None; a negative or repeated position; an
            empty tuple; (at the call) ``has_aux`` with fewer than two outputs.
        TypeError: a position that is not an int or tuple of ints (bools included); ``weights`` that
            are not Parameters; ``has_aux``/``return_ids`` not a bool; a keyword it does not take (a
            peer's ``argnums``: the message names ``grad_position``); (at the call) an integer, bool
            or non-numeric leaf at a differentiated position, or a non-float output (one that is not an
            array at all, ``(loss, "note")``, gets a message naming ``has_aux``); with
            ``holomorphic=True``, a real input or output leaf.
        IndexError: (at the call) a position beyond the arguments given.

    Warns:
        tapegrad.errors.MissingHasAuxWarning: as :func:`grad`: outputs of different shapes without
            ``has_aux`` (once per function).

    Example:
        >>> import numpy as np, tapegrad as tg
        >>> tg.value_and_grad(lambda x: (x ** 2).sum())(np.array([1., 2.]))
        (array(5.), array([2., 4.]))
    """
    refuse_unknown_keywords("value_and_grad", kwargs)
    spec = _GradSpec(grad_position, weights, has_aux, return_ids, "value_and_grad", holomorphic)

    @functools.wraps(fn)
    def value_and_grad_fn(*args, **kwargs):
        value, aux, grads = _grad_call(fn, spec, args, kwargs)
        return ((value, *aux) if spec.has_aux else value), grads
    return value_and_grad_fn


def get_grad(gradients: PyTree, identifier: int | str) -> Array:
    """One gradient from a ``return_ids=True`` result, as MindSpore's ``get_grad``.

    The search goes through the nested tuples, lists and dicts of ``gradients`` for the first
    ``(identifier, g)`` pair whose identifier equals ``identifier`` (with the same type: a position
    never matches a name).

    Args:
        gradients: what ``grad(..., return_ids=True)`` or ``value_and_grad(..., return_ids=True)``
            returned (its gradients part).
        identifier: a position (an int or NumPy integer), a Parameter (looked up by its name), or a
            Parameter's name (a str).

    Returns:
        The gradient ``g`` of that pair, an input's gradient (a pytree shaped like the input) or a
        Parameter's (an array of its shape and dtype).

    Raises:
        RuntimeError: no gradient with that identifier is in ``gradients`` (not selected by
            ``grad_position``/``weights``, or ``return_ids`` was False).
    """
    key = identifier.name if isinstance(identifier, Parameter) else identifier
    if isinstance(key, np.integer):
        key = int(key)
    stack = [gradients]
    while stack:
        item = stack.pop()
        if _is_id_pair(item):
            if type(item[0]) is type(key) and item[0] == key:
                return item[1]
        elif isinstance(item, (tuple, list)):
            stack.extend(reversed(item))
        elif isinstance(item, dict):
            stack.extend(item.values())
    raise RuntimeError(f"get_grad: no gradient with identifier {key!r}; the result holds positions and "
                       "Parameter names only for what grad_position/weights selected, with return_ids=True")


def _is_id_pair(item) -> bool:
    return (isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], (int, str))
            and not isinstance(item[0], bool))


# ---- vjp ---------------------------------------------------------------------------------------
class _FlatFun:
    """``fn`` over pytrees as a function of a flat list of leaves (what the flat cores take), and the
    structure needed to rebuild inputs and outputs. The output treedef and aux are known once called."""

    def __init__(self, fn, primals, has_aux: bool, api: str):
        self.fn, self.has_aux, self.api = fn, has_aux, api
        self.leaves, self.in_trees = [], []
        for i, primal in enumerate(primals):
            leaves, treedef = _tree.tree_flatten(primal)
            self.leaves += [_differentiable_leaf(
                leaf, f"primal {i}", "close over it in fn instead of passing it as a primal") for leaf in leaves]
            self.in_trees.append((treedef, len(leaves)))
        self.out_treedef = self.aux = None

    def unflatten_inputs(self, leaves) -> tuple:
        result, start = [], 0
        for treedef, n in self.in_trees:
            result.append(_tree.tree_unflatten(treedef, list(leaves[start:start + n])))
            start += n
        return tuple(result)

    def __call__(self, *leaves):
        out, aux = _split_aux(self.fn(*self.unflatten_inputs(leaves)), self.has_aux, self.api)
        self.aux = aux[0] if len(aux) == 1 else aux
        out_leaves, self.out_treedef = _flatten_outputs(out)
        return out_leaves

    def outputs(self, out_leaves, caller=()):
        """The output pytree of ``out_leaves``, each leaf owned by the caller (``_owned.owned``)."""
        return _tree.tree_unflatten(self.out_treedef, owned(out_leaves, caller))

    def returns(self, leaf_lists, middle, caller):
        """``(out, middle)`` or ``(out, middle, aux)`` (the vjp/jvp return convention), with
        ``leaf_lists`` (the output's leaves, then a tangent's) rebuilt as output pytrees and their
        leaves and aux's owned by the caller."""
        trees = _owned_trees(list(leaf_lists) + [self.aux], caller)
        results = tuple(_tree.tree_unflatten(self.out_treedef, leaves) for leaves in trees[:-1])
        results += middle
        return results + (trees[-1],) if self.has_aux else results


@overload
def vjp(fn: Callable[[Unpack[Ts]], R], *primals: Unpack[Ts], has_aux: Literal[False] = False,
        holomorphic: bool = False) -> tuple[R, Callable[..., tuple[Unpack[Ts]]]]: ...
@overload
def vjp(fn: Callable[[Unpack[Ts]], tuple[R, A]], *primals: Unpack[Ts], has_aux: Literal[True],
        holomorphic: bool = False) -> tuple[R, Callable[..., tuple[Unpack[Ts]]], A]: ...
@overload
def vjp(fn: Callable[..., Any], *primals: PyTree, has_aux: bool = False,
        holomorphic: bool = False) -> tuple[Any, ...]: ...
def vjp(fn: Callable[..., Any], *primals: PyTree, has_aux: bool = False,  # type: ignore[misc]
        holomorphic: bool = False) -> tuple[Any, ...]:  # (mypy 2.4 rejects *primals: Any beside Unpack[Ts])
    """``fn``'s output and its vector-Jacobian product function, as JAX's ``vjp``.

    Args:
        fn: a function of the pytrees ``primals`` returning a pytree of arrays (with ``has_aux``,
            ``(out, aux...)``).
        *primals: the point; float or complex array leaves (Python floats are accepted).
        has_aux: ``fn`` returns ``(out, *aux)``: exactly two outputs give a bare ``aux``, more a tuple.
        holomorphic: ``fn`` is promised holomorphic: every primal leaf and every output leaf must be
            complex. The values are those without it (``vjp_fn(ct) = ct * f'(z)`` for holomorphic
            ``f``); JAX's ``vjp`` has no such flag, its ``grad`` and ``jacrev`` check the same promise.

    Returns:
        ``(out, vjp_fn)`` or ``(out, vjp_fn, aux)``. ``vjp_fn(ct)`` takes a cotangent shaped like
        ``out`` (a None leaf, or None for all of it, means ones: Paddle's ``grad_outputs``) and returns
        a tuple with one cotangent per primal, each shaped like it. It may be called any number of
        times, and its results are differentiable again. For complex values ``vjp_fn`` is the
        transpose of the Jacobian, not its adjoint (JAX's convention: for holomorphic ``f``,
        ``vjp_fn(ct) = ct * f'(z)``).

        Static type: ``out`` has ``fn``'s return type (with ``has_aux``, a function returning a pair
        ``(out, aux)`` types both), and ``vjp_fn`` returns a tuple of the primals' types.

    Raises:
        TypeError: a non-float primal leaf; a cotangent leaf whose dtype is not the output's; with
            ``holomorphic=True``, a real primal or output leaf.
        ValueError: a cotangent whose structure or shapes differ from ``out``'s.
    """
    _check_flag(holomorphic, "holomorphic")
    return vjp_returning(fn, primals, has_aux, holomorphic, "vjp")


def vjp_returning(fn: Callable[..., Any], primals: Sequence[PyTree], has_aux: bool, holomorphic: bool,
                  api: str) -> tuple[Any, ...]:
    """:func:`vjp`, its errors naming ``api`` (``jacrev`` calls it with its own name)."""
    flat_fun = _FlatFun(fn, primals, has_aux, api)
    if holomorphic:
        for i, leaf in enumerate(flat_fun.leaves):
            require_complex(leaf, f"primal leaf {i}", api)
    out_primals, pullback = vjp_flat(flat_fun, flat_fun.leaves)
    if holomorphic:
        for i, o in enumerate(out_primals):
            require_complex(o, f"output leaf {i}", api, output=True)

    def vjp_fn(ct=None):
        cts = _check_cotangents(ct, flat_fun.out_treedef, out_primals)
        in_cts = pullback(cts)
        grads = [g if g is not None else zeros_like(x) for g, x in zip(in_cts, flat_fun.leaves)]
        return flat_fun.unflatten_inputs(owned(grads, caller=flat_fun.leaves + [c for c in cts if c is not None]))
    return flat_fun.returns([out_primals], (vjp_fn,), caller=flat_fun.leaves)


@overload
def jvp(fn: Callable[..., R], primals: Sequence[PyTree], tangents: Sequence[PyTree],
        has_aux: Literal[False] = False) -> tuple[R, R]: ...
@overload
def jvp(fn: Callable[..., tuple[R, A]], primals: Sequence[PyTree], tangents: Sequence[PyTree],
        has_aux: Literal[True]) -> tuple[R, R, A]: ...
@overload
def jvp(fn: Callable[..., R], primals: Sequence[PyTree], tangents: Sequence[PyTree],
        has_aux: bool = False) -> tuple[Any, ...]: ...
def jvp(fn: Callable[..., Any], primals: Sequence[PyTree], tangents: Sequence[PyTree],
        has_aux: bool = False) -> tuple[Any, ...]:
    """``fn``'s output and its Jacobian-vector product at ``primals`` along ``tangents``, as JAX's ``jvp``.

    Args:
        fn: a function of the pytrees in ``primals`` returning a pytree of arrays (with ``has_aux``,
            ``(out, aux...)``).
        primals: a tuple or list with one pytree per positional argument of ``fn``; float or complex
            leaves (Python floats are accepted).
        tangents: a tuple or list like ``primals``: each leaf has its primal's shape and dtype.
        has_aux: ``fn`` returns ``(out, *aux)``: exactly two outputs give a bare ``aux``, more a tuple.

    Returns:
        ``(out, tangent_out)`` or ``(out, tangent_out, aux)``; ``tangent_out`` has ``out``'s structure,
        shapes and dtypes (zeros where the output does not depend on the inputs).

        Static type: ``out`` and ``tangent_out`` have ``fn``'s return type (a Python float there is a
        0-d array at run time); with ``has_aux``, a function returning a pair ``(out, aux)`` types
        ``aux`` too.

    Raises:
        TypeError: ``primals``/``tangents`` not a tuple or list; a non-float primal leaf; a tangent
            whose dtype differs from its primal's.
        ValueError: different lengths, structures or shapes of ``primals`` and ``tangents``.
    """
    flat_fun, flat_tangents = _jvp_arguments(fn, primals, tangents, has_aux)
    out_primals, out_tangents = jvp_flat(flat_fun, flat_fun.leaves, flat_tangents)
    out_tangents = [zeros_like(o) if t is None else t for t, o in zip(out_tangents, out_primals)]
    return flat_fun.returns([out_primals, out_tangents], (), caller=flat_fun.leaves + flat_tangents)


def _jvp_arguments(fn, primals, tangents, has_aux):
    for name, value in (("primals", primals), ("tangents", tangents)):
        if not isinstance(value, (tuple, list)):
            raise TypeError(f"jvp: {name} must be a tuple or list with one entry per argument of fn, got "
                            f"{type(value).__name__}; e.g. jvp(f, (x,), (v,))")
    flat_fun = _FlatFun(fn, tuple(primals), has_aux, "jvp")
    return flat_fun, _flat_tangents(primals, tangents, flat_fun.leaves, "jvp")


def _flat_tangents(primals, tangents, primal_leaves, api):
    """The leaves of ``tangents``, checked against ``primals``: one per primal leaf, same shape and
    dtype."""
    if len(primals) != len(tangents):
        raise ValueError(f"{api}: {len(primals)} primals but {len(tangents)} tangents; pass one tangent per "
                         "primal")
    flat_tangents = []
    for i, (primal, tangent) in enumerate(zip(primals, tangents)):
        p_tree = _tree.tree_structure(primal)
        t_leaves, t_tree = _tree.tree_flatten(tangent)
        if p_tree != t_tree:
            raise ValueError(f"{api}: tangent {i} has structure {t_tree}, but primal {i} has {p_tree}; give "
                             "each primal a tangent of the same structure")
        flat_tangents += t_leaves
    return [_check_tangent(t, x, i, api) for i, (t, x) in enumerate(zip(flat_tangents, primal_leaves))]


def _check_tangent(t, x, i, api):
    if isinstance(t, Boxed):
        t = t.unbox()
    if isinstance(t, (int, float, complex)) and not isinstance(t, bool):
        t = namespace_of(x).asarray(t, dtype=x.dtype)  # on its primal's device
    if not hasattr(t, "shape") or tuple(t.shape) != tuple(x.shape):
        shape = tuple(t.shape) if hasattr(t, "shape") else type(t).__name__
        raise ValueError(f"{api}: tangent leaf {i} has shape {shape}, but its primal has shape "
                         f"{tuple(x.shape)}; pass a tangent shaped like the primal")
    if t.dtype != x.dtype:
        raise TypeError(f"{api}: tangent leaf {i} has dtype {t.dtype}, but its primal has dtype {x.dtype}; "
                        f"cast it with .astype({x.dtype})")
    return t


def linearize(fn: Callable[..., Any], *primals: PyTree, has_aux: bool = False) -> tuple[Any, ...]:
    """``fn``'s output at ``primals`` and its Jacobian-vector product function there, as JAX's
    ``linearize``.

    ``fn`` runs once, on a tape; each ``jvp_fn`` call then sweeps the recorded operations forward in
    creation order, mapping tangents through each primitive's jvp rule at the stored primals. Nothing
    of ``fn`` is recomputed, so ``jvp_fn`` costs the tangent arithmetic only (the memory of the tape is
    kept while ``jvp_fn`` lives, as JAX's linearize keeps its linearized program).

    Args:
        fn: a function of the pytrees ``primals`` returning a pytree of arrays.
        *primals: the point; float or complex leaves.
        has_aux: ``fn`` returns ``(out, *aux)``: two outputs give a bare ``aux``, more a tuple.

    Returns:
        ``(out, jvp_fn)`` or ``(out, jvp_fn, aux)``. ``jvp_fn(*tangents)`` takes one tangent pytree per
        primal (each leaf shaped and typed like its primal) and returns the output tangent, shaped like
        ``out``; it may be called any number of times, and is differentiable again.

    Raises:
        as ``jvp``: TypeError for a non-float primal; when ``jvp_fn`` is called, ValueError/TypeError for
        tangents that do not fit the primals.
    """
    flat_fun = _FlatFun(fn, primals, has_aux, "linearize")
    out_primals, tape = record_flat(flat_fun, flat_fun.leaves)
    order = sweep_order(tape)

    def jvp_fn(*tangents):
        flat_tangents = _flat_tangents(primals, tangents, flat_fun.leaves, "linearize")
        out_tangents = forward_sweep(order, tape, flat_tangents)
        return flat_fun.outputs([zeros_like(o) if t is None else t for t, o in zip(out_tangents, out_primals)],
                                caller=flat_tangents)
    return flat_fun.returns([out_primals], (jvp_fn,), caller=flat_fun.leaves)


def _check_cotangents(ct, out_treedef, out_primals):
    """One cotangent per output leaf, each shaped and typed like its output: None means ones, a Python
    scalar scales ones; the cotangent of an integer or boolean output (a comparison) carries nothing
    and becomes None (a zero), whatever its dtype, as in JAX and autograd."""
    if ct is None:
        return [ones_like(o) if is_inexact(o) else None for o in out_primals]
    leaves, treedef = _tree.tree_flatten(ct, none_is_leaf=True)
    expected = _tree.tree_flatten(_tree.tree_unflatten(out_treedef, out_primals), none_is_leaf=True)[1]
    if treedef != expected:
        raise ValueError(f"vjp_fn: the cotangent's structure {treedef} does not match the output's "
                         f"{expected}; pass one array (or None for ones) per output leaf")
    return [_check_cotangent(c, o, i) for i, (c, o) in enumerate(zip(leaves, out_primals))]


def _check_cotangent(c, o, i):
    if isinstance(c, Boxed):
        c = c.unbox()
    o_shape = tuple(np.shape(o)) if not hasattr(o, "shape") else tuple(o.shape)
    o_dtype = o.dtype if hasattr(o, "dtype") else np.result_type(o)
    if c is None:
        c_shape, c_dtype = o_shape, o_dtype
    elif isinstance(c, (bool, int, float, complex)):
        c_shape, c_dtype = o_shape, np.result_type(o_dtype, c)
    elif hasattr(c, "shape") and hasattr(c, "dtype"):
        c_shape, c_dtype = tuple(c.shape), c.dtype
    else:
        raise TypeError(f"vjp_fn: cotangent {i} is a {type(c).__name__}; pass an array shaped like output {i}, "
                        "a Python scalar (it scales ones), or None (ones)")
    if c_shape != o_shape:
        raise ValueError(f"vjp_fn: cotangent {i} has shape {c_shape}, but output {i} has shape "
                         f"{o_shape}; pass a cotangent shaped like the output")
    if not is_inexact(o):  # nothing flows back through an integer or boolean output
        return None
    if c_dtype != o_dtype:
        raise TypeError(f"vjp_fn: cotangent {i} has dtype {c_dtype}, but output {i} has dtype {o_dtype}; "
                        f"cast it with .astype({o_dtype})")
    if c is None:
        return ones_like(o)
    return ones_like(o) * c if isinstance(c, (bool, int, float, complex)) else c


def stop_gradient(x: T) -> T:
    """``x`` unchanged, seen by every transform as a constant: no gradient flows back through it (JAX's
    ``lax.stop_gradient``, MindSpore's ``ops.stop_gradient``; Paddle's ``no_grad_vars``).

    Args:
        x: a pytree of arrays, traced values or Python scalars.

    Returns:
        A pytree of ``x``'s structure, each leaf with its value, shape and dtype; its derivatives (in
        reverse and forward mode, at every order) are zero, and under ``vmap`` and ``jit`` it is the
        identity.
    """
    return _tree.tree_map(_stop_gradient_leaf, x)
