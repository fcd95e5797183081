"""Primitives with several results (``multiple_results``), end to end: a primitive declared through the
helpers under every transform, with one of its results unused, with an integer result, and the
converted linalg decompositions as one equation each in a jit program."""
import numpy as np
import pytest

import tapegrad as tg
import tapegrad.numpy as tnp
from _tol import assert_close
from tapegrad._batching import defbatch_elementwise
from tapegrad._core import bind
from tapegrad._rules import PRIMITIVES, defjvp, defvjp, primitive
from tapegrad.testing import check_grads

# (sin x, cos x) in one primitive; its vjp records the cotangents it is given
seen_cts = []


def _sincos_vjp(cts, ans, x):
    seen_cts.append(cts)
    s, c = ans
    ct_s, ct_c = cts
    return ct_s * c - ct_c * s


sincos_p = primitive("sincos", lambda x: (np.sin(x), np.cos(x)), multiple_results=True)
defvjp(sincos_p, _sincos_vjp)
defjvp(sincos_p, lambda t, ans, x: [t * ans[1], -t * ans[0]])
defbatch_elementwise(sincos_p)

# frexp: x = mantissa * 2 ** exponent, the exponent an integer result (no derivative); no batch rule,
# so vmap runs its loop fallback
frexp_p = primitive("frexp", np.frexp, multiple_results=True)
defvjp(frexp_p, lambda cts, ans, x: seen_cts.append(cts) or cts[0] * tnp.exp2(-ans[1]))
defjvp(frexp_p, lambda t, ans, x: [t * tnp.exp2(-ans[1]), None])

for _prim in (sincos_p, frexp_p):  # test-only primitives: kept out of the registry the completeness tests walk
    PRIMITIVES.remove(_prim)


def sincos(x):
    return bind(sincos_p, x)


def frexp(x):
    return bind(frexp_p, x)


def both(x):
    s, c = sincos(x)
    return tnp.sum(s * s + c)  # d/dx = 2 sin cos - sin


X = np.array([0.3, -1.2, 2.0])


def test_bind_returns_a_list_of_the_results():
    out = sincos(X)
    assert type(out) is list and len(out) == 2
    assert_close(out[0], np.sin(X))
    assert_close(out[1], np.cos(X))


def test_grad_sees_every_cotangent():
    assert_close(tg.grad(both)(X), 2 * np.sin(X) * np.cos(X) - np.sin(X))


def test_an_unused_result_gets_a_zero_cotangent():
    seen_cts.clear()
    g = tg.grad(lambda x: tnp.sum(sincos(x)[0] ** 2))(X)
    assert_close(g, 2 * np.sin(X) * np.cos(X))
    ((ct_s, ct_c),) = seen_cts
    assert isinstance(ct_c, np.ndarray) and ct_c.shape == X.shape and not ct_c.any()


def test_an_integer_result_gets_no_cotangent_and_no_tangent():
    seen_cts.clear()
    x = np.array([0.3, 5.0, -12.0])
    m, e = np.frexp(x)
    g = tg.grad(lambda x: tnp.sum(frexp(x)[0] * frexp(x)[1]))(x)  # the exponent is a constant factor
    assert_close(g, e * 2.0 ** -e)
    # the second frexp contributes only its exponent: its rule never runs
    ((ct_m, ct_e),) = seen_cts
    assert ct_e is None
    out, tangent = tg.jvp(lambda x: frexp(x)[0], (x,), (np.ones(3),))
    assert_close(out, m)
    assert_close(tangent, 2.0 ** -e)


def test_jvp_gives_each_result_its_tangent():
    t = np.array([1.0, 2.0, -0.5])
    (s, c), (ts, tc) = tg.jvp(lambda x: tuple(sincos(x)), (X,), (t,))
    assert_close(s, np.sin(X))
    assert_close(ts, t * np.cos(X))
    assert_close(tc, -t * np.sin(X))


def test_linearize_sweeps_a_multi_result_node_and_a_joint_call():
    @tg.custom_vjp
    def scaled(x):
        return x * 3.0

    scaled.defvjp(lambda x: (x * 3.0, None), lambda res, g: (g * 3.0,))
    t = np.array([1.0, 2.0, -0.5])
    out, jvp_fn = tg.linearize(lambda x: tuple(sincos(scaled(x))) + (frexp(x)[0],), X)
    ts, tc, tm = jvp_fn(t)
    assert_close(out[0], np.sin(3 * X))
    assert_close(ts, 3 * t * np.cos(3 * X))
    assert_close(tc, -3 * t * np.sin(3 * X))
    assert_close(tm, t * 2.0 ** -np.frexp(X)[1])


def test_vmap_with_a_batch_rule_and_with_the_loop_fallback():
    xs = np.arange(12.0).reshape(3, 4) / 5
    s, c = tg.vmap(lambda x: tuple(sincos(x)), in_axes=1)(xs)
    assert_close(s, np.sin(xs.T))
    assert_close(c, np.cos(xs.T))
    m, e = tg.vmap(lambda x: tuple(frexp(x)))(xs + 0.5)
    m_ref, e_ref = np.frexp(xs + 0.5)
    assert_close(m, m_ref)
    np.testing.assert_array_equal(e, e_ref)
    assert_close(tg.vmap(tg.grad(both))(xs), 2 * np.sin(xs) * np.cos(xs) - np.sin(xs))


def test_grad_of_grad_and_check_grads():
    # d2/dx2 (sin^2 + cos) = 2 cos 2x - cos x
    assert_close(tg.grad(lambda x: tnp.sum(tg.grad(both)(x)))(X), 2 * np.cos(2 * X) - np.cos(X))
    check_grads(lambda x: tuple(sincos(x)), (X,), order=2, name="sincos")
    check_grads(lambda x: sincos(x)[1], (X,), order=2, name="sincos cos only")


def test_jit_stages_one_equation_with_two_outputs():
    program = tg.make_program(both)(X)
    assert "    b:f64[3] c:f64[3] = sincos a\n" in str(program)
    assert [len(eqn.outs) for eqn in program.eqns] == [2, 1, 1, 1]
    assert_close(tg.jit(both)(X), both(X))
    assert_close(tg.jit(tg.grad(both))(X), tg.grad(both)(X))
    assert_close(tg.jit(tg.grad(lambda x: tnp.sum(tg.grad(both)(x))))(X), 2 * np.cos(2 * X) - np.cos(X))


def test_jit_passes_keep_an_equation_any_of_whose_outputs_is_used():
    from tapegrad._jit import passes
    from tapegrad._jit.codegen import compile_program, evaluate

    def twice(x):  # the same sincos twice (CSE merges them), only its cos used (DCE keeps it)
        return sincos(x)[1] + sincos(x)[1] * 2.0

    program = passes.optimize(tg.make_program(twice)(X))
    assert [eqn.prim.name for eqn in program.eqns].count("sincos") == 1
    program.typecheck()
    run = compile_program(program)
    assert "v0_0, v0_1 = f0(a0)\n    del v0_0\n" in run.source  # the unread sine is freed at once
    assert_close(run(X)[0], 3 * np.cos(X))
    assert_close(evaluate(program, [X])[0], 3 * np.cos(X))
    assert_close(tg.jit(twice)(X), 3 * np.cos(X))


def test_constant_folding_makes_a_constant_of_each_result():
    from tapegrad._jit import passes
    c = np.linspace(0.0, 1.0, 4)
    program = passes.optimize(tg.make_program(lambda x: x * sincos(c)[0] + sincos(c)[1])(np.ones(4)))
    assert "sincos" not in [eqn.prim.name for eqn in program.eqns]
    assert_close(tg.jit(lambda x: x * sincos(c)[0] + sincos(c)[1])(np.ones(4)), np.sin(c) + np.cos(c))


# ---- the linalg decompositions ------------------------------------------------------------------------
def _sym(n, seed):
    a = np.random.default_rng(seed).standard_normal((n, n))
    return a + a.T + np.diag(np.arange(n) * 3.0)  # well separated eigenvalues


def test_eigh_is_one_equation_with_two_outputs():
    a = _sym(3, 0)
    text = str(tg.make_program(lambda a: tnp.linalg.eigh(a))(a))
    (line,) = [line for line in text.splitlines() if "eigh" in line]
    lhs = line.split("=")[0].split()
    assert [d.split(":")[1] for d in lhs] == ["f64[3]", "f64[3,3]"], text
    w, v = tg.jit(lambda a: tuple(tnp.linalg.eigh(a)))(a)
    w_ref, v_ref = np.linalg.eigh(a)
    assert_close(w, w_ref)
    assert_close(np.abs(v), np.abs(v_ref))


@pytest.mark.parametrize("name,fn", [
    ("eigh eigenvectors only", lambda a: tnp.linalg.eigh(a).eigenvectors ** 2),
    ("eigh eigenvalues only", lambda a: tnp.linalg.eigh(a).eigenvalues),
    ("slogdet logabsdet only", lambda a: tnp.linalg.slogdet(a).logabsdet),
    ("qr Q only", lambda a: tnp.linalg.qr(a).Q ** 2),
    ("svd U only", lambda a: tnp.linalg.svd(a, full_matrices=False).U ** 2),
    ("svd Vh and S", lambda a: tnp.linalg.svd(a, full_matrices=False).Vh ** 2 * tnp.linalg.svd(a)[1][:, None]),
])
def test_decompositions_with_one_result_used_check_grads(name, fn):
    check_grads(fn, (_sym(3, 1),), order=2, modes=("fwd", "rev"), name=name)


def test_max_pool_values_and_argmax_are_one_equation():
    from tapegrad.nn import functional as F
    x = np.random.default_rng(2).standard_normal((1, 2, 4, 4))
    text = str(tg.make_program(tg.grad(lambda x: tnp.sum(F.max_pool2d(x, 2) ** 2)))(x))
    (line,) = [line for line in text.splitlines() if "max_pool" in line]
    lhs = line.split("=")[0].split()
    assert [d.split(":")[1] for d in lhs] == ["f64[1,2,2,2]", "i8[1,2,2,2]"], text
    assert "window_argmax" not in text and "select_scatter" in text
