"""Rules that elsewhere only PyTorch checks, checked here against NumPy written from the definitions.

``test_layers_more.py``, ``test_conv*.py``, ``test_norm.py`` and ``test_pool.py`` compare these layers
with PyTorch and skip without it. The references below are written from the mathematical definitions
(PyTorch's documented semantics), not from tapegrad's code, so the suite catches a broken rule without
torch installed:

- ``embedding``'s ``padding_idx``: the weight's gradient is the scatter-add of the cotangent over the
  indices, with the padding row's gradient zero (a negative ``padding_idx`` too);
- transposed convolution: every input element times the kernel scattered into the output, with
  stride, padding, output_padding, dilation and groups; gradients as ``<T(e_j), u>``, the adjoint's
  definition, over the basis vectors ``e_j`` of each operand;
- the norm layers in training mode: forward by definition (biased variance), the running statistics
  (unbiased variance, momentum, cumulative average) and the closed-form backward formulas;
- pooling's ``ceil_mode``: the output length derived by enumerating the windows (checked against the
  closed form), and max/avg values and gradients against a sliding-window reference.

Tolerances: ``_tol.assert_close`` (``ULPS`` epsilons of the dtype, scaled by the reference's magnitude);
references are computed in float64 from the operands as given.
"""
from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

import tapegrad as tg
import tapegrad.numpy as tnp
from _tol import assert_close
from tapegrad import nn
from tapegrad.nn import functional as F

DTYPES = [np.float64, np.float32]
IDS = lambda d: np.dtype(d).name  # noqa: E731


def _rng(seed):
    return np.random.default_rng(seed)


def _normal(rng, shape, dtype):
    return rng.standard_normal(shape).astype(dtype)


# ==== embedding ===================================================================================
def ref_embedding(idx, weight):
    """``out[...] = weight[idx[...]]``."""
    return np.asarray(weight)[np.asarray(idx)]


def ref_embedding_weight_grad(idx, ct, num, padding_idx):
    """The weight's gradient: ``ct`` scatter-added into the rows ``idx`` names (a repeated index
    accumulates), and the ``padding_idx`` row (counted from the end when negative) zero."""
    grad = np.zeros((num, ct.shape[-1]), np.float64)
    np.add.at(grad, np.asarray(idx).reshape(-1), np.asarray(ct, np.float64).reshape(-1, ct.shape[-1]))
    if padding_idx is not None:
        grad[padding_idx % num] = 0.0
    return grad


EMBEDDING_CASES = [  # (num_embeddings, indices, padding_idx)
    (5, [[0, 2, 2, 4], [2, 0, 4, 4]], None),
    (5, [[0, 2, 2, 4], [2, 0, 4, 4]], 2),
    (5, [[0, 2, 2, 4], [2, 0, 4, 4]], 0),
    (5, [[0, 2, 2, 4], [2, 0, 4, 4]], -1),  # row 4
    (6, [3, 3, 3, 1, 5, 1], -3),            # row 3, looked up three times
    (4, [1, 1, 2], 3),                      # a padding row never looked up
]


@pytest.mark.parametrize("dtype", DTYPES, ids=IDS)
@pytest.mark.parametrize("num,idx,padding_idx", EMBEDDING_CASES)
def test_embedding_padding_idx_gradient(num, idx, padding_idx, dtype):
    rng = _rng(1)
    idx = np.asarray(idx, np.int64)
    weight = _normal(rng, (num, 3), dtype)
    ct = _normal(rng, idx.shape + (3,), dtype)
    out, pullback = tg.vjp(lambda w: F.embedding(idx, w, padding_idx), weight)
    np.testing.assert_array_equal(out, ref_embedding(idx, weight))  # the padding row's value stays
    np.testing.assert_array_equal(F.embedding(idx, weight, padding_idx), ref_embedding(idx, weight))
    (grad,) = pullback(ct)
    assert grad.dtype == dtype and grad.shape == weight.shape
    assert_close(grad, ref_embedding_weight_grad(idx, ct, num, padding_idx), dtype=dtype)
    if padding_idx is not None:
        assert not np.any(grad[padding_idx % num])
    # grad of a weighted sum: the same scatter-add
    grad2 = tg.grad(lambda w: tnp.sum(F.embedding(idx, w, padding_idx) * ct))(weight)
    assert_close(grad2, ref_embedding_weight_grad(idx, ct, num, padding_idx), dtype=dtype)


@pytest.mark.parametrize("padding_idx", [1, -2])
def test_embedding_module_padding_row(padding_idx):
    """``nn.Embedding``: the padding row starts at zero, and a training step's gradient of ``weight``
    is the scatter-add with that row zero."""
    rng = _rng(2)
    emb = nn.Embedding(5, 4, padding_idx=padding_idx, dtype=np.float64, seed=0)
    row = padding_idx % 5
    assert not np.any(emb.weight.value[row])
    idx = np.array([[row, 0, row], [3, 3, row]])
    ct = rng.standard_normal(idx.shape + (4,))
    np.testing.assert_array_equal(emb(idx), ref_embedding(idx, emb.weight.value))
    (grad,) = tg.grad(lambda: tnp.sum(emb(idx) * ct), grad_position=None, weights=emb.trainable_params())()
    assert_close(grad, ref_embedding_weight_grad(idx, ct, 5, padding_idx))
    assert not np.any(grad[row])


# ==== transposed convolution ======================================================================
def _tuple(v, n):
    return tuple(v) if isinstance(v, (tuple, list)) else (v,) * n


def ref_conv_transpose(x, w, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    """Transposed convolution by its definition: input element ``x[n, ci, i]`` times the kernel
    ``w[ci, co, k]`` lands at output position ``i * s + k * d - p`` of channel ``g * C_out/g + co`` (``g``
    the group of ``ci``), summed; positions outside ``[0, L_out)`` are dropped, ``L_out = (L - 1) s - 2p
    + d (K - 1) + output_padding + 1``. ``x``: ``(N, C_in, *sp)``, ``w``: ``(C_in, C_out/groups, *K)``."""
    x, w = np.asarray(x, np.float64), np.asarray(w, np.float64)
    n = x.ndim - 2
    s, p, op, d = (_tuple(v, n) for v in (stride, padding, output_padding, dilation))
    batch, c_in, sp = x.shape[0], x.shape[1], x.shape[2:]
    c_out_g, kernel = w.shape[1], w.shape[2:]
    out_len = [(L - 1) * si - 2 * pi + di * (k - 1) + o + 1 for L, si, pi, di, k, o in zip(sp, s, p, d, kernel, op)]
    full = [(L - 1) * si + di * (k - 1) + 1 + o for L, si, di, k, o in zip(sp, s, d, kernel, op)]  # before cropping p
    out = np.zeros((batch, groups, c_out_g, *full))
    xg = x.reshape(batch, groups, c_in // groups, *sp)
    wg = w.reshape(groups, c_in // groups, c_out_g, *kernel)
    lead = (slice(None),) * 3
    for kk in np.ndindex(*kernel):  # every kernel tap scatters the whole (strided) input
        contrib = np.einsum("ngc...,gco->ngo...", xg, wg[lead + kk])
        at = tuple(slice(k * di, k * di + (L - 1) * si + 1, si) for k, di, L, si in zip(kk, d, sp, s))
        out[lead + at] += contrib
    out = out[lead + tuple(slice(pi, pi + o) for pi, o in zip(p, out_len))]
    out = out.reshape(batch, groups * c_out_g, *out_len)
    if bias is not None:
        out = out + np.asarray(bias, np.float64).reshape((-1,) + (1,) * n)
    return out


def ref_conv(y, w, stride=1, padding=0, groups=1, dilation=1):
    """Convolution (cross-correlation) by its definition, ``w``: ``(C_out, C_in/groups, *K)``:
    ``out[n, co, o] = sum_{ci in co's group, k} ypad[n, ci, o * s + k * d] w[co, ci, k]``."""
    y, w = np.asarray(y, np.float64), np.asarray(w, np.float64)
    n = y.ndim - 2
    s, p, d = (_tuple(v, n) for v in (stride, padding, dilation))
    ypad = np.pad(y, [(0, 0), (0, 0)] + [(pi, pi) for pi in p])
    kernel = w.shape[2:]
    out_len = [(L + 2 * pi - di * (k - 1) - 1) // si + 1 for L, pi, di, k, si in zip(y.shape[2:], p, d, kernel, s)]
    batch, c_out = y.shape[0], w.shape[0]
    yg = ypad.reshape(batch, groups, y.shape[1] // groups, *ypad.shape[2:])
    wg = w.reshape(groups, c_out // groups, w.shape[1], *kernel)
    out = np.zeros((batch, groups, c_out // groups, *out_len))
    for kk in np.ndindex(*kernel):
        at = tuple(slice(k * di, k * di + (o - 1) * si + 1, si) for k, di, o, si in zip(kk, d, out_len, s))
        out += np.einsum("ngc...,goc->ngo...", yg[(slice(None),) * 3 + at], wg[(slice(None),) * 3 + kk])
    return out.reshape(batch, c_out, *out_len)


def _adjoint_grads(x, w, u, **params):
    """The gradients of ``<T(x, w), u>`` (``T`` linear in each operand) from the reference alone:
    ``grad[j] = <T(e_j), u>`` over the basis vectors ``e_j`` of ``x`` (batched: every ``e_j`` is one
    sample) and of ``w``."""
    u = np.asarray(u, np.float64)
    per_sample = math.prod(x.shape[1:])
    basis = np.eye(per_sample).reshape((per_sample,) + x.shape[1:])
    images = ref_conv_transpose(basis, w, **params).reshape(per_sample, -1)  # T(e_j, w) for one sample
    gx = (u.reshape(u.shape[0], -1) @ images.T).reshape(x.shape)
    gw = np.empty(w.size)
    for j in range(w.size):
        e = np.zeros(w.size)
        e[j] = 1.0
        gw[j] = np.sum(ref_conv_transpose(x, e.reshape(w.shape), **params) * u)
    return gx, gw.reshape(w.shape), u.sum(axis=(0,) + tuple(range(2, u.ndim)))


# (input shape (N, C_in, *sp), C_out, kernel, stride, padding, output_padding, groups, dilation)
CONV_T_CASES = [
    ((2, 3, 5), 2, (3,), 1, 0, 0, 1, 1),
    ((2, 3, 5), 4, (3,), 2, 1, 1, 1, 1),
    ((1, 4, 6), 6, (2,), 3, 0, 2, 2, 1),
    ((2, 2, 4), 2, (3,), 2, 2, 1, 1, 2),   # output_padding < dilation allowed
    ((1, 4, 5), 4, (3,), 1, 1, 1, 4, 2),   # depthwise, output_padding from the dilation
    ((2, 2, 3, 4), 3, (2, 3), 1, 0, 0, 1, 1),
    ((2, 2, 3, 4), 3, (3, 2), (2, 1), (1, 0), (1, 0), 1, 1),
    ((1, 4, 3, 3), 2, (3, 3), 2, 1, (0, 1), 2, (1, 2)),
    ((2, 2, 4, 3), 4, (2, 2), (3, 2), (1, 1), (2, 1), 2, (2, 1)),
    ((1, 2, 2, 3, 2), 2, (2, 2, 1), (2, 1, 2), (0, 1, 0), (1, 0, 1), 1, 1),
]


def _conv_t_operands(case, dtype, seed=3):
    shape, c_out, kernel, stride, padding, output_padding, groups, dilation = case
    rng = _rng(seed)
    x = _normal(rng, shape, dtype)
    w = _normal(rng, (shape[1], c_out // groups) + kernel, dtype)
    b = _normal(rng, (c_out,), dtype)
    params = dict(stride=stride, padding=padding, output_padding=output_padding, groups=groups, dilation=dilation)
    return x, w, b, params


def _conv_t_fn(x):
    return {3: F.conv_transpose1d, 4: F.conv_transpose2d, 5: F.conv_transpose3d}[x.ndim]


@pytest.mark.parametrize("case", CONV_T_CASES, ids=str)
def test_reference_conv_transpose_is_convs_adjoint(case):
    """The reference is what ``conv_transpose`` is documented as, the adjoint of the convolution with
    the same kernel and parameters: ``<conv(y), x> = <y, T(x)>`` for ``y`` of ``T(x)``'s shape."""
    x, w, _, params = _conv_t_operands(case, np.float64)
    tx = ref_conv_transpose(x, w, **params)
    y = _rng(4).standard_normal(tx.shape)
    conv = ref_conv(y, np.asarray(w), params["stride"], params["padding"], params["groups"], params["dilation"])
    # the convolution of T(x)'s size has x's length, or more where output_padding >= stride (allowed
    # below the dilation): T's adjoint is then that convolution's first L outputs
    assert all(c >= n for c, n in zip(conv.shape, x.shape))
    assert conv.shape == x.shape or any(np.less_equal(_tuple(params["stride"], x.ndim - 2),
                                                      _tuple(params["output_padding"], x.ndim - 2)))
    conv = conv[tuple(slice(0, n) for n in x.shape)]
    assert_close(np.sum(conv * x), np.sum(y * tx), scale=np.sum(np.abs(y * tx)))


@pytest.mark.parametrize("dtype", DTYPES, ids=IDS)
@pytest.mark.parametrize("case", CONV_T_CASES, ids=str)
def test_conv_transpose_values_and_gradients(case, dtype):
    x, w, b, params = _conv_t_operands(case, dtype)
    fn = _conv_t_fn(x)
    want = ref_conv_transpose(x, w, b, **params)
    got = fn(x, w, b, **params)
    assert got.dtype == dtype
    assert_close(got, want, dtype=dtype)
    out, pullback = tg.vjp(lambda x, w, b: fn(x, w, b, **params), x, w, b)
    assert_close(out, want, dtype=dtype)
    u = _normal(_rng(5), want.shape, dtype)
    gx, gw, gb = pullback(u)
    rx, rw, rb = _adjoint_grads(x, w, u, **params)
    assert gx.dtype == gw.dtype == gb.dtype == dtype
    for got_g, want_g, name in ((gx, rx, "input"), (gw, rw, "weight"), (gb, rb, "bias")):
        assert_close(got_g, want_g, dtype=dtype, err_msg=name)


@pytest.mark.parametrize("rank", [1, 2])
def test_conv_transpose_layer_values(rank):
    layer_cls = {1: nn.ConvTranspose1d, 2: nn.ConvTranspose2d}[rank]
    layer = layer_cls(4, 6, 3, stride=2, padding=1, output_padding=1, groups=2, dilation=1, dtype=np.float64,
                      seed=0)
    x = _rng(6).standard_normal((2, 4) + (5,) * rank)
    want = ref_conv_transpose(x, layer.weight.value, layer.bias.value, stride=2, padding=1, output_padding=1,
                              groups=2)
    assert_close(layer(x), want)


# ==== normalisation in training mode ==============================================================
def _normalised(x, axes, eps):
    """``xhat = (x - mean) / sqrt(var + eps)`` and ``1 / sqrt(var + eps)``, the variance biased (divided
    by the count), over ``axes``."""
    mean = x.mean(axis=axes, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=axes, keepdims=True)
    inv = 1.0 / np.sqrt(var + eps)
    return (x - mean) * inv, inv


def _norm_backward(g, xhat, inv, axes):
    """The input gradient of ``xhat`` over ``axes`` for the cotangent ``g`` of ``xhat`` (the output's
    cotangent times the scale): ``dx = inv / M * (M g - sum(g) - xhat sum(g xhat))``, ``M`` the count."""
    m = math.prod(g.shape[a] for a in axes)
    return inv / m * (m * g - g.sum(axis=axes, keepdims=True) - xhat * (g * xhat).sum(axis=axes, keepdims=True))


def ref_batch_norm_train(x, gamma, beta, dy, eps):
    """Training-mode batch norm over every axis but 1: the output, then ``dx``, ``dgamma``, ``dbeta``
    (Ioffe & Szegedy's closed form)."""
    x, dy = np.asarray(x, np.float64), np.asarray(dy, np.float64)
    axes = (0,) + tuple(range(2, x.ndim))
    view = (1, -1) + (1,) * (x.ndim - 2)
    gamma = np.ones(x.shape[1]) if gamma is None else np.asarray(gamma, np.float64)
    beta = np.zeros(x.shape[1]) if beta is None else np.asarray(beta, np.float64)
    xhat, inv = _normalised(x, axes, eps)
    out = xhat * gamma.reshape(view) + beta.reshape(view)
    dx = _norm_backward(dy * gamma.reshape(view), xhat, inv, axes)
    return out, dx, (dy * xhat).sum(axis=axes), dy.sum(axis=axes)


def ref_layer_norm(x, k, gamma, beta, dy, eps):
    """Layer norm over the last ``k`` axes, elementwise affine: the output, ``dx``, ``dgamma``, ``dbeta``."""
    x, dy = np.asarray(x, np.float64), np.asarray(dy, np.float64)
    axes = tuple(range(x.ndim - k, x.ndim))
    lead = tuple(range(x.ndim - k))
    gamma, beta = np.asarray(gamma, np.float64), np.asarray(beta, np.float64)
    xhat, inv = _normalised(x, axes, eps)
    return (xhat * gamma + beta, _norm_backward(dy * gamma, xhat, inv, axes), (dy * xhat).sum(axis=lead),
            dy.sum(axis=lead))


def ref_group_norm(x, groups, gamma, beta, dy, eps):
    """Group norm (``groups = C``: instance norm): each sample's group of ``C / groups`` channels and
    all positions normalised together, then the per-channel affine. Output, ``dx``, ``dgamma``, ``dbeta``."""
    x, dy = np.asarray(x, np.float64), np.asarray(dy, np.float64)
    view = (1, -1) + (1,) * (x.ndim - 2)
    gamma, beta = np.asarray(gamma, np.float64), np.asarray(beta, np.float64)
    grouped = x.reshape(x.shape[0], groups, -1)
    xhat, inv = _normalised(grouped, (2,), eps)
    g = (dy * gamma.reshape(view)).reshape(grouped.shape)
    dx = _norm_backward(g, xhat, inv, (2,)).reshape(x.shape)
    xhat = xhat.reshape(x.shape)
    per_channel = (0,) + tuple(range(2, x.ndim))
    return (xhat * gamma.reshape(view) + beta.reshape(view), dx, (dy * xhat).sum(axis=per_channel),
            dy.sum(axis=per_channel))


def _check_norm(got_out, got_grads, want, dtype):
    """``got_out`` and ``got_grads = (dx, dgamma, dbeta)`` against the reference ``want``, each in
    ``dtype`` and within ``ULPS`` epsilons of the reference's magnitude (the largest error seen is
    about 2% of that)."""
    out, dx, dgamma, dbeta = want
    assert_close(got_out, out, dtype=dtype, err_msg="output")
    for got, ref, name in zip(got_grads, (dx, dgamma, dbeta), ("input", "weight", "bias")):
        assert got.dtype == dtype, name
        assert_close(got, ref, dtype=dtype, err_msg=name)


BN_SHAPES = [(6, 3), (4, 3, 5), (3, 2, 4, 3), (2, 2, 3, 2, 3)]


@pytest.mark.parametrize("dtype", DTYPES, ids=IDS)
@pytest.mark.parametrize("shape", BN_SHAPES, ids=str)
def test_batch_norm_training_values_and_gradients(shape, dtype):
    rng = _rng(7)
    x = (_normal(rng, shape, dtype) * 3 + 1).astype(dtype)
    gamma, beta = _normal(rng, shape[1], dtype), _normal(rng, shape[1], dtype)
    dy = _normal(rng, shape, dtype)
    want = ref_batch_norm_train(x, gamma, beta, dy, 1e-5)
    fn = lambda x, g, b: F.batch_norm(x, None, None, g, b, training=True)  # noqa: E731
    assert_close(fn(x, gamma, beta), want[0], dtype=dtype)
    out, pullback = tg.vjp(fn, x, gamma, beta)
    _check_norm(out, pullback(dy), want, dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=IDS)
@pytest.mark.parametrize("shape", BN_SHAPES, ids=str)
def test_batch_norm_module_training_step(shape, dtype):
    """``BatchNorm{1,2,3}d`` in training mode: the output and its gradients by the closed form, the
    running statistics ``(1 - m) running + m batch`` with the unbiased batch variance, once per call,
    and evaluation mode then normalising with them."""
    cls = {2: nn.BatchNorm1d, 3: nn.BatchNorm1d, 4: nn.BatchNorm2d, 5: nn.BatchNorm3d}[len(shape)]
    c, momentum, eps = shape[1], 0.3, 1e-3
    bn = cls(c, eps=eps, momentum=momentum, dtype=dtype)
    rng = _rng(8)
    bn.weight.assign(_normal(rng, c, dtype))
    bn.bias.assign(_normal(rng, c, dtype))
    gamma, beta = np.array(bn.weight.value), np.array(bn.bias.value)
    axes = (0,) + tuple(range(2, len(shape)))
    count = math.prod(shape[a] for a in axes)
    running_mean, running_var = np.zeros(c), np.ones(c)
    for step in range(3):
        x = (_normal(rng, shape, dtype) * (step + 1) - step).astype(dtype)
        dy = _normal(rng, shape, dtype)
        want = ref_batch_norm_train(x, gamma, beta, dy, eps)
        if step == 0:  # eagerly, then under grad: two calls, two updates from the same batch
            out = bn(x)
            grads = tg.grad(lambda x, dy=dy: tnp.sum(bn(x) * dy), grad_position=0,
                            weights=bn.trainable_params())(x)
            running_calls = 2
        else:  # one call, under value_and_grad: one update
            def loss(x, dy=dy):
                out = bn(x)
                return tnp.sum(out * dy), out

            (_, out), grads = tg.value_and_grad(loss, grad_position=0, weights=bn.trainable_params(),
                                                has_aux=True)(x)
            running_calls = 1
        gx, (gg, gb) = grads
        _check_norm(out, (gx, gg, gb), want, dtype)
        x64 = x.astype(np.float64)
        batch_mean = x64.mean(axis=axes)
        unbiased = ((x64 - batch_mean.reshape((1, -1) + (1,) * (len(shape) - 2))) ** 2).sum(axis=axes) / (count - 1)
        for _ in range(running_calls):  # every call in training mode updates the statistics
            running_mean = (1 - momentum) * running_mean + momentum * batch_mean
            running_var = (1 - momentum) * running_var + momentum * unbiased
        assert bn.running_mean.value.dtype == dtype
        assert_close(bn.running_mean.value, running_mean, dtype=dtype, err_msg="running_mean")
        assert_close(bn.running_var.value, running_var, dtype=dtype, err_msg="running_var")
    assert int(bn.num_batches_tracked.value) == 2 + 1 + 1
    bn.eval()
    x = _normal(rng, shape, dtype)
    view = (1, -1) + (1,) * (len(shape) - 2)
    want = ((x - running_mean.reshape(view)) / np.sqrt(running_var.reshape(view) + eps) * gamma.reshape(view)
            + beta.reshape(view))
    assert_close(bn(x), want, dtype=dtype, err_msg="evaluation mode")
    assert int(bn.num_batches_tracked.value) == 4


def test_batch_norm_cumulative_average():
    """``momentum=None``: the running statistics are the plain averages of the batch statistics so far
    (the k-th batch weighted 1/k; the initial values drop out at the first batch)."""
    bn = nn.BatchNorm2d(3, momentum=None, dtype=np.float64)
    rng = _rng(9)
    means, variances = [], []
    for k in range(4):
        x = rng.standard_normal((2, 3, 3, 2)) * (k + 1) + k
        bn(x)
        means.append(x.mean(axis=(0, 2, 3)))
        variances.append(x.var(axis=(0, 2, 3), ddof=1))
        assert_close(bn.running_mean.value, np.mean(means, axis=0))
        assert_close(bn.running_var.value, np.mean(variances, axis=0))


LAYER_NORM_CASES = [((4, 5), (5,)), ((2, 3, 4), (4,)), ((2, 3, 4), (3, 4)), ((3, 2, 2, 3), (2, 2, 3))]


@pytest.mark.parametrize("dtype", DTYPES, ids=IDS)
@pytest.mark.parametrize("shape,normalized", LAYER_NORM_CASES, ids=str)
def test_layer_norm_values_and_gradients(shape, normalized, dtype):
    rng = _rng(10)
    x = (_normal(rng, shape, dtype) * 2 - 1).astype(dtype)
    gamma, beta = _normal(rng, normalized, dtype), _normal(rng, normalized, dtype)
    dy = _normal(rng, shape, dtype)
    want = ref_layer_norm(x, len(normalized), gamma, beta, dy, 1e-5)
    fn = lambda x, g, b: F.layer_norm(x, normalized, g, b)  # noqa: E731
    assert_close(fn(x, gamma, beta), want[0], dtype=dtype)  # concrete operands: the fused kernel
    out, pullback = tg.vjp(fn, x, gamma, beta)              # traced
    _check_norm(out, pullback(dy), want, dtype)
    layer = nn.LayerNorm(normalized, dtype=dtype)
    layer.weight.assign(gamma)
    layer.bias.assign(beta)
    gx, (gg, gb) = tg.grad(lambda x: tnp.sum(layer(x) * dy), grad_position=0, weights=layer.trainable_params())(x)
    _check_norm(layer(x), (gx, gg, gb), want, dtype)


GROUP_NORM_CASES = [((2, 4, 5), 2), ((2, 6, 3, 2), 3), ((3, 4, 2, 2), 4), ((2, 4, 3), 1), ((2, 2, 2, 2, 2), 2)]


@pytest.mark.parametrize("dtype", DTYPES, ids=IDS)
@pytest.mark.parametrize("shape,groups", GROUP_NORM_CASES, ids=str)
def test_group_norm_values_and_gradients(shape, groups, dtype):
    """Group norm; ``groups = C`` is instance norm (there is no InstanceNorm layer), 1 is layer norm
    over ``(C, *)`` with a per-channel affine."""
    rng = _rng(11)
    c = shape[1]
    x = (_normal(rng, shape, dtype) * 2 + 0.5).astype(dtype)
    gamma, beta = _normal(rng, c, dtype), _normal(rng, c, dtype)
    dy = _normal(rng, shape, dtype)
    want = ref_group_norm(x, groups, gamma, beta, dy, 1e-5)
    fn = lambda x, g, b: F.group_norm(x, groups, g, b)  # noqa: E731
    assert_close(fn(x, gamma, beta), want[0], dtype=dtype)
    out, pullback = tg.vjp(fn, x, gamma, beta)
    _check_norm(out, pullback(dy), want, dtype)
    layer = nn.GroupNorm(groups, c, dtype=dtype)
    layer.weight.assign(gamma)
    layer.bias.assign(beta)
    gx, (gg, gb) = tg.grad(lambda x: tnp.sum(layer(x) * dy), grad_position=0, weights=layer.trainable_params())(x)
    _check_norm(layer(x), (gx, gg, gb), want, dtype)


# ==== pooling: ceil_mode ==========================================================================
def _window_starts(n, k, s, p, d, ceil_mode):
    """The start of every window along one axis, in input coordinates (``-p`` is the first padded
    element), enumerated from the definition: a window spans ``d (k - 1) + 1`` elements and windows
    start every ``s`` from ``-p``. Floor mode keeps the windows lying inside the padded input
    ``[-p, n + p)``; ceil mode also keeps one more while the previous window stopped short of the padded
    input's end (rounding the count up), but never a window starting in the right padding (it must
    start inside the input or the left padding)."""
    span, end = d * (k - 1) + 1, n + p
    starts = []
    i = 0
    while True:
        start = i * s - p
        inside = start + span <= end
        if not inside:
            if not ceil_mode or start >= n:
                break
            previous_end = (i - 1) * s - p + span  # i >= 1: the first window always fits (checked below)
            if previous_end >= end:
                break
        starts.append(start)
        i += 1
    return starts


def out_len_closed_form(n, k, s, p, d, ceil_mode):
    """The closed form: ``floor`` / ``ceil`` of ``(n + 2p - d (k - 1) - 1) / s``, plus 1; in ceil mode one
    fewer when the last window would start in the right padding (``(out - 1) s >= n + p``)."""
    span = n + 2 * p - d * (k - 1) - 1
    if not ceil_mode:
        return span // s + 1
    out = -(-span // s) + 1
    if (out - 1) * s >= n + p:
        out -= 1
    return out


def _pool_configs(dilations=(1, 2, 3)):
    """Every (n, k, s, p, d) with n < 10, k, s < 5, p <= k // 2 and one window fitting the padded input."""
    for n, k, s, d in itertools.product(range(1, 10), range(1, 5), range(1, 5), dilations):
        for p in range(k // 2 + 1):
            if n + 2 * p >= d * (k - 1) + 1:
                yield n, k, s, p, d


def test_ceil_mode_length_enumeration_matches_closed_form():
    """The derivation: enumerating the windows gives the closed form, and ceil mode differs from floor
    mode exactly where the floor division has a remainder (and at most by one window)."""
    differing = 0
    for n, k, s, p, d in _pool_configs():
        for ceil_mode in (False, True):
            assert len(_window_starts(n, k, s, p, d, ceil_mode)) == out_len_closed_form(n, k, s, p, d, ceil_mode), \
                (n, k, s, p, d, ceil_mode)
        extra = len(_window_starts(n, k, s, p, d, True)) - len(_window_starts(n, k, s, p, d, False))
        assert extra in (0, 1)
        assert extra == 0 or (n + 2 * p - d * (k - 1) - 1) % s
        differing += extra
    assert differing > 100  # the sweep reaches the ragged edge often


def test_pool_output_lengths_sweep():
    """Output lengths of max_pool1d (with dilation) and avg_pool1d over the sweep, both modes; 2-d on
    pairs of them."""
    configs = list(_pool_configs())
    for n, k, s, p, d in configs:
        x = np.zeros((1, 1, n))
        for ceil_mode in (False, True):
            want = len(_window_starts(n, k, s, p, d, ceil_mode))
            got = F.max_pool1d(x, k, s, p, d, ceil_mode=ceil_mode).shape
            assert got == (1, 1, want), ("max_pool1d", n, k, s, p, d, ceil_mode, got, want)
            if d == 1:
                got = F.avg_pool1d(x, k, s, p, ceil_mode=ceil_mode).shape
                assert got == (1, 1, want), ("avg_pool1d", n, k, s, p, ceil_mode, got, want)
    rng = _rng(12)
    for _ in range(150):
        (h, kh, sh, ph, dh), (w, kw, sw, pw, dw) = (configs[i] for i in rng.integers(len(configs), size=2))
        x = np.zeros((1, h, w))
        for ceil_mode in (False, True):
            want = (1, len(_window_starts(h, kh, sh, ph, dh, ceil_mode)),
                    len(_window_starts(w, kw, sw, pw, dw, ceil_mode)))
            got = F.max_pool2d(x, (kh, kw), (sh, sw), (ph, pw), (dh, dw), ceil_mode=ceil_mode).shape
            assert got == want, ("max_pool2d", (h, w), (kh, kw), (sh, sw), (ph, pw), (dh, dw), ceil_mode)
            want = (1, len(_window_starts(h, kh, sh, ph, 1, ceil_mode)),
                    len(_window_starts(w, kw, sw, pw, 1, ceil_mode)))
            got = F.avg_pool2d(x, (kh, kw), (sh, sw), (ph, pw), ceil_mode=ceil_mode).shape
            assert got == want, ("avg_pool2d", (h, w), (kh, kw), (sh, sw), (ph, pw), ceil_mode)


def _windows(shape, k, s, p, d, ceil_mode):
    """For each output position (an index tuple over the spatial axes), the input positions of its
    window per axis, unclipped (some fall in the padding or past it)."""
    per_axis = [[[start + j * di for j in range(ki)] for start in _window_starts(n, ki, si, pi, di, ceil_mode)]
                for n, ki, si, pi, di in zip(shape, k, s, p, d)]
    return [len(a) for a in per_axis], per_axis


def ref_pool(x, kind, k, s, p, d=None, ceil_mode=True, count_include_pad=True, divisor_override=None,
             ct=None):
    """Max or average pooling over the trailing ``len(k)`` axes by the sliding-window definition, and
    with a cotangent ``ct`` also the input's gradient.

    max: the maximum of the window's elements inside the input (the padding is ``-inf``); the gradient
    goes to the first maximum in row-major window order. avg: the window's sum (the padding is 0)
    divided by ``divisor_override``, else by how many of its elements lie in the padded input ``[-p, n +
    p)`` (``count_include_pad``; the part of a ceil-mode window past the padding never counts), else in
    the input ``[0, n)``."""
    x = np.asarray(x, np.float64)
    m = len(k)
    d = (1,) * m if d is None else d
    spatial = x.shape[-m:]
    out_shape, per_axis = _windows(spatial, k, s, p, d, ceil_mode)
    out = np.empty(x.shape[:-m] + tuple(out_shape))
    grad = np.zeros_like(x)
    for o in np.ndindex(*out_shape):
        positions = list(itertools.product(*(per_axis[a][o[a]] for a in range(m))))  # row-major window order
        inside = [q for q in positions if all(0 <= q[a] < spatial[a] for a in range(m))]
        values = np.stack([x[(Ellipsis,) + q] for q in inside], axis=-1)
        at = (Ellipsis,) + o
        if kind == "max":
            first = np.argmax(values, axis=-1)  # the first maximum (the padding, -inf, never wins)
            out[at] = np.take_along_axis(values, first[..., None], -1)[..., 0]
            if ct is not None:
                for lead in np.ndindex(*x.shape[:-m]):
                    grad[lead + inside[first[lead]]] += ct[lead + o]
        else:
            if divisor_override is not None:
                divisor = divisor_override
            elif count_include_pad:
                divisor = sum(all(-p[a] <= q[a] < spatial[a] + p[a] for a in range(m)) for q in positions)
            else:
                divisor = len(inside)
            out[at] = values.sum(axis=-1) / divisor
            if ct is not None:
                for q in inside:
                    grad[(Ellipsis,) + q] += ct[at] / divisor
    return out, grad


# (spatial, kernel, stride, padding, dilation): in ceil mode most axes end in a ragged window (reaching
# past the padding), and some have the window that would start in the right padding dropped
POOL_CASES = [
    ((8,), (3,), (2,), (0,), (1,)),
    ((8,), (3,), (2,), (1,), (1,)),
    ((7,), (4,), (3,), (2,), (1,)),   # ceil's extra window would start in the right padding
    ((5,), (2,), (4,), (1,), (1,)),   # likewise
    ((10,), (3,), (2,), (1,), (2,)),
    ((8, 7), (3, 2), (2, 2), (1, 0), (1, 1)),
    ((5, 8), (2, 3), (2, 3), (1, 1), (1, 1)),
    ((7, 8), (3, 3), (3, 2), (1, 1), (2, 1)),
    ((4, 6), (4, 2), (3, 3), (2, 1), (1, 2)),
]


def test_pool_cases_reach_the_ragged_edge():
    """The value tests below exercise both parts of the ceil-mode rule: axes where ceil mode adds a
    window, and axes where the window it would add starts in the right padding and is dropped."""
    added = dropped = 0
    for spatial, k, s, p, d in POOL_CASES:
        for args in zip(spatial, k, s, p, d):
            ceil_len, floor_len = out_len_closed_form(*args, True), out_len_closed_form(*args, False)
            added += ceil_len > floor_len
            dropped += ceil_len == floor_len and (args[0] + 2 * args[3] - args[4] * (args[1] - 1) - 1) % args[2] > 0
    assert added >= 8 and dropped >= 4, (added, dropped)


def _pool_fn(kind, m):
    return {("max", 1): F.max_pool1d, ("max", 2): F.max_pool2d, ("avg", 1): F.avg_pool1d,
            ("avg", 2): F.avg_pool2d}[kind, m]


@pytest.mark.parametrize("dtype", DTYPES, ids=IDS)
@pytest.mark.parametrize("ceil_mode", [True, False], ids=["ceil", "floor"])
@pytest.mark.parametrize("case", POOL_CASES, ids=str)
def test_max_pool_values_and_gradient(case, ceil_mode, dtype):
    spatial, k, s, p, d = case
    rng = _rng(13)
    x = _normal(rng, (2, 3) + spatial, dtype)
    fn = lambda x: _pool_fn("max", len(k))(x, k, s, p, d, ceil_mode=ceil_mode)  # noqa: E731
    out, pullback = tg.vjp(fn, x)
    ct = _normal(rng, out.shape, dtype)
    want, want_grad = ref_pool(x, "max", k, s, p, d, ceil_mode, ct=ct)
    np.testing.assert_array_equal(fn(x), want.astype(dtype))  # a maximum is exact
    np.testing.assert_array_equal(out, want.astype(dtype))
    (grad,) = pullback(ct)
    assert_close(grad, want_grad, dtype=dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=IDS)
@pytest.mark.parametrize("count_include_pad", [True, False], ids=["include_pad", "exclude_pad"])
@pytest.mark.parametrize("ceil_mode", [True, False], ids=["ceil", "floor"])
@pytest.mark.parametrize("case", [c for c in POOL_CASES if c[4] == (1,) * len(c[0])], ids=str)
def test_avg_pool_values_and_gradient(case, ceil_mode, count_include_pad, dtype):
    spatial, k, s, p, _ = case
    rng = _rng(14)
    x = _normal(rng, (2, 3) + spatial, dtype)
    fn = lambda x: _pool_fn("avg", len(k))(x, k, s, p, ceil_mode=ceil_mode,  # noqa: E731
                                           count_include_pad=count_include_pad)
    out, pullback = tg.vjp(fn, x)
    ct = _normal(rng, out.shape, dtype)
    want, want_grad = ref_pool(x, "avg", k, s, p, None, ceil_mode, count_include_pad, ct=ct)
    assert fn(x).dtype == dtype
    assert_close(fn(x), want, dtype=dtype)
    assert_close(out, want, dtype=dtype)
    (grad,) = pullback(ct)
    assert_close(grad, want_grad, dtype=dtype)


@pytest.mark.parametrize("ceil_mode", [True, False], ids=["ceil", "floor"])
def test_avg_pool2d_divisor_override(ceil_mode):
    x = _rng(15).standard_normal((2, 7, 6))
    ct = _rng(16).standard_normal(F.avg_pool2d(x, (3, 2), 2, (1, 0), ceil_mode=ceil_mode).shape)
    want, want_grad = ref_pool(x, "avg", (3, 2), (2, 2), (1, 0), None, ceil_mode, divisor_override=5, ct=ct)
    out, pullback = tg.vjp(lambda x: F.avg_pool2d(x, (3, 2), 2, (1, 0), ceil_mode=ceil_mode, divisor_override=5), x)
    assert_close(out, want)
    assert_close(pullback(ct)[0], want_grad)


@pytest.mark.parametrize("kind", ["max", "avg"])
def test_pool_layers_ceil_mode(kind):
    """The modules pass ``ceil_mode`` (and ``count_include_pad``) through."""
    x = _rng(17).standard_normal((2, 7, 8))
    if kind == "max":
        layer = nn.MaxPool2d((3, 2), (2, 3), (1, 1), dilation=(1, 2), ceil_mode=True)
        want, _ = ref_pool(x, "max", (3, 2), (2, 3), (1, 1), (1, 2), True)
    else:
        layer = nn.AvgPool2d((3, 2), (2, 3), (1, 1), ceil_mode=True, count_include_pad=False)
        want, _ = ref_pool(x, "avg", (3, 2), (2, 3), (1, 1), None, True, False)
    assert_close(layer(x), want)
    layer1 = (nn.MaxPool1d(3, 2, 1, ceil_mode=True) if kind == "max"
              else nn.AvgPool1d(3, 2, 1, ceil_mode=True, count_include_pad=True))
    want, _ = ref_pool(x, kind, (3,), (2,), (1,), None, True, True)
    assert_close(layer1(x), want)
