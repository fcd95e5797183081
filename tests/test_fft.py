"""tapegrad.numpy.fft: every transform crossed with lengths (odd, even), n/s (shorter, longer),
axes, norms and dtypes; values and dtypes against numpy.fft, derivatives by check_grads to order 2 in
both modes (complex inputs get complex directions, JAX's conventions)."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import tapegrad as tg
import tapegrad.numpy as tnp
from _gpu import cupy_or_skip
from _tol import assert_close
from tapegrad.numpy import fft as tfft
from tapegrad.testing import check_grads

NORMS = [None, "ortho", "forward"]
COMPLEX = {np.float64: np.complex128, np.float32: np.complex64}


def _draw(shape, dtype, kind, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.uniform(-1.0, 1.0, shape)
    if kind == "complex":
        return (x + 1j * rng.uniform(-1.0, 1.0, shape)).astype(COMPLEX[dtype])
    return x.astype(dtype)


def _check(name, fn, kwargs, x):
    """Values and dtype as NumPy's, then derivatives to order 2 in both modes."""
    ours, theirs = getattr(tfft, name)(x, **kwargs), getattr(np.fft, name)(x, **kwargs)
    complex_dtype = np.result_type(x.dtype, np.complex64)  # NumPy 2: single precision stays single
    assert ours.dtype == (np.finfo(complex_dtype).dtype if name.startswith("irfft") else complex_dtype), name
    assert ours.shape == theirs.shape, name
    tol = 1e-5 if np.finfo(theirs.dtype).bits <= 32 else 1e-12
    assert_close(ours, theirs, rtol=tol, atol=tol * np.sqrt(x.size))
    check_grads(fn, (x,), order=2, modes=("fwd", "rev"), name=f"{name}{kwargs}")


# ---- one-dimensional transforms ----------------------------------------------------------------
ONE_D = [("fft", "complex"), ("ifft", "complex"), ("fft", "real"), ("rfft", "real"), ("irfft", "complex")]


@pytest.mark.parametrize("name,kind", ONE_D)
@pytest.mark.parametrize("length", [5, 6])
@pytest.mark.parametrize("n", [None, "shorter", "longer"])
@pytest.mark.parametrize("axis", [0, -1])
@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_one_dimensional(name, kind, length, n, axis, norm, dtype):
    shape = (length, 3) if axis == 0 else (2, length)
    if name == "irfft":  # n sets the output length; the input is fitted to n // 2 + 1 terms
        n = {None: 2 * length - 1, "shorter": length - 2, "longer": 2 * length + 3}[n]
    else:
        n = {None: None, "shorter": length - 2, "longer": length + 3}[n]
    x = _draw(shape, dtype, kind)
    kwargs = dict(n=n, axis=axis, norm=norm)
    _check(name, lambda a: getattr(tfft, name)(a, **kwargs), kwargs, x)


@pytest.mark.parametrize("length", [1, 2, 3, 4])
@pytest.mark.parametrize("norm", NORMS)
def test_irfft_default_even_length_and_tiny_inputs(length, norm):
    x = _draw((2, length), np.float64, "complex")
    n = None if length > 1 else 1
    _check("irfft", lambda a: tfft.irfft(a, n=n, norm=norm), dict(n=n, norm=norm), x)
    _check("rfft", lambda a: tfft.rfft(a, norm=norm), dict(norm=norm), x.real.copy())


def test_irfft_of_real_input_and_fft_of_integers():
    x = _draw((4,), np.float64, "real")
    _check("irfft", tfft.irfft, {}, x)
    ints = np.arange(6).reshape(2, 3)
    assert_close(tfft.fft(ints), np.fft.fft(ints))
    assert tfft.rfft(ints).dtype == np.fft.rfft(ints).dtype == np.complex128


# ---- n-dimensional transforms ------------------------------------------------------------------
ND_CASES = [  # (s, axes) on a (5, 4, 3) input
    (None, None),
    (None, (0, 2)),
    (None, (2, 0)),
    ((4, 6), (0, 1)),
    ((3, 5, 2), None),
    ((-1, 5), (1, 2)),
    ((3,), None),           # s without axes: the last len(s) axes
]


@pytest.mark.parametrize("name,kind", [("fftn", "complex"), ("ifftn", "complex"), ("rfftn", "real"),
                                       ("irfftn", "complex"), ("fftn", "real")])
@pytest.mark.parametrize("s,axes", ND_CASES)
@pytest.mark.parametrize("norm", NORMS)
def test_n_dimensional(name, kind, s, axes, norm):
    x = _draw((5, 4, 3), np.float64, kind)
    kwargs = dict(s=s, axes=axes, norm=norm)
    if s is not None and axes is None:
        with warnings.catch_warnings():  # NumPy 2 deprecates s without axes; we follow it quietly
            warnings.simplefilter("ignore", DeprecationWarning)
            theirs = getattr(np.fft, name)(x, s=s, norm=norm)
        assert_close(getattr(tfft, name)(x, **kwargs), theirs, atol=1e-12)
        check_grads(lambda a: getattr(tfft, name)(a, **kwargs), (x,), order=2, modes=("fwd", "rev"), name=name)
        return
    _check(name, lambda a: getattr(tfft, name)(a, **kwargs), kwargs, x)


@pytest.mark.parametrize("name,kind", [("fft2", "complex"), ("ifft2", "complex"), ("rfft2", "real"),
                                       ("irfft2", "complex")])
@pytest.mark.parametrize("s", [None, (3, 5)])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_two_dimensional(name, kind, s, dtype):
    x = _draw((2, 4, 5), dtype, kind)
    kwargs = dict(s=s, norm="ortho")
    _check(name, lambda a: getattr(tfft, name)(a, **kwargs), kwargs, x)


@pytest.mark.parametrize("name,kind,s,axes", [("fftn", "complex", (3, 5), (0, 0)),
                                              ("ifftn", "complex", None, (1, 0, 1)),
                                              ("rfftn", "real", (4, 3), (1, 1)),
                                              ("irfftn", "complex", (3, 5), (0, 0))])
def test_repeated_axes_transform_once_per_mention(name, kind, s, axes):
    x = _draw((4, 3), np.float64, kind)
    kwargs = dict(s=s, axes=axes)
    _check(name, lambda a: getattr(tfft, name)(a, **kwargs), kwargs, x)


# ---- shifts ------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["fftshift", "ifftshift"])
@pytest.mark.parametrize("axes", [None, 0, (1,), (0, 1), -1])
@pytest.mark.parametrize("shape", [(5, 4), (4, 7), (1, 2)])
def test_shifts(name, axes, shape):
    x = _draw(shape, np.float64, "real")
    np.testing.assert_array_equal(getattr(tfft, name)(x, axes=axes), getattr(np.fft, name)(x, axes=axes))
    check_grads(lambda a: getattr(tfft, name)(a, axes=axes), (x,), order=2, modes=("fwd", "rev"), name=name)
    z = _draw(shape, np.float32, "complex")
    check_grads(lambda a: getattr(tfft, name)(a, axes=axes), (z,), order=2, modes=("fwd", "rev"), name=name)


def test_shifts_undo_each_other_and_keep_integers():
    x = np.arange(15).reshape(3, 5)
    np.testing.assert_array_equal(tfft.ifftshift(tfft.fftshift(x)), x)
    assert tfft.fftshift(x).dtype == x.dtype


# ---- the public API, dispatch and known values -------------------------------------------------
def test_parseval_gradient_through_numpy_dispatch():
    # sum |F x|^2 = n sum |x|^2, so the gradient is 2 n x; np.fft.* on tracers dispatches to tnp.fft
    x = _draw((7,), np.float32, "real")
    g = tg.grad(lambda x: np.sum(np.abs(np.fft.fft(x)) ** 2))(x)
    assert g.dtype == np.float32
    assert_close(g, 14 * x, rtol=1e-5)
    ours = tg.grad(lambda x: tnp.sum(tnp.abs(tfft.rfft(x, norm="ortho")) ** 3))(x)
    dispatched = tg.grad(lambda x: np.sum(np.abs(np.fft.rfft(x, norm="ortho")) ** 3))(x)
    np.testing.assert_array_equal(ours, dispatched)


def test_round_trip_has_identity_derivatives():
    x = _draw((6, 5), np.float64, "real")
    for norm in NORMS:
        out, vjp_fn = tg.vjp(lambda a, norm=norm: tfft.irfftn(tfft.rfftn(a, norm=norm), s=a.shape, norm=norm), x)
        assert_close(out, x, atol=1e-12)
        u = _draw((6, 5), np.float64, "real", seed=1)
        assert_close(vjp_fn(u)[0], u, atol=1e-12)
        _, t = tg.jvp(lambda a, norm=norm: tfft.ifft(tfft.fft(a, norm=norm), norm=norm), (x + 0j,), (u + 1j * x,))
        assert_close(t, u + 1j * x, atol=1e-12)


def test_complex64_stays_single_precision_in_every_derivative():
    z = _draw((6,), np.float32, "complex")
    out, vjp_fn = tg.vjp(lambda a: tfft.irfft(tfft.fft(a)[:4]), z)
    assert out.dtype == np.float32
    assert vjp_fn(np.ones(6, np.float32))[0].dtype == np.complex64
    assert tg.jvp(lambda a: tfft.rfft(a.real), (z,), (z,))[1].dtype == np.complex64


def test_errors_match_numpy():
    x = np.ones(4)
    with pytest.raises(ValueError, match="norm"):
        tfft.fft(x, norm="unitary")
    with pytest.raises(ValueError, match="data points"):
        tfft.fft(x, n=0)
    with pytest.raises(ValueError, match="different lengths"):
        tfft.fftn(np.ones((2, 2)), s=(2,), axes=(0, 1))
    with pytest.raises(TypeError, match="real"):
        tfft.rfft(x + 1j)
    with pytest.raises(np.exceptions.AxisError):
        tfft.fft(x, axis=1)


def test_abstract_eval_matches_impl():
    from tapegrad._rules import aval_of
    z = np.ones((4, 3, 5), np.complex64)
    cases = [(tfft.fft_p, z, dict(axes=(0, 2), inverse=True, norm="ortho")),
             (tfft.rfft_p, np.ones((4, 3, 5), np.float32), dict(axes=(2, 0), norm="backward")),
             (tfft.irfft_p, z, dict(axes=(0, 2), lengths=(4, 9), norm="forward"))]
    for prim, x, params in cases:
        out = prim.impl(x, **params)
        aval = prim.abstract_eval(aval_of(x), **params)
        assert aval.shape == out.shape and np.dtype(aval.dtype) == out.dtype, prim


def test_a_wrong_transpose_is_caught():
    """The Hermitian weights of irfft's vjp matter: without them check_grads fails."""
    from tapegrad.numpy import _complex
    rules = tfft.irfft_p.vjp_rules
    tfft.irfft_p.vjp_rules = (lambda ct, ans, z, *, axes, lengths, norm: _complex.conj(
        tg._core.bind(tfft.rfft_p, ct, axes=axes, norm={"backward": "forward"}.get(norm, norm))),)
    try:
        with pytest.raises(AssertionError, match="vjp of irfft"):
            check_grads(tfft.irfft, (_draw((4,), np.float64, "complex"),), order=1, modes=("rev",), name="irfft")
    finally:
        tfft.irfft_p.vjp_rules = rules


@pytest.mark.gpu
def test_cupy_transforms_stay_on_the_device():
    cupy = cupy_or_skip()
    x = _draw((6, 5), np.float32, "real")
    xg = cupy.asarray(x)
    out = tfft.irfftn(tfft.rfftn(xg) * 2.0, s=x.shape)
    assert isinstance(out, cupy.ndarray) and out.dtype == np.float32
    g = tg.grad(lambda a: tnp.sum(tnp.abs(tfft.fftshift(tfft.fft2(a))) ** 2))(xg)
    assert isinstance(g, cupy.ndarray)
    assert_close(cupy.asnumpy(g), 2 * 30 * x, rtol=1e-4)
    z = cupy.asarray(_draw((5, 4), np.float64, "complex"))
    _, vjp_fn = tg.vjp(lambda a: tfft.irfft(a, n=7), z)
    ct = cupy.asarray(_draw((5, 7), np.float64, "real", seed=2))
    want = tg.vjp(lambda a: tfft.irfft(a, n=7), cupy.asnumpy(z))[1](cupy.asnumpy(ct))[0]
    assert_close(cupy.asnumpy(vjp_fn(ct)[0]), want, atol=1e-12)
