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


@pytest.mark.parametrize("flags", [["--quick"], ["chain"], ["--quick", "sin10"]])
def test_only_a_full_run_writes_the_published_results(registry, flags):
    """``benchmarks/results.json`` (and the picture drawn from it) is what the docs show: a smoke run or a
    subset aimed at it stops before running anything, and leaves it as it was."""
    run = sys.modules["run"]
    before = os.path.getmtime(run.PUBLISHED)
    with pytest.raises(SystemExit, match="only a full run writes"):
        run.main([*flags, "--json", os.path.join(BENCH_DIR, "results.json")])
    assert os.path.getmtime(run.PUBLISHED) == before
