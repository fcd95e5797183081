"""``jacobian_memory``: peak memory and time of a 2000 x 2000 Jacobian, with and without ``chunk_size``.

The function is ``f(x) = tanh(A @ x)`` with ``A`` of shape (2000, 2000) and ``x`` of shape (2000,),
float64: its Jacobian ``diag(1 - tanh(A x)^2) @ A`` is 2000 x 2000, 30.5 MiB. Contestants:

- ``tapegrad jacrev`` / ``jacfwd``: every basis vector at once (one batched backward pass, or one
  batched forward sweep): the basis itself (30.5 MiB) and each batched intermediate (30.5 MiB each)
  are alive together;
- the same with ``chunk_size=k`` (torch.func's argument; k = 100, 500): at most k basis vectors per
  batched pass, so the basis and the intermediates hold k rows at a time; the chunks' results are
  concatenated at the end (the result, plus its pieces while they are joined);
- ``numpy (hand)``: ``(1 - t**2)[:, None] * A``, the floor: the result and one temporary.

Peak memory: ``tracemalloc`` started after ``A`` and ``x`` exist (``bench_checkpoint.peak_mib``), so the
peak counts what one Jacobian call allocates, its result included. Time: best of interleaved samples
without ``tracemalloc``; the ratios are to the unchunked row of the same mode. Each Jacobian is checked
against NumPy's (max relative error).

Target (issue 16, item 8): report the peak with and without ``chunk_size``, and the time it costs.

Run alone: ``python benchmarks/bench_jacobian_memory.py [--quick] [--threads N]``.
"""
from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _timing import apply_thread_flag, format_table, interleaved, standalone_main  # noqa: E402

if __name__ == "__main__":
    apply_thread_flag(sys.argv)  # before NumPy is imported

import numpy as np  # noqa: E402
from bench_checkpoint import peak_mib  # noqa: E402

import tapegrad as tg  # noqa: E402
import tapegrad.numpy as tnp  # noqa: E402

N = 2000
CHUNKS = (100, 500)
HAND = "numpy (hand)"


def make_problem(seed: int = 0):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((N, N)) / np.sqrt(N), rng.standard_normal(N)


def contestants(A):
    def f(x):
        return tnp.tanh(A @ x)

    def hand(x):
        t = np.tanh(A @ x)
        return (1 - t * t)[:, None] * A

    out = {}
    for mode, jac in (("jacrev", tg.jacrev), ("jacfwd", tg.jacfwd)):
        out[f"tapegrad {mode}"] = jac(f)
        for k in CHUNKS:
            out[f"tapegrad {mode}, chunk_size={k}"] = jac(f, chunk_size=k)
    out[HAND] = hand
    return out


def _reference_of(name: str) -> str:
    return name.split(",")[0] if name.startswith("tapegrad") else HAND


def run(quick: bool = False):
    """Peak memory of one call of each contestant, then interleaved times; a list of result dicts."""
    A, x = make_problem()
    cands = contestants(A)
    want = cands[HAND](x)
    errors = {name: float(np.max(np.abs(fn(x) - want)) / np.max(np.abs(want))) for name, fn in cands.items()}
    peaks = {name: peak_mib(lambda fn=fn: fn(x)) for name, fn in cands.items()}
    timings = interleaved({name: (lambda fn=fn: fn(x)) for name, fn in cands.items()},
                          repeat=2 if quick else 5, warmup=1, number=1)
    results = []
    for name in cands:
        ref = _reference_of(name)
        results.append({
            "bench": "jacobian_memory", "name": name, "best_ms": timings[name].best * 1e3,
            "time_ratio": timings[name].best / timings[ref].best, "to": ref,
            "peak_mib": peaks[name], "peak_ratio": peaks[name] / peaks[ref], "rel_err": errors[name],
        })
    return results


def table(results) -> str:
    rows = [[r["name"], f"{r['peak_mib']:.1f}", f"{r['peak_ratio']:.2f}x", f"{r['best_ms']:.1f}",
             f"{r['time_ratio']:.2f}x", f"{r['rel_err']:.1e}"] for r in results]
    headers = [f"jacobian_memory: {N}x{N} Jacobian of tanh(A @ x), f64", "peak MiB", "vs unchunked", "ms best",
               "vs unchunked", "rel err"]
    return format_table(headers, rows)


def compact_rows(results):
    """Rows for ``run.py``'s table: bench, contestant, time, ratio, to, note, rel err, dtype."""
    return [["jacobian_memory", r["name"], f"{r['best_ms']:.1f} ms", f"{r['time_ratio']:.2f}x",
             r["to"].replace("tapegrad ", "tg "), f"peak {r['peak_mib']:.1f} MiB ({r['peak_ratio']:.2f}x)",
             f"{r['rel_err']:.1e}", "float64"] for r in results]


def verdict(results) -> str:
    parts = [f"{r['name'].replace('tapegrad ', '')}: {r['peak_mib']:.0f} MiB ({r['peak_ratio']:.2f}x), time "
             f"{r['time_ratio']:.2f}x" for r in results if "chunk_size" in r["name"]]
    return "jacobian_memory (reported, no target): " + "; ".join(parts)


def main(argv=None):
    return standalone_main(run, table, verdict, argv)


if __name__ == "__main__":
    main()
