"""``tapegrad.nn.functional``: activations and losses, with PyTorch's signatures and semantics.

Everything here is differentiable to any order. ``relu`` is a primitive of its own (it sits in every
MLP, so it gets one NumPy call forward and one backward); the rest are compositions of
``tapegrad.numpy`` operations, written in their numerically stable forms (``log_softmax`` through
``logsumexp``, BCE-with-logits through ``log1p(exp(-|x|))``). Constants are Python floats, so a float32
input gives a float32 output and float32 gradients (NumPy 2 weak-scalar promotion).

Conventions that differ from one library to another, and the choice made here:

- class axis: ``softmax``/``log_softmax`` take ``axis=-1`` (JAX); the losses put classes on axis 1 of
  an ``(N, C, d1, ...)`` input, or axis 0 of a ``(C,)`` input (PyTorch).
- kinks: ``relu'(0) = 0`` (as JAX and PyTorch); ``leaky_relu'(0) = negative_slope``
  and ``elu'(0) = alpha`` (PyTorch's backward picks the negative branch at 0).
"""
from __future__ import annotations

import math
from typing import Any, cast

import numpy as np

import tapegrad.numpy as tnp
from tapegrad._array_type import Array
from tapegrad._backend import namespace_of
from tapegrad._core import ShapedArray, Tracer, bind
from tapegrad._typing import ArrayLike, Axis
from tapegrad.extend import (
    def_lowering,
    def_out_impl,
    def_shape_rule,
    defbatch_elementwise,
    defjvp,
    defvjp,
    elementwise_lowering,
    primitive,
)
from tapegrad.nn._conv import ConvDimensionNumbers
from tapegrad.nn._conv_api import (
    conv1d,
    conv2d,
    conv3d,
    conv_general_dilated,
    conv_transpose1d,
    conv_transpose2d,
    conv_transpose3d,
)
from tapegrad.nn._dropout import dropout
from tapegrad.nn._norm import batch_norm, embedding, group_norm, layer_norm
from tapegrad.nn._pool import adaptive_avg_pool1d, adaptive_avg_pool2d, avg_pool1d, avg_pool2d, max_pool1d, max_pool2d
from tapegrad.numpy._float16 import accumulates_in_float32
from tapegrad.scipy import special

_SQRT_HALF = math.sqrt(0.5)
_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)

__all__ = [
    "ConvDimensionNumbers", "adaptive_avg_pool1d", "adaptive_avg_pool2d", "avg_pool1d", "avg_pool2d", "batch_norm",
    "conv1d", "conv2d", "conv3d", "embedding", "group_norm", "layer_norm",
    "conv_general_dilated", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d", "dropout", "max_pool1d",
    "max_pool2d",
    "binary_cross_entropy_with_logits", "cross_entropy", "elu", "gelu", "leaky_relu", "linear",
    "log_softmax", "logsumexp", "mse_loss", "nll_loss", "one_hot", "relu", "sigmoid", "silu", "softmax",
    "softplus", "tanh",
]


# ---- activations ---------------------------------------------------------------------------------
# The vjp multiplies by the boolean mask instead of selecting with ``where``: on a ReLU's mask (about
# half true, in no pattern) ``numpy.where`` mispredicts its branches and is ~20x slower than the
# multiply (250 us against 12 us for a float32 (128, 512) array). The one difference: a non-finite
# cotangent where ``x <= 0`` gives nan (inf * 0) where a select would give 0.
relu_p = primitive("relu", lambda x: namespace_of(x).maximum(x, 0))
def_shape_rule(relu_p, lambda x: ShapedArray(tuple(x.shape),  # maximum(x, 0), the 0 weakly typed
                                             cast(Any, np.maximum).resolve_dtypes(  # cast: not in numpy 2.2.0 stubs
                                                 (np.dtype(x.dtype), int, None))[-1]))
defvjp(relu_p, lambda ct, ans, x: ct * (ans > 0))
defjvp(relu_p, lambda t, ans, x: t * (ans > 0))
def_lowering(relu_p, elementwise_lowering(lambda f, x: f.maximum(x, 0)))
defbatch_elementwise(relu_p)
def_out_impl(relu_p, lambda x, out: np.maximum(x, 0, out=out))  # jit's buffer reuse


def relu(x: ArrayLike) -> Array:
    """``max(x, 0)`` elementwise; same shape and dtype as ``x``.

    Its derivative is 1 where ``x > 0`` and 0 elsewhere, so ``relu'(0) = 0`` (JAX and
    PyTorch agree). The gradient is the cotangent times the mask ``x > 0``, so it keeps the
    cotangent's dtype.
    """
    return bind(relu_p, x)


def leaky_relu(x: ArrayLike, negative_slope: float = 0.01) -> Array:
    """``x`` where ``x > 0``, else ``negative_slope * x`` (``torch.nn.functional.leaky_relu``)."""
    return tnp.where(x > 0, x, x * float(negative_slope))


def elu(x: ArrayLike, alpha: float = 1.0) -> Array:
    """``x`` where ``x > 0``, else ``alpha * (exp(x) - 1)`` (``torch.nn.functional.elu``).

    ``expm1`` only ever sees the non-positive part, so a large ``x`` makes no ``inf * 0 = nan`` in the
    gradient of the branch ``where`` discards.
    """
    negative_part = tnp.where(x > 0, 0.0, x)
    return tnp.where(x > 0, x, float(alpha) * tnp.expm1(negative_part))


def gelu(x: ArrayLike, approximate: str = "none") -> Array:
    """Gaussian error linear unit ``x * Phi(x)`` (Hendrycks & Gimpel 2016; ``torch.nn.functional.gelu``).

    Args:
        x: an array.
        approximate: ``"none"``: ``0.5 * x * (1 + erf(x / sqrt(2)))``, exact; ``"tanh"``:
            ``0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x**3)))``.

    Raises:
        ValueError: another ``approximate``.
    """
    if approximate == "none":
        return 0.5 * x * (1.0 + special.erf(x * _SQRT_HALF))
    if approximate == "tanh":
        return 0.5 * x * (1.0 + tnp.tanh(_SQRT_2_OVER_PI * (x + 0.044715 * (x * x * x))))
    raise ValueError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")


def sigmoid(x: ArrayLike) -> Array:
    """The logistic function ``1 / (1 + exp(-x))``, accurate in both tails (``torch.nn.functional.sigmoid``,
    computed as ``scipy.special.expit``)."""
    return special.expit(x)


def softplus(x: ArrayLike, beta: float = 1.0, threshold: float = 20.0) -> Array:
    """``log(1 + exp(beta * x)) / beta``, and ``x`` itself where ``beta * x > threshold``.

    As ``torch.nn.functional.softplus``; the smooth branch is ``logaddexp(0, beta * x) / beta``, which
    does not overflow.
    """
    beta = float(beta)
    scaled = x * beta
    return tnp.where(scaled > threshold, x, tnp.logaddexp(0.0, scaled) / beta)


def silu(x: ArrayLike) -> Array:
    """``x * sigmoid(x)`` (also called swish; ``torch.nn.functional.silu``)."""
    return x * special.expit(x)


def tanh(x: ArrayLike) -> Array:
    """Hyperbolic tangent, elementwise (``torch.nn.functional.tanh``, ``numpy.tanh``); same shape and
    dtype as ``x``.
    """
    return tnp.tanh(x)


def logsumexp(x: ArrayLike, axis: Axis = None, keepdims: bool = False) -> Array:
    """``log(sum(exp(x), axis))``, shifted by the maximum for stability (``jax.nn.logsumexp``).

    ``axis=None`` reduces over every axis. The gradient is ``softmax(x, axis)``.
    """
    return special.logsumexp(x, axis=axis, keepdims=keepdims)


def log_softmax(x: ArrayLike, axis: int = -1) -> Array:
    """``x - logsumexp(x, axis, keepdims=True)``: log-probabilities along ``axis``, same shape and dtype
    as ``x`` (``jax.nn.log_softmax``; PyTorch's ``torch.nn.functional.log_softmax`` with ``dim``).
    """
    return special.log_softmax(x, axis=axis)


def softmax(x: ArrayLike, axis: int = -1) -> Array:
    """``exp(x) / sum(exp(x), axis)``, computed as ``exp(log_softmax(x, axis))`` (no overflow); same
    shape and dtype as ``x`` (``jax.nn.softmax``; PyTorch's ``torch.nn.functional.softmax`` with
    ``dim``).
    """
    return tnp.exp(log_softmax(x, axis))


for _name in ("logsumexp", "log_softmax", "softmax", "cross_entropy"):
    accumulates_in_float32(f"nn.functional.{_name}", "its sum of exponentials is a float32 sum (exp and the "
                           "shift by the maximum stay float16)")


def linear(x: ArrayLike, weight: ArrayLike, bias: ArrayLike = None) -> Array:
    """``x @ weight.T + bias`` (``torch.nn.functional.linear``).

    Args:
        x: ``(..., in_features)``.
        weight: ``(out_features, in_features)``.
        bias: ``(out_features,)`` or None.

    Returns:
        ``(..., out_features)``.
    """
    out = tnp.matmul(x, tnp.transpose(weight))
    return out if bias is None else out + bias


# ---- labels --------------------------------------------------------------------------------------
def _is_concrete(x) -> bool:
    return not isinstance(x, Tracer)


def _readable(x) -> bool:
    """Whether the labels ``x`` can be range-checked eagerly: host arrays only. Reading a device
    array's minimum and maximum is a synchronisation per call on a GPU (the host waits for every queued
    kernel), and a traced one has no values; for those an out-of-range label gives NaN instead: a
    one-hot row of zeros would make a loss built on it finite and wrong, NaN makes the loss and its
    gradients NaN, which a check of the loss or ``LossScaler`` sees."""
    return isinstance(x, (np.ndarray, np.generic))


def _in_range(labels, num_classes: int):
    """Where ``labels`` lie in ``[0, num_classes)``: computed where the labels are, with no host read."""
    return tnp.logical_and(tnp.greater_equal(labels, 0), tnp.less(labels, num_classes))


def _one_hot(labels, num_classes: int, dtype):
    return tnp.astype(tnp.equal(tnp.expand_dims(labels, -1), namespace_of(labels).arange(int(num_classes))), dtype)


def one_hot(labels: ArrayLike, num_classes: int = -1, dtype: Any = np.float32) -> Array:
    """One-hot encoding: ``out[..., c] = (labels[...] == c)``.

    Args:
        labels: integer array of any shape, values in ``[0, num_classes)``.
        num_classes: the length of the new last axis; ``-1`` takes ``labels.max() + 1`` (as PyTorch).
        dtype: of the result; float32 by default (PyTorch returns int64; a float result is what a
            loss multiplies with).

    Returns:
        ``labels.shape + (num_classes,)``, of ``dtype``; a constant (no gradient flows to ``labels``).
        Device and traced labels are not range-checked (on a GPU the check would make the host wait
        for the device at every call): a label outside ``[0, num_classes)`` gives a row of NaN in a
        floating ``dtype`` (zeros in an integer or boolean one).

    Raises:
        TypeError: ``labels`` is not of an integer dtype.
        ValueError: a label outside ``[0, num_classes)`` (checked when ``labels`` is a host array);
            ``num_classes=-1`` with traced labels.
    """
    labels = labels if hasattr(labels, "dtype") else np.asarray(labels)
    if np.dtype(labels.dtype).kind not in "iu":
        raise TypeError(f"one_hot: labels must be integers, got dtype {labels.dtype}; cast them with "
                        ".astype(np.int64)")
    checked = _readable(labels)
    if checked:
        lo, hi = (int(labels.min()), int(labels.max())) if labels.size else (0, -1)
        if num_classes == -1:
            num_classes = hi + 1
        if labels.size and (lo < 0 or hi >= num_classes):
            raise ValueError(f"one_hot: labels must lie in [0, {num_classes}), found values in "
                             f"[{lo}, {hi}]")
    elif num_classes == -1:
        if not _is_concrete(labels):
            raise ValueError("one_hot: num_classes=-1 needs concrete labels; pass num_classes")
        # the result's shape depends on the largest label: a read from the device (pass num_classes)
        num_classes = int(labels.max()) + 1 if labels.size else 0
    onehot = _one_hot(labels, num_classes, dtype)
    if checked or np.dtype(dtype).kind not in "fc":
        return onehot
    return tnp.where(tnp.expand_dims(_in_range(labels, num_classes), -1), onehot, np.nan)


# ---- losses --------------------------------------------------------------------------------------
def _reduce(loss, reduction: str, name: str):
    if reduction == "mean":
        return tnp.mean(loss)
    if reduction == "sum":
        return tnp.sum(loss)
    if reduction == "none":
        return loss
    raise ValueError(f"{name}: reduction must be 'mean', 'sum' or 'none', got {reduction!r}")


def _check_reduction(reduction: str, name: str) -> None:
    if reduction not in ("mean", "sum", "none"):
        raise ValueError(f"{name}: reduction must be 'mean', 'sum' or 'none', got {reduction!r}")


def _class_targets(input, target, ignore_index: int, weight, name: str):
    """For integer targets: the input with a batch axis, a one-hot mask on axis 1 (zero rows where the
    target is ``ignore_index``), the kept elements (1.0, or 0.0 where ignored), and each element's
    weight ``weight[target]`` (0 where ignored)."""
    shape = tuple(input.shape)
    if len(shape) == 0:
        raise ValueError(f"{name}: input must have a class axis, got a 0-d array")
    target = target if hasattr(target, "dtype") else np.asarray(target)
    squeeze_batch = len(shape) == 1
    if squeeze_batch:  # (C,) input with a () target: one sample
        input, target, shape = tnp.expand_dims(input, 0), tnp.expand_dims(target, 0), (1,) + shape
    expected = shape[:1] + shape[2:]
    if tuple(target.shape) != expected:
        raise ValueError(f"{name}: integer targets of shape {expected} are expected for an input of shape "
                         f"{shape[1:] if squeeze_batch else shape} (classes on axis "
                         f"{0 if squeeze_batch else 1}), got {tuple(target.shape)}")
    num_classes = shape[1]
    keep = tnp.not_equal(target, ignore_index)
    safe = tnp.where(keep, target, 0)
    # host labels are range-checked here; device and traced ones are not read (see _readable): an
    # element whose label is out of range gets a NaN weight instead, so that the loss and its gradients
    # are NaN, never a finite wrong number
    checked = _readable(safe)
    if checked and safe.size and (int(safe.min()) < 0 or int(safe.max()) >= num_classes):
        raise ValueError(f"{name}: targets must lie in [0, {num_classes}) or equal ignore_index="
                         f"{ignore_index}, found values in [{int(safe.min())}, {int(safe.max())}]")
    if not checked:  # class 0 in their place, whose NaN weight below marks them (and keeps take in bounds)
        in_range = _in_range(safe, num_classes)
        safe = tnp.where(in_range, safe, 0)
    mask = tnp.moveaxis(_one_hot(safe, num_classes, input.dtype), -1, 1)
    keep = tnp.astype(keep, input.dtype)
    if weight is None:
        sample_weight = keep
    else:
        weight = tnp.astype(weight, input.dtype)
        sample_weight = tnp.take(weight, safe) * keep
    if not checked:
        sample_weight = tnp.where(in_range, sample_weight, np.nan)
    return input, mask, keep, sample_weight, squeeze_batch


def _picked(values, mask):
    """The entry of each target's class along axis 1: a selection, not ``sum(values * mask)``, so a
    ``-inf`` log-probability of another class (a ``-inf`` logit) stays out instead of making
    ``0 * -inf = nan`` (PyTorch gathers)."""
    return tnp.sum(tnp.where(tnp.not_equal(mask, 0), values, 0.0), axis=1)


def _class_weight_view(weight, input):
    """``weight`` of shape ``(C,)`` shaped to broadcast along axis 1 of ``input``."""
    weight = tnp.astype(weight, input.dtype)
    return tnp.reshape(weight, (1, -1) + (1,) * (len(input.shape) - 2))


def _reduce_weighted(loss, sample_weight, reduction, squeeze_batch):
    if reduction == "mean":
        return tnp.sum(loss) / tnp.sum(sample_weight)
    if reduction == "sum":
        return tnp.sum(loss)
    return tnp.squeeze(loss, 0) if squeeze_batch else loss


def nll_loss(input: ArrayLike, target: ArrayLike, weight: ArrayLike = None, ignore_index: int = -100,
             reduction: str = "mean") -> Array:
    """Negative log-likelihood of integer targets (``torch.nn.functional.nll_loss``).

    ``loss_n = -weight[t_n] * input[n, t_n]`` (0 where ``t_n == ignore_index``).

    Args:
        input: log-probabilities ``(N, C)``, ``(N, C, d1, ...)`` or ``(C,)``.
        target: integers ``(N,)``, ``(N, d1, ...)`` or ``()``, in ``[0, C)`` or ``ignore_index``.
        weight: per-class weights ``(C,)`` or None.
        ignore_index: targets equal to it contribute nothing (and are left out of the mean).
        reduction: ``"mean"``: ``sum(loss) / sum(weight[t_n])`` over the kept elements (PyTorch's
            weighted mean; nan when every target is ignored); ``"sum"``; ``"none"``: shape of ``target``.

    Raises:
        ValueError: shapes that do not match, a target out of range, an unknown ``reduction``.
    """
    _check_reduction(reduction, "nll_loss")
    input, mask, _, sample_weight, squeeze_batch = _class_targets(input, target, ignore_index, weight,
                                                                  "nll_loss")
    loss = -_picked(input, mask) * sample_weight
    return _reduce_weighted(loss, sample_weight, reduction, squeeze_batch)


def cross_entropy(input: ArrayLike, target: ArrayLike, weight: ArrayLike = None, ignore_index: int = -100,
                  reduction: str = "mean", label_smoothing: float = 0.0) -> Array:
    """Cross-entropy between logits and class targets (``torch.nn.functional.cross_entropy``).

    The target is either integer class indices or class probabilities (one-hot or soft labels):

    - integer ``target`` of shape ``(N,)`` (``(N, d1, ...)``, or ``()`` for a ``(C,)`` input):
      ``nll_loss(log_softmax(input, axis=1), target, weight, ignore_index)``; the mean divides by
      ``sum(weight[t_n])`` over the kept elements.
    - float ``target`` of the input's shape: ``loss_n = -sum_c weight[c] * target[n, c] *
      log_softmax(input)[n, c]``; the mean divides by the number of elements ``N * d1 * ...``. For
      one-hot targets both forms give the same value.

    ``label_smoothing = eps`` mixes the target with the uniform distribution over the ``C`` classes:
    probabilities become ``(1 - eps) * target + eps / C``; for integer targets the loss becomes
    ``(1 - eps) * nll + eps / C * smooth``, with ``smooth_n = -sum_c weight[c] log_softmax[n, c]``
    reduced as the nll part (PyTorch's definition).

    Args:
        input: unnormalised logits ``(N, C)``, ``(N, C, d1, ...)`` or ``(C,)``; classes on axis 1
            (axis 0 for a 1-d input).
        target: integer class indices or float probabilities, as above.
        weight: per-class weights ``(C,)`` or None.
        ignore_index: for integer targets, the value that marks elements to leave out.
        reduction: ``"mean"``, ``"sum"`` or ``"none"`` (shape ``(N, d1, ...)``).
        label_smoothing: in ``[0, 1]``.

    Returns:
        A scalar (``"mean"``, ``"sum"``) or per-element losses, of the input's dtype.

    Raises:
        ValueError: a float target whose shape is not the input's, an integer target of the wrong
            shape or out of range, ``label_smoothing`` outside ``[0, 1]``, an unknown ``reduction``.
        TypeError: a boolean or complex target.
    """
    _check_reduction(reduction, "cross_entropy")
    label_smoothing = float(label_smoothing)
    if not 0.0 <= label_smoothing <= 1.0:
        raise ValueError(f"cross_entropy: label_smoothing must be in [0, 1], got {label_smoothing}")
    target = target if hasattr(target, "dtype") else np.asarray(target)
    shape = tuple(input.shape)
    class_axis = 0 if len(shape) == 1 else 1
    kind = np.dtype(target.dtype).kind
    if kind == "f":
        if tuple(target.shape) != shape:
            raise ValueError(f"cross_entropy: probability targets must have the input's shape {shape}, got "
                             f"{tuple(target.shape)}; for class indices pass an integer array")
        log_probs = log_softmax(input, axis=class_axis)
        if label_smoothing:
            target = target * (1.0 - label_smoothing) + label_smoothing / shape[class_axis]
        terms = log_probs * target
        if weight is not None:
            weight = tnp.astype(weight, input.dtype)
            terms = terms * (weight if class_axis == 0 else _class_weight_view(weight, input))
        return _reduce(-tnp.sum(terms, axis=class_axis), reduction, "cross_entropy")
    if kind not in "iu":
        raise TypeError(f"cross_entropy: target must hold integer class indices or float probabilities, "
                        f"got dtype {target.dtype}")
    log_probs = log_softmax(input, axis=class_axis)
    batched, mask, keep, sample_weight, squeeze_batch = _class_targets(log_probs, target, ignore_index, weight,
                                                                       "cross_entropy")
    loss = _reduce_weighted(-_picked(batched, mask) * sample_weight, sample_weight, reduction,
                            squeeze_batch)
    if not label_smoothing:
        return loss
    terms = batched if weight is None else batched * _class_weight_view(weight, batched)
    smooth = _reduce_weighted(-tnp.sum(terms, axis=1) * keep, sample_weight, reduction, squeeze_batch)
    return (1.0 - label_smoothing) * loss + (label_smoothing / shape[class_axis]) * smooth


def _check_same_shape(input, target, name: str) -> None:
    """An elementwise loss compares ``input`` and ``target`` entry by entry: shapes that merely
    broadcast, such as ``(N, 1)`` against ``(N,)``, would compare every prediction with every target
    and return a wrong loss without a word (PyTorch only warns), so they are refused."""
    input_shape, target_shape = tnp.shape(input), tnp.shape(target)
    if input_shape != target_shape:
        raise ValueError(f"{name}: input has shape {input_shape} but target has shape {target_shape}; they "
                         "must be equal, or the loss would broadcast them against each other (an (N, 1) "
                         "input against an (N,) target compares every prediction with every target). "
                         "Reshape one of them first, e.g. input.reshape(target.shape)")


def mse_loss(input: ArrayLike, target: ArrayLike, reduction: str = "mean") -> Array:
    """Squared error ``(input - target)**2``, reduced (``torch.nn.functional.mse_loss``).

    Args:
        input, target: arrays of one shape.
        reduction: ``"mean"`` (a 0-d array), ``"sum"`` (a 0-d array) or ``"none"`` (input's shape).

    Raises:
        ValueError: input and target shapes differ (PyTorch broadcasts with a warning; the silent
            ``(N, 1)`` against ``(N,)`` broadcast is the bug this refuses), an unknown ``reduction``.
    """
    _check_reduction(reduction, "mse_loss")
    _check_same_shape(input, target, "mse_loss")
    return _reduce(tnp.square(input - target), reduction, "mse_loss")


def binary_cross_entropy_with_logits(input: ArrayLike, target: ArrayLike, weight: ArrayLike = None,
                                     reduction: str = "mean", pos_weight: ArrayLike = None) -> Array:
    """Binary cross-entropy of probabilities ``sigmoid(input)`` against ``target`` in ``[0, 1]``.

    As ``torch.nn.functional.binary_cross_entropy_with_logits``:
    ``loss = -weight * (pos_weight * t * log(sigmoid(x)) + (1 - t) * log(1 - sigmoid(x)))``, computed
    stably as ``max(x, 0) - x * t + log1p(exp(-|x|))`` (without ``pos_weight``) or
    ``(1 - t) * x + (1 + (pos_weight - 1) * t) * (log1p(exp(-|x|)) + max(-x, 0))`` (with it).

    Args:
        input: logits, any shape.
        target: the same shape, values in ``[0, 1]``.
        weight: broadcastable rescaling of each element's loss, or None.
        reduction: ``"mean"``, ``"sum"`` or ``"none"``.
        pos_weight: weight of the positive term, broadcastable along the last axis (one per class),
            or None.

    Returns:
        The loss, a 0-d array for ``"mean"``/``"sum"``, input's shape for ``"none"``.

    Raises:
        ValueError: input and target shapes differ (as PyTorch), an unknown ``reduction``.
    """
    _check_reduction(reduction, "binary_cross_entropy_with_logits")
    _check_same_shape(input, target, "binary_cross_entropy_with_logits")
    log1p_exp_neg_abs = tnp.log1p(tnp.exp(-tnp.abs(input)))
    if pos_weight is None:
        loss = tnp.maximum(input, 0.0) - input * target + log1p_exp_neg_abs
    else:
        loss = ((1.0 - target) * input
                + (1.0 + (pos_weight - 1.0) * target) * (log1p_exp_neg_abs + tnp.maximum(-input, 0.0)))
    if weight is not None:
        loss = loss * weight
    return _reduce(loss, reduction, "binary_cross_entropy_with_logits")
