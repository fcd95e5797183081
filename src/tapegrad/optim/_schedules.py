"""Learning-rate schedules as PyTorch's ``torch.optim.lr_scheduler`` objects, over an optimiser's
``learning_rate`` Parameter.

A schedule keeps its step counter in a 0-d int32 Parameter (``sched.last_epoch``, PyTorch's name) and
computes the rate from it in ``tapegrad.numpy`` operations (the closed form of each of PyTorch's
schedules). ``sched.step()`` adds one to the counter and assigns ``opt.learning_rate``: eagerly, or
inside a jitted training step, where both Parameters are read and written back at each call, so the
program follows the schedule without being staged again. ``sched.rate(step)`` is the same rate as a
pure function of the step, for the functional style (``opt.update(..., learning_rate=...)``).

As in PyTorch, building a schedule sets the rate to ``rate(0)``, and the schedule's base rate is the
optimiser's rate when the first schedule was built on it (``opt.initial_lr``), so schedules built one
after the other for :class:`SequentialLR` share it.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

import tapegrad.numpy as tnp
from tapegrad._backend import namespace_of
from tapegrad._core import Tracer
from tapegrad._params import Parameter
from tapegrad._state_dict import Stateful
from tapegrad.optim._base import Optimizer


def _positive_int(owner: str, **values) -> None:
    for name, value in values.items():
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value <= 0:
            raise ValueError(f"{owner}: {name} must be a positive int, got {value!r}")


def _in_range(owner: str, name: str, value, low: float, high: float, low_open: bool = False) -> None:
    ok = (low < value if low_open else low <= value) and value <= high
    if not ok:
        raise ValueError(f"{owner}: {name} must be in {'(' if low_open else '['}{low}, {high}], got {value}")


def _as_float(step):
    """A step (an int, an integer array or a traced one) as a float64 array."""
    return tnp.astype(tnp.asarray(step), np.float64)


class LRScheduler(Stateful):
    """The schedules' shared plumbing; subclasses define :meth:`rate`.

    Args:
        optimizer: the :class:`~tapegrad.optim.Optimizer` whose ``learning_rate`` the schedule sets.
        base_lr: the rate the schedule scales; None takes ``optimizer.initial_lr``, recording the
            optimiser's current rate there first if no schedule has.

    Attributes:
        optimizer: that optimiser.
        base_lr: the base rate, a Python float (PyTorch's ``base_lrs[0]``).
        last_epoch: the number of ``step()`` calls, a 0-d int32 Parameter (``requires_grad=False``,
            named ``"<schedule>.last_epoch"``, on the optimiser's device); ``state_dict()`` holds it.

    Raises:
        TypeError: ``optimizer`` is not a tapegrad optimiser.
    """

    def __init__(self, optimizer: Any, base_lr: float | None = None) -> None:
        if not isinstance(optimizer, Optimizer):
            raise TypeError(f"{type(self).__name__}: optimizer must be a tapegrad.optim optimiser (Adam, SGD, "
                            f"...), got {type(optimizer).__name__}")
        self.optimizer = optimizer
        if base_lr is None:
            if optimizer.initial_lr is None:
                optimizer.initial_lr = optimizer.lr
            base_lr = optimizer.initial_lr
        self.base_lr = float(base_lr)
        xp = namespace_of(optimizer.learning_rate.value)
        self.last_epoch = Parameter(xp.zeros((), np.int32), name=f"{type(self).__name__.lower()}.last_epoch",
                                    requires_grad=False)
        self._set_rate(self.last_epoch.value)  # PyTorch's initial step: the rate at step 0

    def rate(self, step: Any) -> Any:
        """The learning rate after ``step`` calls of :meth:`step`; each schedule defines it (its formula is in
        its class docstring).

        Args:
            step: an int or a 0-d integer array, traced or not.

        Returns:
            A 0-d float64 array (a tracer inside a transform).
        """
        raise NotImplementedError

    def step(self) -> None:
        """Advance the counter by one and set ``optimizer.learning_rate`` to :meth:`rate` of it. Call it
        after ``opt.step(grads)``, as in PyTorch; inside ``jit`` both Parameters are written back."""
        epoch = self.last_epoch.value + 1
        self._check_step(epoch)
        self.last_epoch.assign(epoch)
        self._set_rate(epoch)

    def _check_step(self, epoch) -> None:
        """Refuse a step the schedule is not defined at (only where the counter is concrete)."""

    def _set_rate(self, epoch) -> None:
        lr = self.optimizer.learning_rate
        lr.assign(tnp.astype(self.rate(epoch), lr.dtype))

    def get_last_lr(self) -> list:
        """The current rate as a one-element list of Python floats (PyTorch's spelling, one entry per
        parameter group; tapegrad optimisers have one). Outside transforms."""
        return [self.optimizer.lr]

    def _named_state(self) -> list:
        return [(self.last_epoch.name, self.last_epoch)]


class ConstantLR(LRScheduler):
    """The base rate times ``factor`` for the first ``total_iters`` steps, then the base rate
    (``torch.optim.lr_scheduler.ConstantLR``)::

        lr(t) = base_lr * (factor if t < total_iters else 1)

    With ``factor=1`` it is a constant schedule.

    Args:
        optimizer: the optimiser whose ``learning_rate`` it sets.
        factor: the multiplier of the first ``total_iters`` steps.
        total_iters: how many steps use ``factor``.

    Raises:
        ValueError: ``factor`` outside ``[0, 1]``; ``total_iters`` not a positive int.
    """

    def __init__(self, optimizer: Any, factor: float = 1.0 / 3, total_iters: int = 5) -> None:
        _in_range("ConstantLR", "factor", factor, 0.0, 1.0)
        _positive_int("ConstantLR", total_iters=total_iters)
        self.factor, self.total_iters = float(factor), int(total_iters)
        super().__init__(optimizer)

    def rate(self, step: Any) -> Any:
        return self.base_lr * tnp.where(_as_float(step) < self.total_iters, self.factor, 1.0)


class LinearLR(LRScheduler):
    """The base rate times a factor going linearly from ``start_factor`` to ``end_factor`` over
    ``total_iters`` steps, then held (``torch.optim.lr_scheduler.LinearLR``; a linear warmup)::

        lr(t) = base_lr * (start_factor + (end_factor - start_factor) * min(t, total_iters) / total_iters)

    Args:
        optimizer: the optimiser whose ``learning_rate`` it sets.
        start_factor: the multiplier at step 0.
        end_factor: the multiplier from step ``total_iters`` on.
        total_iters: the length of the ramp.

    Raises:
        ValueError: ``start_factor`` outside ``(0, 1]``, ``end_factor`` outside ``[0, 1]``;
            ``total_iters`` not a positive int.
    """

    def __init__(self, optimizer: Any, start_factor: float = 1.0 / 3, end_factor: float = 1.0,
                 total_iters: int = 5) -> None:
        _in_range("LinearLR", "start_factor", start_factor, 0.0, 1.0, low_open=True)
        _in_range("LinearLR", "end_factor", end_factor, 0.0, 1.0)
        _positive_int("LinearLR", total_iters=total_iters)
        self.start_factor, self.end_factor = float(start_factor), float(end_factor)
        self.total_iters = int(total_iters)
        super().__init__(optimizer)

    def rate(self, step: Any) -> Any:
        done = tnp.minimum(_as_float(step), float(self.total_iters)) / self.total_iters
        return self.base_lr * (self.start_factor + (self.end_factor - self.start_factor) * done)


class StepLR(LRScheduler):
    """The base rate decayed by ``gamma`` every ``step_size`` steps
    (``torch.optim.lr_scheduler.StepLR``)::

        lr(t) = base_lr * gamma ** floor(t / step_size)

    Args:
        optimizer: the optimiser whose ``learning_rate`` it sets.
        step_size: the steps between decays.
        gamma: the multiplier of each decay.

    Raises:
        ValueError: ``step_size`` not a positive int; ``gamma`` negative.
    """

    def __init__(self, optimizer: Any, step_size: int, gamma: float = 0.1) -> None:
        _positive_int("StepLR", step_size=step_size)
        if not gamma >= 0:
            raise ValueError(f"StepLR: gamma must be >= 0, got {gamma}")
        self.step_size, self.gamma = int(step_size), float(gamma)
        super().__init__(optimizer)

    def rate(self, step: Any) -> Any:
        return self.base_lr * tnp.power(self.gamma, tnp.floor_divide(tnp.asarray(step), self.step_size))


class ExponentialLR(LRScheduler):
    """The base rate decayed by ``gamma`` at every step (``torch.optim.lr_scheduler.ExponentialLR``)::

        lr(t) = base_lr * gamma ** t

    Args:
        optimizer: the optimiser whose ``learning_rate`` it sets.
        gamma: the multiplier of each step.

    Raises:
        ValueError: ``gamma`` negative.
    """

    def __init__(self, optimizer: Any, gamma: float) -> None:
        if not gamma >= 0:
            raise ValueError(f"ExponentialLR: gamma must be >= 0, got {gamma}")
        self.gamma = float(gamma)
        super().__init__(optimizer)

    def rate(self, step: Any) -> Any:
        return self.base_lr * tnp.power(self.gamma, _as_float(step))


class CosineAnnealingLR(LRScheduler):
    """Cosine annealing from the base rate to ``eta_min`` over ``T_max`` steps (Loshchilov & Hutter,
    "SGDR", ICLR 2017, eq. 5, without restarts; ``torch.optim.lr_scheduler.CosineAnnealingLR``)::

        lr(t) = eta_min + (base_lr - eta_min) * (1 + cos(pi * t / T_max)) / 2

    Past ``T_max`` the cosine goes on (the rate rises again), as PyTorch's does. For a linear warmup
    first, compose as PyTorch users do:
    ``SequentialLR(opt, [LinearLR(opt, 0.01, 1.0, warmup), CosineAnnealingLR(opt, T_max)], [warmup])``.

    Args:
        optimizer: the optimiser whose ``learning_rate`` it sets.
        T_max: the steps from the base rate down to ``eta_min``.
        eta_min: the lowest rate.

    Raises:
        ValueError: ``T_max`` not a positive int; ``eta_min`` negative.
    """

    def __init__(self, optimizer: Optimizer, T_max: int, eta_min: float = 0.0) -> None:  # noqa: N803 (PyTorch's name)
        _positive_int("CosineAnnealingLR", T_max=T_max)
        if not eta_min >= 0:
            raise ValueError(f"CosineAnnealingLR: eta_min must be >= 0, got {eta_min}")
        self.T_max, self.eta_min = int(T_max), float(eta_min)
        super().__init__(optimizer)

    def rate(self, step: Any) -> Any:
        cosine = (1.0 + tnp.cos(math.pi * _as_float(step) / self.T_max)) / 2.0
        return self.eta_min + (self.base_lr - self.eta_min) * cosine


class SequentialLR(LRScheduler):
    """Schedules one after another: ``schedulers[i]`` from step ``milestones[i - 1]`` on, counting its
    own steps from 0 there (``torch.optim.lr_scheduler.SequentialLR``)::

        lr(t) = schedulers[i].rate(t - milestones[i - 1])   for milestones[i - 1] <= t < milestones[i]

    Each schedule's own counter is not used; this one's is the state.

    Args:
        optimizer: the optimiser whose ``learning_rate`` it sets (the one of every schedule).
        schedulers: the schedules, in order.
        milestones: the steps where each schedule after the first takes over, increasing.

    Raises:
        ValueError: ``milestones`` is not one shorter than ``schedulers``, or not increasing positive
            ints; a schedule of another optimiser.
    """

    def __init__(self, optimizer: Any, schedulers: Any, milestones: Any) -> None:
        schedulers, milestones = list(schedulers), list(milestones)
        if not schedulers or len(milestones) != len(schedulers) - 1:
            raise ValueError(f"SequentialLR: milestones must have one entry fewer than schedulers, got "
                             f"{len(milestones)} milestones for {len(schedulers)} schedulers")
        _positive_int("SequentialLR", **{f"milestones[{i}]": m for i, m in enumerate(milestones)})
        if any(a >= b for a, b in zip(milestones, milestones[1:])):
            raise ValueError(f"SequentialLR: milestones must increase, got {milestones}")
        for i, s in enumerate(schedulers):
            if not isinstance(s, LRScheduler) or s.optimizer is not optimizer:
                raise ValueError(f"SequentialLR: schedulers[{i}] must be a schedule of this optimiser")
        self.schedulers, self.milestones = schedulers, [int(m) for m in milestones]
        super().__init__(optimizer)

    def rate(self, step: Any) -> Any:
        step = tnp.asarray(step)
        lr = self.schedulers[0].rate(step)
        for milestone, scheduler in zip(self.milestones, self.schedulers[1:]):
            lr = tnp.where(step >= milestone, scheduler.rate(step - milestone), lr)
        return lr


def _one_cycle_phases(total_steps, pct_start, initial_lr, max_lr, min_lr, three_phase) -> list:
    """``(start_step, end_step, start_lr, end_lr)`` of each of the 1cycle policy's phases, PyTorch's."""
    if three_phase:
        ends = [pct_start * total_steps - 1, 2 * pct_start * total_steps - 2, total_steps - 1]
        rates = [(initial_lr, max_lr), (max_lr, initial_lr), (initial_lr, min_lr)]
    else:
        ends = [pct_start * total_steps - 1, total_steps - 1]
        rates = [(initial_lr, max_lr), (max_lr, min_lr)]
    starts = [0.0] + ends[:-1]
    if any(end <= start for start, end in zip(starts, ends)):
        raise ValueError(f"OneCycleLR: total_steps={total_steps} with pct_start={pct_start} leaves a phase "
                         "without steps (its end at or before its start); use more steps or another pct_start")
    return [(float(s), float(e), float(a), float(b)) for s, e, (a, b) in zip(starts, ends, rates)]


class OneCycleLR(LRScheduler):
    """The 1cycle policy (Smith & Topin, "Super-Convergence", 2018), as
    ``torch.optim.lr_scheduler.OneCycleLR`` without momentum cycling.

    The rate rises from ``max_lr / div_factor`` to ``max_lr`` over the first ``pct_start`` of
    ``total_steps``, then anneals to ``max_lr / div_factor / final_div_factor`` at step
    ``total_steps - 1``. With ``three_phase`` it goes back down to ``max_lr / div_factor`` over a
    second phase as long as the first, and anneals to the minimum over the rest. Each phase from
    rate ``a`` to ``b`` over steps ``s0 .. s1`` (PyTorch's ends: ``pct_start * total_steps - 1``,
    ``2 * pct_start * total_steps - 2``, ``total_steps - 1``)::

        pct = (t - s0) / (s1 - s0)
        lr(t) = b + (a - b) / 2 * (1 + cos(pi * pct))     # anneal_strategy="cos"
        lr(t) = a + (b - a) * pct                         # anneal_strategy="linear"

    The optimiser's own rate is ignored (``opt.initial_lr`` becomes ``max_lr / div_factor``, as in
    PyTorch). PyTorch raises when ``step()`` passes ``total_steps``; so does this schedule when the
    counter is concrete, while inside ``jit`` (where it cannot raise) the rate stays at its value at
    ``total_steps``.

    Args:
        optimizer: the optimiser.
        max_lr: the peak rate.
        total_steps: the length of the cycle; or give ``epochs`` and ``steps_per_epoch``.
        pct_start: the fraction of the cycle spent rising.
        anneal_strategy: ``"cos"`` or ``"linear"``.
        cycle_momentum: must be False: tapegrad does not cycle the momentum (PyTorch's default True
            cycles ``betas[0]`` or ``momentum`` between 0.85 and 0.95); it is an argument so that
            code written for PyTorch fails loudly rather than train differently.
        div_factor: ``max_lr / initial rate``.
        final_div_factor: ``initial rate / final rate``.
        three_phase: the three-phase variant above.

    Raises:
        ValueError: no ``total_steps`` nor ``epochs`` and ``steps_per_epoch``, or not positive ints;
            ``pct_start`` outside ``[0, 1]``; a phase too short to hold a step; an unknown
            ``anneal_strategy``; ``cycle_momentum=True``; a negative ``max_lr``; ``step()`` past
            ``total_steps``.
    """

    def __init__(self, optimizer: Any, max_lr: float, total_steps: int | None = None, epochs: int | None = None,
                 steps_per_epoch: int | None = None, pct_start: float = 0.3, anneal_strategy: str = "cos",
                 cycle_momentum: bool = False, div_factor: float = 25.0, final_div_factor: float = 1e4,
                 three_phase: bool = False) -> None:
        if total_steps is None:
            if epochs is None or steps_per_epoch is None:
                raise ValueError("OneCycleLR: give total_steps, or epochs and steps_per_epoch")
            _positive_int("OneCycleLR", epochs=epochs, steps_per_epoch=steps_per_epoch)
            total_steps = epochs * steps_per_epoch
        _positive_int("OneCycleLR", total_steps=total_steps)
        _in_range("OneCycleLR", "pct_start", pct_start, 0.0, 1.0)
        if anneal_strategy not in ("cos", "linear"):
            raise ValueError(f"OneCycleLR: anneal_strategy must be 'cos' or 'linear', got {anneal_strategy!r}")
        if cycle_momentum:
            raise ValueError("OneCycleLR: cycle_momentum=True is not supported (tapegrad does not cycle "
                             "the momentum); pass cycle_momentum=False")
        if not max_lr >= 0:
            raise ValueError(f"OneCycleLR: max_lr must be >= 0, got {max_lr}")
        self.total_steps, self.anneal_strategy = int(total_steps), anneal_strategy
        initial_lr = float(max_lr) / div_factor
        self.phases = _one_cycle_phases(self.total_steps, pct_start, initial_lr, float(max_lr),
                                        initial_lr / final_div_factor, three_phase)
        optimizer.initial_lr = initial_lr
        super().__init__(optimizer, base_lr=initial_lr)

    def _anneal(self, start_lr, end_lr, pct):
        if self.anneal_strategy == "cos":
            return end_lr + (start_lr - end_lr) / 2.0 * (tnp.cos(math.pi * pct) + 1.0)
        return start_lr + (end_lr - start_lr) * pct

    def rate(self, step: Any) -> Any:
        t = tnp.minimum(_as_float(step), float(self.total_steps))
        *first, (start, end, a, b) = self.phases
        lr = self._anneal(a, b, (t - start) / (end - start))  # the last phase: from its start on
        for start, end, a, b in reversed(first):
            lr = tnp.where(t <= end, self._anneal(a, b, (t - start) / (end - start)), lr)
        return lr

    def _check_step(self, epoch) -> None:
        if not isinstance(epoch, Tracer) and int(epoch) > self.total_steps:
            raise ValueError(f"OneCycleLR: step() called {int(epoch)} times, past total_steps="
                             f"{self.total_steps}; build the schedule with more total_steps")
