"""Broadcasting through every differentiable binary elementwise primitive: operands with leading batch
axes the other lacks and size-1 axes, on either side and on both at once.

Each op is crossed with the shape pairs below and float64/float32: its values against NumPy's; its vjp
(``tg.vjp`` with a random cotangent, and ``tg.grad``) and its jvp against the op's partial derivatives
written in NumPy, summed to each operand's shape by an index count (``np.bincount`` over the operand's
flat indices broadcast to the result's shape) rather than by a list of axes, so the reference shares no
axis arithmetic with ``unbroadcast``; ``check_grads`` to order 2 in both modes (float64); and under
``tg.vmap`` with a batch axis on one operand only, the values and the per-example gradients against a
Python loop. The square pairs ((3, 3) against (3, 1), (1, 3) or (3,)) are where summing the wrong axis
gives the right shape: there a wrong reduction is a value mismatch, not a shape error.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Callable

import numpy as np
import pytest

import tapegrad as tg
import tapegrad.numpy as tnp
from _tol import assert_close, eps
from tapegrad.testing import check_grads

DTYPES = [np.float64, np.float32]

# (x's shape, y's shape): size-1 axes and missing leading axes on either operand and on both
PAIRS = [
    ((3, 1), (2, 3, 4)), ((2, 3, 4), (3, 1)),      # unit and missing axes on one side
    ((1, 4), (2, 3, 4)), ((2, 3, 4), (1, 4)),
    ((4,), (2, 3, 4)), ((2, 3, 4), (4,)),          # missing leading axes only
    ((2, 1, 4), (3, 1)), ((3, 1), (2, 1, 4)),      # both sides broadcast, different ranks
    ((2, 1, 1), (1, 3, 4)), ((1, 1, 4), (2, 3, 1)),  # both sides broadcast, same rank
    ((), (2, 3)), ((2, 3), ()),                    # a 0-d operand
    ((2, 1), (1, 1)), ((1, 1), (2, 1)),            # a size-1 axis against a size-1 axis
    ((3, 3), (3, 1)), ((3, 1), (3, 3)),            # square: the wrong axis gives the same shape
    ((3, 3), (1, 3)), ((1, 3), (3, 1)),
    ((3,), (3, 3)),
    ((2, 3, 4), (2, 3, 4)),                        # control: nothing broadcast
]


# ---- inputs --------------------------------------------------------------------------------------
def _draw(domain: str, shape, rng):
    """float64 values of ``shape`` from ``domain``; every domain keeps away from the op's kinks."""
    if domain == "real":
        return rng.uniform(-2.0, 2.0, shape)
    if domain == "pos":
        return rng.uniform(0.5, 2.0, shape)
    if domain == "nonzero":
        return rng.uniform(0.5, 2.0, shape) * rng.choice([-1.0, 1.0], shape)
    if domain == "low":  # k + [0.1, 0.4] against "high", k + [0.6, 0.9]: never closer than 0.2
        return rng.integers(-2, 2, shape) + rng.uniform(0.1, 0.4, shape)
    if domain == "high":
        return rng.integers(-2, 2, shape) + rng.uniform(0.6, 0.9, shape)
    if domain == "step":  # heaviside's x1: exact zeros among +-1.5
        return rng.choice([-1.5, 0.0, 1.5], shape)
    if domain == "int":  # ldexp's exponent
        return rng.integers(-3, 4, shape).astype(np.int64)
    raise ValueError(domain)


def _quotient_off_integers(x, y):
    """``x / y`` 0.05 away from every integer: the jumps of mod and fmod and of their derivatives."""
    q = np.asarray(x, np.float64) / np.asarray(y, np.float64)
    return bool(np.all(np.abs(q - np.round(q)) > 0.05))


# ---- the ops: tapegrad's function, NumPy's, and the partial derivatives in NumPy -------------------
@dataclasses.dataclass(frozen=True)
class BinarySpec:
    """``op(x, y)`` against ``ref(x, y)``; ``partials(x, y)`` gives ``(df/dx, df/dy)`` at the broadcast
    float64 operands (None: no derivative in that operand). ``wrt``: the operands differentiated
    (an integer operand is not); ``fd``: those checked by finite differences (default ``wrt``)."""

    name: str
    op: Callable
    ref: Callable
    partials: Callable
    domains: tuple = ("real", "real")
    wrt: tuple = (0, 1)
    fd: tuple | None = None
    quotient: bool = False  # mod/fmod: draw with x / y off the integers

    def __repr__(self):
        return self.name

    def valid(self, x, y):
        return not self.quotient or _quotient_off_integers(x, y)


def _power_partials(x, y):
    return y * x ** (y - 1.0), x ** y * np.log(x)


def _copysign_dx(x, y):
    return np.sign(x) * np.where(np.signbit(y), -1.0, 1.0), np.zeros_like(y)


def _one(x):
    return np.ones_like(x)


def _hypot(x, y):
    h = np.hypot(x, y)
    return x / h, y / h


SPECS = [
    BinarySpec("add", tnp.add, np.add, lambda x, y: (_one(x), _one(y))),
    BinarySpec("subtract", tnp.subtract, np.subtract, lambda x, y: (_one(x), -_one(y))),
    BinarySpec("multiply", tnp.multiply, np.multiply, lambda x, y: (y, x)),
    BinarySpec("divide", tnp.divide, np.divide, lambda x, y: (1.0 / y, -x / y ** 2), ("real", "nonzero")),
    BinarySpec("true_divide", tnp.true_divide, np.true_divide, lambda x, y: (1.0 / y, -x / y ** 2),
               ("real", "nonzero")),
    BinarySpec("power", tnp.power, np.power, _power_partials, ("pos", "real")),
    BinarySpec("float_power", tnp.float_power, np.float_power, _power_partials, ("pos", "real")),
    BinarySpec("maximum", tnp.maximum, np.maximum, lambda x, y: (1.0 * (x > y), 1.0 * (y > x)), ("low", "high")),
    BinarySpec("minimum", tnp.minimum, np.minimum, lambda x, y: (1.0 * (x < y), 1.0 * (y < x)), ("high", "low")),
    BinarySpec("fmax", tnp.fmax, np.fmax, lambda x, y: (1.0 * (x > y), 1.0 * (y > x)), ("high", "low")),
    BinarySpec("fmin", tnp.fmin, np.fmin, lambda x, y: (1.0 * (x < y), 1.0 * (y < x)), ("low", "high")),
    BinarySpec("logaddexp", tnp.logaddexp, np.logaddexp,
               lambda x, y: (np.exp(x - np.logaddexp(x, y)), np.exp(y - np.logaddexp(x, y)))),
    BinarySpec("logaddexp2", tnp.logaddexp2, np.logaddexp2,
               lambda x, y: (2.0 ** (x - np.logaddexp2(x, y)), 2.0 ** (y - np.logaddexp2(x, y)))),
    BinarySpec("arctan2", tnp.arctan2, np.arctan2,
               lambda y, x: (x / (x * x + y * y), -y / (x * x + y * y)), ("nonzero", "nonzero")),
    BinarySpec("hypot", tnp.hypot, np.hypot, _hypot, ("nonzero", "nonzero")),
    BinarySpec("copysign", tnp.copysign, np.copysign, _copysign_dx, ("nonzero", "nonzero")),
    BinarySpec("remainder", tnp.remainder, np.remainder, lambda x, y: (_one(x), -np.floor(x / y)),
               ("real", "nonzero"), quotient=True),
    BinarySpec("mod", tnp.mod, np.mod, lambda x, y: (_one(x), -np.floor(x / y)), ("real", "nonzero"),
               quotient=True),
    BinarySpec("fmod", tnp.fmod, np.fmod, lambda x, y: (_one(x), -np.trunc(x / y)), ("real", "nonzero"),
               quotient=True),
    BinarySpec("nextafter", tnp.nextafter, np.nextafter, lambda x, y: (_one(x), np.zeros_like(y))),
    # heaviside: no derivative in x1 (a step); in x2, 1 where x1 == 0. Finite differences in x2 only.
    BinarySpec("heaviside", tnp.heaviside, np.heaviside, lambda x, y: (np.zeros_like(x), 1.0 * (x == 0)),
               ("step", "real"), fd=(1,)),
    # ldexp: the exponent is an integer, differentiable in x1 only (d/dx1 = 2**x2)
    BinarySpec("ldexp", tnp.ldexp, np.ldexp, lambda x, e: (2.0 ** e, None), ("real", "int"), wrt=(0,)),
]


def _draw_pair(spec, shapes, dtype, rng):
    while True:
        x, y = (_draw(d, s, rng) for d, s in zip(spec.domains, shapes))
        x, y = (a if a.dtype.kind == "i" else a.astype(dtype) for a in (x, y))
        if spec.valid(x, y):
            return x, y


def _draw_batch(spec, shapes, side, shared, dtype, rng, batch=3):
    """``batch`` examples of operand ``side`` (stacked on a new axis 0), each valid with ``shared``."""
    examples = []
    while len(examples) < batch:
        a = _draw(spec.domains[side], shapes[side], rng)
        a = a if a.dtype.kind == "i" else a.astype(dtype)
        if spec.valid(*((a, shared) if side == 0 else (shared, a))):
            examples.append(a)
    return np.stack(examples)


# ---- the reference: partials, broadcast, and counted back onto each operand ------------------------
def _sum_to(full, shape):
    """``full`` (the result's shape) summed onto an operand of ``shape``: every result element is added
    to the operand element NumPy broadcast into it, found by broadcasting the operand's flat indices."""
    size = int(np.prod(shape, dtype=int))
    owner = np.broadcast_to(np.arange(size).reshape(shape), np.shape(full))
    return np.bincount(owner.ravel(), weights=np.ravel(full), minlength=size).reshape(shape)


def _reference_partials(spec, x, y):
    xb, yb = np.broadcast_arrays(np.asarray(x, np.float64), np.asarray(y, np.float64))
    return spec.partials(xb, yb)


def _closure(spec, args, positions):
    """``spec.op`` as a function of the operands at ``positions``, the others held at ``args``."""
    def f(*diff):
        full = list(args)
        for i, d in zip(positions, diff):
            full[i] = d
        return spec.op(*full)
    return f


def _out_shape(shapes):
    return np.broadcast_shapes(*shapes)


def _grad_dtype_and_close(actual, expected, operand, dtype):
    assert np.shape(actual) == np.shape(operand), (np.shape(actual), np.shape(operand))
    assert np.result_type(actual) == operand.dtype, (np.result_type(actual), operand.dtype)
    assert_close(np.asarray(actual), expected.astype(operand.dtype), dtype=dtype)


# ---- values, vjp, grad, jvp ----------------------------------------------------------------------
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("shapes", PAIRS, ids=str)
@pytest.mark.parametrize("spec", SPECS, ids=repr)
def test_values_vjp_and_jvp(spec, shapes, dtype):
    rng = np.random.default_rng(0)
    x, y = _draw_pair(spec, shapes, dtype, rng)
    args = (x, y)
    out_shape = _out_shape(shapes)
    ref = spec.ref(x, y)

    out = spec.op(x, y)
    assert np.shape(out) == ref.shape and np.result_type(out) == ref.dtype, (np.shape(out), np.result_type(out))
    assert_close(np.asarray(out), ref, rtol=4 * eps(ref.dtype))  # NumPy's own ufunc: a few ulps at most

    partials = _reference_partials(spec, x, y)
    ct = rng.standard_normal(out_shape).astype(ref.dtype)  # not ones: a summed axis is weighted
    expected = {i: _sum_to(ct * partials[i], shapes[i]) for i in spec.wrt}

    f = _closure(spec, args, spec.wrt)
    primals = tuple(args[i] for i in spec.wrt)
    out_vjp, vjp_fn = tg.vjp(f, *primals)
    assert_close(np.asarray(out_vjp), ref, rtol=4 * eps(ref.dtype))
    for i, g in zip(spec.wrt, vjp_fn(ct)):
        _grad_dtype_and_close(g, expected[i], args[i], dtype)

    grads = tg.grad(lambda *d: tnp.sum(f(*d) * ct), grad_position=tuple(range(len(primals))))(*primals)
    for i, g in zip(spec.wrt, grads):
        _grad_dtype_and_close(g, expected[i], args[i], dtype)

    # forward mode: one random tangent per operand, then each alone (the other's tangent absent)
    tangents = tuple(rng.standard_normal(np.shape(args[i])).astype(dtype) for i in spec.wrt)
    jvp_expected = sum(partials[i] * t for i, t in zip(spec.wrt, tangents))
    out_jvp, t_out = tg.jvp(f, primals, tangents)
    assert_close(np.asarray(out_jvp), ref, rtol=4 * eps(ref.dtype))
    assert np.shape(t_out) == out_shape and np.result_type(t_out) == ref.dtype
    assert_close(np.asarray(t_out), np.broadcast_to(jvp_expected, out_shape).astype(ref.dtype), dtype=dtype)
    if len(spec.wrt) == 2:
        for k, i in enumerate(spec.wrt):
            t = tuple(tangents[j] if j == k else np.zeros_like(tangents[j]) for j in range(2))
            assert_close(np.asarray(tg.jvp(f, primals, t)[1]),
                         np.broadcast_to(partials[i] * tangents[k], out_shape).astype(ref.dtype), dtype=dtype)


@pytest.mark.parametrize("shapes", PAIRS, ids=str)
@pytest.mark.parametrize("spec", SPECS, ids=repr)
def test_check_grads_order_2(spec, shapes):
    x, y = _draw_pair(spec, shapes, np.float64, np.random.default_rng(1))
    fd = spec.fd or spec.wrt
    check_grads(_closure(spec, (x, y), fd), tuple((x, y)[i] for i in fd), order=2, modes=("fwd", "rev"),
                name=spec.name)


# ---- vmap: a batch axis on one operand only ------------------------------------------------------
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("side", [0, 1], ids=["in_axes=(0,None)", "in_axes=(None,0)"])
@pytest.mark.parametrize("shapes", PAIRS, ids=str)
@pytest.mark.parametrize("spec", SPECS, ids=repr)
def test_vmap_values_and_grads(spec, shapes, side, dtype):
    rng = np.random.default_rng(2)
    x, y = _draw_pair(spec, shapes, dtype, rng)
    shared = (x, y)[1 - side]
    batched = _draw_batch(spec, shapes, side, shared, dtype, rng)
    in_axes = (0, None) if side == 0 else (None, 0)
    examples = [(b, shared) if side == 0 else (shared, b) for b in batched]
    operands = (batched, shared) if side == 0 else (shared, batched)
    ct = rng.standard_normal(_out_shape(shapes)).astype(np.result_type(spec.ref(x, y)))

    out = tg.vmap(spec.op, in_axes=in_axes)(*operands)
    expected = np.stack([spec.ref(*ex) for ex in examples])
    assert np.shape(out) == expected.shape and np.result_type(out) == expected.dtype
    assert_close(np.asarray(out), expected, rtol=4 * eps(expected.dtype))

    def loss(a, b):
        return tnp.sum(spec.op(a, b) * ct)
    positions = tuple(spec.wrt)
    grad_fn = tg.grad(loss, grad_position=positions if len(positions) > 1 else positions[0])
    got = tg.vmap(grad_fn, in_axes=in_axes)(*operands)
    got = got if len(positions) > 1 else (got,)
    per_example = [grad_fn(*ex) for ex in examples]
    per_example = [p if len(positions) > 1 else (p,) for p in per_example]
    for k, i in enumerate(positions):
        loop = np.stack([np.asarray(p[k]) for p in per_example])
        assert np.shape(got[k]) == loop.shape and np.result_type(got[k]) == loop.dtype
        assert_close(np.asarray(got[k]), loop, dtype=dtype)
        # and the loop itself against the reference partials, so a vmap that agrees with a wrong grad fails
        reference = np.stack([_sum_to(ct * _reference_partials(spec, *ex)[i], shapes[i]) for ex in examples])
        assert_close(np.asarray(got[k]), reference.astype(loop.dtype), dtype=dtype)


def test_pairs_include_same_shape_wrong_axis_cases():
    """The square pairs are in the table: there a reduction over the wrong axis keeps the shape."""
    square = [p for p in PAIRS if _out_shape(p) == (3, 3)]
    assert ((3, 1), (3, 3)) in square and ((1, 3), (3, 1)) in square and ((3,), (3, 3)) in square
