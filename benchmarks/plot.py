"""The benchmark picture: each tapegrad row's time over the best peer's in the same comparison.

Usage: ``python benchmarks/plot.py [RESULTS_JSON] [PNG]`` (defaults ``benchmarks/results.json`` and
``benchmarks/results.png``, the files ``make bench`` writes); it also prints the ratios as a Markdown
table, the one ``benchmarks/README.md`` shows beside the picture.

A comparison is one benchmark's rows of one kind (``hessian``'s Hessians apart from its HVPs, ``gp``'s
GP steps apart from its first-order gradients): only rows timed together, on the same work, are
compared, and a "forward only" row only with peers' forward-only rows. Its peers are the rows that are
not tapegrad's (hand-written NumPy, autograd, PyTorch, JAX), except a closed form (``sin10``'s
``-sin(x)``: it differentiates nothing); the best peer is the fastest of them. A ratio below 1 means
tapegrad is the faster. Rows with no peer doing the same work (``gp`` without PyTorch, the first calls
of ``jit``, ``sin10``'s first derivative) have no ratio and are left out of the picture.
The x axis is logarithmic: 0.5x and 2x are the same distance from parity.
"""
from __future__ import annotations

import json
import os
import sys
import textwrap
from typing import NamedTuple

HERE = os.path.dirname(os.path.abspath(__file__))
OURS = ("tapegrad", "tg ")  # how tapegrad's rows are named; every other row is a peer ...
NOT_PEERS = ("(closed form)",)  # ... but these references
UNMATCHED = ("tapegrad grad x1",)  # sin10's first derivative: the peers' rows are of the tenth
FORWARD = "forward only"


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
            label = bench if len(kinds) == 1 or kind is None else f"{bench} / {kind}"
            for forward in (False, True):
                same = [row for row in group if (FORWARD in row["name"]) == forward]
                peers = [row for row in same if not is_ours(row["name"]) and not row["name"].endswith(NOT_PEERS)]
                if peers:
                    peer = min(peers, key=best_time)
                    found += [Ratio(label, row["name"], best_time(row) / best_time(peer), peer["name"])
                              for row in same if is_ours(row["name"]) and row["name"] not in UNMATCHED]
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
    values = [r.ratio for r in found]
    ax.set_xlim(min(min(values), 1) / 2.5, max(max(values), 1) * 2.5)  # room for the labels at both ends
    ax.axvline(1.0, color="black", linewidth=1)
    ax.set_yticks(list(y), labels, fontsize=8)
    for yi, r in zip(y, found):
        faster = r.ratio <= 1  # the label goes beyond the bar's end, away from parity
        ax.annotate(f"{r.ratio:.2f}x", (r.ratio, yi), xytext=(-3 if faster else 3, 0), textcoords="offset points",
                    va="center", ha="right" if faster else "left", fontsize=7)
    ax.set_xlabel("tapegrad's time / the best peer's (log scale; < 1: tapegrad is faster)")
    ax.set_title(textwrap.fill(title, 110), fontsize=8)
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
