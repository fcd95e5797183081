"""tapegrad.scipy.signal: values against scipy.signal for every mode and shape pair (either input the
larger), derivatives in both inputs to order 2 in both modes (float64, float32, complex128), one vmap
and one jit check per function, and the boundaries of the 2-D functions."""
from __future__ import annotations

import zlib

import numpy as np
import pytest
import scipy.signal

import tapegrad as tg
import tapegrad.scipy.signal as tss
from _tol import assert_close
from _vmapcheck import check_vmap
from tapegrad.testing import check_grads

ND_SHAPES = [((5,), (3,)), ((3,), (5,)), ((4, 5), (2, 3)), ((2, 3), (3, 4)), ((3, 4, 2), (2, 2, 2))]
TWO_D_SHAPES = [((5, 6), (3, 2)), ((3, 2), (5, 6)), ((4, 4), (3, 3))]
DTYPES = [np.float64, np.float32, np.complex128]


def _draw(shape, dtype, rng):
    x = rng.standard_normal(shape)
    if np.dtype(dtype).kind == "c":
        x = x + 1j * rng.standard_normal(shape)
    return x.astype(dtype)


def _valid_allowed(s1, s2):
    return all(a >= b for a, b in zip(s1, s2)) or all(b >= a for a, b in zip(s1, s2))


ND_CASES = [(name, mode, shapes, dtype) for name in ("convolve", "correlate", "fftconvolve")
            for mode in ("full", "same", "valid") for shapes in ND_SHAPES for dtype in DTYPES
            if mode != "valid" or _valid_allowed(*shapes)]
TWO_D_CASES = [(name, mode, boundary, shapes) for name in ("convolve2d", "correlate2d")
               for mode in ("full", "same", "valid") for boundary in ("fill", "fill1.5", "wrap", "symm")
               for shapes in TWO_D_SHAPES
               if not (mode == "valid" and boundary != "fill") and (mode != "valid" or _valid_allowed(*shapes))]


def _tol(dtype):
    return dict(rtol=1e-5) if dtype == np.float32 else dict(rtol=1e-11)


def _args(key, shapes, dtype):
    rng = np.random.default_rng(zlib.crc32(repr(key).encode()))
    return tuple(_draw(s, dtype, rng) for s in shapes)


@pytest.mark.parametrize("name,mode,shapes,dtype", ND_CASES,
                         ids=[f"{n}-{m}-{s}-{np.dtype(d).name}" for n, m, s, d in ND_CASES])
def test_nd(name, mode, shapes, dtype):
    args = _args((name, mode, shapes), shapes, dtype)
    fn = lambda a, b: getattr(tss, name)(a, b, mode)  # noqa: E731
    out, ref = fn(*args), getattr(scipy.signal, name)(*args, mode)
    assert out.shape == ref.shape and out.dtype == ref.dtype
    assert_close(out, ref, **_tol(dtype))
    check_grads(fn, args, order=2 if len(shapes[0]) < 3 else 1, name=f"{name}-{mode}")


@pytest.mark.parametrize("name,mode,boundary,shapes", TWO_D_CASES,
                         ids=[f"{n}-{m}-{b}-{s}" for n, m, b, s in TWO_D_CASES])
def test_two_d(name, mode, boundary, shapes):
    fill = 1.5 if boundary == "fill1.5" else 0
    boundary = boundary.removesuffix("1.5")
    args = _args((name, mode, shapes), shapes, np.complex128)
    fn = lambda a, b: getattr(tss, name)(a, b, mode, boundary, fill)  # noqa: E731
    out, ref = fn(*args), getattr(scipy.signal, name)(*args, mode, boundary, fill)
    assert out.shape == ref.shape and out.dtype == ref.dtype
    assert_close(out, ref, rtol=1e-11)
    check_grads(fn, args, order=2, name=f"{name}-{mode}-{boundary}")
    real = tuple(a.real for a in args)
    assert_close(fn(*real), getattr(scipy.signal, name)(*real, mode, boundary, fill), rtol=1e-11)


FUNCTIONS = [("convolve", {}), ("correlate", {"mode": "same"}), ("fftconvolve", {"mode": "valid"}),
             ("convolve2d", {"boundary": "wrap"}), ("correlate2d", {"mode": "same", "boundary": "symm"})]


@pytest.mark.parametrize("name,kw", FUNCTIONS, ids=[n for n, _ in FUNCTIONS])
@pytest.mark.parametrize("in_axes", [(0, 0), (None, 1), (0, None)], ids=str)
def test_vmap_and_jit(name, kw, in_axes):
    a, b = _args(name, ((4, 5), (2, 3)), np.float64)
    fn = lambda a, b: getattr(tss, name)(a, b, **kw)  # noqa: E731
    check_vmap(fn, (a, b), in_axes=in_axes, slack=100.0)
    assert_close(tg.jit(fn)(a, b), fn(a, b), rtol=1e-12)


def test_integers_stay_integers_and_fftconvolve_promotes():
    a, b = np.arange(5), np.array([1, -2, 3])
    for name in ("convolve", "correlate"):
        out, ref = getattr(tss, name)(a, b), getattr(scipy.signal, name)(a, b)
        assert out.dtype == ref.dtype
        np.testing.assert_array_equal(out, ref)
    assert tss.fftconvolve(a, b).dtype == scipy.signal.fftconvolve(a, b).dtype == np.float64
    assert_close(tss.convolve(2.0, 3.0), 6.0)


def test_gradient_is_the_correlation():
    """d/dx sum(w * convolve(x, k)) is correlate(w, k, 'valid'): the transpose of convolution."""
    rng = np.random.default_rng(3)
    x, k = rng.standard_normal(7), rng.standard_normal(3)
    w = rng.standard_normal(9)
    g = tg.grad(lambda x: (w * tss.convolve(x, k)).sum())(x)
    assert_close(g, scipy.signal.correlate(w, k, "valid"), rtol=1e-12)


@pytest.mark.parametrize("call", [
    lambda: tss.convolve(np.ones(3), np.ones((2, 2))),
    lambda: tss.convolve(np.ones(3), np.ones(2), mode="middle"),
    lambda: tss.convolve(np.ones(3), np.ones(2), method="slow"),
    lambda: tss.convolve(np.ones((2, 3)), np.ones((3, 2)), mode="valid"),
    lambda: tss.convolve(np.ones(0), np.ones(2)),
    lambda: tss.convolve2d(np.ones(3), np.ones(2)),
    lambda: tss.convolve2d(np.ones((3, 3)), np.ones((2, 2)), boundary="reflect"),
])
def test_bad_input_raises_value_error(call):
    with pytest.raises(ValueError):
        call()


@pytest.mark.parametrize("shapes,axes", [(((3, 5), (3, 2)), 1), (((3, 5), (1, 2)), (-1,)), (((1, 6), (4, 3)), 1),
                                         (((2, 5, 4), (2, 3, 1)), (1,)), (((2, 5, 4), (1, 3, 2)), (1, 2))], ids=str)
@pytest.mark.parametrize("mode", ["full", "same", "valid"])
def test_fftconvolve_over_some_axes(shapes, axes, mode):
    args = _args(("axes", shapes, axes), shapes, np.complex128)
    fn = lambda a, b: tss.fftconvolve(a, b, mode, axes=axes)  # noqa: E731
    out, ref = fn(*args), scipy.signal.fftconvolve(*args, mode, axes=axes)
    assert out.shape == ref.shape and out.dtype == ref.dtype
    assert_close(out, ref, rtol=1e-11)
    check_grads(fn, args, order=1, name="fftconvolve-axes")


def test_fftconvolve_axes_sizes_must_match_or_be_one():
    with pytest.raises(ValueError, match="axis 0"):
        tss.fftconvolve(np.ones((2, 3)), np.ones((3, 2)), axes=1)


@pytest.mark.parametrize("dtypes", [(np.float32, np.float32), (np.int64, np.float32), (np.complex64, np.float64)],
                         ids=str)
def test_abstract_eval_states_shape_and_dtype(dtypes):
    from tapegrad._core import ShapedArray
    a, b = np.ones((4, 3), dtypes[0]), np.ones((2, 5), dtypes[1])
    out = tss.full_p.impl(a, b, method="auto")
    assert tss.full_p.abstract_eval(ShapedArray(a.shape, a.dtype), ShapedArray(b.shape, b.dtype),
                                    method="auto") == ShapedArray(out.shape, out.dtype)
