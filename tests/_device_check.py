"""What the device test files share: run one function on host arrays and on the strict device double,
through one route (eager, reverse mode, forward mode, both at order 2, jit, vmap), and check that the
device run returns device arrays only, with the host run's shapes, dtypes and values.

The host run is the reference: its numbers are checked against NumPy and finite differences by the
ordinary test files; here the question is only whether the same code runs on a device without a
host conversion, and computes the same thing there.
"""
from __future__ import annotations

import contextlib
import itertools
import os

import numpy as np
import pytest

import tapegrad as tg
from _device import xp
from _tol import assert_close
from tapegrad import _backend

# the device module the checks run on: the double, or real CuPy (tests/test_device_gpu.py)
DEVICE = {"xp": xp}


@contextlib.contextmanager
def on_device(module):
    """Run the checks on ``module`` (``cupy``) instead of the double."""
    saved = DEVICE["xp"]
    DEVICE["xp"] = module
    try:
        yield
    finally:
        DEVICE["xp"] = saved


# On a GPU the device numbers come from other kernels than the host's: cuBLAS and cuSOLVER block and
# order their sums differently from OpenBLAS and LAPACK, and CuPy's elementwise functions are CUDA's
# libm. A sum of n terms in another order differs by up to n epsilons of its magnitude (Higham,
# Accuracy and Stability of Numerical Algorithms, ch. 4); the tests' reductions and matrix products
# have at most 64 terms, and a decomposition's derivative (eigh's, with an eigengap in the
# denominator) or an order-2 route amplifies that by at most another 64 on the tests' matrices:
# 64 * 64 epsilons of the dtype, scaled by the reference's magnitude (``assert_same``). The double
# runs NumPy's own kernels, so its comparisons keep the callers' tighter tolerances.
GPU_ULPS = 64 * 64


def on_a_gpu() -> bool:
    """Whether the device checks run on real CuPy (``TAPEGRAD_DEVICE=cupy`` or ``on_device(cupy)``)."""
    return DEVICE["xp"].__name__ == "cupy"


def _is_device(x) -> bool:
    return isinstance(x, DEVICE["xp"].ndarray)


def to_device(tree):
    """Host array leaves (and NumPy scalars) copied to the device; Python scalars stay."""
    put = DEVICE["xp"].asarray
    return tg.tree.tree_map(lambda x: put(x) if isinstance(x, (np.ndarray, np.generic)) else x, tree)

# tapegrad's error for host and device arrays in one operation (it names the fix), and the device
# library's own, word for word as CuPy 13 and 14 raise it, for an operation on arrays at rest
MIXES = r"mixes NumPy \(host\) arrays and \w+ \(device\) arrays; move them to one device first"
CUPY_REFUSES_HOST = r"^Unsupported type <class 'numpy\.ndarray'>$"

ROUTES = ("eager", "vjp", "jvp", "jvp-of-vjp", "vjp-of-jvp", "jit", "jit-vjp", "vmap")

# ``make test-device`` sets TAPEGRAD_DEVICE_TESTS=all: every case through every route. Otherwise (the
# plain ``make test``) one case in FAST_EVERY runs, through one route, the routes taken in turn along
# the table: every route still runs on every family of functions, in a few seconds in all.
ALL = os.environ.get("TAPEGRAD_DEVICE_TESTS", "") == "all"
FAST_EVERY = 4


def sample(cases: list) -> list:
    """``cases`` under ``make test-device``; one in FAST_EVERY of them otherwise."""
    return list(cases) if ALL else list(cases)[::FAST_EVERY]


def grid(*axes, ids=None, unpack=False):
    """``pytest.param`` s for the product of ``axes`` (lists of values) crossed with :data:`ROUTES`
    (the last argument): all of it under ``make test-device``, one route per case otherwise.
    ``ids``: one function per axis; ``unpack``: the first axis holds tuples of several arguments."""
    cases = list(itertools.product(*axes))
    params = []
    for k, case in enumerate(cases):
        if not ALL and k % FAST_EVERY:
            continue
        values = (list(case[0]) if unpack else [case[0]]) + list(case[1:])
        name = "-".join(str((ids[i] if ids else repr)(part)) for i, part in enumerate(case))
        routes = ROUTES if ALL else (ROUTES[k // FAST_EVERY % len(ROUTES)],)
        params += [pytest.param(*values, route, id=f"{name}-{route}") for route in routes]
    return params


@contextlib.contextmanager
def device_backend():
    """Creation functions (``tnp.zeros``, ``tnp.arange``...) put their arrays on the double."""
    saved = _backend._default_backend
    tg.set_backend(DEVICE["xp"])
    try:
        yield
    finally:
        _backend._default_backend = saved


def _floats(tree):
    return [x for x in tg.tree.tree_leaves(tree) if np.dtype(x.dtype).kind in "fc"]


def _draw_like(tree, rng):
    """A random host tree shaped like ``tree`` (floats; integer and bool leaves get zeros)."""
    def draw(x):
        x = x.get() if _is_device(x) else np.asarray(x)
        if x.dtype.kind not in "fc":
            return np.zeros(x.shape, x.dtype)
        return rng.standard_normal(x.shape).astype(x.dtype)
    return tg.tree.tree_map(draw, tree)


def assert_same(device_out, host_out, where: str, ulps: int = 64):
    """``device_out`` holds device arrays only (Python scalars where the host has them), equal to
    ``host_out`` in structure, shape, dtype and value."""
    if on_a_gpu():
        ulps = max(ulps, GPU_ULPS)
    d_leaves, d_tree = tg.tree.tree_flatten(device_out)
    h_leaves, h_tree = tg.tree.tree_flatten(host_out)
    assert d_tree == h_tree, f"{where}: structure {d_tree} on the device, {h_tree} on the host"
    for k, (d, h) in enumerate(zip(d_leaves, h_leaves)):
        if isinstance(h, (np.ndarray, np.generic)):
            assert _is_device(d), f"{where}: output leaf {k} is a {type(d).__name__} on the device"
            d = d.get()
            assert d.shape == np.shape(h) and d.dtype == np.result_type(h), \
                f"{where}: leaf {k} is {d.dtype}{d.shape} on the device, {np.result_type(h)}{np.shape(h)} on the host"
            if d.dtype.kind in "fc":
                # scale at least 1: the inputs are of unit order, and a value that is 0 in exact
                # arithmetic (a bias gradient through BatchNorm) is rounding noise of that order,
                # which fused (host) and unfused (device) programs round differently
                finite = np.abs(h[np.isfinite(h)]) if np.size(h) else np.zeros(1)
                assert_close(d, h, ulps=ulps, scale=max(float(finite.max(initial=0.0)), 1.0), err_msg=where)
            else:
                np.testing.assert_array_equal(d, h, err_msg=where)
        else:
            assert type(d) is type(h) and d == h, f"{where}: leaf {k} is {d!r} on the device, {h!r} on the host"


def run_route(route: str, fn, args, seed: int = 0, default_device: bool = False):
    """``(host result, device result)`` of ``fn`` at ``args`` (host arrays) through ``route``. The
    default backend stays NumPy unless ``default_device``: device operands alone must decide where
    everything derived from them lives. Where the host run raises, the device run must raise the
    same exception type (``(None, None)`` is returned then)."""
    rng = np.random.default_rng(seed)
    out = tg.vjp(fn, *args)[0]
    u = _draw_like(out, rng)
    v = _draw_like(args, rng)
    program = _ROUTES[route]
    dargs, du, dv = to_device(args), to_device(u), to_device(v)
    try:
        host = program(fn, args, u, v)
    except Exception as e:  # noqa: BLE001 - the device must fail the same way
        host = e
    with device_backend() if default_device else contextlib.nullcontext():
        if isinstance(host, Exception):
            with pytest.raises(type(host)):
                program(fn, dargs, du, dv)
            return None, None
        return host, program(fn, dargs, du, dv)


def _batch(tree, n=3):
    """``n`` examples of ``tree`` stacked on a new leading axis (scaled copies, so they differ), made
    on the host and copied to the device for device leaves (the same numbers on both)."""
    def stack(x):
        host = x.get() if _is_device(x) else np.asarray(x)
        scales = np.array([1.0, 0.9, 1.1])[:n].reshape((n,) + (1,) * host.ndim)
        batch = (host[None] * scales).astype(host.dtype)
        return DEVICE["xp"].asarray(batch) if _is_device(x) else batch
    return tg.tree.tree_map(stack, tree)


_ROUTES = {
    "eager": lambda fn, x, u, v: fn(*x),
    "vjp": lambda fn, x, u, v: tg.vjp(fn, *x)[1](u),
    "jvp": lambda fn, x, u, v: tg.jvp(fn, tuple(x), tuple(v)),
    "jvp-of-vjp": lambda fn, x, u, v: tg.jvp(lambda *y: tg.vjp(fn, *y)[1](u), tuple(x), tuple(v)),
    "vjp-of-jvp": lambda fn, x, u, v: tg.vjp(lambda *y: tg.jvp(fn, y, tuple(v))[1], *x)[1](u),
    "jit": lambda fn, x, u, v: tg.jit(fn)(*x),
    "jit-vjp": lambda fn, x, u, v: tg.jit(lambda *y: tg.vjp(fn, *y)[1](u))(*x),
    "vmap": lambda fn, x, u, v: tg.vmap(fn)(*_batch(tuple(x))),
}


def check_route(route: str, fn, args, seed: int = 0, ulps: int = 64, default_device: bool = False):
    """``fn`` through ``route`` on the device equals the host run (see :func:`assert_same`)."""
    host, device = run_route(route, fn, tuple(args), seed, default_device)
    assert_same(device, host, f"{route} of {getattr(fn, '__name__', fn)}", ulps=ulps)
