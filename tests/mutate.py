"""The mutation check (``make mutate``, docs/testing.md "Mutation check"): a fixed list of realistic bugs,
each planted alone in a fresh private copy of the repository, and the tests that should catch it run on
that copy. A mutation no test fails on is a hole in the suite.

Each mutation is an exact text replacement in one file that must match exactly once: when the code
changes so that a mutation no longer applies, this script fails, so the list is kept true to the code
rather than silently testing nothing. Each names a small test selection (files, node ids, ``-k``), the
tests written to catch that kind of bug, so the whole run takes minutes rather than the suite's time.

What is copied. By default the working tree's ``src/``, ``tests/`` and ``pyproject.toml`` (uncommitted
changes included: a developer can check that a change still catches every mutation before committing);
``--head`` takes them from ``git archive HEAD`` instead (what is committed, whatever the working tree
holds). The copy is a temporary folder; pytest runs there with ``PYTHONPATH=<copy>/src``, so it imports
the copy's tapegrad, never the editable install, and nothing in the checkout is touched.

First every distinct selection runs once unmutated (the baseline): it must pass, or a failure under a
mutation would mean nothing. Then each mutation runs its selection (pytest-randomly off, the whole
selection, no ``-x``) and is CAUGHT when at least one test fails or errors, NOT CAUGHT when all pass.
A table at the end gives, for each, the failing count and the first failing test ids. Exit status 1 when
a mutation is not caught, does not apply, or a baseline fails.

    .venv/bin/python tests/mutate.py                  # everything (make mutate)
    .venv/bin/python tests/mutate.py --list           # the mutations and their selections
    .venv/bin/python tests/mutate.py sin-derivative-sign matmul-vjp-dropped-transpose
    .venv/bin/python tests/mutate.py --head --keep    # HEAD's files; keep the copies to look at
"""
from __future__ import annotations

import argparse
import dataclasses
import io
import os
import re
import shlex
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
COPIED = ("src", "tests", "pyproject.toml")  # what a test run needs: the package, the tests, pytest's config
COMPILED = {"TAPEGRAD_COMPILED_EXECUTOR": "1"}


@dataclasses.dataclass(frozen=True)
class Mutation:
    name: str
    what: str  # the bug, in words
    file: str  # relative to the repository root
    old: str  # must occur exactly once in file
    new: str
    tests: tuple[str, ...]  # pytest arguments: files, node ids, -k expressions
    env: tuple[tuple[str, str], ...] = ()


MUTATIONS = [
    Mutation(
        "sin-derivative-sign", "sin's derivative rule gives -cos(x) instead of cos(x) (jvp and vjp)",
        "src/tapegrad/numpy/_elementwise.py",
        '_unary("sin", lambda g, ans, x: g * cos(x)',
        '_unary("sin", lambda g, ans, x: -g * cos(x)',
        ("tests/test_ops.py", "-k", "sin and not sinh and not arcsin and not singular")),
    Mutation(
        "scan-reverse-loop-off-by-one", "a reverse scan's loop stops before step 0 (range(n - 1, 0, -1)), so "
        "every backward scan of reverse mode skips the first step",
        "src/tapegrad/_control_flow/_scan.py",
        "steps = range(length - 1, -1, -1) if reverse else range(length)",
        "steps = range(length - 1, 0, -1) if reverse else range(length)",
        ("tests/test_scan.py",)),
    Mutation(
        "scan-backward-not-reversed", "scan's vjp runs its backward scan in the forward direction (the "
        "reverse flag not flipped)",
        "src/tapegrad/_control_flow/_scan.py",
        'dict(params, reverse=not params["reverse"])',
        'dict(params, reverse=params["reverse"])',
        ("tests/test_scan.py",)),
    Mutation(
        "while-grad-skips-a-step", "while_loop's reverse pass under jit or with checkpoints (while_grad) "
        "pulls the cotangent back over all steps but the first",
        "src/tapegrad/_control_flow/_while_rev.py",
        "for res in reversed(rows):",
        "for res in reversed(rows[1:]):",
        ("tests/test_while_grad.py",)),
    Mutation(
        "unbroadcast-mirrored-axis", "unbroadcast sums the mirrored axis (counted from the end) instead of "
        "the operand's size-1 axis",
        "src/tapegrad/_structural.py",
        "lead + i for i, d in enumerate(shape) if d == 1 and ct_shape[lead + i] != 1)",
        "len(ct_shape) - 1 - i for i, d in enumerate(shape) if d == 1 and ct_shape[lead + i] != 1)",
        ("tests/test_broadcasting.py", "-k", "test_values_vjp_and_jvp and (add or multiply) and float64")),
    Mutation(
        "matmul-vjp-dropped-transpose", "matmul's vjp for x uses ct @ y instead of ct @ y.T (a shape error "
        "unless the operands are square)",
        "src/tapegrad/numpy/_linalg.py",
        "return _shape.unbroadcast(matmul(ct, _shape.swapaxes(y, -1, -2)), x)",
        "return _shape.unbroadcast(matmul(ct, y), x)",
        ("tests/test_mutation_guards.py", "tests/test_ops.py", "-k", "matmul")),
    Mutation(
        "solve-vjp-dropped-transpose", "solve's vjp for b solves with a instead of a.T (a is square: never a "
        "shape error)",
        "src/tapegrad/numpy/linalg/_solve.py",
        "return _shape.unbroadcast(solve(T(a), ct), b)",
        "return _shape.unbroadcast(solve(a, ct), b)",
        ("tests/test_linalg.py", "-k", "solve")),
    Mutation(
        "lowering-maximum-as-minimum", "the compiled executor lowers maximum as minimum (numba only; the "
        "Python executor and eager mode are right)",
        "src/tapegrad/_lowerings.py",
        'return self._extremum(">", x, y)',
        'return self._extremum("<", x, y)',
        ("tests/test_jit_native.py", "-k", "maximum or nan_and_inf or edge_values"),
        env=tuple(COMPILED.items())),
    Mutation(
        "embedding-padding-grad-not-cut", "Embedding's padding_idx row keeps its gradient (the stop_gradient "
        "dropped)",
        "src/tapegrad/nn/_norm.py",
        "return tnp.where(is_padding, stop_gradient(rows), rows)",
        "return tnp.where(is_padding, rows, rows)",
        ("tests/test_references.py", "-k", "embedding")),
    Mutation(
        "grad-position-default-1", "grad's grad_position defaults to 1 instead of 0",
        "src/tapegrad/_api.py",
        "grad_position: GradPosition = 0, weights: Weights | None = None,\n"
        "         has_aux: bool = False, return_ids: bool = False, **kwargs: Any) -> Callable[P, Any]:",
        "grad_position: GradPosition = 1, weights: Weights | None = None,\n"
        "         has_aux: bool = False, return_ids: bool = False, **kwargs: Any) -> Callable[P, Any]:",
        ("tests/test_grad_api.py",)),
    Mutation(
        "tape-accumulate-overwrites", "the backward pass keeps the last cotangent reaching a value instead of "
        "adding them (a value used twice)",
        "src/tapegrad/_tape.py",
        "tracer.ct = ct if previous is None else add_any(previous, ct)",
        "tracer.ct = ct",
        ("tests/test_tape.py",)),
    Mutation(
        "vmap-batch-axis-map-off-by-one", "vmap's reduction rules renumber an example's axis past the batch "
        "axis with > instead of >= (an axis equal to the batch axis is not shifted)",
        "src/tapegrad/_batching.py",
        "return axis + (axis >= d)",
        "return axis + (axis > d)",
        ("tests/test_vmap_ops.py",)),
    Mutation(
        "linear-jvp-of-primal", "the jvp of a linear primitive (reshape, transpose, sum, concatenate...) "
        "applies it to the primal instead of the tangent",
        "src/tapegrad/_rules.py",
        "return prim.bind(*[zeros_like(p) if t is None else t for t, p in zip(tangents, primals)], **params)",
        "return prim.bind(*[zeros_like(p) if t is None else p for t, p in zip(tangents, primals)], **params)",
        ("tests/test_forward.py",)),
]


# ---- the copy --------------------------------------------------------------------------------------
def make_copy(dest: Path, head: bool) -> None:
    """``src/``, ``tests/`` and ``pyproject.toml`` into ``dest``: HEAD's (git archive) or the working tree's."""
    if head:
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", "HEAD", *COPIED],
                                 check=True, capture_output=True).stdout
        with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
            if hasattr(tarfile, "data_filter"):  # Python 3.12, and 3.10.12 / 3.11.4 on
                tar.extractall(dest, filter="data")
            else:
                tar.extractall(dest)
        return
    ignore = shutil.ignore_patterns("__pycache__", ".pytest_cache", ".hypothesis", "*.pyc")
    for name in COPIED:
        src = ROOT / name
        if src.is_dir():
            shutil.copytree(src, dest / name, ignore=ignore)
        else:
            shutil.copy2(src, dest / name)


def plant(copy: Path, m: Mutation) -> str | None:
    """Apply ``m`` to the copy; None, or why it does not apply."""
    path = copy / m.file
    if not path.exists():
        return f"{m.file} does not exist"
    text = path.read_text()
    n = text.count(m.old)
    if n != 1:
        return f"the old text occurs {n} times in {m.file} (must be exactly once)"
    path.write_text(text.replace(m.old, m.new))
    return None


# ---- a pytest run ----------------------------------------------------------------------------------
@dataclasses.dataclass
class Run:
    failed: list[str]  # node ids of the tests that failed or errored
    first_message: str  # pytest's one-line reason for the first of them ("" when none)
    summary: str  # pytest's last line
    seconds: float
    output: str
    timed_out: bool = False

    @property
    def passed(self) -> bool:
        return not self.timed_out and not self.failed and " passed" in self.summary \
            and "error" not in self.summary and "no tests ran" not in self.summary


_SUMMARY_LINE = re.compile(r"^(FAILED|ERROR) (.+?)(?: - (.*))?$")


def run_tests(copy: Path, tests: tuple[str, ...], env_extra: dict, timeout: float, workers: int) -> Run:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("TAPEGRAD_", "HYPOTHESIS_", "PYTEST_")) and k != "PYTHONPATH"}
    env.update(PYTHONPATH=str(copy / "src"), PYTHONDONTWRITEBYTECODE="1", OPENBLAS_NUM_THREADS="1",
               OMP_NUM_THREADS="1", COLUMNS="400", **env_extra)
    cmd = [sys.executable, "-m", "pytest", "-p", "no:randomly", "-p", "no:cacheprovider", "-q", "--tb=no",
           "-rfE", "--no-header", *(["-n", str(workers)] if workers else []), *tests]
    start = time.monotonic()
    try:
        proc = subprocess.run(cmd, cwd=copy, env=env, capture_output=True, text=True, timeout=timeout)
        output, timed_out = proc.stdout + proc.stderr, False
    except subprocess.TimeoutExpired as e:
        output = (e.stdout or b"").decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
        timed_out = True
    seconds = time.monotonic() - start
    matches = [match for line in output.splitlines() if (match := _SUMMARY_LINE.match(line))]
    failed = [match.group(2) for match in matches]
    first_message = (matches[0].group(3) or "") if matches else ""
    lines = [line for line in output.splitlines() if line.strip()]
    summary = f"timed out after {timeout:.0f} s" if timed_out else (lines[-1].strip("= ") if lines else "")
    return Run(failed, first_message, summary, seconds, output, timed_out)


def _copy_for(workdir: Path, label: str, head: bool) -> Path:
    copy = workdir / label
    copy.mkdir()
    make_copy(copy, head)
    return copy


# ---- main ------------------------------------------------------------------------------------------
def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("names", nargs="*", help="run only these mutations (default: all)")
    parser.add_argument("--list", action="store_true", help="print the mutations and their selections, then exit")
    parser.add_argument("--head", action="store_true", help="copy HEAD (git archive) instead of the working tree")
    parser.add_argument("--keep", action="store_true", help="keep the temporary copies (their folder is printed)")
    parser.add_argument("--ids", type=int, default=3, help="failing test ids shown per mutation (default 3)")
    parser.add_argument("--timeout", type=float, default=900, help="seconds per pytest run (default 900)")
    parser.add_argument("-n", "--workers", type=int, default=0,
                        help="pytest-xdist workers per run (default 0: none, the selections are small)")
    args = parser.parse_args(argv)

    by_name = {m.name: m for m in MUTATIONS}
    unknown = [n for n in args.names if n not in by_name]
    if unknown:
        parser.error(f"unknown mutation(s) {', '.join(unknown)}; --list shows them")
    chosen = [by_name[n] for n in args.names] if args.names else MUTATIONS
    if args.list:
        for m in chosen:
            env = " ".join(f"{k}={v}" for k, v in m.env)
            print(f"{m.name}\n    {m.what}\n    {m.file}: {m.old!r} -> {m.new!r}\n"
                  f"    {env + ' ' if env else ''}pytest {shlex.join(m.tests)}")
        return 0

    source = "HEAD (git archive)" if args.head else "the working tree"
    workdir = Path(tempfile.mkdtemp(prefix="tapegrad-mutate-"))
    print(f"{len(chosen)} mutations; copies of {source} of {ROOT} under {workdir}", flush=True)
    started = time.monotonic()
    try:
        # the baseline: every distinct selection, unmutated, must pass
        selections = list(dict.fromkeys((m.tests, m.env) for m in chosen))
        baseline_ok = True
        copy = _copy_for(workdir, "baseline", args.head)
        for i, (tests, env) in enumerate(selections):
            run = run_tests(copy, tests, dict(env), args.timeout, args.workers)
            print(f"baseline {i + 1}/{len(selections)} ({run.seconds:.0f} s): {shlex.join(tests)}: {run.summary}",
                  flush=True)
            if not run.passed:
                baseline_ok = False
                print(run.output[-4000:], flush=True)
        if not baseline_ok:
            print("a baseline selection fails unmutated: fix that first, the mutation report would mean nothing")
            return 1

        rows = []
        for i, m in enumerate(chosen):
            copy = _copy_for(workdir, f"{i:02d}-{m.name}", args.head)
            problem = plant(copy, m)
            if problem is not None:
                rows.append((m, "DOES NOT APPLY", problem, 0.0))
                print(f"[{i + 1}/{len(chosen)}] {m.name}: DOES NOT APPLY: {problem}", flush=True)
                continue
            run = run_tests(copy, m.tests, dict(m.env), args.timeout, args.workers)
            if run.timed_out:
                verdict, detail = "caught", run.summary
            elif run.failed:
                shown = ", ".join(run.failed[:args.ids]) + (", ..." if len(run.failed) > args.ids else "")
                why = run.first_message if len(run.first_message) <= 100 else run.first_message[:97] + "..."
                verdict, detail = "caught", f"{len(run.failed)} failed: {shown}" + (f" ({why})" if why else "")
            elif run.passed:
                verdict, detail = "NOT CAUGHT", run.summary
            else:  # pytest itself failed (a collection error, an internal error): caught, but say so
                verdict, detail = "caught", f"pytest: {run.summary}"
            rows.append((m, verdict, detail, run.seconds))
            print(f"[{i + 1}/{len(chosen)}] {m.name} ({run.seconds:.0f} s): {verdict}: {detail}", flush=True)
            if not args.keep:
                shutil.rmtree(copy, ignore_errors=True)
    finally:
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)

    total = time.monotonic() - started
    width = max(len(m.name) for m in chosen)
    print(f"\n{'mutation':<{width}}  {'file':<40}  result")
    for m, verdict, detail, _ in rows:
        print(f"{m.name:<{width}}  {m.file.removeprefix('src/tapegrad/'):<40}  {verdict}: {detail}")
    bad = [m.name for m, verdict, _, _ in rows if verdict != "caught"]
    print(f"\n{len(rows) - len(bad)}/{len(rows)} mutations caught in {total:.0f} s"
          + (f"; not caught or not applied: {', '.join(bad)}" if bad else ""))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
