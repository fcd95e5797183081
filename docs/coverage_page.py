"""Write ``docs/coverage.md``: every public function of tapegrad's NumPy and SciPy namespaces, with
the modes it works in, and the counts against the names JAX exports.

    python docs/coverage_page.py              # rewrite docs/coverage.md
    python docs/coverage_page.py --check      # exit 1 if docs/coverage.md is not what the code gives now
    python docs/coverage_page.py --reference  # regenerate src/tapegrad/coverage_reference.json (needs jax)

Modes are found by running, never declared: each function is called on a small example (from
``EXAMPLES`` where it needs particular arguments, else the first of ``CANDIDATES`` that it accepts,
preferring one with a float result), then

- value: the call ran and gave finite numbers;
- jit, vmap: ``tg.jit`` of it gives the same values; ``tg.vmap`` over two stacked examples gives what
  two calls give;
- jvp, vjp: ``tapegrad.testing.check_grads`` at order 1 in that mode agrees with finite differences,
  with respect to every float array argument.

A mark is ✓ (the check passed), ✗ (it failed: the note names the exception) or – (not applicable:
no float array goes in or no float comes out, so there is nothing to differentiate; or no array
goes in, so there is nothing to map or trace). The reference lists (``coverage_reference.json``, package
data of tapegrad, so that the wheel carries them) were taken once from JAX, so the page needs no JAX; the
rule that made them is stored beside them.
"""
from __future__ import annotations

import argparse
import functools
import importlib
import importlib.resources
import inspect
import json
import pathlib
import sys
import types
import warnings

import numpy as np
import scipy.linalg

import tapegrad as tg
import tapegrad.nn.functional  # noqa: F401  (records its float32 accumulations)
import tapegrad.numpy  # noqa: F401  (registers the array operators)
from tapegrad.extend import primitives
from tapegrad.numpy._float16 import FLOAT32_ACCUMULATION
from tapegrad.testing import check_grads

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import coverage_sparse  # noqa: E402  (the sparse rows, beside this file)

HERE = pathlib.Path(__file__).resolve().parent
PAGE = HERE / "coverage.md"
# read from the installed package (a wheel or the editable install); --reference writes the source's copy
REFERENCE = importlib.resources.files("tapegrad") / "coverage_reference.json"
SOURCE_REFERENCE = HERE.parent / "src" / "tapegrad" / "coverage_reference.json"

# (tapegrad namespace, the reference module in JAX, the NumPy/SciPy module it mirrors)
NAMESPACES = [
    ("tapegrad.numpy", "jax.numpy", "numpy"),
    ("tapegrad.numpy.linalg", "jax.numpy.linalg", "numpy.linalg"),
    ("tapegrad.numpy.fft", "jax.numpy.fft", "numpy.fft"),
    ("tapegrad.scipy.special", "jax.scipy.special", "scipy.special"),
    ("tapegrad.scipy.stats", "jax.scipy.stats", "scipy.stats"),
    ("tapegrad.scipy.linalg", "jax.scipy.linalg", "scipy.linalg"),
    ("tapegrad.scipy.signal", "jax.scipy.signal", "scipy.signal"),
    ("tapegrad.scipy.integrate", "jax.scipy.integrate", "scipy.integrate"),
]
# file I/O, printing and buffer constructors: left out of the counts (and never called here)
EXCLUDED = ["load", "save", "savez", "fromfile", "frombuffer", "fromstring", "fromiter", "array_repr", "array_str",
            "printoptions", "get_printoptions", "set_printoptions", "packbits", "unpackbits",
            "odeint_explain"]  # odeint_explain: a report of which executor runs odeint, not a function of arrays
# the methods a distribution module may have (SciPy's), for modules without __all__
DISTRIBUTION_METHODS = ["logpdf", "pdf", "logpmf", "pmf", "cdf", "logcdf", "sf", "logsf", "ppf", "isf", "entropy"]
NOT_DETERMINISTIC = {"empty", "empty_like"}  # uninitialised memory: compared by shape and dtype only
NOT_ARRAYS = "not an array function"  # it runs, but gives no arrays (result_type gives a dtype)

# ---- examples ----------------------------------------------------------------------------------
# distinct entries in [0.2, 0.8] (inside most domains, no ties for sorts and kinks), a positive
# definite symmetric part (cholesky and eigh read it), distinct eigenvalues; a second operand with
# other values (a binary op at equal operands sits on maximum's and mod's kinks)
_M = np.array([[0.8, 0.35, 0.2], [0.25, 0.7, 0.3], [0.22, 0.28, 0.6]])
_N = np.array([[0.45, 0.65, 0.33], [0.55, 0.4, 0.73], [0.27, 0.52, 0.37]])  # no q * 8 integer: quantile kinks
_V, _W = np.array([0.3, 0.52, 0.7]), np.array([0.64, 0.36, 0.45])
_K = np.array([1, 2, 0])


def candidates():
    """Argument tuples tried in order, fresh copies each time (a function may write into them): the
    float examples in (0.2, 0.8), then shifted by one into (1.2, 1.8) (arccosh, ...), then integers."""
    out = []
    for shift in (0.0, 1.0):
        m, n, v, w = _M + shift, _N + shift, _V + shift, _W + shift
        out += [(m,), (v,), (m, n), (v, w), (m, v), (v, m), (m, n, m.T), (v, w, v[::-1]), (m, 1), (v, 0),
                (m, 0, 1), (v, 2), (m, (9,)), (m, _K), (v, _K), (_K, v), (v, 0.5), (0.5, v), (m, 0.5),
                (v, w, 0.5), (v, 0.5, 1.5), (m[0, 0],), (m[0, 0], m[1, 1])]
    out += [(3,), (3, 3), ((3, 3),), (0.0, 1.0), (_K,), (_K, _K), (_K, 5, 0.4), (_K, 0.4), (_K, 2.0), ()]
    return [tuple(np.copy(a) if isinstance(a, np.ndarray) else a for a in args) for args in out]


# functions whose arguments no candidate fits: name -> a function returning the arguments
EXAMPLES = {
    "where": lambda: (_M > 0.5, _M.copy(), _N.copy()),
    "clip": lambda: (_V.copy(), 0.4, 0.6),
    "roll": lambda: (_M.copy(), 1),
    "full_like": lambda: (_M.copy(), 0.5),
    "full": lambda: ((2, 3), _V.copy()),
    "astype": lambda: (_M.copy(), np.float32),
    "broadcast_to": lambda: (_V.copy(), (2, 3)),
    "fftfreq": lambda: (4, np.array(0.5)),
    "rfftfreq": lambda: (4, np.array(0.5)),
    "dsplit": lambda: (_M.reshape(1, 3, 3), 3),
    "select": lambda: ([_V > 0.4, _V > 0.6], [_V, 2 * _V]),
    "choose": lambda: (_K, [_V, 2 * _V, 3 * _V]),
    "piecewise": lambda: (_V, [_V < 0.5], [lambda x: x * x, lambda x: 2 * x]),
    "apply_along_axis": lambda: (lambda r: r * r, 0, _M.copy()),
    "apply_over_axes": lambda: (lambda a, ax: a * a, _M.copy(), [0]),
    "put": lambda: (_V.copy(), [0], [1.5]),
    "einsum": lambda: ("ij,jk->ik", _M.copy(), _M.T.copy()),
    "take": lambda: (_V.copy(), np.array([2, 0])),
    "take_along_axis": lambda: (_M.copy(), np.argsort(_M, axis=1), 1),
    "solve": lambda: (_M.copy(), _V.copy()),
    "lstsq": lambda: (_M.copy(), _V.copy()),
    "tensorsolve": lambda: (_M.copy(), _V.copy()),
    "cho_solve": lambda: ((np.linalg.cholesky(_M @ _M.T), True), _V.copy()),
    "solve_triangular": lambda: (np.triu(_M), _V.copy()),
    "block": lambda: ([[_M.copy(), _M.copy()]],),
    "concatenate": lambda: ([_V.copy(), _W.copy()],),
    "stack": lambda: ([_V.copy(), _W.copy()],),
    "multi_dot": lambda: ([_M.copy(), _N.copy(), _M.copy()],),
    "frexp": lambda: (_N.copy(),),  # _M holds 0.25, a power of 2, where the mantissa jumps
    "resize": lambda: (_M.copy(), (2, 5)),
    "place": lambda: (_M.copy(), _M > 0.5, _V.copy()),
    "polyfit": lambda: (_V.copy(), _W.copy(), 1),
    "ravel_multi_index": lambda: ((_K, _K[::-1]), (3, 3)),
    "unravel_index": lambda: (_K, (3, 3)),
    "mask_indices": lambda: (3, np.triu),
    "fromfunction": lambda: (lambda i, j: i * 0.5 + j, (2, 3)),
    "einsum_path": lambda: ("ij,jk->ik", _M.copy(), _N.copy()),
    "isdtype": lambda: (np.float32, "real floating"),
    "eigh_tridiagonal": lambda: (_V + 1.0, _W[:2].copy()),
    "funm": lambda: (_M.copy(), np.exp),
    "hadamard": lambda: (4,),
    "leslie": lambda: (_V.copy(), _W[:2].copy()),
    "lu_solve": lambda: (scipy.linalg.lu_factor(_M), _V.copy()),
    "odeint": lambda: (lambda y, t, k: -k * y, _V.copy(), np.array([0.0, 0.5, 1.0]), np.array(0.7)),
    "solve_ivp": lambda: (lambda t, y: -0.7 * y, (0.0, 1.0), _V.copy(), "RK45", np.array([0.5, 1.0])),
    # orders and parameters with no derivative (or none implemented) are passed as Python numbers,
    # which the page holds fixed: it differentiates the array argument
    "jv": lambda: (1.5, _V + 1.0), "yv": lambda: (1.5, _V + 1.0), "iv": lambda: (1.5, _V + 1.0),
    "ive": lambda: (1.5, _V + 1.0), "kv": lambda: (1.5, _V + 1.0), "kve": lambda: (1.5, _V + 1.0),
    "jn": lambda: (1, _V + 1.0), "yn": lambda: (1, _V + 1.0), "expn": lambda: (2, _V + 1.0),
    "hyp1f1": lambda: (1.5, 2.0, _V.copy()), "hyp2f1": lambda: (1.0, 1.5, 2.5, _V.copy()),
    "bessel_jn": lambda: (_V + 1.0,), "sph_harm_y": lambda: (2, 1, _V.copy(), _W.copy()),
    "fill_diagonal": lambda: (_M.copy(), 0.5),
    "put_along_axis": lambda: (_M.copy(), np.argsort(_M, axis=1)[:, :1], 0.5, 1),
    "permute_dims": lambda: (_M.copy(), (1, 0)),
}
# scipy.stats: counts as integer arrays and the parameters without a derivative (vonmises.cdf's
# kappa) as Python numbers, so only the continuous arguments are differentiated; points inside the
# support (a truncnorm interval around them, a simplex for dirichlet's free components)
_COUNTS = np.array([0, 2, 4])
EXAMPLES.update({f"{dist}.{fn}": example for dist, fns, example in [
    ("bernoulli", ("logpmf", "pmf"), lambda: (np.array([0, 1, 1]), _V.copy())),
    ("bernoulli", ("ppf",), lambda: (_V.copy(), 0.4)),
    ("binom", ("logpmf", "pmf", "cdf", "logcdf", "sf", "logsf"), lambda: (_COUNTS, 7, _V.copy())),
    ("binom", ("ppf",), lambda: (_V.copy(), 7, 0.4)),
    ("betabinom", ("logpmf", "pmf"), lambda: (_COUNTS, 7, _V + 1.0, _W + 1.0)),
    ("betabinom", ("ppf",), lambda: (_V.copy(), 7, 1.5, 2.5)),
    ("nbinom", ("logpmf", "pmf"), lambda: (_COUNTS, _V + 2.0, _W.copy())),
    ("geom", ("logpmf", "pmf"), lambda: (_COUNTS + 1, _V.copy())),
    ("vonmises", ("cdf", "sf"), lambda: (_V.copy(), 1.5)),
    ("truncnorm", ("logpdf", "pdf", "cdf", "logcdf", "sf", "logsf", "ppf", "isf"),
     lambda: (_V.copy(), _V - 1.0, _V + 1.0)),
    ("multinomial", ("logpmf", "pmf"), lambda: (np.array([1, 2, 3]), 6, _V / _V.sum())),
    ("dirichlet", ("logpdf", "pdf"), lambda: (0.5 * _V[:2], _W + 1.0)),
] for fn in fns})


# ---- running -----------------------------------------------------------------------------------
def _leaves(out):
    return tg.tree.tree_leaves(out)


def _is_float(x) -> bool:
    dtype = x.dtype if hasattr(x, "dtype") else np.asarray(x).dtype  # a tracer has one; never np.asarray it
    return np.dtype(dtype).kind in "fc"


def _array_like(out) -> bool:
    leaves = _leaves(out)
    return bool(leaves) and all(isinstance(x, (np.ndarray, np.generic, int, float, complex, bool)) for x in leaves)


def _finite(out) -> bool:
    return all(np.all(np.isfinite(x)) for x in _leaves(out) if _is_float(x))


def _same(a, b, name) -> bool:
    la, lb = _leaves(a), _leaves(b)
    if len(la) != len(lb):
        return False
    for x, y in zip(la, lb):
        x, y = np.asarray(x), np.asarray(y)
        if x.shape != y.shape:
            return False
        if name in NOT_DETERMINISTIC:
            continue
        if _is_float(y) or _is_float(x):
            if not np.allclose(x, y, rtol=1e-6, atol=1e-9, equal_nan=True):
                return False
        elif not np.array_equal(x, y):
            return False
    return True


def _quiet(fn, *args):
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        return fn(*args)


def find_example(name, fn):
    """``(args, output, note)``: the arguments to probe ``fn`` with and its output, or
    ``(None, None, why)`` if no candidate gives finite arrays."""
    tries = [EXAMPLES[name]()] if name in EXAMPLES else candidates()
    fallback, why = (None, None), "no example ran"
    for args in tries:
        try:
            out = _quiet(fn, *args)
        except Exception:  # noqa: BLE001 -- a candidate it does not take: try the next
            continue
        if not _array_like(out):
            why = NOT_ARRAYS
            continue
        if not _finite(out) and name not in NOT_DETERMINISTIC:
            continue
        if all(_is_float(x) for x in _leaves(out)):
            return args, out, ""
        if fallback[0] is None:
            fallback = (args, out)
    return (*fallback, why)


def _split(args):
    """``(leaves, rebuild, arrays, floats)``: the arguments' pytree leaves, a function putting new
    leaves back, the positions of the array leaves (traced by jit and mapped by vmap) and of the
    float ones (differentiated)."""
    leaves, treedef = tg.tree.tree_flatten(args)
    arrays = [i for i, a in enumerate(leaves) if isinstance(a, np.ndarray)]
    floats = [i for i in arrays if _is_float(leaves[i])]

    def rebuild(positions, values):
        new = list(leaves)
        for i, v in zip(positions, values):
            new[i] = v
        return tg.tree.tree_unflatten(treedef, new)

    return leaves, rebuild, arrays, floats


def _float_part(out):
    return [x for x in _leaves(out) if _is_float(x)]


def _check(fn):
    try:
        return ("✓", "") if _quiet(fn) else ("✗", "wrong values")
    except Exception as e:  # noqa: BLE001 -- the page reports what failed, and how
        return "✗", type(e).__name__


NA = ("–", "")


# keyword arguments a function needs on every call (JAX's spelling of a NumPy function that writes in place)
KEYWORDS = {"place": {"inplace": False}, "put": {"inplace": False}, "put_along_axis": {"inplace": False},
            "fill_diagonal": {"inplace": False}, "bessel_jn": {"v": 3}}


def probe(name, fn):
    """``{mode: (mark, note)}`` for value, vjp, jvp, vmap and jit."""
    if name in KEYWORDS:
        fn = functools.partial(fn, **KEYWORDS[name])
    args, out, why = find_example(name, fn)
    if args is None:
        return {"value": ("–" if why == NOT_ARRAYS else "✗", why), "vjp": NA, "jvp": NA, "vmap": NA, "jit": NA}
    leaves, rebuild, arrays, floats = _split(args)
    result = {"value": ("✓", "")}
    differentiable = bool(floats) and bool(_float_part(out)) and name not in NOT_DETERMINISTIC
    for mode, route in (("vjp", "rev"), ("jvp", "fwd")):
        result[mode] = _check(_gradients_agree(name, fn, leaves, rebuild, floats, route)) if differentiable else NA
    result.update(_transform_marks(name, fn, out, leaves, rebuild, arrays, floats))
    return result


def _gradients_agree(name, fn, leaves, rebuild, floats, route):
    """A check: ``fn``'s derivative in every float leaf, in mode ``route``, against finite differences."""
    def on_floats(*xs):
        return _float_part(fn(*rebuild(floats, xs)))

    return lambda: check_grads(on_floats, tuple(leaves[i] for i in floats), order=1, modes=(route,),
                               name=name) is None


def _transform_marks(name, fn, out, leaves, rebuild, arrays, floats):
    """jit: the same values as eager; vmap: over the example and a second one (floats scaled by 0.9),
    what two calls give. Array leaves are traced or mapped, everything else is held fixed."""
    if not arrays:
        return {"vmap": NA, "jit": NA}

    def on_arrays(*xs):
        return fn(*rebuild(arrays, xs))

    second = rebuild(floats, [leaves[i] * 0.9 for i in floats])
    second_leaves = tg.tree.tree_leaves(second)
    stacked = [np.stack([leaves[i], second_leaves[i]]) for i in arrays]
    two_calls = lambda: tg.tree.tree_map(lambda a, b: np.stack([a, b]), out, fn(*second))
    return {"jit": _check(lambda: _same(tg.jit(on_arrays)(*[leaves[i] for i in arrays]), out, name)),
            "vmap": _check(lambda: _same(tg.vmap(on_arrays)(*stacked), two_calls(), name))}


# ---- the namespaces ----------------------------------------------------------------------------
def public_functions(module_name):
    """``[(name, function)]``: the public callables of a namespace (its ``__all__``), with the
    methods of distribution modules (``norm.logpdf``); classes, submodules listed elsewhere and the
    excluded names are left out."""
    module = importlib.import_module(module_name)
    names = getattr(module, "__all__", None) or [n for n in dir(module) if not n.startswith("_")]
    out = []
    for name in sorted(names):
        obj = getattr(module, name, None)
        if name in EXCLUDED or obj is None:
            continue
        if isinstance(obj, types.ModuleType):
            if obj.__name__.startswith(module_name + ".") and obj.__name__ not in [n for n, _, _ in NAMESPACES]:
                methods = getattr(obj, "__all__", None) or [m for m in DISTRIBUTION_METHODS if hasattr(obj, m)]
                out += [(f"{name}.{m}", getattr(obj, m)) for m in sorted(methods)]
            continue
        if callable(obj) and not inspect.isclass(obj):
            out.append((name, obj))
    return out


def _import(name):
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


# ---- the reference lists -----------------------------------------------------------------------
def write_reference():
    """The names to count against, taken from JAX (run once, where jax is installed)."""
    import jax
    import scipy

    lists = {}
    jnp = importlib.import_module("jax.numpy")
    lists["tapegrad.numpy"] = sorted(n for n in dir(jnp) if not n.startswith("_") and hasattr(np, n)
                                     and callable(getattr(jnp, n)) and not inspect.isclass(getattr(np, n)))
    for ours, theirs, _ in NAMESPACES[1:]:
        lists[ours] = sorted(n for n in dir(importlib.import_module(theirs)) if not n.startswith("_"))
    lists["tapegrad.scipy.integrate"] = sorted(lists["tapegrad.scipy.integrate"] + ["odeint"])
    data = {
        "generated_with": {"jax": jax.__version__, "numpy": np.__version__, "scipy": scipy.__version__},
        "rule": ("tapegrad.numpy: the names jax.numpy and numpy both export that are callable in jax.numpy and "
                 "not classes in numpy; the other namespaces: the public names of JAX's module (jax.numpy.linalg, "
                 "jax.numpy.fft, jax.scipy.special, .stats, .linalg, .signal, .integrate), plus odeint "
                 "(jax.experimental.ode) for integrate. Counts leave out the excluded names."),
        "excluded": EXCLUDED,
        "extra": {"tapegrad.scipy.special": "jv jn yv yn iv ive kv kve j0 j1 y0 y1 i0 i1 i0e i1e".split()},
        "names": lists,
    }
    SOURCE_REFERENCE.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")


# ---- the page ----------------------------------------------------------------------------------
MODES = ("value", "vjp", "jvp", "vmap", "jit")


def _counts_section(reference):
    lines = ["## Counts against JAX", "",
             "Reference lists: `src/tapegrad/coverage_reference.json`, "
             f"from JAX {reference['generated_with']['jax']}, NumPy {reference['generated_with']['numpy']}, "
             f"SciPy {reference['generated_with']['scipy']}. "
             f"{reference['rule']}", "",
             "| namespace | reference names | present | share | missing |", "|---|---|---|---|---|"]
    for ours, _, _ in NAMESPACES:
        names = [n for n in reference["names"][ours] if n not in EXCLUDED]
        extra = reference["extra"].get(ours, [])
        module = _import(ours)
        missing = [n for n in names if module is None or not hasattr(module, n)]
        present = len(names) - len(missing)
        share = f"{100 * present / len(names):.0f}%" if names else "–"
        lines.append(f"| `{ours}` | {len(names)} | {present} | {share} | {' '.join(missing) or '–'} |")
        if extra:
            gone = [n for n in extra if module is None or not hasattr(module, n)]
            lines.append(f"| `{ours}` (autograd's Bessel family) | {len(extra)} | {len(extra) - len(gone)} | "
                         f"{100 * (len(extra) - len(gone)) / len(extra):.0f}% | {' '.join(gone) or '–'} |")
    return lines


def _functions_section(module_name):
    module = _import(module_name)
    if module is None:
        return [f"## `{module_name}`", "", "Not present.", ""]
    rows = [(name, probe(name, fn)) for name, fn in public_functions(module_name)]
    return _table(f"## `{module_name}`", "functions", rows)


def _table(title, what, rows):
    """A section: its title, the tally of each mode, and one line per probed ``(name, result)``."""
    tally = {m: sum(r[m][0] == "✓" for _, r in rows) for m in MODES}
    lines = [title, "", f"{len(rows)} {what}; " + ", ".join(f"{m} {tally[m]}" for m in MODES) + ".", "",
             "| function | " + " | ".join(MODES) + " | notes |", "|---|" + "---|" * (len(MODES) + 1)]
    for name, result in rows:
        notes = sorted({f"{m}: {result[m][1]}" for m in MODES if result[m][1]})
        lines.append(f"| `{name}` | " + " | ".join(result[m][0] for m in MODES) + f" | {'; '.join(notes)} |")
    return lines + [""]


def _sparse_sections():
    """The sparse operations and solvers (``coverage_sparse.py``), each a function of the stored values
    of a fixed pattern and a dense operand, probed as the functions above are."""
    lines = []
    for module_name, operations in coverage_sparse.sections():
        EXAMPLES.update({name: example for name, _, example in operations})
        rows = [(name, probe(name, fn)) for name, fn, _ in operations]
        lines += _table(f"## `{module_name}` (operations on the stored values of a 4 x 4 tridiagonal pattern)",
                        "operations", rows)
    return lines


def _registry_section():
    prims = primitives()
    rules = {"vjp": lambda p: p.vjp_rules is not None, "jvp": lambda p: p.jvp_rule is not None,
             "batch": lambda p: p.batch_rule is not None}
    differentiable = [p for p in prims if not p.nondiff]
    lines = ["## Primitive registry", "",
             f"{len(prims)} primitives ({len(prims) - len(differentiable)} marked non-differentiable). "
             "Differentiable primitives without a rule:", ""]
    for rule, has in rules.items():
        pool = prims if rule == "batch" else differentiable
        lacking = sorted(p.name for p in pool if not has(p))
        lines.append(f"- {rule}: {', '.join(f'`{n}`' for n in lacking) or 'none'}")
    return lines + [""]


def _float16_section():
    lines = ["## float16", "",
             "A float16 input gives a float16 result, float16 gradients (`grad`, `vjp`) and float16 tangents "
             "(`jvp`); no function upcasts its result. Elementwise functions, `matmul`/`dot` (NumPy's float16 "
             "dot products add in float32 by themselves), convolutions, pooling and losses compute in "
             "float16 end to end. The functions below take float16 operands to float32 for their "
             "accumulation and round the result back to float16, because a float16 accumulation would lose "
             "it (a float16 running sum stops growing at 2048 when it adds ones; a square past 256 is inf). "
             "Functions built on them (`average`, for one) inherit it. Under `jit`, numexpr "
             "fusion leaves float16 equations unfused (numexpr has no float16), so a jitted float16 program "
             "gives the eager values.", "",
             "| function | why it accumulates in float32 |", "|---|---|"]
    lines += [f"| `{name}` | {why} |" for name, why in sorted(FLOAT32_ACCUMULATION.items())]
    return lines + [""]


def render() -> str:
    """The page, as text (deterministic: fixed examples, no timings)."""
    reference = json.loads(REFERENCE.read_text())
    lines = ["# Coverage", "",
             "Generated by `python docs/coverage_page.py` from the public namespaces and the primitive registry; "
             "do not edit by hand.", "",
             "Each function is run on a small example: **value** (it runs and gives finite numbers), **vjp** and "
             "**jvp** (`check_grads` at order 1 agrees with finite differences in that mode, in every float array "
             "argument), **vmap** (two stacked examples give what two calls give) and **jit** (the same values "
             "as eager). ✓ passed, ✗ failed (the note names the exception), – not applicable (nothing to "
             "differentiate: no float in or out; or no array argument to map or trace). A mark speaks for the "
             "example tried, not for every argument (see each function's docstring for its limits).", "",
             "float16 in gives float16 out, in every mode; the functions that accumulate in float32 inside "
             "(sums, statistics, norms, softmax, normalisations) are listed under **float16** below.", ""]
    lines += _counts_section(reference) + [""]
    lines += _registry_section()
    lines += _float16_section()
    for ours, _, _ in NAMESPACES:
        lines += _functions_section(ours)
    lines += _sparse_sections()
    return "\n".join(lines).rstrip() + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if the page is stale")
    parser.add_argument("--reference", action="store_true", help="regenerate the reference lists (needs jax)")
    options = parser.parse_args(argv)
    if options.reference:
        write_reference()
        return 0
    text = render()
    if options.check:
        current = PAGE.read_text() if PAGE.exists() else ""
        if current != text:
            print("docs/coverage.md is stale: run python docs/coverage_page.py", file=sys.stderr)
            return 1
        return 0
    PAGE.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
