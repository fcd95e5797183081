"""``tg.set_blas_threads`` and ``tg.blas_threads``: the thread counts the loaded BLAS libraries report
(threadpoolctl's ``threadpool_info``) before, inside and after, the restores, and the errors."""
import sys

import numpy as np
import pytest

import tapegrad as tg
from tapegrad import _threads

threadpoolctl = pytest.importorskip("threadpoolctl", reason="the threads extra")


def _counts() -> list:
    """The thread count of each loaded BLAS library (NumPy's, and SciPy's when it is loaded)."""
    return [lib["num_threads"] for lib in threadpoolctl.threadpool_info() if lib["user_api"] == "blas"]


@pytest.fixture
def counts():
    """The counts before the test, and a count other than theirs (make test runs with one thread), so
    that a call that changed nothing cannot pass; afterwards the counts are the same again."""
    before = _counts()
    if not before:
        pytest.skip("threadpoolctl finds no BLAS library it controls in this NumPy")
    yield before, 2 if before[0] == 1 else 1
    tg.set_blas_threads(None)
    assert _counts() == before


def test_set_blas_threads_sets_every_loaded_blas_and_none_restores(counts):
    before, n = counts
    assert tg.set_blas_threads(n) is None
    assert _counts() == [n] * len(before)
    tg.set_blas_threads(3)
    assert _counts() == [3] * len(before)
    tg.set_blas_threads(None)  # the counts before the first call, not before the last
    assert _counts() == before


def test_blas_threads_holds_inside_the_block_and_restores_after(counts):
    before, n = counts
    with tg.blas_threads(n) as bound:
        assert bound is None
        assert _counts() == [n] * len(before)
        x = np.random.default_rng(0).standard_normal((64, 64))
        g = tg.grad(lambda w: (w @ w).sum())(x)
    assert _counts() == before
    np.testing.assert_allclose(g, np.ones((64, 64)) @ x.T + x.T @ np.ones((64, 64)), rtol=1e-12)


def test_blas_threads_restores_after_an_exception_and_a_set_inside(counts):
    before, n = counts
    with pytest.raises(KeyError), tg.blas_threads(n):
        tg.set_blas_threads(3)
        assert _counts() == [3] * len(before)
        raise KeyError("inside")
    assert _counts() == before


def test_blas_threads_none_leaves_the_counts(counts):
    before, n = counts
    tg.set_blas_threads(n)
    with tg.blas_threads(None):
        assert _counts() == [n] * len(before)
    assert _counts() == [n] * len(before)


def test_a_numpy_integer_is_a_count(counts):
    before, n = counts
    with tg.blas_threads(np.int64(n)):
        assert _counts() == [n] * len(before)


@pytest.mark.parametrize("fn", [tg.set_blas_threads, tg.blas_threads], ids=["set_blas_threads", "blas_threads"])
@pytest.mark.parametrize("bad, error", [(0, ValueError), (-2, ValueError), (1.5, TypeError), ("2", TypeError),
                                        (True, TypeError)])
def test_a_count_that_is_not_a_positive_int_is_refused_naming_the_argument(counts, fn, bad, error):
    before, _ = counts
    with pytest.raises(error, match=rf"tapegrad\.{fn.__name__}: n must be a positive int or None, got"):
        fn(bad)
    assert _counts() == before


@pytest.mark.parametrize("call", [lambda: tg.set_blas_threads(1), lambda: tg.blas_threads(1)],
                         ids=["set_blas_threads", "blas_threads"])
def test_without_threadpoolctl_the_error_says_how_to_install_it(monkeypatch, call):
    monkeypatch.setitem(sys.modules, "threadpoolctl", None)  # what `import threadpoolctl` then raises on
    with pytest.raises(ImportError, match=r"needs threadpoolctl.*pip install 'tapegrad\[threads\]'"):
        call()


def test_a_count_that_reaches_no_blas_library_warns(monkeypatch):
    """A BLAS threadpoolctl does not control (Apple's Accelerate): the call warns instead of passing
    for one that changed the count."""
    class NoBlas:  # threadpool_limits as it is when it found no BLAS library: nothing to limit or restore
        def __init__(self, limits, user_api):
            assert limits in (None, 2) and user_api == "blas"

        def get_original_num_threads(self):
            return {"blas": None}

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return None

    monkeypatch.setattr(threadpoolctl, "threadpool_limits", NoBlas)
    monkeypatch.setattr(_threads, "_STARTED", [])  # the fake's, not the real counts the process started with
    with pytest.warns(RuntimeWarning, match=r"blas_threads\(2\): threadpoolctl found no BLAS library"):
        with tg.blas_threads(2):
            pass
    with pytest.warns(RuntimeWarning, match=r"set_blas_threads\(2\): threadpoolctl found no BLAS library"):
        tg.set_blas_threads(2)
