"""Embedding (functional and module: lookup values and gradients against PyTorch, the padding row,
initialisation, derivatives to order 2, vmap against a loop, jit against eager, errors) and Flatten."""
from __future__ import annotations

import numpy as np
import pytest

import tapegrad as tg
import tapegrad.numpy as tnp
from _tol import assert_close
from _vmapcheck import check_vmap, check_vmap_mixes
from tapegrad.nn._norm import embedding
from tapegrad.nn.layers import Embedding, Flatten
from tapegrad.testing import check_grads

INDEX_SHAPES = [(), (5,), (2, 3), (2, 1, 4)]


def _rng(seed=0):
    return np.random.default_rng(seed)


# ---- embedding -----------------------------------------------------------------------------------
@pytest.mark.peer("torch")
@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("shape", INDEX_SHAPES, ids=str)
@pytest.mark.parametrize("padding_idx", [None, 2, -1])
def test_embedding_matches_torch(shape, dtype, padding_idx):
    import torch
    rng = _rng(1)
    weight = rng.standard_normal((6, 3)).astype(dtype)
    idx = rng.integers(0, 6, shape)
    idx.flat[:1] = 2 if idx.size else idx.flat[:1]  # the padding row is looked up at least once
    ct = rng.standard_normal(shape + (3,)).astype(dtype)
    out, grad = tg.value_and_grad(lambda w: tnp.sum(embedding(idx, w, padding_idx) * ct))(weight)
    tw = torch.tensor(weight, requires_grad=True)
    ref = torch.nn.functional.embedding(torch.tensor(idx), tw, padding_idx=padding_idx)
    (ref * torch.tensor(ct)).sum().backward()
    np.testing.assert_array_equal(embedding(idx, weight, padding_idx), ref.detach().numpy())
    assert embedding(idx, weight).dtype == dtype and embedding(idx, weight).shape == shape + (3,)
    assert_close(grad, tw.grad.numpy(), rtol=1e-6, atol=1e-6)
    assert grad.dtype == dtype
    if padding_idx is not None:
        np.testing.assert_array_equal(grad[padding_idx % 6], 0.0)


def test_embedding_grads():
    rng = _rng(2)
    weight = rng.standard_normal((4, 2))
    idx = np.array([[0, 3, 3], [1, 0, 2]])
    check_grads(lambda w: embedding(idx, w), (weight,), order=2)
    # with a padding row the derivative deliberately ignores that row: so keep it a constant, and the
    # finite differences of the other rows see the true derivative
    pad_row = weight[3:]
    check_grads(lambda rows: embedding(idx, tnp.concatenate([rows, pad_row]), padding_idx=3) ** 2,
                (weight[:3],), order=2)


def test_embedding_vmap():
    rng = _rng(3)
    weight = rng.standard_normal((5, 3))
    idx = np.array([[0, 4], [2, 2]])
    draw = lambda r: (r.integers(0, 5, idx.shape), r.standard_normal(weight.shape))
    check_vmap_mixes(lambda i, w: embedding(i, w, padding_idx=1), (idx, weight), draw=draw)
    per_example = tg.grad(lambda i, w: tnp.sum(embedding(i, w, padding_idx=0) ** 2), grad_position=1)
    check_vmap(per_example, (idx, weight), in_axes=(0, None), draw=draw)


def test_embedding_jit_equals_eager():
    rng = _rng(4)
    weight = rng.standard_normal((5, 3)).astype(np.float32)
    idx = np.array([[0, 4, 1], [2, 2, 4]])
    f = lambda i, w: tnp.sum(embedding(i, w, padding_idx=4) ** 3)
    np.testing.assert_array_equal(tg.jit(embedding)(idx, weight), embedding(idx, weight))
    assert_close(tg.jit(tg.grad(f, grad_position=1))(idx, weight),
                 tg.grad(f, grad_position=1)(idx, weight), rtol=1e-6)


def test_embedding_errors():
    weight = np.ones((4, 2))
    cases = [
        (IndexError, r"\[0, 4\).*\[0, 4\]", lambda: embedding(np.array([0, 4]), weight)),
        (IndexError, r"\[-1, 2\]", lambda: embedding(np.array([-1, 2]), weight)),
        (TypeError, "integer indices", lambda: embedding(np.array([0.0, 1.0]), weight)),
        (ValueError, "weight must have shape", lambda: embedding(np.array([0]), np.ones(4))),
        (ValueError, "padding_idx must lie in", lambda: embedding(np.array([0]), weight, padding_idx=4)),
        (TypeError, "padding_idx must be an int", lambda: embedding(np.array([0]), weight, padding_idx=1.0)),
        (IndexError, r"\[0, 3\)", lambda: Embedding(3, 2)(np.array([[3]]))),
        (ValueError, "padding_idx must lie in", lambda: Embedding(3, 2, padding_idx=-4)),
        (TypeError, "num_embeddings must be an int", lambda: Embedding(3.0, 2)),
        (ValueError, "embedding_dim must be positive", lambda: Embedding(3, 0)),
        (ValueError, "has shape \\(2, 2\\)", lambda: Embedding(3, 2, weight_init=np.ones((2, 2)))),
    ]
    for exc, match, call in cases:
        with pytest.raises(exc, match=match):
            call()


def test_embedding_module():
    emb = Embedding(1000, 64, seed=0)
    w = np.asarray(emb.weight)
    assert w.shape == (1000, 64) and w.dtype == np.float32
    assert abs(w.mean()) < 0.01 and abs(w.std() - 1.0) < 0.01  # N(0, 1), PyTorch's default
    np.testing.assert_array_equal(np.asarray(Embedding(1000, 64, seed=0).weight), w)
    idx = np.array([[1, 2], [999, 0]])
    np.testing.assert_array_equal(emb(idx), w[idx])
    assert [p.name for p in emb.trainable_params()] == ["weight"]
    assert repr(emb) == "Embedding(1000, 64)"

    padded = Embedding(10, 4, padding_idx=-2, dtype=np.float64, seed=1)
    assert padded.padding_idx == 8 and repr(padded) == "Embedding(10, 4, padding_idx=8)"
    np.testing.assert_array_equal(np.asarray(padded.weight)[8], 0.0)
    assert np.all(np.asarray(padded.weight)[:8] != 0.0)
    grad = tg.grad(lambda x: tnp.sum(padded(x) ** 2), grad_position=None,
                   weights=padded.trainable_params())(np.array([8, 8, 1]))[0]
    np.testing.assert_array_equal(grad[8], 0.0)
    assert np.all(grad[1] != 0.0)

    table = np.arange(12.0).reshape(6, 2)
    given = Embedding(6, 2, padding_idx=0, weight_init=table)  # an explicit array is kept as it is
    np.testing.assert_array_equal(np.asarray(given.weight), table.astype(np.float32))
    assert not np.shares_memory(np.asarray(given.weight), table)
    np.testing.assert_array_equal(np.asarray(Embedding(6, 2, padding_idx=0, weight_init=0.5).weight)[0], 0.0)


# ---- Flatten -------------------------------------------------------------------------------------
@pytest.mark.peer("torch")
@pytest.mark.parametrize("shape, start, end", [((2, 3, 4, 5), 1, -1), ((2, 3, 4, 5), 0, -1), ((2, 3, 4, 5), 1, 2),
                                               ((2, 3, 4, 5), -3, -2), ((2, 3, 4, 5), 2, 2), ((2, 3), 1, -1),
                                               ((4,), 0, -1), ((), 0, -1), ((2, 0, 3), 1, -1)], ids=str)
def test_flatten_matches_torch(shape, start, end):
    import torch
    x = np.arange(float(np.prod(shape))).reshape(shape)
    layer = Flatten(start, end)
    out = layer(x)
    ref = torch.nn.Flatten(start, end)(torch.tensor(x)).numpy()
    assert out.shape == ref.shape
    np.testing.assert_array_equal(out, ref)
    grad = tg.grad(lambda x: tnp.sum(layer(x) ** 2))(x)
    np.testing.assert_array_equal(grad, 2.0 * x)


def test_flatten_transforms():
    x = _rng(5).standard_normal((2, 3, 4)).astype(np.float32)
    layer = Flatten()
    check_vmap(layer, (x,), in_axes=0)  # each example (2, 3, 4) becomes (2, 12), as in the loop
    check_vmap(Flatten(0), (x,), in_axes=-1)
    np.testing.assert_array_equal(tg.jit(layer)(x), layer(x))
    check_grads(lambda x: Flatten(0, 1)(x) ** 2, (x.astype(np.float64),), order=2)
    assert repr(layer) == "Flatten(start_dim=1, end_dim=-1)" and layer.trainable_params() == ()


def test_flatten_errors():
    with pytest.raises(np.exceptions.AxisError, match="start_dim=3 is out of range"):
        Flatten(3)(np.ones((2, 3)))
    with pytest.raises(IndexError, match="end_dim=-4"):
        Flatten(0, -4)(np.ones((2, 3, 4)))
    with pytest.raises(ValueError, match="comes after end_dim"):
        Flatten(2, 1)(np.ones((2, 3, 4)))
    with pytest.raises(np.exceptions.AxisError, match="start_dim=1"):
        Flatten()(np.ones(()))
    with pytest.raises(TypeError, match="start_dim must be an int"):
        Flatten(1.0)
