"""Normalisation: batch_norm, layer_norm, group_norm (values against PyTorch and NumPy, derivatives to
order 2 in both modes, vmap against a loop, jit against eager, errors) and the BatchNorm, LayerNorm
and GroupNorm modules (running statistics after training steps equal PyTorch's, eagerly and under
jit, every transform route of the update, evaluation mode, Parameters)."""
from __future__ import annotations

import numpy as np
import pytest

import tapegrad as tg
import tapegrad.numpy as tnp
from _tol import assert_close
from _vmapcheck import check_vmap, check_vmap_mixes
from tapegrad.nn._norm import batch_norm, group_norm, layer_norm
from tapegrad.nn._norm_layers import BatchNorm1d, BatchNorm2d, BatchNorm3d, GroupNorm, LayerNorm
from tapegrad.testing import check_grads

DTYPES = [np.float64, np.float32]
TOL = {np.float32: dict(rtol=2e-5, atol=2e-5), np.float64: dict(rtol=1e-12, atol=1e-12)}
BN_SHAPES = [(4, 3), (4, 3, 5), (2, 3, 4, 5), (2, 3, 2, 3, 2)]


def _rng(seed=0):
    return np.random.default_rng(seed)


def _channel_arrays(rng, c, dtype):
    """weight, bias, running mean and (positive) running variance of ``c`` channels."""
    return (rng.standard_normal(c).astype(dtype), rng.standard_normal(c).astype(dtype),
            rng.standard_normal(c).astype(dtype), rng.uniform(0.5, 2.0, c).astype(dtype))


def _stats(c, dtype, mean=None, var=None):
    """Running statistics as Parameters (what training-mode batch_norm updates)."""
    mean = np.zeros(c, dtype) if mean is None else mean.copy()
    var = np.ones(c, dtype) if var is None else var.copy()
    return tg.Parameter(mean, requires_grad=False), tg.Parameter(var, requires_grad=False)


# ---- NumPy references ----------------------------------------------------------------------------
def _np_batch_norm(x, mean, var, w, b, eps=1e-5):
    view = (-1,) + (1,) * (x.ndim - 2)
    return (x - mean.reshape(view)) / np.sqrt(var.reshape(view) + eps) * w.reshape(view) + b.reshape(view)


def _np_layer_norm(x, k, w, b, eps=1e-5):
    axes = tuple(range(x.ndim - k, x.ndim))
    mean, var = x.mean(axes, keepdims=True), x.var(axes, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * w + b


def _np_group_norm(x, g, w, b, eps=1e-5):
    grouped = x.reshape(x.shape[0], g, -1)
    normed = ((grouped - grouped.mean(-1, keepdims=True)) / np.sqrt(grouped.var(-1, keepdims=True) + eps))
    view = (-1,) + (1,) * (x.ndim - 2)
    return normed.reshape(x.shape) * w.reshape(view) + b.reshape(view)


# ---- values against PyTorch ----------------------------------------------------------------------
@pytest.mark.peer("torch")
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("shape", BN_SHAPES, ids=str)
@pytest.mark.parametrize("training", [True, False], ids=["train", "eval"])
@pytest.mark.parametrize("affine", [True, False], ids=["affine", "plain"])
def test_batch_norm_matches_torch(shape, dtype, training, affine):
    import torch
    rng = _rng(1)
    x = (3.0 + 2.0 * rng.standard_normal(shape)).astype(dtype)
    w, b, rm, rv = _channel_arrays(rng, shape[1], dtype)
    w, b = (w, b) if affine else (None, None)
    t = lambda a: None if a is None else torch.tensor(a)
    trm, trv = t(rm), t(rv)
    ref = torch.nn.functional.batch_norm(t(x), trm, trv, t(w), t(b), training=training, momentum=0.3,
                                         eps=1e-3)
    prm, prv = _stats(shape[1], dtype, rm, rv)
    out = batch_norm(x, prm, prv, w, b, training=training, momentum=0.3, eps=1e-3)
    assert out.dtype == dtype and out.shape == shape
    assert_close(out, ref.numpy(), **TOL[dtype])
    assert_close(prm.value, trm.numpy(), **TOL[dtype])
    assert_close(prv.value, trv.numpy(), **TOL[dtype])
    assert prm.value.dtype == dtype and prv.value.dtype == dtype


def test_batch_norm_values_against_numpy():
    rng = _rng(2)
    x = rng.standard_normal((5, 3, 4))
    w, b, rm, rv = _channel_arrays(rng, 3, np.float64)
    assert_close(batch_norm(x, rm, rv, w, b), _np_batch_norm(x, rm, rv, w, b), rtol=1e-12)
    out = batch_norm(x, None, None, w, b, training=True)
    ref = _np_batch_norm(x, x.mean((0, 2)), x.var((0, 2)), w, b)
    assert_close(out, ref, rtol=1e-12, atol=1e-12)


def test_batch_norm_running_update_is_pytorchs_formula():
    rng = _rng(3)
    x = rng.standard_normal((6, 2, 3))
    rm, rv = _stats(2, np.float64, np.array([1.0, -1.0]), np.array([2.0, 0.5]))
    batch_norm(x, rm, rv, training=True, momentum=0.25)
    assert_close(rm.value, 0.75 * np.array([1.0, -1.0]) + 0.25 * x.mean((0, 2)), rtol=1e-14)
    unbiased = x.var((0, 2), ddof=1)  # the running variance takes the unbiased batch variance
    assert_close(rv.value, 0.75 * np.array([2.0, 0.5]) + 0.25 * unbiased, rtol=1e-14)


@pytest.mark.peer("torch")
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("shape, normalized_shape", [((4, 5), 5), ((2, 3, 4), (3, 4)), ((2, 3, 4), (4,)),
                                                     ((5,), (5,))], ids=str)
@pytest.mark.parametrize("affine", [True, False], ids=["affine", "plain"])
def test_layer_norm_matches_torch(shape, normalized_shape, dtype, affine):
    import torch
    rng = _rng(4)
    x = (1.0 + rng.standard_normal(shape)).astype(dtype)
    dims = (normalized_shape,) if isinstance(normalized_shape, int) else normalized_shape
    w = rng.standard_normal(dims).astype(dtype) if affine else None
    b = rng.standard_normal(dims).astype(dtype) if affine else None
    t = lambda a: None if a is None else torch.tensor(a)
    ref = torch.nn.functional.layer_norm(t(x), dims, t(w), t(b), eps=1e-4)
    out = layer_norm(x, normalized_shape, w, b, eps=1e-4)
    assert out.dtype == dtype
    assert_close(out, ref.numpy(), **TOL[dtype])


@pytest.mark.peer("torch")
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("shape, groups", [((2, 6, 4), 1), ((2, 6, 4), 2), ((2, 6, 4), 3), ((2, 6, 4), 6),
                                           ((2, 4, 3, 3), 2), ((3, 4), 2)], ids=str)
def test_group_norm_matches_torch(shape, groups, dtype):
    import torch
    rng = _rng(5)
    x = rng.standard_normal(shape).astype(dtype)
    w, b = rng.standard_normal(shape[1]).astype(dtype), rng.standard_normal(shape[1]).astype(dtype)
    ref = torch.nn.functional.group_norm(torch.tensor(x), groups, torch.tensor(w), torch.tensor(b), eps=1e-4)
    out = group_norm(x, groups, w, b, eps=1e-4)
    assert out.dtype == dtype
    assert_close(out, ref.numpy(), **TOL[dtype])
    assert_close(group_norm(x, groups), _np_group_norm(x, groups, np.ones(shape[1]),
                                                                     np.zeros(shape[1]), 1e-5),
                 **TOL[dtype])


def test_float32_gradients_stay_float32():
    rng = _rng(6)
    x = rng.standard_normal((4, 3, 2)).astype(np.float32)
    w, b, rm, rv = _channel_arrays(rng, 3, np.float32)
    fns = [lambda x, w, b: batch_norm(x, None, None, w, b, training=True),
           lambda x, w, b: batch_norm(x, rm, rv, w, b),
           lambda x, w, b: layer_norm(x, 2, w[:2], b[:2]),
           lambda x, w, b: group_norm(x, 3, w, b)]
    for fn in fns:
        grads = tg.grad(lambda *a, fn=fn: tnp.sum(fn(*a) ** 2), grad_position=(0, 1, 2))(x, w, b)
        assert [g.dtype for g in grads] == [np.float32] * 3


@pytest.mark.peer("torch")
def test_batch_norm_gradients_match_torch():
    import torch
    rng = _rng(7)
    x = rng.standard_normal((3, 2, 4))
    w, b, _, _ = _channel_arrays(rng, 2, np.float64)
    ct = rng.standard_normal(x.shape)
    grads = tg.grad(lambda x, w, b: tnp.sum(batch_norm(x, None, None, w, b, training=True) ** 3 * ct),
                    grad_position=(0, 1, 2))(x, w, b)
    tx, tw, tb = (torch.tensor(a, requires_grad=True) for a in (x, w, b))
    (torch.nn.functional.batch_norm(tx, None, None, tw, tb, training=True) ** 3 * torch.tensor(ct)).sum().backward()
    for g, t in zip(grads, (tx, tw, tb)):
        assert_close(g, t.grad.numpy(), rtol=1e-10, atol=1e-12)


# ---- derivatives to order 2 ----------------------------------------------------------------------
def test_batch_norm_training_grads():
    rng = _rng(8)
    x = rng.standard_normal((3, 2, 2))
    w, b, _, _ = _channel_arrays(rng, 2, np.float64)
    check_grads(lambda x, w, b: batch_norm(x, None, None, w, b, training=True), (x, w, b), order=2)
    check_grads(lambda x: batch_norm(x, None, None, training=True, eps=0.1), (x,), order=2)


def test_batch_norm_inference_grads():
    rng = _rng(9)
    x = rng.standard_normal((3, 2, 2))
    w, b, rm, rv = _channel_arrays(rng, 2, np.float64)
    check_grads(lambda x, rm, rv, w, b: batch_norm(x, rm, rv, w, b), (x, rm, rv, w, b), order=2)


def test_layer_norm_grads():
    rng = _rng(10)
    x = rng.standard_normal((2, 2, 3))
    w, b = rng.standard_normal((2, 3)), rng.standard_normal((2, 3))
    check_grads(lambda x, w, b: layer_norm(x, (2, 3), w, b), (x, w, b), order=2)
    check_grads(lambda x: layer_norm(x, 3), (x,), order=2)


def test_group_norm_grads():
    rng = _rng(11)
    x = rng.standard_normal((2, 4, 2))
    w, b = rng.standard_normal(4), rng.standard_normal(4)
    check_grads(lambda x, w, b: group_norm(x, 2, w, b), (x, w, b), order=2)


# ---- vmap against a loop -------------------------------------------------------------------------
def test_batch_norm_inference_vmap():
    rng = _rng(12)
    x = rng.standard_normal((3, 2, 4))
    w, b, rm, rv = _channel_arrays(rng, 2, np.float64)
    check_vmap_mixes(batch_norm, (x, rm, rv, w, b), slack=10.0)


def test_batch_norm_training_vmap_without_running_stats():
    rng = _rng(13)
    x = rng.standard_normal((3, 2, 4))
    w, b, _, _ = _channel_arrays(rng, 2, np.float64)
    check_vmap_mixes(lambda x, w, b: batch_norm(x, None, None, w, b, training=True), (x, w, b), slack=10.0)


def test_layer_and_group_norm_vmap():
    rng = _rng(14)
    x = rng.standard_normal((3, 4, 2))
    w, b = rng.standard_normal((4, 2)), rng.standard_normal((4, 2))
    check_vmap_mixes(lambda x, w, b: layer_norm(x, (4, 2), w, b), (x, w, b), slack=10.0)
    w, b = rng.standard_normal(4), rng.standard_normal(4)
    check_vmap_mixes(lambda x, w, b: group_norm(x, 2, w, b), (x, w, b), slack=10.0)


def test_vmap_of_grad_of_layer_norm():
    rng = _rng(15)
    x = rng.standard_normal((2, 5))
    w = rng.standard_normal(5)
    per_example = tg.grad(lambda x, w: tnp.sum(layer_norm(x, 5, w) ** 3), grad_position=1)
    check_vmap(per_example, (x, w), in_axes=(0, None), slack=10.0)


# ---- jit equals eager ----------------------------------------------------------------------------
def test_jit_equals_eager():
    rng = _rng(16)
    x = rng.standard_normal((4, 6, 3)).astype(np.float32)
    w, b, rm, rv = _channel_arrays(rng, 6, np.float32)
    fns = [lambda x, w, b: batch_norm(x, rm, rv, w, b),
           lambda x, w, b: batch_norm(x, None, None, w, b, training=True),
           lambda x, w, b: layer_norm(x, 3, w[:3], b[:3]),
           lambda x, w, b: group_norm(x, 3, w, b)]
    for fn in fns:
        assert_close(tg.jit(fn)(x, w, b), fn(x, w, b), rtol=1e-6, atol=1e-6)
        grad = tg.grad(lambda *a, fn=fn: tnp.sum(fn(*a) ** 3), grad_position=(0, 1, 2))
        for g, ref in zip(tg.jit(grad)(x, w, b), grad(x, w, b)):
            assert_close(g, ref, rtol=1e-5, atol=1e-5)


def test_running_stats_under_jit_are_written_back_at_each_call():
    rng = _rng(17)
    xs = [rng.standard_normal((4, 2, 3)) for _ in range(3)]
    eager_stats, jit_stats = _stats(2, np.float64), _stats(2, np.float64)
    step = tg.jit(lambda x: batch_norm(x, *jit_stats, training=True))
    for x in xs:
        assert_close(step(x), batch_norm(x, *eager_stats, training=True), rtol=1e-12)
        for got, ref in zip(jit_stats, eager_stats):
            assert_close(got.value, ref.value, rtol=1e-14)


@pytest.mark.parametrize("route", ["grad", "grad_of_grad", "jvp", "hessian", "jit_of_grad", "grad_of_jit",
                                   "jit_of_jvp"])
def test_running_stats_updated_once_on_every_route(route):
    rng = _rng(18)
    x = rng.standard_normal((4, 2, 3))
    stats = _stats(2, np.float64)
    f = lambda x: tnp.sum(batch_norm(x, *stats, training=True) ** 3)
    run = {"grad": lambda: tg.grad(f)(x),
           "grad_of_grad": lambda: tg.grad(lambda x: tnp.sum(tg.grad(f)(x) ** 2))(x),
           "jvp": lambda: tg.jvp(f, (x,), (x,)),
           "hessian": lambda: tg.hessian(f)(x),
           "jit_of_grad": lambda: tg.jit(tg.grad(f))(x),
           "grad_of_jit": lambda: tg.grad(tg.jit(f))(x),
           "jit_of_jvp": lambda: tg.jit(lambda x: tg.jvp(f, (x,), (x,)))(x)}[route]
    run()
    assert_close(stats[0].value, 0.1 * x.mean((0, 2)), rtol=1e-12)
    assert_close(stats[1].value, 0.9 + 0.1 * x.var((0, 2), ddof=1), rtol=1e-12)
    assert all(type(p.value) is np.ndarray for p in stats)


def test_running_stats_refused_under_vmap():
    x = _rng(19).standard_normal((2, 4, 2, 3))
    stats = _stats(2, np.float64)
    f = lambda x: batch_norm(x, *stats, training=True)
    with pytest.raises(TypeError, match=r"net\.eval\(\)"):
        tg.vmap(f)(x)
    with pytest.raises(TypeError, match=r"net\.eval\(\)"):
        tg.jit(tg.vmap(f))(x)
    with pytest.raises(TypeError):  # jit's own write-back refuses the batched value
        tg.vmap(tg.jit(f))(x)
    np.testing.assert_array_equal(stats[0].value, np.zeros(2))  # untouched


# ---- errors --------------------------------------------------------------------------------------
def test_errors():
    x = np.ones((2, 3, 4))
    c3, c4 = np.ones(3), np.ones(4)
    stats = _stats(3, np.float64)
    cases = [
        (ValueError, "weight must have shape \\(3,\\)", lambda: batch_norm(x, c3, c3, weight=c4)),
        (ValueError, "running_mean must have shape \\(3,\\)", lambda: batch_norm(x, c4, c3)),
        (ValueError, "at least 2 axes", lambda: batch_norm(np.ones(3), c3, c3)),
        (ValueError, "both must be given", lambda: batch_norm(x, None, None)),
        (ValueError, "more than one value per channel", lambda: batch_norm(np.ones((1, 3)), None, None,
                                                                           training=True)),
        (TypeError, "must be a tapegrad Parameter", lambda: batch_norm(x, c3, c3, training=True)),
        (TypeError, "momentum", lambda: batch_norm(x, *stats, training=True, momentum="0.1")),
        (ValueError, "eps", lambda: batch_norm(x, c3, c3, eps=-1.0)),
        (ValueError, "positive divisor .* C = 3", lambda: group_norm(x, 2)),
        (ValueError, "positive divisor", lambda: group_norm(x, 0)),
        (TypeError, "num_groups must be an int", lambda: group_norm(x, 1.5)),
        (ValueError, "weight must have shape \\(3,\\)", lambda: group_norm(x, 3, weight=c4)),
        (ValueError, "normalized_shape \\(3,\\)", lambda: layer_norm(x, 3)),
        (ValueError, "normalized_shape \\(2, 3, 4, 5\\)", lambda: layer_norm(x, (2, 3, 4, 5))),
        (TypeError, "normalized_shape must be an int", lambda: layer_norm(x, ())),
        (TypeError, "normalized_shape must be an int", lambda: layer_norm(x, "4")),
        (ValueError, "weight must have shape \\(4,\\)", lambda: layer_norm(x, 4, weight=c3)),
    ]
    for exc, match, call in cases:
        with pytest.raises(exc, match=match):
            call()


# ---- modules -------------------------------------------------------------------------------------
def _sgd_steps(net, torch_net, xs, lr=0.1, jit=False):
    """A few training steps of ``sum(net(x)**3 * ct)`` in both frameworks; returns the last outputs."""
    import torch
    params = net.trainable_params()
    loss = lambda x, ct: tnp.sum(net(x) ** 3 * ct)
    grad_fn = tg.value_and_grad(loss, grad_position=None, weights=params)
    grad_fn = tg.jit(grad_fn) if jit else grad_fn
    torch_params = list(torch_net.parameters())
    opt = torch.optim.SGD(torch_params, lr=lr) if torch_params else None  # it refuses an empty list
    for i, x in enumerate(xs):
        ct = np.random.default_rng(i).standard_normal(x.shape).astype(x.dtype)
        value, grads = grad_fn(x, ct)
        for p, g in zip(params, grads):
            p.assign(p.value - lr * g)
        torch_value = (torch_net(torch.tensor(x)) ** 3 * torch.tensor(ct)).sum()
        if opt is not None:
            opt.zero_grad()
            torch_value.backward()
            opt.step()
        assert_close(value, torch_value.item(), rtol=1e-4)


def _assert_same_state(net, torch_net, dtype):
    torch_state = {k: v.detach().numpy() for k, v in torch_net.state_dict().items()}
    ours = dict(net.named_parameters())
    assert set(ours) == set(torch_state)
    for name, p in ours.items():
        assert_close(np.asarray(p.value), torch_state[name], **TOL[dtype], err_msg=name)


@pytest.mark.peer("torch")
@pytest.mark.parametrize("jit", [False, True], ids=["eager", "jit"])
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("cls, shape", [(BatchNorm1d, (5, 3)), (BatchNorm1d, (4, 3, 2)),
                                        (BatchNorm2d, (2, 3, 2, 3)), (BatchNorm3d, (2, 3, 2, 1, 2))],
                         ids=lambda v: getattr(v, "__name__", str(v)))
@pytest.mark.parametrize("momentum", [0.1, None], ids=["momentum", "cumulative"])
def test_batch_norm_module_training_matches_torch(cls, shape, dtype, jit, momentum):
    import torch
    net = cls(3, momentum=momentum, dtype=dtype)
    torch_net = getattr(torch.nn, cls.__name__)(3, momentum=momentum, dtype=getattr(torch, np.dtype(dtype).name))
    rng = _rng(20)
    xs = [(2.0 + 3.0 * rng.standard_normal(shape)).astype(dtype) for _ in range(3)]
    _sgd_steps(net, torch_net, xs, jit=jit)
    _assert_same_state(net, torch_net, dtype)
    assert int(net.num_batches_tracked.value) == 3 and net.num_batches_tracked.value.dtype == np.int64
    net.eval(), torch_net.eval()
    x = xs[0]
    assert_close(net(x), torch_net(torch.tensor(x)).detach().numpy(), **TOL[dtype])
    before = [np.array(p.value) for p in net.parameters()]
    net(x)
    for p, old in zip(net.parameters(), before):  # evaluation mode changes nothing
        np.testing.assert_array_equal(p.value, old)


def test_batch_norm_module_parameters():
    net = BatchNorm2d(4)
    assert [name for name, _ in net.named_parameters()] == ["weight", "bias", "running_mean", "running_var",
                                                           "num_batches_tracked"]
    assert [p.name for p in net.trainable_params()] == ["weight", "bias"]
    assert [p.name for p in net.untrainable_params()] == ["running_mean", "running_var", "num_batches_tracked"]
    np.testing.assert_array_equal(net.weight.value, np.ones(4, np.float32))
    np.testing.assert_array_equal(net.bias.value, np.zeros(4, np.float32))
    np.testing.assert_array_equal(net.running_var.value, np.ones(4, np.float32))
    assert net.running_mean.value.dtype == np.float32
    assert repr(net) == "BatchNorm2d(4, eps=1e-05, momentum=0.1, affine=True, track_running_stats=True)"
    bare = BatchNorm2d(4, affine=False, track_running_stats=False)
    assert bare.weight is None and bare.running_mean is None and len(bare.parameters()) == 0


@pytest.mark.peer("torch")
def test_batch_norm_module_without_running_stats_uses_batch_stats_in_eval():
    import torch
    x = _rng(21).standard_normal((3, 2, 4))
    net = BatchNorm1d(2, affine=False, track_running_stats=False, dtype=np.float64).eval()
    torch_net = torch.nn.BatchNorm1d(2, affine=False, track_running_stats=False, dtype=torch.float64).eval()
    assert_close(net(x), torch_net(torch.tensor(x)).numpy(), rtol=1e-12, atol=1e-12)


def test_batch_norm_module_inside_a_model_under_vmap():
    net = tg.nn.Sequential(BatchNorm1d(3, dtype=np.float64), tg.nn.ReLU())
    x = _rng(22).standard_normal((2, 4, 3))
    with pytest.raises(TypeError, match=r"net\.eval\(\)"):
        tg.vmap(net)(x)
    assert int(net.layers[0].num_batches_tracked.value) == 0  # the refused call counted nothing
    net.eval()
    check_vmap(net, (x[0],), in_axes=0)


def test_batch_norm_module_errors():
    net = BatchNorm2d(3)
    with pytest.raises(ValueError, match="4-d input"):
        net(np.ones((2, 3, 4), np.float32))
    with pytest.raises(ValueError, match="3 channels on axis 1"):
        net(np.ones((2, 4, 2, 2), np.float32))
    with pytest.raises(ValueError, match="2-d or 3-d"):
        BatchNorm1d(3)(np.ones((2, 3, 4, 4)))
    with pytest.raises(TypeError, match="num_features must be an int"):
        BatchNorm2d(3.0)
    with pytest.raises(ValueError, match="momentum"):
        BatchNorm2d(3, momentum=-0.1)


@pytest.mark.peer("torch")
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_layer_norm_and_group_norm_modules_match_torch(dtype):
    import torch
    rng = _rng(23)
    tdtype = getattr(torch, np.dtype(dtype).name)
    x = rng.standard_normal((2, 4, 3, 5)).astype(dtype)
    pairs = [(LayerNorm((3, 5), dtype=dtype), torch.nn.LayerNorm((3, 5), dtype=tdtype)),
             (LayerNorm(5, elementwise_affine=False, dtype=dtype),
              torch.nn.LayerNorm(5, elementwise_affine=False, dtype=tdtype)),
             (LayerNorm(5, bias=False, dtype=dtype), torch.nn.LayerNorm(5, bias=False, dtype=tdtype)),
             (GroupNorm(2, 4, dtype=dtype), torch.nn.GroupNorm(2, 4, dtype=tdtype)),
             (GroupNorm(4, 4, affine=False, dtype=dtype), torch.nn.GroupNorm(4, 4, affine=False, dtype=tdtype))]
    for net, torch_net in pairs:
        _assert_same_state(net, torch_net, dtype)
        _sgd_steps(net, torch_net, [x, 2.0 * x])
        _assert_same_state(net, torch_net, dtype)
        assert_close(net(x), torch_net(torch.tensor(x)).detach().numpy(), **TOL[dtype])
    assert repr(LayerNorm((3, 5))) == "LayerNorm((3, 5), eps=1e-05, elementwise_affine=True)"
    assert repr(GroupNorm(2, 4)) == "GroupNorm(2, 4, eps=1e-05, affine=True)"


def test_layer_norm_and_group_norm_module_errors():
    with pytest.raises(ValueError, match="divisible by num_groups=3"):
        GroupNorm(3, 4)
    with pytest.raises(ValueError, match=r"\(N, 4, \*\)"):
        GroupNorm(2, 4)(np.ones((2, 6, 3), np.float32))
    with pytest.raises(TypeError, match="normalized_shape"):
        LayerNorm(2.5)
    with pytest.raises(ValueError, match="positive"):
        LayerNorm((3, 0))
    with pytest.raises(ValueError, match="normalized_shape \\(5,\\)"):
        LayerNorm(5)(np.ones((2, 4), np.float32))


def test_group_norm_of_an_empty_batch():
    out = group_norm(np.zeros((0, 4, 3)), 2)
    assert out.shape == (0, 4, 3)


# ---- values against the formulas in NumPy (runs without PyTorch) ----------------------------------------
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(6, 3), (4, 3, 5), (4, 3, 2, 5)])
def test_batch_norm_matches_its_formula(shape, dtype):
    rng = np.random.default_rng(0)
    x = rng.standard_normal(shape).astype(dtype)
    w, b = rng.standard_normal(3).astype(dtype), rng.standard_normal(3).astype(dtype)
    mean0, var0 = rng.standard_normal(3).astype(dtype), rng.uniform(0.5, 2.0, 3).astype(dtype)
    running_mean, running_var = tg.Parameter(mean0.copy()), tg.Parameter(var0.copy())
    axes = (0,) + tuple(range(2, len(shape)))
    view = (1, 3) + (1,) * (len(shape) - 2)
    mean, var = x.mean(axis=axes), x.var(axis=axes)
    count = x.size // 3
    tol = dict(rtol=2e-5, atol=2e-6) if dtype == np.float32 else dict(rtol=1e-12, atol=1e-12)

    out = batch_norm(x, running_mean, running_var, w, b, training=True, momentum=0.1, eps=1e-5)
    expected = (x - mean.reshape(view)) / np.sqrt(var.reshape(view) + 1e-5) * w.reshape(view) + b.reshape(view)
    assert out.dtype == dtype
    assert_close(out, expected, **tol)
    assert_close(running_mean.value, 0.9 * mean0 + 0.1 * mean, **tol)
    assert_close(running_var.value, 0.9 * var0 + 0.1 * var * count / (count - 1), **tol)

    out = batch_norm(x, running_mean, running_var, w, b, training=False, eps=1e-5)
    m, v = np.asarray(running_mean.value), np.asarray(running_var.value)
    expected = (x - m.reshape(view)) / np.sqrt(v.reshape(view) + 1e-5) * w.reshape(view) + b.reshape(view)
    assert_close(out, expected, **tol)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_layer_norm_and_group_norm_match_their_formulas(dtype):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((3, 4, 5)).astype(dtype)
    tol = dict(rtol=2e-5, atol=2e-6) if dtype == np.float32 else dict(rtol=1e-12, atol=1e-12)
    w, b = rng.standard_normal((4, 5)).astype(dtype), rng.standard_normal((4, 5)).astype(dtype)
    mean, var = x.mean(axis=(1, 2), keepdims=True), x.var(axis=(1, 2), keepdims=True)
    assert_close(layer_norm(x, (4, 5), w, b), (x - mean) / np.sqrt(var + 1e-5) * w + b, **tol)

    gw, gb = rng.standard_normal(4).astype(dtype), rng.standard_normal(4).astype(dtype)
    grouped = x.reshape(3, 2, 10)
    normalised = ((grouped - grouped.mean(axis=2, keepdims=True))
                  / np.sqrt(grouped.var(axis=2, keepdims=True) + 1e-5)).reshape(x.shape)
    out = group_norm(x, 2, gw, gb)
    assert out.dtype == dtype
    assert_close(out, normalised * gw[:, None] + gb[:, None], **tol)
