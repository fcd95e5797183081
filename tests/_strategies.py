"""What the property tests (tests/test_properties*.py) share: Hypothesis strategies for arrays of any
shape, memory layout, dtype and value, and the checks every call must pass.

The property of one call ``op(*args)`` against NumPy's ``ref(*args)``: either both raise (tapegrad a
``TypeError``/``ValueError``/``IndexError`` with a message that says something), or tapegrad returns
NumPy's dtype, shape and values (NaNs and infinities in the same places, the rest to a tolerance from
``_tol.assert_close``); and in every case the caller's arrays are unchanged and no result shares memory
with an argument the caller can later write to.
"""
from __future__ import annotations

import warnings

import numpy as np
from hypothesis import event
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from _tol import assert_close

FLOATS = (np.float16, np.float32, np.float64)
COMPLEX = (np.complex64, np.complex128)
INEXACT = FLOATS + COMPLEX
INTS = (np.int8, np.int32, np.int64, np.uint8)

# shapes: 0-d, size-0 axes and small sides (a property fails on a 3x0 array as surely as on a big one)
SHAPES = hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=4)
NONEMPTY = hnp.array_shapes(min_dims=0, max_dims=3, min_side=1, max_side=4)
BROADCAST_PAIRS = hnp.mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=3, min_side=0,
                                                    max_side=4)


def _specials(dtype):
    """The values where implementations differ: zeros of both signs, NaN, infinities, the largest and
    the smallest normal and subnormal numbers, and ones."""
    info = np.finfo(dtype)
    tiny = float(info.smallest_normal)
    sub = float(info.smallest_subnormal)
    huge = float(info.max)
    return [0.0, -0.0, np.nan, np.inf, -np.inf, huge, -huge, huge / 4, tiny, -tiny, sub, 1.0, -1.0, 0.5]


def elements(dtype, lo: float | None = None, hi: float | None = None):
    """Values of ``dtype``; without bounds, any value including the special ones (drawn often); with
    bounds, finite floats in ``[lo, hi]`` (complex: both parts)."""
    dtype = np.dtype(dtype)
    if dtype.kind == "b":
        return st.booleans()
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return st.integers(max(info.min, -100 if lo is None else int(lo)),
                           min(info.max, 100 if hi is None else int(hi)))
    real = {np.dtype(np.complex64): np.dtype(np.float32),
            np.dtype(np.complex128): np.dtype(np.float64)}.get(dtype, dtype)
    if lo is not None:
        part = st.floats(lo, hi, width=8 * real.itemsize, allow_subnormal=False)
    else:
        part = st.one_of(st.sampled_from(_specials(real)), hnp.from_dtype(real))
    if dtype.kind == "c":
        return st.builds(complex, part, part)
    return part


@st.composite
def layouts(draw, x):
    """``x``'s values in a random memory layout: Fortran order, a negative stride on the first axis, a
    step of 2 on the last axis, read-only; any combination."""
    if x.ndim and draw(st.booleans()):
        x = np.asfortranarray(x)
    if x.ndim and draw(st.booleans()):
        x = np.flip(np.flip(x, 0).copy(), 0)
    if x.ndim and draw(st.booleans()):
        x = np.repeat(x, 2, axis=-1)[..., ::2]
    if draw(st.booleans()):
        x = x.view()
        x.setflags(write=False)
    return x


@st.composite
def arrays(draw, dtype, shape=SHAPES, lo=None, hi=None):
    """An array of ``dtype`` and ``shape`` (a shape or a strategy of shapes) in a random layout."""
    if isinstance(dtype, st.SearchStrategy):
        dtype = draw(dtype)
    if isinstance(shape, st.SearchStrategy):
        shape = draw(shape)
    base = draw(hnp.arrays(dtype, shape, elements=elements(dtype, lo, hi)))
    return draw(layouts(base))


def snapshot(args):
    """Copies of the array arguments, to check afterwards that the call did not write to them."""
    return [(a, a.copy(), a.flags.writeable) for a in _array_leaves(args)]


def assert_unchanged(snapshots, what="the call"):
    """Every argument still holds the values (bit for bit), dtype and writeability it had before."""
    for a, before, writeable in snapshots:
        assert a.dtype == before.dtype and a.shape == before.shape, f"{what} changed an argument's dtype/shape"
        assert a.flags.writeable == writeable, f"{what} changed an argument's writeable flag"
        assert a.tobytes() == before.tobytes(), f"{what} wrote into its argument: {before!r} became {a!r}"


def assert_owned(outputs, args, what="the result"):
    """No output array shares memory with an argument array: writing to the argument later would
    silently change the result."""
    for out in _array_leaves(outputs):
        for a in _array_leaves(args):
            assert not np.shares_memory(out, a), f"{what} (shape {out.shape}) is a view of an argument " \
                                                 f"(shape {a.shape}): it changes when the caller writes there"


def _array_leaves(tree):
    if isinstance(tree, np.ndarray):
        return [tree]
    if isinstance(tree, (list, tuple)):
        return [leaf for item in tree for leaf in _array_leaves(item)]
    if isinstance(tree, dict):
        return [leaf for item in tree.values() for leaf in _array_leaves(item)]
    return []


# exceptions that count as a clear refusal, and NumPy's own refusals to match (an OverflowError only
# as NumPy's own: a Python int out of an integer dtype's range)
CLEAR = (TypeError, ValueError, IndexError)
REFUSALS = CLEAR + (OverflowError,)
NUMPY_REFUSALS = REFUSALS + (np.linalg.LinAlgError,)


def assert_clear(exc):
    """A refusal's message says something: long enough to name what was wrong."""
    assert isinstance(exc, CLEAR), f"{type(exc).__name__} is not a clear refusal: {exc}"
    assert len(str(exc)) >= 20, f"the message of {type(exc).__name__} says too little: {str(exc)!r}"


def check_like_numpy(op, ref, *args, ulps=64, refuse_ok=False, compare_dtype=True, owned=True, **kwargs):
    """The property of one call: ``op(*args, **kwargs)`` equals NumPy's ``ref(*args, **kwargs)`` (or
    both refuse), leaves its arguments unchanged and returns arrays it owns.

    Args:
        refuse_ok: tapegrad may refuse (a clear ``TypeError``/``ValueError``) where NumPy computes; for
            inputs outside what the op documents (an integer array to a float-only op).
        ulps: the tolerance in epsilons of the result's precision (compositions round more often).
        owned: check that no result shares memory with an argument.

    Returns:
        tapegrad's result, or None when it refused.
    """
    before = snapshot(args + tuple(kwargs.values()))
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # NumPy's "Mean of empty slice" and friends
        try:
            expected = ref(*args, **kwargs)
        except NUMPY_REFUSALS as exc:
            expected = exc
        try:
            out = op(*args, **kwargs)
        except REFUSALS as exc:
            if not (type(exc) is type(expected) and str(exc) == str(expected)):  # NumPy's own refusal
                assert_clear(exc)
            assert_unchanged(before, "a refused call")
            if not isinstance(expected, Exception):
                assert refuse_ok, f"tapegrad refused where NumPy computes {expected!r}: {exc}"
                event("refused where NumPy computes")
            return None
    assert not isinstance(expected, Exception), f"NumPy raises {expected!r} but tapegrad returned {out!r}"
    assert_unchanged(before)
    compare(out, expected, ulps=ulps, compare_dtype=compare_dtype)
    if owned:
        assert_owned(out, args + tuple(kwargs.values()))
    return out


def compare(out, expected, ulps=64, compare_dtype=True):
    """Same structure, shapes, dtypes; values equal with NaNs and infinities in the same places."""
    if isinstance(expected, (list, tuple)):
        assert isinstance(out, (list, tuple)) and len(out) == len(expected), (out, expected)
        for o, e in zip(out, expected):
            compare(o, e, ulps, compare_dtype)
        return
    expected = np.asarray(expected)
    assert isinstance(out, (np.ndarray, np.generic)), f"result is a {type(out).__name__}, not an array"
    out = np.asarray(out)
    if compare_dtype:
        assert out.dtype == expected.dtype, f"dtype {out.dtype}, NumPy gives {expected.dtype}"
    if expected.dtype.kind == "c":
        out, expected = _complex_infinities_alike(out, expected)
    if expected.dtype.kind in "fc":
        with np.errstate(all="ignore"):  # NumPy's isclose on infinities
            assert_close(out, expected, ulps=ulps)
    else:
        assert out.shape == expected.shape and np.array_equal(out, expected), (out, expected)


def _complex_infinities_alike(out, expected):
    """``out`` and ``expected`` with every complex infinity (a value with an infinite part, whatever
    the other part, C99 Annex G's definition) written as ``inf+infj`` on both sides where both sides
    have one: NumPy's vectorised complex loops and its 0-d path give the same product of infinities
    different NaN and sign patterns (``(3e38+inf j) * (-inf+2j)``: ``-inf+nan j`` for an array,
    ``-inf-inf j`` for 0-d arrays), and a comparison must not pass judgement on which one."""
    out, expected = np.array(out), np.array(expected)
    if out.shape != expected.shape:
        return out, expected

    def infinite(z):
        return np.isinf(z.real) | np.isinf(z.imag)
    both = infinite(out) & infinite(expected)
    out[both] = expected[both] = complex(np.inf, np.inf)
    return out, expected


@st.composite
def smooth_arrays(draw, dtype, shape, lo=-3.0, hi=3.0, position=0):
    """An array of continuous random values in ``[lo, hi]`` (from a drawn seed and the operand's
    ``position``), in a random layout: for derivative checks, where Hypothesis's favourite values
    (ties, zeros, bounds) sit on kinks."""
    if isinstance(dtype, st.SearchStrategy):
        dtype = draw(dtype)
    if isinstance(shape, st.SearchStrategy):
        shape = draw(shape)
    rng = np.random.default_rng([draw(st.integers(0, 2**32 - 1)), position])
    dtype = np.dtype(dtype)
    base = rng.uniform(lo, hi, shape)
    if dtype.kind == "c":
        base = base + 1j * rng.uniform(lo, hi, shape)
    return draw(layouts(np.asarray(base, dtype)))
