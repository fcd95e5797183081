"""``LossScaler``: static and dynamic loss scaling for mixed-precision (float16) training."""
from __future__ import annotations

import functools
import numbers
from typing import Any

import numpy as np

import tapegrad.numpy as tnp
from tapegrad._params import Parameter
from tapegrad._state_dict import Stateful
from tapegrad._typing import PyTree
from tapegrad.optim._base import Optimizer, _cast_like, _plain, check_number
from tapegrad.tree import tree_leaves, tree_map

_FLOAT32_MAX = float(np.finfo(np.float32).max)


def _growth_limit(factor: float) -> np.float32:
    """The largest float32 scale whose product with ``factor`` stays finite: float32's maximum over
    ``factor``, rounded down (rounded to nearest it may be a little over, and the product inf)."""
    factor = np.float32(factor)  # as the product is formed: in float32
    limit = np.float32(_FLOAT32_MAX / factor)
    with np.errstate(over="ignore"):
        while not np.isfinite(limit * factor):
            limit = np.nextafter(limit, np.float32(0))
    return limit


class LossScaler(Stateful):
    """Loss scaling, static or dynamic, as MindSpore's loss-scale managers.

    float16 gradients underflow to 0 below about 6e-8 and overflow to inf above 65504. Multiplying the
    loss by a scale ``S`` before differentiation multiplies every gradient by ``S`` (the chain rule is
    linear in the output's cotangent), which lifts small gradients out of the underflow range; the
    gradients are divided by ``S`` again (in float32) before the update. A step whose gradients are not
    finite, because ``S`` was too large, is skipped. One training step reads:

    .. code-block:: python

        scaler = tg.optim.LossScaler()                     # dynamic, MindSpore's defaults
        def loss_fn(x, y):
            return scaler.scale(F.cross_entropy(net(x), y))
        grads = tg.grad(loss_fn, None, net.trainable_params())(x, y)
        stepped = scaler.step(opt, grads)                  # unscale, check, step or skip, adjust

    or, spelled out: ``grads = scaler.unscale(grads)``, ``finite = scaler.all_finite(grads)``, the
    update applied only where ``finite``, then ``scaler.adjust(finite)``.

    Dynamic scaling (``dynamic=True``) follows MindSpore's ``DynamicLossScaleManager(init_loss_scale,
    scale_factor, scale_window)`` and ``mindspore.amp.DynamicLossScaler.adjust``: after
    ``scale_window`` consecutive steps with finite gradients the scale is multiplied by
    ``scale_factor`` (unless that product is not finite in float32); on a step with an inf or NaN
    gradient it is divided by ``scale_factor``, never below 1, the run of finite steps starts again
    from 0, and the update is skipped. PyTorch's ``torch.amp.GradScaler(init_scale, growth_factor,
    backoff_factor, growth_interval)`` is the same rule with ``backoff_factor = 1 / growth_factor``,
    except that its scale has no floor of 1. Static scaling (``dynamic=False``, or
    :meth:`fixed`) is MindSpore's ``FixedLossScaleManager(loss_scale, drop_overflow_update)``: the
    scale never changes, and ``drop_overflow_update`` says whether an overflowed step is skipped.

    The defaults are MindSpore's: the constructor's are ``DynamicLossScaleManager``'s (initial scale
    ``2**24``, factor 2, window 2000; with float16 activations the first steps overflow and are skipped
    while the scale halves down to a value that fits, about 10 steps), :meth:`fixed`'s are
    ``FixedLossScaleManager``'s (scale 128, overflowed steps dropped).

    The scale and the counter of consecutive finite steps live in Parameters (``requires_grad=False``,
    float32 and int32 0-d arrays), and every decision is a ``tnp.where`` between new and old values, never
    a Python ``if`` on an array: a training step that calls :meth:`step` under ``jit`` is staged once,
    reads the scale fresh at each call, and writes the new scale, counter, Parameters and optimiser
    state back, whether the step was taken or skipped. Eagerly the same code runs on arrays.

    Args:
        init_loss_scale: the initial scale, a finite number ``>= 1`` (stored in float32).
        scale_factor: the factor the dynamic scale grows and shrinks by, a number ``> 1``.
        scale_window: the number of consecutive finite steps after which the dynamic scale grows, an
            int ``>= 1``.
        dynamic: whether the scale adapts (True) or stays fixed (False, ``scale_factor`` and
            ``scale_window`` unused).
        drop_overflow_update: whether :meth:`step` skips a step whose gradients are not finite. Only
            a fixed scale may turn it off (MindSpore's dynamic manager always drops: stepping with inf
            gradients would only propagate them into the weights).

    Attributes:
        scale_value: the Parameter holding the current scale (float32, shape ``()``). It and ``counter``
            are made on the default backend (``tg.set_backend``), which should be the model's.
        counter: the Parameter counting consecutive finite steps since the scale last changed (int32,
            shape ``()``; always 0 for a fixed scale).

    The state dict (:meth:`state_dict`, :meth:`load_state_dict`) holds both, under the names
    ``"loss_scaler.scale_value"`` and ``"loss_scaler.counter"``.

    Raises:
        TypeError: an argument is not a number (``dynamic`` and ``drop_overflow_update``: not a bool).
        ValueError: ``init_loss_scale`` not finite or below 1 (or above float32's range),
            ``scale_factor <= 1``, ``scale_window`` not an int ``>= 1``, or ``dynamic=True`` with
            ``drop_overflow_update=False``; the message names the argument.
    """

    def __init__(self, init_loss_scale: float = 2.0 ** 24, scale_factor: float = 2, scale_window: int = 2000, *,
                 dynamic: bool = True, drop_overflow_update: bool = True) -> None:
        for what, flag in (("dynamic", dynamic), ("drop_overflow_update", drop_overflow_update)):
            if not isinstance(flag, (bool, np.bool_)):
                raise TypeError(f"LossScaler: {what} must be True or False, got {flag!r}")
        _check_scale("init_loss_scale", init_loss_scale)
        if dynamic:
            check_number("LossScaler", "scale_factor", scale_factor)
            if not 1 < scale_factor < np.inf:
                raise ValueError(f"LossScaler: scale_factor must be a finite number > 1 (the scale grows and "
                                 f"shrinks by it), got {scale_factor}")
            if isinstance(scale_window, bool) or not isinstance(scale_window, numbers.Integral) or scale_window < 1:
                raise ValueError(f"LossScaler: scale_window must be an int >= 1 (the number of consecutive finite "
                                 f"steps before the scale grows), got {scale_window!r}")
            if not drop_overflow_update:
                raise ValueError("LossScaler: drop_overflow_update=False needs a fixed scale (dynamic=False): a "
                                 "dynamic scale always skips the overflowed step, as MindSpore's "
                                 "DynamicLossScaleManager does")
        self.dynamic, self.drop_overflow_update = bool(dynamic), bool(drop_overflow_update)
        self.scale_factor, self.scale_window = float(scale_factor), int(scale_window)
        self.scale_value = Parameter(tnp.asarray(init_loss_scale, np.float32), name="loss_scaler.scale_value",
                                     requires_grad=False)
        self.counter = Parameter(tnp.zeros((), np.int32), name="loss_scaler.counter", requires_grad=False)

    @classmethod
    def fixed(cls, loss_scale: float = 128.0, drop_overflow_update: bool = True) -> LossScaler:
        """A fixed scale, as MindSpore's ``FixedLossScaleManager(loss_scale=128.0,
        drop_overflow_update=True)``: ``LossScaler(loss_scale, dynamic=False, drop_overflow_update=...)``.

        Args:
            loss_scale: the scale, a finite number ``>= 1``.
            drop_overflow_update: whether :meth:`step` skips a step whose gradients are not finite.

        Returns:
            A new :class:`LossScaler`.

        Raises:
            ValueError: ``loss_scale`` not finite or below 1.
            TypeError: ``loss_scale`` not a number, or ``drop_overflow_update`` not a bool.
        """
        _check_scale("loss_scale", loss_scale)
        return cls(loss_scale, dynamic=False, drop_overflow_update=drop_overflow_update)

    def _named_state(self) -> list:
        return [(self.scale_value.name, self.scale_value), (self.counter.name, self.counter)]

    def get_loss_scale(self) -> float:
        """The current scale as a Python float (MindSpore's ``get_loss_scale``); eager only: under a
        transform read ``scaler.scale_value`` instead."""
        return float(self.scale_value.value)

    def scale(self, inputs: PyTree) -> Any:
        """``inputs * scale`` for each array of the pytree ``inputs`` (the loss, usually), inside the
        function being differentiated (MindSpore's ``DynamicLossScaler.scale``).

        The scale is a float32 array, so a float16 loss becomes float32 (NumPy's promotion), where a
        large scale still fits; float32 and float64 keep their dtype. The cotangents flowing back into
        float16 operations carry the scale, in float16: that is where an overflow shows up as inf.

        Args:
            inputs: a pytree of arrays (Parameters are read as their values).

        Returns:
            The scaled pytree, in ``inputs``' structure.
        """
        return tree_map(lambda x: x * self.scale_value.value, _plain(inputs))

    def unscale(self, grads: PyTree) -> Any:
        """``grads / scale`` for each array of the pytree ``grads`` (MindSpore's
        ``DynamicLossScaler.unscale``): multiplied by ``1 / scale`` in float32 (or the gradient's wider
        dtype) and cast back to the gradient's dtype. An inf or NaN stays so.

        Args:
            grads: a pytree of gradient arrays of the scaled loss.

        Returns:
            The unscaled gradients, in ``grads``' structure and dtypes.
        """
        inverse = 1.0 / self.scale_value.value
        return tree_map(lambda g: _cast_like(g * inverse, g), _plain(grads))

    def all_finite(self, grads: PyTree) -> Any:
        """Whether every element of every array of the pytree ``grads`` is finite (neither inf nor NaN), as
        ``mindspore.amp.all_finite``.

        Args:
            grads: a pytree of arrays.

        Returns:
            A 0-d bool array (traced under a transform); True for an empty pytree.
        """
        leaves = tree_leaves(_plain(grads))
        flags = [tnp.all(tnp.isfinite(g)) for g in leaves]
        return functools.reduce(tnp.logical_and, flags) if flags else tnp.asarray(True)

    def adjust(self, grads_finite: Any) -> Any:
        """Update the scale and the counter from this step's result (MindSpore's
        ``DynamicLossScaler.adjust``); does nothing for a fixed scale.

        Args:
            grads_finite: a 0-d bool array, as :meth:`all_finite` returns it.

        Returns:
            ``grads_finite``.
        """
        if not self.dynamic:
            return grads_finite
        scale, counter = self.scale_value.value, self.counter.value
        factor = np.float32(self.scale_factor)
        # >=, not ==: a counter loaded from a run with a longer window still grows the scale
        grow = counter >= self.scale_window - 1
        # a scale that would pass float32's range stays as it is (as mindspore.amp.DynamicLossScaler), and
        # the product is formed from the clipped scale, so it never overflows (nor warns)
        limit = _growth_limit(self.scale_factor)
        grown = tnp.minimum(scale, limit) * factor
        on_finite = tnp.where(grow & (scale <= limit), grown, scale)
        on_overflow = tnp.maximum(scale / factor, np.float32(1.0))
        self.scale_value.assign(_cast_like(tnp.where(grads_finite, on_finite, on_overflow), scale))
        next_count = tnp.where(grow, 0, counter + 1)
        self.counter.assign(_cast_like(tnp.where(grads_finite, next_count, 0), counter))
        return grads_finite

    def step(self, optimizer: Optimizer, grads: PyTree) -> Any:
        """Unscale ``grads``, check them, apply ``optimizer.step`` unless they overflowed, and adjust the
        scale (MindSpore's ``TrainOneStepWithLossScaleCell`` step; PyTorch's ``scaler.step(optimizer)``
        followed by ``scaler.update()``).

        On a skipped step (gradients not finite and ``drop_overflow_update``) every Parameter the
        optimiser writes, its parameters and its state (Adam's step counter and moments included),
        keeps its value bit for bit; only the scale and the counter change. The choice is a
        ``tnp.where`` per Parameter, so it stages under ``jit`` as data, not as a branch.

        Args:
            optimizer: a stateful optimiser (built with its Parameters).
            grads: the gradients of the *scaled* loss, one per Parameter of ``optimizer``, in their order
                (the tuple ``grad(..., weights=optimizer.params)`` returns).

        Returns:
            Whether the step was taken, a 0-d bool array (``bool(stepped)`` eagerly; traced under
            ``jit``, where it can be returned from the jitted function).

        Raises:
            TypeError: ``optimizer`` is not a tapegrad optimiser.
            RuntimeError, ValueError: as ``optimizer.step`` (no Parameters; the gradients' number or
                shapes do not match); nothing has changed then.
        """
        if not isinstance(optimizer, Optimizer):
            raise TypeError(f"LossScaler.step: optimizer must be a tg.optim optimiser (such as "
                            f"tg.optim.Adam(net.trainable_params())), got {type(optimizer).__name__}")
        grads = self.unscale(grads)
        finite = self.all_finite(grads)
        if not self.drop_overflow_update:  # a fixed scale (dynamic ones always drop): nothing to adjust
            optimizer.step(grads)
            return tnp.ones_like(finite)
        # zeros in place of an overflowed step's gradients: its update is discarded anyway, and this keeps
        # inf - inf (NaN, with NumPy's warnings) out of the arithmetic
        grads = tree_map(lambda g: tnp.where(finite, g, tnp.zeros_like(g)), grads)
        _step_where(optimizer, grads, finite)
        return self.adjust(finite)


def _written_by(optimizer: Optimizer) -> list:
    """The Parameters ``optimizer.step`` writes: its parameters and every Parameter of its state dict."""
    params = list(optimizer.params) if optimizer.params is not None else []
    seen = {id(p) for p in params}
    return params + [p for _, p in optimizer._named_state() if id(p) not in seen]


def _step_where(optimizer: Optimizer, grads, take):
    """``optimizer.step(grads)``, kept only where the 0-d bool ``take`` is true: each Parameter the step
    writes gets ``where(take, new, old)``. An exception part way through puts the old values back."""
    written = _written_by(optimizer)
    old = [p.value for p in written]
    try:
        optimizer.step(grads)
        for p, before in zip(written, old):
            p.assign(_cast_like(tnp.where(take, p.value, before), before))
    except BaseException:
        for p, before in zip(written, old):
            p.assign(before)
        raise


def _check_scale(what: str, value) -> None:
    check_number("LossScaler", what, value)
    if not 1 <= value <= _FLOAT32_MAX:
        raise ValueError(f"LossScaler: {what} must be a finite number >= 1 that float32 holds (the loss is "
                         f"multiplied by it; MindSpore's loss-scale managers refuse less than 1), got {value}")
