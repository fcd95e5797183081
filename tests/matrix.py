"""The test matrix: the whole suite under several OpenBLAS kernels x thread counts, each in its own
random order, one summary line per combination; exit status 1 if any combination fails.

Other kernels sum in other orders and other blockings, so a tolerance that only held for this
machine's kernel fails here. ``OPENBLAS_CORETYPE`` picks the kernel of every OpenBLAS loaded in the
process (NumPy's and SciPy's wheels each bundle one, ``scipy_openblas``); the core OpenBLAS really
chose is read back with ``OPENBLAS_VERBOSE=2`` and printed, and a kernel the library does not know
fails the run (it would silently fall back to another).

With no pytest arguments (the whole suite), each combination also builds the site, as ``make test``
does after the suite (``make docs``: every tutorial and executable page run, every warning an error,
then ``tests/test_docs.py``'s check of the built site), into a temporary folder: the tutorials compare
solvers and finite differences, whose tolerances must hold on every kernel too.

Usage: python tests/matrix.py [pytest args...]
Environment: MATRIX_KERNELS (default "Prescott Nehalem Sandybridge Haswell"), MATRIX_THREADS
(default "1 2"), MATRIX_SEED (the first combination's --randomly-seed; the next ones count up from
it; default random, printed so a failing order can be replayed), MATRIX_SITE (1, the default: build
the site with the whole suite; 0: never).
"""
from __future__ import annotations

import os
import random
import re
import subprocess
import sys
import tempfile
import time

KERNELS = os.environ.get("MATRIX_KERNELS", "Prescott Nehalem Sandybridge Haswell").split()
THREADS = os.environ.get("MATRIX_THREADS", "1 2").split()
# the libraries the suite loads that carry an OpenBLAS
PROBE = "import numpy, scipy.linalg"
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def chosen_cores(env) -> list[str]:
    """The cores OpenBLAS reports choosing under ``env`` (one per OpenBLAS loaded), or raises."""
    out = subprocess.run([sys.executable, "-c", PROBE], env=dict(env, OPENBLAS_VERBOSE="2"),
                         capture_output=True, text=True, check=True)
    text = out.stdout + out.stderr
    if "not found" in text:
        raise SystemExit(f"OpenBLAS does not know the kernel {env.get('OPENBLAS_CORETYPE')!r}: {text.strip()}; "
                         "set MATRIX_KERNELS to ones it accepts (OPENBLAS_VERBOSE=2 prints the chosen core)")
    return re.findall(r"Core: (\w+)", text)


def counts(output: str) -> dict[str, int]:
    """pytest's closing counts (passed, failed, errors, skipped, ...) from its output."""
    found = re.findall(r"(\d+) (passed|failed|errors?|skipped|xfailed|xpassed|deselected)", output)
    return {("error" if word.startswith("error") else word): int(n) for n, word in found}


def build_site(env, out: str, log: str) -> tuple[bool, float]:
    """``make docs``'s build and check of the built site, under ``env``, into ``out``; (passed, seconds),
    the output in ``log``."""
    start = time.perf_counter()
    build = subprocess.run([sys.executable, "-m", "sphinx", "-W", "--keep-going", "-E", "-q", "-b", "html", "-c",
                            os.path.join(ROOT, "docs"), ROOT, out], env=env, capture_output=True, text=True, cwd=ROOT)
    check = build.returncode == 0 and subprocess.run(
        [sys.executable, os.path.join(ROOT, "tests", "test_docs.py"), out], env=env, capture_output=True, text=True,
        cwd=ROOT)
    with open(log, "w") as f:
        f.write(build.stdout + build.stderr + (check.stdout + check.stderr if check else ""))
    return bool(check) and check.returncode == 0, time.perf_counter() - start


def main(pytest_args: list[str]) -> int:
    seed = int(os.environ.get("MATRIX_SEED", random.randrange(10 ** 6)))
    native = chosen_cores({k: v for k, v in os.environ.items() if k != "OPENBLAS_CORETYPE"})
    print(f"native OpenBLAS core: {', '.join(native)}; kernels {KERNELS}, threads {THREADS}", flush=True)
    logs = tempfile.mkdtemp(prefix="test-matrix-")
    site = not pytest_args and os.environ.get("MATRIX_SITE", "1") != "0"
    failures = 0
    for kernel in KERNELS:
        for threads in THREADS:
            env = dict(os.environ, OPENBLAS_CORETYPE=kernel, OPENBLAS_NUM_THREADS=threads,
                       OMP_NUM_THREADS=threads)
            cores = chosen_cores(env)
            cmd = [sys.executable, "-m", "pytest", "-q", "-p", "randomly", f"--randomly-seed={seed}",
                   "-rfE", *pytest_args]
            start = time.perf_counter()
            run = subprocess.run(cmd, env=env, capture_output=True, text=True)
            seconds = time.perf_counter() - start
            log = os.path.join(logs, f"{kernel}-{threads}.log")
            with open(log, "w") as f:
                f.write(run.stdout + run.stderr)
            c = counts(run.stdout.strip().splitlines()[-1] if run.stdout.strip() else "")
            ok = run.returncode == 0
            failures += not ok
            print(f"{'ok  ' if ok else 'FAIL'} kernel={kernel} (core {'/'.join(cores)}) threads={threads} "
                  f"seed={seed}: {c.get('passed', 0)} passed, {c.get('failed', 0)} failed, "
                  f"{c.get('error', 0)} errors, {c.get('skipped', 0)} skipped in {seconds:.0f} s"
                  + ("" if ok else f" (exit {run.returncode}; log {log})"), flush=True)
            if not ok:  # the failing tests, or (a collection or usage error) the end of the output
                lines = (run.stdout + run.stderr).splitlines()
                print("\n".join([line for line in lines if line.startswith(("FAILED", "ERROR"))] or lines[-5:]),
                      flush=True)
            if site:
                site_log = os.path.join(logs, f"{kernel}-{threads}-site.log")
                site_ok, seconds = build_site(env, os.path.join(logs, f"{kernel}-{threads}-site"), site_log)
                failures += ok and not site_ok  # one failed combination, whichever part failed
                print(f"{'ok  ' if site_ok else 'FAIL'} kernel={kernel} threads={threads}: the site "
                      f"{'built and checked' if site_ok else 'failed'} in {seconds:.0f} s"
                      + ("" if site_ok else f" (log {site_log})"), flush=True)
            seed += 1
    print(f"test matrix: {failures} of {len(KERNELS) * len(THREADS)} combinations failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
