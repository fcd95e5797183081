"""The ``grad`` / ``value_and_grad`` / ``get_grad`` / ``vjp`` contract of docs/grad.md:
return conventions, pytrees, has_aux, return_ids, sensitivities, zeros, dtypes, the error table (type
and moment), vjp, exception safety, Parameters, nesting, long chains and NumPy dispatch on tracers."""
import functools
import re
import warnings

import numpy as np
import pytest

import tapegrad as tg
import tapegrad.numpy as tnp
from _tol import assert_close
from tapegrad import _core
from tapegrad.errors import TracerArrayConversionError


def f32(a):
    return np.asarray(a, dtype=np.float32)


@pytest.fixture
def xyz():
    return f32([1.0, 2.0, 3.0]), f32([-2.0, 0.5, 4.0]), f32([0.5, -1.0, 2.0])


def xyz_fn(x, y, z):
    return (x * y * z).sum()


def assert_array(g, expected, dtype=None):
    assert isinstance(g, np.ndarray), f"expected an ndarray, got {type(g).__name__}"
    if dtype is not None:
        assert g.dtype == dtype, g.dtype
    assert_close(g, expected, rtol=1e-6, atol=1e-6)


# ================================================================================================
# §1.1 return conventions
# ================================================================================================
class TestReturnConventions:
    def test_int_position_gives_bare_gradient(self, xyz):
        x, y, z = xyz
        g = tg.grad(xyz_fn, 1)(x, y, z)
        assert_array(g, x * z, np.float32)

    def test_default_position_is_zero(self, xyz):
        x, y, z = xyz
        assert_array(tg.grad(xyz_fn)(x, y, z), y * z, np.float32)

    def test_numpy_integer_position(self, xyz):
        x, y, z = xyz
        assert_array(tg.grad(xyz_fn, np.int64(2))(x, y, z), x * y)
        g = tg.grad(xyz_fn, (np.int32(0), 2))(x, y, z)
        assert isinstance(g, tuple) and len(g) == 2
        assert_array(g[0], y * z)

    def test_tuple_positions_in_given_order(self, xyz):
        x, y, z = xyz
        g = tg.grad(xyz_fn, (2, 0))(x, y, z)
        assert isinstance(g, tuple) and len(g) == 2
        assert_array(g[0], x * y)
        assert_array(g[1], y * z)

    def test_one_tuple_gives_one_tuple(self, xyz):
        x, y, z = xyz
        g = tg.grad(xyz_fn, (1,))(x, y, z)
        assert isinstance(g, tuple) and len(g) == 1
        assert_array(g[0], x * z)

    def test_none_position_one_parameter_gives_bare_gradient(self, xyz):
        x, y, _ = xyz
        p = tg.Parameter(y.copy(), name="p")
        g = tg.grad(lambda x: (x * p).sum(), grad_position=None, weights=p)(x)
        assert_array(g, x, np.float32)

    @pytest.mark.parametrize("container", [tg.ParameterTuple, list, tuple])
    def test_none_position_parameter_collection_gives_tuple(self, xyz, container):
        x, y, z = xyz
        p, q = tg.Parameter(y.copy(), name="p"), tg.Parameter(z.copy(), name="q")
        g = tg.grad(lambda x: (x * p * q).sum(), grad_position=None, weights=container([p, q]))(x)
        assert type(g) is tuple and len(g) == 2
        assert_array(g[0], x * z)
        assert_array(g[1], x * y)

    @pytest.mark.parametrize("container", [tg.ParameterTuple, list, tuple])
    def test_length_one_collection_gives_one_tuple(self, xyz, container):
        x, y, _ = xyz
        p = tg.Parameter(y.copy(), name="p")
        g = tg.grad(lambda x: (x * p).sum(), grad_position=None, weights=container([p]))(x)
        assert type(g) is tuple and len(g) == 1
        assert_array(g[0], x)

    @pytest.mark.parametrize("empty", [[], (), tg.ParameterTuple()])
    def test_empty_collection_gives_empty_tuple(self, xyz, empty):
        x, _, _ = xyz
        g = tg.grad(lambda x: (x * x).sum(), grad_position=None, weights=empty)(x)
        assert g == ()

    def test_dict_of_parameters_gives_dict(self, xyz):
        x, y, z = xyz
        p, q = tg.Parameter(y.copy()), tg.Parameter(z.copy())
        g = tg.grad(lambda x: (x * p * q).sum(), grad_position=None, weights={"a": p, "b": q})(x)
        assert isinstance(g, dict) and set(g) == {"a", "b"}
        assert_array(g["a"], x * z)
        assert_array(g["b"], x * y)

    def test_nested_pytree_of_parameters(self, xyz):
        x, y, z = xyz
        p, q, r = tg.Parameter(y.copy()), tg.Parameter(z.copy()), tg.Parameter(np.float32(2.0))
        weights = {"layer": {"w": p, "b": q}, "extra": [r]}
        g = tg.grad(lambda x: (x * p * q * r).sum(), grad_position=None, weights=weights)(x)
        assert set(g) == {"layer", "extra"} and set(g["layer"]) == {"w", "b"}
        assert isinstance(g["extra"], list) and len(g["extra"]) == 1
        assert_array(g["layer"]["w"], 2 * x * z)
        assert_array(g["layer"]["b"], 2 * x * y)
        assert_array(g["extra"][0], (x * y * z).sum())

    def test_both_int_position_and_parameter_tuple(self, xyz):
        x, y, z = xyz
        p = tg.Parameter(z.copy(), name="p")
        g = tg.grad(lambda x, y: (x * y * p).sum(), grad_position=0, weights=tg.ParameterTuple([p]))(x, y)
        assert isinstance(g, tuple) and len(g) == 2
        inputs_part, weights_part = g
        assert_array(inputs_part, y * z)
        assert type(weights_part) is tuple and len(weights_part) == 1
        assert_array(weights_part[0], x * y)

    def test_both_tuple_position_and_single_parameter(self, xyz):
        x, y, z = xyz
        p = tg.Parameter(z.copy(), name="p")
        inputs_part, weights_part = tg.grad(lambda x, y: (x * y * p).sum(), grad_position=(0, 1),
                                            weights=p)(x, y)
        assert isinstance(inputs_part, tuple) and len(inputs_part) == 2
        assert_array(inputs_part[0], y * z)
        assert_array(inputs_part[1], x * z)
        assert_array(weights_part, x * y)

    def test_both_with_dict_weights(self, xyz):
        x, y, z = xyz
        p = tg.Parameter(z.copy())
        inputs_part, weights_part = tg.grad(lambda x, y: (x * y * p).sum(), grad_position=(1,),
                                            weights={"p": p})(x, y)
        assert len(inputs_part) == 1
        assert_array(inputs_part[0], x * z)
        assert_array(weights_part["p"], x * y)

    def test_value_and_grad_structure(self, xyz):
        x, y, z = xyz
        p = tg.Parameter(z.copy(), name="p")
        value, (inputs_part, weights_part) = tg.value_and_grad(
            lambda x, y: (x * y * p).sum(), grad_position=(0,), weights=[p])(x, y)
        assert_array(value, (x * y * z).sum(), np.float32)
        assert value.shape == ()
        assert_array(inputs_part[0], y * z)
        assert_array(weights_part[0], x * y)

    @pytest.mark.filterwarnings("ignore::tapegrad.errors.MissingHasAuxWarning")  # the sum is meant
    def test_value_and_grad_value_is_full_output_pytree(self, xyz):
        x, _, _ = xyz
        value, g = tg.value_and_grad(lambda x: {"s": x.sum(), "sq": x * x})(x)
        assert set(value) == {"s", "sq"}
        assert_array(value["sq"], x * x)
        assert_array(g, 1 + 2 * x)

    def test_grad_is_reusable_and_does_not_mutate_parameters(self, xyz):
        x, y, _ = xyz
        p = tg.Parameter(y.copy(), name="p")
        gf = tg.grad(lambda x: (x * p).sum(), grad_position=0, weights=p)
        for _ in range(3):
            gx, gp = gf(x)
            assert_array(gx, y)
            assert_array(gp, x)
        assert_array(np.asarray(p), y)


# ================================================================================================
# pytree inputs
# ================================================================================================
class TestPytreeInputs:
    def test_dict_input_gets_dict_gradient(self):
        params = {"w": f32([[1.0, 2.0], [3.0, 4.0]]), "b": f32([0.5, -0.5])}
        x = f32([1.0, -1.0])

        def loss(params, x):
            return ((params["w"] @ x + params["b"]) ** 2).sum()

        g = tg.grad(loss)(params, x)
        assert isinstance(g, dict) and set(g) == {"w", "b"}
        h = params["w"] @ x + params["b"]
        assert_array(g["b"], 2 * h, np.float32)
        assert_array(g["w"], np.outer(2 * h, x), np.float32)

    def test_nested_tuple_and_list_input(self):
        a, b, c = f32([1.0, 2.0]), f32([3.0]), f32(0.5)
        g = tg.grad(lambda t: (t[0] * t[1][0] * t[1][1]).sum())((a, [b, c]))
        assert isinstance(g, tuple) and len(g) == 2 and isinstance(g[1], list)
        assert_array(g[0], b * c * np.ones(2))
        assert_array(g[1][0], [(a * c).sum()])
        assert_array(g[1][1], (a * b).sum())

    def test_pytree_inputs_at_several_positions(self):
        d = {"u": f32([1.0, 2.0])}
        t = (f32([3.0, 4.0]),)
        gd, gt = tg.grad(lambda d, t: (d["u"] * t[0]).sum(), (0, 1))(d, t)
        assert_array(gd["u"], t[0])
        assert isinstance(gt, tuple)
        assert_array(gt[0], d["u"])

    def test_non_differentiated_positions_may_hold_anything(self):
        x = f32([1.0, 2.0])
        g = tg.grad(lambda x, n, name: (x ** n).sum())(x, 3, "label")
        assert_array(g, 3 * x ** 2)


# ================================================================================================
# has_aux
# ================================================================================================
class TestHasAux:
    def test_grad_has_aux_structure_single_aux(self):
        x = f32([1.0, 2.0])
        g, aux = tg.grad(lambda x: ((x * x).sum(), x * 10), has_aux=True)(x)
        assert_array(g, 2 * x)                   # aux x*10 contributes nothing
        assert isinstance(aux, tuple) and len(aux) == 1
        assert_array(aux[0], x * 10)

    def test_grad_has_aux_structure_several_aux(self):
        x = f32([1.0, 2.0])
        g, aux = tg.grad(lambda x: ((x * x).sum(), x * 10, {"k": x + 1}), has_aux=True)(x)
        assert_array(g, 2 * x)
        assert isinstance(aux, tuple) and len(aux) == 2
        assert_array(aux[0], x * 10)
        assert_array(aux[1]["k"], x + 1)

    def test_value_and_grad_has_aux_structure(self):
        x = f32([1.0, 2.0])
        (out0, aux1, aux2), g = tg.value_and_grad(
            lambda x: ((x * x).sum(), x * 10, x - 1), has_aux=True)(x)
        assert_array(out0, 5.0)
        assert_array(aux1, x * 10)
        assert_array(aux2, x - 1)
        assert_array(g, 2 * x)

    def test_has_aux_with_weights(self):
        x = f32([1.0, 2.0])
        p = tg.Parameter(f32([3.0, 4.0]), name="p")
        g, (logits,) = tg.grad(lambda x: ((x * p).sum(), x * p), grad_position=None, weights=[p],
                               has_aux=True)(x)
        assert_array(g[0], x)
        assert_array(logits, x * np.array([3.0, 4.0]))

    def test_aux_is_returned_as_array_not_tracer(self):
        x = f32([1.0, 2.0])
        _, (aux,) = tg.grad(lambda x: (x.sum(), x * 2), has_aux=True)(x)
        assert isinstance(aux, np.ndarray)

    def test_aux_passes_through_stop_gradient_grad(self):
        """Differentiating through an outer grad: the inner aux carries no gradient; the control
        (the same quantity as the differentiated output) does."""
        x = f32([1.0, 2.0])
        inner = tg.grad(lambda y: ((y * y).sum(), y ** 3), has_aux=True)
        g_via_aux = tg.grad(lambda x: inner(x)[1][0].sum())(x)
        assert_array(g_via_aux, [0.0, 0.0])
        g_via_grad = tg.grad(lambda x: inner(x)[0].sum())(x)      # d/dx sum(2x) = 2
        assert_array(g_via_grad, [2.0, 2.0])

    def test_aux_passes_through_stop_gradient_value_and_grad(self):
        x = f32([1.0, 2.0])
        inner = tg.value_and_grad(lambda y: ((y * y).sum(), y ** 3), has_aux=True)

        def outer(x):
            (value, aux), _ = inner(x)
            return value + aux.sum()

        assert_array(tg.grad(outer)(x), 2 * x)   # only the value (sum y^2) is differentiable

    @pytest.mark.parametrize("api", [tg.grad, tg.value_and_grad])
    @pytest.mark.parametrize("ret", [lambda x: x.sum(), lambda x: (x.sum(),), lambda x: [x.sum()]],
                             ids=["bare", "1-tuple", "1-list"])
    def test_has_aux_single_output_is_value_error_at_call(self, api, ret):
        x = f32([1.0, 2.0])
        gf = api(ret, has_aux=True)             # not at grad(...) time
        with pytest.raises(ValueError, match=r"(?is)has_aux.*(return|set has_aux)"):
            gf(x)
        assert _core.trace_stack() == ()


# ================================================================================================
# return_ids and get_grad
# ================================================================================================
class TestReturnIds:
    def test_positions(self, xyz):
        x, y, z = xyz
        out = tg.grad(xyz_fn, (0, 2), return_ids=True)(x, y, z)
        assert len(out) == 2 and out[0][0] == 0 and out[1][0] == 2
        assert_array(out[0][1], y * z)
        assert_array(tg.get_grad(out, 0), y * z)
        assert_array(tg.get_grad(out, 2), x * y)

    def test_single_position(self, xyz):
        x, y, z = xyz
        out = tg.grad(xyz_fn, 1, return_ids=True)(x, y, z)
        assert isinstance(out, tuple) and out[0] == 1
        assert_array(out[1], x * z)
        assert_array(tg.get_grad(out, 1), x * z)

    def test_parameters_by_parameter_and_name(self, xyz):
        x, y, z = xyz
        w, b = tg.Parameter(y.copy(), name="fc.weight"), tg.Parameter(z.copy(), name="fc.bias")
        out = tg.grad(lambda x: (x * w + b).sum(), grad_position=None,
                      weights=tg.ParameterTuple([w, b]), return_ids=True)(x)
        assert out[0][0] == "fc.weight" and out[1][0] == "fc.bias"
        assert_array(tg.get_grad(out, w), x)
        assert_array(tg.get_grad(out, b), np.ones(3))
        assert_array(tg.get_grad(out, "fc.bias"), np.ones(3))

    def test_both_inputs_and_weights(self, xyz):
        x, y, z = xyz
        w = tg.Parameter(z.copy(), name="w")
        out = tg.grad(lambda x, y: (x * y * w).sum(), grad_position=(0, 1), weights=[w],
                      return_ids=True)(x, y)
        assert_array(tg.get_grad(out, 0), y * z)
        assert_array(tg.get_grad(out, 1), x * z)
        assert_array(tg.get_grad(out, w), x * y)
        assert_array(tg.get_grad(out, "w"), x * y)

    def test_dict_weights_keep_structure(self, xyz):
        x, y, _ = xyz
        w = tg.Parameter(y.copy(), name="w")
        out = tg.grad(lambda x: (x * w).sum(), grad_position=None, weights={"w": w}, return_ids=True)(x)
        assert isinstance(out, dict) and out["w"][0] == "w"
        assert_array(tg.get_grad(out, w), x)

    def test_pytree_input_gradient_with_id(self):
        d = {"a": f32([1.0, 2.0]), "b": f32([3.0, 4.0])}
        out = tg.grad(lambda d: (d["a"] * d["b"]).sum(), 0, return_ids=True)(d)
        g = tg.get_grad(out, 0)
        assert isinstance(g, dict)
        assert_array(g["a"], d["b"])

    def test_missing_identifier_is_runtime_error(self, xyz):
        x, y, z = xyz
        w = tg.Parameter(z.copy(), name="w")
        other = tg.Parameter(z.copy(), name="other")
        out = tg.grad(lambda x, y: (x * y * w).sum(), grad_position=(0,), weights=[w],
                      return_ids=True)(x, y)
        for missing in (1, 5, other, "nope"):
            with pytest.raises(RuntimeError):
                tg.get_grad(out, missing)


# ================================================================================================
# sensitivities, zeros, scalars, dtypes
# ================================================================================================
class TestSensitivityZerosDtypes:
    def test_tuple_output_gradient_is_sum_of_all_outputs(self):
        x = f32([1.0, 2.0, 3.0])
        assert_array(tg.grad(lambda x: (2 * x, x ** 2))(x), 2 + 2 * x)

    @pytest.mark.filterwarnings("ignore::tapegrad.errors.MissingHasAuxWarning")  # the sum is meant
    def test_dict_and_nonscalar_outputs(self):
        x = f32([1.0, 2.0])
        assert_array(tg.grad(lambda x: {"a": x.sum(), "b": [3 * x, tnp.sin(x)]})(x),
                     1 + 3 + np.cos(x), np.float32)
        assert_array(tg.grad(lambda x: x * x)(x), 2 * x, np.float32)

    def test_unused_input_gets_zeros_of_shape_and_dtype(self):
        x = f32([1.0, 2.0])
        y = np.ones((3, 2), dtype=np.float64)
        gx, gy = tg.grad(lambda x, y: (x * x).sum(), (0, 1))(x, y)
        assert_array(gx, 2 * x)
        assert isinstance(gy, np.ndarray) and gy.shape == (3, 2) and gy.dtype == np.float64
        np.testing.assert_array_equal(gy, 0)

    def test_unused_parameter_gets_zeros(self):
        x = f32([1.0, 2.0])
        p = tg.Parameter(np.ones((2, 2), np.float32), name="unused")
        g = tg.grad(lambda x: x.sum(), grad_position=None, weights=[p])(x)
        assert g[0] is not None and g[0].shape == (2, 2) and g[0].dtype == np.float32
        np.testing.assert_array_equal(g[0], 0)

    def test_output_independent_of_everything(self):
        x = f32([1.0, 2.0])
        g = tg.grad(lambda x: tnp.ones(3).sum())(x)
        assert g.shape == (2,) and g.dtype == np.float32
        np.testing.assert_array_equal(g, 0)

    def test_unused_pytree_leaf_gets_zeros(self):
        d = {"used": f32([1.0]), "unused": np.zeros((2, 3), np.float64)}
        g = tg.grad(lambda d: (d["used"] * 3).sum())(d)
        assert_array(g["used"], [3.0])
        assert g["unused"].shape == (2, 3) and g["unused"].dtype == np.float64

    def test_python_float_inputs_give_0d_arrays(self):
        g = tg.grad(lambda x: x * x)(3.0)
        assert isinstance(g, np.ndarray) and g.shape == ()
        assert_close(g, 6.0)
        gx, gy = tg.grad(lambda x, y: x * y + tnp.sin(x), (0, 1))(0.5, 2.0)
        assert isinstance(gx, np.ndarray) and gx.shape == () and gy.shape == ()
        assert_close(gx, 2.0 + np.cos(0.5))
        assert_close(gy, 0.5)

    def test_python_float_value_and_grad(self):
        v, g = tg.value_and_grad(lambda x: x ** 3)(2.0)
        assert_close(v, 8.0)
        assert_close(g, 12.0)
        assert isinstance(g, np.ndarray) and g.shape == ()

    def test_scalar_output_gradient_is_0d_array_not_numpy_scalar(self):
        x = f32(2.0)
        g = tg.grad(lambda x: (x * x).sum())(x)
        assert isinstance(g, np.ndarray) and g.shape == () and g.dtype == np.float32

    def test_float32_stays_float32(self):
        x = f32([0.5, 1.0, 2.0])
        p = tg.Parameter(f32([1.0, 2.0, 3.0]), name="p")

        def f(x):
            h = tnp.sin(x) * x + x ** 2 / 3.0 + tnp.exp(-x) * 0.5 + 1.0
            return tnp.mean(h * p) + tnp.sqrt(x * x + 1.0).sum() + tnp.tanh(x).var()

        value, (gx, gp) = tg.value_and_grad(f, grad_position=0, weights=p)(x)
        assert value.dtype == np.float32
        assert gx.dtype == np.float32 and gp.dtype == np.float32
        # vjp and second derivatives too
        out, vjp_fn = tg.vjp(lambda x: tnp.sin(x) * 2.0, x)
        assert out.dtype == np.float32 and vjp_fn(None)[0].dtype == np.float32
        assert tg.grad(tg.grad(lambda x: (tnp.sin(x) * x).sum()))(x).dtype == np.float32

    def test_float64_stays_float64(self):
        x = np.array([0.5, 1.0])
        assert tg.grad(lambda x: (tnp.exp(x) * 2.0).sum())(x).dtype == np.float64


# ================================================================================================
# the error table: exception type AND moment
# ================================================================================================
def _f2(x, y):
    return (x * y).sum()


class TestErrorsAtGradTime:
    @pytest.mark.parametrize("api", [tg.grad, tg.value_and_grad])
    def test_position_and_weights_both_none(self, api):
        with pytest.raises(ValueError, match=r"(?is)grad_position.*weights.*(give|pass|set|specify|use)"):
            api(_f2, grad_position=None, weights=None)

    @pytest.mark.parametrize("api", [tg.grad, tg.value_and_grad])
    @pytest.mark.parametrize("pos", [-1, (0, -2)])
    def test_negative_position(self, api, pos):
        with pytest.raises(ValueError, match=r"(?is)(negative|>= ?0|non-negative|count from 0)"):
            api(_f2, grad_position=pos)

    @pytest.mark.parametrize("api", [tg.grad, tg.value_and_grad])
    @pytest.mark.parametrize("pos", [(0, 0), (1, 0, 1)])
    def test_duplicate_positions(self, api, pos):
        with pytest.raises(ValueError, match=r"(?is)(repeat|duplicate).*(once|unique|each)"):
            api(_f2, grad_position=pos)

    @pytest.mark.parametrize("api", [tg.grad, tg.value_and_grad])
    def test_empty_tuple(self, api):
        with pytest.raises(ValueError, match=r"(?is)grad_position.*\(\).*(pass|give|use)"):
            api(_f2, grad_position=())

    @pytest.mark.parametrize("api", [tg.grad, tg.value_and_grad])
    @pytest.mark.parametrize("pos", [True, False, np.bool_(True), 1.0, "0", [0, 1], (0, True), (0, 1.5),
                                     (0, None), {0}], ids=repr)
    def test_position_wrong_type(self, api, pos):
        with pytest.raises(TypeError, match=r"(?is)grad_position.*int.*tuple"):
            api(_f2, grad_position=pos)

    @pytest.mark.parametrize("api", [tg.grad, tg.value_and_grad])
    @pytest.mark.parametrize("weights", [np.ones(3), [np.ones(3)], 1.0, "w", {"a": np.ones(2)}],
                             ids=["array", "list-of-array", "float", "str", "dict-of-array"])
    def test_weights_not_parameters(self, api, weights):
        with pytest.raises(TypeError, match=r"(?s)Parameter"):
            api(_f2, grad_position=None, weights=weights)

    def test_weights_mixing_parameters_and_arrays(self):
        p = tg.Parameter(np.ones(2))
        with pytest.raises(TypeError, match=r"(?s)Parameter"):
            tg.grad(_f2, grad_position=0, weights=[p, np.ones(2)])

    @pytest.mark.parametrize("api", [tg.grad, tg.value_and_grad])
    @pytest.mark.parametrize("has_aux", [1, 0, "yes", None, np.bool_(True)], ids=repr)
    def test_has_aux_not_bool(self, api, has_aux):
        with pytest.raises(TypeError, match=r"(?is)has_aux.*bool"):
            api(_f2, has_aux=has_aux)

    def test_parameter_tuple_rejects_non_parameters(self):
        with pytest.raises(TypeError, match="Parameter"):
            tg.ParameterTuple([tg.Parameter(np.ones(2)), np.ones(2)])


class TestErrorsAtCallTime:
    @pytest.mark.parametrize("api", [tg.grad, tg.value_and_grad])
    @pytest.mark.parametrize("pos", [2, (0, 5)])
    def test_position_out_of_range(self, api, pos):
        gf = api(_f2, grad_position=pos)         # accepted at grad(...) time
        with pytest.raises(IndexError, match=r"(?is)grad_position.*(argument|positional)"):
            gf(f32([1.0]), f32([2.0]))
        assert _core.trace_stack() == ()

    @pytest.mark.parametrize("api", [tg.grad, tg.value_and_grad])
    @pytest.mark.parametrize("bad, dtype_name", [
        (np.array([1, 2]), "int64"),
        (np.array([1, 2], dtype=np.int32), "int32"),
        (np.array([True, False]), "bool"),
        (np.array([1, 2], dtype=np.uint8), "uint8"),
    ])
    def test_integer_or_bool_array_at_differentiated_position(self, api, bad, dtype_name):
        gf = api(_f2, grad_position=(0, 1))
        pattern = rf"(?s)(?=.*position\D{{0,3}}1\b)(?=.*\b{dtype_name}\b)(?=.*(?i:cast|astype|float))"
        with pytest.raises(TypeError, match=pattern):
            gf(f32([1.0, 2.0]), bad)

    @pytest.mark.parametrize("bad, type_name", [(3, "int"), (True, "bool"), ("s", "str")])
    def test_python_int_bool_str_at_differentiated_position(self, bad, type_name):
        gf = tg.grad(lambda x: x * 2.0)
        with pytest.raises(TypeError, match=rf"(?s)(?=.*position\D{{0,3}}0\b)(?=.*\b{type_name}\b)"):
            gf(bad)

    def test_integer_leaf_inside_pytree(self):
        gf = tg.grad(lambda d: (d["a"] * d["n"]).sum())
        with pytest.raises(TypeError, match=r"(?s)(?=.*position\D{0,3}0\b)(?=.*int64)"):
            gf({"a": f32([1.0]), "n": np.array([2])})

    def test_integer_input_at_non_differentiated_position_is_fine(self):
        g = tg.grad(lambda x, n: (x * n).sum())(f32([1.0, 2.0]), np.array([3, 4]))
        assert_array(g, [3.0, 4.0])

    def test_integer_parameter_in_weights(self):
        p = tg.Parameter(np.array([1, 2]), name="counts")
        gf = tg.grad(lambda x: (x * p).sum(), grad_position=None, weights=p)
        with pytest.raises(TypeError, match=r"(?s)(?=.*counts)(?=.*int64)(?=.*out of weights)"):
            gf(f32([1.0, 2.0]))

    @pytest.mark.parametrize("fn", [
        lambda x: tnp.argmax(x),
        lambda x: x > 0,
        lambda x: x.astype(np.int32),
        lambda x: (x.sum(), tnp.argmax(x)),
    ], ids=["argmax", "bool", "astype-int", "tuple-with-int"])
    def test_non_float_output(self, fn):
        gf = tg.grad(fn)
        with pytest.raises(TypeError, match=r"(?is)(dtype|float).*(aux|cast|astype)"):
            gf(f32([1.0, 2.0]))
        assert _core.trace_stack() == ()

    def test_integer_aux_is_fine(self):
        g, (idx,) = tg.grad(lambda x: ((x * x).sum(), tnp.argmax(x)), has_aux=True)(f32([1.0, 3.0]))
        assert_array(g, [2.0, 6.0])
        assert int(idx) == 1


# ================================================================================================
# vjp
# ================================================================================================
class TestVjp:
    def test_reusable_vjp_fn(self):
        x = f32([0.5, 1.0, 2.0])
        out, vjp_fn = tg.vjp(lambda x: tnp.sin(x) * x, x)
        assert_array(out, np.sin(x) * x)
        d = np.cos(x) * x + np.sin(x)
        for ct in (np.ones(3, np.float32), f32([1.0, 0.0, -2.0]), f32([3.0, 3.0, 3.0]), np.ones(3, np.float32)):
            (g,) = vjp_fn(ct)
            assert_array(g, ct * d, np.float32)

    def test_none_cotangent_means_ones(self):
        x = f32([0.5, 1.0])
        _, vjp_fn = tg.vjp(lambda x: (x * x, tnp.exp(x)), x)
        (g_none,) = vjp_fn(None)
        (g_ones,) = vjp_fn((np.ones(2, np.float32), np.ones(2, np.float32)))
        (g_leaf,) = vjp_fn((None, f32([2.0, 2.0])))
        assert_array(g_none, 2 * x + np.exp(x))
        assert_array(g_ones, g_none)
        assert_array(g_leaf, 2 * x + 2 * np.exp(x))

    def test_one_entry_per_primal(self):
        x, y = f32([1.0, 2.0]), {"a": f32(3.0)}
        _, vjp_fn = tg.vjp(lambda x, y: x * y["a"], x, y)
        gx, gy = vjp_fn(np.ones(2, np.float32))
        assert_array(gx, [3.0, 3.0])
        assert isinstance(gy, dict)
        assert_array(gy["a"], 3.0)
        _, vjp1 = tg.vjp(lambda x: x * 2, x)
        res = vjp1(np.ones(2, np.float32))
        assert isinstance(res, tuple) and len(res) == 1

    def test_python_float_primal(self):
        out, vjp_fn = tg.vjp(lambda x: x * x, 3.0)
        assert_close(out, 9.0)
        (g,) = vjp_fn(None)
        assert isinstance(g, np.ndarray) and g.shape == ()
        assert_close(g, 6.0)

    def test_unused_primal_gets_zeros(self):
        x, y = f32([1.0, 2.0]), np.ones((3,), np.float64)
        _, vjp_fn = tg.vjp(lambda x, y: x * 2, x, y)
        gx, gy = vjp_fn(None)
        assert gy.shape == (3,) and gy.dtype == np.float64
        np.testing.assert_array_equal(gy, 0)

    @pytest.mark.parametrize("ct", [np.ones(3, np.float32), np.ones((2, 1), np.float32), np.ones((), np.float32)],
                             ids=["(3,)", "(2,1)", "()"])
    def test_wrong_shape_cotangent_is_value_error(self, ct):
        _, vjp_fn = tg.vjp(lambda x: x * 2, f32([1.0, 2.0]))
        with pytest.raises(ValueError, match=r"(?is)shape"):
            vjp_fn(ct)

    def test_wrong_structure_cotangent_is_value_error(self):
        _, vjp_fn = tg.vjp(lambda x: (x * 2, x * 3), f32([1.0, 2.0]))
        with pytest.raises(ValueError, match=r"(?is)structure"):
            vjp_fn(np.ones(2, np.float32))

    def test_wrong_dtype_cotangent_is_type_error(self):
        _, vjp_fn = tg.vjp(lambda x: x * 2, f32([1.0, 2.0]))
        with pytest.raises(TypeError, match=r"(?is)dtype.*(cast|astype)"):
            vjp_fn(np.ones(2, np.float64))
        with pytest.raises(TypeError, match=r"(?is)dtype"):
            vjp_fn(np.ones(2, np.int32))
        (g,) = vjp_fn(np.ones(2, np.float32))    # still usable after the errors
        assert_array(g, [2.0, 2.0])

    def test_has_aux_two_outputs_gives_bare_aux(self):
        x = f32([1.0, 2.0])
        out, vjp_fn, aux = tg.vjp(lambda x: (x * 2, x ** 3), x, has_aux=True)
        assert_array(out, 2 * x)
        assert isinstance(aux, np.ndarray)
        assert_array(aux, x ** 3)
        assert_array(vjp_fn(None)[0], [2.0, 2.0])

    def test_has_aux_more_outputs_gives_tuple(self):
        x = f32([1.0, 2.0])
        out, vjp_fn, aux = tg.vjp(lambda x: (x * 2, x ** 3, x + 1), x, has_aux=True)
        assert isinstance(aux, tuple) and len(aux) == 2
        assert_array(aux[0], x ** 3)
        assert_array(aux[1], x + 1)
        assert_array(vjp_fn(None)[0], [2.0, 2.0])

    def test_has_aux_single_output_is_value_error(self):
        with pytest.raises(ValueError, match=r"(?is)has_aux"):
            tg.vjp(lambda x: x * 2, f32([1.0]), has_aux=True)
        assert _core.trace_stack() == ()

    def test_integer_primal_is_type_error(self):
        # the remedy is vjp's own (vjp has no grad_position to leave the primal out of)
        with pytest.raises(TypeError, match=r"(?s)(?=.*int64)(?=.*close over it)"):
            tg.vjp(lambda x: x * 2, np.array([1, 2]))

    def test_vjp_results_are_differentiable(self):
        x = f32([0.5, 1.0])

        def first(x):
            _, vjp_fn = tg.vjp(lambda y: tnp.sin(y), x)
            return vjp_fn(None)[0].sum()                # sum(cos x)

        assert_array(tg.grad(first)(x), -np.sin(x))


# ================================================================================================
# exceptions inside fn leave no state behind
# ================================================================================================
class Boom(Exception):
    pass


class TestExceptionSafety:
    def test_exception_in_fn_cleans_up(self):
        x = f32([1.0, 2.0])
        w0 = f32([3.0, 4.0])
        p = tg.Parameter(w0.copy(), name="p")

        def bad(x):
            x * p  # an operation on the tape (reading p) before the failure
            assert len(_core.trace_stack()) == 1
            raise Boom("inside fn")

        with pytest.raises(Boom):
            tg.grad(bad, grad_position=0, weights=p)(x)
        assert _core.trace_stack() == ()
        assert isinstance(p.value, np.ndarray)
        np.testing.assert_array_equal(p.value, w0)
        np.testing.assert_array_equal(np.asarray(p), w0)
        # later grads work, and see p's stored value
        gx, gp = tg.grad(lambda x: (x * p).sum(), grad_position=0, weights=p)(x)
        assert_array(gx, w0)
        assert_array(gp, x)

    def test_exception_in_nested_transform_cleans_up(self):
        x = f32([1.0, 2.0])
        p = tg.Parameter(f32([3.0, 4.0]), name="p")

        def inner(y):
            assert len(_core.trace_stack()) == 2
            raise Boom("deep")

        def outer(x):
            return tg.grad(inner)(x * p).sum()

        for api in (tg.grad, tg.value_and_grad):
            with pytest.raises(Boom):
                api(outer, grad_position=0, weights=[p])(x)
            assert _core.trace_stack() == ()
            assert isinstance(p.value, np.ndarray)
        with pytest.raises(Boom):
            tg.vjp(lambda x: tg.grad(inner)(x), x)
        assert _core.trace_stack() == ()
        assert_array(tg.grad(tg.grad(lambda x: (x ** 3).sum()))(x), 6 * x)

    def test_caught_exception_inside_fn_does_not_break_grad(self):
        x = f32([1.0, 2.0])

        def raises(y):
            raise Boom("caught by the caller")

        def f(x):
            try:
                tg.grad(raises)(x)
            except Boom:
                pass
            assert len(_core.trace_stack()) == 1      # the inner transform was popped
            return (x * x).sum()

        assert_array(tg.grad(f)(x), 2 * x)
        assert _core.trace_stack() == ()


# ================================================================================================
# Parameters (§1.3, §1.4)
# ================================================================================================
class TestParameters:
    def test_assign_wrong_shape(self):
        p = tg.Parameter(np.zeros((2, 3), np.float32), name="w")
        with pytest.raises(ValueError, match=r"(?s)(?=.*\(2, 3\))(?=.*\(3, 2\))"):
            p.assign(np.zeros((3, 2), np.float32))
        assert p.shape == (2, 3)

    def test_assign_wrong_dtype(self):
        p = tg.Parameter(np.zeros((2,), np.float32), name="w")
        with pytest.raises(ValueError, match=r"(?s)(?=.*float32)(?=.*float64)"):
            p.assign(np.zeros((2,), np.float64))
        assert p.dtype == np.float32

    def test_assign_changes_value_between_calls(self):
        p = tg.Parameter(f32([1.0, 2.0]), name="w")
        gf = tg.grad(lambda x: (x * p * p).sum(), grad_position=None, weights=p)
        x = f32([1.0, 1.0])
        assert_array(gf(x), [2.0, 4.0])
        assert p.assign(f32([5.0, 6.0])) is p
        assert_array(gf(x), [10.0, 12.0])
        np.testing.assert_array_equal(np.asarray(p), [5.0, 6.0])

    def test_parameter_passed_as_argument_behaves_as_value(self):
        p = tg.Parameter(f32([1.0, 2.0]), name="w")
        g = tg.grad(lambda w: (w * w).sum())(p)
        assert_array(g, [2.0, 4.0], np.float32)

    def test_parameter_returned_from_fn(self):
        p = tg.Parameter(f32([1.0, 2.0]), name="w")
        g = tg.grad(lambda: p, grad_position=None, weights=p)()
        assert_array(g, [1.0, 1.0])

    def test_parameter_with_numpy_functions(self):
        p = tg.Parameter(f32([0.5, 1.0]), name="w")
        g = tg.grad(lambda x: np.sum(np.sin(p) * x), grad_position=None, weights=p)(f32([2.0, 3.0]))
        assert_array(g, np.cos([0.5, 1.0]) * [2.0, 3.0])


# ================================================================================================
# nesting, long chains
# ================================================================================================
class TestNesting:
    @pytest.mark.parametrize("n", range(1, 11))
    def test_nth_derivative_of_sin(self, n):
        x = np.linspace(-2.0, 2.0, 5)
        f = tnp.sin
        for _ in range(n):
            f = tg.grad(f)
        assert_close(f(x), np.sin(x + n * np.pi / 2), rtol=1e-10, atol=1e-12)

    def test_tenth_derivative_of_sin_python_float(self):
        f = tnp.sin
        for _ in range(10):
            f = tg.grad(f)
        assert_close(f(0.7), -np.sin(0.7), rtol=1e-12)

    def test_perturbation_confusion(self):
        # d/dx [x * d/dy (x + y)] at x = 1 is 1 (a confused implementation gives 2)
        g = tg.grad(lambda x: x * tg.grad(lambda y: x + y)(1.0))(1.0)
        assert_close(g, 1.0)
        g = tg.grad(lambda x: (x * tg.grad(lambda y: (x + y).sum())(f32([1.0, 1.0]))).sum())(f32([1.0, 1.0]))
        assert_array(g, [1.0, 1.0])

    def test_nested_closure_over_outer_variable(self):
        # d/dx [x * d/dy (x * y)] = d/dx [x * x] = 2x
        g = tg.grad(lambda x: x * tg.grad(lambda y: x * y)(3.0))(1.5)
        assert_close(g, 3.0)

    def test_long_chain_no_recursion_error(self):
        def chain(x):
            for _ in range(100_000):
                x = x + 1.0
            return x.sum()

        x = np.zeros(2, np.float32)
        value, g = tg.value_and_grad(chain)(x)
        assert_close(value, 200_000.0)
        assert_array(g, [1.0, 1.0], np.float32)


# ================================================================================================
# NumPy on tracers
# ================================================================================================
class TestNumpyDispatch:
    def test_numpy_ufuncs_and_functions(self):
        x = np.array([0.3, 1.2, -0.7])
        g = tg.grad(lambda x: np.sum(np.sin(x) * np.exp(x)))(x)
        assert_array(g, np.cos(x) * np.exp(x) + np.sin(x) * np.exp(x))
        g = tg.grad(lambda x: np.mean(np.tanh(x)) + np.max(x))(x)
        assert_array(g, (1 - np.tanh(x) ** 2) / 3 + np.array([0.0, 1.0, 0.0]))

    def test_einsum(self):
        A = np.arange(6.0).reshape(2, 3)
        x = np.array([1.0, -2.0, 0.5])
        gA, gx = tg.grad(lambda A, x: np.einsum("ij,j->i", A, x).sum(), (0, 1))(A, x)
        assert_array(gA, np.tile(x, (2, 1)))
        assert_array(gx, A.sum(axis=0))
        g = tg.grad(lambda x: np.einsum("i,i->", x, x))(x)
        assert_array(g, 2 * x)

    def test_operators(self):
        x = np.array([1.5, -2.0])
        y = np.array([0.5, 3.0])
        M = np.array([[1.0, 2.0], [3.0, 4.0]])

        def f(x, y):
            return (x + y - 2 * x * y / (y + 4) + x ** 2 - (-x) + abs(x) + 1.0 / y).sum() + (M @ x).sum() + y @ x

        gx, gy = tg.grad(f, (0, 1))(x, y)
        exp_gx = 1 - 2 * y / (y + 4) + 2 * x + 1 + np.sign(x) + M.sum(axis=0) + y
        exp_gy = 1 - 2 * x * 4 / (y + 4) ** 2 - 1 / y ** 2 + x
        assert_array(gx, exp_gx)
        assert_array(gy, exp_gy)

    def test_reflected_operators_with_numpy_arrays(self):
        x = f32([1.0, 2.0])
        c = f32([3.0, 4.0])
        g = tg.grad(lambda x: (c * x + c / x - c ** x).sum())(x)
        assert_array(g, c - c / x ** 2 - np.log(c) * c ** x, np.float32)

    @pytest.mark.parametrize("call, name", [
        (lambda x: np.packbits(x), "packbits"),
        (lambda x: np.isnat(x), "isnat"),
        (lambda x: np.add.accumulate(x), "accumulate"),
    ])
    def test_unsupported_numpy_function_is_type_error_naming_it(self, call, name):
        with pytest.raises(TypeError, match=re.escape(name)):
            tg.grad(lambda x: call(x).sum())(np.array([1.0, 2.0]))
        assert _core.trace_stack() == ()

    @pytest.mark.parametrize("convert", [np.asarray, np.array, lambda t: t.__array__()],
                             ids=["asarray", "array", "__array__"])
    def test_asarray_on_tracer(self, convert):
        with pytest.raises(TracerArrayConversionError, match=r"tapegrad\.numpy"):
            tg.grad(lambda x: convert(x).sum())(np.array([1.0, 2.0]))
        assert issubclass(TracerArrayConversionError, TypeError)
        assert _core.trace_stack() == ()

    def test_out_argument_refused(self):
        buf = np.zeros(2)
        with pytest.raises(TypeError, match=r"out="):
            tg.grad(lambda x: np.sin(x, out=buf).sum())(np.array([1.0, 2.0]))
        with pytest.raises(TypeError, match=r"out="):
            tg.grad(lambda x: np.add(x, 1.0, out=buf).sum())(np.array([1.0, 2.0]))
        with pytest.raises(TypeError, match=r"out="):
            tg.grad(lambda x: np.sum(x, out=np.zeros(())))(np.array([1.0, 2.0]))
        np.testing.assert_array_equal(buf, 0)

    def test_setitem_on_tracer_names_at(self):
        def f(x):
            x[0] = 5.0
            return x.sum()

        with pytest.raises(TypeError, match=r"\.at"):
            tg.grad(f)(np.array([1.0, 2.0]))
        assert _core.trace_stack() == ()

    def test_bool_on_tracer_allows_control_flow_and_float_of_a_stopped_value_is_a_constant(self):
        def f(x):
            if x.sum() > 0:                      # bool(tracer)
                return (x ** 2).sum()
            return (x ** 3).sum()

        assert_array(tg.grad(f)(np.array([1.0, 2.0])), [2.0, 4.0])
        assert_array(tg.grad(f)(np.array([-1.0, -2.0])), [3.0, 12.0])

        def g(x):
            c = float(tg.stop_gradient(x.sum()))  # a constant, said so: no gradient through it
            y = x
            while y.sum() < 10.0:                  # bool(tracer)
                y = y * 2.0
            return y.sum() * c

        x = np.array([1.0, 0.5])                  # sum 1.5 -> doubled 3 times -> y = 8x, times 1.5
        assert_array(tg.grad(g)(x), [12.0, 12.0])

    def test_bool_of_parameter_and_int_index(self):
        p = tg.Parameter(np.array([2.0, -1.0]), name="w")

        def f(x):
            k = int(tnp.argmax(p))
            return x[k] * p[k] if bool(p[0] > 0) else x[0]

        g = tg.grad(f, grad_position=0, weights=p)(np.array([3.0, 4.0]))
        assert_array(g[0], [2.0, 0.0])
        assert_array(g[1], [3.0, 0.0])


def test_parameter_keeps_numpy_scalars_as_0d_arrays_and_tuple_membership_is_by_identity():
    p = tg.Parameter(np.float32(1.0))
    assert isinstance(p._data, np.ndarray) and p._data.shape == () and p.dtype == np.float32
    p.assign(np.float32(2.0))
    assert isinstance(p._data, np.ndarray) and float(p) == 2.0
    q = tg.Parameter(np.ones(3))
    params = tg.ParameterTuple([q, p])
    assert p in params and tg.Parameter(np.ones(3)) not in params
    assert params.index(p) == 1 and params.count(q) == 1
    with pytest.raises(ValueError, match="not in"):
        params.index(tg.Parameter(np.ones(1)))


def test_get_grad_accepts_numpy_integer_positions():
    result = tg.grad(lambda x, y: x * y, grad_position=(0, 1), return_ids=True)(1.0, 2.0)
    assert tg.get_grad(result, np.int64(1)) == 1.0


def test_parameter_refuses_in_place_arithmetic():
    p = tg.Parameter(np.ones(2), name="w")
    with pytest.raises(TypeError, match="assign"):
        p += 1.0
    q = tg.Parameter(np.ones(2), name="q")
    with pytest.raises(TypeError, match="assign"):
        q *= 2.0


# ---- a forgotten has_aux -----------------------------------------------------------------------
class TestMissingHasAux:
    """``(loss, logits)`` without ``has_aux=True`` keeps MindSpore's convention (the sum of every output
    is differentiated) but warns, once per function, when the outputs differ in shape; a non-array
    output is a TypeError that names has_aux."""

    @pytest.fixture(autouse=True)
    def _fresh(self):
        from tapegrad import _api
        _api._WARNED_HAS_AUX.clear()  # "once per function" must not depend on the tests run before
        assert tg.config.warn_missing_has_aux

    @staticmethod
    def _loss(x):
        logits = 2.0 * x
        return (logits ** 2).sum(), logits

    def test_grad_warns_once_per_function_and_keeps_the_convention(self):
        x = np.array([[1.0, -2.0, 0.5], [0.0, 3.0, -1.0]])
        with pytest.warns(tg.errors.MissingHasAuxWarning, match=r"has_aux=True.*\(\), \(2, 3\)") as record:
            g = tg.grad(self._loss)(x)
        assert len(record) == 1 and record[0].filename == __file__  # the user's line, not tapegrad's
        assert_array(g, 8 * x + 2)  # d/dx [sum((2x)^2) + sum(2x)]: every output contributes
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # neither the same wrapper again nor a new one warns
            grad_fn = tg.grad(self._loss)
            for _ in range(3):
                assert_array(grad_fn(x), 8 * x + 2)
            tg.grad(self._loss)(x)
            assert_array(tg.grad(self._loss, has_aux=True)(x)[0], 8 * x)

    def test_value_and_grad_warns(self):
        x = np.arange(3.0)
        with pytest.warns(tg.errors.MissingHasAuxWarning, match="value_and_grad"):
            (loss, logits), g = tg.value_and_grad(lambda v: ((v ** 2).sum(), v))(x)
        assert_array(g, 2 * x + 1)

    def test_outputs_of_one_shape_or_one_output_do_not_warn(self):
        x = np.arange(3.0)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            assert_array(tg.grad(lambda v: ((v ** 2).sum(), v.sum()))(x), 2 * x + 1)  # a sum of losses
            assert_array(tg.grad(lambda v: (v, 3 * v))(x), np.full(3, 4.0))
            assert_array(tg.grad(lambda v: (v ** 2).sum())(x), 2 * x)
            tg.grad(lambda v: ((v ** 2).sum(), v), has_aux=True)(x)

    def test_once_under_vmap_and_at_jit_staging(self):
        x = np.arange(6.0).reshape(2, 3)
        with pytest.warns(tg.errors.MissingHasAuxWarning) as record:
            per_example = tg.vmap(tg.grad(lambda v: ((v ** 2).sum(), v)))(x)
        assert len(record) == 1  # not one per example
        assert_array(per_example, 2 * x + 1)
        jitted = tg.jit(tg.grad(lambda v: ((v ** 2).sum(), v)))
        with pytest.warns(tg.errors.MissingHasAuxWarning) as record:
            jitted(x)
        assert len(record) == 1
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            assert_array(jitted(x), 2 * x + 1)  # the cached program: no staging, no warning

    def test_the_switches(self, monkeypatch):
        x = np.arange(3.0)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            warnings.filterwarnings("ignore", category=tg.errors.MissingHasAuxWarning)
            tg.grad(lambda v: ((v ** 2).sum(), v))(x)
        tg.config.warn_missing_has_aux = False
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("error")
                tg.grad(lambda v: ((v ** 3).sum(), v))(x)
        finally:
            tg.config.warn_missing_has_aux = True
        with pytest.raises(TypeError, match="warn_missing_has_aux must be a bool"):
            tg.config.warn_missing_has_aux = 0
        assert tg.config.warn_missing_has_aux is True
        from tapegrad._config import Config
        monkeypatch.setenv("TAPEGRAD_WARN_MISSING_HAS_AUX", "0")
        assert Config().warn_missing_has_aux is False
        monkeypatch.delenv("TAPEGRAD_WARN_MISSING_HAS_AUX")
        assert Config().warn_missing_has_aux is True

    def test_a_warning_made_an_error_leaves_the_library_intact(self):
        x = np.arange(3.0)
        f = tg.grad(lambda v: ((v ** 2).sum(), v))
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            with pytest.raises(tg.errors.MissingHasAuxWarning):
                f(x)
            assert _core.trace_stack() == ()
            with pytest.raises(tg.errors.MissingHasAuxWarning):  # not recorded as given: raises again
                f(x)
        with pytest.warns(tg.errors.MissingHasAuxWarning):
            assert_array(f(x), 2 * x + 1)

    def test_once_for_a_partial_or_a_module_built_again_at_each_step(self):
        class Net(tg.nn.Module):
            def __call__(self, w, x):
                return (x * w).sum(), x * w

        x = np.arange(3.0)
        with pytest.warns(tg.errors.MissingHasAuxWarning) as record:
            for _ in range(3):
                tg.grad(functools.partial(lambda w, x: ((x * w).sum(), x * w), x=x))(np.ones(3))
                tg.grad(Net())(np.ones(3), x)
        assert len(record) == 2  # one for the partial's function, one for the class

    def test_a_non_array_first_output_with_has_aux_says_to_return_the_loss_first(self):
        with pytest.raises(TypeError, match=r"With has_aux=True the first output is differentiated"):
            tg.grad(lambda x: ("note", x), has_aux=True)(np.ones(2))

    @pytest.mark.parametrize("api", [tg.grad, tg.value_and_grad])
    @pytest.mark.parametrize("extra", ["note", object()], ids=["str", "object"])
    def test_a_non_array_output_names_has_aux(self, api, extra):
        x = np.arange(3.0)
        with pytest.raises(TypeError, match=r"output leaf 1 .*not an array.*has_aux=True"):
            api(lambda v: ((v ** 2).sum(), extra))(x)
        assert _core.trace_stack() == ()
        out = api(lambda v: ((v ** 2).sum(), extra), has_aux=True)(x)
        assert_array(out[0] if api is tg.grad else out[1], 2 * x)
