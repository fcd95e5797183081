"""Normalisation (``batch_norm``, ``layer_norm``, ``group_norm``) and ``embedding``, functional forms with
PyTorch's signatures and semantics.

Each is a composition of ``tapegrad.numpy`` operations (mean, sums, ``sqrt``, broadcasting), so every
transform sees ordinary primitives: derivatives to any order, ``vmap``, ``jit``. Statistics are taken in
two passes (centre, then average the squares). Where the statistics and the affine parameters share an
axis (``batch_norm``'s channels) they are folded into one small ``scale = weight / sqrt(var + eps)``
first, so the full-size work after the statistics is one multiply and one add. A closed-form backward
(``custom_vjp``) was measured and was no faster than differentiating this composition, so there is no
primitive here. Constants are Python floats: a float32 input with float32 weights stays float32.
``layer_norm`` and ``group_norm`` of concrete NumPy arrays (nothing traced, as in inference) skip the
composition for a fused kernel with the same values (one result buffer, the sums as BLAS dot products,
``group_norm``'s inverse deviation and weight folded into one per-channel scale); traced inputs always
take the composition.

Running statistics. PyTorch's ``batch_norm`` updates ``running_mean``/``running_var`` in place during
training; arrays cannot be updated in place under a transform, so here they must be
:class:`~tapegrad.Parameter` objects, updated with ``Parameter.assign`` (the values passed through
``stop_gradient``, so no derivative flows into the statistics). That works eagerly, under ``grad``/``jvp``
(the update uses the concrete values) and under ``jit`` (the new values are written back after each
call). Under ``vmap`` each example would have its own statistics, and there is no single value to store:
that is a ``TypeError`` that says to use evaluation mode (as PyTorch's ``functorch`` asks).

``embedding`` lives here rather than in ``functional.py`` so that ``functional.py`` and ``layers.py`` can
both import it without a cycle.
"""
from __future__ import annotations

import math
import numbers

import numpy as np

import tapegrad.numpy as tnp
from tapegrad._array_type import Array
from tapegrad._core import Tracer
from tapegrad._params import Parameter
from tapegrad._typing import ArrayLike, ShapeLike
from tapegrad.nn._args import as_int, as_nonnegative_float
from tapegrad.numpy._elementwise import stop_gradient
from tapegrad.numpy._float16 import accumulates_in_float32, is_float16

__all__ = ["batch_norm", "embedding", "group_norm", "layer_norm"]


# ---- shared pieces -------------------------------------------------------------------------------
def _shape_of(x, name: str, what: str) -> tuple:
    shape = getattr(x, "shape", None)
    if shape is None:
        raise TypeError(f"{what}: {name} must be an array, got {type(x).__name__}")
    return tuple(shape)


def _check_vector(value, name: str, expected: tuple, what: str, hint: str) -> None:
    """``value`` (a per-channel or per-feature array) is None or has shape ``expected``."""
    if value is None:
        return
    shape = _shape_of(value, name, what)
    if shape != expected:
        raise ValueError(f"{what}: {name} must have shape {expected} ({hint}), got {shape}")


def _moments(x, axes: tuple):
    """Mean and biased variance of ``x`` over ``axes``, kept as size-1 axes, and the centred ``x``.

    Two passes (centre, then average the squares): the one-pass ``E[x^2] - E[x]^2`` makes as many
    full-size passes (a square and two sums) and loses every digit when the mean is large against the
    spread, as float32 activations can be.
    """
    mean = tnp.mean(x, axis=axes, keepdims=True)
    centred = x - mean
    if is_float16(x):  # squares of a spread past 256 overflow float16: var squares in float32
        return mean, tnp.var(x, axis=axes, keepdims=True), centred
    var = tnp.mean(centred * centred, axis=axes, keepdims=True)
    return mean, var, centred


for _name in ("batch_norm", "layer_norm", "group_norm"):
    accumulates_in_float32(f"nn.functional.{_name}", "mean and variance are float32 sums rounded to float16, so "
                           "a variance past 65504 (a spread past 256) is still inf")


def _inv_std(var, eps: float):
    return 1.0 / tnp.sqrt(var + eps)


def _concrete(*arrays):
    """The arrays as plain NumPy arrays (a Parameter read for its value, None kept), or None when any
    is traced (or lives on another backend): then the normalisation must go through tapegrad.numpy."""
    if type(arrays[0]) is not np.ndarray or arrays[0].dtype.kind != "f":
        return None
    values = [a.value if isinstance(a, Parameter) else a for a in arrays]
    return values if all(v is None or type(v) is np.ndarray for v in values) else None


def _centred_now(x, ndims: int, eps: float):
    """``(centred, inv_std)``: ``x - mean`` over the last ``ndims`` axes of a concrete float array (one
    new buffer, x's shape) and ``1 / sqrt(var + eps)`` (size-1 axes in place of those axes), taken in
    two passes as :func:`_moments` does. The sums are dot products (``np.vecdot``: BLAS, no squared
    copy of the data), 2-3x faster than ``np.mean``'s pairwise sums along short rows; float16 keeps
    ``np.mean``, which sums in float32."""
    lead, count = x.shape[:x.ndim - ndims], math.prod(x.shape[x.ndim - ndims:])
    rows = x.reshape(lead + (count,))
    if x.dtype in (np.float32, np.float64):
        mean = np.vecdot(rows, np.ones(count, x.dtype)) / count
    else:
        mean = np.mean(rows, axis=-1)
    centred = np.subtract(rows, mean[..., None])
    var = np.vecdot(centred, centred) / count  # real floats: no conjugate
    inv_std = (1.0 / np.sqrt(var + eps)).astype(x.dtype, copy=False)
    return centred.reshape(x.shape), inv_std.reshape(lead + (1,) * ndims)


def _affine_now(out, weight, bias):
    """``out * weight + bias`` (either None: left out), in place where the dtype allows."""
    for value, op in ((weight, np.multiply), (bias, np.add)):
        if value is not None:
            same = np.result_type(out, value) == out.dtype
            out = op(out, value, out=out) if same else op(out, value)
    return out


def _affine(normalised, weight, bias):
    """``normalised * weight + bias`` with either left out when None."""
    if weight is not None:
        normalised = normalised * weight
    return normalised if bias is None else normalised + bias


# ---- batch_norm ----------------------------------------------------------------------------------
def _channel_view(v, ndim: int):
    """A ``(C,)`` array shaped ``(C, 1, ..., 1)`` to broadcast along axis 1 of an ``ndim``-d input."""
    return None if v is None else tnp.reshape(v, (-1,) + (1,) * (ndim - 2))


def assign_statistic(param: Parameter, value, name: str) -> None:
    """``param.assign(value)``, without a derivative, in ``param``'s dtype.

    ``stop_gradient`` makes the value concrete under ``grad`` and ``jvp`` at any nesting (each level
    passes it down), and ``jit`` records the assign of a staged value as a write-back; what is left is a
    value that stays traced, as under ``vmap``, where the message says what to do instead.
    """
    value = stop_gradient(tnp.astype(value, param.dtype))
    try:
        param.assign(value)
    except TypeError:
        if not isinstance(value, Tracer):
            raise
        raise TypeError(
            f"batch_norm: the running statistic {name} cannot be updated from a traced value with no "
            "single concrete value (under vmap each example has its own batch statistics); put the model "
            "in evaluation mode (net.eval()) to use the running statistics, or build the layer with "
            "track_running_stats=False (or pass running_mean=running_var=None) to use batch statistics "
            "without updating") from None


def _check_running(value, name: str) -> None:
    if value is not None and not isinstance(value, Parameter):
        raise TypeError(f"batch_norm: in training, {name} must be a tapegrad Parameter (it is updated "
                        f"with Parameter.assign) or None (no update), got {type(value).__name__}; wrap it "
                        "as tg.Parameter(array, requires_grad=False), or pass training=False to normalise "
                        "with it")


def normalize_batch(input, running_mean, running_var, weight, bias, training: bool, momentum, eps: float):
    """:func:`batch_norm` after its checks; ``momentum`` may be a traced 0-d array (the cumulative
    average of ``BatchNorm2d(momentum=None)``)."""
    ndim = len(input.shape)
    axes = (0,) + tuple(range(2, ndim))
    weight, bias = _channel_view(weight, ndim), _channel_view(bias, ndim)
    if not training:
        # folded into one multiply-add per element, as PyTorch's CPU kernel does
        mean, var = _channel_view(running_mean, ndim), _channel_view(running_var, ndim)
        scale = _inv_std(var, eps) if weight is None else weight * _inv_std(var, eps)
        shift = -mean * scale if bias is None else bias - mean * scale
        return input * scale + shift
    mean, var, centred = _moments(input, axes)
    scale = _inv_std(var, eps) if weight is None else weight * _inv_std(var, eps)
    out = _affine(centred * scale, None, bias)
    if running_mean is not None or running_var is not None:
        count = math.prod(input.shape[i] for i in axes)
        if running_mean is not None:
            batch_mean = stop_gradient(tnp.reshape(mean, (-1,)))  # nothing of the update is taped
            assign_statistic(running_mean, (1.0 - momentum) * running_mean.value + momentum * batch_mean,
                             "running_mean")
        if running_var is not None:  # the running variance is the unbiased one (PyTorch)
            batch_var = stop_gradient(tnp.reshape(var, (-1,))) * (count / (count - 1))
            assign_statistic(running_var, (1.0 - momentum) * running_var.value + momentum * batch_var,
                             "running_var")
    return out


def batch_norm(input: ArrayLike, running_mean: ArrayLike, running_var: ArrayLike, weight: ArrayLike = None,
               bias: ArrayLike = None, training: bool = False, momentum: float = 0.1, eps: float = 1e-5) -> Array:
    """Batch normalisation over every axis but the channel axis 1 (``torch.nn.functional.batch_norm``).

    ``out = (input - mean) / sqrt(var + eps) * weight + bias``, per channel ``c``, where ``mean`` and
    ``var`` are:

    - ``training=False``: ``running_mean`` and ``running_var``;
    - ``training=True``: the batch statistics over axes ``0, 2, 3, ...`` (``var`` biased, divided by
      the count ``N * d2 * ...``). When the running statistics are given they are then updated as
      PyTorch does: ``running = (1 - momentum) * running + momentum * batch_stat``, with the *unbiased*
      batch variance (divided by ``count - 1``) for ``running_var``.

    The update is a side effect on Parameters, not a return value (the function keeps PyTorch's
    signature): ``running_mean``/``running_var`` must be ``tg.Parameter`` s in training; they get
    ``Parameter.assign`` ed values that carry no derivative (``stop_gradient``), cast to their own
    dtype. It works eagerly, under ``grad``/``jvp`` (the concrete values are stored) and under ``jit``
    (the values are written back after each call). Derivatives flow into ``input``, ``weight``, ``bias``
    and, in evaluation mode, into the running statistics too.

    Args:
        input: ``(N, C)``, ``(N, C, L)``, ``(N, C, H, W)``, ... (any ``(N, C, *)``), float.
        running_mean: ``(C,)``, or None (training only: no update). In training, a Parameter.
        running_var: ``(C,)``, or None, as ``running_mean``.
        weight: ``(C,)`` scale (gamma), or None for 1.
        bias: ``(C,)`` shift (beta), or None for 0.
        training: use (and update) the batch statistics, or use the running ones.
        momentum: the weight of the new batch statistic in the running average.
        eps: added to the variance before the square root.

    Returns:
        An array of ``input``'s shape, of the result dtype of ``input`` and the parameters (float32
        stays float32).

    Raises:
        ValueError: ``input`` with fewer than 2 axes; a parameter or statistic whose shape is not
            ``(C,)``; in training, a single value per channel (no variance; PyTorch's rule); missing
            running statistics in evaluation mode; a negative ``eps``.
        TypeError: in training, running statistics that are plain arrays (they cannot be updated),
            or a statistic to update from a value batched by ``vmap`` (use evaluation mode).
    """
    training = bool(training)
    eps = check_batch_norm(input, running_mean, running_var, weight, bias, training, eps)
    if training:
        if isinstance(momentum, bool) or not isinstance(momentum, numbers.Real):
            raise TypeError(f"batch_norm: momentum must be a number in [0, 1], got {momentum!r}")
        momentum = float(momentum)
    return normalize_batch(input, running_mean, running_var, weight, bias, training, momentum, eps)


def check_batch_norm(input, running_mean, running_var, weight, bias, training: bool, eps) -> float:
    """The argument checks of :func:`batch_norm` (shared with the BatchNorm modules); returns ``eps``."""
    what = "batch_norm"
    shape = _shape_of(input, "input", what)
    if len(shape) < 2:
        raise ValueError(f"{what}: input must have shape (N, C, *), at least 2 axes, got {shape}")
    channels = shape[1]
    hint = f"one value per channel: input has C = {channels} channels on axis 1"
    for name, value in (("running_mean", running_mean), ("running_var", running_var), ("weight", weight),
                        ("bias", bias)):
        _check_vector(value, name, (channels,), what, hint)
    if not training and (running_mean is None or running_var is None):
        raise ValueError(f"{what}: training=False normalises with running_mean and running_var, so both "
                         "must be given; pass training=True to use the batch statistics")
    if training:
        if math.prod(shape[:1] + shape[2:]) <= 1:
            raise ValueError(f"{what}: training needs more than one value per channel to compute a "
                             f"variance, got input of shape {shape}")
        _check_running(running_mean, "running_mean")
        _check_running(running_var, "running_var")
    return as_nonnegative_float(eps, "eps", what)


# ---- layer_norm and group_norm -------------------------------------------------------------------
def as_normalized_shape(normalized_shape, what: str) -> tuple:
    if isinstance(normalized_shape, (int, np.integer)) and not isinstance(normalized_shape, bool):
        return (int(normalized_shape),)
    try:
        dims = tuple(normalized_shape)
    except TypeError:
        dims = None
    if not dims or any(isinstance(d, bool) or not isinstance(d, (int, np.integer)) for d in dims):
        raise TypeError(f"{what}: normalized_shape must be an int or a non-empty sequence of ints, got "
                        f"{normalized_shape!r}")
    return tuple(int(d) for d in dims)


def layer_norm(input: ArrayLike, normalized_shape: ShapeLike, weight: ArrayLike = None, bias: ArrayLike = None,
               eps: float = 1e-5) -> Array:
    """Layer normalisation over the last ``len(normalized_shape)`` axes
    (``torch.nn.functional.layer_norm``; Ba, Kiros & Hinton 2016).

    ``out = (input - mean) / sqrt(var + eps) * weight + bias``, the mean and the biased variance taken
    over the trailing axes given by ``normalized_shape``, separately for every leading index.

    Args:
        input: ``(*, *normalized_shape)``, float.
        normalized_shape: an int or a sequence of ints: the trailing shape of ``input`` to normalise
            over.
        weight: ``normalized_shape``-shaped elementwise scale, or None for 1.
        bias: ``normalized_shape``-shaped elementwise shift, or None for 0.
        eps: added to the variance before the square root.

    Returns:
        ``input``'s shape, of the result dtype of ``input`` and the parameters.

    Raises:
        ValueError: the trailing axes of ``input`` are not ``normalized_shape``; ``weight`` or ``bias``
            of another shape; a negative ``eps``.
        TypeError: ``normalized_shape`` neither an int nor a sequence of ints.
    """
    what = "layer_norm"
    dims = as_normalized_shape(normalized_shape, what)
    shape = _shape_of(input, "input", what)
    if len(shape) < len(dims) or shape[len(shape) - len(dims):] != dims:
        raise ValueError(f"{what}: the last {len(dims)} axes of input must have normalized_shape {dims}, "
                         f"got input of shape {shape}; pass normalized_shape=input.shape[-k:] for the "
                         "last k axes")
    hint = "normalized_shape"
    _check_vector(weight, "weight", dims, what, hint)
    _check_vector(bias, "bias", dims, what, hint)
    eps = as_nonnegative_float(eps, "eps", what)
    concrete = _concrete(input, weight, bias)
    if concrete is not None:  # nothing to trace: a fused NumPy kernel
        centred, inv_std = _centred_now(concrete[0], len(dims), eps)
        return _affine_now(np.multiply(centred, inv_std, out=centred), *concrete[1:])
    axes = tuple(range(len(shape) - len(dims), len(shape)))
    _, var, centred = _moments(input, axes)
    return _affine(centred * _inv_std(var, eps), weight, bias)


def group_norm(input: ArrayLike, num_groups: int, weight: ArrayLike = None, bias: ArrayLike = None,
               eps: float = 1e-5) -> Array:
    """Group normalisation (``torch.nn.functional.group_norm``; Wu & He 2018).

    The ``C`` channels of axis 1 are split into ``num_groups`` consecutive groups of ``C //
    num_groups``; each group of each sample is normalised by its own mean and biased variance (over its
    channels and all spatial positions), then scaled and shifted per channel.

    Args:
        input: ``(N, C, *)``, float.
        num_groups: a divisor of ``C``. ``num_groups = C`` is instance norm, 1 is layer norm over
            ``(C, *)`` with per-channel affine.
        weight: ``(C,)`` scale, or None for 1.
        bias: ``(C,)`` shift, or None for 0.
        eps: added to the variance before the square root.

    Returns:
        ``input``'s shape, of the result dtype of ``input`` and the parameters.

    Raises:
        ValueError: ``input`` with fewer than 2 axes; ``num_groups`` not a positive divisor of ``C``;
            ``weight`` or ``bias`` not of shape ``(C,)``; a negative ``eps``.
        TypeError: ``num_groups`` not an int.
    """
    what = "group_norm"
    shape = _shape_of(input, "input", what)
    if len(shape) < 2:
        raise ValueError(f"{what}: input must have shape (N, C, *), at least 2 axes, got {shape}")
    num_groups = as_int(num_groups, "num_groups", what)
    channels = shape[1]
    if num_groups <= 0 or channels % num_groups:
        raise ValueError(f"{what}: num_groups must be a positive divisor of the number of channels "
                         f"C = {channels} (axis 1 of input), got num_groups={num_groups}")
    hint = f"one value per channel: input has C = {channels} channels on axis 1"
    _check_vector(weight, "weight", (channels,), what, hint)
    _check_vector(bias, "bias", (channels,), what, hint)
    eps = as_nonnegative_float(eps, "eps", what)
    groups = (shape[0], int(num_groups), math.prod(shape[1:]) // int(num_groups))
    concrete = _concrete(input, weight, bias)
    if concrete is not None:  # nothing to trace: a fused NumPy kernel
        return _group_norm_now(concrete, groups, shape, eps)
    grouped = tnp.reshape(input, (shape[0], int(num_groups), math.prod(shape[1:]) // int(num_groups)))
    _, var, centred = _moments(grouped, (2,))
    normalised = tnp.reshape(centred * _inv_std(var, eps), shape)
    return _affine(normalised, _channel_view(weight, len(shape)), _channel_view(bias, len(shape)))


def _group_norm_now(concrete, groups: tuple, shape: tuple, eps: float):
    """``group_norm`` of concrete arrays: the group's ``inv_std`` and the channel's ``weight`` folded into
    one ``(N, C)`` scale first, so the full-size work after the statistics is one multiply and one add
    (``batch_norm``'s folding)."""
    x, weight, bias = concrete
    centred, inv_std = _centred_now(x.reshape(groups), 1, eps)  # inv_std: (N, G, 1)
    scale = inv_std if weight is None else inv_std * weight.reshape(groups[1], -1)
    channels = (shape[0], shape[1]) + (1,) * (len(shape) - 2)
    scale = np.broadcast_to(scale, groups[:2] + (shape[1] // groups[1],)).reshape(channels)
    return _affine_now(centred.reshape(shape), scale, None if bias is None else bias.reshape(channels[1:]))


# ---- embedding -----------------------------------------------------------------------------------
def padding_index(padding_idx, num_embeddings: int, what: str):
    """``padding_idx`` in ``[0, num_embeddings)`` (a negative one counts from the end, as PyTorch)."""
    if padding_idx is None:
        return None
    as_int(padding_idx, "padding_idx", what, expected="an int or None")
    if not -num_embeddings <= padding_idx < num_embeddings:
        raise ValueError(f"{what}: padding_idx must lie in [-{num_embeddings}, {num_embeddings}) (the "
                         f"number of embeddings), got {padding_idx}")
    return int(padding_idx) % num_embeddings


def embedding(input: ArrayLike, weight: ArrayLike, padding_idx: int | None = None) -> Array:
    """Rows of ``weight`` looked up by integer indices: ``out[...] = weight[input[...]]``
    (``torch.nn.functional.embedding``, without ``max_norm``).

    Args:
        input: integer indices of any shape, in ``[0, num_embeddings)``.
        weight: ``(num_embeddings, embedding_dim)``.
        padding_idx: a row whose lookups get no gradient: ``weight[padding_idx]`` receives a zero
            gradient (its value is still returned as it is). A negative index counts from the end.

    Returns:
        ``input.shape + (embedding_dim,)``, of ``weight``'s dtype.

    Raises:
        TypeError: non-integer ``input``; a ``padding_idx`` that is not an int.
        ValueError: ``weight`` that is not 2-d; ``padding_idx`` out of range.
        IndexError: an index outside ``[0, num_embeddings)`` (checked when ``input`` is concrete;
            under ``jit`` a too-large index raises NumPy's IndexError and a negative one is not checked).
    """
    what = "embedding"
    weight_shape = _shape_of(weight, "weight", what)
    if len(weight_shape) != 2:
        raise ValueError(f"{what}: weight must have shape (num_embeddings, embedding_dim), got {weight_shape}")
    num = weight_shape[0]
    input = input if hasattr(input, "dtype") else np.asarray(input)
    if np.dtype(input.dtype).kind not in "iu":
        raise TypeError(f"{what}: input must hold integer indices, got dtype {input.dtype}; cast it with "
                        ".astype(np.int64)")
    padding_idx = padding_index(padding_idx, num, what)
    concrete = input if not isinstance(input, Tracer) else None
    if concrete is not None and concrete.size:
        lo, hi = int(concrete.min()), int(concrete.max())
        if lo < 0 or hi >= num:
            raise IndexError(f"{what}: indices must lie in [0, {num}) (num_embeddings), found values in "
                             f"[{lo}, {hi}]")
    rows = tnp.take(weight, input, axis=0)
    if padding_idx is None:
        return rows
    # the padding row's value stays; only its gradient is cut (PyTorch zeroes that row's gradient)
    is_padding = tnp.expand_dims(tnp.equal(input, padding_idx), -1)
    return tnp.where(is_padding, stop_gradient(rows), rows)
