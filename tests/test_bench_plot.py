"""``benchmarks/plot.py``: the ratios ``make bench`` draws, and the picture it writes."""
import importlib.util
import json
import os

import pytest

_PATH = os.path.join(os.path.dirname(__file__), os.pardir, "benchmarks", "plot.py")
_spec = importlib.util.spec_from_file_location("bench_plot", _PATH)
plot = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(plot)

RESULTS = {
    "chain": [{"name": "numpy fwd+bwd (hand)", "best_us_per_op": 0.5}, {"name": "autograd", "best_us_per_op": 7.5},
              {"name": "tapegrad grad", "best_us_per_op": 3.0}, {"name": "tapegrad jit(grad)", "best_us_per_op": 0.25}],
    "hessian": [{"name": "numpy Hessian (hand)", "kind": "hessian", "best_ms": 0.1},
                {"name": "tapegrad jacfwd(jacrev)", "kind": "hessian", "best_ms": 1.1},
                {"name": "numpy HVP (hand)", "kind": "hvp", "best_ms": 0.02},
                {"name": "tapegrad jvp of grad", "kind": "hvp", "best_ms": 0.05}],
    "checkpoint": [{"name": "tapegrad plain grad", "best_ms": 4.0}],  # no peer: no ratio
    "sin10": [{"name": "numpy -sin(x) (closed form)", "best_us": 4.0}, {"name": "autograd x10", "best_us": 500.0},
              {"name": "tapegrad grad x10", "best_us": 250.0}],
    "mlp": [{"name": "numpy fwd+bwd (hand)", "best_ms": 2.0}, {"name": "tapegrad forward only", "best_ms": 1.0}],
}


def test_ratios_are_over_the_fastest_peer_of_the_same_kind_and_direction():
    found = plot.ratios(RESULTS)
    got = {(r.bench, r.name): (r.ratio, r.peer) for r in found}
    assert got.keys() == {("chain", "tapegrad grad"), ("chain", "tapegrad jit(grad)"),
                          ("hessian / hessian", "tapegrad jacfwd(jacrev)"), ("hessian / hvp", "tapegrad jvp of grad"),
                          ("sin10", "tapegrad grad x10")}  # a forward-only row has no forward-only peer here
    assert got[("chain", "tapegrad grad")] == (pytest.approx(6.0), "numpy fwd+bwd (hand)")
    assert got[("chain", "tapegrad jit(grad)")] == (pytest.approx(0.5), "numpy fwd+bwd (hand)")
    assert got[("hessian / hessian", "tapegrad jacfwd(jacrev)")] == (pytest.approx(11.0), "numpy Hessian (hand)")
    assert got[("hessian / hvp", "tapegrad jvp of grad")] == (pytest.approx(2.5), "numpy HVP (hand)")
    assert got[("sin10", "tapegrad grad x10")] == (pytest.approx(0.5), "autograd x10")  # not the closed form


def test_main_writes_the_picture_and_the_table(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    source, png = tmp_path / "results.json", tmp_path / "results.png"
    source.write_text(json.dumps({"environment": "test", "results": RESULTS}))
    plot.main([str(source), str(png)])
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    table = capsys.readouterr().out
    assert "| chain | tapegrad grad | 6.00x | numpy fwd+bwd (hand) |" in table


def test_nothing_to_compare_is_an_error_naming_the_file(tmp_path):
    source = tmp_path / "results.json"
    source.write_text(json.dumps({"results": {"checkpoint": RESULTS["checkpoint"]}}))
    with pytest.raises(SystemExit, match="results.json: no benchmark there has both"):
        plot.main([str(source), str(tmp_path / "out.png")])
