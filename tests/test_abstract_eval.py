"""Shape rules against the dummy evaluation, and staging that runs no impl.

Every primitive whose abstract eval is a shape rule (``tapegrad.extend.def_shape_rule``, and the
ufunc rule every elementwise primitive gets) is checked here against the impl run on dummies (NumPy
deciding shape and dtype itself) on sample operands: where NumPy refuses the operands the rule must
decline (return None), elsewhere both must give the same shape and dtype. A primitive given a rule
without samples here fails :func:`test_every_shape_rule_has_samples`, so a wrong rule cannot slip in.
"""
from __future__ import annotations

import itertools
import warnings

import numpy as np
import pytest

import tapegrad as tg
import tapegrad.numpy as tnp
from _tol import assert_close
from tapegrad import extend
from tapegrad._core import Primitive, ShapedArray
from tapegrad._rules import ShapeRule
from tapegrad.scipy.special import logsumexp

A = ShapedArray
F32, F64, I8, I32, U16, B, C64 = (np.dtype(t) for t in ("float32", "float64", "int8", "int32", "uint16", "bool",
                                                        "complex64"))

# operands for elementwise primitives: strong dtypes of a few broadcastable shapes, and weak Python scalars
ELEMENTWISE = [A((3,), F32), A((2, 3), F64), A((3,), I32), A((), B), A((1, 3), C64), A((4,), F32), A((), float),
               A((), int), A((2, 1), U16)]

REDUCTION_AXES = [(None, False), (None, True), ((0,), False), ((0, 2), True), ((2,), False)]
REDUCED = [A((2, 3, 4), d) for d in (F32, F64, I8, I32, U16, B, C64)] + [A((), F32), A((), float)]


def _reductions(argmax: bool):
    if argmax:
        return [((a,), {"axis": axis, "keepdims": k}) for a in REDUCED for axis in (None, 0, 2) for k in (False, True)]
    return [((a,), {"axis": axis, "keepdims": k}) for a in REDUCED for axis, k in REDUCTION_AXES]


def _index_samples(prim_name):
    """``(avals, params)`` of the ``index_add``/``index_set`` equations of staged ``.at[...]`` updates."""
    x, y, rows = np.zeros((5, 3), np.float32), np.ones(3, np.float64), np.array([0, 2, 2])
    updates = [lambda x, y: x.at[1:3].add(y), lambda x, y: x.at[rows].set(y),
               lambda x, y: x.at[rows, 1].add(y), lambda x, y: x.at[0].set(y)]
    samples = []
    for update in updates:
        program = tg.make_program(update)(x, y)
        for eqn in program.eqns:
            if eqn.prim.name == prim_name:
                avals = [ShapedArray((), type(v.value)) if not hasattr(v, "aval") else v.aval for v in eqn.inputs]
                samples.append((avals, eqn.params))
    # a value that does not broadcast to the written part, and one that cannot be cast into x
    spec = samples[0][1]
    samples.append(([A((5, 3), F32), A((4,), F32)], spec))
    samples.append(([A((5, 3), I32), A((3,), F64)], spec))
    return samples


SAMPLES = {
    "matmul": [((A((3, 4), F32), A((4, 5), F32)), {}), ((A((4,), F32), A((4, 5), F64)), {}),
               ((A((3, 4), F32), A((4,), F32)), {}), ((A((4,), I32), A((4,), I32)), {}),
               ((A((2, 1, 3, 4), F64), A((5, 4, 2), F32)), {}), ((A((3, 4), I32), A((4, 2), F32)), {}),
               ((A((3, 4), B), A((4, 2), B)), {}), ((A((3, 4), F32), A((5, 2), F32)), {}),
               ((A((), F32), A((3,), F32)), {}), ((A((2, 3, 4), F32), A((3, 4, 2), F32)), {}),
               ((A((3, 4), C64), A((4, 2), F64)), {})],
    "einsum": [((A((3, 4), F32), A((4, 5), F32)), {"subscripts": "ij,jk->ik", "optimize": False}),
               ((A((3, 4), F32), A((4,), F64)), {"subscripts": "ij,j->i", "optimize": False}),
               ((A((3, 1), F32), A((4,), F64)), {"subscripts": "ij,j->i", "optimize": False}),
               ((A((2, 3), I32), A((3, 2), F32), A((2,), C64)), {"subscripts": "ij,jk,k->", "optimize": True}),
               ((A((3, 3), F32),), {"subscripts": "ii->i", "optimize": False}),
               ((A((2, 3), F32),), {"subscripts": "ij->ji", "optimize": False})],
    "sum": _reductions(False), "prod": _reductions(False), "amax": _reductions(False),
    "amin": _reductions(False), "all": _reductions(False), "any": _reductions(False),
    "argmax": _reductions(True), "argmin": _reductions(True),
    "reshape": [((A((2, 3), F32),), {"shape": (3, 2)}), ((A((2, 3), I32),), {"shape": (6,)}),
                ((A((2, 3), F32),), {"shape": (-1,)}), ((A((2, 3), F32),), {"shape": (4,)}),
                ((A((), float),), {"shape": (1, 1)})],
    "transpose": [((A((2, 3, 4), F32),), {"axes": (1, 0, 2)}), ((A((2, 3), C64),), {"axes": (1, 0)})],
    "broadcast_to": [((A((3,), F32),), {"shape": (2, 3)}), ((A((2,), F32),), {"shape": (2, 3)}),
                     ((A((), int),), {"shape": (2,)})],
    "concatenate": [((A((2, 3), F32), A((4, 3), F64)), {"axis": 0}), ((A((2, 3), I32), A((2, 1), F32)), {"axis": 1}),
                    ((A((2, 3), F32), A((2, 4), F32)), {"axis": 0}), ((A((2,), F32), A((2, 3), F32)), {"axis": 0})],
    "astype": [((A((2, 3), F32),), {"dtype": I32}), ((A((), float),), {"dtype": F32}),
               ((A((3,), C64),), {"dtype": F64})],
    "stop_gradient": [((a,), {}) for a in ELEMENTWISE],
    "relu": [((a,), {}) for a in ELEMENTWISE],
    "where": [((A((3,), B), A((2, 3), F32), A((), float)), {}), ((A((), B), A((3,), I32), A((3,), F32)), {}),
              ((A((2,), B), A((3,), F32), A((3,), F32)), {}), ((A((3,), B), A((), int), A((), float)), {}),
              ((A((3,), B), A((3,), F32), A((3,), C64)), {})],
    "clip": [((A((3,), F32), A((), float), A((), float)), {}), ((A((3,), I32), A((), F64), A((), F64)), {}),
             ((A((2, 3), F32), A((3,), F32), A((2, 1), F64)), {}), ((A((3,), I32), A((), int), A((), int)), {}),
             ((A((3,), F32), A((2,), F32), A((), float)), {})],
}


def _shape_rule_primitives():
    return [p for p in extend.primitives() if isinstance(p.abstract_eval, ShapeRule)]


def _samples(prim):
    if isinstance(prim.impl, np.ufunc):
        return [(avals, {}) for avals in itertools.product(ELEMENTWISE, repeat=prim.impl.nin)]
    if prim.name in ("index_add", "index_set"):
        return _index_samples(prim.name)
    return SAMPLES.get(prim.name, [])


def test_every_shape_rule_has_samples():
    missing = [p.name for p in _shape_rule_primitives() if not _samples(p)]
    assert not missing, f"shape rules with no samples in tests/test_abstract_eval.py: {missing}"


def _disagreements(prim, samples, shape_rule=None):
    """``(messages, checked)``: where ``prim``'s shape rule (or ``shape_rule``, a :class:`ShapeRule`)
    and its dummy evaluation differ on ``samples``, and how many samples the rule answered."""
    shape_rule = shape_rule or prim.abstract_eval
    rule, dummies = shape_rule.rule, shape_rule.dummies
    messages, checked = [], 0
    for avals, params in samples:
        try:
            got = rule(*avals, **params)
        except (TypeError, ValueError, IndexError):
            got = None  # declined: the abstract eval falls back to the dummies
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                want = dummies(*avals, **params)
            except Exception as exc:  # NumPy refuses these operands: so must the rule
                if got is not None:
                    messages.append(f"{prim.name}{avals} {params}: NumPy raises {exc!r}, the rule gives {got}")
                continue
        if got is None:
            continue
        checked += 1
        if tuple(got.shape) != tuple(want.shape) or np.dtype(got.dtype) != np.dtype(want.dtype):
            messages.append(f"{prim.name}{avals} {params}: the rule gives {got}, NumPy {want}")
    return messages, checked


@pytest.mark.parametrize("prim", _shape_rule_primitives(), ids=lambda p: p.name)
def test_shape_rule_agrees_with_the_dummy_evaluation(prim):
    messages, checked = _disagreements(prim, _samples(prim))
    assert not messages, "\n".join(messages)
    assert checked, f"{prim.name}: the rule declined every sample"


# index expressions: basic, integer arrays adjacent or apart, ints among arrays, newaxis, ellipsis
ROWS, COLS = np.array([0, 2, 2]), np.array([[1], [0]])
INDEXES = [(1,), (slice(None, None, -2),), (Ellipsis, 1), (None, slice(1, 3), Ellipsis, None), (ROWS,),
           (slice(None), ROWS), (ROWS, slice(None), COLS), (0, slice(None), ROWS), (COLS, ROWS),
           (slice(None), COLS, ROWS), (ROWS, None, 1), (-1, -1, -1), (slice(5, 1),), (ROWS, COLS, 0, None)]


def _getitem_samples():
    """``(avals, params)`` of the ``getitem`` equations of ``x[index]`` for each of :data:`INDEXES`, and
    of indexes NumPy refuses (an int past the end, too many indices)."""
    from tapegrad.numpy._indexing import encode_index
    x = A((4, 3, 5), F32)
    samples = []
    for index in INDEXES + [(4,), (0, 0, 0, 0), (ROWS, Ellipsis, Ellipsis)]:
        spec, arrays = encode_index(index)
        samples.append(([x] + [A(a.shape, a.dtype) for a in arrays], {"idx": spec}))
    return samples


def test_getitem_shape_rule_agrees_with_the_dummy_evaluation():
    from tapegrad.numpy._indexing import _getitem_shape_rule
    getitem_p = next(p for p in extend.primitives() if p.name == "getitem")
    messages, checked = _disagreements(getitem_p, _getitem_samples(), _getitem_shape_rule)
    assert not messages, "\n".join(messages)
    assert checked == len(INDEXES)


def test_indexing_under_jit_matches_eager():
    x = np.arange(60, dtype=np.float32).reshape(4, 3, 5)
    for index in INDEXES:
        fn = tg.jit(lambda x, index=index: x[index] * 2.0)
        assert_close(fn(x), x[index] * 2.0)


def test_a_wrong_shape_rule_is_caught():
    prim = Primitive("test.add_typed_wrongly")  # not registered: the registry stays as it was
    prim.def_impl(np.add)
    prim.def_abstract_eval(ShapeRule(lambda x, y: ShapedArray(tuple(x.shape), np.dtype(x.dtype)), prim))
    messages, _ = _disagreements(prim, [((A((3,), F32), A((3,), F64)), {}), ((A((3,), F32), A((2, 3), F32)), {}),
                                        ((A((3,), F32), A((4,), F32)), {})])
    assert len(messages) == 3, messages


def test_shape_rule_falls_back_for_operands_numpy_refuses():
    x = np.ones((3, 4), np.float32)
    with pytest.raises(ValueError, match="matmul"):
        tg.jit(tnp.matmul)(x, np.ones((5, 2), np.float32))


# ---- staging runs no impl on the common paths ------------------------------------------------------
def _mlp_loss(params, x, labels):
    h = x
    for W, b in params[:-1]:
        h = tg.nn.functional.relu(tnp.matmul(h, W) + b)
    W, b = params[-1]
    logits = tnp.einsum("bi,io->bo", h, W) + b
    logp = logits - logsumexp(logits, axis=1, keepdims=True)
    return -tnp.mean(tnp.take_along_axis(logp, labels[:, None], axis=1))


def _mlp_problem():
    rng = np.random.default_rng(0)
    sizes = (12, 16, 16, 5)
    params = [(rng.standard_normal((i, o)).astype(np.float32), rng.standard_normal(o).astype(np.float32))
              for i, o in zip(sizes[:-1], sizes[1:])]
    return params, rng.standard_normal((8, 12)).astype(np.float32), rng.integers(0, 5, size=8)


def test_staging_a_training_step_evaluates_no_dummies(monkeypatch):
    def refuse(*avals, **params):
        raise AssertionError("staging ran an impl on dummies")

    for prim in _shape_rule_primitives():
        monkeypatch.setattr(prim.abstract_eval, "dummies", refuse)
    params, x, labels = _mlp_problem()
    step = tg.value_and_grad(_mlp_loss)
    program = tg.make_program(step)(params, x, labels)
    program.typecheck()
    (loss, grads), (loss_ref, grads_ref) = tg.jit(step)(params, x, labels), step(params, x, labels)
    assert_close(loss, loss_ref)
    for (gw, gb), (rw, rb) in zip(grads, grads_ref):
        assert gw.dtype == np.float32 and gb.dtype == np.float32
        assert_close(gw, rw)
        assert_close(gb, rb)
