"""jit: staging, the cache, Parameters as implicit inputs and outputs, and the composition routes."""
import numpy as np
import pytest

import tapegrad as tg
import tapegrad.numpy as tnp
from _tol import assert_close
from tapegrad._core import trace_stack

RNG = np.random.default_rng(0)
X, Y = RNG.normal(size=3), RNG.normal(size=3)


def f(x, y):
    return tnp.sum(tnp.sin(x) * y + 2.0)


def test_make_program_prints_the_equations_and_typechecks():
    program = tg.make_program(f)(X, Y)
    text = str(program)
    for word in ("sin a", "multiply", "add", "sum[axis=None keepdims=False]", "a:f64[3]", "in (f)"):
        assert word in text
    program.typecheck()


def test_jit_agrees_with_eager_and_caches_by_signature():
    jf = tg.jit(f)
    assert_close(jf(X, Y), f(X, Y), rtol=1e-15)
    jf(X + 1.0, Y)  # same shapes: no new program
    assert jf._cache_size() == 1
    jf(X[:2], Y[:2])
    assert jf._cache_size() == 2
    jf(X.astype(np.float32), Y.astype(np.float32))
    assert jf._cache_size() == 3


@pytest.mark.parametrize("route", ["grad(jit)", "jit(grad)", "vmap(jit)", "jit(vmap(grad))", "jit(jit)",
                                   "jvp(jit)", "grad(grad(jit))"])
def test_composition_routes_agree_with_eager(route):
    xs, ys = np.stack([X, 2 * X]), np.stack([Y, Y])
    cases = {
        "grad(jit)": (lambda: tg.grad(tg.jit(f))(X, Y), lambda: tg.grad(f)(X, Y)),
        "jit(grad)": (lambda: tg.jit(tg.grad(f))(X, Y), lambda: tg.grad(f)(X, Y)),
        "vmap(jit)": (lambda: tg.vmap(tg.jit(f))(xs, ys), lambda: tg.vmap(f)(xs, ys)),
        "jit(vmap(grad))": (lambda: tg.jit(tg.vmap(tg.grad(f)))(xs, ys), lambda: tg.vmap(tg.grad(f))(xs, ys)),
        "jit(jit)": (lambda: tg.jit(tg.jit(f))(X, Y), lambda: f(X, Y)),
        "jvp(jit)": (lambda: tg.jvp(tg.jit(f), (X, Y), (Y, X))[1], lambda: tg.jvp(f, (X, Y), (Y, X))[1]),
        "grad(grad(jit))": (lambda: tg.grad(tg.grad(tg.jit(lambda x: tnp.sin(x) ** 3)))(0.3),
                            lambda: tg.grad(tg.grad(lambda x: tnp.sin(x) ** 3))(0.3)),
    }
    got, expected = cases[route]
    assert_close(got(), expected(), rtol=1e-13)
    assert trace_stack() == ()


def test_parameters_are_read_fresh_and_written_back():
    p = tg.Parameter(np.ones(3))
    g = tg.jit(lambda x: tnp.sum(p * x))
    assert_close(g(X), np.sum(X))
    p.assign(2.0 * np.ones(3))
    assert_close(g(X), 2.0 * np.sum(X))  # not baked in as a constant
    assert g._cache_size() == 1

    def step(x):
        grads = tg.grad(lambda x: tnp.sum((p * x) ** 2), grad_position=None, weights=p)(x)
        p.assign(p - 0.1 * grads)
        return tnp.sum(p)
    before = np.array(p.value)
    out = tg.jit(step)(X)
    expected = before - 0.1 * 2.0 * before * X ** 2
    assert_close(p.value, expected, rtol=1e-14)
    assert_close(out, expected.sum(), rtol=1e-14)


def test_errors():
    with pytest.raises(tg.errors.ConcretizationError, match=r"tg\.cond.*tnp\.where"):
        tg.jit(lambda x: x if x[0] > 0 else -x)(X)
    with pytest.raises(ValueError, match="not hashable"):
        tg.jit(lambda x, n: x * n[0], static_argnums=1)(X, [1])
    assert_close(tg.jit(lambda x, n: x * n[0], static_argnums=1)(X, (3,)), 3 * X)
    assert trace_stack() == ()


# ---- the cache ----------------------------------------------------------------------------------------
def test_cache_key_is_the_pytree_structure():
    jt = tg.jit(lambda d: d["a"] * d["b"])
    assert_close(jt({"a": X, "b": Y}), X * Y)
    jt({"a": Y, "b": X})
    assert jt._cache_size() == 1
    assert_close(jt({"a": X, "b": Y, "c": Y}), X * Y)  # another key: another structure
    assert jt._cache_size() == 2
    js = tg.jit(lambda xs: xs[0] - xs[1])
    assert_close(js([X, Y]), X - Y)
    assert_close(js((X, Y)), X - Y)  # a tuple is not a list
    assert js._cache_size() == 2


def test_static_arguments_are_keyed_by_value():
    calls = []

    def power(x, n):
        calls.append(n)  # runs only while staging
        return x ** n
    jp = tg.jit(power, static_argnums=1)
    assert_close(jp(X, 2), X ** 2)
    assert_close(jp(Y, 2), Y ** 2)
    assert_close(jp(X, 3), X ** 3)
    assert jp._cache_size() == 2 and calls == [2, 3]
    assert "power a 3" in str(tg.make_program(power, static_argnums=1)(X, 3))  # written into the program


def test_static_argnames():
    def wave(x, kind="sin"):
        return tnp.sin(x) if kind == "sin" else tnp.cos(x)
    jw = tg.jit(wave, static_argnames="kind")
    assert_close(jw(X, kind="cos"), np.cos(X))
    assert_close(jw(X, kind="sin"), np.sin(X))
    assert_close(jw(X), np.sin(X))
    jw(X, kind="cos")
    assert jw._cache_size() == 3  # kind="cos", kind="sin" and the default
    both = tg.jit(lambda x, n, kind="sin": wave(x, kind) * n, static_argnums=1, static_argnames=("kind",))
    assert_close(both(X, 2, kind="cos"), 2 * np.cos(X))


def test_static_argname_passed_positionally():
    jw = tg.jit(lambda x, kind: tnp.sin(x) if kind == "sin" else tnp.cos(x), static_argnames="kind")
    assert_close(jw(X, "cos"), np.cos(X))


def test_python_scalars_are_traced_with_weak_types():
    x32 = X.astype(np.float32)
    scale = tg.jit(lambda x, s: x * s)
    out = scale(x32, 2.0)
    assert out.dtype == np.float32  # weak: the array's dtype wins, as in NumPy 2
    assert_close(scale(x32, 3.0), 3.0 * x32)  # traced, not baked in: same program
    assert scale._cache_size() == 1
    assert scale(x32, 2).dtype == np.float32 and scale._cache_size() == 2  # an int is another key
    strong = scale(x32, np.array(2.0))  # a 0-d float64 array is not weak
    assert strong.dtype == (x32 * np.array(2.0)).dtype == np.float64 and scale._cache_size() == 3
    assert "multiply a b" in str(tg.make_program(lambda x, s: x * s)(x32, 2.0))


def test_an_integer_literal_of_a_mixed_type_ufunc_keeps_its_own_type():
    """``ldexp``'s loops take a float and an int (``fi->f``): the literal exponent must reach NumPy as
    the Python int it is, not cast to the float operand's dtype (which ``ldexp`` refuses)."""
    from tapegrad._core import Primitive
    from tapegrad.extend import def_nondiff
    ldexp_p = Primitive("test_jit.ldexp")  # unregistered: the registry's tests ask every entry for all rules
    ldexp_p.def_impl(np.ldexp)  # the ufunc itself as the impl, as a user's primitive would have it
    ldexp_p.def_abstract_eval(lambda x, e: x)
    def_nondiff(ldexp_p)
    x32 = X.astype(np.float32)
    out = tg.jit(lambda x: tg.extend.bind(ldexp_p, x, 3))(x32)
    assert out.dtype == np.float32
    np.testing.assert_array_equal(out, np.ldexp(x32, 3))  # exact: a power of two
    np.testing.assert_array_equal(tg.jit(lambda x: tnp.ldexp(x, 3))(x32), np.ldexp(x32, 3))


def test_unhashable_static_arguments_are_a_value_error():
    with pytest.raises(ValueError, match="at position 1.*not hashable"):
        tg.jit(lambda x, n: x * n[0], static_argnums=1)(X, [1])
    with pytest.raises(ValueError, match="'options'.*not hashable"):
        tg.jit(lambda x, options: x, static_argnames="options")(X, options={"a": 1})
    assert trace_stack() == ()


def test_arguments_that_cannot_be_traced_name_static_argnums():
    with pytest.raises(TypeError, match="static_argnums"):
        tg.jit(lambda x, kind: x)(X, "sin")


# ---- jit as a decorator, on methods --------------------------------------------------------------------
def test_decorator_with_and_without_arguments():
    @tg.jit
    def plain(x):
        return x * 2.0

    @tg.jit()
    def called(x):
        return x * 3.0

    @tg.jit(static_argnums=(1,))
    def power(x, n):
        return x ** n
    assert_close(plain(X), 2.0 * X)
    assert_close(called(X), 3.0 * X)
    assert_close(power(X, 3), X ** 3)
    assert plain.__name__ == "plain" and plain._cache_size() == 1


class Scaled:
    """A method under jit: the instance is a static argument (by identity); its Parameters are read
    fresh like any other."""

    def __init__(self, scale):
        self.w = tg.Parameter(np.ones(3))
        self.scale = scale

    @tg.jit
    def __call__(self, x):
        return tnp.sum(self.w * x) * self.scale


def test_jit_on_a_method():
    a, b = Scaled(2.0), Scaled(3.0)
    assert_close(a(X), 2.0 * X.sum())
    assert_close(b(X), 3.0 * X.sum())  # its own program, not a's
    a.w.assign(np.full(3, 5.0))
    assert_close(a(X), 10.0 * X.sum())
    a.scale = 7.0  # a plain attribute was read while staging: the program keeps 2.0 (documented)
    assert_close(a(X), 10.0 * X.sum())
    a(Y)
    assert Scaled.__call__._cache_size() == 2  # one per instance


# ---- Parameters -----------------------------------------------------------------------------------------
def test_a_parameter_passed_as_an_argument_is_its_value():
    p = tg.Parameter(X.copy())
    mul = tg.jit(lambda a, b: a * b)
    assert_close(mul(p, Y), X * Y)
    p.assign(2.0 * X)
    assert_close(mul(p, Y), 2.0 * X * Y)
    assert_close(mul(X, Y), X * Y)
    assert mul._cache_size() == 1  # the same signature as an array of its shape and dtype


def test_parameters_are_implicit_inputs_and_writes_are_outputs():
    p = tg.Parameter(np.ones(3), name="p")

    def update(x):
        p.assign(p * x)
        return tnp.sum(p)
    program = tg.make_program(update)(X)
    assert len(program.invars) == 2 and len(program.outputs) == 2  # x, then p; the sum, then p's new value
    assert "{ lambda  ; a:f64[3] b:f64[3]. let" in str(program)
    program.typecheck()
    step = tg.jit(update)
    for k in range(1, 4):
        assert_close(step(X), np.sum(X ** k))
        assert_close(p.value, X ** k)
        assert type(p.value) is np.ndarray
    assert step._cache_size() == 1 and trace_stack() == ()


def test_the_writes_of_a_call_are_all_or_nothing():
    """Under an outer transform a program's Parameter outputs may be traced values, which a Parameter
    cannot hold: the call raises before any Parameter is written, also those whose new value is
    concrete."""
    scale, first, second = tg.Parameter(np.ones(3)), tg.Parameter(np.zeros(3)), tg.Parameter(np.zeros(3))

    @tg.jit
    def step(x):
        first.assign(scale * 5.0)  # concrete under grad: scale is not differentiated
        second.assign(x * 2.0)  # traced under grad
        return tnp.sum(x * scale)
    assert_close(step(X), np.sum(X))
    assert_close(first.value, np.full(3, 5.0))
    assert_close(second.value, 2 * X)
    first.assign(np.zeros(3))
    second.assign(np.zeros(3))
    with pytest.raises(TypeError, match="a Parameter holds a concrete array, not a traced value"):
        tg.grad(step)(X)
    assert np.array_equal(first.value, np.zeros(3)) and np.array_equal(second.value, np.zeros(3))
    assert trace_stack() == ()


def test_concrete_side_effects_run_only_while_staging():
    """A Parameter assigned a value that does not depend on the arguments is assigned once, while the
    function is staged; the program does not repeat Python side effects (as in JAX)."""
    q = tg.Parameter(np.ones(3))

    def reset_and_double(x):
        q.assign(np.zeros(3))
        return 2.0 * x
    run = tg.jit(reset_and_double)
    run(X)
    np.testing.assert_array_equal(q.value, np.zeros(3))
    q.assign(np.ones(3))
    run(X)
    np.testing.assert_array_equal(q.value, np.ones(3))


# ---- errors ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("fn", [lambda x: x if x[0] > 0 else -x, lambda x: float(x[0]) * x,
                                lambda x: x * int(tnp.sum(x)), lambda x: -x if bool(tnp.all(x > 0)) else x],
                         ids=["if", "float", "int", "bool"])
def test_control_flow_on_a_traced_value(fn):
    jf = tg.jit(fn)
    with pytest.raises(tg.errors.ConcretizationError, match=r"tg\.cond.*tg\.while_loop.*tnp\.where") as info:
        jf(X)
    assert "f64[]" in str(info.value) or "bool[]" in str(info.value)  # names the value's type
    assert "static_argnums" not in str(info.value)  # x is an array: no static_argnums can take it
    assert trace_stack() == () and jf._cache_size() == 0
    # the ways out that the message names
    assert_close(tg.jit(lambda x: tg.cond(x[0] > 0, lambda v: v, lambda v: -v, x))(X), X)
    assert_close(tg.jit(lambda x: tnp.where(x[0] > 0, x, -x))(X), X)


def test_control_flow_on_a_python_scalar_argument_suggests_static_argnums():
    """A value computed from a scalar argument (Python or NumPy) could be static, and the message says so
    (with the traced ways out); the fix it names works."""
    jf = tg.jit(lambda x, n: x if n > 1 else -x)
    with pytest.raises(tg.errors.ConcretizationError, match=r"scalar argument.*static_argnums.*tg\.cond"):
        jf(X, 2)
    assert trace_stack() == ()
    assert_close(tg.jit(lambda x, n: x if n > 1 else -x, static_argnums=1)(X, 2), X)
    # a NumPy scalar is hashable too, so static_argnums takes it as well: the message names it
    with pytest.raises(tg.errors.ConcretizationError, match=r"NumPy scalar\): mark that argument static"):
        jf(X, np.float64(3.0))
    assert trace_stack() == ()
    assert_close(tg.jit(lambda x, n: x if n > 1 else -x, static_argnums=1)(X, np.float64(3.0)), X)
    assert_close(tg.jit(lambda x, n: x if n > 1 else -x, static_argnums=1)(X, np.float64(0.5)), -X)
    # mixed with an array, it is an array's value again: no static_argnums
    with pytest.raises(tg.errors.ConcretizationError) as info:
        tg.jit(lambda x, n: x if n * x[0] > 1 else -x)(X, 2)
    assert "static_argnums" not in str(info.value) and "tg.cond" in str(info.value)


def test_data_dependent_shapes_are_refused():
    with pytest.raises(tg.errors.ConcretizationError, match=r"tnp\.where"):
        tg.jit(lambda x: x[x > 0])(X)
    assert trace_stack() == ()
    # the same-shape forms work
    assert_close(tg.jit(lambda x: tnp.where(x > 0, x, 0.0))(X), np.where(X > 0, X, 0.0))
    assert_close(tg.jit(lambda x: x.at[x < 0].set(0.0))(X), np.maximum(X, 0.0))


# ---- composition: every route agrees with eager ------------------------------------------------------------
def h(x):
    return tnp.sum(tnp.sin(x) ** 2 * tnp.exp(0.1 * x))


def cube_sin(x):
    return tnp.sin(x) ** 3


@tg.custom_vjp
def clip_gradient(x):
    return x


clip_gradient.defvjp(lambda x: (x, None), lambda _, ct: (tnp.clip(ct, -0.1, 0.1),))


@tg.custom_jvp
def softplus(x):
    return tnp.log1p(tnp.exp(x))


softplus.defjvp(lambda primals, tangents: (softplus(primals[0]), tangents[0] / (1.0 + tnp.exp(-primals[0]))))


def clipped_loss(x):
    return tnp.sum(clip_gradient(x) * 5.0)


def checkpointed(x):
    return tnp.sum(tg.checkpoint(lambda z: tnp.sin(tnp.sin(z)) * z)(x))


W = tg.Parameter(RNG.normal(size=3), name="w")


def weighted(x):
    return tnp.sum(W * x) ** 2


NET = tg.nn.Sequential(tg.nn.Dense(3, 4, activation="tanh", seed=0, dtype=np.float64),
                       tg.nn.Dense(4, 2, seed=1, dtype=np.float64))
BATCH = RNG.normal(size=(5, 3))


def net_loss(x):
    return tnp.mean(NET(x) ** 2)


XS = np.stack([X, 2.0 * X, Y])
ROUTES = {
    "hessian(jit)": (lambda: tg.hessian(tg.jit(h))(X), lambda: tg.hessian(h)(X)),
    "jit(hessian)": (lambda: tg.jit(tg.hessian(h))(X), lambda: tg.hessian(h)(X)),
    "jacrev(jit)": (lambda: tg.jacrev(tg.jit(tnp.sin))(X), lambda: tg.jacrev(tnp.sin)(X)),
    "jit(jacfwd)": (lambda: tg.jit(tg.jacfwd(tnp.sin))(X), lambda: tg.jacfwd(tnp.sin)(X)),
    "grad(grad(grad(jit)))": (lambda: tg.grad(tg.grad(tg.grad(tg.jit(cube_sin))))(0.3),
                              lambda: tg.grad(tg.grad(tg.grad(cube_sin)))(0.3)),
    "jit(grad(grad(grad)))": (lambda: tg.jit(tg.grad(tg.grad(tg.grad(cube_sin))))(0.3),
                              lambda: tg.grad(tg.grad(tg.grad(cube_sin)))(0.3)),
    "grad(jit(grad(jit)))": (lambda: tg.grad(tg.jit(tg.grad(tg.jit(cube_sin))))(0.3),
                             lambda: tg.grad(tg.grad(cube_sin))(0.3)),
    "jit(grad(jit))": (lambda: tg.jit(tg.grad(tg.jit(cube_sin)))(0.3), lambda: tg.grad(cube_sin)(0.3)),
    "jit(vmap(jit))": (lambda: tg.jit(tg.vmap(tg.jit(h)))(XS), lambda: np.array([h(x) for x in XS])),
    "jvp(jit(grad))": (lambda: tg.jvp(tg.jit(tg.grad(h)), (X,), (Y,))[1], lambda: tg.jvp(tg.grad(h), (X,), (Y,))[1]),
    "vmap(jit) in_axes=(0, None)": (lambda: tg.vmap(tg.jit(f), in_axes=(0, None))(XS, Y),
                                    lambda: np.array([f(x, Y) for x in XS])),
    "vmap(jit(grad))": (lambda: tg.vmap(tg.jit(tg.grad(h)))(XS), lambda: np.array([tg.grad(h)(x) for x in XS])),
    "jit(vmap(grad weights))": (
        lambda: tg.jit(tg.vmap(tg.grad(weighted, grad_position=None, weights=W)))(XS),
        lambda: np.array([tg.grad(weighted, grad_position=None, weights=W)(x) for x in XS])),
    "grad(jit) weights": (lambda: tg.grad(tg.jit(weighted), grad_position=None, weights=W)(X),
                          lambda: tg.grad(weighted, grad_position=None, weights=W)(X)),
    "jit(grad(custom_vjp))": (lambda: tg.jit(tg.grad(clipped_loss))(X), lambda: tg.grad(clipped_loss)(X)),
    "jit(jvp(custom_jvp))": (lambda: tg.jit(lambda x, t: tg.jvp(softplus, (x,), (t,))[1])(X, Y),
                             lambda: tg.jvp(softplus, (X,), (Y,))[1]),
    "jit(grad(checkpoint))": (lambda: tg.jit(tg.grad(checkpointed))(X), lambda: tg.grad(checkpointed)(X)),
    "grad(jit(checkpoint))": (lambda: tg.grad(tg.jit(checkpointed))(X), lambda: tg.grad(checkpointed)(X)),
    "grad(closure of jit over a scalar)": (lambda: tg.grad(lambda x: tg.jit(lambda y: x * y)(2.0))(3.0),
                                           lambda: 2.0),
    "grad(closure of jit over an array)": (
        lambda: tg.grad(lambda x: tnp.sum(tg.jit(lambda y: tnp.sin(x) * y)(Y)))(X), lambda: np.cos(X) * Y),
    "jit(value_and_grad has_aux)": (
        lambda: tg.jit(tg.value_and_grad(lambda x: (weighted(x), 2.0 * x), grad_position=None, weights=W,
                                         has_aux=True))(X),
        lambda: tg.value_and_grad(lambda x: (weighted(x), 2.0 * x), grad_position=None, weights=W, has_aux=True)(X)),
    "jit(linearize)": (lambda: tg.jit(lambda x, t: tg.linearize(h, x)[1](t))(X, Y),
                       lambda: tg.linearize(h, X)[1](Y)),
    "linearize(jit)": (lambda: tg.linearize(tg.jit(h), X)[1](Y), lambda: tg.linearize(h, X)[1](Y)),
    "module forward": (lambda: tg.jit(NET)(BATCH), lambda: NET(BATCH)),
    "jit(value_and_grad(module))": (
        lambda: tg.jit(tg.value_and_grad(net_loss, grad_position=None, weights=NET.trainable_params()))(BATCH),
        lambda: tg.value_and_grad(net_loss, grad_position=None, weights=NET.trainable_params())(BATCH)),
}


@pytest.mark.parametrize("route", list(ROUTES))
def test_more_composition_routes_agree_with_eager(route):
    got, expected = ROUTES[route]
    got, expected = got(), expected()
    assert trace_stack() == ()
    for a, b in zip(tg.tree.tree_leaves(got), tg.tree.tree_leaves(expected)):
        assert_close(a, b, rtol=1e-12, atol=1e-14)
    assert type(W.value) is np.ndarray and all(type(p.value) is np.ndarray for p in NET.trainable_params())


def test_outer_transforms_reuse_the_program():
    """Under grad, jvp and vmap the program is evaluated through bind: fn's Python runs once."""
    calls = []

    def counted(x):
        calls.append(1)
        return h(x)
    jh = tg.jit(counted)
    for x in (X, Y, 2.0 * X):
        assert_close(tg.grad(jh)(x), tg.grad(h)(x), rtol=1e-13)
        tg.jvp(jh, (x,), (Y,))
    assert_close(tg.vmap(jh)(XS), [h(x) for x in XS], rtol=1e-13)
    jh(X)
    assert len(calls) == 1 and jh._cache_size() == 1  # a batched f64[3] example has the signature f64[3]


def test_an_outer_transform_of_jit_uses_the_custom_rule():
    """A custom_vjp function of its arguments alone stays whole in the program (``custom_call``), so
    its rule applies inside jit and outside it alike, and under vmap of either."""
    assert_close(tg.jit(tg.grad(clipped_loss))(X), np.full(3, 0.1))  # the custom rule, not d(5x)/dx = 5
    assert_close(tg.grad(tg.jit(clipped_loss))(X), np.full(3, 0.1))
    assert "custom_call" in str(tg.make_program(clipped_loss)(X))
    assert_close(tg.vmap(tg.grad(tg.jit(clipped_loss)))(np.stack([X, Y])), np.full((2, 3), 0.1))
    assert_close(tg.jit(tg.vmap(tg.grad(clipped_loss)))(np.stack([X, Y])), np.full((2, 3), 0.1))


def test_a_custom_function_reading_a_parameter_is_inlined_and_its_rule_applies_inside_jit_only():
    """The documented limitation that remains: a custom function that reads a Parameter (or a value of
    an outer transform) is inlined, so a transform outside jit differentiates its forward computation."""
    scale = tg.Parameter(np.array(5.0), name="scale")

    @tg.custom_vjp
    def scaled(x):
        return x * scale
    scaled.defvjp(lambda x: (x * scale, None), lambda res, g: (tnp.clip(g, -0.1, 0.1),))

    def loss(x):
        return tnp.sum(scaled(x))
    assert "custom_call" not in str(tg.make_program(loss)(X))
    assert_close(tg.jit(tg.grad(loss))(X), np.full(3, 0.1))
    assert_close(tg.grad(tg.jit(loss))(X), np.full(3, 5.0))


def test_non_array_outputs_pass_through():
    """return_ids gives (name, gradient) pairs: the names are strings, outputs that are not arrays."""
    grads = tg.jit(tg.grad(weighted, grad_position=0, weights=W, return_ids=True))(X)
    expected = tg.grad(weighted, grad_position=0, weights=W, return_ids=True)(X)
    assert grads[1][0] == "w" and tg.get_grad(grads, W).shape == (3,)
    assert_close(tg.get_grad(grads, 0), tg.get_grad(expected, 0), rtol=1e-13)
    assert tg.jit(lambda x: (None, 3, x))(X)[:2] == (None, 3)


def test_grad_with_weights_of_a_jitted_function_reuses_the_program():
    calls = []

    def counted(x):
        calls.append(1)
        return weighted(x)
    jw = tg.jit(counted)
    for x in (X, Y, X):
        assert_close(tg.grad(jw, grad_position=None, weights=W)(x),
                     tg.grad(weighted, grad_position=None, weights=W)(x), rtol=1e-13)
    assert len(calls) == 1


def test_state_written_back_is_c_contiguous():
    """A jitted step writes its Parameters back in C order, whatever layout the program computed them
    in: a weight's gradient is a transposed view, and Adam's update of it would otherwise come back in
    Fortran order (which a checkpoint load does not keep, so a resumed run would round differently)."""
    net = tg.nn.Dense(6, 4, seed=0)
    opt = tg.optim.Adam(net.trainable_params(), lr=0.1)
    grad_fn = tg.grad(lambda x: (net(x) ** 2).sum(), grad_position=None, weights=net.trainable_params())
    step = tg.jit(lambda x: opt.step(grad_fn(x)))
    x = np.random.default_rng(0).standard_normal((5, 6)).astype(np.float32)
    for _ in range(3):
        step(x)
        for name, value in {**net.state_dict(), **opt.state_dict()}.items():
            assert value.flags.c_contiguous, name

    p = tg.Parameter(np.arange(9.0).reshape(3, 3))
    tg.jit(lambda: p.assign(p.value.T))()  # a transposed view of the input, written back
    assert p.value.flags.c_contiguous and np.array_equal(p.value, np.arange(9.0).reshape(3, 3).T)
