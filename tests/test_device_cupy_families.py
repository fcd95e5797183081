"""The failure families of tapegrad's first run on real CuPy (an H100, 2026-11-27; CuPy 14.2), each
pinned down twice: on the strict device double, which now refuses what CuPy refuses (its
``cupyx.scipy`` in tests/_device_cupyx.py), and, marked ``gpu``, on real CuPy, the same checks.

- the gamma family: cupyx's ``polygamma`` needs an array order (a Python ``int`` fails inside its
  ``cupy.where``), and every derivative of ``gamma``, ``gammaln``, ``digamma``, ``beta``, ``betaln``
  and ``multigammaln`` goes through it.
"""
from __future__ import annotations

import numpy as np
import pytest
import scipy.special as ss

import tapegrad as tg
import tapegrad.scipy.special as tsp
from _device import xp as double
from _device_check import ROUTES, check_route, on_device, to_device
from _gpu import cupy_or_skip
from _tol import assert_close
from tapegrad._backend import scipy_module


@pytest.fixture(params=["double", pytest.param("cupy", marks=pytest.mark.gpu)])
def device(request):
    """The device module every check of this file runs on: the double, then (``gpu``) real CuPy,
    whose own kernels round differently (``ulps``: the tolerance in epsilons of the dtype)."""
    if request.param == "double":
        yield dict(xp=double, ulps=64)
        return
    cupy = cupy_or_skip()
    with on_device(cupy):
        yield dict(xp=cupy, ulps=4096)


def _pos(shape, dtype=np.float64, seed=0):
    return np.random.default_rng(seed).uniform(0.5, 2.5, shape).astype(dtype)


# ---- the gamma family --------------------------------------------------------------------------------
def test_cupyx_polygamma_needs_an_array_order(device):
    xp = device["xp"]
    special = scipy_module(xp, "special")
    x = xp.asarray(_pos((3,)))
    with pytest.raises(AttributeError, match="'bool' object has no attribute 'astype'"):
        special.polygamma(1, x)
    assert_close(special.polygamma(xp.asarray(1), x).get(), ss.polygamma(1, x.get()), ulps=device["ulps"])


def test_cupyx_has_the_gamma_family_under_scipys_names(device):
    special = scipy_module(device["xp"], "special")
    names = ("polygamma", "digamma", "psi", "gamma", "gammaln", "multigammaln", "beta", "betaln")
    assert [n for n in names if not hasattr(special, n)] == []


GAMMA_FAMILY = {
    "polygamma-int": lambda x: tsp.polygamma(2, x),
    "polygamma-numpy-int": lambda x: tsp.polygamma(np.int64(1), x),
    "digamma": tsp.digamma,
    "psi": tsp.psi,
    "gamma": tsp.gamma,
    "gammaln": tsp.gammaln,
    "multigammaln": lambda x: tsp.multigammaln(x + 1.0, 3),
    "beta": lambda x: tsp.beta(x, 1.5 - 0.25 * x),
    "betaln": lambda x: tsp.betaln(x, x[::-1]),
}


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("name", list(GAMMA_FAMILY))
def test_gamma_family_on_every_route(device, name, route):
    check_route(route, GAMMA_FAMILY[name], (_pos((3, 2), seed=1),), ulps=device["ulps"])


def test_polygamma_with_a_device_array_of_orders(device):
    """Orders as a device array broadcast against ``x``: values, and the derivative in ``x``
    (``polygamma(n + 1, x)``), as on the host."""
    n, x = np.array([[0], [1], [3]]), _pos((3, 2), seed=2)
    fn = lambda n, x: tg.grad(lambda x: tsp.polygamma(n, x).sum())(x)  # noqa: E731
    dn, dx = to_device((n, x))
    assert_close(tsp.polygamma(dn, dx).get(), ss.polygamma(n, x), ulps=device["ulps"])
    assert_close(fn(dn, dx).get(), fn(n, x), ulps=device["ulps"])
