"""Plain ``scipy.special`` calls on traced values: its ufuncs reach ``tapegrad.scipy.special`` through
NumPy's ``__array_ufunc__`` protocol (once ``tapegrad.scipy`` is imported), so they trace under every
transform; what cannot dispatch fails with an error that names what to call."""
from __future__ import annotations

import numpy as np
import pytest
import scipy.special as ss
import scipy.stats

import tapegrad as tg
import tapegrad.scipy.special as tsp
from _tol import assert_close

X = np.array([0.3, 1.7, 2.5])


@pytest.mark.parametrize("name", ["gammaln", "digamma", "erf", "expit", "ndtr", "i0"])
def test_scipy_special_ufuncs_trace_under_every_transform(name):
    ours, theirs = getattr(tsp, name), getattr(ss, name)
    assert_close(tg.grad(lambda x: np.sum(theirs(x)))(X), tg.grad(lambda x: np.sum(ours(x)))(X))
    assert_close(tg.jit(theirs)(X), theirs(X))
    assert_close(tg.vmap(tg.grad(theirs))(X), tg.vmap(tg.grad(ours))(X))
    _, tangent = tg.jvp(theirs, (X,), (np.ones(3),))
    assert_close(tangent, tg.jvp(ours, (X,), (np.ones(3),))[1])


def test_what_cannot_dispatch_names_what_to_call():
    with pytest.raises(TypeError, match=r"scipy\.special\.gammaln with \['dtype'\].*tapegrad\.scipy\.special\.gammaln"):
        tg.grad(lambda x: ss.gammaln(x, dtype=np.float64))(np.array(2.5))
    with pytest.raises(TypeError, match=r"scipy\.special\.struve is not supported"):
        tg.grad(lambda x: ss.struve(0.0, x))(np.array(2.5))


@pytest.mark.parametrize("call,ours", [
    (lambda x: scipy.stats.norm.logpdf(x), "tapegrad.scipy.stats.norm.logpdf"),
    (lambda x: scipy.stats.gamma.cdf(x, 2.0), "tapegrad.scipy.stats.gamma.cdf"),
    (lambda x: scipy.stats.poisson.pmf(3, x), "tapegrad.scipy.stats.poisson.pmf"),
])
def test_a_scipy_distribution_on_a_traced_value_names_ours(call, ours):
    import tapegrad.scipy.stats  # noqa: F401  (registers the names)
    with pytest.raises(TypeError, match=ours.replace(".", r"\.")):
        tg.grad(call)(np.array(0.3))
