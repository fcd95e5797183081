"""Every function of ``tapegrad.numpy`` that NumPy also has, called *through NumPy*
(``np.<name>(tracer, ...)``) with only its required arguments, under ``vjp``, ``jit`` and ``vmap``,
gives what NumPy gives on the plain array.

A call through NumPy reaches our function by NumPy's dispatch protocols (``__array_function__``,
``__array_ufunc__``) with NumPy's spelling of the call: the arguments NumPy's signature makes
optional are left out, so our function's defaults must be NumPy's. (``np.transpose(x)`` once landed
in ``permute_dims``, NumPy 2's alias whose ``axes`` is required, and raised ``TypeError``.)

The names come from the same source as ``docs/coverage.md``: the ``__all__`` of ``tapegrad.numpy``,
``tapegrad.numpy.linalg`` and ``tapegrad.numpy.fft`` (:func:`swept_names`). ``ARGS`` gives the
required arguments where the default (one float matrix) does not fit; every ndarray among them is
traced (a float one differentiated under ``vjp``). What cannot work through NumPy, or under a
transform, is listed with the reason and must raise a clear error, never give a silent wrong answer.
"""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import tapegrad as tg
import tapegrad.numpy as tnp
from _tol import assert_close
from tapegrad.errors import ConcretizationError

# distinct entries in (0.2, 0.8), no ties, invertible, not symmetric (as docs/coverage_page.py's)
M = np.array([[0.8, 0.35, 0.2], [0.25, 0.7, 0.3], [0.22, 0.28, 0.6]])
N = np.array([[0.45, 0.65, 0.33], [0.55, 0.4, 0.73], [0.27, 0.52, 0.37]])
V, W = np.array([0.3, 0.52, 0.7]), np.array([0.64, 0.36, 0.45])
SPD = M @ M.T + np.eye(3)  # symmetric positive definite
K = np.array([1, 2, 0])  # indices
_S0, _S1 = np.array(0.3), np.array(0.7)  # 0-d arrays, traced
IA, IB = np.array([[3, 5, 6], [12, 7, 9]]), np.array([[1, 2, 2], [4, 3, 1]])  # positive integers


def swept_names():
    """``[(module, name)]``: the public functions of tapegrad.numpy (and its linalg and fft) that
    NumPy's module of that name also has as a function or ufunc (not a class or constant): what
    ``np.<name>(tracer)`` may reach. The same ``__all__`` that docs/coverage_page.py reports on."""
    out = []
    for module, ours in ((np, tnp), (np.linalg, tnp.linalg), (np.fft, tnp.fft)):
        for name in sorted(ours.__all__):
            theirs = getattr(module, name, None)
            if callable(theirs) and not isinstance(theirs, type) and callable(getattr(ours, name, None)):
                out.append((module.__name__, name))
    return out


# required arguments where one float matrix (M,) does not fit
ARGS = {
    # two arrays
    **{n: (M, N) for n in (
        "add", "subtract", "multiply", "divide", "true_divide", "power", "pow", "float_power", "maximum",
        "minimum", "fmax", "fmin", "arctan2", "atan2", "hypot", "copysign", "logaddexp", "logaddexp2",
        "remainder", "mod", "fmod", "floor_divide", "divmod", "nextafter", "heaviside", "equal",
        "not_equal", "less", "less_equal", "greater", "greater_equal", "logical_and", "logical_or",
        "logical_xor", "matmul", "dot", "inner", "outer", "kron", "vdot", "tensordot", "allclose", "isclose",
        "array_equal", "array_equiv", "append", "polyadd", "polysub", "polymul", "polyval", "cross",
        "vecdot", "matvec", "vecmat", "intersect1d", "union1d", "setdiff1d", "setxor1d", "isin",
        "histogram2d", "searchsorted", "digitize", "correlate", "convolve", "lstsq", "solve",
        "tensorsolve")},
    **{n: (V, W) for n in ("correlate", "convolve", "polydiv", "polyadd", "polysub", "polymul", "cross",
                           "intersect1d", "union1d", "setdiff1d", "setxor1d", "histogram2d", "roots")},
    **{n: (IA, IB) for n in ("gcd", "lcm", "bitwise_and", "bitwise_or", "bitwise_xor", "left_shift",
                           "right_shift", "bitwise_left_shift", "bitwise_right_shift")},
    **{n: (IA,) for n in ("bitwise_count", "bitwise_invert", "bitwise_not", "invert")},
    **{n: (SPD,) for n in ("cholesky", "eigh", "eigvalsh")},
    "searchsorted": (np.sort(V), W), "digitize": (W, np.sort(V)), "polyval": (V, W), "interp": (W, np.sort(V), V),
    "ldexp": (M, np.array([[1, 2, 0], [3, 1, 2], [0, 1, 1]])),
    "bincount": (K,), "lexsort": (np.stack([V, W]),), "ravel_multi_index": ((K, K[::-1]), (3, 3)),
    "unravel_index": (K, (3, 3)),
    # a shape, an axis, a count or indices (take_along_axis with its axis: NumPy < 2.3 requires it)
    "reshape": (M, (9,)), "resize": (M, (2, 5)), "broadcast_to": (V, (2, 3)), "expand_dims": (M, 0),
    "repeat": (M, 2), "tile": (M, 2), "take": (M, K), "take_along_axis": (M, np.argsort(M, axis=1), 1),
    "roll": (M, 1), "rollaxis": (M, 1), "moveaxis": (M, 0, 1), "swapaxes": (M, 0, 1), "pad": (M, 1),
    "delete": (M, 1), "insert": (M, 1, 0.5), "split": (M, 3), "array_split": (M, 2), "hsplit": (M, 3),
    "vsplit": (M, 3), "dsplit": (M.reshape(1, 3, 3), 3), "argpartition": (V, 1), "partition": (V, 1),
    "astype": (M, np.float32), "matrix_power": (M, 2), "full_like": (M, 0.5), "fill_diagonal": (M, 0.5),
    "percentile": (M, 40.0), "nanpercentile": (M, 40.0), "quantile": (M, 0.4), "nanquantile": (M, 0.4),
    "put": (V, [0], [1.5]), "put_along_axis": (M, np.argsort(M, axis=1)[:, :1], 0.5, 1),
    "place": (M, M > 0.5, V), "compress": (np.array([True, False, True]), V), "extract": (M > 0.5, M),
    "choose": (K, [V, 2 * V, 3 * V]), "select": ([V > 0.4, V > 0.6], [V, 2 * V]), "where": (M > 0.5,),
    "polyfit": (V, W, 1), "kaiser": (4, 0.5), "fromfunction": (lambda i, j: i * 0.5 + j, (2, 3)),
    "piecewise": (V, [V < 0.5], [lambda x: x * x, lambda x: 2 * x]),
    "apply_along_axis": (lambda r: r * r, 0, M), "apply_over_axes": (lambda a, ax: a * a, M, [0]),
    "einsum": ("ij,jk->ik", M, N), "einsum_path": ("ij,jk->ik", M, N), "linspace": (_S0, _S1),
    "geomspace": (_S0, _S1), "logspace": (_S0, _S1),
    # sequences of arrays
    **{n: ([V, W],) for n in ("concatenate", "concat", "stack", "hstack", "vstack", "dstack", "column_stack",
                              "block")},
    "multi_dot": ([M, N, M],), "atleast_1d": (_S0,), "atleast_2d": (V,), "atleast_3d": (M,),
    "broadcast_arrays": (M, V), "meshgrid": (V, W), "ix_": (K, K),
    "isdtype": (np.float32, "real floating"), "issubdtype": (np.float32, np.floating),
    "can_cast": (np.float32, np.float64), "promote_types": (np.float32, np.float64),
    "result_type": (M, np.float32), "broadcast_shapes": ((3,), (2, 3)),
    # vectors
    **{n: (V,) for n in ("poly", "polyder", "polyint", "trim_zeros", "ediff1d", "vander", "unwrap", "sort_complex",
                         "diagflat", "roots", "hfft", "ihfft", "i0", "sinc", "corrcoef", "cov", "histogram",
                         "histogram_bin_edges", "unique", "unique_all", "unique_counts", "unique_inverse",
                         "unique_values")},
    "histogramdd": (M,),
    # ranges and domains
    **{n: (M + 1.0,) for n in ("arccosh", "acosh")},
    # no array among the required arguments: nothing for NumPy to dispatch on (dropped at collection)
    **{n: (3,) for n in ("bartlett", "blackman", "hamming", "hanning", "eye", "identity", "tri", "diag_indices",
                         "tril_indices", "triu_indices", "fftfreq", "rfftfreq", "zeros", "ones", "empty", "arange",
                         "indices")},
    "full": ((2, 3), _S0), "mask_indices": (3, np.triu), "frompyfunc": (abs, 1, 1),
    **{n: (V,) for n in ("cumulative_sum", "cumulative_prod")},  # NumPy requires axis beyond 1-D
    "linalg.outer": (V, W), "linalg.tensorsolve": (M, V),
    "linalg.tensorinv": (np.linalg.inv(SPD) @ np.diag([1.0, 2.0, 3.0]) @ SPD,),
}

_M4 = np.array([[2.0, 0.3, 0.1, 0.4], [0.2, 1.5, 0.3, 0.1], [0.5, 0.1, 1.8, 0.2], [0.1, 0.6, 0.2, 1.2]])
ARGS["linalg.tensorinv"] = (_M4.reshape(2, 2, 4),)  # ind=2: the first two axes against the last

# what cannot work through NumPy, in any mode: (the exception it raises, why)
WRITES_IN_PLACE = "NumPy's version writes into its argument and returns None; tapegrad never writes into arrays"
UNSUPPORTED = {
    "array": (TypeError, "NumPy's constructors do not dispatch: they convert the tracer (call tnp.array)"),
    "asarray": (TypeError, "NumPy's constructors do not dispatch: they convert the tracer (call tnp.asarray)"),
    "full": (TypeError, "NumPy's constructors dispatch on like= only: fill_value is converted (call tnp.full)"),
    "from_dlpack": (TypeError, "np.from_dlpack does not dispatch: it asks the tracer for memory it has not got"),
    **{n: (ValueError, WRITES_IN_PLACE + f" (call tnp.{n}(..., inplace=False))")
       for n in ("fill_diagonal", "put", "put_along_axis", "place")},
}
# what needs the values: it runs under vjp and raises ConcretizationError (a TypeError naming the
# function and what to pass) under jit and vmap, where only shapes are known. tnp's versions take
# size=/length= or a mode for that, which a call with NumPy's required arguments does not pass
VALUE_SHAPED = "the result's shape depends on the values (tnp's version takes size=)"
NEEDS_VALUES = {
    **{n: VALUE_SHAPED for n in ("argwhere", "flatnonzero", "nonzero", "extract", "compress", "unique", "unique_all",
                                 "unique_counts", "unique_inverse", "unique_values", "intersect1d", "union1d",
                                 "setdiff1d", "setxor1d", "where")},
    "bincount": "the result's length is the largest value plus one (tnp.bincount takes length=)",
    "trim_zeros": "the result's length depends on where the zeros are",
    "roots": "stripping leading zeros needs the values (tnp.roots takes strip_zeros=False)",
    "polydiv": "the remainder's length depends on the values (tnp.polydiv takes trim_leading_zeros=False)",
    "linalg.lstsq": "the residuals' length depends on the rank",
    "choose": "NumPy's default mode='raise' checks the indices (pass mode='wrap' or 'clip')",
    "ravel_multi_index": "NumPy's default mode='raise' checks the indices (pass mode='wrap' or 'clip')",
}
# results that are Python values or dtypes, not arrays: computed inside the transform and compared there
STATIC = {"shape", "ndim", "size", "result_type", "isrealobj", "iscomplexobj", "isscalar", "iterable", "einsum_path"}
NOT_DETERMINISTIC = {"empty_like"}  # uninitialised memory: shape and dtype only
ALWAYS_COMPLEX = {"linalg.eig", "linalg.eigvals"}  # as JAX's (docs/linalg.md); NumPy's are real when they can be


def _call(module, name, args):
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        return getattr(__import__(module, fromlist=["_"]), name)(*args)


def _key(module, name):
    return name if module == "numpy" else f"{module.split('.')[-1]}.{name}"


def _example(module, name):
    return ARGS.get(_key(module, name), ARGS.get(name, (M,)))


def _leaves(x):
    return tg.tree.tree_leaves(x)


def _arrays(args):
    """The ndarray leaves of ``args`` (traced, mapped) and a function putting new ones in their place."""
    leaves, treedef = tg.tree.tree_flatten(args)
    pos = [i for i, a in enumerate(leaves) if isinstance(a, np.ndarray)]

    def rebuild(values):
        new = list(leaves)
        for i, v in zip(pos, values):
            new[i] = v
        return tg.tree.tree_unflatten(treedef, new)

    return [leaves[i] for i in pos], rebuild


def _compare(actual, desired, what, name):
    la, ld = _leaves(actual), _leaves(desired)
    assert len(la) == len(ld), f"{what}: {len(la)} results against NumPy's {len(ld)}"
    for a, d in zip(la, ld):
        a, d = np.asarray(a), np.asarray(d)
        assert a.shape == d.shape, f"{what}: shape {a.shape} against NumPy's {d.shape}"
        if name in ALWAYS_COMPLEX:
            d = d.astype(np.result_type(d, np.complex64))
        assert a.dtype == d.dtype, f"{what}: dtype {a.dtype} against NumPy's {d.dtype}"
        if name in NOT_DETERMINISTIC:
            continue
        if d.dtype.kind in "fc":
            assert_close(a, d, err_msg=what)
        else:
            np.testing.assert_array_equal(a, d, err_msg=what)


def _run(module, name, mode, fn, arrays, rebuild, desired):
    """``fn`` (the call through NumPy, of the array arguments) in ``mode``, compared with NumPy."""
    what = f"np.{_key(module, name)} under {mode}"
    if mode == "vjp":
        floats = [i for i, a in enumerate(arrays) if a.dtype.kind == "f"]  # some: _live_cases

        def of_floats(*fs):
            xs = list(arrays)
            for i, f in zip(floats, fs):
                xs[i] = f
            return fn(*xs)

        out, pullback = tg.vjp(of_floats, *[arrays[i] for i in floats])
        _compare(out, desired, what, _key(module, name))
        grads = pullback(tg.tree.tree_map(lambda o: np.ones(np.shape(o), np.asarray(o).dtype), out))
        assert all(np.all(np.isfinite(g)) for g in _leaves(grads)), what
    elif mode == "jit":
        _compare(tg.jit(fn)(*arrays), desired, what, _key(module, name))
    else:
        second = [a * 0.9 if a.dtype.kind == "f" else a for a in arrays]
        desired2 = _call(module, name, rebuild(second))
        stacked = [np.stack([a, b]) for a, b in zip(arrays, second)]
        expected = tg.tree.tree_map(lambda a, b: np.stack([np.asarray(a), np.asarray(b)]), desired, desired2)
        _compare(tg.vmap(fn)(*stacked), expected, what, _key(module, name))


CASES = swept_names()


def _nothing_to_differentiate(module, name, arrays, args) -> bool:
    """No float argument, or a result that is not all float: ``vjp`` has no cotangent to pull back."""
    if not any(a.dtype.kind == "f" for a in arrays):
        return True
    try:
        result = _call(module, name, args)
    except Exception:  # noqa: BLE001 (NumPy refuses the example on this version: the test says how)
        return False
    return not all(np.asarray(x).dtype.kind in "fc" for x in _leaves(result))


def _live_cases():
    """``(module, name, mode)`` for every case that reaches a tracer. Dropped here, not skipped at run
    time, so that the suite's skip count means something: a function whose example has no array
    argument (NumPy then calls its own function: no tracer reaches it), and ``vjp`` of a function with
    nothing to differentiate (``_nothing_to_differentiate``)."""
    cases = []
    for module, name in CASES:
        args = _example(module, name)
        arrays, _ = _arrays(args)
        if not arrays:
            continue
        for mode in ("vjp", "jit", "vmap"):
            plain = name not in UNSUPPORTED and name not in STATIC
            if mode == "vjp" and plain and _nothing_to_differentiate(module, name, arrays, args):
                continue
            cases.append(pytest.param(module, name, mode, id=f"{_key(module, name)}-{mode}"))
    return cases


@pytest.mark.parametrize("module, name, mode", _live_cases())
def test_through_numpy(module, name, mode):
    args = _example(module, name)
    arrays, rebuild = _arrays(args)
    desired = _call(module, name, args) if name not in UNSUPPORTED else None

    def fn(*xs):
        return _call(module, name, rebuild(xs))

    transform = {"vjp": lambda f: lambda *xs: tg.vjp(f, *xs)[0], "jit": tg.jit, "vmap": tg.vmap}[mode]
    batched = [a[None] for a in arrays] if mode == "vmap" else arrays
    if name in UNSUPPORTED:
        error, reason = UNSUPPORTED[name]
        with pytest.raises(error, match=name.split(".")[-1] + "|traced value"):
            transform(fn)(*[a.astype(float) for a in batched])
        return
    if name in STATIC:  # computed inside, where the tracers are; the transform returns its input
        seen = []

        def keep(*xs):
            seen.append(fn(*xs))
            return xs[0] * 1.0

        transform(keep)(*[a.astype(float) for a in batched])
        assert seen[0] == desired, f"np.{name} under {mode}: {seen[0]} against NumPy's {desired}"
        return
    if mode != "vjp" and _key(module, name) in NEEDS_VALUES:
        with pytest.raises(ConcretizationError):
            transform(fn)(*batched)
        return
    _run(module, name, mode, fn, arrays, rebuild, desired)


def test_every_swept_name_with_an_entry_exists():
    """The tables name only functions that are swept (a renamed function must not leave a stale row)."""
    swept = {n for _, n in CASES} | {_key(m, n) for m, n in CASES}
    stale = (set(ARGS) | set(UNSUPPORTED) | set(NEEDS_VALUES) | STATIC | NOT_DETERMINISTIC | ALWAYS_COMPLEX) - swept
    assert not stale, f"table entries for functions that are not swept: {sorted(stale)}"


@pytest.mark.parametrize("transform", [tg.jit, tg.vmap, lambda f: lambda x: tg.vjp(f, x)[0]],
                         ids=["jit", "vmap", "vjp"])
def test_transpose_spellings(transform):
    """The report's case: np.transpose(x) with no axes (NumPy 2's permute_dims is the same function
    object, and once claimed it), beside tnp.transpose, the methods and .T."""
    x = np.arange(24.0).reshape(2, 3, 4)
    spellings = {
        "np.transpose(x)": lambda x: np.transpose(x),
        "np.permute_dims(x)": lambda x: np.permute_dims(x),
        "np.transpose(x, (1, 0, 2))": lambda x: np.transpose(x, (1, 0, 2)),
        "np.permute_dims(x, (1, 0, 2))": lambda x: np.permute_dims(x, (1, 0, 2)),
        "tnp.transpose(x)": lambda x: tnp.transpose(x),
        "tnp.permute_dims(x, (2, 0, 1))": lambda x: tnp.permute_dims(x, (2, 0, 1)),
        "x.transpose()": lambda x: x.transpose(),
        "x.transpose(1, 0, 2)": lambda x: x.transpose(1, 0, 2),
        "x.transpose((1, 0, 2))": lambda x: x.transpose((1, 0, 2)),
        "x.T": lambda x: x.T,
    }
    for what, f in spellings.items():
        desired = f(x)
        batch = transform is tg.vmap
        actual = transform(f)(x[None] if batch else x)
        np.testing.assert_array_equal(np.asarray(actual)[0] if batch else actual, desired, err_msg=what)
    with pytest.raises(TypeError, match="axes"):
        tg.jit(lambda x: tnp.permute_dims(x))(x)  # the array API's permute_dims requires axes, as NumPy's does not


def test_numpy_2_aliases_dispatch_to_the_function_of_numpys_own_name():
    # np.concat is np.concatenate (and np.permute_dims is np.transpose): a call through either name
    # gets NumPy's signature of the older function, positional axis included
    x = np.arange(6.0).reshape(2, 3)
    assert np.concat is np.concatenate and np.permute_dims is np.transpose
    for transform in (tg.jit, lambda f: lambda x: tg.vjp(f, x)[0]):
        np.testing.assert_array_equal(transform(lambda x: np.concatenate([x, x], 1))(x), np.concatenate([x, x], 1))
        np.testing.assert_array_equal(transform(lambda x: np.concat([x, x], axis=None))(x),
                                      np.concat([x, x], axis=None))
        np.testing.assert_array_equal(transform(lambda x: np.transpose(x, (1, 0)))(x), x.T)


@pytest.mark.parametrize("dtype", [np.uint8, np.int64])
@pytest.mark.parametrize("route", ["eager", "jit", "vmap"])
def test_clip_of_integers_keeps_their_dtype_and_values(dtype, route):
    # a missing bound was an infinity, which made an integer array float64 and rounded int64 values
    # beyond 2**53 (2**60 + 1 came back as 2**60)
    big = 2**60 + 1 if dtype == np.int64 else 200
    a = np.array([1, 5, big], dtype)
    top = int(np.iinfo(dtype).max)
    calls = {"np.clip(a)": (lambda a: np.clip(a), a),
             "np.clip(a, max=4)": (lambda a: np.clip(a, max=4), np.array([1, 4, 4], dtype)),
             "tnp.clip(a, 2, None)": (lambda a: tnp.clip(a, 2, None), np.array([2, 5, big], dtype)),
             "tnp.clip(a, None, top)": (lambda a: tnp.clip(a, None, top), a)}
    for name, (call, expected) in calls.items():
        run = {"eager": call, "jit": tg.jit(call), "vmap": lambda a, call=call: tg.vmap(call)(a[None])[0]}[route]
        got = run(a)
        assert got.dtype == dtype, name
        np.testing.assert_array_equal(got, expected, err_msg=name)
