"""What the op-table test files share: the spec records and the value check against NumPy/SciPy."""
from __future__ import annotations

import dataclasses
from collections.abc import Callable

import numpy as np

import tapegrad as tg
from _tol import assert_close
from tapegrad.testing import check_grads


@dataclasses.dataclass(frozen=True)
class OpSpec:
    """``op`` (tapegrad) against ``ref`` (NumPy/SciPy), its arguments drawn from ``domains``."""

    name: str
    op: Callable
    ref: Callable
    domains: tuple = ("real",)

    def __repr__(self):
        return self.name


@dataclasses.dataclass(frozen=True)
class ModuleSpec:
    """``fn(module, *args)``: one expression for the reference module and tapegrad's; ``kinds`` draws
    each argument and ``shapes`` lists the argument shapes."""

    name: str
    fn: Callable
    kinds: tuple
    shapes: tuple

    def __repr__(self):
        return self.name


def check_values(out, ref, dtype):
    """``out`` equals ``ref`` in shape, dtype and value (rtol 1e-6 for float32, 1e-12 otherwise, and
    an atol of rtol * max |ref|); sequences are compared element by element."""
    if isinstance(ref, (list, tuple)):
        assert isinstance(out, (list, tuple)) and len(out) == len(ref)
        for o, r in zip(out, ref):
            check_values(o, r, dtype)
        return
    out, ref = np.asarray(out), np.asarray(ref)
    assert out.shape == ref.shape and out.dtype == ref.dtype, (out.shape, out.dtype, ref.shape, ref.dtype)
    assert_close(out, ref, rtol=1e-6 if dtype == np.float32 else 1e-12)


def check_op(spec, args, dtype):
    """``spec.op(*args)``: NumPy's values (rtol 1e-6 for float32, 1e-12 otherwise, atol rtol * max |ref|)
    and dtype, derivatives checked to order 2 in both modes, and a gradient for each argument with its
    shape and dtype."""
    out = spec.op(*args)
    assert_close(out, spec.ref(*args), rtol=1e-6 if dtype == np.float32 else 1e-12)
    assert np.result_type(out) == dtype
    check_grads(spec.op, args, order=2, name=spec.name)
    grads = tg.grad(lambda *a: spec.op(*a).sum(), grad_position=tuple(range(len(args))))(*args)
    for g, a in zip(grads, args):
        assert g.shape == np.shape(a) and g.dtype == dtype
