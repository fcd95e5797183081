"""``gp``: the gradient-penalty step of issue 6 (a gradient of a gradient through convolutions and pooling).

The nnabla seed's workload, float32: a batch of 32 images (32, 3, 32, 32) with labels in 0..9;
conv 3->8 3x3 pad 1, relu, max pool 2, conv 8->16 3x3 pad 1, relu, max pool 2, affine 16*8*8 -> 10,
mean softmax cross-entropy. The penalty is ``gp = sum_p ||d loss / d p||_2`` over the six parameter arrays,
and one **GP step** is the gradient of ``loss + gp`` with respect to the parameters (a double backward).
The **first-order** rows time the plain gradient of ``loss`` (no penalty) for scale.

Contestants, all from the same float32 initial weights (``U(-1/sqrt(fan_in), 1/sqrt(fan_in))``):

- ``tapegrad eager``: ``tg.grad(penalised_loss)(params, x, labels)``, ``params`` a pytree
  ``{"conv1": (w, b), "conv2": (w, b), "fc": (w, b)}`` and ``penalised_loss`` calling
  ``tg.value_and_grad(loss)`` inside (as ``tests/test_gradient_penalty.py``), with
  ``tapegrad.nn.functional``'s ``conv2d``, ``relu``, ``max_pool2d``, ``linear`` and ``cross_entropy``;
- ``tapegrad jit``: ``tg.jit`` of that same step;
- ``tapegrad eager, nn modules weights=``: MindSpore's spelling, ``tg.nn.Sequential`` of ``Conv2d``,
  ``ReLU``, ``MaxPool2d``, ``Flatten``, ``Dense`` and ``grad(..., grad_position=None,
  weights=net.trainable_params())`` inside and outside; only when ``tg.nn`` has those modules;
- ``torch eager``: ``torch.autograd.grad(loss, params, create_graph=True)``, the penalty, then
  ``torch.autograd.grad`` of ``loss + gp`` (one intra-op thread, see ``_timing.one_torch_thread``; the
  time includes ``torch.from_numpy`` of the inputs and ``.numpy()`` of the results);
- ``torch eager, all cores``: the same at every core's intra-op thread (``torch.set_num_threads``), timed
  in a group of its own after the others (PyTorch's OpenMP workers spin after a call and take the cores
  from whatever runs next). Compare it with the tapegrad rows of ``--threads N`` at the same N, both
  using the machine's cores (issue 16's target: GP step eager <= 1.2x);
- ``jax jit``: ``jax.jit(jax.grad(penalised))`` with ``jax.value_and_grad`` inside,
  ``lax.conv_general_dilated`` and ``lax.reduce_window`` (max) for the pooling; inputs put on JAX's
  device once, each call waits with ``block_until_ready`` (XLA keeps its own thread pool: ``--threads``
  does not cap it); when installed;
- ``autograd``: HIPS autograd with an im2col convolution written in ``autograd.numpy`` (nine shifted
  slices, one ``dot``) and the pooling as a ``max`` over a reshape; ~0.1 s a call, so it is timed apart,
  after the others, 3 calls of one sample each; skipped with ``--quick``; when installed.

First-order rows: tapegrad eager, tapegrad jit, torch eager (``loss.backward`` spelled
``torch.autograd.grad``), jax jit.

Correctness, before timing: every GP step's gradients against eager tapegrad's GP step, every
first-order gradient against eager tapegrad's (max |g - g_ref| / max |g_ref|, worst of the six arrays),
and their dtype (float32 must stay float32). The jit rows also report their first call (staging and
compiling) beyond a steady call.

Targets (issue 6): GP step eager <= 2x PyTorch eager; GP step jit <= 2x PyTorch eager; first-order
gradient eager <= 2x PyTorch eager. Every row's ratio is to PyTorch's row of the same kind.

Run alone: ``python benchmarks/bench_gp.py [--quick] [--threads N]``.
"""
from __future__ import annotations

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _timing import (  # noqa: E402
    apply_thread_flag,
    blas_threads,
    format_table,
    interleaved,
    one_torch_thread,
    standalone_main,
    try_import,
)

if __name__ == "__main__":
    apply_thread_flag(sys.argv)  # before NumPy is imported

import numpy as np  # noqa: E402
from bench_chain import on_device  # noqa: E402  (after apply_thread_flag: bench_chain imports NumPy)
from bench_kernels import CORES, _torch_threads  # noqa: E402

import tapegrad as tg  # noqa: E402
import tapegrad.numpy as tnp  # noqa: E402
from tapegrad.nn import functional as F  # noqa: E402

BATCH, CHANNELS, IMAGE, CLASSES = 32, 3, 32, 10
FLAT = 16 * (IMAGE // 4) ** 2
KEYS = ("conv1", "conv2", "fc")  # the canonical order of the six arrays: (w, b) of each layer
TARGET_RATIO = 2.0
ALL_CORES_TARGET = 1.2  # issue 16: GP step eager against PyTorch, both at every core
GP, FIRST = "gp", "first"
EAGER, JIT, MODULES = "tapegrad eager", "tapegrad jit", "tapegrad eager, nn modules weights="
TORCH, JAX, AUTOGRAD = "torch eager", "jax jit", "autograd (im2col)"
TORCH_ALL = f"torch eager, all cores ({CORES} threads)"
MODULE_NAMES = ("Conv2d", "MaxPool2d", "Flatten", "Dense", "Sequential", "ReLU")


def make_problem(seed: int = 0, batch: int = BATCH):
    """``(params, x, labels)``: float32 parameters ``{"conv1": (w, b), "conv2": (w, b), "fc": (w, b)}``
    drawn from ``U(-1/sqrt(fan_in), 1/sqrt(fan_in))`` (PyTorch's default), a standard normal float32
    batch (32, 3, 32, 32) and int64 labels in 0..9 (``bench_gpu`` asks for another ``batch``)."""
    rng = np.random.default_rng(seed)

    def uniform(shape, fan_in):
        return (rng.uniform(-1.0, 1.0, shape) / np.sqrt(fan_in)).astype(np.float32)
    params = {"conv1": (uniform((8, CHANNELS, 3, 3), CHANNELS * 9), uniform((8,), CHANNELS * 9)),
              "conv2": (uniform((16, 8, 3, 3), 72), uniform((16,), 72)),
              "fc": (uniform((CLASSES, FLAT), FLAT), uniform((CLASSES,), FLAT))}
    x = rng.standard_normal((batch, CHANNELS, IMAGE, IMAGE)).astype(np.float32)
    labels = rng.integers(0, CLASSES, size=batch)
    return params, x, labels


def leaves(grads):
    """The six gradient arrays in ``KEYS`` order, from a ``{"conv1": (w, b), ...}`` tree or a sequence."""
    if isinstance(grads, dict):
        return [np.asarray(g) for key in KEYS for g in grads[key]]
    return [np.asarray(g) for g in grads]


# ---- tapegrad ------------------------------------------------------------------------------------
def net(params, x):
    h = F.max_pool2d(F.relu(F.conv2d(x, *params["conv1"], padding=1)), 2)
    h = F.max_pool2d(F.relu(F.conv2d(h, *params["conv2"], padding=1)), 2)
    return F.linear(tnp.reshape(h, (h.shape[0], -1)), *params["fc"])


def loss_fn(params, x, labels):
    return F.cross_entropy(net(params, x), labels)


_loss_and_grad = tg.value_and_grad(loss_fn)


def penalised_loss(params, x, labels):
    """``loss + sum_p ||d loss / d p||_2`` over every parameter array."""
    loss, grads = _loss_and_grad(params, x, labels)
    return loss + sum(tnp.sqrt(tnp.sum(g * g)) for g in tg.tree.tree_leaves(grads))


gp_step = tg.grad(penalised_loss)
first_grad = tg.grad(loss_fn)


def has_modules() -> bool:
    """Whether ``tg.nn`` has the modules of the module-form row (issue 6 adds them; older trees lack them)."""
    return all(hasattr(tg.nn, name) for name in MODULE_NAMES)


def make_module_step(params):
    """The GP step on ``tg.nn`` modules holding ``params``, MindSpore's ``weights=`` spelling;
    called as ``step(params, x, labels)`` like the others (``params`` ignored: the modules hold them)."""
    nn = tg.nn
    model = nn.Sequential(nn.Conv2d(CHANNELS, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                          nn.Conv2d(8, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                          nn.Flatten(), nn.Dense(FLAT, CLASSES))
    weights = model.trainable_params()
    for p, value in zip(weights, leaves(params), strict=True):
        p.assign(value)

    def module_loss(x, labels):
        return F.cross_entropy(model(x), labels)

    inner = tg.value_and_grad(module_loss, grad_position=None, weights=weights)

    def module_penalised(x, labels):
        loss, grads = inner(x, labels)
        return loss + sum(tnp.sqrt(tnp.sum(g * g)) for g in grads)

    outer = tg.grad(module_penalised, grad_position=None, weights=weights)
    return lambda params, x, labels: outer(x, labels)


# ---- peers ---------------------------------------------------------------------------------------
def make_torch(torch):
    """``(gp_step, first_grad)`` in PyTorch eager, each ``(params, x, labels) -> list of six arrays``."""
    tf = torch.nn.functional

    def forward(params, x, labels):
        tparams = [torch.from_numpy(a).requires_grad_(True) for a in leaves(params)]
        c1w, c1b, c2w, c2b, fw, fb = tparams
        h = tf.max_pool2d(tf.relu(tf.conv2d(torch.from_numpy(x), c1w, c1b, padding=1)), 2)
        h = tf.max_pool2d(tf.relu(tf.conv2d(h, c2w, c2b, padding=1)), 2)
        logits = tf.linear(h.reshape(h.shape[0], -1), fw, fb)
        return tf.cross_entropy(logits, torch.from_numpy(labels)), tparams

    def step(params, x, labels):
        loss, tparams = forward(params, x, labels)
        grads = torch.autograd.grad(loss, tparams, create_graph=True)
        total = loss + sum(g.norm() for g in grads)
        return [g.numpy() for g in torch.autograd.grad(total, tparams)]

    def first(params, x, labels):
        loss, tparams = forward(params, x, labels)
        return [g.numpy() for g in torch.autograd.grad(loss, tparams)]
    return step, first


def make_jax(jax):
    """``(jit gp_step, jit first_grad)`` in JAX taking NumPy arrays (``bench_chain.on_device``)."""
    jnp, lax = jax.numpy, jax.lax

    def conv(h, w, b):  # NCHW input, OIHW kernel: lax's default layout
        return lax.conv_general_dilated(h, w, (1, 1), ((1, 1), (1, 1))) + b[None, :, None, None]

    def pool(h):
        return lax.reduce_window(h, -jnp.inf, lax.max, (1, 1, 2, 2), (1, 1, 2, 2), "VALID")

    def loss(params, x, labels):
        h = pool(jax.nn.relu(conv(x, *params["conv1"])))
        h = pool(jax.nn.relu(conv(h, *params["conv2"])))
        w, b = params["fc"]
        logp = jax.nn.log_softmax(h.reshape(h.shape[0], -1) @ w.T + b)
        return -jnp.mean(jnp.take_along_axis(logp, labels[:, None], axis=1))

    def penalised(params, x, labels):
        value, grads = jax.value_and_grad(loss)(params, x, labels)
        return value + sum(jnp.sqrt(jnp.sum(g * g)) for g in jax.tree_util.tree_leaves(grads))
    return on_device(jax, jax.jit(jax.grad(penalised))), on_device(jax, jax.jit(jax.grad(loss)))


def make_autograd(autograd):
    """The GP step in HIPS autograd; the convolution is an im2col (nine shifted slices, one ``dot``)."""
    anp = autograd.numpy

    def conv(h, w, b):
        n, c, height, width = h.shape
        padded = anp.pad(h, ((0, 0), (0, 0), (1, 1), (1, 1)), mode="constant")
        cols = anp.stack([padded[:, :, i:i + height, j:j + width] for i in range(3) for j in range(3)], axis=2)
        cols = anp.reshape(anp.transpose(cols, (0, 3, 4, 1, 2)), (n * height * width, c * 9))
        out = anp.dot(cols, anp.reshape(w, (w.shape[0], c * 9)).T)
        return anp.transpose(anp.reshape(out, (n, height, width, w.shape[0])), (0, 3, 1, 2)) + b[None, :, None, None]

    def pool(h):
        n, c, height, width = h.shape
        return anp.max(anp.reshape(h, (n, c, height // 2, 2, width // 2, 2)), axis=(3, 5))

    def loss(params, x, labels):
        h = pool(anp.maximum(conv(x, *params["conv1"]), 0.0))
        h = pool(anp.maximum(conv(h, *params["conv2"]), 0.0))
        w, b = params["fc"]
        z = anp.dot(anp.reshape(h, (h.shape[0], -1)), w.T) + b
        z = z - anp.max(z, axis=1, keepdims=True)
        logp = z - anp.log(anp.sum(anp.exp(z), axis=1, keepdims=True))
        return -anp.mean(logp[anp.arange(len(labels)), labels])

    def penalised(params, x, labels):
        value, grads = autograd.value_and_grad(loss)(params, x, labels)
        return value + sum(anp.sqrt(anp.sum(g * g)) for key in KEYS for g in grads[key])
    return autograd.grad(penalised)


def _all_cores(torch, step):
    """``step`` run with PyTorch's intra-op pool at every core (restored afterwards)."""
    wrap = _torch_threads(torch, CORES)
    return lambda *args: wrap(lambda: step(*args))()


def contestants(params, quick: bool = False):
    """``(kind, name) -> callable(params, x, labels)``; ``kind`` is ``"gp"`` or ``"first"``."""
    out = {(GP, EAGER): gp_step, (GP, JIT): tg.jit(gp_step)}
    if has_modules():
        out[(GP, MODULES)] = make_module_step(params)
    firsts = {(FIRST, EAGER): first_grad, (FIRST, JIT): tg.jit(first_grad)}
    torch = try_import("torch")
    if torch is not None:
        out[(GP, TORCH)], firsts[(FIRST, TORCH)] = make_torch(torch)
        if CORES > 1:
            out[(GP, TORCH_ALL)] = _all_cores(torch, out[(GP, TORCH)])
            firsts[(FIRST, TORCH_ALL)] = _all_cores(torch, firsts[(FIRST, TORCH)])
    jax = try_import("jax")
    if jax is not None:
        out[(GP, JAX)], firsts[(FIRST, JAX)] = make_jax(jax)
    autograd = None if quick else try_import("autograd")
    if autograd is not None:
        try_import("autograd.numpy")
        out[(GP, AUTOGRAD)] = make_autograd(autograd)
    out.update(firsts)
    return out


def check(cands, args):
    """``(kind, name) -> (worst relative error against eager tapegrad's row of the kind, dtypes, first
    call seconds)``; the first call is this check's, so a jit row's includes its staging/compiling."""
    report, ref = {}, {}
    for key, fn in cands.items():  # the eager rows come first in each kind
        t0 = time.perf_counter()
        grads = leaves(fn(*args))
        first = time.perf_counter() - t0
        ref.setdefault(key[0], grads)
        errs = [float(np.max(np.abs(g.astype(np.float64) - r)) / np.max(np.abs(r)))
                for g, r in zip(grads, ref[key[0]], strict=True)]
        report[key] = (max(errs), "/".join(sorted({str(g.dtype) for g in grads})), first)
    return report


def fresh_jit_first_call_s(args, calls: int):
    """``(kind, "tapegrad jit") -> best seconds of a fresh ``tg.jit`` object's first call`` (staging, the
    passes, compiling and one run), over ``calls`` fresh objects, in the warm process after the timing."""
    out = {}
    for key, fn in (((GP, JIT), gp_step), ((FIRST, JIT), first_grad)):
        costs = []
        for _ in range(calls):
            jitted = tg.jit(fn)
            t0 = time.perf_counter()
            jitted(*args)
            costs.append(time.perf_counter() - t0)
        out[key] = min(costs)
    return out


def run(quick: bool = False):
    params, x, labels = make_problem()
    args = (params, x, labels)
    cands = contestants(params, quick)
    restore = one_torch_thread()  # after contestants(), which imports torch
    try:
        checks = check(cands, args)
        slow = {key: cands.pop(key) for key in list(cands) if key[1] == AUTOGRAD}
        spinning = {key: cands.pop(key) for key in list(cands) if key[1] == TORCH_ALL}
        timings = {}
        for group in (cands, spinning):  # PyTorch's spinning workers would slow whatever runs next
            if group:
                timings.update(interleaved({key: (lambda fn=fn: fn(*args)) for key, fn in group.items()},
                                           repeat=3 if quick else 9, target_s=0.1 if quick else 0.3))
        # ~0.1 s a call: a few single calls, after the others (not interleaved with them)
        timings.update(interleaved({key: (lambda fn=fn: fn(*args)) for key, fn in slow.items()},
                                   repeat=3, warmup=1, number=1))
    finally:
        restore()
    fresh = fresh_jit_first_call_s(args, 1 if quick else 3)
    results = []
    for key in checks:
        t = timings[key]
        torch_t, torch_all = timings.get((key[0], TORCH)), timings.get((key[0], TORCH_ALL))
        err, dtype, first = checks[key]
        first = fresh.get(key, first)
        results.append({
            "bench": "gp", "kind": key[0], "name": key[1], "best_ms": t.best * 1e3, "median_ms": t.median * 1e3,
            "ratio_to_torch": None if torch_t is None else t.best / torch_t.best,
            "ratio_to_torch_all_cores": None if torch_all is None else t.best / torch_all.best,
            "first_call_extra_ms": (first - t.best) * 1e3 if "jit" in key[1] else None,
            "rel_err": err, "dtype": dtype,
        })
    return results


def _label(r) -> str:
    return f"{'GP step' if r['kind'] == GP else 'first-order grad'}: {r['name']}"


def _opt(value, fmt) -> str:
    return "" if value is None else format(value, fmt)


def _ratio(r) -> str:
    return "" if r["ratio_to_torch"] is None else f"{r['ratio_to_torch']:.2f}x"


def table(results) -> str:
    rows = [[_label(r), f"{r['best_ms']:.2f}", f"{r['median_ms']:.2f}", _ratio(r),
             _opt(r["ratio_to_torch_all_cores"], ".2f"), _opt(r["first_call_extra_ms"], ".0f"),
             f"{r['rel_err']:.1e}", r["dtype"]] for r in results]
    return format_table([f"gp: CNN B={BATCH} {CHANNELS}x{IMAGE}x{IMAGE} f32", "ms best", "ms median",
                         "vs torch", f"vs torch {CORES} thr", "1st call +ms", "rel err", "dtype"], rows)


def compact_rows(results):
    """Rows for ``run.py``'s table: bench, contestant, time, ratio, to, note, error, dtype."""
    return [["gp", _label(r), f"{r['best_ms']:.2f} ms",
             _ratio(r), "torch eager (same kind)",
             "" if r["first_call_extra_ms"] is None else f"1st call +{r['first_call_extra_ms']:.0f} ms",
             f"{r['rel_err']:.1e}", r["dtype"]] for r in results]


def verdict(results) -> str:
    by = {(r["kind"], r["name"]): r for r in results}
    lines = []
    for kind, name, what in ((GP, EAGER, "GP step eager"), (GP, JIT, "GP step jit"),
                             (FIRST, EAGER, "first-order gradient eager")):
        r = by[(kind, name)]
        head = f"gp target {what} <= {TARGET_RATIO:.0f}x PyTorch eager: "
        if r["ratio_to_torch"] is None:
            lines.append(head + f"not measured (torch not installed; {r['best_ms']:.2f} ms)")
            continue
        ok = "MET" if r["ratio_to_torch"] <= TARGET_RATIO else "MISSED"
        lines.append(head + f"{ok} ({r['ratio_to_torch']:.2f}x: {r['best_ms']:.2f} ms vs "
                     f"{by[(kind, TORCH)]['best_ms']:.2f} ms)")
    peers = "; ".join(f"{_label(r)} {r['ratio_to_torch']:.2f}x" for r in results
                      if r["name"] in (MODULES, JAX, AUTOGRAD) and r["ratio_to_torch"] is not None)
    if peers:
        lines.append(f"gp (no target), ratios to PyTorch eager: {peers}")
    eager = by[(GP, EAGER)]
    if eager["ratio_to_torch_all_cores"] is not None:
        ok = "MET" if eager["ratio_to_torch_all_cores"] <= ALL_CORES_TARGET else "MISSED"
        lines.append(f"gp target GP step eager <= {ALL_CORES_TARGET}x PyTorch eager at all cores ({CORES} threads; "
                     f"meaningful with --threads {CORES}, BLAS now {blas_threads()}): {ok} "
                     f"({eager['ratio_to_torch_all_cores']:.2f}x: {eager['best_ms']:.2f} ms vs "
                     f"{by[(GP, TORCH_ALL)]['best_ms']:.2f} ms)")
    bad = [_label(r) for r in results if r["rel_err"] > 1e-4 or r["dtype"] != "float32"]
    if bad:
        lines.append(f"gp: WRONG results (rel err > 1e-4 or not float32): {', '.join(bad)}")
    return "\n".join(lines)


def main(argv=None):
    return standalone_main(run, table, verdict, argv)


if __name__ == "__main__":
    main()
