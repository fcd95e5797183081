"""tapegrad.numpy.fft's Hermitian transforms (hfft, ihfft) and sample frequencies (fftfreq,
rfftfreq): values and dtypes against numpy.fft, derivatives by check_grads to order 2 in both modes
(complex inputs get complex directions), vmap against a loop, jit, and plain np.fft dispatch."""
from __future__ import annotations

import numpy as np
import pytest

import tapegrad as tg
from _specs import OpSpec
from _tol import assert_close
from _vmapcheck import check_vmap
from tapegrad.numpy import fft as tfft
from tapegrad.testing import check_grads
from test_fft import _draw

DTYPES = [np.float64, np.float32]


# (spec, input kind, n for a length-5 axis: None, shorter, longer)
HERMITIAN = [
    (OpSpec("hfft", tfft.hfft, np.fft.hfft, ("complex",)), (None, 6, 9)),
    (OpSpec("ihfft", tfft.ihfft, np.fft.ihfft, ("real",)), (None, 3, 8)),
]


@pytest.mark.parametrize("dtype", DTYPES, ids=["float64", "float32"])
@pytest.mark.parametrize("norm", [None, "ortho", "forward"])
@pytest.mark.parametrize("axis", [0, -1])
@pytest.mark.parametrize("n_index", [0, 1, 2], ids=["n=None", "n shorter", "n longer"])
@pytest.mark.parametrize("spec,lengths", HERMITIAN, ids=[s.name for s, _ in HERMITIAN])
def test_hermitian_transforms(spec, lengths, n_index, axis, norm, dtype):
    x = _draw((5, 3) if axis == 0 else (2, 5), dtype, spec.domains[0])
    kwargs = dict(n=lengths[n_index], axis=axis, norm=norm)
    ours, theirs = spec.op(x, **kwargs), spec.ref(x, **kwargs)
    assert ours.shape == theirs.shape and ours.dtype == theirs.dtype, (ours.dtype, theirs.dtype)
    assert_close(ours, theirs, rtol=1e-5 if dtype == np.float32 else 1e-12)
    check_grads(lambda a: spec.op(a, **kwargs), (x,), order=2, name=f"{spec.name}{kwargs}")


@pytest.mark.parametrize("spec,lengths", HERMITIAN, ids=[s.name for s, _ in HERMITIAN])
def test_hermitian_transforms_vmap_jit_and_dispatch(spec, lengths):
    x = _draw((2, 5), np.float64, spec.domains[0])
    check_vmap(lambda a: spec.op(a, n=lengths[2]), (x,), in_axes=(1,))
    assert_close(tg.jit(lambda a: spec.op(a, norm="ortho"))(x), spec.ref(x, norm="ortho"))
    # a plain np.fft call on a traced value reaches tapegrad's function
    g = tg.grad(lambda a: np.real(spec.ref(a)).sum())(x)
    assert_close(g, tg.grad(lambda a: tg.numpy.real(spec.op(a)).sum())(x))


def test_hfft_inverts_ihfft_and_takes_real_input():
    x = _draw((7,), np.float64, "real")
    assert_close(tfft.hfft(tfft.ihfft(x), n=7), x)
    assert_close(tfft.hfft(x), np.fft.hfft(x))  # real input is taken as complex, as in NumPy


def test_ihfft_refuses_complex_input():
    with pytest.raises(TypeError, match="must be real"):
        tfft.ihfft(_draw((4,), np.float64, "complex"))


# ---- sample frequencies -------------------------------------------------------------------------
FREQS = [OpSpec("fftfreq", tfft.fftfreq, np.fft.fftfreq), OpSpec("rfftfreq", tfft.rfftfreq, np.fft.rfftfreq)]


@pytest.mark.parametrize("d", [1.0, 0.25, np.float32(0.5)], ids=["default", "0.25", "float32"])
@pytest.mark.parametrize("n", [1, 2, 5, 8])
@pytest.mark.parametrize("spec", FREQS, ids=repr)
def test_frequencies_values_and_dtype(spec, n, d):
    ours, theirs = spec.op(n, d), spec.ref(n, d)
    assert ours.shape == theirs.shape and ours.dtype == theirs.dtype
    assert_close(ours, theirs)


@pytest.mark.parametrize("spec", FREQS, ids=repr)
def test_frequencies_are_differentiable_in_the_spacing(spec):
    d = np.float64(0.3)
    counts = spec.ref(6, 1.0) * 6  # the integer frequency counts k: f = k / (n d), df/dd = -k / (n d^2)
    jac = tg.jacrev(lambda s: spec.op(6, s))(d)
    assert_close(jac, -counts / (6 * d * d))
    check_grads(lambda s: spec.op(6, s), (d,), order=2, name=spec.name)
    check_vmap(lambda s: spec.op(6, s), (np.array(0.3),), in_axes=(0,))
    assert_close(tg.jit(lambda s: spec.op(6, s))(d), spec.ref(6, d))


@pytest.mark.parametrize("spec", FREQS, ids=repr)
def test_frequencies_dtype_keyword_and_errors(spec):
    assert spec.op(4, dtype=np.float32).dtype == np.float32
    with pytest.raises(ValueError, match="n must be a positive int"):
        spec.op(0)
    with pytest.raises(TypeError, match="n must be an int"):
        spec.op(4.0)
