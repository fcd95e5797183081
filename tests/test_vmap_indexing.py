"""vmap of the indexing primitives (``getitem``, ``index_add``, ``index_set``) against a Python loop.

Each case is a function of one example; ``tg.vmap(f, in_axes)`` on stacked examples must equal the
loop ``np.stack([f(*example b) for b])``, for in_axes 0, 1, 2, -1 and None mixes. The index arrays are
operands too, so they are mapped or shared like the values; a boolean mask is shared (a mapped one is
refused by ``x[mask]`` and allowed in the updates, whose shape it does not change). Then the
compositions: vmap of grad, grad of vmap, vmap of vmap and jvp of vmap.
"""
import itertools

import numpy as np
import pytest

import tapegrad as tg
import tapegrad.numpy as tnp
from _tol import assert_close
from tapegrad.numpy._indexing import IndexUpdateHelper, getitem, getitem_p, index_add_p, index_set_p

B = 3
rng = np.random.default_rng(0)


class ix:
    """``ix(x)[idx]``: ``x[idx]`` through tapegrad also for a plain array (a shared operand)."""

    def __init__(self, x):
        self.x = x

    def __getitem__(self, idx):
        return getitem(self.x, idx)


at = IndexUpdateHelper  # at(x)[idx].set(v) is x.at[idx].set(v), also for a plain array

X = rng.normal(size=(4, 5, 6))
X4 = rng.normal(size=(2, 3, 4, 5))
IDX = np.array([0, 2, 1, 2])  # a repeated index: add accumulates, set keeps the last write
IDX2 = np.array([[1, 0], [3, 3]])
M = np.array([True, False, True, True, False])
M2 = rng.normal(size=(5, 6)) > 0

# name -> (function of one example, example arguments); an integer argument is an index array
CASES = {
    # basic indices
    "int": (lambda x: ix(x)[1], [X]),
    "neg int, slice": (lambda x: ix(x)[-1, 1:4:2], [X]),
    "slice": (lambda x: ix(x)[:, 1:3], [X]),
    "newaxis": (lambda x: ix(x)[..., None], [X]),
    "mixed basic": (lambda x: ix(x)[None, 1, ..., 2:, None], [X]),
    "ellipsis int": (lambda x: ix(x)[..., 1], [X]),
    "inner ellipsis": (lambda x: ix(x)[1, ..., None, 2], [X4]),
    "empty": (lambda x: ix(x)[()], [X]),
    # integer arrays
    "list": (lambda x: ix(x)[[0, 2]], [X]),
    "x[i]": (lambda x, i: ix(x)[i], [X, IDX]),
    "x[:, i]": (lambda x, i: ix(x)[:, i], [X, IDX]),
    "x[i, :, i] (split)": (lambda x, i: ix(x)[i, :, i], [X, IDX]),
    "x[1, :, i] (int joins)": (lambda x, i: ix(x)[1, :, i], [X, IDX]),
    "x[:, i2, i2]": (lambda x, i: ix(x)[:, i, i], [X, IDX2]),
    "x[:, i2, 0]": (lambda x, i: ix(x)[:, i, 0], [X, IDX2]),
    "x[i, ..., i] (empty ellipsis splits)": (lambda x, i: ix(x)[i, ..., i], [X, IDX]),
    "x[..., i, :]": (lambda x, i: ix(x)[..., i, :], [X, IDX]),
    "x[..., i]": (lambda x, i: ix(x)[..., i], [X4, IDX % 3]),
    "x[:, i, None, 2]": (lambda x, i: ix(x)[:, i, None, 2], [X, IDX]),
    "x[i, 1, i]": (lambda x, i: ix(x)[i, 1, i], [X, IDX]),
    "x[i, i2 ranks]": (lambda x, i, j: ix(x)[i, :, j], [X, IDX[:2], IDX2]),
    "x[scalar i]": (lambda x, i: ix(x)[:, i], [X, np.array(3)]),
    # boolean masks (a mask shared by the examples; a mapped one is refused, below)
    "x[:, m]": (lambda x, m: ix(x)[:, m], [X, M]),
    "x[m2]": (lambda x, m: ix(x)[0, m], [X, M2]),
    "x[:, m2] whole": (lambda x, m: ix(x)[:, m], [X, M2]),
    "x[m, i]": (lambda x, m, i: ix(x)[1:, m, i], [X, M, IDX[:1]]),
    "x[:, m2] in the middle": (lambda x, m: ix(x)[:, m], [X4, X4[0, :, :, 0] > 0]),
    "x[True]": (lambda x: ix(x)[True], [X]),
    "x[0, True, i]": (lambda x, i: ix(x)[0, True, i], [X, IDX]),
    # gathers
    "take axis": (lambda x, i: tnp.take(x, i, axis=2), [X, IDX]),
    "take flat": (lambda x, i: tnp.take(x, i), [X, IDX2]),
    "take_along_axis": (lambda x, i: tnp.take_along_axis(x, i, axis=1), [X, np.argsort(X, axis=1)]),
    "sort": (lambda x: tnp.sort(x, axis=1), [X]),
    "sort last": (lambda x: tnp.sort(x), [X]),
    # updates
    "set basic": (lambda x, y: at(x)[1:3, 0].set(y), [X, rng.normal(size=(6,))]),
    "add basic": (lambda x, y: at(x)[..., 2].add(y), [X, rng.normal(size=(5,))]),
    "set scalar": (lambda x, i: at(x)[:, i].set(7.0), [X, IDX]),
    "add repeated": (lambda x, i: at(x)[i].add(1.0), [X, IDX]),
    "add y": (lambda x, i, y: at(x)[:, i].add(y), [X, IDX, rng.normal(size=(4, 4, 6))]),
    "add y broadcast": (lambda x, i, y: at(x)[:, i].add(y), [X, IDX, rng.normal(size=(6,))]),
    "set y repeated": (lambda x, i, y: at(x)[i, :, 2].set(y), [X, IDX, rng.normal(size=(4, 5))]),
    "set int joins": (lambda x, i, y: at(x)[2, :, i].set(y), [X, IDX, rng.normal(size=(4, 5))]),
    "set x[2, i]": (lambda x, i, y: at(x)[2, i].set(y), [X, IDX, rng.normal(size=(6,))]),
    "add mask": (lambda x, m, y: at(x)[:, m].add(y), [X, M, rng.normal(size=(6,))]),
    "set leading ones": (lambda x, y: at(x)[1].set(y), [X, rng.normal(size=(1, 5, 6))]),
    "set 0-d mask": (lambda x, y: at(x)[:, np.array(True)].set(y), [X, rng.normal(size=(6,))]),
    "add i2 y": (lambda x, i, y: at(x)[1:, i, 1:3].add(y), [X, IDX2, rng.normal(size=(3, 2, 2, 2))]),
}


def _stacked(a, b):
    """Example ``b`` of a batch built from the example ``a``: values shift, indices rotate (masks
    are shared only, so they never need a batch)."""
    if a.dtype.kind == "b":
        return a
    if a.dtype.kind in "iu":
        n = int(a.max()) + 1 if a.size else 1
        return (a + b) % n
    return a + b


def _batch(a, axis):
    return a if axis is None else np.moveaxis(np.stack([_stacked(a, b) for b in range(B)]), 0, axis)


def _loop(f, args, in_axes):
    """The reference: ``f`` once per example, stacked on axis 0."""
    return np.stack([np.asarray(f(*[a if ax is None else np.take(a, b, axis=ax) for a, ax in zip(args, in_axes)]))
                     for b in range(B)])


def _mixes(args):
    """in_axes mixes: each entry 0, 1, 2 (where the batched rank allows), -1 or None, masks always
    None; at least one mapped."""
    choices = [[None] if a.dtype.kind == "b" else [ax for ax in (0, 1, 2) if ax <= a.ndim] + [-1, None]
               for a in args]
    return [m for m in itertools.product(*choices) if any(ax is not None for ax in m)]


@pytest.mark.parametrize("name", list(CASES))
def test_vmap_matches_loop(name):
    f, examples = CASES[name]
    for mix in _mixes(examples):
        in_axes = tuple(None if ax is None else ax % (a.ndim + 1) for a, ax in zip(examples, mix))
        args = [_batch(a, ax) for a, ax in zip(examples, in_axes)]
        got = tg.vmap(f, in_axes=mix)(*args)
        assert_close(np.asarray(got), _loop(f, args, in_axes), err_msg=f"{name}, in_axes={mix}")


def test_the_three_primitives_have_batch_rules():
    for prim in (getitem_p, index_add_p, index_set_p):
        assert prim.batch_rule is not None, prim.name


def test_rules_do_not_loop():
    """One bind of each primitive for the whole batch (the fallback binds once per example)."""
    calls, originals = [], {p: p.impl for p in (getitem_p, index_add_p)}
    for prim, impl in originals.items():
        prim.impl = lambda *a, _impl=impl, _name=prim.name, **k: (calls.append(_name), _impl(*a, **k))[1]
    try:
        tg.vmap(lambda x, i: at(x)[i].add(ix(x)[:, i].sum()), in_axes=(0, 1))(_batch(X, 0), _batch(IDX, 1))
    finally:
        for prim, impl in originals.items():
            prim.impl = impl
    assert sorted(calls) == ["getitem", "index_add"]


def test_mapped_mask_gather_is_refused():
    rng = np.random.default_rng(0)
    xs, ms = _batch(X, 0), rng.normal(size=(B, 5)) > 0
    with pytest.raises(IndexError, match="boolean mask varies over the batch"):
        tg.vmap(lambda x, m: ix(x)[:, m])(xs, ms)


MS = np.array([[True, False, True, False, False], [False, False, True, True, False],
               [True, True, False, False, False]])  # two selected per example, so a (2, ...) y fits each
MASKED = {  # an update through a mapped mask keeps x's shape, so it is fine per example
    "set scalar": (lambda x, m, y: at(x)[:, m].set(0.0), None),
    "add shared row": (lambda x, m, y: at(x)[1:, m, None].add(y), rng.normal(size=(1, 6))),
    "set with an int": (lambda x, m, y: at(x)[2, m].set(y), rng.normal(size=(6,))),
    "set shared, along the selection": (lambda x, m, y: at(x)[:, m].set(y), rng.normal(size=(2, 6))),
    "add mapped": (lambda x, m, y: at(x)[0, m].add(y), rng.normal(size=(B, 2, 6))),
}


@pytest.mark.parametrize("name", list(MASKED))
@pytest.mark.parametrize("x_axis", [0, 2, None])
def test_update_through_mapped_mask(name, x_axis):
    f, y = MASKED[name]
    y_axis = 0 if name == "add mapped" else None
    xs, ms = _batch(X, x_axis), np.moveaxis(MS, 0, 1)
    got = tg.vmap(f, in_axes=(x_axis, 1, y_axis))(xs, ms, y)
    args = (xs, ms, y)
    assert_close(got, _loop(f, args, (x_axis, 1, y_axis)))


def test_vmap_of_grad_through_mapped_mask():
    """``x.at[x < 0].set(0.0)``, a relu, per example."""
    def f(x):
        return (at(x)[x < 0].set(0.0) ** 2).sum()
    xs = _batch(X, 1)
    got = tg.vmap(tg.grad(f), in_axes=1)(xs)
    assert_close(got, np.stack([2 * np.maximum(xs[:, b], 0) for b in range(B)]))


def test_shared_x_mapped_index():
    """x the same for every example, the index mapped: the index arrays carry the batch."""
    idx = np.array([[0, 3], [1, 1], [2, 0]])
    assert_close(tg.vmap(lambda i: ix(X)[:, i, 1], in_axes=0)(idx),
                 np.stack([X[:, i, 1] for i in idx]))
    assert_close(tg.vmap(lambda i: tnp.take(X, i, axis=-1), in_axes=1)(idx.T),
                 np.stack([np.take(X, i, axis=-1) for i in idx]))


# ---- compositions ------------------------------------------------------------------------------------
COMPOSED = {  # name -> (f of one example and an index, example index, in_axes of (x, index))
    "x[:, i]": (lambda x, i: ix(x)[:, i], IDX, (1, 0)),
    "x[i, :, i]": (lambda x, i: ix(x)[i, :, i], IDX, (0, 0)),
    "x[1:, i2]": (lambda x, i: ix(x)[1:, i, None], IDX2, (-1, None)),
    "shared x": (lambda x, i: ix(x)[i, 1:, i], IDX, (None, 0)),
    "take_along_axis": (lambda x, i: tnp.take_along_axis(x, i, axis=0), np.argsort(X, axis=0), (2, 1)),
    "sort": (lambda x, i: tnp.sort(x * 1.0, axis=-1), IDX, (1, None)),
    "at set": (lambda x, i: at(x)[:, i].set(x[0, i] ** 2), IDX, (0, 1)),
    "at add": (lambda x, i: at(x * 2)[i].add(x[:4] * x[1]), IDX, (-1, 0)),
    "at set shared index": (lambda x, i: at(x)[i, 0].set(3.0), IDX, (0, None)),
    "at add shared x": (lambda x, i: at(x)[:, i].add(ix(x)[:, i] * 2.0), IDX, (None, -1)),
}


def _scalar(f):
    return lambda x, i: (f(x, i) ** 2 * 0.5).sum() + f(x, i).sum()


def _batched_pair(i, in_axes):
    return _batch(X, None if in_axes[0] is None else in_axes[0] % 4), \
        _batch(i, None if in_axes[1] is None else in_axes[1] % (i.ndim + 1))


def _example(a, axis, b):
    return a if axis is None else np.take(a, b, axis=axis)


def _per_example(fun, xs, idx, in_axes):
    return [fun(_example(xs, in_axes[0], b), _example(idx, in_axes[1], b)) for b in range(B)]


@pytest.mark.parametrize("name", list(COMPOSED))
def test_vmap_of_grad(name):
    f, i, in_axes = COMPOSED[name]
    xs, idx = _batched_pair(i, in_axes)
    got = tg.vmap(tg.grad(_scalar(f)), in_axes=in_axes)(xs, idx)
    assert_close(got, np.stack(_per_example(tg.grad(_scalar(f)), xs, idx, in_axes)))


@pytest.mark.parametrize("name", list(COMPOSED))
def test_grad_of_vmap(name):
    f, i, in_axes = COMPOSED[name]
    xs, idx = _batched_pair(i, in_axes)
    got = tg.grad(lambda xs: _scalar(tg.vmap(f, in_axes=in_axes))(xs, idx))(xs)
    grads = np.stack(_per_example(tg.grad(_scalar(f)), xs, idx, in_axes))
    want = grads.sum(0) if in_axes[0] is None else np.moveaxis(grads, 0, in_axes[0])  # a shared x gathers them all
    assert_close(got, want)


@pytest.mark.parametrize("name", list(COMPOSED))
def test_jvp_of_vmap(name):
    rng = np.random.default_rng(0)
    f, i, in_axes = COMPOSED[name]
    xs, idx = _batched_pair(i, in_axes)
    t = rng.normal(size=xs.shape)
    out, out_t = tg.jvp(lambda xs: tg.vmap(f, in_axes=in_axes)(xs, idx), (xs,), (t,))
    pairs = [tg.jvp(lambda x, j=j: f(x, j), (x,), (tx,))
             for (x, j), tx in zip(_per_example(lambda x, j: (x, j), xs, idx, in_axes),
                                   _per_example(lambda tx, j: tx, t, idx, in_axes))]
    assert_close(out, np.stack([p[0] for p in pairs]))
    assert_close(out_t, np.stack([p[1] for p in pairs]))


@pytest.mark.parametrize("outer", [(-1, None), (-1, -1), (None, 0)])
@pytest.mark.parametrize("name", list(COMPOSED))
def test_vmap_of_vmap(name, outer):
    """A second batch of two (last for x, first or last for the index), over the inner one."""
    f, i, in_axes = COMPOSED[name]
    xs, idx = _batched_pair(i, in_axes)
    seconds = [(xs, idx), (xs * 2 - 1, (idx + 1) % (int(i.max()) + 1))]
    args = [seconds[0][k] if ax is None else np.stack([s[k] for s in seconds], axis=ax)
            for k, ax in enumerate(outer)]
    got = tg.vmap(tg.vmap(f, in_axes=in_axes), in_axes=outer)(*args)
    want = np.stack([tg.vmap(f, in_axes=in_axes)(*[a if ax is None else np.take(a, k, axis=ax)
                                                   for a, ax in zip(args, outer)]) for k in range(2)])
    assert_close(got, want)


def test_vmap_of_grad_set_repeated_mapped_index():
    """The cotangent of ``y`` in ``x.at[i].set(y)`` keeps only the surviving write of a repeated
    index, found per example when the index is mapped."""
    def f(x, i):
        return (at(x)[i].set(x[1:] * 3.0) ** 2).sum()
    xs, idx = _batch(X, 0), np.array([[0, 0, 1], [2, 1, 2], [3, 3, 3]])
    got = tg.vmap(tg.grad(f))(xs, idx)
    assert_close(got, np.stack([tg.grad(f)(x, i) for x, i in zip(xs, idx)]))
