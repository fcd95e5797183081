"""custom_vjp and custom_jvp: the documented examples (a stable log1pexp, gradient clipping), higher
order in both modes, nondiff_argnums, pytrees, composition with each other, and errors."""
import functools

import numpy as np
import pytest

import tapegrad as tg
import tapegrad.numpy as tnp
from _tol import assert_close
from tapegrad._core import trace_stack
from tapegrad.testing import check_grads


# ---- the documented examples ---------------------------------------------------------------------
@tg.custom_jvp
def log1pexp(x):
    return tnp.logaddexp(0.0, x)


@log1pexp.defjvp
def log1pexp_jvp(primals, tangents):
    (x,), (x_dot,) = primals, tangents
    return log1pexp(x), x_dot * tg.scipy.special.expit(x)  # 1 - 1/(1 + e^x), stable for large x


@tg.custom_vjp
def clip_gradient(x, lo, hi):
    return x


def clip_gradient_fwd(x, lo, hi):
    return x, (lo, hi)


def clip_gradient_bwd(res, g):
    lo, hi = res
    return tnp.clip(g, lo, hi), None, None


clip_gradient.defvjp(clip_gradient_fwd, clip_gradient_bwd)


def test_log1pexp_gradient_is_stable_where_the_naive_one_overflows():
    x = np.array([0.0, 10.0, 1000.0])
    naive = tg.grad(lambda x: tnp.sum(tnp.log(1.0 + tnp.exp(x))))
    with np.errstate(over="ignore", invalid="ignore"):
        assert np.isnan(naive(x)[2])
    assert_close(tg.grad(lambda x: tnp.sum(log1pexp(x)))(x), [0.5, 1 / (1 + np.exp(-10)), 1.0])


def test_log1pexp_all_orders_both_modes():
    check_grads(log1pexp, (np.array([-2.0, 0.3, 4.0]),), order=3)


def test_log1pexp_second_derivative_is_the_logistic_density():
    x = np.array([-1.0, 0.5, 30.0])
    density = np.exp(-x) / (1 + np.exp(-x)) ** 2
    assert_close(tg.grad(tg.grad(lambda x: tnp.sum(log1pexp(x))))(x), density, atol=1e-15)
    assert_close(tg.hessian(lambda x: tnp.sum(log1pexp(x)))(x), np.diag(density), atol=1e-15)


def test_gradient_clipping_identity():
    x = np.array([0.5, -2.0])
    g = tg.grad(lambda x: tnp.sum(clip_gradient(x, -0.3, 0.3) * np.array([1.0, -5.0])))(x)
    assert_close(g, [0.3, -0.3])
    assert_close(clip_gradient(x, -0.3, 0.3), x)  # the identity on values


# ---- custom_vjp ----------------------------------------------------------------------------------
@tg.custom_vjp
def f_sin(x):
    return tnp.sin(x)


f_sin.defvjp(lambda x: (tnp.sin(x), tnp.cos(x)), lambda cos_x, g: (g * cos_x,))


def test_custom_vjp_is_used_in_reverse_mode():
    calls = []

    @tg.custom_vjp
    def f(x):
        return x * 2.0

    def bwd(res, g):
        calls.append(1)
        return (g * 10.0,)
    f.defvjp(lambda x: (f(x), None), bwd)
    assert_close(tg.grad(lambda x: tnp.sum(f(x)))(np.ones(2)), [10.0, 10.0])
    assert calls == [1]
    assert_close(f(np.ones(2)), [2.0, 2.0])


def test_custom_vjp_all_orders_both_modes():
    # forward mode runs through the transpose of bwd; higher orders differentiate fwd and bwd
    check_grads(f_sin, (np.array([0.3, -1.2, 2.0]),), order=3)


def test_custom_vjp_nondiff_argnums():
    @functools.partial(tg.custom_vjp, nondiff_argnums=(0,))
    def scale(k, x):
        return x * k

    scale.defvjp(lambda k, x: (x * k, None), lambda k, res, g: (g * k,))
    x = np.array([1.0, 2.0])
    assert_close(tg.grad(lambda x: tnp.sum(scale(3.0, x)))(x), [3.0, 3.0])
    assert_close(tg.jvp(lambda x: scale(3.0, x), (x,), (np.ones(2),))[1], [3.0, 3.0])

    @tg.custom_vjp(nondiff_argnums=(1,))
    def power(x, n):
        return x ** n
    power.defvjp(lambda x, n: (x ** n, x), lambda n, x, g: (g * n * x ** (n - 1),))
    assert_close(tg.grad(lambda x: tnp.sum(power(x, 3)))(x), 3 * x ** 2)


def test_custom_vjp_on_pytrees_with_several_outputs():
    @tg.custom_vjp
    def f(p):
        return {"sum": p["a"] + p["b"], "prod": p["a"] * p["b"]}

    def fwd(p):
        return f(p), p

    def bwd(p, g):
        return ({"a": g["sum"] + g["prod"] * p["b"], "b": g["sum"] + g["prod"] * p["a"]},)
    f.defvjp(fwd, bwd)
    p = {"a": np.array([1.0, 2.0]), "b": np.array([3.0, -1.0])}
    check_grads(lambda p: f(p), (p,), order=2)
    grads = tg.grad(lambda p: tnp.sum(f(p)["prod"]))(p)
    assert_close(grads["a"], p["b"])


def test_custom_vjp_errors_and_clean_state():
    @tg.custom_vjp
    def f(x):
        return x

    with pytest.raises(TypeError, match="defvjp"):
        f(np.ones(2))
    f.defvjp(lambda x: x, lambda res, g: (g,))
    with pytest.raises(TypeError, match="pair"):
        tg.grad(lambda x: tnp.sum(f(x)))(np.ones(2))
    f.defvjp(lambda x: (x, None), lambda res, g: g)
    with pytest.raises(TypeError, match="one entry per differentiable argument"):
        tg.grad(lambda x: tnp.sum(f(x)))(np.ones(2))
    f.defvjp(lambda x: (x, None), lambda res, g: (g[:1],))
    with pytest.raises(ValueError, match="shape"):
        tg.grad(lambda x: tnp.sum(f(x)))(np.ones(2))
    with pytest.raises(TypeError, match="nondiff_argnums"):
        tg.custom_vjp(lambda x: x, nondiff_argnums=(-1,))
    assert trace_stack() == ()


# ---- custom_jvp ----------------------------------------------------------------------------------
def test_custom_jvp_is_used_in_both_modes():
    @tg.custom_jvp
    def f(x):
        return tnp.sin(x)

    @f.defjvp
    def f_jvp(primals, tangents):
        (x,), (t,) = primals, tangents
        return f(x), t * 7.0  # deliberately not the true derivative: it must be what we get
    x = np.array([0.1, 0.2])
    assert_close(tg.jvp(f, (x,), (np.ones(2),))[1], [7.0, 7.0])
    assert_close(tg.grad(lambda x: tnp.sum(f(x)))(x), [7.0, 7.0])
    assert_close(tg.jacrev(f)(x), 7 * np.eye(2))


def test_custom_jvp_two_arguments_nondiff_and_zero_tangents():
    @functools.partial(tg.custom_jvp, nondiff_argnums=(2,))
    def f(x, y, n):
        return x ** n * y

    @f.defjvp
    def f_jvp(n, primals, tangents):
        (x, y), (tx, ty) = primals, tangents
        return f(x, y, n), n * x ** (n - 1) * y * tx + x ** n * ty
    x, y = np.array([1.5, 2.0]), np.array([0.5, -1.0])
    check_grads(lambda x, y: f(x, y, 3), (x, y), order=2)
    gx = tg.grad(lambda x: tnp.sum(f(x, y, 3)))(x)  # y is a constant here: its tangent is zero
    assert_close(gx, 3 * x ** 2 * y)


def test_custom_jvp_errors():
    @tg.custom_jvp
    def f(x):
        return x
    with pytest.raises(TypeError, match="defjvp"):
        f(np.ones(2))
    f.defjvp(lambda primals, tangents: primals[0])
    with pytest.raises(TypeError, match="pair"):
        tg.jvp(f, (np.ones(2),), (np.ones(2),))
    f.defjvp(lambda primals, tangents: (primals[0], (tangents[0], tangents[0])))
    with pytest.raises(ValueError, match="structure"):
        tg.jvp(f, (np.ones(2),), (np.ones(2),))
    assert trace_stack() == ()


def test_custom_jvp_tangent_of_the_wrong_shape_is_refused():
    @tg.custom_jvp
    def f(x):
        return x * 2.0
    f.defjvp(lambda primals, tangents: (f(primals[0]), tangents[0][:2]))  # a 0-d one would be broadcast
    with pytest.raises(ValueError, match=r"tangent_out leaf 0 has shape \(2,\) .* the output has shape \(3,\)"):
        tg.jvp(f, (np.ones(3),), (np.ones(3),))
    with pytest.raises(ValueError, match="tangent_out leaf 0 has shape"):
        tg.grad(lambda x: tnp.sum(f(x)))(np.ones(3))
    assert trace_stack() == ()


@pytest.mark.parametrize("route", ["jvp", "grad"])
def test_a_traced_value_the_rule_cannot_see_is_refused(route):
    # a traced nondiff argument, and a closure over a traced value, would escape the custom rule
    @functools.partial(tg.custom_vjp, nondiff_argnums=(1,))
    def scale(x, s):
        return x * s
    scale.defvjp(lambda x, s: (x * s, None), lambda s, res, g: (g * s,))

    def closing_over(x, s):
        @tg.custom_jvp
        def times_s(y):
            return y * s
        times_s.defjvp(lambda primals, tangents: (times_s(primals[0]), tangents[0] * s))
        return times_s(x)
    x, w = np.array([0.5, 1.0]), np.array([2.0, 3.0])
    for fn in (scale, closing_over):
        with pytest.raises(TypeError, match="closure over a traced value"):
            if route == "jvp":
                tg.jvp(fn, (x, w), (x, w))
            else:
                tg.grad(lambda x, s, fn=fn: tnp.sum(fn(x, s)), (0, 1))(x, w)
        assert trace_stack() == ()


# ---- composition ---------------------------------------------------------------------------------
def test_custom_rules_compose_with_each_other():
    def h(x):
        return tnp.sum(log1pexp(f_sin(x)) * clip_gradient(x, -10.0, 10.0))
    x = np.array([0.4, -0.9, 1.7])
    check_grads(h, (x,), order=2)
    plain = lambda x: tnp.sum(tnp.logaddexp(0.0, tnp.sin(x)) * x)
    assert_close(tg.grad(h)(x), tg.grad(plain)(x))
    assert_close(tg.hessian(h)(x), tg.hessian(plain)(x))


def test_custom_vjp_inside_custom_jvp():
    @tg.custom_jvp
    def outer(x):
        return f_sin(x) * 2.0

    @outer.defjvp
    def outer_jvp(primals, tangents):
        (x,), (t,) = primals, tangents
        return outer(x), 2.0 * tg.jvp(f_sin, (x,), (t,))[1]
    check_grads(outer, (np.array([0.2, 1.1]),), order=2)


# ---- scalars where an array cotangent or tangent is due ---------------------------------------------
def _twice_with_constant_bwd():
    """The report's function: d(2x)/dx = 2, its bwd returning the Python float 2.0 for an array x
    (right where the output's cotangent is ones, as under grad of a sum)."""
    f = tg.custom_vjp(lambda x: x * 2.0)
    f.defvjp(lambda x: (x * 2.0, None), lambda res, g: (2.0,))
    return f


@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["float64", "float32"])
def test_custom_vjp_bwd_may_return_a_python_float(dtype):
    f = _twice_with_constant_bwd()
    g = tg.grad(f)(np.array(3.0, dtype))
    assert g.shape == () and g.dtype == dtype and g == 2.0
    x = np.array([0.5, -1.0, 2.0], dtype)
    for route in (tg.grad, lambda h: tg.jit(tg.grad(h))):
        g = route(lambda x: tnp.sum(f(x)))(x)
        assert g.dtype == dtype
        assert_close(g, [2.0, 2.0, 2.0])
    # a scalar cotangent for a batched primal: every example gets the array
    g = tg.vmap(tg.grad(lambda x: tnp.sum(f(x))))(np.stack([x, 2 * x]))
    assert g.shape == (2, 3) and g.dtype == dtype
    assert_close(g, np.full((2, 3), 2.0))
    # grad of grad differentiates bwd, which is constant: the second derivative of 2x is 0
    assert tg.grad(tg.grad(f))(np.array(3.0, dtype)) == 0.0


def test_custom_vjp_scalar_cotangents_python_ints_numpy_scalars_and_zeros():
    # a Python int is broadcast as a float is; 0.0 is a zero of the argument's shape and dtype; a NumPy
    # scalar (float64) for a 0-d float32 argument takes float32
    @tg.custom_vjp
    def f(x, y, z):
        return 3.0 * x + y * 0.0 + z

    f.defvjp(lambda x, y, z: (f(x, y, z), None), lambda res, g: (3, 0.0, np.float64(1.0)))
    x, y, z = np.array([1.0, 2.0], np.float32), np.ones((2, 2), np.float32), np.array(0.5, np.float32)
    gx, gy, gz = tg.grad(lambda x, y, z: tnp.sum(f(x, y, z)), grad_position=(0, 1, 2))(x, y, z)
    assert gx.dtype == gy.dtype == gz.dtype == np.float32 and gy.shape == (2, 2) and gz.shape == ()
    assert_close(gx, [3.0, 3.0])
    assert_close(gy, np.zeros((2, 2)))
    assert gz == 1.0


def test_custom_vjp_a_linear_bwd_with_a_scalar_entry_has_every_derivative():
    # bwd returns g-linear arrays for x and a scalar zero for the argument that does not matter
    @tg.custom_vjp
    def f(x, y):
        return tnp.sin(x) + 0.0 * y

    f.defvjp(lambda x, y: (f(x, y), x), lambda x, g: (tnp.cos(x) * g, 0.0))
    x, y = np.array([0.3, 1.1]), np.array([0.7, 0.2])
    check_grads(f, (x, y), order=2)
    assert_close(tg.vmap(tg.grad(lambda x, y: tnp.sum(f(x, y)), grad_position=1))(np.stack([x, x]), np.stack([y, y])),
                 np.zeros((2, 2)))


@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["float64", "float32"])
def test_custom_jvp_rule_may_return_a_python_float_tangent(dtype):
    # the second output is constant in x: its tangent 0.0 is a zero of the output's shape and dtype
    @tg.custom_jvp
    def f(x):
        return x * 2.0, tnp.ones_like(x)

    @f.defjvp
    def f_jvp(primals, tangents):
        (x,), (t,) = primals, tangents
        return f(x), (t * 2.0, 0.0)

    x = np.array([0.5, 1.5], dtype)
    _, (t0, t1) = tg.jvp(f, (x,), (np.ones(2, dtype),))
    assert t1.shape == (2,) and t1.dtype == dtype and not t1.any()
    assert t0.dtype == dtype
    assert_close(t0, [2.0, 2.0])
    g = tg.grad(lambda x: tnp.sum(f(x)[0]) + tnp.sum(f(x)[1]))(x)
    assert g.dtype == dtype
    assert_close(g, [2.0, 2.0])
    assert_close(tg.jit(tg.jacfwd(lambda x: f(x)[1]))(x), np.zeros((2, 2)))
    assert_close(tg.vmap(lambda x: tg.jvp(f, (x,), (tnp.ones_like(x),))[1][1])(np.stack([x, x])), np.zeros((2, 2)))


def test_extend_rules_may_return_python_floats():
    # a user primitive whose vjp and jvp rules return constants: the tape and the forward sweep make
    # them arrays of the operand's (output's) shape and dtype, also under vmap, where a float once lost
    # the per-example axis and grad returned a Python float
    from tapegrad import extend

    p = extend.primitive("tests.twice_constant_rules", lambda x: 2 * x, extend.unary_abstract_eval)
    extend.defvjp(p, lambda ct, ans, x: 2.0)  # right for the cotangent of ones, as under grad of a sum
    extend.defjvp(p, lambda t, ans, x: 0.0)  # a zero tangent
    extend.defbatch_elementwise(p)
    try:
        x = np.array([1.0, 2.0, 3.0], np.float32)
        g = tg.grad(lambda x: tnp.sum(extend.bind(p, x)))(x)
        assert g.dtype == np.float32 and g.shape == (3,)
        assert_close(g, [2.0, 2.0, 2.0])
        assert tg.grad(lambda x: extend.bind(p, x))(np.array(1.5)).shape == ()
        g = tg.vmap(tg.grad(lambda x: tnp.sum(extend.bind(p, x))))(np.stack([x, x]))
        assert g.shape == (2, 3)
        assert_close(g, np.full((2, 3), 2.0))
        t = tg.jvp(lambda x: extend.bind(p, x), (x,), (np.ones(3, np.float32),))[1]
        assert t.shape == (3,) and t.dtype == np.float32 and not t.any()
    finally:
        extend.PRIMITIVES.remove(p)  # the registry keeps the library's primitives only


@pytest.mark.parametrize("route", ["eager", "jit", "vmap"])
def test_extend_rules_returning_zero_d_values_are_broadcast_and_wrong_shapes_refused(route):
    # a NumPy scalar (np.float64(2.0)) or a reduction of the cotangent (0-d, an eager NumPy scalar or a
    # traced 0-d value) from a user primitive's vjp rule once reached grad's result as shape () float64
    from tapegrad import extend

    def run(rule):
        p = extend.primitive("tests.zero_d_rules", lambda x: 2 * x, extend.unary_abstract_eval)
        extend.defvjp(p, rule)
        extend.defbatch_elementwise(p)
        try:
            g = tg.grad(lambda x: tnp.sum(extend.bind(p, x)))
            x = np.array([1.0, 2.0, 3.0], np.float32)
            if route == "jit":
                return tg.jit(g)(x)
            if route == "vmap":
                return tg.vmap(g)(np.stack([x, x]))[0]
            return g(x)
        finally:
            extend.PRIMITIVES.remove(p)

    for rule in (lambda ct, ans, x: np.float64(2.0), lambda ct, ans, x: tnp.sum(ct) * 2.0 / 3.0):
        g = run(rule)
        assert g.shape == (3,) and g.dtype == np.float32
        assert_close(g, [2.0, 2.0, 2.0])
    with pytest.raises(ValueError, match=r"'tests.zero_d_rules' returned a cotangent of shape \(2,\)"):
        run(lambda ct, ans, x: ct[:2] * 2.0)
    assert trace_stack() == ()


def test_a_complex_cotangent_for_a_real_argument_is_refused():
    @tg.custom_vjp
    def f(x):
        return x * 2.0

    f.defvjp(lambda x: (f(x), None), lambda res, g: (g * (1.0 + 1.0j),))
    with pytest.raises(TypeError, match=r"complex cotangent \(complex64\) for a real value \(float32\)"):
        tg.grad(lambda x: tnp.sum(f(x)))(np.ones(3, np.float32))
    assert trace_stack() == ()


def test_scalar_cotangents_stay_on_the_device():
    from _device import DeviceArray, xp

    f = _twice_with_constant_bwd()
    x = xp.asarray(np.array([0.5, 1.0], np.float32))
    g = tg.grad(lambda x: tnp.sum(f(x)))(x)
    assert type(g) is DeviceArray and g.dtype == np.float32
    assert_close(g.get(), [2.0, 2.0])
    assert type(tg.jit(tg.grad(lambda x: tnp.sum(f(x))))(x)) is DeviceArray


def test_wrong_shaped_or_typed_rule_results_are_refused_by_name():
    @tg.custom_vjp
    def f(x):
        return x * 2.0

    f.defvjp(lambda x: (f(x), None), lambda res, g: (np.ones(2),))  # an array, of the wrong shape
    with pytest.raises(ValueError, match=r"f: bwd's entry 0 has shape \(2,\) \(dtype float64\) where the "
                                         r"argument has shape \(3,\) and dtype float32"):
        tg.grad(lambda x: tnp.sum(f(x)))(np.ones(3, np.float32))
    f.defvjp(lambda x: (f(x), None), lambda res, g: ("2.0",))
    with pytest.raises(TypeError, match=r"f: bwd's entry 0 is a str; return an array of shape \(3,\)"):
        tg.grad(lambda x: tnp.sum(f(x)))(np.ones(3))
    f.defvjp(lambda x: (f(x), None), lambda res, g: (2.0 + 1.0j,))
    with pytest.raises(TypeError, match="complex scalar"):
        tg.grad(lambda x: tnp.sum(f(x)))(np.ones(3))
    assert trace_stack() == ()


def test_a_zero_d_cotangent_is_broadcast_alike_in_every_mode():
    """A NumPy scalar (an eager tnp.sum(g)) and a 0-d tracer (the same rule under jit) are broadcast
    like a Python number, so eager, jit and vmap give the same numbers, in the argument's dtype."""
    @tg.custom_vjp
    def total(x):
        return tnp.sum(x)

    total.defvjp(lambda x: (total(x), None), lambda res, g: (tnp.sum(g) * 3.0,))
    x = np.arange(3, dtype=np.float32)
    for route in (tg.grad, lambda h: tg.jit(tg.grad(h))):
        g = route(total)(x)
        assert g.dtype == np.float32
        np.testing.assert_array_equal(g, [3.0, 3.0, 3.0])
    g = tg.vmap(tg.grad(total))(np.ones((2, 3), np.float32))
    np.testing.assert_array_equal(g, np.full((2, 3), 3.0, np.float32))
    total.defvjp(lambda x: (total(x), None), lambda res, g: (np.float64(2.0) * g,))
    assert tg.grad(total)(x).dtype == np.float32
    # differentiable through the broadcast: grad(total)(x) = [s, s] with s = sum(x**2), whose sum has
    # the gradient 2 * 2x
    total.defvjp(lambda x: (total(x), x), lambda x, g: (tnp.sum(g * x * x),))
    h = tg.grad(lambda x: tnp.sum(tg.grad(total)(x)))(np.array([1.0, 2.0]))
    np.testing.assert_allclose(h, [4.0, 8.0])
    assert trace_stack() == ()
