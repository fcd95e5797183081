"""Modules and jit: a mode change restages only the programs that read the module's flag; Parameters
are named when assigned to a module, and listing them changes nothing."""
from __future__ import annotations

import copy
import gc
import pickle

import numpy as np
import pytest

import tapegrad as tg
from _tol import assert_close
from tapegrad import nn


class Net(nn.Module):
    """Dense, then BatchNorm, then Dropout: a forward whose program depends on ``training``."""

    def __init__(self, seed: int):
        super().__init__()
        self.fc = nn.Dense(3, 4, seed=seed, dtype=np.float64)
        self.norm = nn.BatchNorm1d(4, dtype=np.float64)
        self.drop = nn.Dropout(0.5, seed=seed)

    def __call__(self, x):
        return self.drop(self.norm(self.fc(x)))


def _counting(fn):
    """``jit(fn)`` and the list of the staging calls (the Python body runs only when it stages)."""
    stagings = []

    def body(*args):
        stagings.append(None)
        return fn(*args)
    return tg.jit(body), stagings


X = np.random.default_rng(0).standard_normal((5, 3))


def test_mode_change_of_one_net_does_not_restage_another():
    a, b = Net(0), Net(1)
    step_a, staged_a = _counting(lambda x: a(x))
    step_b, staged_b = _counting(lambda x: b(x))
    plain, staged_plain = _counting(lambda x: x * 2.0)
    for _ in range(2):
        step_a(X), step_b(X), plain(X)
    assert len(staged_a) == len(staged_b) == len(staged_plain) == 1
    a.eval()
    step_b(X), plain(X)
    assert len(staged_b) == len(staged_plain) == 1  # they never read a's flags
    step_a(X)
    assert len(staged_a) == 2
    a.eval()  # no change: the eval program stays
    step_a(X)
    assert len(staged_a) == 2 and step_a._cache_size() == 1  # the training program was replaced


def test_restaged_program_has_the_eval_behaviour():
    net = Net(2)
    net.norm.running_mean.assign(np.array([0.5, -1.0, 2.0, 0.0]))
    net.norm.running_var.assign(np.array([4.0, 0.25, 1.0, 9.0]))
    step = tg.jit(lambda x: net(x))
    h = X @ net.fc.weight.value.T + net.fc.bias.value
    out = step(X)  # training: batch statistics, dropout, running statistics updated
    assert np.count_nonzero(out == 0.0) > 0
    assert_close(net.norm.running_mean.value, 0.9 * np.array([0.5, -1.0, 2.0, 0.0]) + 0.1 * h.mean(0))
    assert int(net.norm.num_batches_tracked.value) == 1
    mean, var = net.norm.running_mean.value.copy(), net.norm.running_var.value.copy()
    key = net.drop.key.value.copy()

    net.eval()
    out = step(X)
    assert_close(out, (h - mean) / np.sqrt(var + 1e-5))  # running statistics, no dropout
    np.testing.assert_array_equal(net.norm.running_mean.value, mean)  # no update in eval
    np.testing.assert_array_equal(net.drop.key.value, key)  # no draw
    assert int(net.norm.num_batches_tracked.value) == 1

    net.train()
    step(X)
    assert int(net.norm.num_batches_tracked.value) == 2  # the training program again
    assert not np.array_equal(net.drop.key.value, key)


def test_mode_of_a_sub_module_only():
    net = Net(3)
    step, staged = _counting(lambda x: net(x))
    step(X)
    net.drop.eval()  # the dropout alone: batch statistics still, no mask
    out = step(X)
    assert len(staged) == 2
    h = X @ net.fc.weight.value.T + net.fc.bias.value
    assert_close(out, (h - h.mean(0)) / np.sqrt(h.var(0) + 1e-5))


def test_jitted_method_of_a_module_per_instance():
    class Model(nn.Module):
        def __init__(self, seed):
            super().__init__()
            self.drop = nn.Dropout(0.5, seed=seed)
            self.stagings = 0

        @tg.jit
        def __call__(self, x):
            self.stagings += 1
            return self.drop(x) * 3.0

    m1, m2 = Model(4), Model(5)
    x = np.ones(64)
    assert np.count_nonzero(m1(x) == 0.0) > 0 and np.count_nonzero(m2(x) == 0.0) > 0
    m1.eval()
    np.testing.assert_array_equal(m1(x), 3.0 * x)
    assert np.count_nonzero(m2(x) == 0.0) > 0
    m1(x), m2(x)
    assert (m1.stagings, m2.stagings) == (2, 1)


def test_nested_jit_restages_the_outer_program():
    """The outer program builds in the inner one: it depends on what the inner staging read."""
    drop = nn.Dropout(0.5, seed=6)
    inner = tg.jit(lambda x: drop(x))
    outer, staged = _counting(lambda x: inner(x) + 1.0)
    x = np.ones(64)
    assert np.count_nonzero(outer(x) == 1.0) > 0
    drop.eval()
    np.testing.assert_array_equal(outer(x), x + 1.0)
    assert len(staged) == 2
    # the inner program already cached when the outer one stages: its flags are recorded too
    drop.train()
    inner(x)
    outer2, staged2 = _counting(lambda x: inner(x) * 2.0)
    outer2(x)
    drop.eval()
    np.testing.assert_array_equal(outer2(x), 2.0 * x)
    assert len(staged2) == 2


def test_program_method_follows_the_mode():
    drop = nn.Dropout(0.5, seed=7)
    step = tg.jit(lambda x: drop(x))
    x = np.ones(8)
    step(x)
    assert "uniform" in str(step.program(x))
    drop.eval()
    assert "uniform" not in str(step.program(x))


def test_a_module_that_is_gone_makes_its_programs_stale():
    """A function that finds its module through a holder: once the module it read is collected, the
    program is staged again with the module it finds then."""
    holder = [nn.Dropout(0.5, seed=8)]
    step, staged = _counting(lambda x: holder[0](x))
    x = np.ones(64)
    assert np.count_nonzero(step(x) == 0.0) > 0
    holder[0] = nn.Dropout(0.0)  # the identity, in training mode: no mode changed anywhere
    gc.collect()
    np.testing.assert_array_equal(step(x), x)
    assert len(staged) == 2


def test_exceptions_leave_modes_and_staging_intact():
    net = Net(9)
    with pytest.raises(ValueError, match="truth value"):
        net.train(np.ones(2))  # not a truth value: nothing changed
    assert all(m.training for m in net.modules())

    def failing(x):
        net(x)
        raise RuntimeError("boom")
    jf = tg.jit(failing)
    with pytest.raises(RuntimeError, match="boom"):
        jf(X)
    assert jf._cache_size() == 0
    assert net.training is True  # a read outside staging records nothing and returns the flag
    step = tg.jit(lambda x: net(x))
    net.eval()
    h = X @ net.fc.weight.value.T + net.fc.bias.value
    assert_close(step(X), h / np.sqrt(1.0 + 1e-5))  # initial running statistics: mean 0, var 1


def test_a_subclass_default_mode_is_still_a_flag():
    class StartsInEval(nn.Module):
        training = False  # no super().__init__(): the class default is the mode

        def __init__(self):
            self.drop = nn.Dropout(0.5, seed=10)

        def __call__(self, x):
            return self.drop(x) if self.training else x * 2.0

    net = StartsInEval()
    step, staged = _counting(lambda x: net(x))
    x = np.ones(64)
    np.testing.assert_array_equal(step(x), 2.0 * x)
    net.train()
    assert np.count_nonzero(step(x) == 0.0) > 0 and len(staged) == 2


# ---- names --------------------------------------------------------------------------------------
class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Dense(2, 3, seed=0)
        self.inner = nn.Sequential(nn.Dense(3, 3, seed=1), nn.ReLU())
        self.gain = tg.Parameter(np.ones(3), name="gain!")
        self.frozen = tg.Parameter(np.zeros(3), requires_grad=False)


def _state(params):
    return [(p.name, p.name_owner, p.requires_grad, id(p.value)) for p in params]


NAMES = ["fc1.weight", "fc1.bias", "inner.layers.0.weight", "inner.layers.0.bias", "gain!"]


def test_names_are_given_at_assignment():
    block = Block()
    assert block.fc1.weight.name == "fc1.weight"  # before any listing
    assert block.inner[0].bias.name == "inner.layers.0.bias"
    assert block.frozen.name == "frozen" and block.gain.name == "gain!"
    assert block.fc1.weight.name_owner is block and block.gain.name_owner is None
    standalone = tg.Parameter(np.ones(2))
    assert standalone.name.startswith("param") and standalone.name_owner is None


def test_trainable_params_changes_nothing_whatever_the_order():
    block = Block()
    everything = block.parameters()
    before = _state(everything)
    sub = block.inner.trainable_params()  # a sub-module first: the names stay those of the block
    assert [p.name for p in sub] == NAMES[2:4]
    assert [path for path, _ in block.inner.named_parameters()] == ["layers.0.weight", "layers.0.bias"]
    first, second = block.trainable_params(), block.trainable_params()
    assert [p.name for p in first] == [p.name for p in second] == NAMES
    assert all(p is q for p, q in zip(first, second))
    assert repr(first) == f"ParameterTuple({', '.join(NAMES)})"
    block.fc1.untrainable_params(), block.named_modules(), block.eval(), block.train()
    assert _state(everything) == before


def test_placing_a_module_prefixes_and_a_second_place_keeps_the_names():
    block = Block()

    class Outer(nn.Module):
        def __init__(self):
            super().__init__()
            self.body = block

    Outer()
    assert [p.name for p in block.trainable_params()] == ["body." + n for n in NAMES[:4]] + ["gain!"]
    seq = nn.Sequential(nn.Dense(2, 2, seed=0), nn.Dense(2, 2, seed=1))
    tail = seq[1:]  # a new Sequential sharing the layers: it names nothing
    assert [p.name for p in tail.trainable_params()] == ["layers.1.weight", "layers.1.bias"]
    assert [path for path, _ in tail.named_parameters()] == ["layers.0.weight", "layers.0.bias"]
    seq.append(nn.Dense(2, 2, seed=2))
    assert seq[2].weight.name == "layers.2.weight"


def test_shared_parameter_is_named_after_its_first_path():
    shared = nn.Dense(2, 2, seed=0)

    class Twice(nn.Module):
        def __init__(self):
            super().__init__()
            self.a = shared
            self.b = shared

    net = Twice()
    assert net.trainable_params() == (shared.weight, shared.bias)
    assert [p.name for p in net.trainable_params()] == ["a.weight", "a.bias"]


def test_names_serve_return_ids_get_grad_and_the_optimiser():
    block = Block()
    x = np.random.default_rng(1).standard_normal((4, 2))
    loss = lambda x: (block.inner(block.fc1(x)) * block.gain).sum()  # noqa: E731
    grads = tg.grad(loss, grad_position=None, weights=block.trainable_params(), return_ids=True)(x)
    assert [name for name, _ in grads] == NAMES
    g = tg.get_grad(grads, block.fc1.bias)
    expected = tg.grad(loss, grad_position=None, weights=block.fc1.bias)(x)
    assert_close(g, expected)
    opt = tg.optim.Adam(block.trainable_params())
    assert opt.state_params.exp_avg[0].name == "adam.exp_avg.fc1.weight"


def test_copies_keep_the_names():
    block = Block()
    for twin in (copy.deepcopy(block), pickle.loads(pickle.dumps(block))):
        assert [p.name for p in twin.trainable_params()] == NAMES
        assert twin.fc1.weight is not block.fc1.weight and twin.fc1.weight.name_owner is None
        assert twin.training is True


def test_a_list_that_holds_itself_is_walked_once():
    net = nn.Module()
    loop = [nn.Dense(2, 2, seed=0)]
    loop.append(loop)
    net.blocks = loop
    assert [p.name for p in net.trainable_params()] == ["blocks.0.weight", "blocks.0.bias"]
    assert len(net.modules()) == 2
