"""The op table on the strict device double: every function of tests/test_ops.py's tables through
the routes (eager, vjp, jvp, both at order 2, jit, jit of vjp, vmap) runs on device arrays, returns
device arrays only, and equals the host run. ``make test-device`` runs every case through every
route; ``make test`` one route per case, in turn (see ``_device_check.grid``)."""
from __future__ import annotations

import numpy as np
import pytest

import tapegrad as tg
from _device_check import check_route, grid
from test_ops import (
    AXES,
    BINARY,
    BINARY_SHAPES,
    DTYPES,
    LINALG_CASES,
    MISC,
    REDUCTIONS,
    SHAPE_CASES,
    UNARY,
    UNARY_SHAPES,
    _draw,
)

NAME = lambda d: np.dtype(d).name  # noqa: E731
FIRST = lambda case: case[0]  # noqa: E731


@pytest.mark.parametrize("spec,shape,dtype,route", grid(UNARY, UNARY_SHAPES, DTYPES, ids=(repr, str, NAME)))
def test_unary(spec, shape, dtype, route):
    check_route(route, spec.op, (_draw(spec.domains[0], shape, dtype, np.random.default_rng(0)),))


@pytest.mark.parametrize("spec,shapes,dtype,route", grid(BINARY, BINARY_SHAPES, DTYPES, ids=(repr, str, NAME)))
def test_binary(spec, shapes, dtype, route):
    rng = np.random.default_rng(1)
    x = _draw(spec.domains[0], shapes[0], dtype, rng)
    y = _draw(spec.domains[-1], shapes[1], dtype, rng)
    check_route(route, spec.op, (x, y))


@pytest.mark.parametrize("spec,route", grid(BINARY, ids=(repr,)))
def test_binary_with_python_scalar(spec, route):
    x = _draw(spec.domains[0], (3,), np.float32, np.random.default_rng(2))
    check_route(route, lambda x: spec.op(x, 1.5) + spec.op(1.5, x), (x,))


@pytest.mark.parametrize("spec,axis,keepdims,dtype,route",
                         grid(REDUCTIONS, AXES, [False, True], DTYPES, ids=(repr, str, str, NAME)))
def test_reduction(spec, axis, keepdims, dtype, route):
    x = _draw(spec.domains[0], (3, 4, 2) if axis == (0, 1) else (3, 4), dtype, np.random.default_rng(4))
    check_route(route, lambda x: spec.op(x, axis=axis, keepdims=keepdims), (x,))


@pytest.mark.parametrize("name,fn,ref,dtype,route", grid(SHAPE_CASES, DTYPES, ids=(FIRST, NAME), unpack=True))
def test_shape_and_indexing(name, fn, ref, dtype, route):
    x = _draw("real", (3, 4), dtype, np.random.default_rng(7))
    if route in ("eager", "jit") and name.startswith("at-"):
        fn = _traced(fn)
    if route == "vmap" and name == "bool-mask":
        pytest.skip("a mask that varies over the batch is refused on every backend (test_ops)")
    check_route(route, fn, (x,))


def _traced(fn):
    """``.at`` exists on traced values only: run ``fn`` under vjp for the eager and jit routes."""
    return lambda x: tg.vjp(fn, x)[0]


@pytest.mark.parametrize("name,fn,sa,sb,dtype,route", grid(LINALG_CASES, DTYPES, ids=(FIRST, NAME), unpack=True))
def test_linalg(name, fn, sa, sb, dtype, route):
    rng = np.random.default_rng(8)
    check_route(route, fn, (_draw("real", sa, dtype, rng), _draw("real", sb, dtype, rng)))


@pytest.mark.parametrize("name,fn,shapes,dtype,route", grid(MISC, DTYPES, ids=(FIRST, NAME), unpack=True))
def test_misc(name, fn, shapes, dtype, route):
    rng = np.random.default_rng(12)
    check_route(route, fn, tuple(_draw("real", s, dtype, rng) for s in shapes))
