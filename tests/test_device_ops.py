"""The op table on the strict device double: every route of every function of tests/test_ops.py's
tables (eager, vjp, jvp, both at order 2, jit, jit of vjp, vmap) runs on device arrays, returns
device arrays only, and equals the host run."""
from __future__ import annotations

import numpy as np
import pytest

from _device_check import ROUTES, check_route
from test_ops import (AXES, BINARY, BINARY_SHAPES, DTYPES, LINALG_CASES, MISC, REDUCTIONS, SHAPE_CASES,
                      UNARY, UNARY_SHAPES, _draw)

DTYPE_IDS = lambda d: np.dtype(d).name  # noqa: E731


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("shape", UNARY_SHAPES, ids=str)
@pytest.mark.parametrize("spec", UNARY, ids=repr)
def test_unary(spec, shape, dtype, route):
    check_route(route, spec.op, (_draw(spec.domains[0], shape, dtype, np.random.default_rng(0)),))


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("shapes", BINARY_SHAPES, ids=str)
@pytest.mark.parametrize("spec", BINARY, ids=repr)
def test_binary(spec, shapes, dtype, route):
    rng = np.random.default_rng(1)
    x = _draw(spec.domains[0], shapes[0], dtype, rng)
    y = _draw(spec.domains[-1], shapes[1], dtype, rng)
    check_route(route, spec.op, (x, y))


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("spec", BINARY, ids=repr)
def test_binary_with_python_scalar(spec, route):
    x = _draw(spec.domains[0], (3,), np.float32, np.random.default_rng(2))
    check_route(route, lambda x: spec.op(x, 1.5) + spec.op(1.5, x), (x,))


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("keepdims", [False, True])
@pytest.mark.parametrize("axis", AXES, ids=str)
@pytest.mark.parametrize("spec", REDUCTIONS, ids=repr)
def test_reduction(spec, axis, keepdims, dtype, route):
    x = _draw(spec.domains[0], (3, 4, 2) if axis == (0, 1) else (3, 4), dtype, np.random.default_rng(4))
    check_route(route, lambda x: spec.op(x, axis=axis, keepdims=keepdims), (x,))


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("name,fn,ref", SHAPE_CASES, ids=[c[0] for c in SHAPE_CASES])
def test_shape_and_indexing(name, fn, ref, dtype, route):
    x = _draw("real", (3, 4), dtype, np.random.default_rng(7))
    if route in ("eager", "jit") and name.startswith("at-"):
        fn = _traced(fn)
    if route == "vmap" and name == "bool-mask":
        pytest.skip("a mask that varies over the batch is refused on every backend (test_ops)")
    check_route(route, fn, (x,))


def _traced(fn):
    """``.at`` exists on traced values only: run ``fn`` under vjp for the eager and jit routes."""
    import tapegrad as tg
    return lambda x: tg.vjp(fn, x)[0]


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("name,fn,sa,sb", LINALG_CASES, ids=[c[0] for c in LINALG_CASES])
def test_linalg(name, fn, sa, sb, dtype, route):
    rng = np.random.default_rng(8)
    check_route(route, fn, (_draw("real", sa, dtype, rng), _draw("real", sb, dtype, rng)))


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("name,fn,shapes", MISC, ids=[c[0] for c in MISC])
def test_misc(name, fn, shapes, dtype, route):
    rng = np.random.default_rng(12)
    check_route(route, fn, tuple(_draw("real", s, dtype, rng) for s in shapes))
