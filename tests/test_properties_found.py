"""The counterexamples the property tests (tests/test_properties*.py) found, kept as plain tests so they
stay checked whatever the strategies draw. Each names the defect it pinned."""
import numpy as np
import scipy.special

import tapegrad as tg
import tapegrad.numpy as tnp
from tapegrad.nn import functional as F
from tapegrad.testing import check_grads
from _tol import assert_close


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
