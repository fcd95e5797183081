"""The typing gate (`make lint` runs the same checks): mypy accepts src/tapegrad and a typed user program
(tests/typing/good_usage.py), and rejects one with known mistakes (tests/typing/bad_usage.py) with exactly
the errors its ``# expect: [code]`` comments name, so a configuration that fails for another reason fails.
"""
import re
from pathlib import Path

import pytest

mypy_api = pytest.importorskip("mypy.api", reason="mypy is in the dev extra")

ROOT = Path(__file__).resolve().parents[1]
TYPING = ROOT / "tests" / "typing"
ERROR = re.compile(r"^(?P<path>[^:]+):(?P<line>\d+): error: .*\[(?P<code>[a-z-]+)\]$")


def run_mypy(tmp_path_factory, *targets, cache="mypy_cache"):
    cache = tmp_path_factory.getbasetemp() / cache  # shared by the tests of one session (and one set of flags)
    stdout, stderr, status = mypy_api.run(["--config-file", str(ROOT / "pyproject.toml"), "--cache-dir", str(cache),
                                           "--no-error-summary", "--show-error-codes", *map(str, targets)])
    errors = [m.groupdict() for m in map(ERROR.match, stdout.splitlines()) if m]
    return stdout + stderr, status, errors


def test_the_package_and_the_good_program_check_clean(tmp_path_factory):
    out, status, _ = run_mypy(tmp_path_factory, ROOT / "src" / "tapegrad", TYPING / "good_usage.py")
    assert status == 0, out


def test_the_strict_programs_check_clean_under_strict(tmp_path_factory):
    # --strict is the user's setting: tapegrad's modules are read for their types, their errors not reported
    out, status, _ = run_mypy(tmp_path_factory, "--strict", "--follow-imports=silent", TYPING / "strict_usage.py",
                              TYPING / "transforms_strict.py", TYPING / "jit_methods_strict.py",
                              cache="mypy_cache_strict")
    assert status == 0, out


def test_arrays_and_every_transforms_tracers_are_arrays_at_run_time():
    """The protocol's members exist on what tapegrad hands a function: a NumPy array and each transform's
    tracer (isinstance on a runtime-checkable Protocol checks the members' presence)."""
    import numpy as np

    import tapegrad as tg

    seen = []

    def record(x):
        seen.append((type(x).__name__, isinstance(x, tg.Array)))
        return (x * x).sum()

    x = np.linspace(0.0, 1.0, 3)
    record(x)
    tg.jit(record)(x)
    tg.grad(record)(x)
    tg.jvp(record, (x,), (x,))
    tg.vmap(record)(np.ones((2, 3)))
    assert [ok for _, ok in seen] == [True] * 5, seen
    assert len({name for name, _ in seen}) == 5, seen  # ndarray and four kinds of tracer
    assert not isinstance([1.0, 2.0], tg.Array) and not isinstance(1.0, tg.Array)


def test_the_bad_program_gets_exactly_the_errors_it_expects(tmp_path_factory):
    bad = TYPING / "bad_usage.py"
    expected = {(i, m.group(1)) for i, line in enumerate(bad.read_text().splitlines(), 1)
                if (m := re.search(r"# expect: \[([a-z-]+)\]$", line))}
    assert len(expected) >= 3, "bad_usage.py must name the errors it expects"
    out, status, errors = run_mypy(tmp_path_factory, bad)
    assert status == 1, out
    got = {(int(e["line"]), e["code"]) for e in errors}
    assert got == expected, out


PUBLIC_MODULES = ["tapegrad", "tapegrad.numpy", "tapegrad.numpy.linalg", "tapegrad.numpy.fft", "tapegrad.nn",
                  "tapegrad.nn.functional", "tapegrad.nn.init", "tapegrad.optim", "tapegrad.random", "tapegrad.scipy",
                  "tapegrad.scipy.special", "tapegrad.scipy.linalg", "tapegrad.scipy.stats", "tapegrad.scipy.signal",
                  "tapegrad.scipy.integrate", "tapegrad.tree", "tapegrad.testing", "tapegrad.extend",
                  "tapegrad.distributed", "tapegrad.errors"]


def _public_callables():
    """Every public function, and every public method (and __init__, __call__) of a public class, once."""
    import importlib
    import inspect
    import types

    seen = set()
    for module_name in PUBLIC_MODULES:
        module = importlib.import_module(module_name)
        for name in getattr(module, "__all__", None) or [n for n in dir(module) if not n.startswith("_")]:
            obj = getattr(module, name)
            if isinstance(obj, types.ModuleType) or id(obj) in seen:
                continue
            seen.add(id(obj))
            if inspect.isclass(obj):
                for klass in obj.__mro__:
                    if not klass.__module__.startswith("tapegrad"):
                        continue
                    for attr, value in vars(klass).items():
                        fn = value.fget if isinstance(value, property) else getattr(value, "__func__", value)
                        # typing's own __init__ of a Protocol (tapegrad.Array) is not tapegrad's to annotate
                        if (attr in ("__init__", "__call__") or not attr.startswith("_")) and inspect.isfunction(
                                fn) and fn.__module__.startswith("tapegrad") and id(fn) not in seen:
                            seen.add(id(fn))
                            yield f"{module_name}.{name}.{attr}", fn
            elif callable(obj) and getattr(obj, "__module__", "").startswith("tapegrad"):
                yield f"{module_name}.{name}", obj


def test_every_public_callable_is_annotated():
    import inspect

    lacking = []
    for where, fn in _public_callables():
        try:
            sig = inspect.signature(inspect.unwrap(fn))
        except (TypeError, ValueError):
            continue
        params = [p.name for p in sig.parameters.values()
                  if p.name not in ("self", "cls") and p.annotation is inspect.Parameter.empty]
        if params or sig.return_annotation is inspect.Signature.empty:
            lacking.append(f"{where}({', '.join(params)}){'' if params else ' (return)'}")
    assert not lacking, f"{len(lacking)} public callables lack annotations: {lacking[:20]}"
