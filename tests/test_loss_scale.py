"""``tg.optim.LossScaler``: static and dynamic loss scaling (MindSpore's loss-scale managers), skipped
steps that leave Parameters and optimiser state bit for bit as they were, the same under ``jit`` with one
staging, the state dict, argument errors, and float16 training of the digits MLP."""
from __future__ import annotations

import logging
import pathlib
import re
import sys

import numpy as np
import pytest

import tapegrad as tg
import tapegrad.numpy as tnp
from _tol import assert_close
from tapegrad import optim

EXAMPLES = pathlib.Path(__file__).resolve().parent.parent / "examples"
X = np.array([0.5, -1.0, 2.0], np.float32)
INF = np.array([np.inf, 1.0, 1.0], np.float32)  # an input that makes a gradient inf
NAN = np.array([np.nan, 1.0, 1.0], np.float32)


def _setup(scaler, optimizer=optim.Adam, **opt_kwargs):
    """A float32 Parameter, an optimiser over it, and the gradient of the scaled loss sum(w * w * x)."""
    w = tg.Parameter(np.array([1.0, -2.0, 0.5], np.float32), name="w")
    opt = optimizer([w], 0.1, **opt_kwargs)  # the learning rate (MindSpore's Momentum calls it learning_rate)

    def loss_fn(x):
        return scaler.scale(tnp.sum(w * w * x))
    return w, opt, tg.grad(loss_fn, grad_position=None, weights=[w])


def _snapshot(w, opt, scaler) -> dict:
    values = {"w": w.value, **opt.state_dict(), **scaler.state_dict()}
    return {k: np.array(v, copy=True) for k, v in values.items()}


def _assert_bit_identical(before: dict, after: dict, skip=()):
    for key, value in before.items():
        if key not in skip:
            assert after[key].dtype == value.dtype and np.array_equal(after[key], value, equal_nan=True), key


# ---- scaling, unscaling, checking -----------------------------------------------------------------
def test_scale_multiplies_the_loss_and_its_gradients():
    scaler = optim.LossScaler.fixed(8.0)
    w, _, grad_fn = _setup(scaler)
    assert scaler.scale(np.float32(1.5)) == 12.0
    (g,) = grad_fn(X)
    assert_close(g, 8.0 * 2 * np.asarray(w) * X)  # d/dw sum(w*w*x) = 2 w x, times the scale
    (unscaled,) = scaler.unscale((g,))
    assert unscaled.dtype == np.float32
    assert_close(unscaled, 2 * np.asarray(w) * X)


def test_scale_promotes_float16_and_unscale_keeps_the_gradient_dtype():
    scaler = optim.LossScaler()  # 2**24: more than float16 holds
    assert scaler.scale(np.float16(2.0)).dtype == np.float32 and scaler.scale(np.float16(2.0)) == 2.0 ** 25
    g16 = np.array([2.0 ** 8, 2.0 ** 10], np.float16)
    # 1 / 2**24 underflows in float16; the product is formed in float32, then cast back
    assert_close(scaler.unscale({"a": g16 * 2.0 ** 4})["a"].astype(np.float32),
                 g16.astype(np.float32) * 2.0 ** -20)
    assert scaler.unscale({"a": g16})["a"].dtype == np.float16


@pytest.mark.parametrize("bad", [INF, -INF, NAN])
def test_all_finite_sees_inf_and_nan_in_any_leaf(bad):
    scaler = optim.LossScaler()
    assert bool(scaler.all_finite((X, {"b": X})))
    assert not bool(scaler.all_finite((X, {"b": bad})))
    assert scaler.all_finite([X]).shape == () and scaler.all_finite([X]).dtype == np.bool_


# ---- static scaling -------------------------------------------------------------------------------
def test_fixed_scale_steps_as_the_unscaled_optimiser():
    scaler = optim.LossScaler.fixed(2.0 ** 10)
    w, opt, grad_fn = _setup(scaler)
    w_ref = tg.Parameter(np.asarray(w).copy())
    opt_ref = optim.Adam([w_ref], lr=0.1)
    for _ in range(3):
        assert bool(scaler.step(opt, grad_fn(X)))
        opt_ref.step((2 * np.asarray(w_ref) * X,))
    # a power-of-two scale is exact, so the updates are bit for bit those without scaling
    assert np.array_equal(np.asarray(w), np.asarray(w_ref))
    assert scaler.get_loss_scale() == 2.0 ** 10 and int(scaler.counter.value) == 0


def test_fixed_scale_skips_an_overflow_and_keeps_its_value():
    scaler = optim.LossScaler.fixed(128.0)
    w, opt, grad_fn = _setup(scaler)
    scaler.step(opt, grad_fn(X))
    before = _snapshot(w, opt, scaler)
    with np.errstate(invalid="ignore"):
        assert not bool(scaler.step(opt, grad_fn(INF)))
    _assert_bit_identical(before, _snapshot(w, opt, scaler))


def test_fixed_scale_without_drop_overflow_update_steps_anyway():
    scaler = optim.LossScaler.fixed(128.0, drop_overflow_update=False)
    w, opt, grad_fn = _setup(scaler, optimizer=optim.SGD)
    with np.errstate(invalid="ignore"):
        assert bool(scaler.step(opt, grad_fn(INF)))  # MindSpore's FixedLossScaleManager(s, False)
    assert not np.isfinite(np.asarray(w)[0]) and scaler.get_loss_scale() == 128.0


# ---- dynamic scaling ------------------------------------------------------------------------------
def test_dynamic_scale_grows_after_scale_window_finite_steps():
    scaler = optim.LossScaler(2.0 ** 10, scale_factor=2, scale_window=3)
    w, opt, grad_fn = _setup(scaler)
    seen = []
    for _ in range(7):
        assert bool(scaler.step(opt, grad_fn(X)))
        seen.append((scaler.get_loss_scale(), int(scaler.counter.value)))
    assert seen == [(2.0 ** 10, 1), (2.0 ** 10, 2), (2.0 ** 11, 0), (2.0 ** 11, 1), (2.0 ** 11, 2),
                    (2.0 ** 12, 0), (2.0 ** 12, 1)]
    assert int(opt.state.step) == 7


@pytest.mark.parametrize("bad", [INF, NAN])
def test_an_overflow_skips_the_step_and_halves_the_scale(bad):
    scaler = optim.LossScaler(2.0 ** 10, scale_window=5)
    w, opt, grad_fn = _setup(scaler)
    for _ in range(2):
        scaler.step(opt, grad_fn(X))
    before = _snapshot(w, opt, scaler)
    with np.errstate(invalid="ignore"):
        stepped = scaler.step(opt, grad_fn(bad))
    assert not bool(stepped)
    # w, Adam's step counter and both moments bit for bit as before; the scale halved, the run reset
    _assert_bit_identical(before, _snapshot(w, opt, scaler), skip=scaler.state_dict().keys())
    assert int(opt.state.step) == 2
    assert scaler.get_loss_scale() == 2.0 ** 9 and int(scaler.counter.value) == 0


@pytest.mark.parametrize("optimizer, kwargs", [(optim.SGD, dict(momentum=0.9)), (optim.Momentum, dict(momentum=0.9)),
                                               (optim.Adam, dict(weight_decay=0.1))])
def test_a_skipped_step_leaves_every_optimisers_state(optimizer, kwargs):
    scaler = optim.LossScaler(2.0 ** 10)
    w, opt, grad_fn = _setup(scaler, optimizer=optimizer, **kwargs)
    scaler.step(opt, grad_fn(X))
    before = _snapshot(w, opt, scaler)
    with np.errstate(invalid="ignore"):
        scaler.step(opt, grad_fn(INF))
    _assert_bit_identical(before, _snapshot(w, opt, scaler), skip=scaler.state_dict().keys())


def test_a_huge_loss_overflows_in_float16():
    """The realistic overflow: the scale times the loss's cotangent passes float16's 65504 on the way
    back through float16 operations; the step is skipped and the scale halved."""
    scaler = optim.LossScaler()  # 2**24
    w = tg.Parameter(np.array([0.25, -0.5], np.float32), name="w")
    opt = optim.Adam([w], lr=0.1)

    def loss_fn(x):
        w16 = tnp.astype(w.value, np.float16)  # a float16 copy of the float32 master weight
        return scaler.scale(tnp.astype(tnp.sum(w16 * x), np.float32))
    x16 = np.array([1.0, 2.0], np.float16)
    grad_fn = tg.grad(loss_fn, grad_position=None, weights=[w])
    with np.errstate(over="ignore", invalid="ignore"):
        (g,) = grad_fn(x16)
        assert g.dtype == np.float32 and not np.all(np.isfinite(g))
        assert not bool(scaler.step(opt, (g,)))
        assert scaler.get_loss_scale() == 2.0 ** 23 and np.array_equal(np.asarray(w), [0.25, -0.5])
        stepped = [bool(scaler.step(opt, grad_fn(x16))) for _ in range(10)]
    # the cotangent of w16 is scale * x: 2 * 2**15 = 65536 is past float16's 65504, 2 * 2**14 is not
    assert stepped == [False] * 9 + [True]
    assert scaler.get_loss_scale() == 2.0 ** 14 and int(opt.state.step) == 1


def test_the_scale_never_drops_below_one():
    scaler = optim.LossScaler(2.0, scale_factor=4)
    w, opt, grad_fn = _setup(scaler)
    scales = []
    with np.errstate(invalid="ignore"):
        for _ in range(3):
            scaler.step(opt, grad_fn(INF))
            scales.append(scaler.get_loss_scale())
    assert scales == [1.0, 1.0, 1.0]


def test_the_scale_stays_finite_in_float32():
    scaler = optim.LossScaler(2.0 ** 127, scale_window=1)
    scaler.adjust(np.asarray(True))
    assert scaler.get_loss_scale() == 2.0 ** 127  # 2**128 is inf in float32: the scale is kept


@pytest.mark.parametrize("factor", [1.1, 2.2, 3.0, 7.3])
def test_a_scale_at_the_limit_of_any_factor_never_becomes_inf(factor):
    """float32's maximum over the factor rounds up for some factors: growing from there gave inf, and
    every later step was skipped."""
    f32 = np.finfo(np.float32).max
    for start in (1.0, float(np.float32(float(f32) / factor))):  # from below, and from the rounded limit
        scaler = optim.LossScaler(start, scale_factor=factor, scale_window=1)
        for _ in range(1200):  # enough growths to reach float32's range for every factor here
            scaler.adjust(np.asarray(True))
        scale = scaler.get_loss_scale()
        assert np.isfinite(scale) and scale > f32 / factor / factor


def test_a_counter_past_the_window_still_grows_the_scale():
    """A counter loaded from a run with a longer window (or any count past it) grows the scale at the
    next finite step, rather than never again."""
    scaler = optim.LossScaler(2.0 ** 10, scale_window=4)
    scaler.load_state_dict({**scaler.state_dict(), "loss_scaler.counter": np.asarray(10, np.int32)})
    scaler.adjust(np.asarray(True))
    assert scaler.get_loss_scale() == 2.0 ** 11 and int(scaler.counter.value) == 0


def _mindspore_scales(init, factor, window, finite_steps):
    """MindSpore's ``DynamicLossScaleUpdateCell.construct``, transcribed: iteration numbers from 1, the
    scale grows when ``scale_window <= cur_iter - last_overflow_iter``, shrinks (not below 1) on overflow."""
    scale, cur_iter, last_overflow_iter, out = float(init), 1, 0, []
    for finite in finite_steps:
        on_overflow = scale if finite else max(scale / factor, 1.0)
        should_inc = window <= cur_iter - last_overflow_iter
        if not finite or should_inc:
            last_overflow_iter = cur_iter
        scale = on_overflow * factor if should_inc and finite else on_overflow
        cur_iter += 1
        out.append(scale)
    return out


def test_dynamic_rule_matches_mindspores_update_cell():
    rng = np.random.default_rng(0)
    finite_steps = list(rng.random(200) > 0.15)
    scaler = optim.LossScaler(2.0 ** 5, scale_factor=2, scale_window=4)
    got = []
    for finite in finite_steps:
        scaler.adjust(np.asarray(finite))
        got.append(scaler.get_loss_scale())
    assert got == _mindspore_scales(2.0 ** 5, 2, 4, finite_steps)
    assert min(got) < 2.0 ** 5 < max(got)  # the sequence exercised both directions


@pytest.mark.peer("torch")
def test_matches_torch_grad_scaler():
    """The scale and Adam's parameters after a run with overflows, against ``torch.amp.GradScaler`` with
    ``backoff_factor = 1 / growth_factor`` and ``torch.optim.Adam``."""
    import torch
    scaler = optim.LossScaler(2.0 ** 8, scale_factor=2, scale_window=3)
    w, opt, grad_fn = _setup(scaler)
    w_t = torch.tensor(np.asarray(w).copy(), requires_grad=True)
    opt_t = torch.optim.Adam([w_t], lr=0.1)
    scaler_t = torch.amp.GradScaler("cpu", init_scale=2.0 ** 8, growth_factor=2.0, backoff_factor=0.5,
                                    growth_interval=3)
    for x in [X, X, INF, X, X, X, X, NAN, X, X]:
        with np.errstate(invalid="ignore"):
            scaler.step(opt, grad_fn(x))
        opt_t.zero_grad()
        scaler_t.scale((w_t * w_t * torch.tensor(x)).sum()).backward()
        scaler_t.step(opt_t)
        scaler_t.update()
        assert scaler.get_loss_scale() == scaler_t.get_scale()
    assert int(opt.state.step) == 8
    np.testing.assert_allclose(np.asarray(w), w_t.detach().numpy(), rtol=1e-6, atol=1e-7)


# ---- jit ------------------------------------------------------------------------------------------
def _run(scaler, jit: bool, inputs):
    w, opt, grad_fn = _setup(scaler)
    stagings = []

    def train_step(x):
        stagings.append(1)  # runs once per staging under jit, at every call eagerly
        return scaler.step(opt, grad_fn(x))
    step = tg.jit(train_step) if jit else train_step
    record = []
    with np.errstate(invalid="ignore"):
        for x in inputs:
            stepped = step(x)
            record.append((bool(stepped), scaler.get_loss_scale(), int(scaler.counter.value)))
    return record, _snapshot(w, opt, scaler), len(stagings), step


def test_under_jit_the_step_stages_once_and_matches_eager(caplog):
    inputs = [X, X, INF, X, X, NAN, X, X, X, X]
    tg.config.explain_cache_misses = True
    caplog.set_level(logging.WARNING, logger="tapegrad.jit")
    try:
        jit_record, jit_state, stagings, step = _run(optim.LossScaler(2.0 ** 6, scale_window=2), True, inputs)
    finally:
        tg.config.explain_cache_misses = False
    eager_record, eager_state, _, _ = _run(optim.LossScaler(2.0 ** 6, scale_window=2), False, inputs)
    assert stagings == 1 and step._cache_size() == 1
    assert [r.getMessage() for r in caplog.records if r.name == "tapegrad.jit"] == []  # no cache miss
    assert jit_record == eager_record
    assert [r[0] for r in jit_record] == [True, True, False, True, True, False, True, True, True, True]
    assert {r[1] for r in jit_record} == {2.0 ** 6, 2.0 ** 7, 2.0 ** 8}  # the scale changed both ways
    _assert_bit_identical(eager_state, jit_state)


@pytest.mark.parametrize("jit", [False, True], ids=["eager", "jit"])
def test_on_a_device_everything_stays_there(jit):
    """On the strict device double (CuPy's rules: a host array in a device operation raises), the scale,
    the counter, the weights and Adam's state stay device arrays and equal the host run's."""
    import _device
    from _device_check import device_backend
    inputs = [X, INF, X, X]
    host_record, host_state, _, _ = _run(optim.LossScaler(2.0 ** 6, scale_window=2), jit, inputs)
    with device_backend():
        scaler = optim.LossScaler(2.0 ** 6, scale_window=2)
        w = tg.Parameter(_device.asarray(np.array([1.0, -2.0, 0.5], np.float32)), name="w")
        opt = optim.Adam([w], 0.1)
        grad_fn = tg.grad(lambda x: scaler.scale(tnp.sum(w * w * x)), grad_position=None, weights=[w])

        def train_step(x):
            return scaler.step(opt, grad_fn(x))
        step = tg.jit(train_step) if jit else train_step
        record = []
        with np.errstate(invalid="ignore"):
            for x in inputs:
                stepped = step(_device.asarray(x))
                record.append((bool(stepped), scaler.get_loss_scale(), int(scaler.counter.value)))
    held = [w, scaler.scale_value, scaler.counter, *tg.tree.tree_leaves(opt.state_params)]
    assert all(type(p.value) is _device.DeviceArray for p in held)
    assert record == host_record
    assert np.array_equal(_device.get(w.value), host_state["w"])


# ---- state dict -----------------------------------------------------------------------------------
def test_state_dict_round_trip_continues_identically():
    scaler = optim.LossScaler(2.0 ** 6, scale_window=3)
    for finite in [True, True, True, False, True]:
        scaler.adjust(np.asarray(finite))
    state = scaler.state_dict()
    assert set(state) == {"loss_scaler.scale_value", "loss_scaler.counter"}
    assert state["loss_scaler.scale_value"].dtype == np.float32 and float(state["loss_scaler.scale_value"]) == 2.0 ** 6
    assert state["loss_scaler.counter"].dtype == np.int32 and int(state["loss_scaler.counter"]) == 1
    restored = optim.LossScaler(scale_window=3)
    restored.load_state_dict(state)
    for s in (scaler, restored):
        s.adjust(np.asarray(True))
        s.adjust(np.asarray(True))
    assert restored.get_loss_scale() == scaler.get_loss_scale() == 2.0 ** 7


def test_load_state_dict_errors_name_the_key_and_change_nothing():
    scaler = optim.LossScaler(2.0 ** 6)
    before = scaler.state_dict()
    bad_dtype = {**before, "loss_scaler.counter": np.zeros((), np.float32)}
    with pytest.raises(ValueError, match="loss_scaler.counter"):
        scaler.load_state_dict(bad_dtype)
    with pytest.raises(KeyError, match="loss_scaler.scale_value"):
        scaler.load_state_dict({"loss_scaler.counter": np.zeros((), np.int32)})
    _assert_bit_identical(before, scaler.state_dict())


# ---- argument errors ------------------------------------------------------------------------------
@pytest.mark.parametrize("kwargs, error, match", [
    (dict(init_loss_scale=0.5), ValueError, "init_loss_scale"),
    (dict(init_loss_scale=float("inf")), ValueError, "init_loss_scale"),
    (dict(init_loss_scale=float("nan")), ValueError, "init_loss_scale"),
    (dict(init_loss_scale=1e39), ValueError, "init_loss_scale"),
    (dict(init_loss_scale="1024"), TypeError, "init_loss_scale"),
    (dict(scale_factor=1), ValueError, "scale_factor"),
    (dict(scale_factor=0.5), ValueError, "scale_factor"),
    (dict(scale_factor=None), TypeError, "scale_factor"),
    (dict(scale_window=0), ValueError, "scale_window"),
    (dict(scale_window=2.5), ValueError, "scale_window"),
    (dict(scale_window=True), ValueError, "scale_window"),
    (dict(drop_overflow_update=False), ValueError, "drop_overflow_update"),
    (dict(dynamic="yes"), TypeError, "dynamic"),
])
def test_bad_arguments_are_named(kwargs, error, match):
    with pytest.raises(error, match=match):
        optim.LossScaler(**kwargs)


def test_fixed_refuses_a_scale_below_one():
    with pytest.raises(ValueError, match="^LossScaler: loss_scale must be"):
        optim.LossScaler.fixed(0.0)


def test_step_errors_change_nothing():
    scaler = optim.LossScaler(2.0 ** 6)
    w, opt, grad_fn = _setup(scaler)
    before = _snapshot(w, opt, scaler)
    with pytest.raises(TypeError, match="optimizer"):
        scaler.step(lambda g: None, grad_fn(X))
    with pytest.raises(ValueError, match="2 gradients for 1 Parameters"):
        scaler.step(opt, grad_fn(X) * 2)
    with pytest.raises(RuntimeError, match="needs the Parameters"):
        scaler.step(optim.Adam(), grad_fn(X))
    _assert_bit_identical(before, _snapshot(w, opt, scaler))


# ---- the guide's section --------------------------------------------------------------------------
def _guide_section() -> tuple:
    """The section "Mixed precision and loss scaling" of the training guide."""
    page = EXAMPLES.parent / "docs" / "training.md"
    text = page.read_text()
    assert "## Mixed precision and loss scaling" in text, "the training guide lost its mixed-precision section"
    text = text.split("## Mixed precision and loss scaling", 1)[1]
    return page.name, re.split(r"^## ", text, flags=re.M)[0]


def test_the_guides_example_runs_and_prints_what_it_shows(capsys):
    name, section = _guide_section()
    blocks = re.findall(r"^```python\n(.*?)^```", section, flags=re.S | re.M)
    assert len(blocks) == 3, "the section lost its code blocks"
    namespace = {"__name__": "training_precision_example"}
    for k, block in enumerate(blocks):
        exec(compile(block, f"{name}, block {k}", "exec"), namespace)
    (printed,) = re.findall(r"^```text\n(.*?)^```", section, flags=re.S | re.M)
    assert capsys.readouterr().out == printed
    assert namespace["train_step"]._cache_size() == 1
    # the third block: a whole module's forward pass in float16 through functional_call, float32 gradients
    with np.errstate(over="ignore", invalid="ignore"):  # the scale starts at 2**24: the gradients overflow
        grads, (loss,) = namespace["grad_fn"](namespace["x"], namespace["y"])
    assert loss.dtype == np.float32 and [g.dtype for g in grads] == [np.float32] * 4


# ---- float16 training -----------------------------------------------------------------------------
def test_float16_digits_training_reaches_095(tmp_path, monkeypatch, capsys):
    """``examples/train_digits.py --precision float16``: float16 compute, float32 master weights, dynamic
    loss scaling from 2**24 (so the first steps overflow and are skipped). 12 of the script's 30 epochs,
    to keep the suite fast: they reach 0.964 (the full run 0.972)."""
    monkeypatch.syspath_prepend(str(EXAMPLES))
    import train_digits
    try:
        monkeypatch.setattr(train_digits, "OUTPUT_DIR", tmp_path)
        monkeypatch.setattr(train_digits, "EPOCHS", 12)
        net = train_digits.MLP(seed=0)
        assert train_digits.mlp_float16(net, np.ones((2, 64), np.float32)).dtype == np.float16
        train_digits.main(["--precision", "float16"])  # raises SystemExit below 0.95
    finally:
        sys.modules.pop("train_digits", None)
    printed = capsys.readouterr().out
    accuracy = float(re.search(r"final held-out accuracy: ([0-9.]+)", printed).group(1))
    scale, skipped, taken = re.search(r"final loss scale ([0-9.e+]+), (\d+) skipped steps \(Adam took (\d+)\)",
                                      printed).groups()
    assert accuracy >= 0.95
    assert 1 <= int(skipped) <= 20 and 1.0 <= float(scale) < 2.0 ** 24
    assert int(skipped) + int(taken) == 12 * 45  # 45 batches of 32 per epoch: each step taken or skipped
