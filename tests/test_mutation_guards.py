"""Tests the mutation check (tests/mutate.py, docs/testing.md "Mutation check") showed were missing.

matmul's vjp with a transpose dropped (``ct @ y`` for ``ct @ y.T``) was caught only where it fails on
shape: every matmul case of tests/test_ops.py has non-square operands, so the wrong product raises
before any value is compared. With square operands the wrong product has the right shape, and only a
comparison of values sees it: here, each operand's cotangent against the formulas written in NumPy
(``ct @ y^T`` and ``x^T @ ct``, summed over the batch axes an operand was broadcast along).
"""
from __future__ import annotations

import numpy as np
import pytest

import tapegrad as tg
import tapegrad.numpy as tnp
from _tol import assert_close


def _sum_to(g, shape):
    """``g`` summed over its leading axes down to ``shape`` (the operand's, never itself broadcast in
    the matrix axes here)."""
    return g.reshape((-1,) + tuple(shape)).sum(axis=0) if g.shape != tuple(shape) else g


@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("shapes", [((3, 3), (3, 3)), ((2, 3, 3), (3, 3)), ((3, 3), (2, 3, 3)),
                                    ((2, 3, 3), (2, 3, 3))], ids=str)
def test_matmul_cotangents_of_square_operands_match_the_formulas(shapes, dtype):
    rng = np.random.default_rng(0)
    x, y = (rng.standard_normal(s).astype(dtype) for s in shapes)
    out = np.matmul(x, y)
    ct = rng.standard_normal(out.shape).astype(dtype)
    want_x = _sum_to(ct @ np.swapaxes(y, -1, -2), x.shape)
    want_y = _sum_to(np.swapaxes(x, -1, -2) @ ct, y.shape)

    got_out, pullback = tg.vjp(tnp.matmul, x, y)
    assert_close(np.asarray(got_out), out, dtype=dtype)
    gx, gy = pullback(ct)
    assert_close(np.asarray(gx), want_x, dtype=dtype)
    assert_close(np.asarray(gy), want_y, dtype=dtype)

    gx, gy = tg.grad(lambda a, b: tnp.sum(tnp.matmul(a, b) * ct), grad_position=(0, 1))(x, y)
    assert_close(np.asarray(gx), want_x, dtype=dtype)
    assert_close(np.asarray(gy), want_y, dtype=dtype)
