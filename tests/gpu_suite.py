"""``make test-gpu``: the GPU tests, then the whole device suite on real CuPy.

1. every test marked ``gpu`` (CuPy against NumPy: the op tables through every route, convolutions,
   FFTs, random draws, special functions, collectives, the demo);
2. ``tests/test_device_*.py`` with ``TAPEGRAD_DEVICE=cupy`` and ``TAPEGRAD_DEVICE_TESTS=all``: every
   case of the strict device double's suite through every route, with real CuPy in place of the
   double (tests/_device.py), at the tolerances of CuPy's kernels (tests/_device_check.py,
   ``GPU_ULPS``).

It prints the machine (GPU, CUDA, CuPy, NumPy) and ends with the counts of both runs. Without CuPy or
without a GPU it says so in one line and exits 0. Extra arguments go to both pytest runs
(``make test-gpu PYTEST_ARGS="-x"``; ``-n 8`` if pytest-xdist is there, which is the default).
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parent


def why_not() -> str | None:
    """Why the GPU run cannot happen here (None: it can)."""
    from tapegrad._backend import gpu_unavailable
    return gpu_unavailable()


def describe() -> str:
    import cupy
    import numpy
    props = cupy.cuda.runtime.getDeviceProperties(0)
    name = props["name"].decode() if isinstance(props["name"], bytes) else props["name"]
    runtime, driver = cupy.cuda.runtime.runtimeGetVersion(), cupy.cuda.runtime.driverGetVersion()
    return (f"{name}; CUDA runtime {runtime // 1000}.{runtime % 1000 // 10}, driver supports "
            f"{driver // 1000}.{driver % 1000 // 10}; CuPy {cupy.__version__}; NumPy {numpy.__version__}; "
            f"Python {sys.version.split()[0]}")


def _workers() -> list[str]:
    try:
        import xdist  # noqa: F401
    except ImportError:
        return []
    return ["-n", str(min(8, os.cpu_count() or 1))]


def run(title: str, args: list[str], env: dict) -> tuple[int, str]:
    """One pytest run; returns its exit status and its closing counts line."""
    print(f"\n== {title}", flush=True)
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *_workers(), *args,
               *sys.argv[1:]]
    proc = subprocess.run(command, cwd=TESTS.parent, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True)
    sys.stdout.write(proc.stdout)
    counts = [line for line in proc.stdout.splitlines() if re.search(r"\d+ (passed|failed|error)", line)]
    return proc.returncode, counts[-1].strip("= ") if counts else "no counts (see above)"


def main() -> int:
    reason = why_not()
    if reason is not None:
        print(f"make test-gpu: nothing to run here: {reason}")
        return 0
    print(f"make test-gpu on {describe()}")
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
    gpu = run("the gpu tests (CuPy against NumPy)", ["-m", "gpu", "tests"], env)
    suite = run("the device suite on real CuPy (TAPEGRAD_DEVICE=cupy, every route)",
                sorted(str(p.relative_to(TESTS.parent)) for p in TESTS.glob("test_device_*.py")
                       if p.name != "test_device_gpu.py"),  # all of it is in the first run
                {**env, "TAPEGRAD_DEVICE": "cupy", "TAPEGRAD_DEVICE_TESTS": "all"})
    print(f"\ngpu tests: {gpu[1]}\ndevice suite on CuPy: {suite[1]}")
    return 0 if gpu[0] == 0 and suite[0] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
