"""tg.optim.clip_grad_norm / clip_grad_value: PyTorch's formulas (``clip_grad_norm_``, ``clip_grad_value_``)
against a NumPy reference and against torch where installed; under jit and vmap (per-example clipping);
differentiable; non-finite norms as PyTorch's ``error_if_nonfinite=False``."""
from __future__ import annotations

import numpy as np
import pytest

import tapegrad as tg
import tapegrad.numpy as tnp
from _tol import assert_close
from tapegrad import optim
from tapegrad.testing import check_grads

try:
    import torch
except ImportError:  # the NumPy reference still runs
    torch = None

INF = float("inf")


def np_clip_grad_norm(grads, max_norm, norm_type=2.0):
    """PyTorch's documented formula: the norm of the per-tensor norms, coef = min(1, max / (norm + 1e-6))."""
    if norm_type == INF:
        total = max(np.max(np.abs(g)) for g in grads)
    else:
        total = sum(np.sum(np.abs(g) ** norm_type) for g in grads) ** (1.0 / norm_type)
    coef = min(1.0, max_norm / (total + 1e-6))
    return [g * coef for g in grads], total


def _grads(seed=0, dtype=np.float64):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(s).astype(dtype) for s in [(3, 4), (5,), ()]]


CASES = [(0.5, 2.0), (100.0, 2.0), (1.0, 1.0), (0.3, INF), (2.0, 3.0), (0.0, 2.0)]


@pytest.mark.parametrize("max_norm, norm_type", CASES)
def test_clip_grad_norm_matches_reference(max_norm, norm_type):
    grads = _grads()
    got, total = optim.clip_grad_norm(tuple(grads), max_norm, norm_type)
    want, want_total = np_clip_grad_norm(grads, max_norm, norm_type)
    assert isinstance(got, tuple) and type(total) is np.ndarray and total.shape == ()
    assert_close(total, want_total)
    for g, w in zip(got, want):
        assert type(g) is np.ndarray and g.dtype == np.float64
        assert_close(g, w)
    if max_norm < want_total:  # clipped: the new norm is max_norm (up to the 1e-6 guard)
        assert_close(optim.clip_grad_norm(got, 1e9, norm_type)[1], max_norm, rtol=1e-5)


@pytest.mark.peer("torch")
@pytest.mark.parametrize("max_norm, norm_type", CASES)
def test_clip_grad_norm_matches_torch(max_norm, norm_type):
    grads = _grads(seed=1)
    tensors = [torch.zeros(g.shape, dtype=torch.float64, requires_grad=True) for g in grads]
    for t, g in zip(tensors, grads):
        t.grad = torch.tensor(g)
    want_total = torch.nn.utils.clip_grad_norm_(tensors, max_norm, norm_type)
    got, total = optim.clip_grad_norm(grads, max_norm, norm_type)
    assert_close(total, want_total.numpy(), rtol=1e-6)
    for g, t in zip(got, tensors):
        assert_close(g, t.grad.numpy(), rtol=1e-6)


@pytest.mark.parametrize("clip_value", [0.0, 0.5, 10.0])
def test_clip_grad_value_matches_reference_and_torch(clip_value):
    grads = {"a": _grads(2)[0], "b": {"c": _grads(2)[1]}}
    got = optim.clip_grad_value(grads, clip_value)
    for g, w in zip(tg.tree.tree_leaves(got), tg.tree.tree_leaves(grads)):
        np.testing.assert_array_equal(g, np.minimum(np.maximum(w, -clip_value), clip_value))
    if torch is not None:
        tensors = [torch.zeros(w.shape, dtype=torch.float64, requires_grad=True) for w in tg.tree.tree_leaves(grads)]
        for t, w in zip(tensors, tg.tree.tree_leaves(grads)):
            t.grad = torch.tensor(w)
        torch.nn.utils.clip_grad_value_(tensors, clip_value)
        for g, t in zip(tg.tree.tree_leaves(got), tensors):
            np.testing.assert_array_equal(g, t.grad.numpy())


def test_pytree_structure_and_dtypes_are_kept():
    grads = {"w": np.ones((2, 2), np.float32), "b": [np.full(3, 2.0, np.float32), np.full((), 4.0, np.float32)]}
    got, total = optim.clip_grad_norm(grads, 1.0)
    assert tg.tree.tree_structure(got) == tg.tree.tree_structure(grads)
    assert all(g.dtype == np.float32 for g in tg.tree.tree_leaves(got)) and total.dtype == np.float32
    assert_close(total, np.sqrt(4 + 12 + 16))
    assert optim.clip_grad_norm((), 1.0)[1] == 0.0


def test_under_jit_and_per_example_under_vmap():
    grads = _grads(3)
    jitted = tg.jit(lambda g: optim.clip_grad_norm(g, 0.5))
    for got, want in zip(tg.tree.tree_leaves(jitted(grads)), tg.tree.tree_leaves(optim.clip_grad_norm(grads, 0.5))):
        assert_close(got, want)
    batch = np.random.default_rng(4).standard_normal((6, 3)) * np.arange(1, 7)[:, None]
    clipped, norms = tg.vmap(lambda g: optim.clip_grad_norm({"g": g}, 2.0))(batch)
    for i in range(6):
        want, want_norm = np_clip_grad_norm([batch[i]], 2.0)
        assert_close(clipped["g"][i], want[0])
        assert_close(norms[i], want_norm)
    values = tg.vmap(lambda g: optim.clip_grad_value(g, 1.5))(batch)
    assert_close(values, np.clip(batch, -1.5, 1.5))


def test_clipping_is_differentiable():
    rng = np.random.default_rng(5)
    g = rng.standard_normal(5) + 0.5

    def clipped_norm(g, norm_type):  # the clipped branch: coef = max / (norm + 1e-6) < 1
        out, total = optim.clip_grad_norm((g, g[:2] * 2.0), 0.5, norm_type)
        return tnp.sum(out[0] * out[1][0]) + total
    for norm_type in (2.0, 3.0):
        check_grads(lambda g, p=norm_type: clipped_norm(g, p), (g,), order=2, name=f"clip_grad_norm p={norm_type}")
    check_grads(lambda g: optim.clip_grad_value(g * 3.0, 1.0) ** 2, (rng.uniform(-0.3, 0.3, 4),), order=2)


@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")  # inf * 0, as in torch
def test_non_finite_gradients_follow_pytorch():
    grads = [np.array([1.0, INF]), np.array([2.0])]
    got, total = optim.clip_grad_norm(grads, 1.0)
    assert total == INF
    np.testing.assert_array_equal(got[1], [0.0])  # coef = 1 / inf = 0
    assert got[0][0] == 0.0 and np.isnan(got[0][1])  # inf * 0
    got, total = optim.clip_grad_norm([np.array([np.nan, 1.0])], 1.0)
    assert np.isnan(total) and np.all(np.isnan(got[0]))
    with pytest.raises(ValueError, match="total norm .* inf"):
        optim.clip_grad_norm(grads, 1.0, error_if_nonfinite=True)
    if torch is not None:
        tensors = [torch.zeros(2, dtype=torch.float64, requires_grad=True), torch.zeros(1, dtype=torch.float64,
                                                                                        requires_grad=True)]
        for t, g in zip(tensors, grads):
            t.grad = torch.tensor(g)
        assert torch.nn.utils.clip_grad_norm_(tensors, 1.0).item() == INF
        for g, t in zip(optim.clip_grad_norm(grads, 1.0)[0], tensors):
            np.testing.assert_array_equal(g, t.grad.numpy())  # NaN where torch has NaN


@pytest.mark.parametrize("call, match", [
    (lambda: optim.clip_grad_norm([np.ones(2)], -1.0), "max_norm must be >= 0"),
    (lambda: optim.clip_grad_norm([np.ones(2)], 1.0, norm_type=0.0), "norm_type must be > 0"),
    (lambda: optim.clip_grad_norm([np.ones(2)], float("nan")), "max_norm"),
    (lambda: optim.clip_grad_value([np.ones(2)], -0.5), "clip_value must be >= 0"),
])
def test_bad_arguments(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_float16_gradients_with_a_norm_past_float16s_range_are_clipped_not_zeroed():
    grads = (np.full(100_000, 300.0, np.float16),)  # global norm 94868: inf in float16
    (clipped,), norm = optim.clip_grad_norm(grads, max_norm=1.0)
    assert norm.dtype == np.float32 and np.isfinite(norm)
    assert clipped.dtype == np.float16
    assert_close(clipped.astype(np.float64), np.full(100_000, 300.0 / float(norm)), dtype=np.float16)
