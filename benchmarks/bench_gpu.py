"""``bench_gpu``: five float32 workloads on one GPU, tapegrad (eager and ``jit``, on CuPy) against PyTorch
CUDA (eager) and JAX GPU (``jax.jit``) when they are installed (``make bench-gpu``).

Workloads (the models are the CPU benchmarks' own, at the sizes of the first GPU run, 2026-11-27):

- ``mlp``: ``value_and_grad`` of ``bench_mlp``'s MLP and loss (ReLU, mean cross-entropy), 784-2048-2048-10,
  batch 1024;
- ``gp``: ``bench_gp``'s gradient-penalty step (the gradient of ``loss + sum_p ||d loss / d p||``) on nnabla's
  seed CNN (conv8-pool-conv16-pool-affine10), batch (64, 3, 32, 32); PyTorch with
  ``torch.autograd.grad(..., create_graph=True)``, JAX with ``bench_gp.make_jax``;
- ``perex``: per-example gradients of ``bench_mlp``'s loss on one example, ``vmap(grad)``, 784-256-10,
  batch 256 (PyTorch: ``torch.func.vmap(torch.func.grad)``);
- ``chain``: ``grad`` of ``bench_chain``'s chain on 1,000 floats, 100 steps of ``x = sin(x) * 1.01 + 0.1``
  (300 elementwise operations, each a kernel launch eagerly: the per-operation overhead);
- ``fused``: ``grad`` of ``sum(tanh(x) * x + 0.5 * x * x)`` on 2^24 floats (memory bound: the least
  it can do is read ``x`` and write the gradient, 2 x 64 MiB). Its floor is **measured**: a CuPy copy of
  ``x`` (the same bytes read and written), timed in the same rounds; the nominal floor (the bytes over
  the H100 SXM's 3.35 TB/s of HBM3) is printed beside it.

Contestants: ``tapegrad eager`` (the transform called on CuPy arrays), ``tapegrad jit`` (``tg.jit`` of
it), ``torch eager`` (CUDA tensors made once; TF32 off for matmuls and cuDNN: full float32, as tapegrad
and CuPy compute), ``jax jit`` (inputs put on the GPU once, ``jax_default_matmul_precision`` "highest").
A peer that is not installed, or sees no GPU, is skipped with a line saying so.

Correctness before timing: every contestant's gradients against tapegrad's eager gradients on NumPy in
float64 (the host reference): max |g - g_ref| / max |g_ref| per array, the worst array, must be at most
``TOL_ULPS`` float32 epsilons (the magnitude scaling and the 4096 of ``tests/_device_check.py``'s
``GPU_ULPS``: sums in another order, cuBLAS/cuDNN algorithms), and float32. One that disagrees is not
timed; the run reports it and exits 1.

Timing: one process; the contestants of a workload are interleaved round by round (the order rotating
from round to round), each round some calls of each, every call timed on its own between device
synchronisations (``cupy.cuda.Device().synchronize()``, ``torch.cuda.synchronize()``,
``jax.block_until_ready``), the garbage collector on. The **median** per-call time over every call of
every round is reported (and the best). Ratios: tapegrad eager over PyTorch eager, tapegrad jit over JAX
jit, against the targets below (MET / MISSED).

Also reported: the GP step's peak device memory beyond what was allocated before the call (tapegrad:
the CuPy memory pool's used bytes, polled at every allocation through an allocator hook; PyTorch:
``torch.cuda.max_memory_allocated`` after ``reset_peak_memory_stats``); the first ``jit`` call of the MLP
and the GP step in a **fresh Python process** (after its imports and putting the data on the device:
staging, compiling and running once, CUDA libraries' first use included), tapegrad with CuPy's kernel
cache as the machine has it and once more with an empty one (``CUPY_CACHE_DIR``), JAX's for scale.

Timings are never asserted in tests. ``--backend double`` is a dry run for them: every workload at tiny
sizes on the strict device double (``tests/_device.py``), one round of one call, peers on their CPU
when installed; nothing it prints is a GPU timing.

Usage: ``python benchmarks/bench_gpu.py [--quick] [--backend cupy|double] [--rounds N] [--json PATH]
[--png PATH] [mlp] [gp] [perex] [chain] [fused]``; ``python benchmarks/bench_gpu.py --plot JSON PNG``
draws the picture of an earlier run. ``make bench-gpu`` writes ``benchmarks/out/results-gpu.json`` and
``.png`` (ignored); ``make bench-gpu-publish`` a full run into the committed ``benchmarks/results-gpu.json``
and ``results-gpu.png``; the published files are refused to a quick run, a subset, the double, or a
machine without a GPU.
"""
from __future__ import annotations

import datetime
import gc
import json
import os
import platform
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import bench_gp  # noqa: E402
import bench_mlp  # noqa: E402
import numpy as np  # noqa: E402
from _timing import format_table, try_import  # noqa: E402
from bench_chain import make_chain, on_device  # noqa: E402

import tapegrad as tg  # noqa: E402
import tapegrad.numpy as tnp  # noqa: E402

SCHEMA = "tapegrad-bench-gpu/1"
PUBLISHED_JSON = os.path.join(HERE, "results-gpu.json")
PUBLISHED_PNG = os.path.join(HERE, "results-gpu.png")
WORKLOADS = ("mlp", "gp", "perex", "chain", "fused")
EAGER, JIT, TORCH, JAX, FLOOR = "tapegrad eager", "tapegrad jit", "torch eager", "jax jit", "cupy copy (floor)"
TOL_ULPS = 4096
TOL = TOL_ULPS * float(np.finfo(np.float32).eps)  # 4.9e-4 of the largest magnitude of each array
HBM3_BYTES_PER_S = 3.35e12  # H100 SXM5 80 GB

# the targets: (workload, ours, peer) -> most time over the peer's
RATIO_TARGETS = {
    ("mlp", EAGER, TORCH): 1.2, ("gp", EAGER, TORCH): 1.5, ("perex", EAGER, TORCH): 1.0, ("chain", EAGER, TORCH): 1.0,
    ("mlp", JIT, JAX): 1.2, ("gp", JIT, JAX): 2.0, ("perex", JIT, JAX): 1.5, ("chain", JIT, JAX): 1.5,
    ("fused", JIT, JAX): 1.0,
}
FIRST_CALL_TARGET_MS = {"gp": 500.0}  # tapegrad jit's first call in a fresh process (CuPy's kernel cache kept)
MEMORY_TARGET = 1.5  # the GP step's peak device memory over PyTorch's
FIRST_CALL_TIMEOUT_S = 120  # a fresh process's imports, data and first call, at most

# sizes: the GPU run's, and tiny ones for the dry run on the double
FULL = {"mlp": ((784, 2048, 2048, 10), 1024), "gp": 64, "perex": ((784, 256, 10), 256), "chain": (100, 1000),
        "fused": 2 ** 24}
TINY = {"mlp": ((8, 16, 16, 4), 8), "gp": 2, "perex": ((8, 6, 4), 5), "chain": (5, 7), "fused": 1000}


class GradientMismatch(AssertionError):
    """A contestant's gradients disagree with the host reference (it is not timed)."""


# ---- the backends --------------------------------------------------------------------------------
def why_not() -> str | None:
    """Why there is no GPU run here (None: there is): CuPy missing, or no device it can reach."""
    from tapegrad._backend import gpu_unavailable
    return gpu_unavailable()


class Backend:
    """Where tapegrad's arrays live: ``cupy`` (the GPU) or ``double`` (tests/_device.py on NumPy)."""

    def __init__(self, name: str):
        self.name = name
        if name == "cupy":
            import cupy
            self.xp = cupy
            props = cupy.cuda.runtime.getDeviceProperties(0)
            self.device = props["name"].decode() if isinstance(props["name"], bytes) else props["name"]
        elif name == "double":
            tests = os.path.join(HERE, os.pardir, "tests")
            if tests not in sys.path:
                sys.path.insert(0, tests)
            import _device
            self.xp = _device.xp
            self.device = "the strict device double (tests/_device.py) on NumPy: a dry run, not a GPU timing"
        else:
            raise SystemExit(f"--backend must be cupy or double, not {name!r}")

    def put(self, tree):
        """Host NumPy arrays (in a pytree) onto the device, once."""
        return tg.tree.tree_map(lambda a: self.xp.asarray(a) if isinstance(a, np.ndarray) else a, tree)

    def sync(self, _out=None) -> None:
        if self.name == "cupy":
            self.xp.cuda.Device().synchronize()

    def host(self, a) -> np.ndarray:
        return self.xp.asnumpy(a)

    def copy_floor(self, x):
        """The measured floor of ``fused``: one copy of ``x`` (its bytes read once and written once)."""
        return lambda: x.copy()

    def peak_bytes(self, call) -> int | None:
        """Bytes allocated at the peak of ``call()`` beyond those in use before it: the CuPy pool's used
        bytes polled at each allocation; on the double, tracemalloc's peak of NumPy's allocations."""
        if self.name == "cupy":
            cupy = self.xp
            pool = cupy.get_default_memory_pool()
            self.sync()
            base = peak = pool.used_bytes()

            def malloc(size):
                nonlocal peak
                memory = pool.malloc(size)
                peak = max(peak, pool.used_bytes())
                return memory
            cupy.cuda.set_allocator(malloc)
            try:
                out = call()
                self.sync(out)
            finally:
                cupy.cuda.set_allocator(pool.malloc)
            del out
            return peak - base
        import tracemalloc
        tracemalloc.start()
        try:
            call()
            return tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()


class Torch:
    """PyTorch on CUDA (on its CPU for the dry run), full float32 (no TF32)."""

    def __init__(self, torch, device: str):
        self.torch, self.device = torch, device
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        torch.set_float32_matmul_precision("highest")

    def put(self, tree, grad: bool = False):
        torch = self.torch

        def one(a):
            if not isinstance(a, np.ndarray):
                return a
            t = torch.from_numpy(a).to(self.device)
            return t.requires_grad_(True) if grad and t.is_floating_point() else t
        return tg.tree.tree_map(one, tree)

    def sync(self, _out=None) -> None:
        if self.device == "cuda":
            self.torch.cuda.synchronize()

    def host(self, t) -> np.ndarray:
        return t.detach().cpu().numpy()

    def peak_bytes(self, call) -> int | None:
        if self.device != "cuda":
            return None
        cuda = self.torch.cuda
        cuda.synchronize()
        base = cuda.memory_allocated()
        cuda.reset_peak_memory_stats()
        out = call()
        cuda.synchronize()
        del out
        return cuda.max_memory_allocated() - base


class Jax:
    """JAX on its default device (the GPU when its CUDA plugin is there), matmuls at full float32."""

    def __init__(self, jax):
        self.jax = jax
        jax.config.update("jax_default_matmul_precision", "highest")
        self.device = str(jax.devices()[0])

    def sync(self, out=None) -> None:
        if out is not None:
            self.jax.block_until_ready(out)

    def host(self, a) -> np.ndarray:
        return np.asarray(a)


def peers(backend: Backend, skipped: list) -> tuple:
    """``(Torch or None, Jax or None)``; each one missing adds a line to ``skipped``."""
    torch_mod, jax_mod = try_import("torch"), try_import("jax")
    torch = jax = None
    if torch_mod is None:
        skipped.append("torch eager: skipped, PyTorch is not installed")
    elif backend.name == "cupy" and not torch_mod.cuda.is_available():
        skipped.append(f"torch eager: skipped, PyTorch {torch_mod.__version__} sees no GPU (a CPU build?)")
    else:
        torch = Torch(torch_mod, "cuda" if backend.name == "cupy" else "cpu")
    if jax_mod is None:
        skipped.append("jax jit: skipped, JAX is not installed")
    elif backend.name == "cupy" and jax_mod.default_backend() != "gpu":
        skipped.append(f"jax jit: skipped, JAX {jax_mod.__version__} runs on {jax_mod.default_backend()}, no GPU "
                       "(pip install 'jax[cuda13]')")
    else:
        jax = Jax(jax_mod)
    return torch, jax


# ---- the workloads -------------------------------------------------------------------------------
# Each builder takes (sizes, backend, torch, jax) and returns a dict: "host" (the float32 problem on the
# host), "reference" (a function of the float64 host problem giving the gradient leaves), and for each
# contestant (call, sync, host-leaves) built on the data put on its device once.

def _grad_leaves(tree):
    return tg.tree.tree_leaves(tree)


def _to64(tree):
    return tg.tree.tree_map(lambda a: a.astype(np.float64) if isinstance(a, np.ndarray) and a.dtype == np.float32
                            else a, tree)


def _tapegrad(contestants, name, fn, args, backend, pick=_grad_leaves):
    contestants[name] = (lambda: fn(*args), backend.sync, lambda out: [backend.host(g) for g in pick(out)])


def _jax(contestants, jax, fn, host_args, pick):
    call = on_device(jax.jax, fn)  # the inputs put on JAX's device once; each call waits for its results
    contestants[JAX] = (lambda: call(*host_args), jax.sync,
                        lambda out: [jax.host(g) for g in jax.jax.tree_util.tree_leaves(pick(out))])


def build_mlp(size, backend, torch, jax):
    sizes, batch = size
    host = bench_mlp.make_problem(sizes=sizes, batch=batch)
    vg = tg.value_and_grad(bench_mlp.loss_tnp, grad_position=0)
    out = {"host": host, "reference": lambda p, x, y: _grad_leaves(vg(p, x, y)[1])}
    args = backend.put(host)
    pick = lambda out: _grad_leaves(out[1])
    _tapegrad(out, EAGER, vg, args, backend, pick)
    _tapegrad(out, JIT, tg.jit(tg.value_and_grad(bench_mlp.loss_tnp, grad_position=0)), args, backend, pick)
    if torch is not None:
        t, F = torch.torch, torch.torch.nn.functional
        params, (x, labels) = torch.put(host[0], grad=True), torch.put(host[1:])
        leaves = [a for pair in params for a in pair]

        def step():  # bench_mlp.make_torch's model, on device tensors made once
            h = x
            for W, b in params[:-1]:
                h = t.relu(h @ W + b)
            W, b = params[-1]
            loss = F.cross_entropy(h @ W + b, labels)
            return loss.detach(), t.autograd.grad(loss, leaves)
        out[TORCH] = (step, torch.sync, lambda res: [torch.host(g) for g in res[1]])
    if jax is not None:
        _jax(out, jax, jax.jax.jit(jax.jax.value_and_grad(bench_mlp.jax_loss(jax.jax))), host, lambda r: r[1])
    return out


def build_gp(batch, backend, torch, jax):
    host = bench_gp.make_problem(batch=batch)
    out = {"host": host, "reference": lambda p, x, y: _grad_leaves(bench_gp.gp_step(p, x, y))}
    args = backend.put(host)
    _tapegrad(out, EAGER, bench_gp.gp_step, args, backend)
    _tapegrad(out, JIT, tg.jit(bench_gp.gp_step), args, backend)
    if torch is not None:
        t, F = torch.torch, torch.torch.nn.functional
        leaves = torch.put([a for key in bench_gp.KEYS for a in host[0][key]], grad=True)
        x, labels = torch.put(host[1:])

        def step():  # bench_gp.make_torch's step, on device tensors made once
            c1w, c1b, c2w, c2b, fw, fb = leaves
            h = F.max_pool2d(F.relu(F.conv2d(x, c1w, c1b, padding=1)), 2)
            h = F.max_pool2d(F.relu(F.conv2d(h, c2w, c2b, padding=1)), 2)
            loss = F.cross_entropy(F.linear(h.reshape(h.shape[0], -1), fw, fb), labels)
            grads = t.autograd.grad(loss, leaves, create_graph=True)
            return t.autograd.grad(loss + sum(g.norm() for g in grads), leaves)
        out[TORCH] = (step, torch.sync, lambda res: [torch.host(g) for g in res])
    if jax is not None:
        jax_step = bench_gp.make_jax(jax.jax)[0]  # already on_device: NumPy inputs put on the GPU once
        out[JAX] = (lambda: jax_step(*host), jax.sync,
                    lambda res: [jax.host(g) for g in jax.jax.tree_util.tree_leaves(res)])
    return out


def build_perex(size, backend, torch, jax):
    sizes, batch = size
    params, x, labels = bench_mlp.make_problem(seed=1, sizes=sizes, batch=batch)
    host = (params, x[:, None, :], labels[:, None])  # one example: a batch of one for bench_mlp's loss
    per_example = tg.vmap(tg.grad(bench_mlp.loss_tnp), in_axes=(None, 0, 0))
    out = {"host": host, "reference": lambda p, x, y: _grad_leaves(per_example(p, x, y))}
    args = backend.put(host)
    _tapegrad(out, EAGER, per_example, args, backend)
    _tapegrad(out, JIT, tg.jit(tg.vmap(tg.grad(bench_mlp.loss_tnp), in_axes=(None, 0, 0))), args, backend)
    if torch is not None:
        t = torch.torch
        __import__("torch.func")  # a submodule (an import statement here would rebind the name torch)

        def loss(params, x, labels):
            h = x
            for W, b in params[:-1]:
                h = t.relu(h @ W + b)
            W, b = params[-1]
            return t.nn.functional.cross_entropy(h @ W + b, labels)
        fn = t.func.vmap(t.func.grad(loss), in_dims=(None, 0, 0))
        targs = torch.put(host)
        out[TORCH] = (lambda: fn(*targs), torch.sync,
                      lambda res: [torch.host(g) for pair in res for g in pair])
    if jax is not None:
        j = jax.jax
        _jax(out, jax, j.jit(j.vmap(j.grad(bench_mlp.jax_loss(j)), in_axes=(None, 0, 0))), host, lambda r: r)
    return out


def _single_input(expr, x_host, backend, torch, jax):
    """The contestants of ``grad(expr(ns))`` for one input array (``chain`` and ``fused``)."""
    g = tg.grad(expr(tnp))
    out = {"host": (x_host,), "reference": lambda x: [g(x)]}
    (x,) = backend.put((x_host,))
    _tapegrad(out, EAGER, g, (x,), backend, lambda r: [r])
    _tapegrad(out, JIT, tg.jit(tg.grad(expr(tnp))), (x,), backend, lambda r: [r])
    if torch is not None:
        t, f = torch.torch, expr(torch.torch)
        (tx,) = torch.put((x_host,), grad=True)
        out[TORCH] = (lambda: t.autograd.grad(f(tx), tx)[0], torch.sync, lambda r: [torch.host(r)])
    if jax is not None:
        _jax(out, jax, jax.jax.jit(jax.jax.grad(expr(jax.jax.numpy))), (x_host,), lambda r: r)
    return out, x


def build_chain(size, backend, torch, jax):
    steps, n = size
    return _single_input(lambda ns: make_chain(ns, steps), np.linspace(-1.0, 1.0, n, dtype=np.float32),
                         backend, torch, jax)[0]


def fused_expr(ns):
    """The memory-bound expression, in the namespace ``ns`` (tapegrad.numpy, torch, jax.numpy)."""
    return lambda x: ns.sum(ns.tanh(x) * x + 0.5 * x * x)


def build_fused(n, backend, torch, jax):
    x_host = np.random.default_rng(2).standard_normal(n).astype(np.float32)
    out, x = _single_input(fused_expr, x_host, backend, torch, jax)
    out[FLOOR] = (backend.copy_floor(x), backend.sync, None)  # timed, not checked: it computes no gradient
    out["floor"] = {"bytes": 2 * x_host.nbytes, "nominal_ms": 2 * x_host.nbytes / HBM3_BYTES_PER_S * 1e3,
                    "nominal": "bytes read and written / 3.35 TB/s (H100 SXM HBM3)",
                    "measured": f"{FLOOR}: x.copy(), the same bytes read and written, timed in the same rounds"}
    return out


BUILDERS = {"mlp": build_mlp, "gp": build_gp, "perex": build_perex, "chain": build_chain, "fused": build_fused}


def title(key: str, size) -> str:
    """The workload's name at ``size`` (``FULL`` or ``TINY``)."""
    if key == "mlp":
        return f"MLP {'-'.join(map(str, size[0]))}, batch {size[1]}, value_and_grad"
    if key == "gp":
        return f"gradient-penalty step, nnabla's seed CNN, ({size},3,32,32)"
    if key == "perex":
        return f"per-example gradients, vmap(grad), {'-'.join(map(str, size[0]))}, batch {size[1]}"
    if key == "chain":
        return f"grad of {size[0]} chained steps ({3 * size[0]} elementwise ops) on {size[1]:,} floats"
    return f"grad of an elementwise expression on {size:,} floats (memory bound)"


# ---- checking and timing -------------------------------------------------------------------------
def rel_error(got, ref) -> float:
    """The worst array's max |got - ref| / max |ref| (``inf`` when the shapes or the count differ, or a value is
    not finite)."""
    if len(got) != len(ref):
        return float("inf")
    worst = 0.0
    for g, r in zip(got, ref):
        g, r = np.asarray(g, np.float64), np.asarray(r, np.float64)
        if g.shape != r.shape:
            return float("inf")
        scale = max(float(np.max(np.abs(r), initial=0.0)), np.finfo(np.float32).tiny)
        err = float(np.max(np.abs(g - r), initial=0.0)) / scale
        if not np.isfinite(err):  # a NaN would pass max() unseen
            return float("inf")
        worst = max(worst, err)
    return worst


def check_agreement(name: str, got, ref, tol: float = TOL) -> float:
    """The relative error of ``got`` (host arrays) against ``ref``; raises :class:`GradientMismatch` when it is
    above ``tol``, not finite, or an array is not float32."""
    err = rel_error(got, ref)
    dtypes = sorted({str(np.asarray(g).dtype) for g in got})
    if not err <= tol or dtypes != ["float32"]:
        raise GradientMismatch(f"{name}: gradients disagree with tapegrad's float64 host reference: relative error "
                               f"{err:.2e} (tolerance {tol:.1e}), dtypes {'/'.join(dtypes)}")
    return err


def time_interleaved(calls: dict, rounds: int, target_s: float, sync_all) -> dict:
    """name -> per-call seconds: ``rounds`` rounds, each running every contestant (``name -> (call, sync)``)
    some times in turn, the order rotating; each call timed alone between device synchronisations."""
    names = list(calls)
    per_round = {}
    for name, (call, sync) in calls.items():  # warm-up, and how many calls make about target_s
        for _ in range(2):
            sync_all()
            t0 = time.perf_counter()
            sync(call())
            dt = time.perf_counter() - t0
        per_round[name] = max(1, min(200, int(target_s / max(dt, 1e-6))))
    samples = {name: [] for name in names}
    for r in range(rounds if names else 0):
        for name in names[r % len(names):] + names[:r % len(names)]:
            call, sync = calls[name]
            gc.collect()
            for _ in range(per_round[name]):
                sync_all()
                t0 = time.perf_counter()
                sync(call())
                samples[name].append(time.perf_counter() - t0)
    return samples


def run_workload(key, contestants, reference, rounds, target_s, sync_all) -> tuple[list, list]:
    """``(rows, mismatches)``: each contestant checked, then those that agree timed together."""
    rows, mismatches, timed = {}, [], {}
    for name, (call, sync, leaves) in contestants.items():
        row = {"workload": key, "name": name, "rel_err": None, "agrees": None, "median_ms": None, "best_ms": None,
               "calls": 0}
        if leaves is not None:
            out = call()
            sync(out)
            try:
                row["rel_err"] = check_agreement(f"{key}: {name}", leaves(out), reference)
                row["agrees"] = True
            except GradientMismatch as error:
                row["rel_err"], row["agrees"] = rel_error(leaves(out), reference), False
                mismatches.append(str(error))
                print(f"WRONG {error}; not timed", flush=True)
            del out
        if row["agrees"] is not False:
            timed[name] = (call, sync)
        rows[name] = row
    for name, samples in time_interleaved(timed, rounds, target_s, sync_all).items():
        rows[name].update(median_ms=statistics.median(samples) * 1e3, best_ms=min(samples) * 1e3,
                          calls=len(samples))
    return list(rows.values()), mismatches


# ---- first calls in a fresh process --------------------------------------------------------------
def first_call_child(workload: str, who: str, backend_name: str) -> dict:
    """In a fresh process: the first call of ``who``'s jitted ``workload`` (and a steady one), after the
    imports and putting the data on the device."""
    backend = Backend(backend_name)
    size = (FULL if backend_name == "cupy" else TINY)[workload]
    skipped = []
    torch, jax = (None, peers(backend, skipped)[1]) if who == "jax" else (None, None)
    if who == "jax" and jax is None:
        return {"skipped": skipped[-1]}
    if who == "jax":
        backend.sync()  # CuPy's context, as the tapegrad child has it
    built = BUILDERS[workload](size, backend, torch, jax)
    call, sync, _ = built[JAX if who == "jax" else JIT]
    backend.sync()
    t0 = time.perf_counter()
    sync(call())
    first = time.perf_counter() - t0
    t0 = time.perf_counter()
    sync(call())
    return {"first_ms": first * 1e3, "steady_ms": (time.perf_counter() - t0) * 1e3}


def fresh_first_call(workload: str, who: str, backend_name: str, empty_kernel_cache: bool = False) -> dict:
    import tapegrad
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([os.path.dirname(os.path.dirname(tapegrad.__file__)),
                                         *filter(None, [env.get("PYTHONPATH")])])  # this process's tapegrad
    cache = None
    if empty_kernel_cache:
        import tempfile
        cache = tempfile.TemporaryDirectory(prefix="cupy-cache-")
        env["CUPY_CACHE_DIR"] = cache.name
    try:
        proc = subprocess.run([sys.executable, os.path.abspath(__file__), "--first-call", workload, who,
                               "--backend", backend_name], capture_output=True, text=True, env=env,
                              timeout=FIRST_CALL_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return {"error": f"no result within {FIRST_CALL_TIMEOUT_S} s"}
    finally:
        if cache is not None:
            cache.cleanup()
    lines = proc.stdout.strip().splitlines()
    if proc.returncode != 0 or not lines:
        return {"error": (proc.stderr.strip().splitlines() or ["no output"])[-1]}
    return json.loads(lines[-1])


def first_calls(backend_name: str, names, jax_present: bool) -> list:
    rows = []
    for workload in [w for w in ("mlp", "gp") if w in names]:
        runs = [(JIT, False, "fresh process, CuPy's kernel cache as the machine has it")]
        if backend_name == "cupy" and workload == "gp":
            runs.append((JIT, True, "fresh process, empty CuPy kernel cache (CUPY_CACHE_DIR)"))
        if jax_present:
            runs.append((JAX, False, "fresh process"))
        for who, empty, how in runs:
            result = fresh_first_call(workload, "jax" if who == JAX else "tapegrad", backend_name, empty)
            rows.append({"workload": workload, "name": who, "how": how, "empty_kernel_cache": empty,
                         "first_ms": result.get("first_ms"), "steady_ms": result.get("steady_ms"),
                         "error": result.get("error") or result.get("skipped")})
    return rows


# ---- the report ----------------------------------------------------------------------------------
def versions(backend: Backend) -> dict:
    import importlib.metadata
    out = {"python": platform.python_version(), "numpy": np.__version__, "tapegrad": tg.__version__}
    for name in ("cupy", "torch", "jax", "jaxlib"):
        module = sys.modules.get(name)
        if module is not None:
            out[name] = getattr(module, "__version__", None) or importlib.metadata.version(name)
    if backend.name == "cupy":
        runtime, driver = backend.xp.cuda.runtime.runtimeGetVersion(), backend.xp.cuda.runtime.driverGetVersion()
        out["cuda_runtime"] = f"{runtime // 1000}.{runtime % 1000 // 10}"
        out["cuda_driver"] = f"{driver // 1000}.{driver % 1000 // 10}"
    torch = sys.modules.get("torch")
    if torch is not None and getattr(torch.version, "cuda", None):
        out["torch_cuda"] = torch.version.cuda
    try:
        out["commit"] = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=HERE, capture_output=True,
                                       text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        out["commit"] = None
    return out


def evaluate_targets(results: dict, first: list, memory: dict, judged: bool = True) -> list:
    """Every target with its measured ratio (None: not measured) and whether it is met (None: not measured,
    or not ``judged``: the dry run's numbers are no GPU's)."""
    by = {(r["workload"], r["name"]): r for rows in results.values() for r in rows}
    out = []
    for (workload, ours, peer), limit in RATIO_TARGETS.items():
        if workload not in results:
            continue
        a, b = by.get((workload, ours), {}).get("median_ms"), by.get((workload, peer), {}).get("median_ms")
        ratio = a / b if a is not None and b is not None else None
        out.append({"target": f"{workload}: {ours} / {peer}", "ratio": ratio, "limit": limit,
                    "met": None if ratio is None else ratio <= limit})
    for workload, limit in FIRST_CALL_TARGET_MS.items():
        row = next((r for r in first if r["workload"] == workload and r["name"] == JIT and not r["empty_kernel_cache"]),
                   None)
        if row is not None:
            ms = row["first_ms"]
            out.append({"target": f"{workload}: {JIT} first call, fresh process (ms)", "ratio": ms, "limit": limit,
                        "met": None if ms is None else ms <= limit})
    torch_peak = memory.get(TORCH)
    for name in (EAGER, JIT):
        if name in memory:
            ratio = memory[name] / torch_peak if memory[name] is not None and torch_peak else None
            out.append({"target": f"gp: {name} peak memory / {TORCH}'s", "ratio": ratio, "limit": MEMORY_TARGET,
                        "met": None if ratio is None else ratio <= MEMORY_TARGET})
    if not judged:
        for t in out:
            t["met"] = None
    return out


def _ms(v) -> str:
    return "" if v is None else (f"{v:.3f}" if v < 1 else f"{v:,.2f}" if v < 100 else f"{v:,.0f}")


def _verdict(met, measured: bool) -> str:
    return ("not judged (dry run)" if measured else "not measured") if met is None else ("MET" if met else "MISSED")


def report(data: dict) -> str:
    lines = [f"{data['date']}  {data['device']}  " + "  ".join(f"{k} {v}" for k, v in data["versions"].items() if v),
             *data["skipped"], ""]
    rows = [[data["titles"][w] if i == 0 else "", r["name"], _ms(r["median_ms"]), _ms(r["best_ms"]), r["calls"],
             "" if r["rel_err"] is None else f"{r['rel_err']:.1e}" + ("" if r["agrees"] else " WRONG")]
            for w, rs in data["results"].items() for i, r in enumerate(rs)]
    lines.append(format_table(["workload (float32)", "implementation", "median ms", "best ms", "calls",
                               "grad rel err"], rows, left=2))
    floor = data.get("floor")
    if floor:
        fused = {r["name"]: r["median_ms"] for r in data["results"]["fused"]}
        jit_ms, copy_ms = fused.get(JIT), fused.get(FLOOR)
        lines.append(f"\nfused floor: measured {_ms(copy_ms)} ms ({floor['measured']}); nominal "
                     f"{floor['nominal_ms']:.3g} ms ({floor['bytes'] / 2 ** 20:.3g} MiB, {floor['nominal']})"
                     + (f"; {JIT} / measured floor = {jit_ms / copy_ms:.2f}x" if jit_ms and copy_ms else ""))
    if data["memory"]:
        lines.append("gp peak memory beyond what the call started with: " + "; ".join(
            f"{k} {'not measured' if v is None else f'{v / 2 ** 20:.1f} MiB'}" for k, v in data["memory"].items())
            + f" ({data['memory_how']})")
    if data["first_call"]:
        lines.append("")
        lines.append(format_table(["first jit call", "implementation", "how", "first ms", "then steady ms"], [
            [r["workload"], r["name"], r["how"], _ms(r["first_ms"]) if r["error"] is None else r["error"],
             _ms(r["steady_ms"])] for r in data["first_call"]], left=3))
    lines.append("")
    dry = data["backend"] == "double"
    lines.append(format_table(["target", "measured", "at most", "verdict"], [
        [t["target"], "" if t["ratio"] is None else (f"{t['ratio']:,.0f}" if "(ms)" in t["target"]
                                                     else f"{t['ratio']:.2f}x"),
         f"{t['limit']:g}" + ("" if "(ms)" in t["target"] else "x"), _verdict(t["met"], dry and t["ratio"] is not None)]
        for t in data["targets"]]))
    for line in data["mismatches"]:
        lines.append(f"WRONG {line}")
    return "\n".join(lines)


def draw(data: dict, png: str) -> str:
    """The picture, in ``plot.py``'s style: each target's tapegrad row over its peer's, log scale."""
    if try_import("matplotlib") is None:
        return f"picture skipped: matplotlib is not installed (later: python benchmarks/bench_gpu.py --plot JSON {png})"
    import plot
    found = [plot.Ratio(t["target"].split(":")[0], t["target"].split(": ")[1].split(" / ")[0], t["ratio"],
                        t["target"].split(" / ")[1]) for t in data["targets"]
             if t["ratio"] is not None and " / " in t["target"] and "memory" not in t["target"]]
    if not found:
        return "picture skipped: no ratio was measured (no peer ran)"
    plot.plot(found, png, f"GPU: {data['device']}, {data['date']}; median per call, device synchronised")
    return f"wrote {png}"


def refuse_published(json_path, png_path, quick, backend_name, names, rounds) -> None:
    """Only a full run on a GPU writes the committed results-gpu.json and results-gpu.png."""
    published = {os.path.realpath(p) for p in (PUBLISHED_JSON, PUBLISHED_PNG)}
    if not any(p and os.path.realpath(p) in published for p in (json_path, png_path)):
        return
    refused = (["--quick"] * quick + [f"--backend {backend_name}"] * (backend_name != "cupy")
               + ["a subset of the workloads"] * (set(names) != set(WORKLOADS)) + ["--rounds"] * (rounds is not None))
    if refused:
        raise SystemExit(f"benchmarks/results-gpu.json and .png are the published GPU results, which only a full run "
                         f"on a GPU writes (make bench-gpu-publish), not one with {' and '.join(refused)}; other runs "
                         "write elsewhere: make bench-gpu (into benchmarks/out/)")


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)

    def option(flag, default=None):
        return argv[argv.index(flag) + 1] if flag in argv else default
    backend_name = option("--backend", "cupy")
    if "--first-call" in argv:
        i = argv.index("--first-call")
        print(json.dumps(first_call_child(argv[i + 1], argv[i + 2], backend_name)))
        return 0
    if "--plot" in argv:
        i = argv.index("--plot")
        with open(argv[i + 1]) as f:
            print(draw(json.load(f), argv[i + 2]))
        return 0
    quick = "--quick" in argv
    json_path, png_path = option("--json"), option("--png")
    rounds_flag = option("--rounds")
    names = [a for a in argv if a in WORKLOADS] or list(WORKLOADS)
    refuse_published(json_path, png_path, quick, backend_name, names, rounds_flag)
    if backend_name == "cupy":
        reason = why_not()
        if reason is not None:
            print(f"make bench-gpu: nothing to run here: {reason}")
            return 0
    dry = backend_name == "double"
    rounds = int(rounds_flag) if rounds_flag else (1 if dry else 5 if quick else 15)
    target_s = 0.0 if dry else 0.01 if quick else 0.03  # 0: one call per round
    backend = Backend(backend_name)
    skipped = []
    torch, jax = peers(backend, skipped)
    for line in skipped:
        print(line, flush=True)

    def sync_all():
        backend.sync()
        if torch is not None:
            torch.sync()
    sizes = TINY if dry else FULL
    results, mismatches, memory, floor = {}, [], {}, None
    for key in names:
        built = BUILDERS[key](sizes[key], backend, torch, jax)
        host = built.pop("host")
        reference = built.pop("reference")(*_to64(host))
        reference = [np.asarray(r) for r in reference]
        floor = built.pop("floor", floor)
        rows, wrong = run_workload(key, built, reference, rounds, target_s, sync_all)
        results[key], mismatches = rows, mismatches + wrong
        if key == "gp":
            memory[EAGER] = backend.peak_bytes(built[EAGER][0])
            memory[JIT] = backend.peak_bytes(built[JIT][0])
            if torch is not None:
                memory[TORCH] = torch.peak_bytes(built[TORCH][0])
        print(format_table([title(key, sizes[key]), "median ms", "best ms", "grad rel err"],
                           [[r["name"], _ms(r["median_ms"]), _ms(r["best_ms"]),
                             "" if r["rel_err"] is None else f"{r['rel_err']:.1e}"] for r in rows]), flush=True)
        del built
        gc.collect()
    first = first_calls(backend_name, names, jax is not None)
    data = {
        "schema": SCHEMA, "date": datetime.date.today().isoformat(), "backend": backend_name,
        "device": backend.device, "versions": versions(backend), "quick": quick, "rounds": rounds,
        "statistic": "median per call over every timed call of every round; each call between device synchronisations",
        "tolerance": {"rel_err": TOL, "ulps": TOL_ULPS,
                      "reference": "tapegrad eager on NumPy, float64, the same float32 inputs"},
        "titles": {key: title(key, sizes[key]) for key in names},
        "skipped": skipped, "results": results, "floor": floor, "memory": memory,
        "memory_how": ("CuPy pool's used bytes polled at each allocation / torch.cuda.max_memory_allocated, beyond "
                       "the bytes allocated before the call" if backend_name == "cupy"
                       else "tracemalloc's peak (the double on NumPy; not device memory)"),
        "first_call": first, "mismatches": mismatches,
    }
    data["targets"] = evaluate_targets(results, first, memory, judged=not dry)
    print()
    print(report(data))
    if json_path:
        with open(json_path, "w") as f:
            json.dump(data, f, indent=1)
        print(f"wrote {json_path}")
    if png_path:
        print(draw(data, png_path))
    return 1 if mismatches else 0


if __name__ == "__main__":
    sys.exit(main())
