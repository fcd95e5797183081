"""jit's elementwise fusion (``_jit/fusion.py``) and the executor's buffer reuse (``_jit/buffers.py``,
``_jit/codegen.py``).

Fusion: a fused program gives the unfused program's dtypes, and its values to float rounding (numexpr
calls the C library where NumPy has its own loops: at most 1 ulp apart per operation); small groups,
large arrays and single operations stay unfused. Buffer reuse changes no arithmetic, so a program run
with it gives exactly what ``evaluate`` (the ``bind`` path, no executor) gives, and never writes into
an input, an output, or memory a live view shares.
"""
import warnings
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

import tapegrad as tg
import tapegrad.numpy as tnp
from _tol import assert_close
from tapegrad import _structural
from tapegrad._jit import api, buffers, fusion, passes
from tapegrad._jit.codegen import compile_program, evaluate, source
from tapegrad._rules import PRIMITIVES

pytestmark = pytest.mark.python_executor  # the Python executor's fusion and buffer reuse
needs_numexpr = pytest.mark.skipif(fusion.numexpr is None, reason="numexpr is not installed")
RNG = np.random.default_rng(0)
TOL = {np.float32: 4e-6, np.float64: 1e-13}  # a few ulps: each fused op is within 1 ulp of NumPy's


def prims(program):
    return [eqn.prim.name for eqn in program.eqns]


def run(program, args, donate=()):
    return compile_program(program, donate)(*args)


@pytest.fixture
def always_pays(monkeypatch):
    """Fuse every group, whatever its size: for checking numbers, not the cost rule."""
    monkeypatch.setattr(fusion, "_pays", lambda eqns, group: True)


def assert_fused_matches(fn, args, dtype):
    """``fn``'s fused program against its unfused one; ``dtype``: the least precise one computed in."""
    program = tg.make_program(fn)(*args)
    fused = fusion.fuse(program)
    fused.typecheck()
    assert "fused" in prims(fused)
    expected, got = run(program, args), run(fused, args)
    for e, g in zip(expected, got):
        assert np.result_type(g) == np.result_type(e)
        assert_close(g, e, rtol=TOL[dtype], atol=TOL[dtype])
    return fused


# ---- fusion: the numbers ----------------------------------------------------------------------------
CASES = {
    "chain": (lambda x, y: tnp.tanh(tnp.sin(x) * 1.01 + 0.1) * y, ((6, 5), (6, 5))),
    "broadcast row": (lambda x, y: x * y + tnp.sin(y) - 2.0, ((6, 5), (5,))),
    "broadcast outer": (lambda x, y: tnp.exp(x - y) / (1.0 + y * y), ((6, 1), (1, 5))),
    "literals": (lambda x, y: (x * 2 + 0.5 - 1 / y) ** 2 + tnp.sqrt(x * x) ** 0.5 + 3 ** y, ((6, 5), (6, 5))),
    "where": (lambda x, y: tnp.where(x > 0.5, x * 3.0, -y) + tnp.maximum(x, 0.25) - tnp.minimum(y, x),
              ((6, 5), (6, 5))),
    "logic": (lambda x, y: tnp.where(tnp.logical_and(x > 0.2, tnp.logical_not(y >= 0.7)), 1.0, y) * x,
              ((6, 5), (6, 5))),
    "log and exp": (lambda x, y: tnp.log1p(tnp.exp(x)) - tnp.expm1(y * 0.1) + tnp.log(y) * tnp.log10(x + 1),
                    ((6, 5), (6, 5))),
    "shared operand": (lambda x, y: tnp.sin(x) * tnp.sin(x) + tnp.sin(x) * y, ((6, 5), (5,))),
    "0-d operand": (lambda x, y: (x - tnp.sum(y)) * 2.0 + tnp.max(x), ((6, 5), (5,))),
}


@needs_numexpr
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("case", list(CASES))
def test_fused_program_matches_the_unfused_one(case, dtype, always_pays):
    rng = np.random.default_rng(0)
    fn, shapes = CASES[case]
    args = [rng.uniform(0.1, 1.0, size=s).astype(dtype) for s in shapes]
    assert_fused_matches(fn, args, dtype)


@needs_numexpr
def test_mixed_precision_promotes_as_numpy(always_pays):
    rng = np.random.default_rng(0)
    x, y = rng.uniform(size=(4, 3)).astype(np.float32), rng.uniform(size=3)
    fused = assert_fused_matches(lambda x, y: tnp.sin(x * 1.5) + y * 2.0, (x, y), np.float32)  # sin in float32
    assert fused.outputs[0].aval.dtype == np.float64


@needs_numexpr
def test_python_scalars_stay_weak_float32_stays_float32(always_pays):
    """``float32 * 1.01`` multiplies by float32(1.01) in NumPy 2: the fused kernel does the same, so
    correctly rounded arithmetic gives the very same bits."""
    rng = np.random.default_rng(0)
    x = rng.uniform(size=50).astype(np.float32)
    fn = lambda x: (x * 1.01 + 0.1) / 3 - 2.5  # noqa: E731
    program = tg.make_program(fn)(x)
    fused = fusion.fuse(program)
    assert prims(fused) == ["fused"]
    (got,) = run(fused, [x])
    expected = (x * np.float32(1.01) + np.float32(0.1)) / np.float32(3) - np.float32(2.5)
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, expected)


SPECIAL = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 0.5, 2.0, 1e-30, 1e30, -3.5, 0.1, 7.0]


def _special_operands(dtype):
    n = len(SPECIAL)
    return np.array(SPECIAL * n, dtype), np.repeat(np.array(SPECIAL, dtype), n)


def _op_program(name, x, y):
    op = getattr(tnp, name, None) or getattr(_structural, name)  # add_any: the spine's, not tnp's
    if name == "where":
        return lambda x, y: -op(x > y, x, y)
    if name in ("logical_and", "logical_or", "bitwise_and", "bitwise_or"):  # the bitwise ones: on bools only
        return lambda x, y: tnp.logical_not(op(x > 0, y > 0))
    if name == "logical_not":
        return lambda x, y: tnp.logical_not(op(x > y))
    arity = getattr(np, name, np.add).nin  # add_any adds two operands
    if getattr(np, name, np.add)(x[:1], *([y[:1]] if arity == 2 else [])).dtype == bool:
        return lambda x, y: tnp.logical_not(op(x, y))
    return (lambda x, y: -op(x, y)) if arity == 2 else (lambda x, y: -op(x))


@needs_numexpr
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", sorted(p.name for p in PRIMITIVES if p.fusion is not None))
def test_every_fusible_operation_on_special_values(name, dtype, always_pays):
    """Each operation numexpr may run, on nan, infinities, signed zeros and ordinary values: the same
    dtype, nan and infinity in the same places, finite values within 1 ulp."""
    x, y = _special_operands(dtype)
    program = tg.make_program(_op_program(name, x, y))(x, y)
    fused = fusion.fuse(program)
    assert "fused" in prims(fused), f"{name} on {np.dtype(dtype).name} was not fused"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        (expected,), (got,) = run(program, (x, y)), run(fused, (x, y))
    assert got.dtype == expected.dtype
    if expected.dtype == bool:
        np.testing.assert_array_equal(got, expected)
        return
    np.testing.assert_array_equal(np.isnan(got), np.isnan(expected))
    np.testing.assert_array_equal(np.where(np.isinf(got), got, 0), np.where(np.isinf(expected), expected, 0))
    finite = np.isfinite(expected)
    ulps = np.abs(got[finite] - expected[finite]) / np.spacing(np.abs(expected[finite]).astype(dtype))
    assert np.max(ulps, initial=0) <= 1


# ---- fusion: which groups ---------------------------------------------------------------------------
def _long_chain(x):
    for _ in range(10):
        x = x * 1.5 - 0.25
    return x


@needs_numexpr
def test_small_arrays_fuse_only_groups_that_pay():
    """The real cost rule: a 3-operation ``sin`` group on 16 elements does not pay for a numexpr call;
    a 20-operation arithmetic group does; on MAX_ELEMENTS elements or more nothing is fused."""
    x16 = np.ones(16, np.float32)
    assert "fused" not in prims(fusion.fuse(tg.make_program(lambda x: tnp.sin(x) * 1.01 + 0.1)(x16)))
    assert prims(fusion.fuse(tg.make_program(_long_chain)(x16))) == ["fused"]
    big = np.ones(fusion.MAX_ELEMENTS, np.float32)
    program = tg.make_program(_long_chain)(big)
    assert fusion.fuse(program) is program


@needs_numexpr
def test_single_operations_and_scalar_results_are_not_fused(always_pays):
    x = np.ones(8)
    program = tg.make_program(lambda x: tnp.sum(tnp.sin(x)) * 2.0 + 1.0)(x)  # sin alone; the rest is 0-d
    assert fusion.fuse(program) is program


@needs_numexpr
def test_intermediates_read_outside_a_group_end_it(always_pays):
    """``e`` feeds the next step and a ``sum``: it is the root of its group, and stays a variable."""
    rng = np.random.default_rng(0)
    def fn(x):
        e = tnp.sin(x) * 2.0 + 1.0
        return tnp.cos(e) * 3.0, tnp.sum(e)
    x = rng.normal(size=8)
    program = tg.make_program(fn)(x)
    fused = fusion.fuse(program)
    assert prims(fused) == ["fused", "fused", "sum"]
    assert fused.eqns[2].inputs[0] is fused.eqns[0].out
    assert_fused_matches(fn, (x,), np.float64)


@needs_numexpr
def test_a_group_recomputes_an_input_it_can_make_from_its_other_inputs(always_pays):
    """``v`` is read by ``w``'s group and by a ``sum``: the group computes it again from ``x`` (two
    equations) instead of reading it, and the ``sum`` still reads the one computed once."""
    def fn(x):
        v = tnp.sin(x) * 2.0
        return (tnp.cos(v) + x) * 3.0 - v, tnp.sum(v)
    x = np.random.default_rng(0).normal(size=8)
    fused = assert_fused_matches(fn, (x,), np.float64)
    w = next(eqn for eqn in fused.eqns if eqn.out is fused.outputs[0])
    assert w.inputs == [fused.invars[0]]
    assert prims(fused) == ["fused", "fused", "sum"]


def _steps(x, n):
    for _ in range(n):
        x = tnp.sin(x) * 1.01 + 0.1
    return tnp.sum(x)


@needs_numexpr
def test_a_gradients_forward_chain_fuses_once_its_backward_group_recomputes_it():
    """The real cost rule on 16 elements: the backward group of 16 steps reads one forward value
    and recomputes the others, so the forward steps (each read by it before) fuse as well: no
    NumPy call is left, and the gradient is the eager one to the rounding of 48 steps."""
    steps = 48
    x = np.linspace(-1.0, 1.0, 16, dtype=np.float32)
    grad = tg.grad(lambda x: _steps(x, steps))
    program = passes.optimize(tg.make_program(grad)(x))
    assert set(prims(program)) == {"fused"}
    assert len(program.eqns) <= 2 * steps // 16 + 2  # without recomputation: 3 NumPy calls a step
    assert_close(tg.jit(grad)(x), grad(x), ulps=4 * steps)


@needs_numexpr
def test_recomputation_stays_within_the_body_cap(always_pays, monkeypatch):
    """With room for no extra equation a group recomputes nothing, and the numbers are the same."""
    monkeypatch.setattr(fusion, "MAX_BODY", fusion.MAX_OPS)
    x = np.linspace(-1.0, 1.0, 16)
    grad = tg.grad(lambda x: _steps(x, 20))
    program = passes.optimize(tg.make_program(grad)(x))
    assert max(len(eqn.inputs) for eqn in program.eqns if eqn.prim.name == "fused") > 2
    assert_close(run(program, (x,))[0], grad(x))


@needs_numexpr
def test_no_kernel_expands_past_the_tree_cap(always_pays):
    """``x * x`` reads its operand twice, so the expression written out as a tree (what numexpr's
    compiler builds, and the kernel's text) doubles at every step: 2**20 nodes here, which would take
    the compiler minutes. Groups past ``MAX_TREE`` are left unfused, the result is the same."""
    def fn(x):
        for _ in range(20):
            x = tnp.tanh(x * x) + 0.5
        return x
    x = np.linspace(-1.0, 1.0, 16)
    program = tg.make_program(fn)(x)
    fused = fusion.fuse(program)
    kernels = [eqn.params["kernel"] for eqn in fused.eqns if eqn.prim.name == "fused"]
    assert kernels and all(k.text.count("(") <= fusion.MAX_TREE for k in kernels)
    assert_close(run(fused, (x,))[0], run(program, (x,))[0], rtol=TOL[np.float64])


@needs_numexpr
def test_program_outputs_are_not_absorbed(always_pays):
    rng = np.random.default_rng(0)
    x = rng.normal(size=8)
    fused = assert_fused_matches(lambda x: (tnp.sin(x) * 2.0, tnp.cos(tnp.sin(x) * 2.0) + 1.0), (x,), np.float64)
    assert fused.outputs[0] in [eqn.out for eqn in fused.eqns]


@needs_numexpr
def test_groups_respect_the_input_cap(always_pays):
    rng = np.random.default_rng(0)
    xs = [rng.uniform(0.5, 1.5, size=4) for _ in range(fusion.MAX_INPUTS + 9)]

    def product(*xs):
        out = xs[0]
        for x in xs[1:]:
            out = out * x
        return out
    fused = assert_fused_matches(product, xs, np.float64)
    assert prims(fused) == ["fused", "fused"]
    assert all(len(eqn.inputs) <= fusion.MAX_INPUTS for eqn in fused.eqns)


@needs_numexpr
def test_weakly_typed_scalar_inputs_keep_float32():
    """A Python float argument is a weakly typed input: its operations stay out of numexpr (which
    would make it float64), and the result stays float32."""
    x = np.linspace(0, 1, 16, dtype=np.float32)
    fn = lambda x, s: _long_chain(x) * s + s  # noqa: E731
    program = tg.make_program(fn)(x, 0.5)
    fused = fusion.fuse(program)
    (got,) = run(fused, (x, 0.5))
    (expected,) = run(program, (x, 0.5))
    assert got.dtype == np.float32
    assert_close(got, expected, rtol=1e-6)


@needs_numexpr
def test_integer_and_complex_operations_are_left_alone(always_pays):
    i = np.arange(8)
    z = np.ones(8, complex)
    for fn, arg in ((lambda i: (i * 3 + 1) * i, i), (lambda z: tnp.sin(z) * 2.0 + 1.0, z)):
        program = tg.make_program(fn)(arg)
        assert fusion.fuse(program) is program


def test_without_numexpr_fuse_returns_the_program(monkeypatch):
    monkeypatch.setattr(fusion, "_nx", None)
    program = tg.make_program(_long_chain)(np.ones(16))
    assert fusion.fuse(program) is program


@needs_numexpr
def test_fused_program_prints_its_kernel_and_typechecks():
    program = fusion.fuse(tg.make_program(_long_chain)(np.ones(16)))
    program.typecheck()
    text = str(program)
    assert "fused[kernel=subtract(multiply(" in text
    assert "    with _lock:" in compile_program(program).source


# ---- fusion through jit -----------------------------------------------------------------------------
def chain(x):
    for _ in range(200):
        x = tnp.sin(x) * 1.01 + 0.1
    return tnp.sum(x)


@needs_numexpr
def test_jit_with_fusion_agrees_with_jit_without(monkeypatch):
    x = np.linspace(-1, 1, 16, dtype=np.float32)
    plain = tg.jit(tg.grad(chain))(x)
    optimize = api.optimize
    monkeypatch.setattr(api, "optimize", lambda program: fusion.fuse(optimize(program)))
    jitted = tg.jit(tg.grad(chain))
    got = jitted(x)
    assert got.dtype == np.float32
    assert_close(got, plain, rtol=1e-5)
    assert_close(jitted(2 * x), tg.grad(chain)(2 * x), rtol=1e-5)
    assert jitted._cache_size() == 1
    assert "with _lock" in jitted._cache[next(iter(jitted._cache))]._run.source
    # under an outer transform the unfused program runs through bind
    assert_close(tg.grad(lambda x: tnp.sum(tg.jit(_long_chain)(x) ** 2))(x),
                 tg.grad(lambda x: tnp.sum(_long_chain(x) ** 2))(x), rtol=1e-6)


@needs_numexpr
def test_a_fused_program_runs_safely_from_several_threads(monkeypatch):
    rng = np.random.default_rng(0)
    optimize = api.optimize
    monkeypatch.setattr(api, "optimize", lambda program: fusion.fuse(optimize(program)))
    jitted = tg.jit(lambda x: tnp.tanh(_long_chain(x)) * 2.0)
    xs = [rng.normal(size=(16, 16)) for _ in range(4)]
    expected = [jitted(x) for x in xs]

    def work(i):
        return all(np.array_equal(jitted(xs[i]), expected[i]) for _ in range(300))
    with ThreadPoolExecutor(4) as pool:
        assert all(pool.map(work, range(4)))


# ---- literals in the executor -----------------------------------------------------------------------
BINARY_UFUNCS = sorted(p.name for p in PRIMITIVES if isinstance(p.impl, np.ufunc) and p.impl.nin == 2)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", BINARY_UFUNCS)
def test_literal_operands_give_numpys_weak_scalar_results(name, dtype):
    """The executor passes ``1.01`` to a ufunc over float32 arrays as a float32 0-d array: the same
    dtype and bits as NumPy with the Python scalar."""
    prim = next(p for p in PRIMITIVES if p.name == name)
    x = np.array(SPECIAL, dtype)
    for literal in (2, 1.01, True):
        for fn in (lambda x, c=literal: prim.bind(x, c), lambda x, c=literal: prim.bind(c, x)):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                try:
                    expected = evaluate(tg.make_program(fn)(x), [x])[0]
                except (TypeError, ValueError):
                    continue  # NumPy refuses it (bitwise ops on floats): nothing to compare
                (got,) = run(tg.make_program(fn)(x), [x])
            assert got.dtype == expected.dtype
            np.testing.assert_array_equal(got, expected)


# ---- buffer reuse -----------------------------------------------------------------------------------
def test_a_chain_runs_in_place_in_one_buffer():
    rng = np.random.default_rng(0)
    x = rng.normal(size=5)
    program = tg.make_program(lambda x: tnp.cos(tnp.sin(x) * 1.01 + 0.1) * 2.0)(x)
    assert sorted(buffers.plan(program)) == [1, 2, 3, 4]  # all but the first write into the first's buffer
    text, _ = source(program)
    assert "v1 = f1(v0, l" in text and ", v0)" in text
    np.testing.assert_array_equal(run(program, [x])[0], evaluate(program, [x])[0])


def _views_fn(x, y):
    a = tnp.sin(x)
    t = a.T  # a view of a's buffer, read after a's last use
    r = tnp.reshape(a, (9,))
    b = tnp.cos(y) * 2.0  # same shape and dtype as a: must not land in a's buffer while t lives
    c = b + t
    d = tg.stop_gradient(c)  # d is c itself
    e = d * 3.0
    return e + tnp.reshape(r, (3, 3)) + d, c[::-1]


def test_reuse_never_writes_into_memory_a_live_view_shares():
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=(3, 3)), rng.normal(size=(3, 3))
    program = tg.make_program(_views_fn)(x, y)
    got, expected = run(program, [x, y]), evaluate(program, [x, y])
    for g, e in zip(got, expected):
        np.testing.assert_array_equal(g, e)
    assert not np.shares_memory(got[0], got[1])


def test_inputs_and_outputs_are_never_written():
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=(3, 3)), rng.normal(size=(3, 3))
    x0, y0 = x.copy(), y.copy()

    def fn(x, y):
        a = tnp.sin(x) * 2.0  # an output, and read afterwards
        return a, tnp.cos(a) + y, a * 3.0 - x
    program = tg.make_program(fn)(x, y)
    got, expected = run(program, [x, y]), evaluate(program, [x, y])
    for g, e in zip(got, expected):
        np.testing.assert_array_equal(g, e)
    np.testing.assert_array_equal(x, x0)
    np.testing.assert_array_equal(y, y0)


def _random_program(rng):
    """A random function of two (3, 3) arrays mixing ufuncs, literals and views, with 1-3 outputs."""
    recipe = []
    for _ in range(rng.integers(5, 25)):
        kind = rng.choice(["unary", "binary", "literal", "view"])
        recipe.append((kind, rng.integers(0, 6), rng.integers(0, 1000), rng.integers(0, 1000)))
    outs = rng.integers(0, 1000, size=rng.integers(1, 4))
    unary = [tnp.sin, tnp.cos, tnp.tanh, tnp.negative, tnp.square]
    binary = [tnp.add, tnp.multiply, tnp.subtract, tnp.maximum]
    views = [lambda v: v.T, lambda v: v[::-1], lambda v: tnp.reshape(tnp.reshape(v, (9,)), (3, 3)),
             tg.stop_gradient, lambda v: v.astype(v.dtype), lambda v: tnp.broadcast_to(v[0], (3, 3))]

    def fn(x, y):
        vals = [x, y]
        for kind, op, i, j in recipe:
            a, b = vals[i % len(vals)], vals[j % len(vals)]
            if kind == "unary":
                vals.append(unary[op % len(unary)](a))
            elif kind == "binary":
                vals.append(binary[op % len(binary)](a, b))
            elif kind == "literal":
                vals.append(a * 0.5 + 1.0)
            else:
                vals.append(views[op](a))
        return [vals[k % len(vals)] for k in outs]
    return fn


@pytest.mark.parametrize("seed", range(60))
def test_reuse_on_random_programs_gives_the_bind_path_results(seed):
    rng = np.random.default_rng(seed)
    x, y = rng.normal(size=(3, 3)), rng.normal(size=(3, 3))
    program = tg.make_program(_random_program(rng))(x, y)
    expected = evaluate(program, [x.copy(), y.copy()])
    for donate in ((), (0,), (0, 1)):
        args = [x.copy(), y.copy()]
        got = run(program, args, donate)
        for g, e in zip(got, expected):
            np.testing.assert_array_equal(g, e)
        if not donate:
            np.testing.assert_array_equal(args[0], x)


def test_donated_inputs_are_reused_and_others_are_not():
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=4), rng.normal(size=4)
    program = tg.make_program(lambda x, y: tnp.sin(x) * y + 1.0)(x, y)
    assert buffers.plan(program, donate=(0,))[0] is program.invars[0]  # sin(x) writes into x
    args = [x.copy(), y.copy()]
    (got,) = run(program, args, donate=(0,))
    np.testing.assert_array_equal(got, np.sin(x) * y + 1.0)
    assert np.shares_memory(got, args[0])  # the result lives in the donated buffer
    np.testing.assert_array_equal(args[1], y)
    (got,) = run(program, [x, y])
    assert not np.shares_memory(got, x)


def test_a_donated_input_is_used_only_when_safe():
    """Read-only arrays, views, an array passed twice, and an array the program holds as a constant
    are not written: the equation allocates."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=4)
    program = tg.make_program(lambda x, y: tnp.sin(x) * y + 1.0)(x, x)
    expected = np.sin(x) * x + 1.0
    readonly = x.copy()
    readonly.flags.writeable = False
    base = np.concatenate([x, x])
    twice = x.copy()
    for args in ([readonly, x.copy()], [base[:4], x.copy()], [twice, twice], [twice, twice[::-1][::-1]]):
        before = [a.copy() for a in args]
        (got,) = run(program, args, donate=(0,))
        np.testing.assert_array_equal(got, expected)
        for a, b in zip(args, before):
            np.testing.assert_array_equal(a, b)
    c = x.copy()
    program = tg.make_program(lambda x: tnp.sin(x) * c + 1.0)(c)
    (got,) = run(program, [c], donate=(0,))
    np.testing.assert_array_equal(got, expected)
    np.testing.assert_array_equal(c, x)
