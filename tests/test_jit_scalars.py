"""Python scalars passed to a jitted function are traced, weakly typed (JAX's rule, with NumPy 2's
promotion): a Python ``int``, ``float`` or ``bool`` reaches every primitive an array reaches, as an
index (``x[i]``, ``take``, ``take_along_axis``, ``.at[i]``), as an operand (comparisons, arithmetic,
``where``) and as a loop bound (``fori_loop``), and gives what NumPy gives for it, values and dtype, in
the Python and the compiled executor (``TAPEGRAD_COMPILED_EXECUTOR=1 TAPEGRAD_NATIVE_STRICT=1`` runs
this file on the second). NumPy scalars and 0-d arrays, strongly typed, are swept alongside.

Each call is compared with NumPy's, and the gradient through the array operand under ``grad(jit(f))``
and ``jit(grad(f))`` with the eager gradient. A JAX-style training loop, ``update(i, params)`` with a
Python int counter, stages once for every value of the counter.
"""
from __future__ import annotations

import logging

import numpy as np
import pytest

import tapegrad as tg
import tapegrad.numpy as tnp
from _tol import assert_close
from tapegrad.errors import ConcretizationError

X = (np.arange(12, dtype=np.float32).reshape(4, 3) - 5.0) / 4  # float32: weak and strong promotion differ
ROWS = np.array([[0, 2, 1]] * 4)


def _updated(write):
    """The NumPy reference of an ``.at`` update: ``write(copy, i)`` in place, the copy returned."""
    def ref(x, i):
        y = x.copy()
        write(y, i)
        return y
    return ref


def _set(y, i):
    y[i] = 5.0


def _add(y, i):
    y[i] += 5.0


def _multiply(y, i):
    y[i] *= 2.0


def _set_column(y, i):
    y[:, i] = np.array([1.0, 2.0, 3.0, 4.0], np.float32)


# (tapegrad function, NumPy reference) of x and an index i
INDEXED = {
    "x[i]": (lambda x, i: x[i], lambda x, i: x[i]),
    "x[1, i]": (lambda x, i: x[1, i], lambda x, i: x[1, i]),
    "x[:, i]": (lambda x, i: x[:, i], lambda x, i: x[:, i]),
    "x[i, ::-1]": (lambda x, i: x[i, ::-1], lambda x, i: x[i, ::-1]),
    "x[ROWS[0], i]": (lambda x, i: x[ROWS[0], i], lambda x, i: x[ROWS[0], i]),
    "x[i + 1]": (lambda x, i: x[i + 1], lambda x, i: x[i + 1]),
    "take axis 0": (lambda x, i: tnp.take(x, i, axis=0), lambda x, i: np.take(x, i, axis=0)),
    "take axis 1": (lambda x, i: tnp.take(x, i, axis=1), lambda x, i: np.take(x, i, axis=1)),
    "take flat": (lambda x, i: tnp.take(x, i), lambda x, i: np.take(x, i)),
    "take_along_axis": (lambda x, i: tnp.take_along_axis(x, ROWS * 0 + i, axis=1),
                        lambda x, i: np.take_along_axis(x, ROWS * 0 + i, axis=1)),
    ".at[i].get": (lambda x, i: x.at[i].get(), lambda x, i: x[i]),
    ".at[i].set": (lambda x, i: x.at[i].set(5.0), _updated(_set)),
    ".at[i].add": (lambda x, i: x.at[i].add(5.0), _updated(_add)),
    ".at[i].multiply": (lambda x, i: x.at[i].multiply(2.0), _updated(_multiply)),
    ".at[:, i].set": (lambda x, i: x.at[:, i].set(np.array([1.0, 2.0, 3.0, 4.0], np.float32)),
                      _updated(_set_column)),
}
INDICES = {"int": 1, "negative int": -2, "np.int64": np.int64(1), "0-d array": np.array(2)}

# functions of the array module, x and a scalar s: tnp under jit, np for the reference
OPERATED = {
    "x < s": lambda xp, x, s: x < s,
    "s <= x": lambda xp, x, s: s <= x,
    "x == s": lambda xp, x, s: x == s,
    "s * x": lambda xp, x, s: s * x,
    "x + s": lambda xp, x, s: x + s,
    "x - s": lambda xp, x, s: x - s,
    "x / (s + 1)": lambda xp, x, s: x / (s + 1),
    "maximum(x, s)": lambda xp, x, s: xp.maximum(x, s),
    "where(x > 0, x, s)": lambda xp, x, s: xp.where(x > 0, x, s),
    "where(s, x, -x)": lambda xp, x, s: xp.where(s, x, -x),
    "clip(x, s - 2, s)": lambda xp, x, s: xp.clip(x, s - 2, s),
}
SCALARS = {"float": 0.75, "np.float64": np.float64(0.75), "0-d float64": np.array(0.75),
           "int": 1, "np.int64": np.int64(1), "bool": True, "np.bool_": np.True_}


def _counterpart(value):
    """The NumPy scalar of a Python scalar (strongly typed, with the same dtype): where the Python
    scalar's program compiles, so must this one's, and conversely."""
    return {bool: np.bool_, int: np.int64, float: np.float64}[type(value)](value)


def _same(got, expected):
    """Equal values and dtypes, as NumPy gives them."""
    got = np.asarray(got)
    assert got.dtype == np.asarray(expected).dtype, (got.dtype, np.asarray(expected).dtype)
    assert got.shape == np.shape(expected)
    assert_close(got, expected, rtol=1e-6)


def _same_executor(fn, *args):
    """With the compiled executor on, a Python-scalar argument compiles where its NumPy scalar does
    (with it off, both say "python")."""
    k = next(k for k, a in enumerate(args) if type(a) in (bool, int, float))
    strong = args[:k] + (_counterpart(args[k]),) + args[k + 1:]
    assert tg.jit(fn).executor(*args) == tg.jit(fn).executor(*strong)


# ---- indices ------------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", INDICES)
@pytest.mark.parametrize("case", INDEXED)
def test_a_traced_index_gives_numpys_result(case, kind):
    fn, ref = INDEXED[case]
    i = INDICES[kind]
    _same(tg.jit(fn)(X, i), ref(X, i))
    if type(i) is int:
        _same_executor(fn, X, i)


@pytest.mark.parametrize("kind", ["int", "negative int", "np.int64"])
@pytest.mark.parametrize("case", INDEXED)
def test_the_gradient_through_the_indexed_array(case, kind):
    fn, i = INDEXED[case][0], INDICES[kind]

    def loss(x, i):
        return tnp.sum(fn(x, i) ** 2)
    expected = tg.grad(loss)(X, i)
    assert expected.dtype == np.float32
    _same(tg.grad(tg.jit(loss))(X, i), expected)
    _same(tg.jit(tg.grad(loss))(X, i), expected)


def test_the_index_is_traced_once_for_every_int():
    stagings = []

    def row(x, i):
        stagings.append(i)
        return x[i] * 2.0
    f = tg.jit(row)
    for i in range(-4, 4):
        _same(f(X, i), X[i] * 2.0)
    assert len(stagings) == 1 and f._cache_size() == 1
    assert "int[]" in str(f.program(X, 0))  # weakly typed in the program, an int64 index inside it


@pytest.mark.parametrize("index", [4, -5, 100, np.int64(4)])
@pytest.mark.parametrize("case", ["x[i]", "x[1, i]", "take axis 0", ".at[i].set", ".at[i].add", ".at[i].multiply"])
def test_an_index_out_of_range_raises_index_error(case, index):
    fn, ref = INDEXED[case]
    with pytest.raises(IndexError):
        ref(X, index)
    with pytest.raises(IndexError):
        tg.jit(fn)(X, index)
    if case != ".at[i].add":  # whose gradient in x is all ones, the index unread: the update is dead code
        with pytest.raises(IndexError):
            tg.jit(tg.grad(lambda x, i: tnp.sum(fn(x, i))))(X, index)


@pytest.mark.parametrize("flag", [True, np.True_, False], ids=["bool", "np.bool_", "False"])
def test_a_bool_index_is_a_mask_as_in_numpy(flag):
    # x[True] has shape (1, 4, 3) and x[False] (0, 4, 3): data-dependent, so a traced flag is refused
    # (JAX refuses it too), Python bool and NumPy bool alike; static, it is NumPy's mask
    for route in (lambda x, b: x[b], lambda x, b: x.at[b].get()):
        with pytest.raises(ConcretizationError, match="boolean mask"):
            tg.jit(route)(X, flag)
        _same(tg.jit(route, static_argnums=1)(X, flag), X[flag])
    # a write through a 0-d mask keeps x's shape: it stages
    _same(tg.jit(lambda x, b: x.at[b].set(5.0))(X, flag), _updated(_set)(X, flag))
    _same(tg.jit(lambda x, b: x.at[b].add(5.0))(X, flag), _updated(_add)(X, flag))
    # take reads a bool as 0 or 1, never as a mask (NumPy casts it), eagerly and under jit
    _same(tnp.take(X, flag, axis=0), np.take(X, flag, axis=0))
    _same(tg.jit(lambda x, b: tnp.take(x, b, axis=0))(X, flag), np.take(X, flag, axis=0))
    _same(tg.jit(lambda x, b: tnp.take(x, b))(X, flag), np.take(X, flag))


def test_values_written_through_a_traced_index_may_be_traced_scalars_too():
    f = tg.jit(lambda x, i, v: x.at[i].set(v))
    _same(f(X, 2, 0.5), _updated(lambda y, i: y.__setitem__(i, 0.5))(X, 2))  # float32 kept: v is weak
    _same(f(X, -1, 3), _updated(lambda y, i: y.__setitem__(i, 3))(X, -1))
    with pytest.raises(TypeError, match="a Python float cannot be written into x of dtype int64"):
        f(np.arange(3), 1, 2.5)


# ---- operands -----------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", SCALARS)
@pytest.mark.parametrize("case", OPERATED)
def test_a_traced_scalar_operand_gives_numpys_result(case, kind):
    op, s = OPERATED[case], SCALARS[kind]
    with np.errstate(all="ignore"):
        expected = op(np, X, s)

    def fn(x, s):
        return op(tnp, x, s)
    _same(op(tnp, X, s), expected)  # eagerly
    _same(tg.jit(fn)(X, s), expected)
    if type(s) in (bool, int, float):
        _same_executor(fn, X, s)
    if np.asarray(expected).dtype.kind == "f":
        def loss(x, s):
            return tnp.sum(op(tnp, x, s) * x)
        grad = tg.grad(loss)(X, s)
        _same(tg.grad(tg.jit(loss))(X, s), grad)
        _same(tg.jit(tg.grad(loss))(X, s), grad)


def test_a_traced_scalar_has_a_numpy_dtype_and_stays_weak():
    seen = []

    def f(x, s):
        seen.append((s.dtype, s.dtype.kind))
        return x * s, x * tnp.asarray(s)  # asarray makes it a strongly typed array, as np.asarray does
    for s, dtype in ((0.5, np.float64), (2, np.int64), (True, np.bool_)):
        weak, strong = tg.jit(f)(X, s)
        assert seen[-1] == (np.dtype(dtype), np.dtype(dtype).kind)
        _same(weak, X * s)
        _same(strong, X * np.asarray(s))


def test_a_scalar_captured_by_a_loop_body_or_a_branch_stays_weak():
    cases = {
        "fori_loop": lambda x, s: tg.fori_loop(0, 3, lambda k, c: c * s, x),
        "while_loop": lambda x, s: tg.while_loop(lambda c: c[0] < 3, lambda c: (c[0] + 1, c[1] * s), (0, x))[1],
        "scan": lambda x, s: tg.scan(lambda c, row: (c + row * s, None), x[0], x)[0],
        "cond": lambda x, s: tg.cond(s > 1, lambda x: x * s, lambda x: x - s, x),
    }
    for name, fn in cases.items():
        for s in (0.5, 2.0, 3):
            expected = fn(X, s)
            assert np.asarray(expected).dtype == np.float32, name
            _same(tg.jit(fn)(X, s), expected)


# ---- loop bounds --------------------------------------------------------------------------------
@pytest.mark.parametrize("n", [0, 1, 4, np.int64(3)], ids=["0", "1", "4", "np.int64"])
def test_a_traced_fori_loop_bound(n):
    x = X.astype(np.float64)

    def upper(x, n):
        return tg.fori_loop(0, n, lambda k, c: c * 1.5 + k, x)

    def lower(x, n):
        return tg.fori_loop(n, 5, lambda k, c: c * 1.5 + k, x)
    for fn in (upper, lower):
        expected = fn(x, int(n))  # a concrete bound: a scan
        _same(tg.jit(fn)(x, n), expected)

        def loss(x, n, fn=fn):
            return tnp.sum(fn(x, n))
        grad = tg.grad(loss)(x, int(n))
        _same(tg.jit(tg.grad(loss))(x, n), grad)
        _same(tg.grad(tg.jit(loss))(x, n), grad)


# ---- a training loop ----------------------------------------------------------------------------
def test_a_jax_style_training_loop_passes_its_step_as_a_python_int(caplog):
    """``update(i, params)``: the step counter a Python int, traced (one program for every step),
    the learning rate decaying with it, float32 parameters kept float32 (the int is weak)."""
    rng = np.random.default_rng(0)
    inputs, targets = rng.normal(size=(16, 3)).astype(np.float32), rng.normal(size=16).astype(np.float32)
    stagings = []

    def loss(params, x, y):
        return tnp.mean((x @ params["w"] + params["b"] - y) ** 2)

    def update(i, params):
        stagings.append(i)
        lr = 0.1 / (1 + i)
        grads = tg.grad(loss)(params, inputs, targets)
        return {k: params[k] - lr * grads[k] for k in params}

    init = {"w": np.zeros(3, np.float32), "b": np.zeros((), np.float32)}
    step = tg.jit(update)
    tg.config.explain_cache_misses = True
    caplog.set_level(logging.WARNING, logger="tapegrad.jit")
    try:
        params, eager = init, init
        for i in range(5):
            params, eager = step(i, params), update(i, eager)
            assert {k: np.asarray(v).dtype for k, v in params.items()} == {"w": np.float32, "b": np.float32}
            for k in params:
                assert_close(params[k], eager[k], rtol=1e-6)
    finally:
        tg.config.explain_cache_misses = False
    assert len(stagings) - 5 == 1  # five eager calls, and one staging for five jitted steps
    assert step._cache_size() == 1
    assert not [r for r in caplog.records if r.name == "tapegrad.jit"]
    assert float(loss(params, inputs, targets)) < float(loss(init, inputs, targets))


@pytest.mark.parametrize("loop", ["fori_loop", "while_loop", "scan"])
def test_a_python_scalar_argument_as_a_loop_carry(loop):
    """A traced Python scalar as the carry takes the body's dtype for it, as the eager loop does: the
    loop is staged again on the strong type, instead of a carry-type error under jit."""
    run = {"fori_loop": lambda s: tg.fori_loop(0, 3, lambda k, c: c * 2 + k, s),
           "while_loop": lambda s: tg.while_loop(lambda c: c < 10, lambda c: c + 3, s),
           "scan": lambda s: tg.scan(lambda c, x: (c + x, c), s, np.arange(3.0))}[loop]
    for value in (1, 1.5):
        got, want = tg.jit(run)(value), run(value)
        for g, w in zip(tg.tree.tree_leaves(got), tg.tree.tree_leaves(want)):
            assert np.asarray(g).dtype == np.asarray(w).dtype
            assert_close(g, w)
