"""The failure families of tapegrad's first run on real CuPy (an H100, 2026-11-27; CuPy 14.2), each
pinned down twice: on the strict device double, which now refuses what CuPy refuses (its
``cupyx.scipy`` in tests/_device_cupyx.py), and, marked ``gpu``, on real CuPy, the same checks.

- the gamma family: cupyx's ``polygamma`` needs an array order (a Python ``int`` fails inside its
  ``cupy.where``), and every derivative of ``gamma``, ``gammaln``, ``digamma``, ``beta``, ``betaln``
  and ``multigammaln`` goes through it;
- ``linalg.solve`` with NumPy 2's broadcasting: CuPy's solve takes equal stacks only, so tapegrad
  broadcasts them itself, on every route;
- ``scipy.linalg.expm`` of a stack, and so under ``vmap``: cupyx's expm takes one matrix;
- the derivatives of ``j0``, ``j1``, ``y0`` and ``y1``: cupyx has no ``jv`` or ``yv``, so they are
  written with these four alone.
"""
from __future__ import annotations

import numpy as np
import pytest
import scipy.special as ss

import tapegrad as tg
import tapegrad.numpy as tnp
import tapegrad.scipy.linalg as tsl
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


@pytest.mark.gpu
def test_the_double_lists_only_what_cupyx_has():
    """The double's cupyx.scipy names (tests/_device_cupyx.py) are all CuPy's own."""
    import _device_cupyx
    cupy = cupy_or_skip()
    for name, names in (("special", _device_cupyx._SPECIAL), ("linalg", _device_cupyx._SCIPY_LINALG)):
        module = scipy_module(cupy, name)
        assert [n for n in names if not hasattr(module, n)] == [], name


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


# ---- linalg.solve with NumPy 2's broadcasting ------------------------------------------------------
def _system(a_shape, b_shape, dtype=np.float64, seed=3):
    rng = np.random.default_rng(seed)
    n = a_shape[-1]
    a = rng.standard_normal(a_shape) + n * np.eye(n)  # well conditioned: the comparison is of rounding
    return a.astype(dtype), rng.standard_normal(b_shape).astype(dtype)


# the three the H100 refused, and the rest of NumPy 2's rule: b a vector (n,) for every matrix, or a
# stack (..., n, k) whose leading axes broadcast against a's
REFUSED_BY_CUPY = [((3, 3), (2, 3, 1)), ((2, 3, 3), (3,)), ((2, 1, 3, 3), (4, 3, 2))]
SOLVE_SHAPES = REFUSED_BY_CUPY + [((3, 3), (3,)), ((3, 3), (3, 2)), ((2, 3, 3), (2, 3, 2)), ((1, 3, 3), (2, 3, 1)),
                                  ((2, 3, 3), (1, 3, 2)), ((3, 3), (2, 2, 3, 2)), ((2, 2, 3, 3), (3,))]


@pytest.mark.parametrize("shapes", REFUSED_BY_CUPY, ids=str)
def test_device_solve_takes_equal_stacks_only(device, shapes):
    xp = device["xp"]
    a, b = to_device(_system(*shapes))
    if b.ndim == 1:  # as tapegrad used to pass it: one column
        b = b[:, None]
    with pytest.raises(ValueError, match=r"a must have \(\.\.\., M, M\) shape and b must have \(\.\.\., M, K\) "
                                         "for multidimensional b"):
        xp.linalg.solve(a, b)


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("shapes", SOLVE_SHAPES, ids=str)
def test_solve_broadcasts_as_numpy_2_on_every_route(device, shapes, dtype, route):
    ulps = max(device["ulps"], 4096 if dtype == np.float32 else 64)  # float32 solves: as test_device_tables
    check_route(route, tnp.linalg.solve, _system(*shapes, dtype), ulps=ulps)


@pytest.mark.parametrize("shapes", [((0, 3, 3), (3,)), ((3, 3), (0, 3, 2)), ((3, 3), (3, 0))], ids=str)
def test_solve_of_empty_stacks_is_numpy_2s(device, shapes):
    a, b = _system(*shapes)
    expected = np.linalg.solve(a, b)
    out = tnp.linalg.solve(*to_device((a, b)))
    assert isinstance(out, device["xp"].ndarray) and out.shape == expected.shape and out.dtype == expected.dtype
    grads = tg.grad(lambda a, b: tnp.sum(tnp.linalg.solve(a, b)), grad_position=(0, 1))(*to_device((a, b)))
    assert [g.shape for g in grads] == [a.shape, b.shape]


@pytest.mark.parametrize("shapes", [((3, 3), (2, 3)), ((3, 3), (4,)), ((2, 3, 3), (3, 3, 1))], ids=str)
def test_solve_refuses_what_numpy_2_refuses(device, shapes):
    a, b = _system(*shapes)
    with pytest.raises(ValueError):
        np.linalg.solve(a, b)
    with pytest.raises(ValueError):
        tnp.linalg.solve(*to_device((a, b)))


@pytest.mark.parametrize("in_axes", [(None, 0), (0, None), (0, 0)], ids=str)
@pytest.mark.parametrize("b_shape", [(3,), (3, 2)], ids=str)
def test_solve_under_vmap_with_one_side_shared(device, b_shape, in_axes):
    """The batch rule folds a shared matrix's batch into columns, or stacks the matrices: each with
    stacks that only broadcast, and each as on the host (the value and the gradient)."""
    a, b = _system((2, 3, 3), (4,) + b_shape)
    a = a if in_axes[0] == 0 else a[0]
    b = b if in_axes[1] == 0 else b[0]
    if in_axes == (0, 0):
        a = np.concatenate([a, a])
    fn = lambda a, b: tg.vmap(tnp.linalg.solve, in_axes=in_axes)(a, b)  # noqa: E731
    check_route("eager", fn, (a, b), ulps=device["ulps"])
    check_route("vjp", fn, (a, b), ulps=device["ulps"])


# ---- scipy.linalg.expm of stacks -------------------------------------------------------------------
def _small(shape, seed=4):
    return 0.5 * np.random.default_rng(seed).standard_normal(shape)  # moderate norm: Pade without much squaring


def test_cupyx_expm_takes_one_matrix(device):
    expm = scipy_module(device["xp"], "linalg").expm
    with pytest.raises(ValueError, match=r"^Input must be 1- or 2-d\.$"):
        expm(device["xp"].asarray(_small((2, 3, 3))))


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("shape", [(3, 3), (2, 3, 3), (2, 1, 2, 2)], ids=str)
def test_expm_of_stacks_on_every_route(device, shape, route):
    """``vmap`` of any of them is a stack one deeper."""
    check_route(route, tsl.expm, (_small(shape),), ulps=device["ulps"])


def test_expm_of_an_empty_stack(device):
    out = tsl.expm(device["xp"].zeros((0, 3, 3)))
    assert isinstance(out, device["xp"].ndarray) and out.shape == (0, 3, 3)


@pytest.mark.parametrize("route", ["eager", "vjp", "jvp"])
def test_expm_frechet_of_broadcast_stacks(device, route):
    fn = lambda a, e: tsl.expm_frechet(a, e)  # noqa: E731
    check_route(route, fn, (_small((2, 3, 3)), _small((3, 3), seed=5)), ulps=device["ulps"])


# ---- j0, j1, y0, y1: derivatives without jv ----------------------------------------------------------
BESSEL_01 = {"j0": (tsp.j0, ss.jvp, 0), "j1": (tsp.j1, ss.jvp, 1), "y0": (tsp.y0, ss.yvp, 0), "y1": (tsp.y1, ss.yvp, 1)}


def test_cupyx_has_no_jv_or_yv(device):
    special = scipy_module(device["xp"], "special")
    assert [hasattr(special, n) for n in ("j0", "j1", "y0", "y1", "jv", "yv")] == [True] * 4 + [False] * 2


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("name", list(BESSEL_01))
def test_bessel_01_on_every_route(device, name, route):
    x = _pos((3, 2), seed=6) * (1.0 if name[0] == "y" else np.array([1.0, -1.0]))  # y: x > 0
    check_route(route, BESSEL_01[name][0], (x,), ulps=device["ulps"])


@pytest.mark.parametrize("name", list(BESSEL_01))
def test_bessel_01_first_derivatives_are_scipys(device, name):
    fn, derivative, v = BESSEL_01[name]
    x = np.array([0.3, 0.9, 1.0, 2.5, 7.0])
    grad = tg.grad(lambda x: tnp.sum(fn(x)))(device["xp"].asarray(x))
    assert_close(grad.get(), derivative(v, x, 1), ulps=device["ulps"])


def test_j1_derivatives_at_0(device):
    """j1' = j0 - j1/x has a removable 0/0 there: 1/2, then 0 and -3/8 (DLMF 10.8.1)."""
    d = tsp.j1
    expected = (0.5, 0.0, -0.375)
    for order in range(3):
        d = tg.grad(d)
        assert_close(d(device["xp"].asarray(0.0)).get(), np.float64(expected[order]), ulps=device["ulps"])
