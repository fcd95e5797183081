"""``benchmarks/run.py``'s registry: every benchmark it names has the four functions ``make bench`` calls
(a missing ``compact_rows`` stopped ``make bench`` after the staging benchmark, with nothing written)."""
import os
import sys

import pytest

BENCH_DIR = os.path.join(os.path.dirname(__file__), os.pardir, "benchmarks")


@pytest.fixture(scope="module")
def registry():
    sys.path.insert(0, BENCH_DIR)
    try:
        import run
        yield run.BENCHMARKS
    finally:
        sys.path.remove(BENCH_DIR)


def test_every_registered_benchmark_has_what_run_py_calls(registry):
    missing = {name: [f for f in ("run", "table", "verdict", "compact_rows") if not callable(getattr(mod, f, None))]
               for name, mod in registry.items()}
    assert {name: fs for name, fs in missing.items() if fs} == {}
