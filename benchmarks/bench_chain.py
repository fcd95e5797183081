"""``chain``: per-operation overhead of reverse mode on tiny arrays.

The function is 200 steps of ``x = sin(x) * 1.01 + 0.1`` on a float32 vector of 16, then ``sum``.
With 16 elements every array operation costs well under a microsecond in NumPy, so what is measured
is the price of the autodiff machinery per operation: dispatch, taping, and the backward pass.

How operations are counted: each step is 3 forward primitives (``sin``, ``multiply``, ``add``), so
a call is 600 primitives (the final ``sum`` is not counted). The time of one whole gradient call
(forward, taping and backward, which itself runs about 3 NumPy ops per step) is divided by 600:
"microseconds per forward primitive, all costs included".

Contestants: ``tapegrad.grad`` (with ``tapegrad.numpy``), ``tapegrad.jit(tapegrad.grad(...))`` (the
program staged once, then run by the jit executor; issue 5), a hand-written NumPy forward+backward
(stores ``cos(x)`` per step, then multiplies the cotangent back through; constants hoisted as 0-d
float32 arrays, and once more with inline Python floats), ``autograd.grad`` 1.9, PyTorch eager
(``backward()``) and ``jax.jit(jax.grad(...))``, the last three when installed (JAX's input is put on
its device once, as a JAX program keeps its arrays there; its result is waited for with
``block_until_ready``). Forward-only rows (no gradient) show the floor each side starts from.

Targets: tapegrad ``grad`` <= 3 us per primitive (issue 1); ``jit(grad)`` <= 0.8 us per primitive and at
or below the hand-written NumPy (0-d constants) row (issue 5).

Run alone: ``python benchmarks/bench_chain.py [--quick] [--threads N]``.
"""
from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _timing import apply_thread_flag, format_table, interleaved, standalone_main, try_import  # noqa: E402

if __name__ == "__main__":
    apply_thread_flag(sys.argv)  # before NumPy is imported

import numpy as np  # noqa: E402

import tapegrad as tg  # noqa: E402
import tapegrad.numpy as tnp  # noqa: E402

STEPS = 200
N = 16
PRIMS_PER_STEP = 3
N_PRIMS = STEPS * PRIMS_PER_STEP
TARGET_US = 3.0
JIT_TARGET_US = 0.8
REF = "numpy fwd+bwd (hand)"
JIT = "tapegrad jit(grad)"


def make_input():
    return np.linspace(-1.0, 1.0, N, dtype=np.float32)


# ---- tapegrad ------------------------------------------------------------------------------------
def make_chain(ns, steps: int = STEPS):
    """The chain written with the array namespace ``ns`` (``tapegrad.numpy``, ``jax.numpy``, ``torch``: each
    has ``sin`` and ``sum``); ``bench_gpu`` runs it with other ``steps`` on device arrays."""
    def chain(x):
        for _ in range(steps):
            x = ns.sin(x) * 1.01 + 0.1
        return ns.sum(x)
    return chain


chain_tnp = make_chain(tnp)


tapegrad_grad = tg.grad(chain_tnp)
tapegrad_jit_grad = tg.jit(tg.grad(chain_tnp))
tapegrad_jit_forward = tg.jit(chain_tnp)


# ---- hand-written NumPy --------------------------------------------------------------------------
# The constants as 0-d float32 arrays, made once: the fastest way to spell them in NumPy 2 (a Python
# float operand costs ~200 ns more per ufunc call, a NumPy scalar ~130 ns more). The "python floats"
# row is the same code with 1.01 and 0.1 written inline, as the tapegrad program is.
_A = np.asarray(1.01, np.float32)
_B = np.asarray(0.1, np.float32)


def chain_np_forward(x):
    for _ in range(STEPS):
        x = np.sin(x) * _A + _B
    return np.sum(x)


def chain_np_grad(x):
    """Forward storing ``cos(x)``, then ``g = g * 1.01 * cos(x_k)`` back through the steps."""
    cosines = []
    for _ in range(STEPS):
        cosines.append(np.cos(x))
        x = np.sin(x) * _A + _B
    g = np.ones_like(x)
    for c in reversed(cosines):
        g = g * _A * c
    return g


def chain_np_grad_pyfloats(x):
    """:func:`chain_np_grad` with the constants written as Python floats."""
    cosines = []
    for _ in range(STEPS):
        cosines.append(np.cos(x))
        x = np.sin(x) * 1.01 + 0.1
    g = np.ones_like(x)
    for c in reversed(cosines):
        g = g * 1.01 * c
    return g


# ---- peers ---------------------------------------------------------------------------------------
def make_autograd_grad(autograd):
    anp = autograd.numpy

    def chain_anp(x):
        for _ in range(STEPS):
            x = anp.sin(x) * 1.01 + 0.1
        return anp.sum(x)
    return autograd.grad(chain_anp)


def make_torch_grad(torch):
    def torch_grad(x_np):
        x = torch.from_numpy(x_np).requires_grad_(True)
        y = x
        for _ in range(STEPS):
            y = torch.sin(y) * 1.01 + 0.1
        y.sum().backward()
        return x.grad.numpy()

    def torch_forward(x_np):
        with torch.no_grad():
            y = torch.from_numpy(x_np)
            for _ in range(STEPS):
                y = torch.sin(y) * 1.01 + 0.1
            return y.sum()
    return torch_grad, torch_forward


def make_jax(jax, steps: int = STEPS):
    """``(jit(grad), jit(forward))`` of the chain in JAX, each taking the NumPy input."""
    chain_jnp = make_chain(jax.numpy, steps)
    return on_device(jax, jax.jit(jax.grad(chain_jnp))), on_device(jax, jax.jit(chain_jnp))


def on_device(jax, fn):
    """``fn`` on JAX arrays, called with NumPy arrays: each input is put on the device once (remembered
    by identity), and the call waits for its results (JAX dispatches asynchronously)."""
    placed = {}

    def call(*args):
        dev = []
        for a in args:
            if id(a) not in placed:
                placed[id(a)] = (a, jax.tree_util.tree_map(jax.numpy.asarray, a))
            dev.append(placed[id(a)][1])
        return jax.block_until_ready(fn(*dev))
    return call


def contestants():
    """name -> (grad callable on x, kind) where kind is "grad" or "forward"."""
    out = {
        "tapegrad grad": (tapegrad_grad, "grad"),
        JIT: (tapegrad_jit_grad, "grad"),
        REF: (chain_np_grad, "grad"),
        "numpy fwd+bwd (python floats)": (chain_np_grad_pyfloats, "grad"),
    }
    autograd = try_import("autograd")
    if autograd is not None:
        try_import("autograd.numpy")
        out["autograd grad"] = (make_autograd_grad(autograd), "grad")
    torch = try_import("torch")
    if torch is not None:
        torch_grad, torch_forward = make_torch_grad(torch)
        out["torch eager backward"] = (torch_grad, "grad")
    jax = try_import("jax")
    if jax is not None:
        jax_grad, jax_forward = make_jax(jax)
        out["jax jit(grad)"] = (jax_grad, "grad")
    out["tapegrad forward only"] = (chain_tnp, "forward")
    out["tapegrad jit forward only"] = (tapegrad_jit_forward, "forward")
    out["numpy forward only"] = (chain_np_forward, "forward")
    if torch is not None:
        out["torch forward (no_grad)"] = (torch_forward, "forward")
    if jax is not None:
        out["jax jit forward only"] = (jax_forward, "forward")
    return out


def check(cands, x):
    """Max relative error of each gradient against the hand-written NumPy one; dtypes."""
    ref = chain_np_grad(x).astype(np.float64)
    report = {}
    for name, (fn, kind) in cands.items():
        if kind != "grad":
            continue
        g = np.asarray(fn(x))
        err = float(np.max(np.abs(g - ref)) / np.max(np.abs(ref)))
        report[name] = (err, str(g.dtype))
    return report


def run(quick: bool = False):
    """Time every contestant; returns a list of result dicts (one per contestant)."""
    x = make_input()
    cands = contestants()
    checks = check(cands, x)
    timings = interleaved({name: (lambda fn=fn: fn(x)) for name, (fn, _) in cands.items()},
                          repeat=3 if quick else 9, target_s=0.03 if quick else 0.1)
    results = []
    for name, (_, kind) in cands.items():
        t = timings[name]
        err, dtype = checks.get(name, (None, None))
        results.append({
            "bench": "chain", "name": name, "kind": kind,
            "best_us_per_op": t.best * 1e6 / N_PRIMS, "median_us_per_op": t.median * 1e6 / N_PRIMS,
            "best_ms_per_call": t.best * 1e3, "rel_err": err, "grad_dtype": dtype,
        })
    return results


def table(results) -> str:
    ref = next(r for r in results if r["name"] == REF)["best_us_per_op"]
    rows = []
    for r in results:
        err = "" if r["rel_err"] is None else f"{r['rel_err']:.1e}"
        rows.append([r["name"], f"{r['best_us_per_op']:.2f}", f"{r['median_us_per_op']:.2f}",
                     f"{r['best_us_per_op'] / ref:.1f}x", err, r["grad_dtype"] or ""])
    return format_table(["chain (600 prims, f32[16])", "us/op best", "us/op median", "vs numpy",
                         "rel err", "grad dtype"], rows)


def compact_rows(results):
    """Rows for ``run.py``'s table: bench, contestant, time, ratio, to, note, rel err, dtype."""
    ref = next(r for r in results if r["name"] == REF)["best_us_per_op"]
    return [["chain", r["name"], f"{r['best_us_per_op']:.2f} us/op", f"{r['best_us_per_op'] / ref:.2f}x",
             "numpy (hand)", "", "" if r["rel_err"] is None else f"{r['rel_err']:.1e}", r["grad_dtype"]]
            for r in results if r["kind"] == "grad"]


def verdict(results) -> str:
    by = {r["name"]: r["best_us_per_op"] for r in results}
    tg_us, jit_us, ref = by["tapegrad grad"], by[JIT], by[REF]
    ok = "MET" if tg_us <= TARGET_US else "MISSED"
    jit_ok = "MET" if jit_us <= JIT_TARGET_US and jit_us <= ref else "MISSED"
    return (f"chain target tapegrad <= {TARGET_US:.1f} us/op: {ok} ({tg_us:.2f} us/op)\n"
            f"chain target jit(grad) <= {JIT_TARGET_US:.1f} us/op and <= numpy (hand): {jit_ok} "
            f"({jit_us:.2f} us/op, {jit_us / ref:.2f}x numpy (hand) at {ref:.2f} us/op)")


def main(argv=None):
    return standalone_main(run, table, verdict, argv)


if __name__ == "__main__":
    main()
