"""Property: through ``grad``/``vjp``/``jvp``, ``jit`` and ``vmap``, each function of the table
(tests/_property_ops.py) gives what it gives eagerly, with derivatives that match central differences
in float64, dtypes kept (a float32 input gets float32 gradients), its arguments untouched and results
that share no memory with them. Profiles and example counts: tests/conftest.py, docs/fuzzing.md."""
import warnings

import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

import tapegrad as tg
import tapegrad.numpy as tnp
from _property_ops import SPECS
from _strategies import (
    NONEMPTY,
    NUMPY_REFUSALS,
    REFUSALS,
    assert_clear,
    assert_owned,
    assert_unchanged,
    check_like_numpy,
    compare,
    layouts,
    smooth_arrays,
    snapshot,
)
from tapegrad.testing import check_grads

DIFFERENTIABLE = [s for s in SPECS if s.domain is not None]
# item 7 (results the caller owns): vjp returns the caller's cotangent (or a view of it) where the rule
# passes it through (add, sum, reshape, ...), and vjp's/jvp's primal output is a view of the input for
# the view functions


def _smooth(spec):
    return lambda dtype, shape, position=0: smooth_arrays(dtype, shape, *spec.domain, position=position)


def _closed(spec, static):
    def fn(*operands):
        return spec.op(*operands, **static)
    fn.__name__ = spec.name
    return fn


def _real_sum(out):
    """The loss whose gradient is checked: the sum of the output (its real part if complex)."""
    return tnp.sum(tnp.real(out)) if np.dtype(out.dtype).kind == "c" else tnp.sum(out)


def _draw_differentiable(spec, data, dtype):
    """Smooth operands where the function is defined (NumPy computes it) and differentiable: std/var
    over one element are item 2's (test_std_var_of_one_element)."""
    operands, static = data.draw(spec.args(dtype, _smooth(spec)), label="arguments")
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        try:
            out = spec.ref(*operands, **static)
        except NUMPY_REFUSALS:
            assume(False)
    assume(np.all(np.isfinite(out)))  # an empty logsumexp is -inf: no derivative there
    if spec.name in ("std", "var"):
        assume(np.size(out) == 0 or operands[0].size // np.size(out) > 1)
    if spec.name == "prod":  # item 7's (test_prod_over_empty_axis)
        assume(operands[0].size > 0)
    return operands, static


@pytest.mark.parametrize("spec", DIFFERENTIABLE, ids=repr)
@given(data=st.data())
def test_derivatives(spec, data):
    """float64: vjp and jvp match central differences; float32: gradients are float32; gradients
    share no memory with the inputs; no input is written to."""
    dtype = data.draw(st.sampled_from([np.float64, np.float32]), label="dtype")
    operands, static = _draw_differentiable(spec, data, dtype)
    fn = _closed(spec, static)
    before = snapshot(operands)
    if dtype == np.float64:
        check_grads(fn, operands, order=1)
    positions = tuple(range(len(operands)))
    grads = tg.grad(lambda *a: _real_sum(fn(*a)), grad_position=positions)(*operands)
    for g, a in zip(grads, operands):
        assert g.shape == a.shape and g.dtype == a.dtype, (g.shape, g.dtype, a.shape, a.dtype)
    assert_owned(grads, operands, "a gradient")
    assert_unchanged(before, "a derivative transform")


def _vjp_jvp_owned(spec, data):
    operands, static = _draw_differentiable(spec, data, np.float64)
    fn = _closed(spec, static)
    before = snapshot(operands)
    out, vjp_fn = tg.vjp(fn, *operands)
    ct = data.draw(layouts(np.ones(np.shape(out), np.result_type(out))), label="cotangent")
    ct_before = snapshot(ct)
    cts = vjp_fn(ct)
    assert_unchanged(ct_before, "vjp_fn")
    assert_owned(out, operands, "vjp's output")
    assert_owned(cts, operands + (ct,), "a vjp cotangent")
    tangents = tuple(data.draw(layouts(np.full(a.shape, 0.5, a.dtype)), label="tangent") for a in operands)
    t_before = snapshot(tangents)
    out, t_out = tg.jvp(fn, operands, tangents)
    assert np.result_type(t_out) == np.result_type(out)
    assert_unchanged(t_before, "jvp")
    assert_unchanged(before, "vjp and jvp")
    assert_owned((out, t_out), operands + tangents, "jvp's output or tangent")


@pytest.mark.parametrize("spec", DIFFERENTIABLE, ids=repr)
@given(data=st.data())
def test_vjp_jvp_results_owned(spec, data):
    """vjp's cotangents and output, jvp's output and tangent share no memory with the primals, the
    cotangent or the tangents passed in, and none of those is written to."""
    _vjp_jvp_owned(spec, data)


@pytest.mark.parametrize("name", ["std", "var"])
@given(x=smooth_arrays(np.float64, st.sampled_from([(1,), (3, 1)])))
def test_std_var_of_one_element(name, x):
    """Each reduction over the last axis (of length 1) has derivative 0, with no warning on the way."""
    with np.errstate(all="raise"):
        g = tg.grad(lambda a: tnp.sum(getattr(tnp, name)(a, axis=-1)))(x)
    assert np.array_equal(g, np.zeros_like(x))


@given(x=smooth_arrays(np.float64, st.sampled_from([(0,), (2, 0), (0, 3)])))
def test_prod_over_empty_axis(x):
    g = tg.grad(lambda a: tnp.sum(tnp.prod(a, axis=0)))(x)
    assert g.shape == x.shape


@pytest.mark.parametrize("spec", SPECS, ids=repr)
@given(data=st.data())
def test_jit_matches_eager(spec, data):
    """``jit(f)(x)`` equals ``f(x)`` in dtype, shape, value and NaN placement, on any values."""
    _check_jit(spec, data, owned=True)


def _check_jit(spec, data, owned):
    dtype = data.draw(st.sampled_from(spec.dtypes), label="dtype")
    operands, static = data.draw(spec.args(dtype, spec.any_values), label="arguments")
    fn = _closed(spec, static)
    check_like_numpy(tg.jit(fn), fn, *operands, ulps=spec.ulps, owned=owned)


@pytest.mark.parametrize("spec", SPECS, ids=repr)
@given(data=st.data())
def test_vmap_matches_loop(spec, data):
    """``vmap(f)`` over a leading axis of size 0 to 3 equals stacking ``f`` of each slice; where ``f``
    refuses a slice, ``vmap(f)`` refuses clearly too."""
    _check_vmap(spec, data, owned=True)


def _check_vmap(spec, data, owned):
    dtype = data.draw(st.sampled_from(spec.dtypes), label="dtype")
    operands, static = data.draw(spec.args(dtype, spec.any_values), label="arguments")
    fn = _closed(spec, static)
    size = data.draw(st.integers(0, 3), label="batch size")
    batched = tuple(data.draw(spec.any_values(a.dtype, (size,) + a.shape), label="batched operand")
                    for a in operands)
    before = snapshot(batched)
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        try:
            template = fn(*operands)
        except NUMPY_REFUSALS:
            assume(False)  # no example shape to compare with
        try:
            # b[i, ...]: a 0-d array, not a NumPy scalar (whose own arithmetic differs at infinities:
            # np.square(np.complex64(3e38+inf j)) is nan+inf j, on a 0-d array -inf+inf j)
            expected = [fn(*(b[i, ...] for b in batched)) for i in range(size)]
        except NUMPY_REFUSALS:
            with pytest.raises(REFUSALS) as info:
                tg.vmap(fn)(*batched)
            assert_clear(info.value) if "Singular" not in str(info.value) else None
            return
        expected = np.stack(expected) if size else np.zeros((0,) + np.shape(template), np.result_type(template))
        out = tg.vmap(fn)(*batched)
    assert_unchanged(before, "vmap")
    compare(out, expected, ulps=spec.ulps)
    if owned:
        assert_owned(out, batched, "vmap's output")


_WEAK_OPS = [tnp.add, tnp.subtract, tnp.multiply, tnp.divide, tnp.power, tnp.maximum]


@pytest.mark.parametrize("op", _WEAK_OPS, ids=lambda op: op.__name__)
@given(x=smooth_arrays(st.sampled_from([np.float16, np.float32, np.float64]), NONEMPTY, 0.5, 2.0),
       scalar=st.one_of(st.floats(0.5, 2.0), st.integers(1, 3)))
def test_weak_scalars_under_transforms(op, x, scalar):
    """A Python scalar keeps the array's dtype (NumPy 2) eagerly, under jit (as a traced argument and
    as a constant), under vmap, and in the gradient."""
    expected = x.dtype
    with np.errstate(all="ignore"):
        assert np.result_type(op(x, scalar)) == expected
        assert np.result_type(tg.jit(op)(x, scalar)) == expected
        assert np.result_type(tg.jit(lambda a: op(a, scalar))(x)) == expected
        assert np.result_type(tg.vmap(lambda a: op(a, scalar))(x[None])) == expected
        g = tg.grad(lambda a: tnp.sum(op(a, scalar)))(x)
    assert g.dtype == expected and g.shape == x.shape
