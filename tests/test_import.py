"""``import tapegrad`` stays cheap: optional dependencies and the rarely used submodules load on first use,
and the names that load lazily still resolve, with their behaviour intact.

Each check runs in a fresh interpreter (this process has imported everything already).
"""
import json
import subprocess
import sys

import numpy as np
import pytest

from _tol import assert_close

LAZY = ("distributed", "flatten_util", "nn", "optim", "random", "scipy", "testing")


def _fresh(code: str) -> dict:
    """Run ``code`` in a fresh interpreter; it prints one JSON value, returned here."""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


# what `import tapegrad` must not import: optional dependencies, and what only some uses need, each of which
# cost a share of the import that benchmarks/bench_import.py measures (importlib.metadata, for __version__,
# imports email and zipfile; optree and vmap's front end load on the first pytree a transform flattens)
HEAVY = ("numexpr", "scipy", "matplotlib", "sklearn", "torch", "jax", "numba", "safetensors", "mpi4py",
         "threadpoolctl", "importlib.metadata", "email", "zipfile", "optree", "typing_extensions",
         "tapegrad._vmap_api", "tapegrad.numpy.linalg", "tapegrad.numpy.fft")


def test_import_loads_neither_optional_dependencies_nor_lazy_submodules():
    loaded = _fresh("import json, sys, tapegrad; print(json.dumps(sorted(sys.modules)))")
    for heavy in HEAVY:
        assert heavy not in loaded, f"import tapegrad imported {heavy}"
    for name in LAZY:
        assert f"tapegrad.{name}" not in loaded, f"import tapegrad imported tapegrad.{name}"
    assert "tapegrad.numpy" in loaded  # installs the operators on traced values: it must stay eager


def test_lazy_submodules_resolve_to_the_real_modules():
    code = ("import importlib, json, tapegrad as tg\n"
            f"names = {LAZY!r}\n"
            "same = [getattr(tg, n) is importlib.import_module('tapegrad.' + n) for n in names]\n"
            "from tapegrad import nn, scipy\n"
            "missing = sorted(set(names) - set(dir(tg)))\n"
            "print(json.dumps({'same': same, 'from': [nn is tg.nn, scipy is tg.scipy],\n"
            "                  'all': all(hasattr(tg, n) for n in tg.__all__), 'dir': missing}))")
    got = _fresh(code)
    assert got == {"same": [True] * len(LAZY), "from": [True, True], "all": True, "dir": []}


def test_lazy_names_resolve_to_the_real_objects():
    code = ("import importlib, json, tapegrad as tg\n"
            "from tapegrad import jit, vmap\n"
            "print(json.dumps({'vmap': vmap is tg.vmap is importlib.import_module('tapegrad._vmap_api').vmap,\n"
            "                  'jit': jit is tg.jit is importlib.import_module('tapegrad._jit').jit,\n"
            "                  'dir': [n for n in ('vmap', 'jit', 'save', '__version__') if n not in dir(tg)]}))")
    assert _fresh(code) == {"vmap": True, "jit": True, "dir": []}


def test_numpys_linalg_and_fft_dispatch_before_tapegrad_numpy_imports_ours():
    """``np.linalg.det(x)`` of a traced ``x``, in a program that never named ``tapegrad.numpy.linalg``,
    imports it and traces; so do ``np.fft`` and the error for a list that holds a traced value."""
    code = ("import json, numpy as np, tapegrad as tg\n"
            "from tapegrad import extend\n"
            "a = np.array([[2.0, 1.0], [0.5, 3.0]])\n"
            "g = tg.grad(lambda m: np.linalg.det(m))(a)\n"
            "f = tg.grad(lambda v: np.fft.rfft(v).real.sum())(np.arange(4.0))\n"
            "try:\n"
            "    tg.grad(lambda v: np.linalg.norm([v[0], v[1]]))(np.arange(2.0))\n"
            "    error = ''\n"
            "except Exception as e:\n"
            "    error = str(e)\n"
            "names = {p.name for p in extend.primitives()}\n"
            "print(json.dumps({'g': g.tolist(), 'f': f.tolist(), 'error': error, 'dir': sorted({'fft', 'linalg'} -\n"
            "                  set(dir(tg.numpy))), 'fft': tg.numpy.fft.__name__, 'svd': 'svd' in names}))")
    got = _fresh(code)
    a = np.array([[2.0, 1.0], [0.5, 3.0]])
    assert_close(np.array(got["g"]), np.linalg.det(a) * np.linalg.inv(a).T)
    assert_close(np.array(got["f"]), np.fft.rfft(np.eye(4)).real.sum(axis=1))  # linear: the basis' images
    assert "tapegrad.numpy.linalg.norm" in got["error"]
    assert got["dir"] == [] and got["fft"] == "tapegrad.numpy.fft" and got["svd"] is True


def test_the_version_is_read_on_first_use():
    import importlib.metadata
    got = _fresh("import json, sys, tapegrad as tg\n"
                 "before = 'importlib.metadata' in sys.modules\n"
                 "print(json.dumps({'before': before, 'version': tg.__version__}))")
    assert got == {"before": False, "version": importlib.metadata.version("tapegrad")}


def test_an_unknown_attribute_is_still_an_attribute_error():
    import tapegrad as tg
    with pytest.raises(AttributeError, match="no attribute 'nonexistent'"):
        tg.nonexistent  # noqa: B018


def test_lazy_submodules_compute_through_the_public_api():
    """First use of each lazy name after a bare ``import tapegrad``: real numbers, checked."""
    code = ("import json, numpy as np, tapegrad as tg\n"
            "x = np.array([0.5, 1.5, 2.5])\n"
            "g = tg.grad(lambda v: tg.scipy.special.gammaln(v).sum())(x)\n"
            "layer = tg.nn.Dense(3, 2)\n"
            "y = layer(np.ones((1, 3), np.float32))\n"
            "print(json.dumps({'g': g.tolist(), 'shape': list(y.shape)}))")
    got = _fresh(code)
    from scipy.special import digamma
    assert_close(np.array(got["g"]), digamma([0.5, 1.5, 2.5]))
    assert got["shape"] == [1, 2]


def test_scipy_ufuncs_trace_without_touching_tapegrad_scipy():
    """scipy.special's ufuncs on traced values dispatch to ours even when the program never named
    tapegrad.scipy (it is imported when a traced value first meets SciPy)."""
    code = ("import json, numpy as np, scipy.special, tapegrad as tg\n"
            "x = np.array([0.3, 1.0, 4.0])\n"
            "g = tg.grad(lambda v: scipy.special.gammaln(v).sum())(x)\n"
            "print(json.dumps(g.tolist()))")
    got = _fresh(code)
    from scipy.special import digamma
    assert_close(np.array(got), digamma([0.3, 1.0, 4.0]))


def test_numexpr_loads_when_a_program_first_fuses():
    pytest.importorskip("numexpr")
    code = ("import json, sys, numpy as np, tapegrad as tg\n"
            "before = 'numexpr' in sys.modules\n"
            "f = tg.jit(lambda x: tg.numpy.sin(x) * 2.0 + tg.numpy.exp(x) - x * x)\n"
            "x = np.linspace(0, 1, 4096)\n"
            "y = f(x)\n"
            "print(json.dumps({'before': before, 'after': 'numexpr' in sys.modules, 'y': y.tolist()}))")
    got = _fresh(code)
    assert got["before"] is False and got["after"] is True
    x = np.linspace(0, 1, 4096)
    assert_close(np.array(got["y"]), np.sin(x) * 2.0 + np.exp(x) - x * x)


def test_a_users_primitive_named_like_a_lazy_packages_is_refused_at_once():
    """A user's primitive is checked against the primitives of the packages not imported yet (nn's
    ``relu``): refused when declared, as before, not later when ``tapegrad.nn`` loads."""
    code = ("import json, tapegrad as tg\n"
            "from tapegrad import extend\n"
            "try:\n"
            "    extend.primitive('relu', lambda x: x)\n"
            "    clash = None\n"
            "except ValueError as e:\n"
            "    clash = str(e)\n"
            "mine = extend.primitive('mylib.twice', lambda x: 2 * x, extend.unary_abstract_eval)\n"
            "print(json.dumps({'clash': clash, 'nn': tg.nn.functional.relu is not None,\n"
            "                  'listed': any(p is mine for p in extend.primitives())}))")
    got = _fresh(code)
    assert got["clash"] is not None and "'relu' is already registered" in got["clash"]
    assert got["nn"] is True and got["listed"] is True


def test_save_and_load_import_safetensors_only_when_called(tmp_path):
    pytest.importorskip("safetensors")
    path = str(tmp_path / "w.safetensors")
    code = ("import json, sys, numpy as np, tapegrad as tg\n"
            "before = [m for m in ('tapegrad._serialization', 'safetensors') if m in sys.modules]\n"
            f"tg.save({path!r}, {{'w': np.arange(3.0)}})\n"
            f"w = tg.load({path!r})['w']\n"
            "print(json.dumps({'before': before, 'after': 'safetensors' in sys.modules, 'w': w.tolist()}))")
    assert _fresh(code) == {"before": [], "after": True, "w": [0.0, 1.0, 2.0]}


def test_the_distributed_package_imports_mpi4py_only_when_a_collective_needs_it():
    got = _fresh("import json, sys, tapegrad.distributed as d\n"
                 "print(json.dumps({'mpi4py': 'mpi4py' in sys.modules, 'shard': d.shard(10, 1, 2).tolist()}))")
    assert got["mpi4py"] is False and len(got["shard"]) == 5
