"""The other function tables on the strict device double (ufuncs, special functions, array functions,
linalg, scipy.linalg, fft, nn.functional): every route of every case runs on device arrays, returns
device arrays only, and equals the host run."""
from __future__ import annotations

import warnings
import zlib

import numpy as np
import pytest

import tapegrad.numpy as tnp
import tapegrad.numpy.fft as tfft
import tapegrad.scipy.linalg as tsl
import tapegrad.scipy.special as tsp
import test_array_functions as arrays
import test_cov_special as cov_special
import test_fft as fft_table
import test_linalg as linalg_table
import test_nn as nn_table
import test_scipy_linalg as scipy_linalg_table
import test_special as special_table
import test_ufuncs as ufunc_table
from _device_check import MIXES, check_route, grid, run_route

DTYPES = [np.float64, np.float32]
DTYPE_IDS = lambda d: np.dtype(d).name  # noqa: E731


@pytest.mark.parametrize("spec,shape,dtype,route", grid(ufunc_table.UNARY, ufunc_table.SHAPES, DTYPES,
                                                       ids=(repr, str, DTYPE_IDS)))
def test_ufunc_unary(spec, shape, dtype, route):
    check_route(route, spec.op, (ufunc_table._draw(spec.domains[0], shape, dtype, np.random.default_rng(0)),))


@pytest.mark.parametrize("spec,shapes,dtype,route", grid(ufunc_table.BINARY, ufunc_table.BINARY_SHAPES, DTYPES,
                                                        ids=(repr, str, DTYPE_IDS)))
def test_ufunc_binary(spec, shapes, dtype, route):
    check_route(route, spec.op, ufunc_table._draw_pair(spec, shapes, dtype, np.random.default_rng(1)))


@pytest.mark.parametrize("spec,domain,dtype,route", grid(special_table.UNARY_CASES, DTYPES, unpack=True,
                                                        ids=(lambda c: f"{c[0].name}-{c[1]}", DTYPE_IDS)))
def test_special_unary(spec, domain, dtype, route):
    check_route(route, spec.op, (special_table._draw(domain, (3, 2), dtype, np.random.default_rng(0)),))


@pytest.mark.parametrize("spec,dtype,route", grid(special_table.BINARY, DTYPES, ids=(repr, DTYPE_IDS)))
def test_special_binary(spec, dtype, route):
    rng = np.random.default_rng(1)
    args = (special_table._draw(spec.domains[0], (3, 2), dtype, rng),
            special_table._draw(spec.domains[1], (2,), dtype, rng))
    check_route(route, spec.op, args)


# cases that close over host arrays (MASK, np.ones(...)): on device operands they mix host and device
HOST_CONSTANTS = {"select", "select-default-traced", "vstack-scalar-and-const"}


@pytest.mark.parametrize("spec,shapes,route", grid([(c.values[0], c.values[1]) for c in arrays.CASES], unpack=True,
                                                 ids=(lambda c: f"{c[0].name}-{c[1]}",)))
def test_array_function(spec, shapes, route):
    args = arrays._args(spec, shapes, np.float64)
    fn = lambda *a: spec.op(tnp, *a)  # noqa: E731
    if spec.name in HOST_CONSTANTS and not (route == "jit-vjp" and spec.name.startswith("vstack")):
        # (jit of the vjp drops the constant as dead code: nothing is mixed there)
        with pytest.raises(TypeError, match=MIXES):
            run_route(route, fn, args)
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # NumPy 2 deprecates 2-vectors in cross
        check_route(route, fn, args)


@pytest.mark.parametrize("default,route", grid([0.5, np.float32(0.5), None], ids=(lambda d: type(d).__name__,)))
def test_select_with_device_conditions_and_scalar_choices(default, route):
    x = arrays._args(arrays.SPECS[0], ((3, 4),), np.float64)[0]
    check_route(route, lambda x: tnp.select([x > 0, x < -1], [x, 2.0], default=x * x if default is None else default),
                (x,))


@pytest.mark.parametrize("spec,shapes,dtype,route", grid(linalg_table.CASES, DTYPES, unpack=True,
                                                        ids=(lambda c: f"{c[0].name}-{c[1]}", DTYPE_IDS)))
def test_linalg(spec, shapes, dtype, route):
    rng = np.random.default_rng(zlib.crc32(repr((spec.name, shapes)).encode()))
    args = tuple(linalg_table._draw(kind, shape, rng).astype(dtype) for kind, shape in zip(spec.kinds, shapes))
    check_route(route, lambda *xs: spec.fn(tnp.linalg, *xs), args, ulps=4096 if dtype == np.float32 else 64)


@pytest.mark.parametrize("spec,shapes,route", grid(scipy_linalg_table.CASES, unpack=True,
                                                 ids=(lambda c: f"{c[0].name}-{c[1]}",)))
def test_scipy_linalg(spec, shapes, route):
    rng = np.random.default_rng(zlib.crc32(repr((spec.name, shapes)).encode()))
    args = tuple(scipy_linalg_table._draw(kind, shape, rng) for kind, shape in zip(spec.kinds, shapes))
    check_route(route, lambda *xs: spec.fn(tsl, *xs), args)


FFT_CASES = [(name, kind, dict(n=n, axis=axis, norm=norm))
             for name, kind in fft_table.ONE_D for n in (None, 4) for axis in (0, -1) for norm in fft_table.NORMS]
FFT_CASES += [(name, kind, dict(s=s, axes=axes))
              for name, kind in [("fftn", "complex"), ("ifftn", "complex"), ("rfftn", "real"), ("irfftn", "complex")]
              for s, axes in fft_table.ND_CASES if not (s is not None and axes is None)]


@pytest.mark.parametrize("name,kind,kwargs,route",
                         grid(FFT_CASES, unpack=True, ids=(lambda c: f"{c[0]}-{c[1]}-{c[2]}",)))
def test_fft(name, kind, kwargs, route):
    x = fft_table._draw((5, 4, 3) if "s" in kwargs else (5, 3), np.float64, kind)
    check_route(route, lambda a: getattr(tfft, name)(a, **kwargs), (x,))


@pytest.mark.parametrize("spec,shape,dtype,route", grid([(c.values[0], c.values[1]) for c in nn_table.CASES],
                                                       DTYPES, unpack=True,
                                                       ids=(lambda c: f"{c[0].name}-{c[1]}", DTYPE_IDS)))
def test_functional(spec, shape, dtype, route):
    x = spec.domain(np.random.default_rng(0), shape).astype(dtype)
    check_route(route, spec.fn, (x,))


# the SciPy special functions that cupyx.scipy.special also has (the double's list): every route of each.
# j0, j1, y0 and y1's derivatives are written with these four alone (cupyx has no jv or yv).
DEVICE_SPECIAL = {"beta", "gammainc", "gammaincc", "zeta", "zeta-x-q", "k0", "k1", "k0e", "k1e", "j0", "j1", "y0", "y1"}


@pytest.mark.parametrize("spec,dtype,route", grid([s for s in cov_special.SPECS if s.name in DEVICE_SPECIAL],
                                                  DTYPES, ids=(repr, DTYPE_IDS)))
def test_special_on_cupyx(spec, dtype, route):
    rng = np.random.default_rng(zlib.crc32(spec.name.encode()))
    check_route(route, spec.op, tuple(cov_special._draw(d, (3, 2), dtype, rng) for d in spec.domains))


def test_jv_has_no_kernel_on_the_device():
    """``jv`` (SciPy's real-order function) is not in ``cupyx``: on device arrays it fails loudly,
    naming the module and the missing kernel, rather than computing on the host."""
    from _device_check import DEVICE, to_device
    x = to_device(cov_special._draw("pos", (3,), np.float64, np.random.default_rng(0)))
    with pytest.raises(NotImplementedError, match=f"jv has no kernel for {DEVICE['xp'].__name__} arrays"):
        tsp.jv(1.5, x)
