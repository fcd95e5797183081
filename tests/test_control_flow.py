"""``cond`` and ``switch``: against the equivalent Python ``if``, eagerly and under every transform,
with the branch chosen at run time under ``jit`` and per example under ``vmap``."""
from __future__ import annotations

import pathlib
import re

import numpy as np
import pytest

import tapegrad as tg
import tapegrad.numpy as tnp
from _tol import assert_close
from tapegrad.testing import check_grads

RNG = np.random.default_rng(0)
X = RNG.uniform(-1.0, 1.0, (3,))
W = RNG.uniform(-1.0, 1.0, (3, 3))


# pairs of branches of one pytree operand {"x": vector, "w": matrix}, returning a pytree
def _smooth_a(ops):
    return {"y": tnp.sin(ops["w"] @ ops["x"]), "s": tnp.sum(ops["x"] ** 2)}


def _smooth_b(ops):
    return {"y": tnp.exp(ops["x"]) * 0.5 - ops["w"][0], "s": tnp.prod(tnp.cos(ops["x"]))}


def _tuple_a(x, w):
    return x * w[1], (tnp.tanh(x) @ w,)


def _tuple_b(x, w):
    return w[0] / (2.0 + x), (x ** 3,)


PAIRS = [(_smooth_a, _smooth_b, lambda: ({"x": X, "w": W},)), (_tuple_a, _tuple_b, lambda: (X, W))]


def _python_if(pred, true_fun, false_fun, *operands):
    return true_fun(*operands) if pred else false_fun(*operands)


def _assert_trees_close(actual, desired):
    a_leaves, a_tree = tg.tree.tree_flatten(actual)
    d_leaves, d_tree = tg.tree.tree_flatten(desired)
    assert a_tree == d_tree
    for a, d in zip(a_leaves, d_leaves):
        assert np.asarray(a).dtype == np.asarray(d).dtype
        assert_close(np.asarray(a), np.asarray(d))


# ---- values and derivatives against Python's if --------------------------------------------------
@pytest.mark.parametrize("pred", [True, False])
@pytest.mark.parametrize("pair", range(len(PAIRS)))
def test_cond_values_match_python_if(pair, pred):
    true_fun, false_fun, operands = PAIRS[pair]
    _assert_trees_close(tg.cond(pred, true_fun, false_fun, *operands()),
                        _python_if(pred, true_fun, false_fun, *operands()))
    _assert_trees_close(tg.cond(np.array(pred), true_fun, false_fun, *operands()),
                        _python_if(pred, true_fun, false_fun, *operands()))


@pytest.mark.parametrize("pred", [True, False])
@pytest.mark.parametrize("pair", range(len(PAIRS)))
def test_cond_derivatives_to_order_two_in_both_modes(pair, pred):
    true_fun, false_fun, operands = PAIRS[pair]
    check_grads(lambda *ops: tg.cond(pred, true_fun, false_fun, *ops), operands(), order=2, modes=("fwd", "rev"))


@pytest.mark.parametrize("pred", [True, False])
def test_cond_gradient_equals_python_if_gradient(pred):
    def loss(fun, x, w):
        out = fun(x, w)
        return tnp.sum(out[0]) + tnp.sum(out[1][0] ** 2)
    got = tg.grad(lambda x, w: loss(lambda *o: tg.cond(pred, _tuple_a, _tuple_b, *o), x, w), (0, 1))(X, W)
    want = tg.grad(lambda x, w: loss(lambda *o: _python_if(pred, _tuple_a, _tuple_b, *o), x, w), (0, 1))(X, W)
    _assert_trees_close(got, want)


@pytest.mark.parametrize("dtype", [np.float32, np.complex128])
@pytest.mark.parametrize("pred", [True, False])
def test_cond_derivatives_in_float32_and_complex(pred, dtype):
    x = (X + (0.5j * X[::-1] if np.dtype(dtype).kind == "c" else 0.0)).astype(dtype)
    fn = lambda x: tg.cond(pred, lambda x: tnp.sin(x) * x, lambda x: tnp.exp(tnp.conj(x)), x)  # noqa: E731
    check_grads(fn, (x,), order=2)
    assert tg.vjp(fn, x)[1](np.ones_like(x))[0].dtype == dtype


def test_switch_derivatives_with_a_pred_computed_from_the_input():
    branches = [lambda x: tnp.sin(x) * x, lambda x: tnp.exp(-x), lambda x: x ** 3]
    fn = lambda x: tg.switch(tnp.sum(x > 0), branches, x)  # noqa: E731 — 0 to 3 positives: index clamped to 2
    for x in (-X - 2.0, np.array([0.5, -1.0, -2.0]), X + 2.0):
        check_grads(fn, (x,), order=2)
        _assert_trees_close(fn(x), branches[min(int(np.sum(x > 0)), 2)](x))


# ---- jit: one staging, the branch chosen at run time ----------------------------------------------
def test_jit_stages_each_branch_once_and_chooses_at_run_time():
    calls = {"true": 0, "false": 0}

    def true_fun(x):
        calls["true"] += 1
        return tnp.sin(x) * 2.0

    def false_fun(x):
        calls["false"] += 1
        return tnp.cos(x) - 1.0

    f = tg.jit(lambda p, x: tg.cond(p, true_fun, false_fun, x))
    for pred in (True, False, True, False):
        _assert_trees_close(f(np.array(pred), X), _python_if(pred, true_fun, false_fun, X))
    assert f._cache_size() == 1
    # two calls each for the Python references above, one staging each for the jitted function
    assert calls == {"true": 1 + 2, "false": 1 + 2}


def test_jit_program_holds_one_switch_equation_with_both_bodies():
    program = tg.make_program(lambda p, x: tg.cond(p, tnp.sin, lambda x: tnp.cos(x) * 3.0, x))(np.array(True), X)
    assert [eqn.prim.name for eqn in program.eqns] == ["switch"]
    text = str(program)
    assert "sin a" in text and "cos a" in text and "multiply" in text
    program.typecheck()


def test_jit_of_grad_and_grad_of_jit():
    def loss(p, x):
        return tnp.sum(tg.cond(p, lambda x: tnp.sin(x) * x, lambda x: tnp.exp(x), x))
    for pred in (True, False):
        want = np.cos(X) * X + np.sin(X) if pred else np.exp(X)
        assert_close(tg.jit(tg.grad(loss, 1))(np.array(pred), X), want)
        assert_close(tg.grad(tg.jit(loss), 1)(np.array(pred), X), want)
        assert_close(tg.grad(lambda x, p=pred: tnp.sum(tg.grad(loss, 1)(np.array(p), x)))(X),
                     (-np.sin(X) * X + 2 * np.cos(X)) if pred else np.exp(X))


def test_grad_of_grad_through_switch():
    def f(x):
        return tnp.sum(tg.switch(1, [tnp.sin, lambda x: x ** 3, tnp.cos], x))
    assert_close(tg.grad(lambda x: tnp.sum(tg.grad(f)(x)))(X), 6 * X)


# ---- vmap ----------------------------------------------------------------------------------------
def _branches3():
    return [lambda x, y: tnp.sin(x) + y, lambda x, y: x * y, lambda x, y: tnp.exp(x) - y]


@pytest.mark.parametrize("indices", [np.array([0, 1, 2, 1]), np.array([-3, 5, 1, 0])])
def test_vmap_with_a_batched_index_selects_each_examples_branch(indices):
    xs, y = RNG.standard_normal((4, 3)), RNG.standard_normal(3)
    got = tg.vmap(lambda i, x: tg.switch(i, _branches3(), x, y))(indices, xs)
    want = np.stack([_branches3()[min(max(i, 0), 2)](x, y) for i, x in zip(indices, xs)])
    assert_close(got, want)


def test_vmap_with_a_batched_pred_and_a_shared_one():
    preds, xs = np.array([True, False, False, True]), RNG.standard_normal((4, 3))
    fn = lambda p, x: tg.cond(p, lambda x: tnp.sin(x) * x, lambda x: x - 1.0, x)  # noqa: E731
    assert_close(tg.vmap(fn)(preds, xs), np.stack([fn(p, x) for p, x in zip(preds, xs)]))
    for pred in (True, False):
        assert_close(tg.vmap(fn, in_axes=(None, 0))(np.array(pred), xs), np.stack([fn(pred, x) for x in xs]))


def test_vmap_of_grad_and_jit_of_vmap():
    preds, xs = np.array([True, False, True]), RNG.standard_normal((3, 4))

    def loss(p, x):
        return tnp.sum(tg.cond(p, lambda x: tnp.sin(x), lambda x: x ** 2, x))
    per_example = tg.vmap(tg.grad(loss, 1))(preds, xs)
    assert_close(per_example, np.stack([np.cos(x) if p else 2 * x for p, x in zip(preds, xs)]))
    assert_close(tg.jit(tg.vmap(tg.grad(loss, 1)))(preds, xs), per_example)
    assert_close(tg.vmap(tg.grad(loss, 1), in_axes=(None, 0))(np.array(False), xs), 2 * xs)


def test_grad_of_vmap_with_a_batched_pred():
    preds, xs = np.array([True, False, True]), RNG.standard_normal((3, 4))

    def loss(x):
        return tnp.sum(tg.vmap(lambda p, x: tg.cond(p, tnp.sin, lambda x: x ** 2, x))(preds, x))
    assert_close(tg.grad(loss)(xs), np.where(preds[:, None], np.cos(xs), 2 * xs))


# ---- implicit inputs: Parameters and closures over outer tracers ------------------------------------
def test_parameters_read_inside_a_branch_get_gradients():
    w = tg.Parameter(np.array([1.5, -0.5, 2.0]), name="w")
    b = tg.Parameter(np.array(0.25), name="b")

    def loss(p, x):
        out = tg.cond(p, lambda x: tnp.sin(w.value * x), lambda x: x * b.value + w.value, x)
        return tnp.sum(out)
    for pred in (True, False):
        grads = tg.grad(loss, grad_position=None, weights=(w, b))(pred, X)
        want_w = np.cos(w.value * X) * X if pred else np.ones(3)
        want_b = 0.0 if pred else np.sum(X)
        assert_close(grads[0], want_w)
        assert_close(grads[1], np.asarray(want_b))
        jitted = tg.jit(tg.grad(loss, grad_position=None, weights=(w, b)))(np.array(pred), X)
        assert_close(jitted[0], want_w)
        assert_close(jitted[1], np.asarray(want_b))


def test_a_branch_closing_over_an_outer_grads_value():
    def outer(a):
        inner = tg.cond(True, lambda x: tnp.sin(a * x), lambda x: x, X)  # closes over the traced a
        return tnp.sum(inner)
    a = np.array(0.7)
    assert_close(tg.grad(outer)(a), np.asarray(np.sum(np.cos(a * X) * X)))
    assert_close(tg.grad(tg.grad(outer))(a), np.asarray(np.sum(-np.sin(a * X) * X * X)))
    assert_close(tg.jit(tg.grad(outer))(a), np.asarray(np.sum(np.cos(a * X) * X)))


def test_branches_closing_over_a_jit_argument_and_a_batched_value():
    y = np.array([1.0, 2.0, 3.0])

    def f(p, x, y):
        return tg.cond(p, lambda x: x + y * 2.0, lambda x: x * y, x)
    for pred in (True, False):
        want = X + 2.0 * y if pred else X * y
        assert_close(tg.jit(f)(np.array(pred), X, y), want)
        slope = tg.grad(lambda y, p=pred: tnp.sum(tg.jit(f)(np.array(p), X, y)))(y)
        assert_close(slope, 2.0 * np.ones(3) if pred else X)
    ys, preds = np.stack([y, -y]), np.array([True, False])
    want = np.stack([X + 2.0 * y, -X * y])
    assert_close(tg.vmap(f, in_axes=(0, None, 0))(preds, X, ys), want)
    assert_close(tg.vmap(f, in_axes=(None, None, 0))(np.array(False), X, ys), X * ys)


def test_jvp_and_integer_results():
    def f(x):
        return tg.cond(tnp.sum(x) > 0, lambda x: (x * 2.0, tnp.argmax(x)), lambda x: (tnp.sin(x), tnp.argmin(x)), x)
    v = np.ones(3)
    (out, idx), (tangent, idx_tangent) = tg.jvp(f, (X,), (v,))
    big = X + 3.0
    assert_close(tg.jvp(f, (big,), (v,))[1][0], 2.0 * v)
    assert_close(tangent, np.cos(X) if np.sum(X) <= 0 else 2.0 * v)
    assert_close(tg.grad(lambda x: tnp.sum(f(x)[0]))(big), 2.0 * np.ones(3))
    assert int(f(big)[1]) == int(np.argmax(big))


def test_nested_conds_under_vmap_of_grad_jit_and_hessian():
    def h(p, q, x):
        return tnp.sum(tg.cond(p, lambda x: tg.cond(q, tnp.sin, tnp.cos, x), lambda x: x ** 2, x))
    ps, qs, xs = np.array([True, True, False]), np.array([True, False, True]), np.stack([X, X + 1.0, X - 1.0])
    want = np.stack([np.cos(X), -np.sin(X + 1.0), 2.0 * (X - 1.0)])
    assert_close(tg.vmap(tg.grad(h, 2))(ps, qs, xs), want)
    assert_close(tg.jit(tg.vmap(tg.grad(h, 2)))(ps, qs, xs), want)
    assert_close(tg.hessian(lambda x: h(np.array(True), np.array(True), x))(X), np.diag(-np.sin(X)))


def test_no_operands_scalar_operands_and_integer_operands():
    assert_close(tg.cond(False, lambda: 1.0, lambda: 2.0), np.asarray(2.0))
    assert_close(tg.vmap(lambda p: tg.cond(p, lambda: 1.0, lambda: 2.0))(np.array([True, False])), np.array([1.0, 2.0]))
    # a Python scalar operand stays weakly typed: float32 operands keep float32 results
    f = tg.jit(lambda p, a, x: tg.cond(p, lambda a, x: a * x, lambda a, x: x - a, a, x))
    x32 = X.astype(np.float32)
    assert f(np.array(True), 2.0, x32).dtype == np.float32
    assert_close(f(np.array(False), 2.0, X), X - 2.0)
    # a Python-scalar operand returned as it came is NumPy's default dtype, as a computed one is
    for pred in (True, False):
        out = tg.cond(pred, lambda x: x, lambda x: x * 2.0, 1.5)
        assert out.dtype == np.float64 and out == (1.5 if pred else 3.0)
        assert tg.switch(int(pred), [lambda n: n, lambda n: n + 1], 4).dtype == np.dtype(int)
    assert_close(tg.grad(lambda y: tg.cond(True, lambda x: x, lambda x: x * 2.0, y))(3.0), np.asarray(1.0))
    # an integer operand gets no gradient and does not stop the others'
    g = tg.grad(lambda x, i: tnp.sum(tg.cond(True, lambda x, i: x[i] * 2.0, lambda x, i: x[i], x, i)))
    assert_close(g(X, np.array([0, 2])), np.array([2.0, 0.0, 2.0]))


# ---- index handling ----------------------------------------------------------------------------
@pytest.mark.parametrize("index,chosen", [(-5, 0), (-1, 0), (0, 0), (1, 1), (2, 2), (3, 2), (100, 2)])
def test_switch_clamps_the_index_eagerly_and_under_jit(index, chosen):
    branches = [lambda x: x + 1.0, lambda x: x * 2.0, lambda x: -x]
    assert_close(tg.switch(index, branches, X), branches[chosen](X))
    assert_close(tg.jit(lambda i, x: tg.switch(i, branches, x))(np.array(index), X), branches[chosen](X))


def test_cond_with_an_integer_pred_is_true_when_nonzero():
    for pred, want in ((-1, True), (0, False), (7, True)):
        got = tg.cond(pred, lambda x: x + 1.0, lambda x: x - 1.0, X)
        assert_close(got, X + 1.0 if want else X - 1.0)
        got = tg.jit(lambda p, x: tg.cond(p, lambda x: x + 1.0, lambda x: x - 1.0, x))(np.array(pred), X)
        assert_close(got, X + 1.0 if want else X - 1.0)


def test_the_result_is_the_callers_own_array():
    out = tg.cond(True, lambda x: x, lambda x: x * 2.0, X)
    assert out is not X and not np.shares_memory(out, X)


# ---- errors ------------------------------------------------------------------------------------
@pytest.mark.parametrize("pred", [1.0, np.array([True, False]), np.array(0.5), "yes"])
def test_a_pred_that_is_not_a_scalar_bool_or_integer(pred):
    with pytest.raises(TypeError, match="cond: pred must be a scalar"):
        tg.cond(pred, tnp.sin, tnp.cos, X)


@pytest.mark.parametrize("index", [True, 1.0, np.array([0, 1])])
def test_a_switch_index_that_is_not_a_scalar_integer(index):
    with pytest.raises(TypeError, match="switch: index must be a scalar"):
        tg.switch(index, [tnp.sin, tnp.cos], X)


def test_bad_branches():
    with pytest.raises(ValueError, match="branches is empty"):
        tg.switch(0, [], X)
    with pytest.raises(TypeError, match=r"branches\[1\] must be a function"):
        tg.switch(0, [tnp.sin, 3], X)
    with pytest.raises(TypeError, match="branches must be a list or tuple"):
        tg.switch(0, tnp.sin, X)
    with pytest.raises(TypeError, match="false_fun must be a function"):
        tg.cond(True, tnp.sin, None, X)
    with pytest.raises(TypeError, match="true_fun must be a function"):
        tg.cond(True, "sin", tnp.sin, X)


def test_branch_outputs_that_differ_name_the_leaf_and_both_types():
    with pytest.raises(TypeError, match=r"output leaf \['y'\] is f64\[3\] in false_fun but f32\[3\] in true_fun"):
        tg.cond(True, lambda x: {"y": x.astype(np.float32)}, lambda x: {"y": x}, X)
    with pytest.raises(TypeError, match=r"output leaf \[1\] is f64\[3\] in branches\[0\] but f64\[\] in branches\[1\]"):
        tg.switch(0, [lambda x: (x, x), lambda x: (x, tnp.sum(x))], X)
    with pytest.raises(TypeError, match="different pytree structures"):
        tg.cond(False, lambda x: (x, x), lambda x: [x, x], X)
    # raised while staging, before anything runs, and under a transform too
    with pytest.raises(TypeError, match="different pytree structures"):
        tg.jit(lambda p, x: tg.cond(p, lambda x: x, lambda x: (x,), x))(np.array(True), X)


def test_other_errors_and_state_after_them():
    p = tg.Parameter(np.zeros(3), name="p")
    with pytest.raises(ValueError, match="true_fun assigns Parameter 'p'"):
        tg.cond(True, lambda x: p.assign(x).value, lambda x: x, X)
    with pytest.raises(TypeError, match="operand leaf 0 is a str"):
        tg.cond(True, lambda x: 1.0, lambda x: 2.0, "x")
    # a failing branch leaves no transform behind: the next calls work, eagerly and under grad
    with pytest.raises(ZeroDivisionError):
        tg.grad(lambda x: tnp.sum(tg.cond(True, lambda x: x * (1 / 0), lambda x: x, x)))(X)
    assert_close(tg.grad(lambda x: tnp.sum(tg.cond(True, tnp.sin, tnp.cos, x)))(X), np.cos(X))
    assert_close(p.value, np.zeros(3))


# ---- jit's passes and executor -------------------------------------------------------------------
def test_passes_keep_switch_equations_correct():
    from tapegrad._jit.passes import optimize

    c = np.array([0.5, 1.5, -2.0])

    def f(p, x):
        first = tg.cond(p, lambda x: (tnp.sin(x), x * 2.0), lambda x: (tnp.cos(x), x + 1.0), x)
        again = tg.cond(p, lambda x: (tnp.sin(x), x * 2.0), lambda x: (tnp.cos(x), x + 1.0), x)
        folded = tg.switch(1, [lambda c: c - 1.0, lambda c: c * 3.0], c)  # constant operands only
        return first[0] + again[1] + folded[0] * 0.0 + folded  # first[1] is dead

    program = tg.make_program(f)(np.array(True), X)
    optimized = optimize(program)
    optimized.typecheck()
    assert sum(eqn.prim.name == "switch" for eqn in optimized.eqns) == 2  # the folded one is a constant now
    jitted = tg.jit(f)
    for pred in (True, False, True, False, True):  # the later calls run each branch's compiled program
        assert_close(jitted(np.array(pred), X), f(pred, X))
    branches = [eqn for eqn in program.eqns if eqn.prim.name == "switch"][0].params["branches"]
    assert all(isinstance(b.program, type(program)) for b in branches)


def test_a_branchs_compiled_program_is_optimised():
    def true_fun(x):
        tnp.exp(x)  # dead: dropped from the compiled branch
        return tnp.sin(x)
    (eqn,) = tg.make_program(lambda x: tg.cond(True, true_fun, tnp.cos, x))(X).eqns
    true_branch = eqn.params["branches"][1]
    assert [e.prim.name for e in true_branch.program.eqns] == ["exp", "sin"]
    for _ in range(3):  # evaluated the first time, then compiled
        assert_close(true_branch(X)[0], np.sin(X))
    assert true_branch._run.source.count(" = f") == 1


# ---- the page ------------------------------------------------------------------------------------
def test_the_docs_examples_run_and_the_printed_program_is_current(capsys):
    doc = pathlib.Path(__file__).resolve().parent.parent / "docs" / "control_flow.md"
    text = doc.read_text()
    blocks = re.findall(r"^```python\n(.*?)^```", text, flags=re.S | re.M)
    assert len(blocks) >= 7, "the page lost its code blocks"
    namespace = {"__name__": "control_flow_example"}
    for k, block in enumerate(blocks):
        exec(compile(block, f"{doc.name}, block {k}", "exec"), namespace)
    listings = re.findall(r"^```\n(\{ lambda.*?)^```", text, flags=re.S | re.M)
    assert capsys.readouterr().out == "".join(listings)
    assert_close(namespace["slope"], np.cos(namespace["x"]) * namespace["x"] + np.sin(namespace["x"]))
    assert_close(namespace["layer"], np.tanh(namespace["x"]))
    assert_close(namespace["dk"], -(1 - 0.01 * 0.7) ** 99 * 1.5)  # d/dk of sum((1 - 0.01 k)^100 y0)
    assert namespace["sums"].shape == (5,) and namespace["doubled"].shape == (5, 3)
    assert namespace["counts"].tolist() == [0, 2, 4]
