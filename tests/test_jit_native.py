"""jit's compiled executor (numba, ``tapegrad._jit.native``): every lowering family gives the Python
executor's numbers and dtypes, in both forms of a value (unrolled: small; array: past the unroll
limit); loops and branches compile; programs that do not lower keep the Python executor, whole or
with their loops compiled alone; bad input keeps its errors; the disk cache serves a second process.
Skipped without numba. ``make test-native`` runs the whole suite through the executor."""
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import tapegrad as tg
import tapegrad.numpy as tnp
from _tol import assert_close
from tapegrad._jit import native

pytest.importorskip("numba")

SMALL, LARGE = (3,), (5, 8)  # unrolled, and past native.UNROLL_LIMIT (an array in the generated code)
assert np.prod(LARGE) > native.UNROLL_LIMIT


@pytest.fixture(autouse=True)
def _compiled(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("TAPEGRAD_NUMBA_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "numba"))
    monkeypatch.setenv("TAPEGRAD_NATIVE_STRICT", "1")  # numba refusing a lowering's source fails the test
    saved = tg.config.compiled_executor
    yield
    tg.config.compiled_executor = saved


def both(fn, *args, **jit_kwargs):
    """(compiled result, its executor, Python executor's result)."""
    tg.config.compiled_executor = True
    f = tg.jit(fn, **jit_kwargs)
    got, executor = f(*args), f.executor(*args)
    tg.config.compiled_executor = False
    g = tg.jit(fn, **jit_kwargs)
    assert g.executor(*args) == "python"
    return got, executor, g(*args)


def same(got, want, ulps=4):
    """Equal structure, shapes and dtypes; values to ``ulps`` roundings of the dtype."""
    got_leaves, want_leaves = tg.tree.tree_leaves(got), tg.tree.tree_leaves(want)
    assert len(got_leaves) == len(want_leaves)
    for a, b in zip(got_leaves, want_leaves):
        a, b = np.asarray(a), np.asarray(b)
        assert a.shape == b.shape and a.dtype == b.dtype, (a.shape, a.dtype, b.shape, b.dtype)
        if a.dtype.kind in "biu":
            np.testing.assert_array_equal(a, b)
        else:
            assert_close(a, b, ulps=ulps)


def data(shape, dtype=np.float64, seed=0, low=-2.0, high=2.0):
    return np.random.default_rng(seed).uniform(low, high, shape).astype(dtype)


# ---- elementwise -------------------------------------------------------------------------------------
UNARY = ["negative", "abs", "exp", "expm1", "sin", "cos", "tan", "tanh", "sinh", "cosh", "arctan", "square",
         "floor", "ceil", "sign", "isfinite", "isnan", "logical_not"]
POSITIVE = ["log", "log1p", "log2", "log10", "sqrt", "reciprocal", "arcsin", "arccos"]  # on (0.05, 0.95)
BINARY = ["add", "subtract", "multiply", "divide", "maximum", "minimum", "arctan2", "power", "logaddexp",
          "equal", "not_equal", "less", "less_equal", "greater", "greater_equal", "logical_and", "logical_or"]


@pytest.mark.parametrize("shape", [SMALL, LARGE], ids=["unrolled", "array"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("name", UNARY + POSITIVE)
def test_unary(name, dtype, shape):
    x = data(shape, dtype, low=0.05, high=0.95) if name in POSITIVE else data(shape, dtype)
    got, executor, want = both(getattr(tnp, name), x)
    assert executor == "numba"
    same(got, want)


@pytest.mark.parametrize("shape", [SMALL, LARGE], ids=["unrolled", "array"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("name", BINARY)
def test_binary_broadcasting(name, dtype, shape):
    x = data(shape, dtype, seed=1, low=0.1, high=2.0)
    y = data(shape[-1:], dtype, seed=2, low=0.1, high=2.0)  # broadcast along the leading axes
    got, executor, want = both(getattr(tnp, name), x, y)
    assert executor == "numba"
    same(got, want)


@pytest.mark.parametrize("shape", [SMALL, LARGE], ids=["unrolled", "array"])
def test_weak_scalars_keep_float32_and_where(shape):
    """A Python float argument and literals are weak: the float32 array keeps its dtype (NumPy 2)."""
    def f(x, s):
        return tnp.where(x > 0.5, x * s + 0.1, x / 3.0 - s), (x * 2).astype(np.int64) // 3
    got, executor, want = both(f, data(shape, np.float32), 1.7)
    assert executor == "numba" and got[0].dtype == np.float32
    same(got, want)


def test_integer_and_bool_arithmetic():
    def f(i, b, x):
        return i * 3 - i // 2, i / 4, b & (i > 0), tnp.sum(b), x * i
    i = np.array([-3, 0, 5, 7], np.int64)
    got, executor, want = both(f, i, np.array([True, False, True, True]), np.full(4, 0.25))
    assert executor == "numba"
    same(got, want)


def test_nan_and_inf_follow_numpy():
    x = np.array([0.0, -1.0, np.nan, np.inf])
    with np.errstate(all="ignore"):
        got, executor, want = both(lambda x: (1.0 / x, tnp.log(x), tnp.max(x), tnp.maximum(x, 0.0)), x)
    assert executor == "numba"
    same(got, want)


def test_edge_values_give_numpys_bits():
    """Signed zeros, NaNs and infinities where numba's own functions differ from NumPy's."""
    x = np.array([-0.0, 0.0, -0.0, np.nan, 1.0, -np.inf])
    y = np.array([0.0, -0.0, -0.0, 1.0, np.nan, np.inf])

    def f(x, y):
        return tnp.maximum(x, y), tnp.minimum(x, y), tnp.sign(x), tg.nn.functional.relu(x), tnp.clip(x, -0.0, 0.0)
    for shape in (SMALL, (8, 6)):  # unrolled, and the array form
        xs, ys = np.resize(x, shape), np.resize(y, shape)
        got, executor, want = both(f, xs, ys)
        assert executor == "numba"
        for a, b in zip(got, want):
            np.testing.assert_array_equal(a, b)
            np.testing.assert_array_equal(np.signbit(a), np.signbit(b))


@pytest.mark.parametrize("dtype", [np.int64, np.float64])
@pytest.mark.parametrize("name", ["fmod", "floor_divide", "remainder"])
def test_functions_numba_computes_otherwise_keep_the_python_executor(name, dtype):
    i, j = np.array([-7, 7, 5, -5, 0, 3], dtype), np.array([2, -2, 3, 3, 3, -3], dtype)
    if dtype is np.float64:
        i, j = np.append(i, [np.inf, -1.5]), np.append(j, [2.0, np.inf])
    with np.errstate(all="ignore"):
        got, executor, want = both(getattr(tnp, name), i, j)
    # fmod always; floor_divide and remainder on floats only (infinities, signed zeros)
    assert executor == ("numba" if name != "fmod" and dtype is np.int64 else "python")
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(np.signbit(got), np.signbit(want))


def test_an_integer_power_keeps_the_python_executors_error():
    tg.config.compiled_executor = True
    f = tg.jit(lambda i, j: i ** j)
    with pytest.raises(ValueError, match="negative integer powers"):
        f(np.array([2, 2]), np.array([-1, 2]))
    assert f.executor(np.array([2, 2]), np.array([-1, 2])) == "python"


def test_result_dtypes_and_weak_results():
    b = np.arange(40) % 3 == 0
    got, executor, want = both(lambda b: tnp.divide(b, b | True), b)  # numba's bool / bool is float32
    assert executor == "numba" and got.dtype == want.dtype == np.float64
    big = np.array([3037000500, 2])
    got, executor, want = both(lambda i, x: tnp.concatenate([i, x]) ** 2, big, np.array([0.5]))
    assert executor == "numba"
    np.testing.assert_array_equal(got, want)  # squared as float64, not wrapped in int64
    got, executor, want = both(lambda x, s: (x * 2, s, 2.0), np.ones(3, np.float32), 0.5)
    assert executor == "numba" and type(got[1]) is type(want[1]) and type(got[2]) is type(want[2])
    got, executor, want = both(lambda x, y: x @ y, np.ones((2, 0)), np.ones((0, 3)))
    assert executor == "python"
    np.testing.assert_array_equal(got, want)


def test_an_unwritable_cache_folder_keeps_the_python_executor(monkeypatch, tmp_path):
    blocked = tmp_path / "file"
    blocked.write_text("")
    monkeypatch.setenv("TAPEGRAD_NUMBA_CACHE_DIR", str(blocked / "numba"))  # under a file: not a folder
    tg.config.compiled_executor = True
    f = tg.jit(lambda x: x * 2.0 + 1.0)
    with pytest.warns(RuntimeWarning, match="TAPEGRAD_NUMBA_CACHE_DIR"):
        np.testing.assert_array_equal(f(np.ones(3)), np.full(3, 3.0))
    assert f.executor(np.ones(3)) == "python"


# ---- shape operations, indexing, reductions, products --------------------------------------------------
@pytest.mark.parametrize("shape", [(2, 3), (6, 7)], ids=["unrolled", "array"])
def test_shape_operations(shape):
    def f(x):
        t = tnp.transpose(x)
        r = tnp.reshape(x, (-1,))
        c = tnp.concatenate([r, r[:2] * 2.0])
        b = tnp.broadcast_to(x[0], (4, shape[1]))
        return t, c, b, tnp.expand_dims(x, 0), x[1:, ::2], x[-1], x[..., 1]
    got, executor, want = both(f, data(shape))
    assert executor == "numba"
    same(got, want)


@pytest.mark.parametrize("shape", [(2, 3), (6, 7)], ids=["unrolled", "array"])
def test_reductions(shape):
    def f(x):
        return (tnp.sum(x), tnp.sum(x, axis=0), tnp.sum(x, axis=1, keepdims=True), tnp.max(x), tnp.min(x),
                tnp.prod(x), tnp.any(x > 1.0), tnp.all(x > -3.0), tnp.mean(x))
    got, executor, want = both(f, data(shape))
    same(got, want)
    # the unrolled form lowers every reduction; an array's partial reductions keep the Python executor
    assert executor == ("numba" if np.prod(shape) <= native.UNROLL_LIMIT else "python")


@pytest.mark.parametrize("shapes", [((2, 3), (3,)), ((3,), (3, 2)), ((2, 2), (2, 2)), ((9, 8), (8, 7)),
                                    ((9, 8), (8,))], ids=str)
def test_matmul(shapes):
    x, y = data(shapes[0], seed=3), data(shapes[1], seed=4)
    got, executor, want = both(lambda x, y: x @ y, x, y)
    assert executor == "numba"
    same(got, want, ulps=64)


@pytest.mark.parametrize("shape", [SMALL, LARGE], ids=["unrolled", "array"])
def test_functional_updates_and_their_gradients(shape):
    def f(x, v):
        y = x.at[0].set(v).at[-1].add(2.0 * v)
        return tnp.sum(tnp.sin(y) * y)
    x = data(shape)
    got, executor, want = both(tg.value_and_grad(f, grad_position=(0, 1)), x, 0.3)
    assert executor == "numba"
    same(got, want)


def test_dynamic_index_reads_and_bounds():
    def f(x, i):
        return x[i] * 2.0, x.at[i].add(1.0)
    x = np.arange(5.0)
    for i in (0, 3, -1, -5):
        got, executor, want = both(f, x, np.int64(i))
        assert executor == "numba"
        same(got, want)
    tg.config.compiled_executor = True
    g = tg.jit(f)
    with pytest.raises(IndexError):
        g(x, np.int64(5))
    same(g(x, np.int64(2)), (np.float64(4.0), np.array([0.0, 1.0, 3.0, 3.0, 4.0])))  # the entry still works


@pytest.mark.parametrize("shape", [(2, 3), (6, 7)], ids=["unrolled", "array"])
def test_more_elementwise_and_running_reductions(shape):
    def f(x):
        return (tnp.clip(x, -0.5, 0.7), tg.nn.functional.relu(x), tg.scipy.special.expit(x), tnp.cumsum(x, axis=1),
                tnp.cumprod(x[0]), tnp.cumsum(x))
    got, executor, want = both(f, data(shape))
    same(got, want)
    # an array's running sum along an axis of a 2-d array keeps the Python executor
    assert executor == ("numba" if np.prod(shape) <= native.UNROLL_LIMIT else "python")


def test_a_custom_vjp_inside_the_program_compiles_its_function():
    @tg.custom_vjp
    def softclip(x):
        return tnp.tanh(x) * 2.0

    softclip.defvjp(lambda x: (softclip(x), x), lambda x, g: (g * 99.0,))  # a rule that is not the derivative
    f = lambda x: tnp.sum(softclip(x) ** 2)  # noqa: E731
    x = data(SMALL)
    assert "custom_call" in [e.prim.name for e in tg.make_program(f)(x).eqns]
    for fn in (f, tg.value_and_grad(f)):  # the function inlined; the gradient through its rule (99 g)
        got, executor, want = both(fn, x)
        assert executor == "numba"
        same(got, want)


# ---- loops and branches --------------------------------------------------------------------------------
def ode_loss(k, c, y0):
    def body(i, s):
        y, acc = s
        y = y + 0.01 * tnp.stack([y[1], -k * y[0] - c * y[1]])
        return y, acc + tnp.sum(y * y)
    _, acc = tg.fori_loop(0, 1000, body, (y0, 0.0 * k))
    return acc


def test_ode_gradient_through_fori_loop():
    args = np.array(1.5), np.array(0.2), np.array([1.0, 0.0])
    got, executor, want = both(tg.grad(ode_loss, grad_position=(0, 1)), *args)
    assert executor == "numba"
    same(got, want, ulps=64)


@pytest.mark.parametrize("n", [3, 40], ids=["unrolled", "array"])
@pytest.mark.parametrize("reverse", [False, True])
def test_scan_with_ys_and_its_gradient(n, reverse):
    def loss(w, x0, xs):
        c, ys = tg.scan(lambda c, x: (tnp.tanh(w * c + x), tnp.sum(c * x)), x0, xs, reverse=reverse)
        return tnp.sum(c) + tnp.sum(ys ** 2)
    args = np.array(0.9), data((n,), seed=5), data((30, n), seed=6)
    got, executor, want = both(tg.value_and_grad(loss, grad_position=(0, 1, 2)), *args)
    assert executor == "numba"
    same(got, want, ulps=64)


@pytest.mark.parametrize("shape", [(3,), (5, 4)], ids=["unrolled", "array"])
def test_nested_scans_write_the_values_the_outer_scan_stacks(shape):
    """An inner scan's stacked values that the outer body returns as its own are written straight into
    the outer stack; stacks of one dtype and shape share an allocation (one also read elsewhere, one of
    another dtype, and reverse mode through both loops, whose residuals take that path too)."""
    def loss(w, x0, xs):
        def outer(c, x):
            def inner(d, z):
                d = tnp.sin(w * d + z)
                return d, (d * 2.0, tnp.cos(d), tnp.sum(d) > 0.0)
            d, (a, b, positive) = tg.scan(inner, c, tnp.stack([x, x * 0.5, -x]))
            return d + a[0] * 0.1, (a, b, positive, tnp.sum(b))
        c, (a, b, positive, total) = tg.scan(outer, x0, xs, reverse=True)
        mask = tnp.reshape(positive, positive.shape + (1,) * len(shape))
        return tnp.sum(c) + tnp.sum(a * b) + tnp.sum(tnp.where(mask, b, 0.0)) + tnp.sum(total)
    args = np.array(0.7), data(shape, seed=7), data((6, *shape), seed=8)
    got, executor, want = both(tg.value_and_grad(loss, grad_position=(0, 1, 2)), *args)
    assert "numba" in executor
    same(got, want, ulps=64)


def test_while_loop_and_max_steps():
    def newton_sqrt(a):
        return tg.while_loop(lambda s: tnp.abs(s[0] * s[0] - a) > 1e-12, lambda s: (0.5 * (s[0] + a / s[0]), s[1] + 1),
                             (a, 0))
    got, executor, want = both(newton_sqrt, np.array(2.0))
    assert executor == "numba" and int(got[1]) == int(want[1]) > 3
    same(got, want)
    tg.config.compiled_executor = True
    bounded = tg.jit(lambda a: tg.while_loop(lambda x: x > 0.0, lambda x: x + 1.0, a, max_steps=10))
    with pytest.raises(RuntimeError, match="max_steps=10"):
        bounded(np.array(1.0))
    assert bounded.executor(np.array(1.0)) == "numba"


@pytest.mark.parametrize("max_steps", [None, 50])
def test_reverse_mode_through_a_while_loop(max_steps):
    def newton_sqrt(a):
        def body(x):
            return 0.5 * (x + a / x)
        return tg.while_loop(lambda x: tnp.abs(x * x - a) > 1e-10, body, a, max_steps=max_steps)
    got, executor, want = both(tg.value_and_grad(newton_sqrt), np.array(3.0))
    # the residuals' stacks need max_steps rows: without it, only the forward loop compiles, alone
    assert executor == ("numba" if max_steps else "python+numba")
    same(got, want)
    assert_close(got[1], 0.5 / np.sqrt(3.0))


def test_reverse_mode_through_a_while_loop_compiles_alone(monkeypatch):
    """Where the program does not compile whole, both sweeps of the reverse-mode while_loop (one
    ``while_grad`` equation) compile alone: no Python loop over its steps."""
    def newton_sqrt(a):
        x = tg.while_loop(lambda x: tnp.abs(x * x - a) > 1e-10, lambda x: 0.5 * (x + a / x), a, max_steps=50)
        return x + tnp.round(a) * 0.0  # round has no lowering
    runs = []
    compile_loop = native.compile_loop
    monkeypatch.setattr(native, "compile_loop", lambda prim, *a: runs.append(prim.name) or compile_loop(prim, *a))
    got, executor, want = both(tg.value_and_grad(newton_sqrt), np.array(3.0))
    assert executor == "python+numba" and "while_grad" in runs
    same(got, want)


def test_cond_and_switch():
    def f(x, k):
        y = tg.cond(tnp.sum(x) > 0, lambda v: v * 2.0, lambda v: -v, x)
        return tg.switch(k, [lambda v: v + 1.0, lambda v: tnp.sin(v), lambda v: v * v], y)
    x = data(SMALL)
    for k in (-1, 0, 1, 2, 7):  # out of range clamps, as tg.switch does
        got, executor, want = both(f, x, np.int64(k))
        assert executor == "numba"
        same(got, want)


def test_check_grads_through_the_compiled_executor():
    tg.config.compiled_executor = True

    def f(x, w):
        def body(i, c):
            return tnp.tanh(c * w + x[i % 3])
        return tg.fori_loop(0, 20, body, x[0])
    f_jit = tg.jit(f)
    x, w = data(SMALL, seed=7), np.array(0.8)
    f_jit(x, w)
    assert f_jit.executor(x, w) == "numba"
    tg.testing.check_grads(f_jit, (x, w), order=2, modes=("fwd", "rev"))


# ---- what keeps the Python executor ---------------------------------------------------------------------
def test_a_primitive_without_lowering_keeps_the_python_executor():
    got, executor, want = both(lambda x: tnp.round(x) * 2.0, np.arange(4.0) + 0.4)
    assert executor == "python"
    np.testing.assert_array_equal(got, want)


def test_the_loop_compiles_alone_when_the_rest_does_not():
    def f(x):
        s = tg.fori_loop(0, 100, lambda i, c: c * 0.99 + tnp.sin(c), x)
        return tnp.round(s * 100.0)
    got, executor, want = both(f, data(SMALL))
    assert executor == "python+numba"
    same(got, want)


def test_large_arrays_keep_the_python_executor():
    big = data((native.MAX_ELEMENTS + 1,))
    got, executor, want = both(lambda x: tnp.sin(x) * 2.0, big)
    assert executor == "python"
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("shape", [(native.UNROLL_LIMIT,), LARGE], ids=["unrolled", "array"])
def test_a_program_past_the_compile_budget_keeps_the_python_executor(shape):
    """Straight-line code past the budget keeps the Python executor, arrays too: the loops that
    compute an array's elements are not control-flow loops, which get the larger budget."""
    def chain(x, steps):
        for _ in range(steps):
            x = tnp.sin(x) * 1.01 + 0.1
        return tnp.sum(x)
    x = data(shape)
    short = both(tg.grad(chain), x, 2, static_argnums=1)
    long = both(tg.grad(chain), x, 60, static_argnums=1)  # ~60 x 16 x 4 scalar statements
    assert (short[1], long[1]) == ("numba", "python")
    same(short[0], short[2])
    same(long[0], long[2])


def test_explain_says_why_a_program_keeps_the_python_executor(monkeypatch):
    tg.config.compiled_executor = True
    x = data(SMALL)
    assert tg.jit(lambda x: tnp.sin(x) * 2.0).explain(x) == "numba: the program is compiled whole"
    rounded = tg.jit(lambda x: tnp.round(tg.fori_loop(0, 3, lambda i, c: c * 0.5, x)))
    assert rounded.explain(x) == ("python+numba: not compiled whole because round has no lowering; "
                                  "its loops compile alone")
    big = tg.jit(lambda x: tnp.sin(x) * 2.0).explain(data((native.MAX_ELEMENTS + 1,)))
    assert big.startswith("python: not compiled whole because") and f"more than {native.MAX_ELEMENTS}" in big
    tg.config.compiled_executor = False
    assert "compiled executor is off" in tg.jit(lambda x: x + 1.0).explain(x)
    tg.config.compiled_executor = True
    monkeypatch.setattr(native, "available", lambda: False)
    assert "numba is not installed" in tg.jit(lambda x: x + 2.0).explain(x)


def test_a_loop_program_has_a_larger_budget():
    """Past the straight-line budget but within the loop budget, a program with a loop compiles: the
    Python executor would run the long body at every step."""
    def loop(x):
        def body(i, x):
            for _ in range(30):
                x = tnp.sin(x) * 1.01 + 0.1
            return x
        return tg.fori_loop(0, 20, body, x)
    x = data((native.UNROLL_LIMIT,))
    got, executor, want = both(loop, x)
    assert executor == "numba"
    same(got, want, ulps=64)


def test_the_switch_turns_it_off():
    tg.config.compiled_executor = False
    f = tg.jit(lambda x: x + 1.0)
    assert f.executor(np.ones(2)) == "python"
    with pytest.raises(TypeError, match="compiled_executor"):
        tg.config.compiled_executor = "yes"


def test_a_lowering_error_names_the_primitive():
    def broken(ctx, *operands, **params):
        raise KeyError("oops")
    program = tg.make_program(tnp.sin)(np.ones(2))
    (eqn,) = program.eqns
    saved, eqn.prim.lowering = eqn.prim.lowering, broken
    try:
        with pytest.raises(RuntimeError, match="lowering of sin"):
            native.source(program)
    finally:
        eqn.prim.lowering = saved


def test_outputs_are_fresh_arrays():
    tg.config.compiled_executor = True
    x = np.arange(3.0)
    f = tg.jit(lambda x: tg.fori_loop(0, 3, lambda i, c: c, x))  # the carry passes through
    out = f(x)
    assert f.executor(x) == "numba"
    out[0] = 99.0
    assert x[0] == 0.0 and f(x)[0] == 0.0


def test_a_second_process_loads_the_machine_code_from_disk(tmp_path):
    script = textwrap.dedent("""
        import numpy as np, tapegrad as tg, tapegrad.numpy as tnp
        f = tg.jit(lambda x: tg.fori_loop(0, 50, lambda i, c: tnp.cos(c) + 0.5 * c, x))
        x = np.array([0.1, 0.2])
        print(float(f(x)[0]), f.executor(x), sum(f._cache[next(iter(f._cache))]._run.jitted.stats.cache_hits.values()))
    """)
    env = dict(os.environ, TAPEGRAD_NUMBA_CACHE_DIR=str(tmp_path), TAPEGRAD_COMPILED_EXECUTOR="1")
    runs = [subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True)
            for _ in range(2)]
    (value1, executor1, hits1), (value2, executor2, hits2) = [r.stdout.split() for r in runs]
    assert executor1 == executor2 == "numba" and value1 == value2
    assert (hits1, hits2) == ("0", "1")
