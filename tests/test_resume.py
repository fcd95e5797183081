"""Resuming is exact: the digits MLP (``examples/train_digits.py``'s model and data) trained 50 steps with
Adam, checkpointed, and trained 50 more in a new process ends with the weights of 100 uninterrupted
steps, bit for bit.

The batches depend only on the step index, so the resumed process draws the same ones; the child
process imports :func:`train` from this file, so both sides run the same loop.
"""
from __future__ import annotations

import pathlib
import re
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import tapegrad as tg

pytest.importorskip("safetensors", reason="checkpoints need safetensors (pip install tapegrad[checkpoint])")
pytest.importorskip("sklearn", reason="the digits data come with scikit-learn")
pytest.importorskip("matplotlib", reason="examples/train_digits.py imports matplotlib")
pytest.importorskip("tqdm", reason="examples/train_digits.py imports tqdm")

TESTS = pathlib.Path(__file__).resolve().parent
EXAMPLES = TESTS.parent / "examples"
if str(EXAMPLES) not in sys.path:
    sys.path.insert(0, str(EXAMPLES))
import train_digits  # noqa: E402

STEPS = 50


def build(seed: int = train_digits.SEED):
    net = train_digits.MLP(seed=seed)
    return net, tg.optim.Adam(net.trainable_params(), lr=train_digits.LEARNING_RATE)


def train(net, optimizer, start: int, stop: int) -> None:
    """Adam steps ``start .. stop - 1``; step ``i`` trains on the batch drawn from seed ``i`` alone."""
    x, _, y, _ = train_digits.load_data()

    def loss_fn(xb, yb):
        return tg.nn.functional.cross_entropy(net(xb), yb)

    grad_fn = tg.grad(loss_fn, grad_position=None, weights=net.trainable_params())
    for step in range(start, stop):
        idx = np.random.default_rng(step).choice(len(x), train_digits.BATCH_SIZE, replace=False)
        optimizer.step(grad_fn(x[idx], y[idx]))


def states(net, optimizer) -> dict:
    return {**{f"model.{k}": np.array(v) for k, v in net.state_dict().items()},
            **{f"optimizer.{k}": np.array(v) for k, v in optimizer.state_dict().items()}}


def test_fifty_plus_fifty_steps_in_a_new_process_equal_a_hundred(tmp_path):
    net, opt = build()
    train(net, opt, 0, STEPS)
    tg.save_checkpoint({"model": net, "optimizer": opt}, tmp_path / "half.safetensors")

    child = textwrap.dedent(f"""
        import sys
        sys.path[:0] = [{str(TESTS)!r}, {str(EXAMPLES)!r}]
        import tapegrad as tg
        from test_resume import build, train
        net, opt = build(seed=123)  # other initial weights: everything must come from the checkpoint
        tg.load_checkpoint({str(tmp_path / "half.safetensors")!r}, {{"model": net, "optimizer": opt}})
        train(net, opt, {STEPS}, {2 * STEPS})
        tg.save_checkpoint({{"model": net, "optimizer": opt}}, {str(tmp_path / "resumed.safetensors")!r})
    """)
    proc = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    resumed = tg.load_checkpoint(tmp_path / "resumed.safetensors")

    straight, straight_opt = build()
    train(straight, straight_opt, 0, 2 * STEPS)
    want = states(straight, straight_opt)
    assert sorted(resumed) == sorted(want)
    for key in want:
        assert resumed[key].dtype == want[key].dtype and np.array_equal(resumed[key], want[key]), key
    assert int(resumed["optimizer.adam.step"]) == 2 * STEPS

    # the check can fail: resuming the weights without Adam's moments ends elsewhere
    weights_only, fresh_opt = build(seed=123)
    weights_only.load_state_dict(tg.load(tmp_path / "half.safetensors")["model"])
    train(weights_only, fresh_opt, STEPS, 2 * STEPS)
    assert not np.array_equal(np.asarray(weights_only.fc1.weight), want["model.fc1.weight"])


def test_the_digits_example_saves_and_resumes(tmp_path, monkeypatch, capsys):
    """``examples/train_digits.py --save`` then ``--resume --save``: the second run starts from the first's
    model and Adam state (its accuracy and step count) and trains on."""
    epochs = 7  # the fewest that pass the script's own check (>= 0.95): 0.958 after 7 epochs, 0.942 after 6
    monkeypatch.setattr(train_digits, "EPOCHS", epochs)
    monkeypatch.setattr(train_digits, "OUTPUT_DIR", tmp_path)
    ckpt = str(tmp_path / "digits.safetensors")
    train_digits.main(["--save", ckpt])
    first = capsys.readouterr().out
    accuracy = re.search(r"final held-out accuracy: ([0-9.]+)", first).group(1)
    steps = epochs * -(-1437 // train_digits.BATCH_SIZE)  # 1437 training images, batches of 32
    assert f"saved model and optimizer to {ckpt}" in first
    assert int(tg.load_checkpoint(ckpt)["optimizer.adam.step"]) == steps

    train_digits.main(["--resume", ckpt, "--save", ckpt])
    second = capsys.readouterr().out
    assert f"resumed model and optimizer from {ckpt} (held-out accuracy {accuracy}, Adam step {steps})" in second
    assert int(tg.load_checkpoint(ckpt)["optimizer.adam.step"]) == 2 * steps
    first_loss, second_loss = (float(re.search(r"epoch  1: train loss ([0-9.]+)", out).group(1))
                               for out in (first, second))
    assert second_loss < first_loss / 2  # it went on from the trained model, not from scratch


def train_jitted(net, optimizer, start: int, stop: int) -> None:
    """:func:`train`'s steps with the whole step (gradient and optimiser update) under ``tg.jit``."""
    x, _, y, _ = train_digits.load_data()
    grad_fn = tg.grad(lambda xb, yb: tg.nn.functional.cross_entropy(net(xb), yb), grad_position=None,
                      weights=net.trainable_params())
    step = tg.jit(lambda xb, yb: optimizer.step(grad_fn(xb, yb)))
    for i in range(start, stop):
        idx = np.random.default_rng(i).choice(len(x), train_digits.BATCH_SIZE, replace=False)
        step(x[idx], y[idx])


@pytest.mark.parametrize("make_optimizer", [
    lambda params: tg.optim.Adam(params, lr=train_digits.LEARNING_RATE),
    lambda params: tg.optim.SGD(params, lr=0.05, momentum=0.9),
], ids=["adam", "sgd-momentum"])
def test_a_jitted_loop_resumes_bit_for_bit(tmp_path, make_optimizer):
    """50 jitted steps, a checkpoint loaded into fresh objects, 50 more: the same state, bit for bit, as
    100 jitted steps in one go. (Before jit wrote its state back in C order, Adam's weights and second
    moments came back in Fortran order, the transposed layout of their gradients, while a load makes
    them C-ordered: the next matmuls rounded differently, 1.2e-7 apart in float32 after 50 steps.)"""
    def fresh(seed):
        net = train_digits.MLP(seed=seed)
        return net, make_optimizer(net.trainable_params())

    net, opt = fresh(train_digits.SEED)
    train_jitted(net, opt, 0, STEPS)
    tg.save_checkpoint({"model": net, "optimizer": opt}, tmp_path / "half.safetensors")
    resumed, resumed_opt = fresh(123)
    tg.load_checkpoint(tmp_path / "half.safetensors", {"model": resumed, "optimizer": resumed_opt})
    train_jitted(resumed, resumed_opt, STEPS, 2 * STEPS)

    straight, straight_opt = fresh(train_digits.SEED)
    train_jitted(straight, straight_opt, 0, 2 * STEPS)
    got, want = states(resumed, resumed_opt), states(straight, straight_opt)
    assert sorted(got) == sorted(want)
    for key in want:
        assert got[key].dtype == want[key].dtype and np.array_equal(got[key], want[key]), key
