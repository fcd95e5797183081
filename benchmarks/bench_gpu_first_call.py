"""The first call of the jitted gradient-penalty step (``bench_gp.gp_step``) on CuPy, in this process.

Run it in a fresh process, twice, with one ``CUPY_CACHE_DIR``: the first run compiles every kernel
with NVRTC (a cold disk cache), the second loads them from the disk (docs/jit.md, "Elementwise fusion
and its kernels")::

    export CUPY_CACHE_DIR=$(mktemp -d)
    python benchmarks/bench_gpu_first_call.py   # cold
    python benchmarks/bench_gpu_first_call.py   # warm

It prints the first call (staging, the passes, compiling the program, building and launching the
kernels, up to a device synchronisation), a steady call, the fused groups of the program and how many
``fuse`` kernels they share. ``--double`` runs on the tests' device double instead (no GPU: the counts
only, the times mean nothing).
"""
from __future__ import annotations

import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)


def main(argv) -> None:
    if "--double" in argv:
        sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests"))
        import _device
        xp, sync = _device.xp, lambda: None
    else:
        import cupy as xp
        sync = xp.cuda.Device().synchronize
    import bench_gp

    import tapegrad as tg
    from tapegrad._jit import fusion
    from tapegrad._jit.passes import optimize

    params, x, labels = bench_gp.make_problem()
    params, x, labels = tg.tree.tree_map(xp.asarray, (params, x, labels))
    step = tg.jit(bench_gp.gp_step)
    sync()
    start = time.perf_counter()
    step(params, x, labels)
    sync()
    first = time.perf_counter() - start
    start = time.perf_counter()
    step(params, x, labels)
    sync()
    steady = time.perf_counter() - start
    program = optimize(tg.make_program(bench_gp.gp_step)(params, x, labels))
    kernels = [e.params["kernel"] for e in program.eqns if e.prim is fusion.fused_p]
    print(f"first call {first * 1e3:.0f} ms, steady call {steady * 1e3:.2f} ms "
          f"(CUPY_CACHE_DIR={os.environ.get('CUPY_CACHE_DIR', '~/.cupy/kernel_cache')})")
    print(f"{len(kernels)} fused groups, {len({id(k.fn) for k in kernels})} fuse kernels")


if __name__ == "__main__":
    main(sys.argv[1:])
