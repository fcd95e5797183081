"""The counterexamples the property tests (tests/test_properties*.py) found, kept as plain tests so they
stay checked whatever the strategies draw. Each names the defect it pinned."""
import numpy as np
import pytest
import scipy.special

import tapegrad as tg
import tapegrad.numpy as tnp
from _tol import assert_close
from tapegrad.nn import functional as F
from tapegrad.testing import check_grads


def test_norm_of_complex_is_real():
    # was sqrt(sum(z * z)): (2.94+4.08j) for [3+4j, 1j], silently
    z = np.array([3 + 4j, 1j], np.complex64)
    out = tnp.linalg.norm(z)
    assert out.dtype == np.float32
    assert_close(out, np.linalg.norm(z))
    m = np.array([[1 + 1j, 2], [0, -1j]])
    assert_close(tnp.linalg.norm(m, "fro"), np.linalg.norm(m, "fro"))
    check_grads(tnp.linalg.norm, (np.array([3 + 4j, 1 - 2j]),), order=2)


def test_fft_of_integers_is_double():
    # result_type(uint8, complex64) is complex64; NumPy's fft computes integers and booleans in double
    for x in (np.array([1, 2], np.uint8), np.array([True, False]), np.array([1, 2], np.int8)):
        assert tnp.fft.fft(x).dtype == np.fft.fft(x).dtype == np.complex128


def test_logsumexp_of_empty_is_minus_inf():
    # was "zero-size array to reduction operation maximum which has no identity" (amax of the shift)
    with np.errstate(divide="ignore"):
        assert F.logsumexp(np.zeros(0, np.float32)) == -np.inf
        assert F.logsumexp(np.zeros((0, 3)), axis=0).tolist() == [-np.inf] * 3
        assert F.logsumexp(np.zeros((0, 3)), axis=1).shape == (0,)


def test_log_softmax_float16_near_the_largest_value():
    # x - logsumexp(x) with the float16 logsumexp rounded back to 65504 gave probabilities [1, 1]
    x = np.array([65504.0, 65504.0], np.float16)
    assert_close(F.softmax(x), np.array([0.5, 0.5], np.float16))
    assert_close(F.log_softmax(x), scipy.special.log_softmax(x).astype(np.float16))
    g = tg.grad(lambda a: F.log_softmax(a)[0])(np.array([1.0, 2.0, 3.0]))
    assert_close(g, np.array([1.0, 0.0, 0.0]) - scipy.special.softmax([1.0, 2.0, 3.0]))


def test_vmap_of_argmax_over_an_empty_batch():
    # reshape(x, (0, -1)) in the batch rule: "cannot reshape array of size 0 into shape (0,newaxis)"
    out = tg.vmap(tnp.argmax)(np.ones((0, 3)))
    assert out.shape == (0,) and out.dtype == np.argmax(np.ones((1, 3)), axis=1).dtype
    assert tg.vmap(tnp.argmax)(np.eye(3)[::-1]).tolist() == [2, 1, 0]


def test_jit_with_a_closed_over_boolean_mask():
    # a constant mask was refused as "a traced boolean mask has a data-dependent shape"
    x = np.arange(6.0).reshape(2, 3)
    mask = np.array([[True, False, True], [False, False, True]])
    assert_close(tg.jit(lambda a: a[mask])(x), x[mask])
    assert_close(tg.jit(lambda a: a[:, mask[1]] * 2)(x), x[:, mask[1]] * 2)
    assert_close(tg.grad(lambda a: tnp.sum(tg.jit(lambda b: b[mask] ** 2)(a)))(x), 2 * x * mask)
    with pytest.raises(IndexError, match="boolean index did not match"):  # NumPy's own message
        tg.jit(lambda a: a[mask[0]])(x)


def test_sign_of_complex_infinities():
    # z / |z| is NaN at infinity; NumPy 2 gives the sign of the infinite part (NaN when both are)
    z = np.array([complex(0, np.inf), complex(np.nan, -np.inf), complex(np.inf, np.inf), complex(-np.inf, 2),
                  3 + 4j, 0j], np.complex64)
    with np.errstate(invalid="ignore"):
        out = tnp.sign(z)
    assert out.dtype == np.complex64
    assert_close(out, np.sign(z))
