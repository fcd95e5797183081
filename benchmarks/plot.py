"""The benchmark picture: each tapegrad row's time over the best peer's in the same comparison.

Usage: ``python benchmarks/plot.py [RESULTS_JSON] [PNG]`` (defaults ``benchmarks/results.json`` and
``benchmarks/results.png``, the files ``make bench`` writes); it also prints the ratios as a Markdown
table, the one ``benchmarks/README.md`` shows beside the picture.

A comparison is one benchmark's rows of one kind (``hessian``'s Hessians apart from its HVPs, ``gp``'s
GP steps apart from its first-order gradients): only rows timed together, on the same work, are
compared. Its peers are the rows that are not tapegrad's (hand-written NumPy, autograd, PyTorch, JAX);
the best peer is the fastest of them. A ratio below 1 means tapegrad is the faster. Comparisons with no
peer (``checkpoint``'s rows, the first calls of ``jit``) have no ratio and are left out of the picture.
The x axis is logarithmic: 0.5x and 2x are the same distance from parity.
"""
from __future__ import annotations

import json
import os
import sys
from typing import NamedTuple

HERE = os.path.dirname(os.path.abspath(__file__))
OURS = ("tapegrad", "tg ")  # how tapegrad's rows are named; every other row is a peer


class Ratio(NamedTuple):
    bench: str  # "hessian" or "hessian / hvp": the benchmark, and the kind when it has several
    name: str  # tapegrad's row
    ratio: float  # its time over the best peer's
    peer: str  # the best peer's row


def best_time(row: dict) -> float | None:
    """A row's best time: its first ``best_*`` field (``best_us_per_op``, ``best_ms``, ...)."""
    return next((v for k, v in row.items() if k.startswith("best_") and v is not None), None)


def is_ours(name: str) -> bool:
    return name.lower().startswith(OURS)


def ratios(results: dict) -> list[Ratio]:
    """Every tapegrad row over the best peer of its comparison (``results``: benchmark -> rows, as
    ``run.py --json`` writes under ``"results"``)."""
    found = []
    for bench, rows in results.items():
        kinds = list(dict.fromkeys(row.get("kind") for row in rows))
        for kind in kinds:
            group = [row for row in rows if row.get("kind") == kind and best_time(row) is not None]
            peers = [row for row in group if not is_ours(row["name"])]
            if not peers:
                continue
            peer = min(peers, key=best_time)
            label = bench if len(kinds) == 1 or kind is None else f"{bench} / {kind}"
            found += [Ratio(label, row["name"], best_time(row) / best_time(peer), peer["name"])
                      for row in group if is_ours(row["name"])]
    return found


def markdown(found: list[Ratio]) -> str:
    lines = ["| benchmark | tapegrad | time / best peer's | best peer |", "|---|---|---:|---|"]
    lines += [f"| {r.bench} | {r.name} | {r.ratio:.2f}x | {r.peer} |" for r in found]
    return "\n".join(lines)


def plot(found: list[Ratio], path: str, title: str) -> None:
    """A horizontal bar per ratio on a log axis, parity marked; green where tapegrad is faster."""
    import matplotlib
    matplotlib.use("Agg")  # no display: the picture goes to a file
    import matplotlib.pyplot as plt

    labels = [f"{r.bench}: {r.name.removeprefix('tapegrad ')}  (vs {r.peer})" for r in found]
    fig, ax = plt.subplots(figsize=(10, 0.32 * len(found) + 1.4))
    y = range(len(found))[::-1]  # the first row at the top
    colors = ["tab:green" if r.ratio <= 1 else "tab:red" for r in found]
    ax.barh(list(y), [r.ratio - 1 for r in found], left=1, color=colors)  # each bar from parity to its ratio
    ax.set_xscale("log")
    ax.axvline(1.0, color="black", linewidth=1)
    ax.set_yticks(list(y), labels, fontsize=8)
    for yi, r in zip(y, found):
        ax.annotate(f"{r.ratio:.2f}x", (r.ratio, yi), xytext=(3, 0), textcoords="offset points", va="center",
                    fontsize=7)
    ax.set_xlabel("tapegrad's time / the best peer's (log scale; < 1: tapegrad is faster)")
    ax.set_title(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv=None) -> list[Ratio]:
    argv = sys.argv[1:] if argv is None else list(argv)
    json_path = argv[0] if argv else os.path.join(HERE, "results.json")
    png_path = argv[1] if len(argv) > 1 else os.path.join(HERE, "results.png")
    with open(json_path) as f:
        data = json.load(f)
    found = ratios(data["results"])
    if not found:
        sys.exit(f"{json_path}: no benchmark there has both tapegrad's rows and a peer's; nothing to plot")
    plot(found, png_path, data.get("environment", ""))
    print(markdown(found))
    print(f"wrote {png_path}")
    return found


if __name__ == "__main__":
    main()
