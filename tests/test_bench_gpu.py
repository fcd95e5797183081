"""``benchmarks/bench_gpu.py``'s plumbing, without a GPU: every workload once on the strict device double at tiny
sizes (``--backend double``), the gradient check that must stop a wrong contestant, the JSON it writes, the
refusal to write the published files from a partial run, and the one line it prints where there is no GPU.
No timing is asserted (docs/decisions.md): a time is only checked to be a positive number."""
import json
import os
import sys

import numpy as np
import pytest

BENCH_DIR = os.path.join(os.path.dirname(__file__), os.pardir, "benchmarks")


@pytest.fixture(scope="module")
def bench():
    sys.path.insert(0, BENCH_DIR)
    try:
        import bench_gpu
        yield bench_gpu
    finally:
        sys.path.remove(BENCH_DIR)


def _rows(data, workload):
    return {r["name"]: r for r in data["results"][workload]}


def test_dry_run_runs_every_workload_and_writes_the_schema(bench, tmp_path):
    path = tmp_path / "results-gpu.json"
    assert bench.main(["--backend", "double", "--json", str(path), "--png", str(tmp_path / "r.png")]) == 0
    data = json.loads(path.read_text())
    assert data["schema"] == bench.SCHEMA and data["backend"] == "double"
    assert {"date", "device", "versions", "statistic", "tolerance", "skipped", "results", "floor", "memory",
            "first_call", "targets", "mismatches", "titles"} <= set(data)
    assert {"python", "numpy", "tapegrad", "commit"} <= set(data["versions"])
    assert list(data["results"]) == list(bench.WORKLOADS) and data["mismatches"] == []
    for workload in bench.WORKLOADS:
        rows = _rows(data, workload)
        for name in (bench.EAGER, bench.JIT):
            row = rows[name]
            assert row["agrees"] is True and 0 <= row["rel_err"] <= bench.TOL
            assert row["median_ms"] > 0 and row["best_ms"] > 0 and row["calls"] >= 1
    assert _rows(data, "fused")[bench.FLOOR]["median_ms"] > 0  # the measured floor is timed beside them
    assert data["floor"]["bytes"] == 2 * 4 * bench.TINY["fused"] and data["floor"]["nominal_ms"] > 0
    assert set(data["memory"]) >= {bench.EAGER, bench.JIT} and data["memory"][bench.EAGER] > 0
    firsts = {(r["workload"], r["name"]) for r in data["first_call"] if r["error"] is None and r["first_ms"] > 0}
    assert {("mlp", bench.JIT), ("gp", bench.JIT)} <= firsts  # each from a fresh process
    targets = {t["target"]: t for t in data["targets"]}
    assert len(targets) == len(bench.RATIO_TARGETS) + 1 + 2  # the ratios, the GP's first call, its memory
    assert all(t["met"] is None for t in targets.values())  # the double's numbers are judged against nothing


def test_a_wrong_gradient_is_caught_before_timing(bench):
    rng = np.random.default_rng(0)
    ref = [rng.standard_normal((3, 4)), rng.standard_normal(4)]
    right = [(r * (1 + 1e-6)).astype(np.float32) for r in ref]
    assert bench.check_agreement("right", right, ref) < bench.TOL
    wrongs = {"1% off": [right[0] * np.float32(1.01), right[1]], "float64": [r.astype(np.float64) for r in right],
              "shape": [right[0].T, right[1]], "one missing": right[:1], "nan": [right[0], right[1] * np.nan]}
    for why, got in wrongs.items():
        with pytest.raises(bench.GradientMismatch, match="disagree"):
            bench.check_agreement(why, got, ref)
    # in a run: the wrong contestant is reported and left out of the timing; the right one is timed
    host = lambda out: [np.asarray(g) for g in out]
    contestants = {"right": (lambda: right, lambda out: None, host),
                   "wrong": (lambda: wrongs["1% off"], lambda out: None, host)}
    rows, mismatches = bench.run_workload("toy", contestants, ref, rounds=1, target_s=0.0, sync_all=lambda: None)
    by = {r["name"]: r for r in rows}
    assert by["right"]["agrees"] and by["right"]["calls"] == 1
    assert by["wrong"]["agrees"] is False and by["wrong"]["median_ms"] is None and by["wrong"]["rel_err"] > bench.TOL
    assert len(mismatches) == 1 and "toy: wrong" in mismatches[0]


def test_a_run_with_a_wrong_gradient_exits_1(bench, tmp_path, monkeypatch):
    build = bench.BUILDERS["chain"]

    def wrong_eager(*args):
        out = build(*args)
        call, sync, leaves = out[bench.EAGER]
        out[bench.EAGER] = (call, sync, lambda res: [g * np.float32(1.01) for g in leaves(res)])
        return out
    monkeypatch.setitem(bench.BUILDERS, "chain", wrong_eager)
    path = tmp_path / "r.json"
    assert bench.main(["--backend", "double", "chain", "--json", str(path)]) == 1
    data = json.loads(path.read_text())
    assert _rows(data, "chain")[bench.EAGER]["agrees"] is False and len(data["mismatches"]) == 1
    assert _rows(data, "chain")[bench.JIT]["agrees"] is True


@pytest.mark.parametrize("flags", [["--quick"], ["--backend", "double"], ["chain"], ["--rounds", "2"]])
def test_only_a_full_gpu_run_writes_the_published_results(bench, flags):
    before = os.path.getmtime(bench.PUBLISHED_JSON) if os.path.exists(bench.PUBLISHED_JSON) else None
    with pytest.raises(SystemExit, match="only a full run"):
        bench.main([*flags, "--json", bench.PUBLISHED_JSON, "--png", bench.PUBLISHED_PNG])
    after = os.path.getmtime(bench.PUBLISHED_JSON) if os.path.exists(bench.PUBLISHED_JSON) else None
    assert after == before


def test_without_a_gpu_it_says_why_in_one_line_and_exits_0(bench, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(bench, "why_not", lambda: "CuPy is not installed (the test says so)")
    path = tmp_path / "r.json"
    assert bench.main(["--json", str(path)]) == 0
    assert capsys.readouterr().out == "make bench-gpu: nothing to run here: CuPy is not installed (the test says so)\n"
    assert not path.exists()
