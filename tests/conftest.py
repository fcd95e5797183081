"""Hypothesis profiles for the property tests (tests/test_properties*.py).

``ci`` (the default): few examples per test, derandomized and without an example database, so every
run of ``make test`` draws the same examples on every machine and the property tests cost about 20 s
(10 examples per test).
``fuzz`` (``HYPOTHESIS_PROFILE=fuzz``, what ``make fuzz`` sets): 300 random examples per test, with
Hypothesis's example database under ``.hypothesis/`` so a failure found once is replayed first next time.
Neither has a deadline: the machines running the suite are shared, and a slow example is not a bug.

Tests marked ``peer("torch")`` or ``peer("jax")`` compare with PyTorch or JAX (the ``peers`` extra,
``make test-peers``). Where the peer is not installed they are skipped, with the reason, except under
``CI=true``, where a missing peer stops the run before any test: CI must never pass them unseen.
"""
import os

# jit's compiled executor (numba, tapegrad._jit.native) compiles each program it takes at its first
# call, ~0.1-1 s apiece: the suite runs on the Python executor unless this is set (``make test-native``
# runs it with TAPEGRAD_COMPILED_EXECUTOR=1); tests/test_jit_native.py switches it on itself
os.environ.setdefault("TAPEGRAD_COMPILED_EXECUTOR", "0")

import importlib.util  # noqa: E402

import pytest  # noqa: E402
from hypothesis import HealthCheck, settings  # noqa: E402

_COMMON = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
               print_blob=True)
settings.register_profile("ci", max_examples=10, derandomize=True, database=None, **_COMMON)
settings.register_profile("fuzz", max_examples=300, **_COMMON)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


@pytest.fixture(autouse=True)
def _python_executor(request):
    """A test marked ``python_executor`` (numexpr's fusion, the Python-float loop) runs with jit's
    compiled executor off, whatever ``make test-native`` set."""
    if request.node.get_closest_marker("python_executor") is None:
        yield
        return
    import tapegrad as tg
    saved = tg.config.compiled_executor
    tg.config.compiled_executor = False
    try:
        yield
    finally:
        tg.config.compiled_executor = saved


@pytest.hookimpl(trylast=True)  # after -m's deselection: `make test` (-m "not peer") needs no peer
def pytest_collection_modifyitems(config, items):
    """The ``peer`` tests of a peer that is not installed: skipped, or under ``CI=true`` an error."""
    missing: dict[str, int] = {}
    for item in items:
        marker = item.get_closest_marker("peer")
        if marker is None:
            continue
        name = marker.args[0]
        if importlib.util.find_spec(name) is None:
            missing[name] = missing.get(name, 0) + 1
            item.add_marker(pytest.mark.skip(reason=f"{name} is not installed: make test-peers installs the "
                                                    "peers extra (pip install -e '.[dev,peers]')"))
    if missing and os.environ.get("CI") == "true":
        counts = ", ".join(f"{n} tests need {name}" for name, n in sorted(missing.items()))
        raise pytest.UsageError(f"CI=true and a peer library is missing ({counts}): install the peers extra "
                                "(pip install -e '.[dev,peers]', as make test-peers does)")
