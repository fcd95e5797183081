"""The convolution primitive and its public functions: values against torch.nn.functional (conv1d/2d/3d,
conv_transpose1d/2d/3d) and against a naive NumPy reference (``conv_general_dilated``'s lhs dilation,
negative padding, batch groups, dimension numbers); derivatives by check_grads to order 2 in both modes;
vmap against a loop; jit against eager; the argument errors."""
from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

import tapegrad as tg
import tapegrad.numpy as tnp
from _gpu import cupy_or_skip
from _tol import assert_close
from _vmapcheck import check_vmap, check_vmap_mixes
from tapegrad.nn._conv import ConvDimensionNumbers, conv_general_dilated_p
from tapegrad.nn._conv_api import (
    conv1d,
    conv2d,
    conv3d,
    conv_general_dilated,
    conv_transpose1d,
    conv_transpose2d,
    conv_transpose3d,
)
from tapegrad.testing import check_grads

CONV = {1: conv1d, 2: conv2d, 3: conv3d}
CONV_T = {1: conv_transpose1d, 2: conv_transpose2d, 3: conv_transpose3d}
TOL = {np.float32: 1e-5, np.float64: 1e-12, np.complex128: 1e-12}


def _draw(shape, dtype=np.float64, seed=0):
    return np.random.default_rng(seed).uniform(-1.0, 1.0, shape).astype(dtype)


def _close(out, ref, dtype):
    """Values within rtol of the dtype, with an atol of the same size relative to the largest value
    (sums of products cancel)."""
    out, ref = np.asarray(out), np.asarray(ref)
    assert out.shape == ref.shape, (out.shape, ref.shape)
    assert out.dtype == dtype, out.dtype
    tol = TOL[dtype]
    assert_close(out, ref, rtol=tol, atol=tol * max(np.abs(ref).max(initial=0.0), 1.0))


# ---- the naive reference: zero insertion, padding, one matrix product per output position ----------

def _same_padding(in_spatial, kernel, strides):
    """TensorFlow's and JAX's 'SAME': output ceil(in / stride), the odd element on the high side."""
    pads = []
    for size, k, s in zip(in_spatial, kernel, strides):
        total = max((math.ceil(size / s) - 1) * s + k - size, 0)
        pads.append((total // 2, total - total // 2))
    return pads


def _insert_zeros(x, dilation):
    """``d - 1`` zeros between neighbours along each spatial axis of ``x`` (N, C, *spatial)."""
    shape = x.shape[:2] + tuple(1 + d * (s - 1) for s, d in zip(x.shape[2:], dilation))
    out = np.zeros(shape, x.dtype)
    out[(slice(None),) * 2 + tuple(slice(None, None, d) for d in dilation)] = x
    return out


def naive_conv(x, w, strides, padding, lhs_dilation, rhs_dilation, feature_groups=1, batch_groups=1):
    """XLA's ConvGeneralDilated on canonical operands, x (N, C, *spatial) and w (O, I, *kernel), written
    the slow, obvious way. (Checked against jax.lax.conv_general_dilated when it was written.)"""
    xd, wd = _insert_zeros(x, lhs_dilation), _insert_zeros(w, rhs_dilation)
    if padding == "VALID":
        padding = [(0, 0)] * (x.ndim - 2)
    elif padding == "SAME":
        padding = _same_padding(xd.shape[2:], wd.shape[2:], strides)
    xp = np.pad(xd, [(0, 0), (0, 0)] + [(max(lo, 0), max(hi, 0)) for lo, hi in padding])
    xp = xp[(slice(None),) * 2 + tuple(slice(max(-lo, 0), xp.shape[2 + i] - max(-hi, 0))
                                       for i, (lo, hi) in enumerate(padding))]
    out_spatial = [(p - k) // s + 1 for p, k, s in zip(xp.shape[2:], wd.shape[2:], strides)]
    n, c, o = x.shape[0], x.shape[1], w.shape[0]
    out = np.zeros((n // batch_groups, o) + tuple(out_spatial), np.result_type(x, w))
    fg, bg = feature_groups, batch_groups
    for pos in itertools.product(*map(range, out_spatial)):
        window = xp[(slice(None),) * 2 + tuple(slice(p * s, p * s + k)
                                               for p, s, k in zip(pos, strides, wd.shape[2:]))]
        for g in range(fg * bg):  # one of the two counts is 1
            examples = slice(g * n // bg, (g + 1) * n // bg) if bg > 1 else slice(None)
            channels = slice(g * c // fg, (g + 1) * c // fg) if fg > 1 else slice(None)
            kernels = slice(g * o // (fg * bg), (g + 1) * o // (fg * bg))
            patch, kernel = window[examples, channels], wd[kernels]
            out[(slice(None), kernels) + pos] = patch.reshape(len(patch), -1) @ kernel.reshape(len(kernel), -1).T
    return out


# ---- values against PyTorch -------------------------------------------------------------------------

# (rank, input shape, weight shape, kwargs)
CONV_CASES = [
    (1, (2, 3, 9), (4, 3, 3), dict(stride=2, padding=1)),
    (1, (2, 3, 8), (4, 3, 4), dict(padding="same")),                     # even kernel: odd total
    (1, (2, 3, 8), (4, 3, 3), dict(padding="same", dilation=2)),
    (1, (3, 10), (6, 1, 3), dict(groups=3, dilation=3)),                  # unbatched, depthwise
    (2, (2, 3, 7, 6), (4, 3, 3, 3), dict()),
    (2, (2, 3, 7, 6), (4, 3, 3, 2), dict(stride=(2, 1), padding=(1, 2), dilation=(1, 2))),
    (2, (2, 3, 7, 6), (4, 3, 2, 3), dict(padding="same", dilation=(2, 1))),
    (2, (2, 3, 7, 6), (4, 3, 3, 3), dict(padding="valid", stride=3)),
    (2, (2, 4, 6, 6), (6, 2, 3, 3), dict(groups=2, stride=2, padding=1)),
    (2, (2, 3, 6, 5), (6, 1, 3, 3), dict(groups=3, padding=(0, 1))),      # depthwise, multiplier 2
    (2, (3, 6, 5), (4, 3, 2, 2), dict(stride=(1, 2))),                    # unbatched
    (2, (1, 2, 3, 3), (2, 2, 3, 3), dict()),                              # kernel as large as the input
    (3, (2, 2, 5, 4, 5), (3, 2, 2, 3, 2), dict(stride=(1, 2, 1), padding=(1, 0, 1), dilation=(2, 1, 1))),
    (3, (2, 4, 4, 4, 3), (4, 2, 3, 2, 2), dict(groups=2, padding="same")),
    (3, (2, 4, 3, 5), (2, 2, 2, 2, 2), dict(stride=2)),                   # unbatched
]

# (rank, input shape, weight shape, kwargs): weight is (C_in, C_out / groups, *kernel)
CONV_T_CASES = [
    (1, (2, 3, 5), (3, 2, 4), dict(stride=3, padding=2, output_padding=2)),
    (1, (4, 6), (4, 1, 3), dict(groups=4, dilation=2)),                   # unbatched, depthwise
    (2, (2, 4, 4, 5), (4, 3, 3, 3), dict(stride=2, padding=1, output_padding=1)),
    (2, (2, 4, 4, 5), (4, 3, 3, 2), dict(stride=(2, 3), padding=(0, 1), output_padding=(1, 2))),
    (2, (2, 4, 4, 5), (4, 3, 3, 3), dict(dilation=2, output_padding=1)),  # output_padding < dilation
    (2, (2, 4, 4, 4), (4, 3, 2, 2), dict(groups=2, stride=2)),
    (2, (2, 4, 5, 4), (4, 1, 3, 3), dict(groups=4, stride=(1, 2), padding=1)),
    (2, (2, 3, 5, 4), (3, 2, 2, 2), dict(stride=2, padding=2)),           # padding > dilation * (k - 1): crops
    (2, (3, 4, 5), (3, 2, 3, 2), dict()),                                 # unbatched
    (3, (1, 2, 3, 3, 2), (2, 2, 2, 2, 3), dict(stride=(2, 1, 2), padding=(0, 1, 1), output_padding=(1, 0, 0))),
    (3, (2, 4, 2, 3, 2), (4, 1, 2, 2, 2), dict(groups=2, dilation=(1, 2, 1))),
]


def _case_id(case):
    n, x, w, kw = case
    return f"{n}d-{x}-{w}-" + ",".join(f"{k}={v}" for k, v in kw.items())


def _torch_ref(torch_fn, x, w, b, kwargs):
    import torch
    t = lambda a: None if a is None else torch.from_numpy(a)
    return torch_fn(t(x), t(w), t(b), **kwargs).numpy()


@pytest.mark.peer("torch")
@pytest.mark.filterwarnings("ignore:Using padding='same' with even kernel")  # torch's own performance note
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("case", CONV_CASES, ids=_case_id)
def test_conv_matches_torch(case, bias, dtype):
    import torch
    n, x_shape, w_shape, kwargs = case
    x, w = _draw(x_shape, dtype, 0), _draw(w_shape, dtype, 1)
    b = _draw(w_shape[:1], dtype, 2) if bias else None
    out = CONV[n](x, w, b, **kwargs)
    _close(out, _torch_ref(getattr(torch.nn.functional, f"conv{n}d"), x, w, b, kwargs), dtype)


@pytest.mark.peer("torch")
def test_conv2d_broadcasts_one_tuples_like_torch():
    """PyTorch takes a 1-tuple for a 2-d stride, padding or dilation, and repeats it."""
    import torch
    x, w = _draw((2, 3, 9, 9)), _draw((4, 3, 3, 3), seed=1)
    kwargs = dict(stride=(2,), padding=(1,), dilation=(2,))
    _close(conv2d(x, w, None, **kwargs), _torch_ref(torch.nn.functional.conv2d, x, w, None, kwargs), np.float64)
    with pytest.raises(TypeError, match="conv2d: stride"):
        conv2d(x, w, stride=(2, 2, 2))
    with pytest.raises(TypeError, match="conv2d: stride"):
        conv2d(x, w, stride=2.0)


@pytest.mark.peer("torch")
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("case", CONV_T_CASES, ids=_case_id)
def test_conv_transpose_matches_torch(case, bias, dtype):
    import torch
    n, x_shape, w_shape, kwargs = case
    x, w = _draw(x_shape, dtype, 0), _draw(w_shape, dtype, 1)
    b = _draw((w_shape[1] * kwargs.get("groups", 1),), dtype, 2) if bias else None
    out = CONV_T[n](x, w, b, **kwargs)
    _close(out, _torch_ref(getattr(torch.nn.functional, f"conv_transpose{n}d"), x, w, b, kwargs), dtype)


def test_conv_transpose_is_the_input_gradient_of_conv():
    """What conv_transpose2d is for: with the same stride, padding and weight, it is the vjp of conv2d
    with respect to the input (output_padding recovers the size a stride rounded away)."""
    x, w = _draw((2, 3, 8, 7)), _draw((4, 3, 3, 3), seed=1)
    out, vjp_fn = tg.vjp(lambda a: conv2d(a, w, stride=2, padding=1), x)
    ct = _draw(out.shape, seed=2)
    assert_close(conv_transpose2d(ct, w, stride=2, padding=1, output_padding=(1, 0)),
                 vjp_fn(ct)[0], rtol=1e-12, atol=1e-12)


def test_float32_stays_float32_and_mixed_dtypes_promote():
    x, w = _draw((2, 3, 6, 6), np.float32), _draw((4, 3, 3, 3), np.float32, 1)
    assert conv2d(x, w, _draw((4,), np.float32)).dtype == np.float32
    assert conv_transpose2d(x[:, :3], w[:3], stride=2).dtype == np.float32
    g = tg.grad(lambda a, b: tnp.sum(conv2d(a, b) ** 2), grad_position=(0, 1))(x, w)
    assert g[0].dtype == np.float32 and g[1].dtype == np.float32
    assert conv2d(x, w.astype(np.float64)).dtype == np.float64
    # each gradient keeps its operand's dtype, as in every binary rule (no upcast of the float32 input)
    g = tg.grad(lambda a, b: tnp.sum(conv2d(a, b)), grad_position=(0, 1))(x, w.astype(np.float64))
    assert g[0].dtype == np.float32 and g[1].dtype == np.float64


def test_padding_and_dimension_numbers_refuse_non_ints():
    x, w = _draw((1, 1, 5)), _draw((1, 1, 2))
    with pytest.raises(TypeError, match="padding"):
        conv_general_dilated(x, w, None, ((1.7, 1),))
    with pytest.raises(TypeError, match="dimension_numbers"):
        conv_general_dilated(x, w, None, "VALID", dimension_numbers=((0, 1, 2.0),) * 3)


@pytest.mark.peer("torch")
def test_non_contiguous_operands():
    """Transposed, reversed and strided views go through the strided-window impl unchanged."""
    import torch
    x = _draw((5, 6, 3, 2)).transpose(3, 2, 1, 0)[:, :, ::-1, ::2]     # (2, 3, 6, 3), negative strides
    w = _draw((4, 3, 3, 2), seed=1)[:, :, ::-1]
    ref = torch.nn.functional.conv2d(torch.from_numpy(x.copy()), torch.from_numpy(w.copy()), padding=1, stride=2)
    _close(conv2d(x, w, padding=1, stride=2), ref.numpy(), np.float64)


@pytest.mark.peer("torch")
def test_empty_batch():
    import torch
    x, w = np.zeros((0, 3, 5, 5)), _draw((4, 3, 3, 3))
    out = conv2d(x, w, padding=1)
    assert out.shape == tuple(torch.nn.functional.conv2d(torch.from_numpy(x), torch.from_numpy(w),
                                                         padding=1).shape)


# ---- conv_general_dilated against the naive reference ------------------------------------------------

# (lhs shape, rhs shape, window_strides, padding, lhs_dilation, rhs_dilation, feature groups, batch groups)
GENERAL_CASES = [
    ((2, 3, 7), (4, 3, 3), (2,), ((1, 2),), (1,), (1,), 1, 1),
    ((2, 3, 7), (4, 3, 3), (1,), ((-1, 2),), (2,), (1,), 1, 1),           # lhs dilation, negative padding
    ((2, 4, 6), (4, 2, 2), (3,), "SAME", (1,), (2,), 2, 1),
    ((6, 2, 5), (4, 2, 3), (2,), "VALID", (3,), (1,), 1, 2),              # batch groups, lhs dilation
    ((2, 4, 7, 6), (6, 2, 3, 2), (2, 1), ((1, -1), (2, 0)), (2, 1), (1, 2), 2, 1),
    ((4, 3, 6, 5), (6, 3, 2, 3), (1, 2), "SAME", (1, 1), (2, 1), 1, 2),
    ((4, 3, 6, 5), (6, 3, 2, 3), (1, 2), ((1, 2), (0, -1)), (1, 2), (2, 1), 1, 2),
    ((2, 3, 5, 6), (4, 3, 2, 2), (2, 2), "SAME", (2, 1), (1, 1), 1, 1),   # SAME on the dilated input
    ((2, 3, 5, 6), (4, 3, 3, 2), (1, 1), "VALID", (1, 1), (1, 1), 1, 1),
    ((2, 3, 5, 6), (3, 1, 3, 3), (1, 1), ((-1, -1), (1, 1)), (1, 1), (1, 1), 3, 1),  # depthwise
    ((3, 4, 5, 4, 3), (4, 2, 2, 1, 2), (1, 2, 1), ((0, 1), (1, 1), (-1, 0)), (1, 1, 2), (2, 1, 1), 2, 1),
    ((4, 2, 3, 4, 3), (4, 2, 2, 2, 2), (2, 1, 1), "SAME", (1, 1, 1), (1, 2, 1), 1, 2),
    # the kernel outgrows the input (a kernel gradient's own derivative): computed with the roles exchanged
    ((2, 3, 2), (4, 3, 6), (1,), ((5, 4),), (1,), (1,), 1, 1),
    ((2, 3, 3, 2), (4, 3, 5, 4), (1, 1), ((4, 3), (3, 3)), (1, 1), (1, 1), 1, 1),
    ((2, 2, 3, 3), (3, 2, 4, 5), (1, 1), ((2, -1), (4, 1)), (1, 1), (1, 1), 1, 1),
]


def _general_id(case):
    lhs, rhs, st, pad, ld, rd, fg, bg = case
    return f"{lhs}x{rhs}-s{st}-p{pad}-ld{ld}-rd{rd}-fg{fg}-bg{bg}".replace(" ", "")


def _general(case, dimension_numbers=None):
    lhs_shape, rhs_shape, strides, padding, lhs_dil, rhs_dil, fg, bg = case
    return lambda x, w: conv_general_dilated(x, w, strides, padding, lhs_dil, rhs_dil, dimension_numbers, fg, bg)


@pytest.mark.parametrize("case", GENERAL_CASES, ids=_general_id)
def test_conv_general_dilated_matches_naive_reference(case):
    lhs_shape, rhs_shape, strides, padding, lhs_dil, rhs_dil, fg, bg = case
    x, w = _draw(lhs_shape), _draw(rhs_shape, seed=1)
    _close(_general(case)(x, w), naive_conv(x, w, strides, padding, lhs_dil, rhs_dil, fg, bg), np.float64)
    x32, w32 = x.astype(np.float32), w.astype(np.float32)
    _close(_general(case)(x32, w32), naive_conv(x, w, strides, padding, lhs_dil, rhs_dil, fg, bg).astype(np.float32),
           np.float32)


@pytest.mark.parametrize("case", [c for c in GENERAL_CASES if c[4] == c[5] == (1,) * len(c[2])
                                  and c[2] == (1,) * len(c[2]) and c[6] == c[7] == 1], ids=_general_id)
def test_both_impl_strategies_agree(case):
    """im2col over the input, over the kernel (``_conv_kernel_as_image``) and the shifted slices of the flat
    padded grid (``_conv_flat``, over the kernel's offsets or over the output's positions) give the same
    values, whichever the impl picks for these shapes."""
    from tapegrad.nn import _conv
    x_shape, w_shape, strides, padding, lhs_d, rhs_d, _, _ = case
    x, w = _draw(x_shape), _draw(w_shape, seed=1)
    if isinstance(padding, str):
        padding = tuple(zip(*[(0,) * len(strides)] * 2))
    args = (np, x, w, strides, padding, lhs_d, rhs_d, 1, 1)
    reference = _conv._conv_canonical(*args)
    assert_close(_conv._conv_kernel_as_image(*args), reference, rtol=1e-12, atol=1e-12)
    for shift in (_conv._shift_kernel, _conv._shift_output):  # both, whichever _conv_flat would pick
        assert_close(shift(np, x, w, padding, lhs_d, rhs_d, reference.shape[2:]), reference, rtol=1e-12,
                     atol=1e-12)


# unit strides, one group, with the dilations and negative paddings the flat-grid shifts must handle
FLAT_CASES = [
    ((2, 3, 7), (4, 3, 3), ((-1, 2),), (2,), (1,)),
    ((2, 3, 7), (4, 3, 2), ((2, 0),), (1,), (3,)),
    ((3, 2, 5, 6), (4, 2, 3, 2), ((1, -1), (2, 0)), (2, 1), (1, 2)),
    ((1, 3, 4, 5), (2, 3, 4, 5), ((1, 1), (0, 2)), (1, 1), (1, 1)),        # output smaller than the kernel
    ((5, 2, 4, 5), (3, 2, 3, 4), ((1, 0), (0, 1)), (1, 1), (2, 1)),        # the same with 4 or more examples
    ((2, 2, 4, 3, 5), (3, 2, 2, 1, 3), ((0, 1), (1, 1), (-1, 0)), (1, 1, 2), (2, 1, 1)),
]


@pytest.mark.parametrize("case", FLAT_CASES, ids=str)
def test_flat_grid_shifts_match_the_naive_reference(case):
    """Both flat-grid strategies (shifts over the kernel's offsets, shifts over the output's positions),
    whichever ``_conv_flat`` picks, against the naive convolution, in float64 and float32."""
    from tapegrad.nn import _conv
    x_shape, w_shape, padding, lhs_d, rhs_d = case
    x, w = _draw(x_shape), _draw(w_shape, seed=1)
    ones = (1,) * len(padding)
    reference = naive_conv(x, w, ones, padding, lhs_d, rhs_d, 1, 1)
    for dtype in (np.float64, np.float32):
        xd, wd = x.astype(dtype), w.astype(dtype)
        for shift in (_conv._shift_kernel, _conv._shift_output):
            _close(shift(np, xd, wd, padding, lhs_d, rhs_d, reference.shape[2:]), reference.astype(dtype), dtype)
        _close(_conv._conv_flat(np, xd, wd, padding, lhs_d, rhs_d), reference.astype(dtype), dtype)


def test_conv_general_dilated_complex():
    x = _draw((2, 2, 6)) + 1j * _draw((2, 2, 6), seed=3)
    w = _draw((4, 1, 3), seed=1) - 2j * _draw((4, 1, 3), seed=4)
    out = conv_general_dilated(x, w, (2,), ((1, 0),), (1,), (2,), None, 2)
    _close(out, naive_conv(x, w, (2,), ((1, 0),), (1,), (2,), 2), np.complex128)


def _layout(canonical, letters: str, roles: str):
    """``canonical`` (roles in the order of ``roles``, e.g. 'NCHW') transposed to the layout ``letters``."""
    return canonical.transpose([roles.index(c) for c in letters])


# (lhs, rhs, out) layouts; the spatial roles are the kernel string's spatial letters in its order
STRING_SPECS = [("NHWC", "HWIO", "NHWC"), ("NCHW", "OIHW", "NCHW"), ("CNWH", "IOWH", "WHCN"),
                ("NHWC", "OHWI", "NCHW")]


@pytest.mark.parametrize("specs", STRING_SPECS, ids="-".join)
@pytest.mark.parametrize("case", [GENERAL_CASES[4], GENERAL_CASES[5], GENERAL_CASES[7]], ids=_general_id)
def test_dimension_numbers_as_strings(case, specs):
    lhs_letters, rhs_letters, out_letters = specs
    spatial = "".join(c for c in rhs_letters if c not in "OI")
    x, w = _draw(case[0]), _draw(case[1], seed=1)
    ref = naive_conv(x, w, *case[2:])
    out = _general(case, specs)(_layout(x, lhs_letters, "NC" + spatial), _layout(w, rhs_letters, "OI" + spatial))
    _close(out, _layout(ref, out_letters, "NC" + spatial), np.float64)


@pytest.mark.parametrize("case", [GENERAL_CASES[3], GENERAL_CASES[4], GENERAL_CASES[10]], ids=_general_id)
def test_dimension_numbers_as_axis_tuples(case):
    rng = np.random.default_rng(5)
    nd = len(case[0])
    specs = ConvDimensionNumbers(*(tuple(int(i) for i in rng.permutation(nd)) for _ in range(3)))
    x, w = _draw(case[0]), _draw(case[1], seed=1)
    ref = naive_conv(x, w, *case[2:])
    # an operand's axis spec[i] holds canonical role i
    out = _general(case, specs)(x.transpose(np.argsort(specs.lhs_spec)), w.transpose(np.argsort(specs.rhs_spec)))
    _close(out, ref.transpose(np.argsort(specs.out_spec)), np.float64)


# ---- derivatives: check_grads to order 2, both modes ------------------------------------------------

# every GENERAL_CASES entry with both operands, plus the input alone and the kernel alone for a few
@pytest.mark.parametrize("case", GENERAL_CASES, ids=_general_id)
def test_conv_general_dilated_grads(case):
    x, w = _draw(case[0]), _draw(case[1], seed=1)
    fn = _general(case)
    check_grads(fn, (x, w), order=2, name="conv_general_dilated")


@pytest.mark.parametrize("case", [GENERAL_CASES[1], GENERAL_CASES[3], GENERAL_CASES[6], GENERAL_CASES[9]],
                         ids=_general_id)
def test_conv_grads_one_operand(case):
    x, w = _draw(case[0]), _draw(case[1], seed=1)
    fn = _general(case)
    check_grads(lambda a: fn(a, w), (x,), order=2, name="conv wrt lhs")
    check_grads(lambda b: fn(x, b), (w,), order=2, name="conv wrt rhs")


@pytest.mark.parametrize("specs", [("NHWC", "HWIO", "NHWC"), ("CNWH", "IOWH", "WHCN")], ids="-".join)
def test_conv_grads_with_dimension_numbers(specs):
    case = GENERAL_CASES[4]
    lhs_letters, rhs_letters, _ = specs
    spatial = "".join(c for c in rhs_letters if c not in "OI")
    x = _layout(_draw(case[0]), lhs_letters, "NC" + spatial)
    w = _layout(_draw(case[1], seed=1), rhs_letters, "OI" + spatial)
    check_grads(_general(case, specs), (x, w), order=2, name=f"conv {specs}")
    check_grads(_general(GENERAL_CASES[5], specs),
                (_layout(_draw(GENERAL_CASES[5][0]), lhs_letters, "NC" + spatial),
                 _layout(_draw(GENERAL_CASES[5][1], seed=1), rhs_letters, "OI" + spatial)), order=2)


def test_conv_grads_complex():
    x = _draw((2, 2, 5)) + 1j * _draw((2, 2, 5), seed=3)
    w = _draw((2, 2, 3), seed=1) - 1j * _draw((2, 2, 3), seed=4)
    check_grads(lambda a, b: conv_general_dilated(a, b, (2,), ((1, 1),)), (x, w), order=2)


@pytest.mark.parametrize("case", CONV_CASES[::2] + CONV_T_CASES[::2], ids=_case_id)
def test_torch_style_grads(case):
    n, x_shape, w_shape, kwargs = case
    fn = (CONV if case in CONV_CASES else CONV_T)[n]
    out_channels = w_shape[0] if case in CONV_CASES else w_shape[1] * kwargs.get("groups", 1)
    x, w, b = _draw(x_shape), _draw(w_shape, seed=1), _draw((out_channels,), seed=2)
    check_grads(lambda a, k, c: fn(a, k, c, **kwargs), (x, w, b), order=2, name=fn.__name__)


@pytest.mark.peer("torch")
def test_grad_and_grad_of_grad_match_torch():
    """A gradient penalty through conv2d: d/dw |d loss / dx|^2, against torch's double backward."""
    import torch
    x, w = _draw((2, 3, 6, 5)), _draw((4, 3, 3, 2), seed=1)

    def loss(a, k):
        return tnp.sum(tnp.tanh(conv2d(a, k, stride=(2, 1), padding=1, dilation=(1, 2))))

    def penalty(a, k):
        return tnp.sum(tg.grad(loss)(a, k) ** 2)

    xt, wt = torch.tensor(x, requires_grad=True), torch.tensor(w, requires_grad=True)
    lt = torch.tanh(torch.nn.functional.conv2d(xt, wt, stride=(2, 1), padding=1, dilation=(1, 2))).sum()
    (gx,) = torch.autograd.grad(lt, xt, create_graph=True)
    gw_t = torch.autograd.grad((gx ** 2).sum(), wt)[0].numpy()
    assert_close(tg.grad(loss)(x, w), gx.detach().numpy(), rtol=1e-12, atol=1e-12)
    assert_close(tg.grad(penalty, grad_position=1)(x, w), gw_t, rtol=1e-10, atol=1e-12)


# ---- vmap --------------------------------------------------------------------------------------------

VMAP_CASES = {
    "plain": (GENERAL_CASES[0], None),
    "strided_lhs_dilated": (GENERAL_CASES[4], None),
    "grouped": (GENERAL_CASES[2], None),
    "depthwise": (GENERAL_CASES[9], None),
    "batch_grouped": (GENERAL_CASES[5], None),
    "batch_grouped_1d": (GENERAL_CASES[3], None),
    "nhwc": (GENERAL_CASES[4], ("NHWC", "HWIO", "NHWC")),
    "nhwc_batch_grouped": (GENERAL_CASES[6], ("NHWC", "HWIO", "NHWC")),
    "shuffled": (GENERAL_CASES[5], ("CNWH", "IOWH", "WHCN")),
}


@pytest.mark.parametrize("name", list(VMAP_CASES))
def test_vmap_against_a_loop(name):
    """in_axes (0, 0), (1, 1), (-1, -1), (None, -1), (0, None): both operands batched, at non-zero axes,
    and each one alone."""
    case, specs = VMAP_CASES[name]
    x, w = _draw(case[0]), _draw(case[1], seed=1)
    if specs is not None:
        spatial = "".join(c for c in specs[1] if c not in "OI")
        x, w = _layout(x, specs[0], "NC" + spatial), _layout(w, specs[1], "OI" + spatial)
    check_vmap_mixes(_general(case, specs), (x, w))


def test_vmap_of_unbatched_torch_style_examples():
    x, w, b = _draw((3, 6, 5)), _draw((4, 3, 2, 2), seed=1), _draw((4,), seed=2)
    check_vmap_mixes(lambda a, k, c: conv2d(a, k, c, stride=(1, 2), padding=1), (x, w, b))
    check_vmap_mixes(lambda a, k: conv_transpose2d(a, k, stride=2, output_padding=1, groups=3), (x, w[:3]))


def test_nested_vmap():
    x, w = _draw((2, 3, 5, 4)), _draw((4, 3, 2, 2), seed=1)
    inner = tg.vmap(lambda a, k: conv2d(a, k, padding=1), in_axes=(None, 0))
    check_vmap(inner, (x, np.stack([w, 2 * w])), in_axes=(0, None),
               ref=lambda a, ks: np.stack([conv2d(a, k, padding=1) for k in ks]))


def test_per_example_gradients():
    """vmap(grad) of a conv loss: each example's weight and input gradients, as a loop of grad."""
    x, w = _draw((5, 2, 6, 6)), _draw((3, 2, 3, 3), seed=1)
    y = _draw((5, 3, 3, 3), seed=2)

    def loss(k, a, t):
        return tnp.sum((conv2d(a, k, stride=2, padding=1) - t) ** 2)

    per_example = tg.vmap(tg.grad(loss, grad_position=(0, 1)), in_axes=(None, 0, 0))(w, x, y)
    for i in range(len(x)):
        gw, gx = tg.grad(loss, grad_position=(0, 1))(w, x[i], y[i])
        assert_close(per_example[0][i], gw, rtol=1e-12, atol=1e-12)
        assert_close(per_example[1][i], gx, rtol=1e-12, atol=1e-12)


def test_per_example_gradients_of_a_grouped_conv():
    x, w = _draw((4, 4, 5, 5)), _draw((6, 2, 2, 3), seed=1)

    def loss(k, a):
        return tnp.sum(tnp.tanh(conv2d(a, k, groups=2, dilation=(2, 1))))

    out = tg.vmap(tg.grad(loss), in_axes=(None, 0))(w, x)
    assert_close(out, np.stack([tg.grad(loss)(w, a) for a in x]), rtol=1e-12, atol=1e-12)


# ---- jit ---------------------------------------------------------------------------------------------

def test_jit_equals_eager_and_stages_one_convolution():
    x, w, b = _draw((2, 3, 7, 6)), _draw((4, 3, 3, 2), seed=1), _draw((4,), seed=2)
    fn = lambda a, k, c: conv2d(a, k, c, stride=2, padding=(1, 0), dilation=(1, 2))
    np.testing.assert_array_equal(tg.jit(fn)(x, w, b), fn(x, w, b))
    np.testing.assert_array_equal(tg.jit(conv2d)(x, w), conv2d(x, w))
    program = tg.make_program(lambda a, k: conv2d(a, k, stride=2))(x, w)
    program.typecheck()
    assert [e.prim for e in program.eqns] == [conv_general_dilated_p]
    assert "conv_general_dilated" in str(program)


def test_jit_of_grad_and_grad_of_jit():
    x, w = _draw((2, 3, 6, 5)), _draw((4, 3, 3, 2), seed=1)
    loss = lambda a, k: tnp.sum(tnp.sin(conv2d(a, k, padding=1, groups=1)))
    eager = tg.grad(loss, grad_position=(0, 1))(x, w)
    for route in (tg.jit(tg.grad(loss, grad_position=(0, 1))), tg.grad(tg.jit(loss), grad_position=(0, 1))):
        for got, want in zip(route(x, w), eager):
            assert_close(got, want, rtol=1e-12, atol=1e-12)
    hess_vec = lambda a, k: tg.grad(lambda b: tnp.sum(tg.grad(loss)(b, k) * a))(a)
    assert_close(tg.jit(hess_vec)(x, w), hess_vec(x, w), rtol=1e-12, atol=1e-12)


# ---- errors: the type, and a message that names the argument ---------------------------------------

X4, W4 = _draw((1, 4, 5, 5)), _draw((6, 2, 3, 3))
ERRORS = [
    ("input rank", lambda: conv2d(X4[0, 0], W4), ValueError, "input"),
    ("weight rank", lambda: conv2d(X4, W4[0]), ValueError, "weight"),
    ("channels vs groups", lambda: conv2d(X4, W4, groups=1), ValueError, "groups"),
    ("groups not positive", lambda: conv2d(X4, W4, groups=0), ValueError, "groups"),
    ("groups not an int", lambda: conv2d(X4, W4, groups=2.0), TypeError, "groups"),
    ("bias shape", lambda: conv2d(X4, W4, np.zeros(5), groups=2), ValueError, "bias"),
    ("same with stride", lambda: conv2d(X4, W4, groups=2, padding="same", stride=2), ValueError, "same"),
    ("unknown padding word", lambda: conv2d(X4, W4, groups=2, padding="full"), ValueError, "padding"),
    ("padding wrong length", lambda: conv2d(X4, W4, groups=2, padding=(1, 1, 1)), TypeError, "padding"),
    ("negative padding", lambda: conv2d(X4, W4, groups=2, padding=-1), ValueError, "padding"),
    ("stride zero", lambda: conv2d(X4, W4, groups=2, stride=0), ValueError, "stride"),
    ("dilation not ints", lambda: conv2d(X4, W4, groups=2, dilation=(1.5, 1)), TypeError, "dilation"),
    ("kernel larger than input", lambda: conv2d(X4[..., :2, :], W4, groups=2), ValueError, "kernel"),
    ("output_padding too large",
     lambda: conv_transpose2d(X4, W4[:4], stride=2, output_padding=2), ValueError, "output_padding"),
    ("transpose channels", lambda: conv_transpose2d(X4, W4), ValueError, "channels"),
    ("transpose bias", lambda: conv_transpose2d(X4, W4[:4], np.zeros(3)), ValueError, "bias"),
    ("general ranks differ", lambda: conv_general_dilated(X4, W4[0]), ValueError, "rhs"),
    ("general rank < 3", lambda: conv_general_dilated(X4[0, 0], W4[0, 0]), ValueError, "at least 3"),
    ("general padding length",
     lambda: conv_general_dilated(X4, W4, padding=((1, 1),), feature_group_count=2), ValueError, "padding"),
    ("general padding word",
     lambda: conv_general_dilated(X4, W4, padding="FULL", feature_group_count=2), ValueError, "padding"),
    ("general lhs_dilation", lambda: conv_general_dilated(X4, W4, lhs_dilation=(0, 1), feature_group_count=2),
     ValueError, "lhs_dilation"),
    ("general strides length", lambda: conv_general_dilated(X4, W4, (1, 1, 1), feature_group_count=2),
     TypeError, "window_strides"),
    ("general feature groups", lambda: conv_general_dilated(X4, W4), ValueError, "feature_group_count"),
    ("general both groups",
     lambda: conv_general_dilated(X4, W4, feature_group_count=2, batch_group_count=2), ValueError,
     "batch_group_count"),
    ("general batch groups",
     lambda: conv_general_dilated(_draw((3, 4, 5, 5)), _draw((6, 4, 3, 3)), batch_group_count=2), ValueError,
     "batch_group_count"),
    ("general dimension_numbers letters",
     lambda: conv_general_dilated(X4, W4, dimension_numbers=("NHWC", "HWIO", "NHW"), feature_group_count=2),
     ValueError, "dimension_numbers"),
    ("general dimension_numbers missing role",
     lambda: conv_general_dilated(X4, W4, dimension_numbers=("NHWC", "HWIX", "NHWC"), feature_group_count=2),
     ValueError, "dimension_numbers"),
    ("general dimension_numbers not a permutation",
     lambda: conv_general_dilated(X4, W4, dimension_numbers=((0, 1, 2, 2), (0, 1, 2, 3), (0, 1, 2, 3)),
                                  feature_group_count=2), ValueError, "dimension_numbers"),
    ("integer input", lambda: conv2d(np.ones((1, 4, 5, 5), np.int64), W4, groups=2), TypeError, "float"),
    ("general integer lhs", lambda: conv_general_dilated(np.ones((1, 4, 5, 5), int), W4, feature_group_count=2),
     TypeError, "lhs"),
]


@pytest.mark.parametrize("name, call, error, word", ERRORS, ids=[e[0] for e in ERRORS])
def test_errors_name_the_argument(name, call, error, word):
    with pytest.raises(error, match=word):
        call()


def test_integer_input_error_names_conv2ds_argument():
    with pytest.raises(TypeError, match="conv2d: input"):
        conv2d(np.ones((1, 4, 5, 5), np.int64), W4, groups=2)


def test_out_channels_not_divisible_by_groups_names_groups():
    with pytest.raises(ValueError, match="conv2d.*groups"):
        conv2d(X4, _draw((5, 2, 3, 3)), groups=2)


# ---- CuPy ---------------------------------------------------------------------------------------------

@pytest.mark.gpu
def test_cupy_conv2d_forward_and_backward_match_numpy():
    cupy = cupy_or_skip()
    x, w, b = _draw((2, 4, 9, 8), np.float32), _draw((6, 2, 3, 3), np.float32, 1), _draw((6,), np.float32, 2)

    def loss(a, k, c):
        return tnp.sum(tnp.tanh(conv2d(a, k, c, stride=2, padding=1, groups=2)))

    args = (x, w, b)
    gpu_args = tuple(cupy.asarray(a) for a in args)
    out = conv2d(*gpu_args, stride=2, padding=1, groups=2)
    assert isinstance(out, cupy.ndarray) and out.dtype == np.float32
    assert_close(cupy.asnumpy(out), conv2d(*args, stride=2, padding=1, groups=2),
                 rtol=1e-4, atol=1e-5)
    grads = tg.grad(loss, grad_position=(0, 1, 2))(*gpu_args)
    for g, want in zip(grads, tg.grad(loss, grad_position=(0, 1, 2))(*args)):
        assert isinstance(g, cupy.ndarray) and g.dtype == np.float32
        assert_close(cupy.asnumpy(g), want, rtol=1e-4, atol=1e-5)
    # the im2col path (lhs dilation and batch groups, which cuDNN's branch leaves out)
    xs, ws = _draw(GENERAL_CASES[6][0]), _draw(GENERAL_CASES[6][1], seed=1)
    fn = _general(GENERAL_CASES[6])
    assert_close(cupy.asnumpy(fn(cupy.asarray(xs), cupy.asarray(ws))), fn(xs, ws), rtol=1e-12)


@pytest.mark.parametrize("block", [512, 4096])
def test_kernel_gradient_in_blocks(monkeypatch, block):
    """A kernel gradient's long reduction (3,442 long here) cut into blocks (7 of 512, or one) gives the
    einsum of the input's windows with the cotangent."""
    from tapegrad.nn import _conv
    monkeypatch.setattr(_conv, "_BLOCK", block)
    x, w, ct = _draw((2, 3, 40, 40)), _draw((4, 3, 3, 3), seed=1), _draw((2, 4, 40, 40), seed=2)
    grad_w = tg.grad(lambda w: tnp.sum(conv2d(x, w, padding=1) * ct))(w)
    windows = np.lib.stride_tricks.sliding_window_view(np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1))), (3, 3), (2, 3))
    _close(grad_w, np.einsum("nohw,nchwij->ocij", ct, windows), np.float64)
