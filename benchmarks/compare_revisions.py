"""Compare tapegrad's benchmark times at two revisions, runs alternated between them.

Usage: ``python benchmarks/compare_revisions.py BEFORE [AFTER] [--rounds R] [--threads N] [--quick]
[--json PATH] [--markdown PATH] [names...]``

- ``BEFORE``, ``AFTER``: git revisions; ``AFTER`` defaults to the working tree (its ``src``, uncommitted
  changes included). A revision's ``src`` is exported with ``git archive`` into a temporary folder,
  removed at the end.
- ``--rounds R`` (default 5): each round runs every benchmark once per revision, in a fresh process;
  the revision that goes first alternates from round to round.
- ``--threads N``, ``--quick``: as for ``run.py``.
- ``--json PATH``: every run's rows and the summary; ``--markdown PATH``: the table (always printed).
- names: ``run.py``'s benchmark names (default: chain mlp sin10 hessian gp).

Both revisions are measured with the *current* checkout's benchmark scripts: each run imports
``benchmarks/run.py`` in a subprocess whose ``PYTHONPATH`` starts with the revision's ``src``, so
``import tapegrad`` loads that revision; the run reports ``tapegrad.__file__`` and a run that loaded
another tree stops the comparison. NumPy and the peers come from the same environment for both.

For every row, "before" and "after" are the best over the rounds of ``run.py``'s best-of-samples time;
"spread" is how far the worst round's time was above the best (before / after). Rows of other
contestants (NumPy, autograd, PyTorch, JAX) run the same code on both sides: they are controls, whose
after/before should be about 1.00; a control far from 1 means the machine was disturbed.
"""
from __future__ import annotations

import argparse
import compileall
import io
import json
import os
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH_DIR))
from _timing import THREAD_VARS  # noqa: E402  (_timing imports only the standard library)

ROOT = BENCH_DIR.parent
DEFAULT_NAMES = ["chain", "mlp", "sin10", "hessian", "gp"]
TOLERANCE = 1.05  # after/before above this is a slowdown

# Runs in the subprocess: one benchmark of run.py, then the rows and the tapegrad that was loaded.
_CHILD = """
import json, sys
# A setuptools editable finder (strict mode) would win over PYTHONPATH: drop it.
sys.meta_path[:] = [f for f in sys.meta_path if not type(f).__module__.startswith("__editable__")]
job = json.loads(sys.argv[1])
sys.path.insert(0, job["bench_dir"])
import run
unknown = sorted(set(job["names"]) - set(run.BENCHMARKS))
if unknown:
    sys.exit(f"unknown benchmark(s) {unknown}: run.py knows {sorted(run.BENCHMARKS)}")
results = run.main(job["names"] + (["--quick"] if job["quick"] else []))
import tapegrad
with open(job["out"], "w") as f:
    json.dump({"tapegrad_file": tapegrad.__file__, "results": results}, f)
"""


def _git(*args: str) -> str:
    return subprocess.run(["git", "-C", str(ROOT), *args], check=True, capture_output=True,
                          text=True).stdout.strip()


def _is_revision(arg: str) -> bool:
    """True when ``arg`` names a commit and is not a benchmark name."""
    if (BENCH_DIR / f"bench_{arg}.py").exists():
        return False
    return subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--verify", "--quiet", f"{arg}^{{commit}}"],
                          capture_output=True).returncode == 0


def export_src(rev: str, dest: Path) -> dict:
    """Write revision ``rev``'s ``src`` folder under ``dest``.

    Returns:
        The side's description: ``{"label", "commit", "src"}``.
    """
    commit = _git("rev-parse", "--verify", f"{rev}^{{commit}}")
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", "--format=tar", commit, "src"],
                             check=True, capture_output=True).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(dest, filter="data")
    compileall.compile_dir(dest / "src", quiet=1)  # as the working tree's: no run pays for compiling
    label = rev if commit.startswith(rev) else f"{rev} ({commit[:7]})"
    return {"label": label, "commit": commit, "src": str(dest / "src")}


def working_tree() -> dict:
    """The working tree's own ``src``, described like :func:`export_src`'s result."""
    head = _git("rev-parse", "HEAD")
    dirty = " + uncommitted changes" if _git("status", "--porcelain", "--", "src") else ""
    return {"label": f"working tree (HEAD {head[:7]}{dirty})", "commit": head, "src": str(ROOT / "src")}


def run_once(side: dict, name: str, quick: bool, threads: int | None, out: Path) -> dict:
    """One benchmark at one revision, in a fresh process; checks that it imported that revision.

    Returns:
        ``{"tapegrad_file", "results"}``, ``results`` as ``run.py``'s (name -> rows).

    Raises:
        RuntimeError: the run failed, or ``tapegrad`` came from another tree than ``side["src"]``.
    """
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [side["src"], os.environ.get("PYTHONPATH")])))
    if threads is not None:
        env.update({var: str(threads) for var in THREAD_VARS})
    out.unlink(missing_ok=True)  # never read the previous run's rows
    job = {"bench_dir": str(BENCH_DIR), "names": [name], "quick": quick, "out": str(out)}
    proc = subprocess.run([sys.executable, "-c", _CHILD, json.dumps(job)], env=env, cwd=out.parent,
                          capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"{name} at {side['label']} failed:\n{(proc.stdout + proc.stderr)[-3000:]}")
    data = json.loads(out.read_text())
    if not Path(data["tapegrad_file"]).resolve().is_relative_to(Path(side["src"]).resolve()):
        raise RuntimeError(f"{name} at {side['label']} imported tapegrad from {data['tapegrad_file']}, "
                           f"not from {side['src']}: the comparison would be meaningless")
    return data


def _time_of(row: dict) -> tuple[str, float]:
    """A row's unit and best time: its first ``best_*`` field (``best_us_per_op`` -> ``us/op``)."""
    key = next(k for k, v in row.items() if k.startswith("best_") and v is not None)
    return key[len("best_"):].replace("_per_", "/"), row[key]


def collect(runs: list) -> list:
    """Group the rows of every run by (benchmark, kind, name): each side's time per round."""
    rows = {}
    for run in runs:
        for bench, results in run["results"].items():
            for r in results:
                unit, t = _time_of(r)
                entry = rows.setdefault((bench, r.get("kind", ""), r["name"]), {
                    "bench": bench, "kind": r.get("kind", ""), "name": r["name"], "unit": unit,
                    "tapegrad": r["name"].startswith("tapegrad"), "before": [], "after": []})
                entry[run["side"]].append(t)
    return list(rows.values())


def summarise(row: dict) -> dict:
    """Add best-of-rounds times, the ratio after/before, the spreads and a verdict to ``row``."""
    def spread(ts):
        return max(ts) / min(ts) - 1 if len(ts) > 1 else None
    before, after = min(row["before"], default=None), min(row["after"], default=None)
    ratio = after / before if before and after else None
    if ratio is None:
        verdict = "missing on one side"
    elif not row["tapegrad"]:
        verdict = "control" if abs(ratio - 1) <= TOLERANCE - 1 else "control: machine disturbed?"
    else:
        verdict = "better" if ratio < 2 - TOLERANCE else "within 5%" if ratio <= TOLERANCE else "SLOWER"
    return dict(row, before_best=before, after_best=after, ratio=ratio, verdict=verdict,
                before_spread=spread(row["before"]), after_spread=spread(row["after"]))


def markdown(rows: list, header: str) -> str:
    """The table: tapegrad's rows first, then the controls."""
    def fmt(t, unit):
        return "—" if t is None else f"{t:.3g} {unit}" if t < 1000 else f"{t:,.0f} {unit}"

    def pct(s):
        return "—" if s is None else f"{s:.0%}"
    lines = [header, "",
             "| benchmark | row | before | after | after/before | spread (before / after) | verdict |",
             "|---|---|---:|---:|---:|---:|---|"]
    for r in sorted(rows, key=lambda r: not r["tapegrad"]):
        label = f"{r['name']} ({r['kind']})" if r["kind"] else r["name"]
        ratio = "—" if r["ratio"] is None else f"{r['ratio']:.3f}"
        lines.append(f"| {r['bench']} | {label} | {fmt(r['before_best'], r['unit'])} | "
                     f"{fmt(r['after_best'], r['unit'])} | {ratio} | {pct(r['before_spread'])} / "
                     f"{pct(r['after_spread'])} | {r['verdict']} |")
    lines += ["", "Rows of other contestants than tapegrad run the same code on both sides (controls): their "
              "after/before should be about 1.00, and one far from 1 means the machine was disturbed."]
    return "\n".join(lines)


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0], usage=(
        "%(prog)s BEFORE [AFTER] [--rounds R] [--threads N] [--quick] [--json PATH] [--markdown PATH] [names...]"))
    parser.add_argument("positional", nargs="+", help="BEFORE [AFTER] [names...]")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--threads", type=int)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--markdown", type=Path)
    args = parser.parse_intermixed_args(argv)
    args.before, rest = args.positional[0], args.positional[1:]
    args.after = rest.pop(0) if rest and _is_revision(rest[0]) else None
    args.names = rest or DEFAULT_NAMES
    for name in args.names:
        if not (BENCH_DIR / f"bench_{name}.py").exists():
            parser.error(f"{name!r} is neither a benchmark of run.py nor a git revision")
    return args


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    runs = []
    with tempfile.TemporaryDirectory(prefix="tapegrad-compare-") as tmp:  # removed on error and ^C too
        tmp = Path(tmp)
        sides = {"before": export_src(args.before, tmp / "before"),
                 "after": export_src(args.after, tmp / "after") if args.after else working_tree()}
        started = time.perf_counter()
        for k in range(args.rounds):
            order = ("before", "after") if k % 2 == 0 else ("after", "before")  # alternate who goes first
            for name in args.names:
                for side in order:
                    t0 = time.perf_counter()
                    data = run_once(sides[side], name, args.quick, args.threads, tmp / "run.json")
                    runs.append(dict(data, round=k, side=side, bench=name, seconds=time.perf_counter() - t0))
                    print(f"round {k + 1}/{args.rounds}  {name:8s} {side:6s} {runs[-1]['seconds']:6.1f} s",
                          file=sys.stderr, flush=True)
    rows = [summarise(r) for r in collect(runs)]
    header = (f"before: {sides['before']['label']}; after: {sides['after']['label']}; {args.rounds} rounds"
              f"{', --quick' if args.quick else ''}, BLAS threads {args.threads or 'default'}; "
              f"best of rounds, {time.perf_counter() - started:.0f} s in all")
    table = markdown(rows, header)
    print(table)
    if args.markdown:
        args.markdown.write_text(table + "\n")
    if args.json:
        args.json.write_text(json.dumps({"sides": sides, "rounds": args.rounds, "quick": args.quick,
                                         "threads": args.threads, "names": args.names, "rows": rows,
                                         "runs": runs}, indent=1))
    return rows


if __name__ == "__main__":
    try:
        main()
    except RuntimeError as e:  # a failed run: its output is in the message, the traceback adds nothing
        sys.exit(f"compare_revisions: {e}")
