"""The vmap API (in_axes and out_axes pytree prefixes, keyword arguments, axis_size, chunk_size) against
a loop over examples, every error it raises (each naming the path of the offending entry), and the
coverage of batch rules: every primitive has one but those listed in FALLBACK. The primitives
themselves are checked under vmap next to their op tables (test_ops.py, test_ufuncs.py, ...)."""
from __future__ import annotations

import json
import re
import subprocess
import sys

import numpy as np
import pytest

import tapegrad as tg
import tapegrad.numpy as tnp
from _tol import assert_close
from _vmapcheck import check_vmap, in_axes_mixes

RNG = np.random.default_rng(0)
X = RNG.standard_normal((3, 4))
Y = RNG.standard_normal(4)


def f(x, y):
    """One example: a few primitives, two outputs of different ranks."""
    return tnp.sin(x) * y, tnp.sum(x * x, axis=0)


# ---- in_axes, out_axes, axis_size, chunk_size, keyword arguments ---------------------------------------
@pytest.mark.parametrize("in_axes", in_axes_mixes(2, (2, 1)), ids=str)
@pytest.mark.parametrize("out_axes", [0, 1, -1, -2], ids=str)
def test_in_axes_and_out_axes(in_axes, out_axes):
    check_vmap(f, (X, Y), in_axes, out_axes=out_axes)
    check_vmap(lambda x, y: f(x, y)[0], (X, Y), in_axes, out_axes=out_axes - 1 if out_axes < 0 else out_axes + 1)


def test_out_axes_pytree_prefix_and_none_for_shared_outputs():
    xs = np.stack([X, 2 * X, 3 * X])

    def g(x):
        return {"a": x * Y, "b": (tnp.cos(x), Y * 2.0), "shared": Y + 1.0}

    out = tg.vmap(g, out_axes={"a": 1, "b": (-1, 0), "shared": None})(xs)
    loop = [g(x) for x in xs]
    assert_close(out["a"], np.stack([o["a"] for o in loop], axis=1))
    assert_close(out["b"][0], np.stack([o["b"][0] for o in loop], axis=-1))
    assert_close(out["b"][1], np.broadcast_to(Y * 2.0, (3, 4)))  # shared: broadcast at 0
    assert_close(out["shared"], Y + 1.0)  # None: returned unbatched
    assert isinstance(out["b"], tuple)


@pytest.mark.parametrize("out_axes", [0, 1, None], ids=str)
def test_shared_outputs_are_broadcast_or_returned(out_axes):
    out = tg.vmap(lambda x: Y * 2.0, out_axes=out_axes)(X)
    expected = Y * 2.0 if out_axes is None else np.stack([Y * 2.0] * 3, axis=out_axes)
    np.testing.assert_array_equal(out, expected)


def test_in_axes_pytree_prefix():
    rng = np.random.default_rng(0)
    params = {"w": rng.standard_normal((4, 2)), "b": rng.standard_normal((5, 2))}
    xs = rng.standard_normal((5, 4))

    def layer(x, p):
        return tnp.tanh(x @ p["w"] + p["b"])

    out = tg.vmap(layer, in_axes=(0, {"w": None, "b": 0}))(xs, params)
    expected = np.stack([layer(xs[i], {"w": params["w"], "b": params["b"][i]}) for i in range(5)])
    assert_close(out, expected, rtol=1e-12)
    # a list argument, its entries mapped along different axes, and a list in_axes
    pair = [rng.standard_normal((2, 5)), rng.standard_normal(5)]
    out = tg.vmap(lambda p: p[0] * p[1], in_axes=[[1, 0]])(pair)
    assert_close(out, (pair[0] * pair[1]).T)


def test_keyword_arguments_are_mapped_along_0():
    rng = np.random.default_rng(0)
    ks = rng.standard_normal((3, 4))
    out = tg.vmap(lambda x, k: x * k, in_axes=(1,))(X.T, k=ks)
    assert_close(out, X * ks)


def test_axis_size():
    out = tg.vmap(lambda y: tnp.exp(y), in_axes=None, axis_size=5)(Y)
    assert_close(out, np.broadcast_to(np.exp(Y), (5, 4)))
    out = tg.vmap(lambda x, y: x + y, in_axes=(0, None), axis_size=3)(X, Y)  # agrees with the mapped size
    assert_close(out, X + Y)
    shared = tg.vmap(lambda y: y, in_axes=None, axis_size=2, out_axes=None)(Y)
    np.testing.assert_array_equal(shared, Y)
    assert not np.shares_memory(shared, Y)  # the caller owns every result


@pytest.mark.parametrize("chunk_size", [1, 2, 3, 7, 10])
@pytest.mark.parametrize("out_axes", [0, -1, (1, None)], ids=str)
def test_chunk_size(chunk_size, out_axes):
    rng = np.random.default_rng(0)
    xs = rng.standard_normal((7, 3, 4))

    def g(x, y):
        return tnp.sort(x, axis=0) * y, Y  # the second output is shared by every example

    out = tg.vmap(g, in_axes=(0, None), out_axes=out_axes, chunk_size=chunk_size)(xs, Y)
    whole = tg.vmap(g, in_axes=(0, None), out_axes=out_axes)(xs, Y)
    for o, w in zip(out, whole):
        np.testing.assert_array_equal(o, w)
    axis = out_axes if isinstance(out_axes, int) else out_axes[0]
    np.testing.assert_array_equal(out[0], np.stack([g(x, Y)[0] for x in xs], axis=axis))


def test_chunk_size_with_in_axes_1_and_gradient():
    rng = np.random.default_rng(0)
    xs = rng.standard_normal((3, 5))
    f1 = tg.vmap(lambda x: tnp.sum(tnp.exp(x)), in_axes=1, chunk_size=2)
    assert_close(f1(xs), np.exp(xs).sum(0), rtol=1e-12)
    assert_close(tg.grad(lambda xs: tnp.sum(f1(xs)))(xs), np.exp(xs), rtol=1e-12)


def test_nested_vmap_of_mixed_axes_matches_a_loop():
    rng = np.random.default_rng(0)
    inner = tg.vmap(lambda x, y: tnp.dot(x, y), in_axes=(1, None))
    x, y = rng.standard_normal((4, 3, 5)), rng.standard_normal(5)
    for in_axes in in_axes_mixes(2, (3, 1)):
        check_vmap(inner, (x, y), in_axes)


def test_float32_and_integer_outputs_keep_their_dtypes():
    x32 = X.astype(np.float32)
    out = tg.vmap(lambda x: (tnp.exp(x), tnp.argmax(x), x > 0, x * 2.0))(x32)
    assert [o.dtype for o in out] == [np.float32, np.intp, np.bool_, np.float32]


# ---- errors: each names the offending argument or output -----------------------------------------------
ERRORS = [  # (name, call, error, the message's key part)
    ("sizes", lambda: tg.vmap(f)(X, RNG.standard_normal((4, 4))), ValueError, "argument 0: 3, argument 1: 4"),
    ("sizes-pytree", lambda: tg.vmap(lambda a, b: a + b["w"])(Y[:3], {"w": Y}), ValueError,
     "argument 0: 3, argument 1['w']: 4"),
    ("sizes-keyword", lambda: tg.vmap(lambda a, k: a + k)(Y[:3], k=Y), ValueError,
     "argument 0: 3, keyword argument 'k': 4"),
    ("in_axes-length", lambda: tg.vmap(f, in_axes=(0,))(X, Y), ValueError, "in_axes has 1 entry"),
    ("in_axes-not-a-prefix", lambda: tg.vmap(lambda a: a, in_axes=({"w": 0},))([Y]), ValueError,
     "in_axes[0] is not a pytree prefix of argument 0"),
    ("in_axes-out-of-range", lambda: tg.vmap(lambda a: a, in_axes=2)(X), ValueError,
     "in_axes[0] = 2 maps argument 0 of shape (3, 4)"),
    ("in_axes-negative-out-of-range", lambda: tg.vmap(f, in_axes=(0, -2))(X, Y), ValueError,
     "in_axes[1] = -2 maps argument 1 of shape (4,)"),
    ("in_axes-out-of-range-pytree", lambda: tg.vmap(lambda a: a["w"], in_axes=({"w": 1},))({"w": Y}), ValueError,
     "in_axes[0]['w'] = 1 maps argument 0['w'] of shape (4,)"),
    ("in_axes-python-scalar", lambda: tg.vmap(lambda a, b: a * b)(X, 2.0), ValueError,
     "in_axes[1] = 0 maps argument 1 of shape ()"),
    ("out_axes-out-of-range", lambda: tg.vmap(lambda a: a, out_axes=3)(X), ValueError,
     "out_axes = 3 is out of range for output,"),
    ("out_axes-out-of-range-pytree",
     lambda: tg.vmap(lambda a: {"a": a, "b": [a, a]}, out_axes={"a": 0, "b": [0, -3]})(X), ValueError,
     "out_axes['b'][1] = -3 is out of range for output['b'][1]"),
    ("out_axes-not-a-prefix", lambda: tg.vmap(lambda a: a, out_axes={"b": 0})(X), ValueError,
     "out_axes is not a pytree prefix of the function's output"),
    ("out_axes-None-mapped", lambda: tg.vmap(lambda a: {"a": a, "b": a}, out_axes={"a": 0, "b": None})(X),
     ValueError, "out_axes['b'] is None, but output['b'] varies over the batch"),
    ("out_axes-None-mapped-chunked", lambda: tg.vmap(lambda a: (Y, a), out_axes=(0, None), chunk_size=2)(X),
     ValueError, "out_axes[1] is None, but output[1] varies over the batch"),
    ("nothing-mapped", lambda: tg.vmap(lambda a: a, in_axes=None)(X), ValueError, "pass axis_size="),
    ("axis_size-disagrees", lambda: tg.vmap(lambda a: a, axis_size=5)(X), ValueError,
     "axis_size=5 but the mapped arguments have size 3"),
    ("axis_size-not-positive", lambda: tg.vmap(lambda a: a, axis_size=0), ValueError, "axis_size must be a positive"),
    ("chunk_size-not-an-int", lambda: tg.vmap(lambda a: a, chunk_size=1.5), ValueError,
     "chunk_size must be a positive"),
    ("in_axes-float", lambda: tg.vmap(f, in_axes=(0, 0.5)), TypeError, "in_axes[1] is 0.5"),
    ("in_axes-str-in-pytree", lambda: tg.vmap(lambda a: a, in_axes=({"w": "x"},)), TypeError,
     "in_axes[0]['w'] is 'x'"),
    ("in_axes-bool", lambda: tg.vmap(lambda a: a, in_axes=True), TypeError, "in_axes is True"),
    ("out_axes-float", lambda: tg.vmap(lambda a: a, out_axes=[0, 1.0]), TypeError, "out_axes[1] is 1.0"),
]


@pytest.mark.parametrize("name, call, error, message", ERRORS, ids=[e[0] for e in ERRORS])
def test_errors_name_the_offending_entry(name, call, error, message):
    with pytest.raises(error, match=re.escape(message)) as info:
        call()
    assert type(info.value) is error  # not a subclass leaking from the core (MappedOutputError)


# ---- coverage: every primitive has a batch rule ------------------------------------------------------
# The primitives still batched by the loop fallback (a Python loop over the examples and a stack).
FALLBACK: set[str] = set()


def test_every_primitive_has_a_batch_rule():
    # in a fresh interpreter: other test files declare primitives of their own (test_testing.py)
    code = ("import json, tapegrad.scipy, tapegrad.numpy.fft, tapegrad.nn.functional;"
            "from tapegrad._vmap import fallback_primitives; from tapegrad._rules import PRIMITIVES;"
            "print(json.dumps(fallback_primitives(PRIMITIVES)))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    on_loop = set(json.loads(result.stdout))
    assert on_loop <= FALLBACK, f"no batch rule (add one, or list them in FALLBACK): {sorted(on_loop - FALLBACK)}"
    assert FALLBACK <= on_loop, f"these now have a batch rule: remove them from FALLBACK: {sorted(FALLBACK - on_loop)}"
