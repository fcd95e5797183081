"""The op table: every tapegrad.numpy function crossed with shapes, dtypes and axes, its values checked
against NumPy and its derivatives against finite differences to order 2 (tg.testing.check_grads)."""
from __future__ import annotations

import numpy as np
import pytest
import scipy.special

import tapegrad as tg
import tapegrad.numpy as tnp
import tapegrad.scipy.special as tsp
from _specs import OpSpec, check_op
from _tol import assert_close
from _vmapcheck import check_vmap, check_vmap_mixes
from tapegrad.testing import check_grads

DTYPES = [np.float64, np.float32]


def _draw(domain: str, shape, dtype, rng):
    if domain == "real":
        x = rng.uniform(-2.0, 2.0, shape)
    elif domain == "pos":
        x = rng.uniform(0.5, 2.0, shape)
    elif domain == "unit":
        x = rng.uniform(-0.8, 0.8, shape)
    elif domain == "prob":
        x = rng.uniform(0.15, 0.85, shape)
    elif domain == "nonzero":
        x = rng.uniform(0.5, 2.0, shape) * rng.choice([-1.0, 1.0], shape)
    elif domain == "offint":  # away from the jumps of floor/ceil/round
        x = rng.integers(-3, 3, shape) + rng.uniform(0.2, 0.3, shape)
    else:
        raise ValueError(domain)
    return np.asarray(x, dtype=dtype)


# ---- unary -------------------------------------------------------------------------------------
UNARY = [
    OpSpec("negative", tnp.negative, np.negative),
    OpSpec("abs", tnp.abs, np.abs, ("nonzero",)),
    OpSpec("sign", tnp.sign, np.sign, ("nonzero",)),
    OpSpec("exp", tnp.exp, np.exp),
    OpSpec("expm1", tnp.expm1, np.expm1),
    OpSpec("log", tnp.log, np.log, ("pos",)),
    OpSpec("log1p", tnp.log1p, np.log1p, ("pos",)),
    OpSpec("log2", tnp.log2, np.log2, ("pos",)),
    OpSpec("log10", tnp.log10, np.log10, ("pos",)),
    OpSpec("sqrt", tnp.sqrt, np.sqrt, ("pos",)),
    OpSpec("square", tnp.square, np.square),
    OpSpec("reciprocal", tnp.reciprocal, np.reciprocal, ("nonzero",)),
    OpSpec("sin", tnp.sin, np.sin),
    OpSpec("cos", tnp.cos, np.cos),
    OpSpec("tan", tnp.tan, np.tan, ("unit",)),
    OpSpec("tanh", tnp.tanh, np.tanh),
    OpSpec("sinh", tnp.sinh, np.sinh),
    OpSpec("cosh", tnp.cosh, np.cosh),
    OpSpec("arcsin", tnp.arcsin, np.arcsin, ("unit",)),
    OpSpec("arccos", tnp.arccos, np.arccos, ("unit",)),
    OpSpec("arctan", tnp.arctan, np.arctan),
    OpSpec("floor", tnp.floor, np.floor, ("offint",)),
    OpSpec("ceil", tnp.ceil, np.ceil, ("offint",)),
    OpSpec("round", tnp.round, np.round, ("offint",)),
    OpSpec("erf", tsp.erf, scipy.special.erf),
    OpSpec("expit", tsp.expit, scipy.special.expit),
    OpSpec("logit", tsp.logit, scipy.special.logit, ("prob",)),
]
UNARY_SHAPES = [(), (3,), (3, 2)]


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("shape", UNARY_SHAPES, ids=str)
@pytest.mark.parametrize("spec", UNARY, ids=repr)
def test_unary(spec, shape, dtype):
    check_op(spec, (_draw(spec.domains[0], shape, dtype, np.random.default_rng(0)),), dtype)


@pytest.mark.parametrize("spec", UNARY, ids=repr)
def test_rules_are_linear_in_the_tangent_and_the_cotangent(spec):
    """A jvp rule is linear in the tangent and a vjp rule in the cotangent, also where it is 0: the
    Jacobian of ``v -> jvp(op, x, v)`` at ``v = 0`` is the one at any other ``v``. A rule that returned
    a constant 0 where the tangent was 0 (sqrt's did, for the convention at sqrt(0)) had the right value
    and no derivative there, and transposing it (``custom_root``'s reverse mode) gave wrong numbers."""
    rng = np.random.default_rng(2)
    x = _draw(spec.domains[0], (3,), np.float64, rng)
    v = rng.standard_normal(3)
    if not np.issubdtype(np.result_type(spec.op(x)), np.floating):
        pytest.skip("no derivative")
    tangent_map = lambda v: tg.jvp(spec.op, (x,), (v,))[1]
    cotangent_map = lambda c: tg.vjp(spec.op, x)[1](c)[0]
    for linear_map in (tangent_map, cotangent_map):
        at_zero, at_v = tg.jacfwd(linear_map)(np.zeros(3)), tg.jacfwd(linear_map)(v)
        assert_close(at_zero, at_v, rtol=1e-12)
        assert_close(tg.jacrev(linear_map)(np.zeros(3)), at_v, rtol=1e-12)


@pytest.mark.parametrize("route", ["rev-rev", "fwd-rev", "fwd-fwd"])
def test_second_derivatives_at_zero_where_the_first_vanishes(route):
    """x**2 and square at x = 0: the first derivative is 0 there (and stops an infinite cotangent, the
    sqrt(sum(x**2)) convention), the second is 2. A rule that returned a constant 0 wherever 2x == 0
    had the right value and no derivative, so these Hessians came out 0, and with them the implicit
    derivative of an exactly fitting least_squares."""
    hess = {"rev-rev": lambda f: tg.jacrev(tg.grad(f)), "fwd-rev": lambda f: tg.jacfwd(tg.grad(f)),
            "fwd-fwd": lambda f: tg.jacfwd(tg.jacfwd(f))}[route]
    for f, second in [(lambda w: tnp.sum(w ** 2), 2.0), (lambda w: tnp.sum(tnp.square(w)), 2.0),
                      (lambda w: tnp.sum(w ** 3), 0.0)]:
        assert_close(hess(f)(np.zeros(3)), second * np.eye(3), rtol=1e-12)
    with np.errstate(divide="ignore", invalid="ignore"):  # sqrt'(0) = inf meets 2x = 0, as documented
        assert_close(tg.grad(lambda x: tnp.sqrt(tnp.sum(x ** 2)))(np.zeros(3)), np.zeros(3), rtol=0)


# ---- binary ------------------------------------------------------------------------------------
BINARY = [
    OpSpec("add", tnp.add, np.add),
    OpSpec("subtract", tnp.subtract, np.subtract),
    OpSpec("multiply", tnp.multiply, np.multiply),
    OpSpec("divide", tnp.divide, np.divide, ("real", "nonzero")),
    OpSpec("true_divide", tnp.true_divide, np.true_divide, ("real", "nonzero")),
    OpSpec("power", tnp.power, np.power, ("pos", "real")),
    OpSpec("maximum", tnp.maximum, np.maximum),
    OpSpec("minimum", tnp.minimum, np.minimum),
    OpSpec("logaddexp", tnp.logaddexp, np.logaddexp),
    OpSpec("arctan2", tnp.arctan2, np.arctan2, ("nonzero", "nonzero")),
]
BINARY_SHAPES = [((), ()), ((3,), (3,)), ((3, 2), (3, 2)), ((3, 2), (2,)), ((1, 2), (3, 1)), ((), (3, 2))]


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("shapes", BINARY_SHAPES, ids=str)
@pytest.mark.parametrize("spec", BINARY, ids=repr)
def test_binary(spec, shapes, dtype):
    rng = np.random.default_rng(1)
    x = _draw(spec.domains[0], shapes[0], dtype, rng)
    y = _draw(spec.domains[-1], shapes[1], dtype, rng)
    check_op(spec, (x, y), dtype)


@pytest.mark.parametrize("spec", BINARY, ids=repr)
def test_binary_with_python_scalar_keeps_float32(spec):
    x = _draw(spec.domains[0], (3,), np.float32, np.random.default_rng(2))
    scalar = 1.5
    check_grads(lambda x: spec.op(x, scalar), (x,), order=2, name=spec.name)
    assert np.result_type(spec.op(x, scalar)) == np.float32
    assert tg.grad(lambda x: spec.op(x, scalar).sum())(x).dtype == np.float32
    if spec.name not in ("power",):  # scalar ** x needs a positive base: still fine for 1.5
        assert tg.grad(lambda x: spec.op(scalar, x).sum())(x).dtype == np.float32


def test_mixed_precision_gradients_keep_each_dtype():
    x32 = np.ones(3, np.float32)
    y64 = np.full(3, 2.0)
    gx, gy = tg.grad(lambda x, y: (x * y).sum(), grad_position=(0, 1))(x32, y64)
    assert gx.dtype == np.float32 and gy.dtype == np.float64
    assert_close(gx, 2.0)


# ---- kinks and ties (docs/numpy.md) -------------------------------------------------------------
def test_kink_and_tie_conventions():
    zero = np.zeros(3)
    assert np.all(tg.grad(lambda x: tnp.abs(x).sum())(zero) == 0)
    assert np.all(tg.grad(lambda x: tnp.sign(x).sum())(zero) == 0)
    assert np.all(tg.grad(lambda x: (x ** 0).sum())(zero) == 0)
    assert np.all(tg.grad(lambda x: (x ** 0.0).sum())(np.array([0.0, 2.0])) == 0)
    assert np.all(tg.grad(lambda x: tnp.power(x, np.zeros(2)).sum())(np.array([0.0, 2.0])) == 0)
    with np.errstate(divide="ignore"):
        assert np.isinf(tg.grad(lambda x: tnp.sqrt(x).sum())(zero)).all()
    # ties share evenly, as autograd and JAX
    assert_close(tg.grad(lambda x, y: tnp.maximum(x, y).sum(), (0, 1))(zero, zero),
                 (np.full(3, 0.5), np.full(3, 0.5)))
    assert_close(tg.grad(lambda x, y: tnp.minimum(x, y).sum(), (0, 1))(zero, zero),
                 (np.full(3, 0.5), np.full(3, 0.5)))
    assert_close(tg.grad(lambda x: tnp.max(x))(np.array([1.0, 3.0, 3.0])), [0, 0.5, 0.5])
    assert_close(tg.grad(lambda x: tnp.min(x))(np.array([1.0, 1.0, 3.0])), [0.5, 0.5, 0])
    # clip passes the gradient on the boundary
    assert_close(tg.grad(lambda x: tnp.clip(x, 0.0, 1.0).sum())(np.array([-1.0, 0.0, 0.5, 1.0, 2.0])),
                 [0, 1, 1, 1, 0])


# ---- where, clip ---------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_where_and_clip(dtype):
    rng = np.random.default_rng(3)
    x = _draw("real", (3, 2), dtype, rng)
    y = _draw("real", (2,), dtype, rng)
    cond = x > 0
    check_grads(lambda x, y: tnp.where(cond, x, y), (x, y), name="where")
    check_grads(lambda x, y: tnp.where(cond, x * y, y * y), (x, y), name="where")
    lo, hi = np.asarray(-0.5, dtype), np.asarray(0.7, dtype)
    x = x + np.asarray(0.05, dtype)  # keep off the boundary for finite differences
    check_grads(lambda x, lo, hi: tnp.clip(x, lo, hi), (x, lo, hi), name="clip")
    check_grads(lambda x: tnp.clip(x, None, 0.7), (x,), name="clip")
    assert_close(tnp.clip(x, lo, hi), np.clip(x, lo, hi))


# ---- reductions --------------------------------------------------------------------------------
REDUCTIONS = [
    OpSpec("sum", tnp.sum, np.sum),
    OpSpec("mean", tnp.mean, np.mean),
    OpSpec("var", tnp.var, np.var),
    OpSpec("std", tnp.std, np.std),
    OpSpec("max", tnp.max, np.max),
    OpSpec("min", tnp.min, np.min),
    OpSpec("amax", tnp.amax, np.amax),
    OpSpec("amin", tnp.amin, np.amin),
    OpSpec("prod", tnp.prod, np.prod, ("pos",)),
    OpSpec("logsumexp", tsp.logsumexp, scipy.special.logsumexp),
]
AXES = [None, 0, -1, (0, 1)]


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("keepdims", [False, True])
@pytest.mark.parametrize("axis", AXES, ids=str)
@pytest.mark.parametrize("spec", REDUCTIONS, ids=repr)
def test_reduction(spec, axis, keepdims, dtype):
    x = _draw(spec.domains[0], (3, 4, 2) if axis == (0, 1) else (3, 4), dtype, np.random.default_rng(4))
    fn = lambda x: spec.op(x, axis=axis, keepdims=keepdims)  # noqa: E731
    assert_close(fn(x), spec.ref(x, axis=axis, keepdims=keepdims),
                 rtol=1e-5 if dtype == np.float32 else 1e-12)
    assert np.result_type(fn(x)) == dtype
    check_grads(fn, (x,), order=2, name=spec.name)


@pytest.mark.parametrize("axis", [None, 0, 1, -1])
def test_cumsum(axis):
    x = _draw("real", (3, 4), np.float64, np.random.default_rng(5))
    assert_close(tnp.cumsum(x, axis=axis), np.cumsum(x, axis=axis))
    check_grads(lambda x: tnp.cumsum(x, axis=axis), (x,), order=2, name="cumsum")


def test_var_std_ddof_and_prod_safe_at_zeros():
    x = _draw("real", (4, 3), np.float64, np.random.default_rng(6))
    check_grads(lambda x: tnp.var(x, axis=0, ddof=1), (x,), name="var")
    check_grads(lambda x: tnp.std(x, axis=1, ddof=1), (x,), name="std")
    assert_close(tnp.std(x, ddof=1), np.std(x, ddof=1))
    # prod with zeros: exact gradients and second derivatives (product of the others)
    z = np.array([2.0, 0.0, 3.0, 5.0])
    assert_close(tg.grad(tnp.prod)(z), [0.0, 30.0, 0.0, 0.0])
    two_zeros = np.array([2.0, 0.0, 0.0, 5.0])
    assert_close(tg.grad(tnp.prod)(two_zeros), [0.0, 0.0, 0.0, 0.0])
    hess_row = tg.grad(lambda x: tg.grad(tnp.prod)(x)[1])(z)  # d/dx_j of prod of the others
    assert_close(hess_row, [15.0, 0.0, 10.0, 6.0])
    check_grads(lambda x: tnp.prod(x, axis=1), (np.array([[0.0, 1.5, 2.0], [1.0, 0.0, 0.0]]),), order=3, name="prod")


def test_integer_and_boolean_reductions():
    x = np.array([[1.0, 5.0, 2.0], [7.0, 0.0, 3.0]])
    for fn in (tnp.argmax, tnp.argmin):
        for axis in (None, 0, 1):
            np.testing.assert_array_equal(fn(x, axis=axis), getattr(np, fn.__name__)(x, axis=axis))
    np.testing.assert_array_equal(tnp.all(x > 0, axis=1), np.all(x > 0, axis=1))
    np.testing.assert_array_equal(tnp.any(x > 6), True)

    def f(x):  # argmax inside a differentiated function selects, with no gradient of its own
        return x[tnp.argmax(x)] * 2.0
    assert_close(tg.grad(f)(np.array([1.0, 4.0, 2.0])), [0, 2, 0])


@pytest.mark.parametrize("axis", [(0, 1), (1,), 1.0])
def test_argmax_argmin_refuse_several_axes_as_numpy_does(axis):
    x = np.array([[1.0, 5.0, 2.0], [7.0, 0.0, 3.0]])
    for fn in (tnp.argmax, tnp.argmin):  # once, the first axis of a tuple was taken: a silent wrong answer
        with pytest.raises(TypeError, match=rf"(?s){fn.__name__}.*axis.*one int"):
            fn(x, axis=axis)
        with pytest.raises(TypeError):
            getattr(np, fn.__name__)(x, axis=axis)


# ---- shape and indexing ------------------------------------------------------------------------
_MASK = np.arange(12).reshape(3, 4) % 3 == 0
SHAPE_CASES = [
    ("reshape", lambda x: tnp.reshape(x, (4, 3)), lambda x: np.reshape(x, (4, 3))),
    ("reshape-1", lambda x: x.reshape(2, -1), lambda x: x.reshape(2, -1)),
    ("ravel", tnp.ravel, np.ravel),
    ("transpose", tnp.transpose, np.transpose),
    ("T", lambda x: x.T, lambda x: x.T),
    ("swapaxes", lambda x: tnp.swapaxes(x[None], 0, 2), lambda x: np.swapaxes(x[None], 0, 2)),
    ("moveaxis", lambda x: tnp.moveaxis(x[None], 0, -1), lambda x: np.moveaxis(x[None], 0, -1)),
    ("expand_dims", lambda x: tnp.expand_dims(x, (0, 2)), lambda x: np.expand_dims(x, (0, 2))),
    ("squeeze", lambda x: tnp.squeeze(x[:, None, :1]), lambda x: np.squeeze(x[:, None, :1])),
    ("broadcast_to", lambda x: tnp.broadcast_to(x[:1], (2, 3, 4)), lambda x: np.broadcast_to(x[:1], (2, 3, 4))),
    ("concatenate", lambda x: tnp.concatenate([x, 2 * x[:1], x * x], axis=0),
     lambda x: np.concatenate([x, 2 * x[:1], x * x], axis=0)),
    ("concatenate1", lambda x: tnp.concatenate([x, x[:, :2]], axis=-1),
     lambda x: np.concatenate([x, x[:, :2]], axis=-1)),
    ("stack", lambda x: tnp.stack([x, x * x], axis=1), lambda x: np.stack([x, x * x], axis=1)),
    ("split", lambda x: tnp.split(x, 2, axis=1)[1][1:] * tnp.split(x, [1], axis=0)[1][:, :2],
     lambda x: np.split(x, 2, axis=1)[1][1:] * np.split(x, [1], axis=0)[1][:, :2]),
    ("pad", lambda x: tnp.pad(x, ((1, 0), (2, 1)), constant_values=0.5),
     lambda x: np.pad(x, ((1, 0), (2, 1)), constant_values=0.5)),
    ("repeat", lambda x: tnp.repeat(x, 2, axis=0), lambda x: np.repeat(x, 2, axis=0)),
    ("repeat-flat", lambda x: tnp.repeat(x, [1, 0, 2, 1] * 3), lambda x: np.repeat(x, [1, 0, 2, 1] * 3)),
    ("tile", lambda x: tnp.tile(x, (2, 1, 2)), lambda x: np.tile(x, (2, 1, 2))),
    ("flip", lambda x: tnp.flip(x, 1), lambda x: np.flip(x, 1)),
    ("flip-all", tnp.flip, np.flip),
    ("take", lambda x: tnp.take(x, [0, 2, 2], axis=1), lambda x: np.take(x, [0, 2, 2], axis=1)),
    ("take-flat", lambda x: tnp.take(x, [[0, 5], [5, 11]]), lambda x: np.take(x, [[0, 5], [5, 11]])),
    ("take_along_axis", lambda x: tnp.take_along_axis(x, np.array([[0, 0], [3, 1], [2, 2]]), axis=1),
     lambda x: np.take_along_axis(x, np.array([[0, 0], [3, 1], [2, 2]]), axis=1)),
    ("basic-index", lambda x: x[1:, ::2], lambda x: x[1:, ::2]),
    ("int-index", lambda x: x[1, -1] * x[0], lambda x: x[1, -1] * x[0]),
    ("newaxis-ellipsis", lambda x: x[None, ..., 1], lambda x: x[None, ..., 1]),
    ("array-index", lambda x: x[np.array([0, 2, 0]), np.array([1, 1, 3])],
     lambda x: x[np.array([0, 2, 0]), np.array([1, 1, 3])]),
    ("list-index", lambda x: x[[2, 0, 0]], lambda x: x[[2, 0, 0]]),
    ("bool-index", lambda x: x[np.array([True, False, True])], lambda x: x[np.array([True, False, True])]),
    ("bool-mask", lambda x: x[x > 0], lambda x: x[x > 0]),
    ("at-set", lambda x: x.at[1, :2].set(x[0, :2] * 3.0), None),
    ("at-add", lambda x: x.at[np.array([0, 0, 2])].add(x[1] * x[1]), None),
    ("at-get", lambda x: x.at[1:, 1].get(), lambda x: x[1:, 1]),
    ("at-set-mask", lambda x: x.at[_MASK].set(0.0), None),
]


def _at_reference(name, x):
    x = x.copy()
    if name == "at-set":
        x[1, :2] = x[0, :2] * 3.0
    elif name == "at-add":
        np.add.at(x, np.array([0, 0, 2]), x[1] * x[1])
    elif name == "at-set-mask":
        x[_MASK] = 0.0
    return x


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("name,fn,ref", SHAPE_CASES, ids=[c[0] for c in SHAPE_CASES])
def test_shape_and_indexing(name, fn, ref, dtype):
    x = _draw("real", (3, 4), dtype, np.random.default_rng(7))
    expected = ref(x) if ref is not None else _at_reference(name, x)
    value = tg.vjp(fn, x)[0]  # traced, so .at exists (plain NumPy arrays have no .at)
    assert_close(value, expected, rtol=1e-6)
    check_grads(fn, (x,), order=2, name=name)
    assert tg.grad(lambda x: tnp.sum(fn(x)))(x).dtype == dtype


def test_at_updates_differentiate_in_every_operand():
    x = np.arange(6.0).reshape(2, 3)
    v = np.array([10.0, 20.0])
    check_grads(lambda x, v: x.at[:, 1].set(v), (x, v), name="at-set")
    check_grads(lambda x, v: x.at[np.array([1, 1]), np.array([0, 0])].add(v), (x, v), name="at-add")
    gx, gv = tg.grad(lambda x, v: x.at[np.array([1, 1]), np.array([0, 0])].add(v * v).sum(), (0, 1))(x, v)
    assert_close(gx, np.ones((2, 3)))
    assert_close(gv, 2 * v)
    gx, gv = tg.grad(lambda x, v: (x.at[:, 1].set(v) ** 2).sum(), (0, 1))(x, v)
    assert_close(gx, 2 * x * np.array([1, 0, 1]))
    assert_close(gv, 2 * v)


# ---- linear algebra ----------------------------------------------------------------------------
LINALG_CASES = [
    ("matmul-2x2", tnp.matmul, (3, 4), (4, 2)),
    ("matmul-1x2", tnp.matmul, (4,), (4, 2)),
    ("matmul-2x1", tnp.matmul, (3, 4), (4,)),
    ("matmul-1x1", tnp.matmul, (4,), (4,)),
    ("matmul-batched", tnp.matmul, (2, 3, 4), (4, 2)),
    ("matmul-broadcast", tnp.matmul, (2, 1, 3, 4), (3, 4, 2)),
    ("matmul-1xbatch", tnp.matmul, (4,), (2, 4, 3)),
    ("matmul-op", lambda a, b: a @ b, (3, 4), (4, 2)),
    ("dot-2x2", tnp.dot, (3, 4), (4, 2)),
    ("dot-1x1", tnp.dot, (4,), (4,)),
    ("dot-3x2", tnp.dot, (2, 3, 4), (4, 2)),
    ("dot-3x3", tnp.dot, (2, 3, 4), (2, 4, 3)),
    ("dot-scalar", tnp.dot, (), (3,)),
    ("tensordot-2", lambda a, b: tnp.tensordot(a, b), (2, 3, 4), (3, 4, 2)),
    ("tensordot-axes", lambda a, b: tnp.tensordot(a, b, axes=([0, 2], [2, 0])), (2, 3, 4), (4, 5, 2)),
    ("outer", tnp.outer, (3,), (2, 2)),
    ("inner", tnp.inner, (2, 4), (3, 4)),
    ("vdot", tnp.vdot, (2, 3), (3, 2)),
    ("einsum-ij,jk", lambda a, b: tnp.einsum("ij,jk->ik", a, b), (3, 4), (4, 2)),
    ("einsum-implicit", lambda a, b: tnp.einsum("ij,kj", a, b), (3, 4), (2, 4)),
    ("einsum-sum-out", lambda a, b: tnp.einsum("ij,j->", a, b), (3, 4), (4,)),
    ("einsum-only-in-a", lambda a, b: tnp.einsum("ij,k->k", a, b), (3, 4), (2,)),
    ("einsum-ellipsis", lambda a, b: tnp.einsum("...ij,...jk->...ik", a, b), (2, 3, 4), (4, 2)),
    ("einsum-broadcast1", lambda a, b: tnp.einsum("...i,...i->...", a, b), (1, 4), (3, 4)),
    ("einsum-outer", lambda a, b: tnp.einsum("i,j->ij", a, b), (3,), (2,)),
]


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("name,fn,sa,sb", LINALG_CASES, ids=[c[0] for c in LINALG_CASES])
def test_linalg(name, fn, sa, sb, dtype):
    rng = np.random.default_rng(8)
    a, b = _draw("real", sa, dtype, rng), _draw("real", sb, dtype, rng)
    np_name = name.split("-")[0]
    ref = {"matmul": np.matmul, "dot": np.dot, "outer": np.outer, "inner": np.inner, "vdot": np.vdot}.get(np_name)
    if name.startswith("einsum"):
        assert_close(fn(a, b), fn(a, b))  # value checked in test_einsum_values
    elif name.startswith("tensordot"):
        axes = 2 if name == "tensordot-2" else ([0, 2], [2, 0])
        assert_close(fn(a, b), np.tensordot(a, b, axes=axes), rtol=1e-5)
    elif name != "matmul-op":
        assert_close(fn(a, b), ref(a, b), rtol=1e-5)
    check_grads(fn, (a, b), order=2, name=name)
    ga, gb = tg.grad(lambda a, b: tnp.sum(fn(a, b)), (0, 1))(a, b)
    assert ga.shape == sa and gb.shape == sb and ga.dtype == dtype and gb.dtype == dtype


@pytest.mark.parametrize("subscripts,shapes", [
    ("ij,jk->ik", [(3, 4), (4, 2)]), ("ij,kj", [(3, 4), (2, 4)]), ("ij,j->", [(3, 4), (4,)]),
    ("ij,k->k", [(3, 4), (2,)]), ("...ij,...jk->...ik", [(2, 3, 4), (4, 2)]),
    ("...i,...i->...", [(1, 4), (3, 4)]), ("i,j->ij", [(3,), (2,)]), ("bij,bjk,bk->bi", [(2, 3, 4), (2, 4, 5), (2, 5)]),
    ("ij->ji", [(3, 4)]), ("ij", [(3, 4)]), ("ji", [(3, 4)]),
])
def test_einsum_values(subscripts, shapes):
    rng = np.random.default_rng(9)
    ops = [rng.standard_normal(s) for s in shapes]
    assert_close(tnp.einsum(subscripts, *ops), np.einsum(subscripts, *ops), rtol=1e-12)
    check_grads(lambda *ops: tnp.einsum(subscripts, *ops), tuple(ops), order=2, name=f"einsum {subscripts}")


@pytest.mark.parametrize("ord_,axis,shape", [
    (None, None, (3,)), (None, None, (3, 4)), (2, None, (3,)), (1, None, (3,)), (np.inf, None, (3,)),
    (-np.inf, None, (3,)), (3, None, (3,)), (0.5, None, (3,)), (None, 1, (3, 4)), (1, 0, (3, 4)),
    ("fro", None, (3, 4)), (1, None, (3, 4)), (np.inf, None, (3, 4)), (-1, None, (3, 4)),
    (-np.inf, None, (3, 4)), ("fro", (1, 2), (2, 3, 4)),
])
def test_norm(ord_, axis, shape):
    x = _draw("nonzero", shape, np.float64, np.random.default_rng(10))
    assert_close(tnp.linalg.norm(x, ord_, axis), np.linalg.norm(x, ord_, axis), rtol=1e-12)
    assert_close(tnp.linalg.norm(x, ord_, axis, keepdims=True),
                 np.linalg.norm(x, ord_, axis, keepdims=True), rtol=1e-12)
    check_grads(lambda x: tnp.linalg.norm(x, ord_, axis), (x,), order=2, name=f"norm ord={ord_}")


@pytest.mark.parametrize("ord", [2, -2, "nuc"])
def test_norm_of_singular_values_matches_numpy_and_differentiates(ord):
    a = np.random.default_rng(3).standard_normal((3, 4))
    assert_close(tnp.linalg.norm(a, ord), np.linalg.norm(a, ord))
    check_grads(lambda a: tnp.linalg.norm(a, ord), (a,))


# ---- creation ------------------------------------------------------------------------------------
def test_creation_functions_match_numpy():
    np.testing.assert_array_equal(tnp.zeros((2, 3)), np.zeros((2, 3)))
    np.testing.assert_array_equal(tnp.ones(3, np.float32), np.ones(3, np.float32))
    assert tnp.ones(3, np.float32).dtype == np.float32
    np.testing.assert_array_equal(tnp.full((2,), 7.0), np.full((2,), 7.0))
    np.testing.assert_array_equal(tnp.eye(3, k=1), np.eye(3, k=1))
    np.testing.assert_array_equal(tnp.arange(2, 9, 3), np.arange(2, 9, 3))
    np.testing.assert_array_equal(tnp.linspace(0, 1, 5), np.linspace(0, 1, 5))
    x = np.ones((2, 2), np.float32)
    for fn in (tnp.zeros_like, tnp.ones_like):
        assert fn(x).dtype == np.float32 and fn(x).shape == (2, 2)
    np.testing.assert_array_equal(tnp.full_like(x, 3.0), np.full_like(x, 3.0))
    np.testing.assert_array_equal(tnp.asarray([1.0, 2.0]), np.asarray([1.0, 2.0]))
    assert tnp.array([1, 2], dtype=np.float32).dtype == np.float32


def test_creation_like_on_tracers_is_constant():
    def f(x):
        return (x * tnp.ones_like(x) + tnp.zeros_like(x) + tnp.full_like(x, 2.0)).sum()
    assert_close(tg.grad(f)(np.array([1.0, 2.0])), [1.0, 1.0])


def test_lists_of_tracers_stack_differentiably():
    def f(a, b):
        return tnp.array([a, b * b]).sum() + tnp.mean([a, b]) + tnp.stack([a, b])[1] + tnp.sum([a, a])
    ga, gb = tg.grad(f, (0, 1))(2.0, 3.0)
    assert_close([ga, gb], [1 + 0.5 + 2, 6 + 0.5 + 1])


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_astype(dtype):
    x = np.array([1.25, -2.5], dtype)
    other = np.float32 if dtype == np.float64 else np.float64
    loose = dict(eps=1e-3, rtol=1e-2, atol=1e-2) if other == np.float32 else {}
    check_grads(lambda x: tnp.astype(x, other) * 3.0, (x,), name="astype", **loose)
    g = tg.grad(lambda x: tnp.astype(x, other).sum())(x)
    assert g.dtype == dtype
    # through an integer cast no gradient flows
    np.testing.assert_array_equal(tg.grad(lambda x: x.astype(np.int32).astype(dtype).sum() + x.sum())(x), [1, 1])


# ---- abstract evaluation agrees with the implementation ----------------------------------------
def test_abstract_eval_matches_impl():
    from tapegrad import _structural
    from tapegrad._rules import aval_of
    from tapegrad.numpy import _elementwise as ew
    from tapegrad.numpy import _linalg, _reductions
    cases = [
        (ew.sin_p, (np.ones((2, 3), np.float32),), {}),
        (ew.log_p, (np.ones(3, np.int64),), {}),
        (ew.add_p, (np.ones((2, 1), np.float32), np.ones(3, np.float32)), {}),
        (ew.add_p, (np.ones(3, np.float32), 2.0), {}),
        (ew.multiply_p, (np.ones(3, np.float32), np.ones(3)), {}),
        (ew.less_p, (np.ones(3), 1.0), {}),
        (ew.where_p, (np.ones(3, bool), np.ones(3, np.float32), 0.0), {}),
        (_reductions.sum_p, (np.ones((2, 3), np.float32),), dict(axis=(1,), keepdims=False)),
        (_reductions.argmax_p, (np.ones((2, 3)),), dict(axis=0, keepdims=True)),
        (_structural.reshape_p, (np.ones((2, 3)),), dict(shape=(3, 2))),
        (_structural.transpose_p, (np.ones((2, 3, 4)),), dict(axes=(2, 0, 1))),
        (_linalg.matmul_p, (np.ones((5, 2, 3), np.float32), np.ones((3, 4), np.float32)), {}),
        (_linalg.einsum_p, (np.ones((2, 3)), np.ones((3, 4))), dict(subscripts="ij,jk->ik", optimize=False)),
    ]
    for prim, args, params in cases:
        out = prim.impl(*args, **params)
        aval = prim.abstract_eval(*[aval_of(a) for a in args], **params)
        assert aval.shape == np.shape(out), prim
        assert np.dtype(aval.dtype) == np.result_type(out), prim


# ---- cases a review found ---------------------------------------------------------------------
def test_ufunc_reduce_defaults_to_axis_0():
    x = np.arange(6.0).reshape(2, 3)
    value, g = tg.value_and_grad(lambda x: (np.add.reduce(x) ** 2).sum())(x)
    assert_close(value, (np.add.reduce(x) ** 2).sum())
    assert_close(g, np.broadcast_to(2 * x.sum(0), (2, 3)))
    assert_close(tg.vjp(lambda x: np.maximum.reduce(x), x)[0], [3.0, 4.0, 5.0])
    with pytest.raises(TypeError, match="not supported"):
        tg.grad(lambda x: np.add.reduce(x, initial=1.0).sum())(x)


def test_at_set_with_repeated_indices_gives_only_the_surviving_write_a_gradient():
    x, v = np.zeros(3), np.array([10.0, 20.0])
    f = lambda x, v: (x.at[np.array([0, 0])].set(v) * np.array([1.0, 2.0, 3.0])).sum()  # noqa: E731
    gx, gv = tg.grad(f, grad_position=(0, 1))(x, v)
    assert_close(gx, [0.0, 2.0, 3.0])
    assert_close(gv, [0.0, 1.0])  # NumPy keeps the last write
    check_grads(lambda x, v: x.at[np.array([0, 0, 2])].set(v), (x, np.array([1.0, 2.0, 3.0])), name="at-set")


def test_at_multiply_min_max():
    x = np.array([1.0, 2.0, 3.0])
    assert_close(tg.vjp(lambda x: x.at[np.array([0, 2])].multiply(3.0), x)[0], [3.0, 2.0, 9.0])
    assert_close(tg.vjp(lambda x: x.at[1:].min(2.5), x)[0], [1.0, 2.0, 2.5])
    assert_close(tg.vjp(lambda x: x.at[:2].max(1.5), x)[0], [1.5, 2.0, 3.0])
    check_grads(lambda x, v: x.at[np.array([0, 2])].multiply(v), (x * 1.5, np.array([1.0, 2.0])), name="at-multiply")
    check_grads(lambda x, v: x.at[1:].min(v), (x, np.array([2.5, 0.5])), name="at-min")
    check_grads(lambda x, v: x.at[x > 1.5].max(v), (x, np.array(2.5)), name="at-max")
    with pytest.raises(ValueError, match="repeats a position"):
        tg.grad(lambda x: x.at[np.array([0, 0])].max(1.0).sum())(x)


def test_assignment_that_drops_leading_ones_differentiates():
    x, v = np.zeros((3, 2)), np.ones((1, 2))
    gx, gv = tg.grad(lambda x, v: (x.at[1:, 0].set(v) * 2.0).sum(), (0, 1))(x, v)
    assert_close(gv, [[2.0, 2.0]])
    assert_close(gx, [[2.0, 2.0], [0.0, 2.0], [0.0, 2.0]])


def test_concatenate_and_stack_keep_each_operands_dtype():
    x32 = np.ones(2, np.float32)
    assert tg.grad(lambda x: tnp.concatenate([x, np.zeros(2)]).sum())(x32).dtype == np.float32
    assert tg.grad(lambda x: tnp.stack([x, np.zeros(2)]).sum())(x32).dtype == np.float32
    assert tg.vjp(lambda x: tnp.concatenate([x, np.zeros(2)]), x32)[1](np.ones(4))[0].dtype == np.float32


def test_power_mixed_second_derivative_at_zero_exponent():
    dfdx = lambda x, y: tg.grad(lambda x, y: x ** y)(x, y)  # noqa: E731
    assert_close(tg.grad(dfdx, grad_position=1)(np.asarray(2.0), np.asarray(0.0)), 0.5)
    check_grads(lambda x, y: x ** y, (np.array([0.5, 1.5, 2.0]), np.array([[0.0], [2.0]])), order=2, name="power")
    assert tg.grad(lambda x: (x ** 0.0).sum())(np.array([0.0, 2.0])).tolist() == [0.0, 0.0]


def test_float_power_computes_in_float64():
    x = np.array([1.5, 2.0], np.float32)
    out = tg.vjp(lambda x: np.float_power(x, 2.0), x)[0]
    assert out.dtype == np.float64
    assert_close(out, np.float_power(x, 2.0))
    assert tg.grad(lambda x: np.float_power(x, 2.0).sum())(x).dtype == np.float32


LIST_FNS = [
    lambda p, q, y: tnp.dot([p, q], y), lambda p, q, y: tnp.einsum("i,i", [p, q], y),
    lambda p, q, y: tnp.linalg.norm([p, q]), lambda p, q, y: tnp.flip([p, q])[0] * y[0],
    lambda p, q, y: tnp.reshape([p, q, p, q], (2, 2))[1, 1], lambda p, q, y: tnp.outer([p, q], y).sum(),
    lambda p, q, y: tnp.concatenate([[p], [q]])[1], lambda p, q, y: tnp.take([p, q], 1),
    lambda p, q, y: tnp.tile([p, q], 2).sum(), lambda p, q, y: tnp.pad([p, q], 1).sum(),
]


@pytest.mark.parametrize("fn", LIST_FNS)
def test_lists_of_tracers_work_in_every_function(fn):
    y = np.array([3.0, 4.0])
    check_grads(lambda p, q: fn(p, q, y), (np.asarray(1.0), np.asarray(2.0)), order=2)


# ---- vmap: every function of the tables above against a loop over examples ----------------------
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("shape", UNARY_SHAPES, ids=str)
@pytest.mark.parametrize("spec", UNARY, ids=repr)
def test_unary_vmap(spec, shape, dtype):
    check_vmap_mixes(spec.op, (_draw(spec.domains[0], shape, dtype, np.random.default_rng(0)),))


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("shapes", BINARY_SHAPES, ids=str)
@pytest.mark.parametrize("spec", BINARY, ids=repr)
def test_binary_vmap(spec, shapes, dtype):
    rng = np.random.default_rng(1)
    x, y = _draw(spec.domains[0], shapes[0], dtype, rng), _draw(spec.domains[-1], shapes[1], dtype, rng)
    check_vmap_mixes(spec.op, (x, y))
    check_vmap(lambda x: spec.op(x, 1.5), (x,), 0)  # a weak Python scalar keeps float32 in the batch too


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("keepdims", [False, True])
@pytest.mark.parametrize("axis", AXES, ids=str)
@pytest.mark.parametrize("spec", REDUCTIONS, ids=repr)
def test_reduction_vmap(spec, axis, keepdims, dtype):
    x = _draw(spec.domains[0], (3, 4, 2) if axis == (0, 1) else (3, 4), dtype, np.random.default_rng(4))
    check_vmap_mixes(lambda x: spec.op(x, axis=axis, keepdims=keepdims), (x,), slack=10.0)


INT_BOOL = [  # (name, fn, number of arguments): integer and boolean results
    ("argmax", lambda x: tnp.argmax(x), 1), ("argmax-axis0", lambda x: tnp.argmax(x, axis=0), 1),
    ("argmin-axis-1-keepdims", lambda x: tnp.argmin(x, axis=-1, keepdims=True), 1),
    ("all", lambda x: tnp.all(x > 0, axis=1), 1), ("any", lambda x: tnp.any(x > 1), 1),
    ("less", tnp.less, 2), ("less_equal", tnp.less_equal, 2), ("greater", tnp.greater, 2),
    ("greater_equal", tnp.greater_equal, 2), ("equal", lambda x, y: tnp.equal(tnp.round(x), tnp.round(y)), 2),
    ("not_equal", lambda x, y: x != y, 2),
    ("isnan-isinf-isfinite", lambda x: [tnp.isnan(x), tnp.isinf(1.0 / (x - x[0, 0])), tnp.isfinite(x)], 1),
    ("logical", lambda x, y: [tnp.logical_and(x > 0, y > 0), tnp.logical_or(x > 0, y > 0),
                              tnp.logical_xor(x > 0, y > 0), tnp.logical_not(x > 0)], 2),
    ("bitwise", lambda x, y: [tnp.astype(x * 4, np.int64) & tnp.astype(y * 4, np.int64),
                              tnp.astype(x * 4, np.int64) | tnp.astype(y * 4, np.int64),
                              tnp.astype(x * 4, np.int64) ^ tnp.astype(y * 4, np.int64),
                              ~tnp.astype(x * 4, np.int64), ~(x > y)], 2),
    ("floor_divide", lambda x, y: tnp.floor_divide(x, y), 2),
    ("astype-int", lambda x: tnp.astype(x * 3.0, np.int32), 1),
    ("sign", tnp.sign, 1),
]


@pytest.mark.parametrize("name,fn,nargs", INT_BOOL, ids=[c[0] for c in INT_BOOL])
def test_integer_and_boolean_vmap(name, fn, nargs):
    rng = np.random.default_rng(11)
    args = tuple(_draw("nonzero", (3, 4), np.float64, rng) for _ in range(nargs))
    with np.errstate(divide="ignore"):
        check_vmap_mixes(fn, args)


MISC = [  # (name, fn, argument shapes): the other primitives and the functions built on them
    ("cumsum", lambda x: tnp.cumsum(x, axis=1), [(3, 4)]), ("cumsum-flat", tnp.cumsum, [(3, 4)]),
    ("cumprod", lambda x: tnp.cumprod(x, axis=0), [(3, 4)]),
    ("clip", lambda x, lo, hi: tnp.clip(x, lo, hi - 2.0), [(3, 4), (), (4,)]),
    ("clip-none", lambda x: tnp.clip(x, None, 0.7), [(3, 4)]),
    ("where", lambda c, x, y: tnp.where(c > 0, x, y), [(3, 4), (4,), ()]),
    ("where-one-operand", lambda x: tnp.where(x > 0, x * x, 3.0), [(3, 4)]),
    ("astype", lambda x: tnp.astype(x, np.float32), [(3, 4)]),
    ("stop_gradient", lambda x: tg.stop_gradient(x) * x, [(3, 4)]),
    ("like", lambda x: x * tnp.ones_like(x) + tnp.zeros_like(x) + tnp.full_like(x, 2.0), [(3, 4)]),
    ("array-of-tracers", lambda x, y: tnp.array([x, y * y, x]), [(3,), (3,)]),
    ("var-std-ddof", lambda x: [tnp.var(x, axis=0, ddof=1), tnp.std(x, axis=1, ddof=1)], [(4, 3)]),
]


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("name,fn,shapes", MISC, ids=[c[0] for c in MISC])
def test_misc_vmap(name, fn, shapes, dtype):
    rng = np.random.default_rng(12)
    check_vmap_mixes(fn, tuple(_draw("real", s, dtype, rng) for s in shapes), slack=10.0)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("name,fn,ref", SHAPE_CASES, ids=[c[0] for c in SHAPE_CASES])
def test_shape_and_indexing_vmap(name, fn, ref, dtype):
    x = _draw("real", (3, 4), dtype, np.random.default_rng(7))
    if name == "bool-mask":  # each example would select its own number of elements: refused, as JAX
        with pytest.raises(IndexError, match="mask varies over the batch"):
            tg.vmap(fn)(np.stack([x, x]))
        check_vmap_mixes(lambda x: x[_MASK] * x[:, 0][np.array([True, False, True])].sum(), (x,))
        return
    # .at needs a traced value: the reference runs each example under vjp
    check_vmap_mixes(fn, (x,), ref=(lambda x: tg.vjp(fn, x)[0]) if name.startswith("at-") else None)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("name,fn,sa,sb", LINALG_CASES, ids=[c[0] for c in LINALG_CASES])
def test_linalg_vmap(name, fn, sa, sb, dtype):
    rng = np.random.default_rng(8)
    check_vmap_mixes(fn, (_draw("real", sa, dtype, rng), _draw("real", sb, dtype, rng)), slack=10.0)


@pytest.mark.parametrize("subscripts,shapes", [
    ("ij,jk->ik", [(3, 4), (4, 2)]), ("...ij,...jk->...ik", [(2, 3, 4), (4, 2)]), ("ii->i", [(3, 3)]),
    ("ii", [(3, 3)]), ("bij,bjk,bk->bi", [(2, 3, 4), (2, 4, 5), (2, 5)]), ("ij->ji", [(3, 4)]),
    ("i,i", [(3,), (3,)]), ("ij,k->k", [(3, 4), (2,)]),
])
def test_einsum_vmap(subscripts, shapes):
    rng = np.random.default_rng(9)
    check_vmap_mixes(lambda *ops: tnp.einsum(subscripts, *ops), tuple(rng.standard_normal(s) for s in shapes))


@pytest.mark.parametrize("ord_,axis,shape", [
    (None, None, (3,)), (None, None, (3, 4)), (1, None, (3,)), (np.inf, None, (3,)), (3, None, (3,)),
    (None, 1, (3, 4)), (1, 0, (3, 4)), ("fro", None, (3, 4)), (1, None, (3, 4)), (-np.inf, None, (3, 4)),
    ("fro", (1, 2), (2, 3, 4)), (2, None, (3, 4)), ("nuc", None, (3, 4)),
])
def test_norm_vmap(ord_, axis, shape):
    x = _draw("nonzero", shape, np.float64, np.random.default_rng(10))
    check_vmap_mixes(lambda x: tnp.linalg.norm(x, ord_, axis), (x,))
    check_vmap(lambda x: tnp.linalg.norm(x, ord_, axis, keepdims=True), (x,), -1)


@pytest.mark.parametrize("fn", LIST_FNS)
def test_lists_of_tracers_vmap(fn):
    y = np.array([3.0, 4.0])
    check_vmap_mixes(fn, (np.asarray(1.0), np.asarray(2.0), y))
