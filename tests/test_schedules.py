"""Learning-rate schedules: the rates of 120 steps against NumPy references written from PyTorch's
documented recurrences, and against ``torch.optim.lr_scheduler`` where PyTorch is installed; a jitted
training step that calls ``opt.step`` and ``sched.step()`` is staged once and follows the eager rates;
``rate(step)`` as a pure function; the counter in ``state_dict``; argument errors."""
from __future__ import annotations

import logging
import math
import warnings

import numpy as np
import pytest

import tapegrad as tg
import tapegrad.numpy as tnp
from _tol import assert_close
from tapegrad import optim

try:
    import torch
except ImportError:  # the NumPy references still run
    torch = None

BASE_LR = 0.1
STEPS = 120


# ---- NumPy references: PyTorch's recurrences (each step from the previous rate, where PyTorch does) ----
def np_constant(factor, total_iters):
    return [BASE_LR * (factor if t < total_iters else 1.0) for t in range(STEPS)]


def np_linear(start_factor, end_factor, total_iters):
    rates = [BASE_LR * start_factor]
    for t in range(1, STEPS):
        if t > total_iters:
            rates.append(rates[-1])
        else:  # PyTorch's chained form: the ratio of consecutive factors
            step = (end_factor - start_factor) / (total_iters * start_factor + (t - 1) * (end_factor - start_factor))
            rates.append(rates[-1] * (1.0 + step))
    return rates


def np_step(step_size, gamma):
    rates = [BASE_LR]
    for t in range(1, STEPS):
        rates.append(rates[-1] * gamma if t % step_size == 0 else rates[-1])
    return rates


def np_exponential(gamma):
    rates = [BASE_LR]
    for _ in range(1, STEPS):
        rates.append(rates[-1] * gamma)
    return rates


def np_cosine(T_max, eta_min, base_lr=BASE_LR, steps=STEPS):  # noqa: N803
    """SGDR (Loshchilov & Hutter, 2017) eq. 5 with one cycle, continued past T_max."""
    return [eta_min + (base_lr - eta_min) * (1 + math.cos(math.pi * t / T_max)) / 2 for t in range(steps)]


def np_warmup_cosine(warmup, T_max, eta_min):  # noqa: N803
    warm = np_linear(0.01, 1.0, warmup)[:warmup]
    return warm + np_cosine(T_max, eta_min, steps=STEPS - warmup)


def np_one_cycle(max_lr, total_steps, pct_start=0.3, anneal_strategy="cos", div_factor=25.0,
                 final_div_factor=1e4, three_phase=False):
    """Smith & Topin (2018), in PyTorch's phases."""
    initial = max_lr / div_factor
    low = initial / final_div_factor
    if three_phase:
        phases = [(pct_start * total_steps - 1, initial, max_lr), (2 * pct_start * total_steps - 2, max_lr, initial),
                  (total_steps - 1, initial, low)]
    else:
        phases = [(pct_start * total_steps - 1, initial, max_lr), (total_steps - 1, max_lr, low)]
    rates = []
    for t in range(min(STEPS, total_steps + 1)):
        start = 0.0
        for i, (end, a, b) in enumerate(phases):
            if t <= end or i == len(phases) - 1:
                pct = (t - start) / (end - start)
                rates.append(b + (a - b) / 2 * (math.cos(math.pi * pct) + 1) if anneal_strategy == "cos"
                             else (b - a) * pct + a)
                break
            start = end
    return rates


def _seq_warmup_cosine(S, opt):  # noqa: N803 (S: the schedules' module, tapegrad's or PyTorch's)
    return S.SequentialLR(opt, [S.LinearLR(opt, 0.01, 1.0, 10), S.CosineAnnealingLR(opt, 90, 1e-4)], [10])


def _seq_three(S, opt):  # noqa: N803
    return S.SequentialLR(opt, [S.ConstantLR(opt, 0.2, 5), S.ExponentialLR(opt, 0.9), S.StepLR(opt, 10, 0.5)],
                          [20, 50])


def _one_cycle(**kw):
    return lambda S, opt: S.OneCycleLR(opt, 0.5, total_steps=STEPS, cycle_momentum=False, **kw)


# name -> (build(S, opt) over tapegrad.optim or torch.optim.lr_scheduler, NumPy reference rates)
CASES = {
    "ConstantLR": (lambda S, o: S.ConstantLR(o, 0.5, 7), np_constant(0.5, 7)),
    "ConstantLR-constant": (lambda S, o: S.ConstantLR(o, 1.0, 1), np_constant(1.0, 1)),
    "LinearLR": (lambda S, o: S.LinearLR(o, 0.1, 0.9, 30), np_linear(0.1, 0.9, 30)),
    "StepLR": (lambda S, o: S.StepLR(o, 7, 0.5), np_step(7, 0.5)),
    "ExponentialLR": (lambda S, o: S.ExponentialLR(o, 0.97), np_exponential(0.97)),
    "CosineAnnealingLR": (lambda S, o: S.CosineAnnealingLR(o, 50, 0.001), np_cosine(50, 0.001)),
    "warmup-cosine": (_seq_warmup_cosine, np_warmup_cosine(10, 90, 1e-4)),
    "SequentialLR-3": (_seq_three, np_constant(0.2, 5)[:20] + [BASE_LR * 0.9 ** t for t in range(30)]
                       + np_step(10, 0.5)[:STEPS - 50]),
    "OneCycleLR": (_one_cycle(), np_one_cycle(0.5, STEPS)),
    "OneCycleLR-three-phase": (_one_cycle(three_phase=True), np_one_cycle(0.5, STEPS, three_phase=True)),
    "OneCycleLR-linear": (_one_cycle(anneal_strategy="linear", pct_start=0.25, div_factor=10, final_div_factor=100),
                          np_one_cycle(0.5, STEPS, 0.25, "linear", 10, 100)),
}


def _rates(build, module, opt, step_param):
    """The rate used at each of STEPS optimiser steps, read before each step as PyTorch users would."""
    sched, rates = build(module, opt), []
    for _ in range(STEPS):
        rates.append(opt.param_groups[0]["lr"] if torch is not None and module is not optim else opt.lr)
        step_param(opt)
        sched.step()
    return rates, sched


def _tapegrad_rates(build):
    p = tg.Parameter(np.zeros(2))
    return _rates(build, optim, optim.SGD([p], lr=BASE_LR), lambda opt: opt.step((np.ones(2),)))


@pytest.mark.parametrize("name", list(CASES))
def test_rates_match_numpy_reference(name):
    build, want = CASES[name]
    got, sched = _tapegrad_rates(build)
    assert_close(np.array(got), np.array(want), rtol=1e-12)
    assert int(sched.last_epoch.value) == STEPS and sched.get_last_lr() == [sched.optimizer.lr]


@pytest.mark.peer("torch")
@pytest.mark.parametrize("name", list(CASES))
def test_rates_match_torch(name):
    build = CASES[name][0]
    tensor = torch.zeros(2, requires_grad=True)
    torch_opt = torch.optim.SGD([tensor], lr=BASE_LR)

    def torch_step(opt):
        tensor.grad = torch.ones(2)
        opt.step()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # SequentialLR's step(0) deprecation notice
        want, _ = _rates(build, torch.optim.lr_scheduler, torch_opt, torch_step)
    assert_close(np.array(_tapegrad_rates(build)[0]), np.array(want), rtol=1e-6)


@pytest.mark.parametrize("name", list(CASES))
def test_rate_is_a_pure_function_of_the_step(name):
    build, want = CASES[name]
    sched = build(optim, optim.Adam(lr=BASE_LR))
    steps = np.arange(len(want), dtype=np.int32)
    assert_close(sched.rate(steps), np.array(want), rtol=1e-12)  # vectorised over steps
    assert_close(tg.jit(sched.rate)(np.int32(17)), want[17], rtol=1e-12)
    assert int(sched.last_epoch.value) == 0  # rate() changes nothing


@pytest.mark.parametrize("name", ["StepLR", "warmup-cosine", "OneCycleLR"])
def test_jitted_training_step_follows_the_schedule_staged_once(name, caplog):
    build = CASES[name][0]
    stagings = []

    def setup():
        net = tg.nn.Dense(3, 2, seed=0, dtype=np.float64)
        opt = optim.Adam(net.trainable_params(), lr=BASE_LR)
        sched = build(optim, opt)

        def train_step(x):
            stagings.append(1)
            loss, grads = tg.value_and_grad(lambda x: tnp.sum(net(x) ** 2), grad_position=None,
                                            weights=opt.params)(x)
            opt.step(grads)
            sched.step()
            return loss
        return net, opt, train_step
    eager_net, eager_opt, eager_step = setup()
    jit_net, jit_opt, jit_step = setup()
    jit_step = tg.jit(jit_step)
    x = np.random.default_rng(0).standard_normal((4, 3))
    tg.config.explain_cache_misses = True
    caplog.set_level(logging.WARNING, logger="tapegrad.jit")
    try:
        for _ in range(20):
            eager_step(x)
            stagings.clear()
            jit_step(x)
            assert jit_opt.lr == eager_opt.lr  # the same rate, bit for bit
            assert len(stagings) <= 1
    finally:
        tg.config.explain_cache_misses = False
    assert jit_step._cache_size() == 1 and not [r for r in caplog.records if r.name == "tapegrad.jit"]
    assert not stagings  # the last calls ran the program
    for p, q in zip(jit_net.trainable_params(), eager_net.trainable_params()):
        assert_close(p.value, q.value)


def test_functional_style_with_rate_of_step():
    sched = optim.CosineAnnealingLR(optim.SGD(lr=BASE_LR), T_max=10)
    stateful_p = tg.Parameter(np.ones(3))
    stateful = optim.SGD([stateful_p], lr=BASE_LR, momentum=0.9)
    stateful_sched = optim.CosineAnnealingLR(stateful, T_max=10)
    functional = optim.SGD(lr=999.0, momentum=0.9)  # its own rate is not used
    update = tg.jit(functional.update)
    params = (np.ones(3),)
    state = functional.init(params)
    for t in range(15):
        g = (np.sin(np.arange(3.0) + t),)
        params, state = update(g, state, params, learning_rate=sched.rate(t))
        stateful.step(g)
        stateful_sched.step()
    assert update._cache_size() == 1
    assert_close(params[0], stateful_p.value)


def test_state_dict_resumes_the_schedule():
    def make():
        p = tg.Parameter(np.ones(2))
        opt = optim.SGD([p], lr=BASE_LR)
        return opt, optim.StepLR(opt, 3, 0.5)
    opt, sched = make()
    for _ in range(7):
        sched.step()
    saved_sched, saved_opt = sched.state_dict(), opt.state_dict()
    assert list(saved_sched) == ["steplr.last_epoch"] and saved_sched["steplr.last_epoch"] == 7
    assert saved_sched["steplr.last_epoch"].dtype == np.int32 and not sched.last_epoch.requires_grad
    opt2, sched2 = make()
    sched2.load_state_dict(saved_sched)
    opt2.load_state_dict(saved_opt)
    for _ in range(5):
        sched.step()
        sched2.step()
        assert opt2.lr == opt.lr
    with pytest.raises(KeyError, match="missing keys"):
        sched2.load_state_dict({})
    assert int(sched2.last_epoch.value) == 12  # a failed load changes nothing


def test_schedules_share_the_initial_rate():
    opt = optim.SGD(lr=0.2)
    first = optim.ExponentialLR(opt, 0.5)
    first.step()
    second = optim.StepLR(opt, 2)  # built after the rate changed: scales the first schedule's base
    assert opt.initial_lr == 0.2 and first.base_lr == second.base_lr == 0.2 and opt.lr == 0.2
    one_cycle = optim.OneCycleLR(opt, max_lr=1.0, total_steps=10)
    assert opt.initial_lr == one_cycle.base_lr == 0.04  # max_lr / div_factor
    assert_close(opt.lr, 0.04)


def test_one_cycle_past_its_end():
    opt = optim.SGD(lr=0.1)
    sched = optim.OneCycleLR(opt, max_lr=1.0, total_steps=10)
    for _ in range(10):
        sched.step()
    end = opt.lr
    with pytest.raises(ValueError, match="past total_steps=10"):
        sched.step()
    assert int(sched.last_epoch.value) == 10 and opt.lr == end  # the refused step changed nothing
    step = tg.jit(sched.step)
    step()
    step()  # inside jit it cannot raise: the rate holds its value at total_steps (documented)
    assert int(sched.last_epoch.value) == 12 and opt.lr == end


@pytest.mark.parametrize("make, error, match", [
    (lambda o: optim.StepLR(o, 0), ValueError, "step_size must be a positive int"),
    (lambda o: optim.StepLR(o, 2.5), ValueError, "step_size"),
    (lambda o: optim.StepLR(o, 2, gamma=-0.1), ValueError, "gamma"),
    (lambda o: optim.ExponentialLR(o, float("nan")), ValueError, "gamma"),
    (lambda o: optim.ConstantLR(o, factor=1.5), ValueError, "factor"),
    (lambda o: optim.LinearLR(o, start_factor=0.0), ValueError, "start_factor"),
    (lambda o: optim.CosineAnnealingLR(o, T_max=0), ValueError, "T_max"),
    (lambda o: optim.CosineAnnealingLR(o, T_max=5, eta_min=-1.0), ValueError, "eta_min"),
    (lambda o: optim.SequentialLR(o, [optim.StepLR(o, 2)], [3]), ValueError, "one entry fewer"),
    (lambda o: optim.SequentialLR(o, [optim.StepLR(o, 2), optim.StepLR(optim.SGD(lr=1.0), 2)], [3]),
     ValueError, r"schedulers\[1\]"),
    (lambda o: optim.SequentialLR(o, [optim.StepLR(o, 2)] * 3, [5, 5]), ValueError, "increase"),
    (lambda o: optim.OneCycleLR(o, 1.0), ValueError, "total_steps, or epochs"),
    (lambda o: optim.OneCycleLR(o, 1.0, total_steps=100, pct_start=1.5), ValueError, "pct_start"),
    (lambda o: optim.OneCycleLR(o, 1.0, total_steps=3, pct_start=0.3), ValueError, "phase without steps"),
    (lambda o: optim.OneCycleLR(o, 1.0, 100, anneal_strategy="exp"), ValueError, "anneal_strategy"),
    (lambda o: optim.OneCycleLR(o, 1.0, 100, cycle_momentum=True), ValueError, "cycle_momentum"),
    (lambda o: optim.StepLR(object(), 2), TypeError, "optimizer must be"),
])
def test_bad_arguments(make, error, match):
    opt = optim.SGD(lr=0.1)
    with pytest.raises(error, match=match):
        make(opt)


def test_one_cycle_from_epochs():
    a = optim.OneCycleLR(optim.SGD(lr=0.1), 1.0, epochs=4, steps_per_epoch=25)
    assert a.total_steps == 100


def test_on_the_device_double_nothing_leaves_the_device():
    """A jitted step with clipping, AdamW and a warmup-cosine schedule on device arrays: the rate, the
    counter and the weights stay on the device (no implicit copy) and equal the host run."""
    import _device

    def run(xp_asarray):
        p = tg.Parameter(xp_asarray(np.linspace(-1, 1, 4)))
        opt = optim.AdamW([p], lr=BASE_LR)
        sched = _seq_warmup_cosine(optim, opt)

        @tg.jit
        def step(g):
            clipped, _ = optim.clip_grad_norm((g,), 0.5)
            opt.step(clipped)
            sched.step()
        for t in range(12):
            step(xp_asarray(np.cos(np.arange(4.0) * t)))
        return p, opt, sched
    host, device = run(np.asarray), run(_device.asarray)
    assert all(type(x.value) is _device.DeviceArray for x in (device[0], device[1].learning_rate, device[2].last_epoch))
    assert_close(device[0].value.get(), host[0].value)
    assert device[1].lr == host[1].lr


def test_the_guides_jitted_training_loop_runs_staged_once(capsys):
    """The training guide's jitted loop (AdamW, clipping, warmup then cosine), run as written with a
    stand-in batch source: one program, and the rate ends at the cosine's floor."""
    import itertools
    import pathlib
    import re

    page = pathlib.Path(__file__).resolve().parent.parent / "docs" / "training.md"
    section = page.read_text().split("## Learning-rate schedules", 1)[1]
    loop = next(b for b in re.findall(r"^```python\n(.*?)^```", section, flags=re.S | re.M) if "@tg.jit" in b)
    rng = np.random.default_rng(0)
    x, y = rng.random((16, 64), dtype=np.float32), rng.integers(0, 10, 16)
    namespace = {"batches": itertools.repeat((x, y))}
    exec(compile(loop, f"{page.name}, the jitted loop", "exec"), namespace)
    assert namespace["train_step"]._cache_size() == 1
    final_rate, programs = capsys.readouterr().out.split()
    assert int(programs) == 1 and float(final_rate) == pytest.approx(0.0, abs=1e-12)
