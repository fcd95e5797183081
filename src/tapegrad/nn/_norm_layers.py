"""Normalisation modules: ``BatchNorm1d``/``2d``/``3d``, ``LayerNorm``, ``GroupNorm`` (PyTorch's
signatures, defaults and initial values).

A BatchNorm module keeps its running statistics as Parameters with ``requires_grad=False``: they are
listed by ``parameters()`` (so they are saved with the model) but not by ``trainable_params()``, and
under ``jit`` they are implicit inputs read at every call and outputs written back after it. In
training mode (``module.training``, set by ``net.train()``/``net.eval()``) a call normalises with the
batch statistics and updates the running ones; in evaluation mode it normalises with the running ones.
"""
from __future__ import annotations

from typing import Any

import numpy as np

import tapegrad.numpy as tnp
from tapegrad._array_type import Array
from tapegrad._backend import default_namespace
from tapegrad._params import Parameter
from tapegrad._typing import ArrayLike, ShapeLike
from tapegrad.nn import _norm
from tapegrad.nn._args import as_int, as_nonnegative_float
from tapegrad.nn._module import Module

__all__ = ["BatchNorm1d", "BatchNorm2d", "BatchNorm3d", "GroupNorm", "LayerNorm"]


def _filled(shape, fill: float, dtype, requires_grad: bool = True) -> Parameter:
    """A Parameter of ``shape`` filled with ``fill``, on the default backend (NumPy or CuPy)."""
    return Parameter(default_namespace().full(shape, fill, dtype=dtype), requires_grad=requires_grad)


class _BatchNorm(Module):
    """What the BatchNorm modules share; a subclass sets ``_ranks``, the input ranks it accepts."""

    _ranks: tuple = ()

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float | None = 0.1, affine: bool = True,
                 track_running_stats: bool = True, dtype: Any = np.float32) -> None:
        super().__init__()
        what = type(self).__name__
        self.num_features = as_int(num_features, "num_features", what, minimum=1)
        self.eps = as_nonnegative_float(eps, "eps", what)
        self.momentum = as_nonnegative_float(momentum, "momentum", what, allow_none=True)
        self.affine, self.track_running_stats = bool(affine), bool(track_running_stats)
        dtype, shape = np.dtype(dtype), (self.num_features,)
        self.weight = _filled(shape, 1.0, dtype) if self.affine else None
        self.bias = _filled(shape, 0.0, dtype) if self.affine else None
        if self.track_running_stats:
            self.running_mean = _filled(shape, 0.0, dtype, requires_grad=False)
            self.running_var = _filled(shape, 1.0, dtype, requires_grad=False)
            self.num_batches_tracked = _filled((), 0, np.int64, requires_grad=False)
        else:
            # declared as the Parameters they are with running statistics, the case every use checks first
            self.running_mean = self.running_var = self.num_batches_tracked = None  # type: ignore[assignment]

    def _check_input(self, x) -> None:
        shape = tuple(getattr(x, "shape", ()))
        if len(shape) not in self._ranks:
            ranks = " or ".join(f"{r}-d" for r in self._ranks)
            raise ValueError(f"{type(self).__name__}: expected a {ranks} input with channels on axis 1, got "
                             f"shape {shape}")
        if shape[1] != self.num_features:
            raise ValueError(f"{type(self).__name__}({self.num_features}): the input must have "
                             f"{self.num_features} channels on axis 1, got shape {shape}")

    def __call__(self, x: ArrayLike) -> Array:
        self._check_input(x)
        # PyTorch's rule: batch statistics in training, and always when there are no running ones
        use_batch = self.training or self.running_mean is None
        update = self.training and self.track_running_stats
        running: tuple[Any, Any] = (self.running_mean, self.running_var) if not use_batch or update else (None, None)
        _norm.check_batch_norm(x, *running, self.weight, self.bias, use_batch, self.eps)
        momentum = self.momentum
        if update:
            count = self.num_batches_tracked.value + 1
            if momentum is None:  # cumulative moving average: the k-th batch gets weight 1/k
                momentum = 1.0 / tnp.astype(count, self.running_mean.dtype)
        out = _norm.normalize_batch(x, *running, self.weight, self.bias, use_batch, momentum, self.eps)
        if update:  # after the statistics, so that a refused update (vmap) leaves the count alone
            _norm.assign_statistic(self.num_batches_tracked, count, "num_batches_tracked")
        return out

    def extra_repr(self) -> str:
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, affine={self.affine}, "
                f"track_running_stats={self.track_running_stats}")


class BatchNorm2d(_BatchNorm):
    """Batch normalisation of a 4-d input ``(N, C, H, W)`` over every axis but the channel axis 1
    (``torch.nn.BatchNorm2d``; Ioffe & Szegedy 2015).

    ``out = (x - mean) / sqrt(var + eps) * weight + bias`` per channel (see
    :func:`tapegrad.nn.functional.batch_norm`):

    - training mode (``net.train()``, the default): ``mean`` and ``var`` are the batch statistics
      (biased variance), and each call updates ``running = (1 - momentum) * running + momentum *
      batch_stat`` (the unbiased batch variance for ``running_var``) and adds 1 to
      ``num_batches_tracked``;
    - evaluation mode (``net.eval()``): the running statistics are used and nothing changes.

    The updates use ``Parameter.assign`` with values that carry no derivative: they happen eagerly,
    under ``grad(..., weights=net.trainable_params())``, ``jvp`` and higher-order derivatives (the
    concrete values are stored, once per call of the model) and under ``jit`` (written back after each
    call). Switching ``train()``/``eval()`` makes a jitted function stage again at its next call, so
    it follows the mode. Under ``vmap`` the update is refused (TypeError): call ``net.eval()`` first, or use
    ``track_running_stats=False``.

    Args:
        num_features: ``C``.
        eps: added to the variance before the square root.
        momentum: the weight of the new batch statistic; None averages all batches so far with equal
            weights (the ``k``-th gets ``1/k``), as PyTorch.
        affine: whether to learn ``weight`` (initialised to ones) and ``bias`` (zeros), each ``(C,)``;
            False leaves both None.
        track_running_stats: whether to keep ``running_mean`` (zeros), ``running_var`` (ones) and
            ``num_batches_tracked`` (int64 0): Parameters with ``requires_grad=False``, so
            ``parameters()`` lists them and ``trainable_params()`` does not. False sets them to None and
            always normalises with the batch statistics (in evaluation mode too).
        dtype: of ``weight``, ``bias`` and the running statistics (float32 by default).

    Input ``(N, C, H, W)``; output of the same shape, of the result dtype of the input and the
    Parameters (float32 stays float32).

    Raises:
        ValueError: a non-positive ``num_features``; a negative ``eps`` or ``momentum``; (at the call) an
            input of another rank or another channel count, or, in training, one value per channel.
        TypeError: a ``num_features`` that is not an int; (at the call, in training) an update under
            ``vmap``.
    """

    _ranks = (4,)


# BatchNorm1d and BatchNorm3d differ from BatchNorm2d only in the input's rank: one docstring serves both
_BATCH_NORM_DOC = """Batch normalisation of {input} (``torch.nn.BatchNorm{n}d``): the statistics
    are over {axes}, per channel; training and evaluation modes, running statistics and updates as
    :class:`BatchNorm2d`. Output of the input's shape and of the result dtype of the input and the
    Parameters.

    Args:
        num_features: ``C``.
        eps: added to the variance before the square root.
        momentum: the weight of the new batch statistic; None averages all batches so far with equal
            weights, as PyTorch.
        affine: whether to learn ``weight`` (ones) and ``bias`` (zeros), each ``(C,)``; False leaves
            both None.
        track_running_stats: whether to keep ``running_mean``, ``running_var`` and
            ``num_batches_tracked`` (Parameters with ``requires_grad=False``); False always normalises
            with the batch statistics.
        dtype: of ``weight``, ``bias`` and the running statistics (float32 by default).

    Raises:
        ValueError: a non-positive ``num_features``; a negative ``eps`` or ``momentum``; (at the call) an
            input of another rank or another channel count, or, in training, one value per channel.
        TypeError: a ``num_features`` that is not an int; (at the call, in training) an update under
            ``vmap``.
    """


class BatchNorm1d(_BatchNorm):
    __doc__ = _BATCH_NORM_DOC.format(n=1, input="a 2-d input ``(N, C)`` or a 3-d input ``(N, C, L)``",
                                     axes="``N`` (and ``L``)")
    _ranks = (2, 3)


class BatchNorm3d(_BatchNorm):
    __doc__ = _BATCH_NORM_DOC.format(n=3, input="a 5-d input ``(N, C, D, H, W)``",
                                     axes="every axis but the channel axis 1")
    _ranks = (5,)


class LayerNorm(Module):
    """Layer normalisation over the trailing ``normalized_shape`` axes (``torch.nn.LayerNorm``; Ba,
    Kiros & Hinton 2016): :func:`tapegrad.nn.functional.layer_norm` with learnt elementwise affine.

    Args:
        normalized_shape: an int or a sequence of ints, the trailing shape of the input.
        eps: added to the variance before the square root.
        elementwise_affine: whether to learn ``weight`` (ones) and ``bias`` (zeros) of shape
            ``normalized_shape``; False leaves both None.
        bias: False leaves out ``bias`` only (PyTorch >= 2.1).
        dtype: of the Parameters (float32 by default).

    Input ``(*, *normalized_shape)``; output of the same shape and of the result dtype.

    Raises:
        TypeError: ``normalized_shape`` neither an int nor a sequence of ints.
        ValueError: a non-positive size in ``normalized_shape``; a negative ``eps``; (at the call) an
            input whose trailing shape is not ``normalized_shape``.
    """

    def __init__(self, normalized_shape: ShapeLike, eps: float = 1e-5, elementwise_affine: bool = True,
                 bias: bool = True, dtype: Any = np.float32) -> None:
        super().__init__()
        self.normalized_shape = _norm.as_normalized_shape(normalized_shape, "LayerNorm")
        for size in self.normalized_shape:
            as_int(size, "every size in normalized_shape", "LayerNorm", minimum=1)
        self.eps = as_nonnegative_float(eps, "eps", "LayerNorm")
        self.elementwise_affine = bool(elementwise_affine)
        dtype = np.dtype(dtype)
        affine = self.elementwise_affine
        self.weight = _filled(self.normalized_shape, 1.0, dtype) if affine else None
        self.bias = _filled(self.normalized_shape, 0.0, dtype) if affine and bias else None

    def __call__(self, x: ArrayLike) -> Array:
        return _norm.layer_norm(x, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.elementwise_affine}"


class GroupNorm(Module):
    """Group normalisation (``torch.nn.GroupNorm``; Wu & He 2018): the channels are split into
    ``num_groups`` groups, each normalised per sample (:func:`tapegrad.nn.functional.group_norm`), then
    scaled and shifted per channel.

    Args:
        num_groups: a divisor of ``num_channels``.
        num_channels: ``C``, axis 1 of the input.
        eps: added to the variance before the square root.
        affine: whether to learn per-channel ``weight`` (ones) and ``bias`` (zeros), each ``(C,)``.
        dtype: of the Parameters (float32 by default).

    Input ``(N, C, *)``; output of the same shape and of the result dtype.

    Raises:
        ValueError: ``num_groups`` not dividing ``num_channels``; a non-positive size; a negative
            ``eps``; (at the call) an input without ``num_channels`` channels on axis 1.
        TypeError: sizes that are not ints.
    """

    def __init__(self, num_groups: int, num_channels: int, eps: float = 1e-5, affine: bool = True,
                 dtype: Any = np.float32) -> None:
        super().__init__()
        self.num_groups = as_int(num_groups, "num_groups", "GroupNorm", minimum=1)
        self.num_channels = as_int(num_channels, "num_channels", "GroupNorm", minimum=1)
        if self.num_channels % self.num_groups:
            raise ValueError(f"GroupNorm: num_channels={self.num_channels} must be divisible by "
                             f"num_groups={self.num_groups}")
        self.eps = as_nonnegative_float(eps, "eps", "GroupNorm")
        self.affine = bool(affine)
        dtype = np.dtype(dtype)
        self.weight = _filled((self.num_channels,), 1.0, dtype) if self.affine else None
        self.bias = _filled((self.num_channels,), 0.0, dtype) if self.affine else None

    def __call__(self, x: ArrayLike) -> Array:
        shape = tuple(getattr(x, "shape", ()))
        if len(shape) < 2 or shape[1] != self.num_channels:
            raise ValueError(f"GroupNorm({self.num_groups}, {self.num_channels}): the input must have shape "
                             f"(N, {self.num_channels}, *), got {shape}")
        return _norm.group_norm(x, self.num_groups, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return f"{self.num_groups}, {self.num_channels}, eps={self.eps}, affine={self.affine}"
