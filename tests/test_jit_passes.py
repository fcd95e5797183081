"""jit's program passes, each on its own, then the pipeline end to end.

Every check runs the program through the executor before and after the pass on random inputs and asks
for the same arrays (the passes change no arithmetic, so the results are identical, not just close),
type-checks the result, and checks that the pass left its input program as it was.
"""
import numpy as np
import pytest

import tapegrad as tg
import tapegrad.numpy as tnp
from _tol import assert_close
from tapegrad._core import ShapedArray
from tapegrad._jit import passes
from tapegrad._jit.codegen import compile_program
from tapegrad._jit.program import Eqn, Program, Var
from tapegrad.numpy._elementwise import add_p, sin_p

RNG = np.random.default_rng(0)
X, Y = RNG.normal(size=3), RNG.normal(size=3)
M = RNG.normal(size=(3, 4))


def run(program, inputs):
    return compile_program(program)(*inputs)


def prims(program):
    return [eqn.prim.name for eqn in program.eqns]


@pytest.fixture(autouse=True)
def without_fusion(monkeypatch):
    """These passes are exact, and so are these tests: fusion (whose results may differ from NumPy's in
    the last bit) is left out of ``optimize`` here and tested in test_jit_fusion.py."""
    monkeypatch.setattr("tapegrad._jit.fusion.fuse", lambda program: program)


def check_pass(pass_, program, inputs):
    """``pass_(program)``, after checking that it keeps the meaning, the signature and the input."""
    before_text, before_eqns = str(program), list(program.eqns)
    optimized = pass_(program)
    optimized.typecheck()
    assert optimized is not program
    assert [id(v) for v in optimized.invars] == [id(v) for v in program.invars]
    assert str(program) == before_text and all(a is b for a, b in zip(program.eqns, before_eqns))
    expected, got = run(program, inputs), run(optimized, inputs)
    assert len(got) == len(expected)
    for e, g in zip(expected, got):
        assert np.result_type(e) == np.result_type(g)
        np.testing.assert_array_equal(g, e)
        if np.result_type(e).kind == "f":  # 0.0 == -0.0, but 1 / x tells them apart
            np.testing.assert_array_equal(np.signbit(g), np.signbit(e))
    return optimized


def freeze(program, values):
    """The program with its first inputs made constants holding ``values``: a program whose equations
    on those inputs can be folded (staging alone never records an equation of constants only)."""
    n = len(values)
    return Program(program.invars[n:], program.constvars + program.invars[:n], program.consts + list(values),
                   program.eqns, program.outputs)


# ---- every pass keeps the meaning of every program in this table -----------------------------------
def _mlp(w, b, x):
    return tnp.sum(tnp.tanh(x @ w + b) ** 2)


PROGRAMS = {
    "grad": (tg.grad(lambda x, y: tnp.sum(tnp.sin(x) * y + 2.0)), (X, Y)),
    "grad(grad)": (tg.grad(tg.grad(lambda x: tnp.sin(x) ** 3)), (0.3,)),
    "value_and_grad(mlp)": (tg.value_and_grad(_mlp, grad_position=(0, 1)), (M, RNG.normal(size=4), M.T[:2])),
    "repeats": (lambda x, y: (tnp.exp(x) * tnp.exp(x) + tnp.exp(x) * y, tnp.sum(x * 2) + tnp.sum(x * 2.0)), (X, Y)),
    "vmap(grad)": (tg.vmap(tg.grad(lambda x, y: tnp.sum(tnp.cos(x * y) ** 2))), (M, M + 1.0)),
    "literal outputs": (lambda x, y: (x, 3.0, tnp.sin(y) * 0), (X, Y)),
}


@pytest.mark.parametrize("name", list(PROGRAMS))
@pytest.mark.parametrize("pass_", [passes.dce, passes.cse, passes.fold_constants, passes.elide_broadcasts,
                                   passes.optimize])
def test_every_pass_keeps_the_meaning(pass_, name):
    fn, args = PROGRAMS[name]
    program = tg.make_program(fn)(*args)
    check_pass(pass_, program, args)
    frozen = freeze(program, args[:1])  # the same program with constants to fold
    check_pass(pass_, frozen, args[1:])


# ---- dead-code elimination -------------------------------------------------------------------------
def test_dce_drops_the_forward_values_a_gradient_does_not_read():
    program = tg.make_program(tg.grad(lambda x, y: tnp.sum(tnp.sin(x) * y + 2.0)))(X, Y)
    assert prims(program) == ["sin", "multiply", "add", "sum", "multiply", "cos", "multiply"]
    assert prims(check_pass(passes.dce, program, (X, Y))) == ["multiply", "cos", "multiply"]


def test_dce_keeps_the_signature_and_drops_unread_constants():
    rng = np.random.default_rng(0)
    c, unused = rng.normal(size=3), rng.normal(size=3)

    def f(x, y):
        tnp.cos(tnp.sin(y) * unused)  # a dead chain, and the only reader of `unused`
        return x * c, 3.0, x
    program = tg.make_program(f)(X, Y)
    assert len(program.constvars) == 2
    optimized = check_pass(passes.dce, program, (X, Y))
    assert prims(optimized) == ["multiply"]
    assert len(optimized.invars) == 2 and len(optimized.constvars) == 1 and optimized.consts[0] is c
    assert prims(passes.dce(optimized)) == ["multiply"]  # nothing left to drop


# ---- common-subexpression elimination --------------------------------------------------------------
@pytest.mark.parametrize("fn, expected", [
    (lambda x: tnp.sin(x) * tnp.sin(x) + tnp.sin(x), ["sin", "multiply", "add"]),
    # the second `add` repeats the first only once its operand is renamed to the first `sin`
    (lambda x: (tnp.sin(x) + 1.0) * (tnp.sin(x) + 1.0), ["sin", "add", "multiply"]),
    (lambda x: tnp.sum(x, axis=0) + tnp.sum(x, axis=1)[0] + tnp.sum(x, axis=0),
     ["sum", "sum", "getitem", "add", "add"]),
    (lambda x: x * 2.0 + x * 2.0, ["multiply", "add"]),
    # a literal's type matters: 2 and 2.0 promote an integer array differently
    (lambda x: x.astype(np.int64) * 2 + x.astype(np.int64) * 2.0,
     ["stop_gradient", "astype", "multiply", "multiply", "add"]),
    # and its sign: x + 0.0 and x + -0.0 differ at x = -0.0; so do parameters
    (lambda x: ((x + 0.0) * 1.0, (x + -0.0) * 1.0), ["add", "multiply", "add", "multiply"]),
    (lambda x: tnp.pad(x, 1, constant_values=0.0) + tnp.pad(x, 1, constant_values=-0.0), ["pad", "pad", "add"]),
    (lambda x: tnp.pad(x, 1, constant_values=0.0) + tnp.pad(x, 1, constant_values=0.0), ["pad", "add"]),
    # two outputs stay two arrays; an output may still reuse an inner value
    (lambda x: (tnp.sin(x), tnp.sin(x)), ["sin", "sin"]),
    (lambda x: (tnp.sin(x), tnp.sin(x) * 2.0, tnp.sin(x) * 2.0), ["sin", "multiply", "multiply"]),
])
def test_cse_computes_each_expression_once(fn, expected):
    x = np.array([[-0.0, 1.5, 2.0], [3.0, -4.0, 0.0]])
    optimized = check_pass(passes.cse, tg.make_program(fn)(x), (x,))
    assert prims(optimized) == expected


def test_cse_keeps_signed_zeros_and_distinct_output_arrays():
    x = np.array([-0.0, 1.0])
    def f(x):
        return (x + 0.0) * 1.0, (x + -0.0) * 1.0, tnp.sin(x), tnp.sin(x)
    plus, minus, s1, s2 = compile_program(passes.cse(tg.make_program(f)(x)))(x)
    assert not np.signbit(plus[0]) and np.signbit(minus[0])
    assert s1 is not s2


# ---- constant folding ------------------------------------------------------------------------------
def test_folding_evaluates_equations_of_constants_once():
    program = freeze(tg.make_program(lambda y, x: x * tnp.exp(y) * 2.0 + tnp.sum(tnp.cos(y)))(Y, X), [Y])
    folded = check_pass(passes.fold_constants, program, (X,))
    assert prims(folded) == ["multiply", "multiply", "add"]
    optimized = check_pass(passes.dce, folded, (X,))
    assert len(optimized.constvars) == 2  # exp(y) and sum(cos(y)); y itself is no longer read
    np.testing.assert_array_equal(optimized.consts[0], np.exp(Y))


def test_folding_leaves_large_results_outputs_and_errors_to_the_call():
    def f(s, a, x):
        big = tnp.broadcast_to(s, (400, 400))  # a view, cheap at each call; 160,000 elements folded would not be
        small = tnp.broadcast_to(s, (10, 10))
        return tnp.sum(big) + tnp.sum(small) + x, tnp.exp(s), x + tnp.linalg.cholesky(a)[0, 0]
    s, a = np.array(2.0), np.array([[-1.0, 0.0], [0.0, 1.0]])  # not positive definite
    program = freeze(tg.make_program(f)(s, np.eye(2), X), [s, a])
    folded = passes.fold_constants(program)
    folded.typecheck()
    assert prims(folded) == ["broadcast_to", "sum", "add", "add", "exp", "cholesky", "getitem", "add"]
    for p in (program, folded):
        with pytest.raises(np.linalg.LinAlgError):
            run(p, (X,))
    fine = freeze(tg.make_program(f)(s, np.eye(2), X), [s, np.eye(2)])
    assert prims(check_pass(passes.fold_constants, fine, (X,))) == ["broadcast_to", "sum", "add", "add", "exp",
                                                                     "add"]


# ---- the pipeline ----------------------------------------------------------------------------------
def test_elementwise_equations_broadcast_for_themselves():
    """``sum``'s gradient broadcasts the cotangent before multiplying: the multiply reads the
    cotangent itself, and the ``broadcast_to`` goes; one read by something else stays, and so does
    one whose reader would not broadcast to its shape alone (``sin`` of a broadcast)."""
    def fn(x, y):
        return tnp.sum(tnp.tanh(x) * y, axis=1)
    x, y = RNG.normal(size=(3, 4)), RNG.normal(size=(3, 4))
    program = tg.make_program(tg.vjp(fn, x, y)[1])(RNG.normal(size=3))
    assert "broadcast_to" in prims(program)
    elided = check_pass(lambda p: passes.dce(passes.elide_broadcasts(p)), program, (RNG.normal(size=3),))
    assert "broadcast_to" not in prims(elided)

    def kept(x, y):
        b = tnp.broadcast_to(x, (3, 4))
        return tnp.sin(b), b * y, tnp.sum(b)
    row = RNG.normal(size=4)
    program = tg.make_program(kept)(row, M)
    elided = check_pass(lambda p: passes.dce(passes.elide_broadcasts(p)), program, (row, M))
    readers = [eqn for eqn in elided.eqns if eqn.prim.name != "broadcast_to"]
    assert [eqn.inputs[0] is elided.invars[0] for eqn in readers] == [False, True, False]


def test_a_broadcast_python_scalar_keeps_its_broadcast():
    """A Python float argument is weakly typed; broadcast, it is a float64 array, which promotes a
    float32 operand: reading the scalar itself would give float32, so its broadcast stays."""
    x = RNG.normal(size=3).astype(np.float32)
    program = tg.make_program(lambda x, s: x * tnp.broadcast_to(s, (3,)))(x, 2.5)
    elided = check_pass(passes.elide_broadcasts, program, (x, 2.5))
    assert elided.eqns[-1].inputs[1] is program.eqns[-1].inputs[1]


def test_optimize_shrinks_a_gradient_program():
    def f(x, y):
        h = tnp.tanh(x * y)
        return tnp.sum(h * h + tnp.tanh(x * y))
    program = tg.make_program(tg.grad(f))(X, Y)
    optimized = check_pass(passes.optimize, program, (X, Y))
    assert len(optimized.eqns) < len(program.eqns)
    assert prims(optimized).count("tanh") == 1 and "sum" not in prims(optimized)


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_jit_runs_the_optimized_program_with_eager_numbers(name):
    fn, args = PROGRAMS[name]
    got, expected = tg.jit(fn)(*args), fn(*args)
    for g, e in zip(tg.tree.tree_leaves(got), tg.tree.tree_leaves(expected)):
        assert_close(g, e, rtol=1e-14, atol=1e-15)


def test_jit_grad_with_constants_and_parameters():
    rng = np.random.default_rng(0)
    c = rng.normal(size=3)
    p = tg.Parameter(np.ones(3))
    f = tg.jit(tg.grad(lambda x: tnp.sum(tnp.sin(x * c) * p + tnp.sin(x * c))))
    assert_close(f(X), np.cos(X * c) * c * 2, rtol=1e-14)
    p.assign(2.0 * np.ones(3))  # read fresh: never folded into a constant
    assert_close(f(X), np.cos(X * c) * c * 3, rtol=1e-14)


def test_passes_are_linear_walks_without_recursion():
    def var():
        return Var(ShapedArray((), np.dtype(np.float64)))
    x = var()
    eqns, v = [], x
    for _ in range(20_000):  # a long chain whose links are each computed twice, plus a dead branch
        first, again, total = var(), var(), var()
        eqns += [Eqn(sin_p, [v], {}, [first]), Eqn(sin_p, [v], {}, [again]), Eqn(add_p, [first, again], {}, [total])]
        v = total
    eqns.append(Eqn(sin_p, [x], {}, [var()]))
    optimized = passes.optimize(Program([x], [], [], eqns, [v]))
    assert prims(optimized) == ["sin", "add"] * 20_000
