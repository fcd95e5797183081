"""The array API's spellings in tapegrad.numpy (acos, concat, permute_dims, vecdot, matvec, vecmat,
unstack, bitwise_*): values and dtypes against NumPy 2, derivatives to order 2
in both modes (float64, float32, complex where the function takes it), one vmap and one jit check
per function, the aliases being the very same functions, and plain np.* calls dispatching."""
from __future__ import annotations

import numpy as np
import pytest

import tapegrad as tg
import tapegrad.numpy as tnp
from _device_check import check_route, grid
from _specs import OpSpec, check_op
from _tol import assert_close
from _vmapcheck import check_vmap, check_vmap_mixes

DTYPES = [np.float64, np.float32]

ALIASES = [
    ("acos", "arccos"), ("asin", "arcsin"), ("atan", "arctan"), ("atan2", "arctan2"), ("acosh", "arccosh"),
    ("asinh", "arcsinh"), ("atanh", "arctanh"), ("pow", "power"), ("bitwise_invert", "invert"),
    ("bitwise_not", "invert"), ("bitwise_left_shift", "left_shift"), ("bitwise_right_shift", "right_shift"),
]


@pytest.mark.parametrize("alias,name", ALIASES)
def test_alias_is_the_same_function(alias, name):
    assert getattr(tnp, alias) is getattr(tnp, name)


def _draw(domain, shape, dtype, rng):
    lo, hi = {"real": (-2.0, 2.0), "unit": (-0.8, 0.8), "above1": (1.2, 3.0), "pos": (0.5, 2.0)}[domain]
    return np.asarray(rng.uniform(lo, hi, shape), dtype=dtype)


# ---- differentiable functions: (spec, argument shapes) --------------------------------------------
SPECS = [
    (OpSpec("acos", tnp.acos, np.acos, ("unit",)), [(3, 2)]),
    (OpSpec("asin", tnp.asin, np.asin, ("unit",)), [(3,)]),
    (OpSpec("atan", tnp.atan, np.atan), [(3,)]),
    (OpSpec("atan2", tnp.atan2, np.atan2, ("pos", "real")), [(3, 2), (2,)]),
    (OpSpec("acosh", tnp.acosh, np.acosh, ("above1",)), [(3,)]),
    (OpSpec("asinh", tnp.asinh, np.asinh), [(3,)]),
    (OpSpec("atanh", tnp.atanh, np.atanh, ("unit",)), [(3,)]),
    (OpSpec("pow", tnp.pow, np.pow, ("pos", "real")), [(3,), (3,)]),
    (OpSpec("concat", lambda x, y: tnp.concat([x, y], axis=1), lambda x, y: np.concat([x, y], axis=1)),
     [(3, 2), (3, 4)]),
    (OpSpec("concat_none", lambda x, y: tnp.concat([x, y], axis=None), lambda x, y: np.concat([x, y], axis=None)),
     [(3, 2), (4,)]),
    (OpSpec("permute_dims", lambda x: tnp.permute_dims(x, (2, 0, 1)), lambda x: np.permute_dims(x, (2, 0, 1))),
     [(2, 3, 4)]),
    (OpSpec("matrix_transpose", tnp.matrix_transpose, np.matrix_transpose), [(2, 3, 4)]),
    (OpSpec("vecdot", tnp.vecdot, np.vecdot), [(3, 4), (4,)]),
    (OpSpec("vecdot_axis0", lambda x, y: tnp.vecdot(x, y, axis=0), lambda x, y: np.vecdot(x, y, axis=0)),
     [(3, 2), (3, 1)]),
    (OpSpec("matvec", tnp.matvec, np.matvec), [(2, 3, 4), (4,)]),
    (OpSpec("vecmat", tnp.vecmat, np.vecmat), [(3,), (2, 3, 4)]),
    (OpSpec("unstack", lambda x: tnp.stack(tnp.unstack(x, axis=1)), lambda x: np.stack(np.unstack(x, axis=1))),
     [(3, 4)]),
]
IDS = [spec.name for spec, _ in SPECS]


def _args(spec, shapes, dtype, seed=0):
    rng = np.random.default_rng(seed)
    domains = spec.domains * len(shapes) if len(spec.domains) == 1 else spec.domains
    return tuple(_draw(d, s, dtype, rng) for d, s in zip(domains, shapes))


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("spec,shapes", SPECS, ids=IDS)
def test_values_and_derivatives(spec, shapes, dtype):
    check_op(spec, _args(spec, shapes, dtype), dtype)


@pytest.mark.parametrize("spec,shapes", SPECS, ids=IDS)
def test_vmap(spec, shapes):
    check_vmap_mixes(spec.op, _args(spec, shapes, np.float64), slack=10.0)


@pytest.mark.parametrize("spec,shapes", SPECS, ids=IDS)
def test_jit(spec, shapes):
    args = _args(spec, shapes, np.float64)
    assert_close(tg.jit(spec.op)(*args), spec.ref(*args))


@pytest.mark.parametrize("name", ["vecdot", "matvec", "vecmat"])
def test_products_in_complex_conjugate_as_numpy(name):
    rng = np.random.default_rng(1)
    shapes = {"vecdot": ((3, 4), (4,)), "matvec": ((3, 4), (4,)), "vecmat": ((3,), (3, 4))}[name]
    x, y = (rng.normal(size=s) + 1j * rng.normal(size=s) for s in shapes)
    fn = getattr(tnp, name)
    assert_close(fn(x, y), getattr(np, name)(x, y))
    tg.testing.check_grads(fn, (x, y), order=2, name=name)


def test_plain_numpy_calls_dispatch_on_traced_values():
    x = np.array([0.1, 0.4, -0.3])
    g = tg.grad(lambda x: np.acos(x).sum() + np.vecdot(x, x) + np.concat([x, x]).sum())(x)
    assert_close(g, -1 / np.sqrt(1 - x ** 2) + 2 * x + 2)
    a = np.ones((2, 3, 3))
    assert_close(tg.grad(lambda a: np.matvec(a, x).sum())(a), np.broadcast_to(x, (2, 3, 3)))


# ---- integer (non-differentiable) functions -------------------------------------------------------
INT_OPS = [
    ("bitwise_left_shift", lambda m: (m, 2)),
    ("bitwise_right_shift", lambda m: (m, np.array([1, 2, 0, 3, 1, 0], m.dtype))),
    ("bitwise_invert", lambda m: (m,)),
    ("bitwise_count", lambda m: (m,)),
]


@pytest.mark.parametrize("dtype", [np.int64, np.int32, np.uint8], ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("name,args", INT_OPS, ids=[n for n, _ in INT_OPS])
def test_integer_functions_match_numpy_eagerly_and_under_jit_and_vmap(name, args, dtype):
    m = np.array([0, 1, 5, 7, 12, 100], dtype)
    args = args(m)
    expected = getattr(np, name)(*args)
    fn = getattr(tnp, name)
    for out in (fn(*args), tg.jit(fn)(*args)):
        assert out.dtype == expected.dtype
        np.testing.assert_array_equal(out, expected)
    check_vmap(fn, args, (0,) + (None,) * (len(args) - 1))


def test_bool_count_and_invert():
    b = np.array([True, False])
    np.testing.assert_array_equal(tnp.bitwise_count(b), np.bitwise_count(b))
    np.testing.assert_array_equal(tnp.bitwise_not(b), ~b)


# ---- errors and conventions -----------------------------------------------------------------------
@pytest.mark.parametrize("call,message", [
    (lambda: tnp.matrix_transpose(np.ones(3)), "at least 2-dimensional"),
    (lambda: tnp.vecdot(np.ones(3), np.ones(4)), "lengths 3 and 4"),
    (lambda: tnp.matvec(np.ones((2, 3)), np.ones(2)), "inner lengths"),
    (lambda: tnp.vecmat(np.ones(3), np.ones(3)), "not a matrix and a vector"),
    (lambda: tnp.unstack(np.array(1.0)), "at least 1-d"),
])
def test_bad_shapes_raise_naming_the_problem(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_unstack_returns_a_tuple_of_slices():
    x = np.arange(6.0).reshape(2, 3)
    out = tnp.unstack(x, axis=-1)
    assert isinstance(out, tuple) and len(out) == 3
    for o, r in zip(out, np.unstack(x, axis=-1)):
        np.testing.assert_array_equal(o, r)


@pytest.mark.parametrize("spec,shapes,route", grid(SPECS, ids=(lambda case: case[0].name,), unpack=True))
def test_on_the_device_double(spec, shapes, route):
    """Device in, device out, equal to the host run, through every route (CuPy's rules, no GPU)."""
    check_route(route, spec.op, _args(spec, shapes, np.float64))
