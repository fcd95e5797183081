"""``sin10``: the tenth derivative of ``sin`` on a (2, 2) float64 input, eager.

``sin`` is elementwise, so ``grad`` of the sum of its derivative is the next derivative, elementwise:
``d10 = grad(lambda x: sum(grad(lambda x: sum(... grad(lambda x: sum(sin(x))) ...)(x)))``, ten
``grad`` levels nested, each one tracing the one inside it (the whole thing is one call: a forward pass
through ten tapes, then ten backward passes, each recorded by the tapes outside it). The result must
be ``sin(x + 5 pi) = -sin(x)``.

Contestants:

- ``tapegrad grad x10``: the nesting above (``tg.grad`` and ``tnp.sum``); ``tapegrad grad x1`` is one
  level, for scale (the fixed price of one ``grad`` call on a tiny input);
- ``tapegrad jvp x10``: forward mode nested the same way, ``d(x) = jvp(d_prev, (x,), (ones,))[1]``. Eager
  forward mode cannot drop work the output does not need, and each level differentiates both the
  primal and the tangent program of the level inside it, so the work doubles per level (about 2,800
  NumPy calls at ten levels, against 29 for the nested ``grad``); it is timed with fewer repeats;
- ``autograd`` (``elementwise_grad`` nested ten times), PyTorch eager (``torch.autograd.grad`` ten times
  on one graph with ``create_graph=True``, the usual PyTorch spelling) and ``torch.func.grad`` nested ten
  times of a sum, when installed. PyTorch runs with one intra-op thread here (the tensors are tiny;
  ``_timing.one_torch_thread`` says why two would hurt on a 2-core machine);
- ``numpy -sin(x)``: the closed form, the floor.

Target (issue 3): tapegrad's nested ``grad`` <= 300 us per call.

Run alone: ``python benchmarks/bench_sin10.py [--quick]``.
"""
from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _timing import apply_thread_flag, format_table, interleaved, one_torch_thread, standalone_main, try_import  # noqa: E402

if __name__ == "__main__":
    apply_thread_flag(sys.argv)  # before NumPy is imported

import numpy as np  # noqa: E402

import tapegrad as tg  # noqa: E402
import tapegrad.numpy as tnp  # noqa: E402

ORDER = 10
TARGET_US = 300.0
TAPEGRAD = f"tapegrad grad x{ORDER}"
SLOW = (f"tapegrad jvp x{ORDER}",)  # timed apart, with fewer repeats


def make_input():
    return np.array([[0.1, 0.7], [-1.2, 2.0]], dtype=np.float64)


# ---- tapegrad ------------------------------------------------------------------------------------
def nested_grad(f, order):
    """``f``'s ``order``-th derivative, elementwise, by ``grad`` of the sum, nested."""
    for _ in range(order):
        f = (lambda inner: tg.grad(lambda x: tnp.sum(inner(x))))(f)
    return f


def nested_jvp(f, order):
    """``f``'s ``order``-th derivative, elementwise, by ``jvp`` with a tangent of ones, nested."""
    for _ in range(order):
        f = (lambda inner: lambda x: tg.jvp(inner, (x,), (tnp.ones_like(x),))[1])(f)
    return f


# ---- peers ---------------------------------------------------------------------------------------
def make_autograd(autograd):
    f = autograd.numpy.sin
    for _ in range(ORDER):
        f = autograd.elementwise_grad(f)
    return f


def make_torch(torch):
    import torch.func

    def create_graph(x_np):
        x = torch.from_numpy(x_np).requires_grad_(True)
        y = torch.sin(x)
        for k in range(ORDER):
            (y,) = torch.autograd.grad(y.sum(), x, create_graph=k < ORDER - 1)
        return y.numpy()

    f = torch.sin
    for _ in range(ORDER):
        f = (lambda inner: torch.func.grad(lambda x: inner(x).sum()))(f)
    return create_graph, lambda x_np: f(torch.from_numpy(x_np)).numpy()


def contestants():
    out = {
        TAPEGRAD: nested_grad(tnp.sin, ORDER),
        "tapegrad grad x1": nested_grad(tnp.sin, 1),
        f"tapegrad jvp x{ORDER}": nested_jvp(tnp.sin, ORDER),
        "numpy -sin(x) (closed form)": lambda x: -np.sin(x),
    }
    autograd = try_import("autograd")
    if autograd is not None:
        try_import("autograd.numpy")
        out[f"autograd elementwise_grad x{ORDER}"] = make_autograd(autograd)
    torch = try_import("torch")
    if torch is not None:
        create_graph, func_grad = make_torch(torch)
        out[f"torch autograd.grad x{ORDER} (create_graph)"] = create_graph
        out[f"torch.func.grad x{ORDER}"] = func_grad
    return out


def check(cands, x):
    """name -> (max abs error against the exact derivative, dtype)."""
    report = {}
    for name, fn in cands.items():
        exact = np.cos(x) if name == "tapegrad grad x1" else -np.sin(x)
        out = np.asarray(fn(x))
        report[name] = (float(np.max(np.abs(out - exact))), str(out.dtype))
    return report



def run(quick: bool = False):
    """Time every contestant; returns a list of result dicts (one per contestant)."""
    x = make_input()
    cands = contestants()
    restore = one_torch_thread()
    try:
        checks = check(cands, x)
        timings = interleaved({name: (lambda fn=fn: fn(x)) for name, fn in cands.items() if name not in SLOW},
                              repeat=3 if quick else 9, target_s=0.03 if quick else 0.1)
        timings.update(interleaved({name: (lambda fn=cands[name]: fn(x)) for name in SLOW},
                                   repeat=2 if quick else 5, warmup=1, number=1))
    finally:
        restore()
    results = []
    for name in cands:
        t = timings[name]
        err, dtype = checks[name]
        results.append({"bench": "sin10", "name": name, "best_us": t.best * 1e6, "median_us": t.median * 1e6,
                        "ratio_to_target": t.best * 1e6 / TARGET_US, "abs_err": err, "dtype": dtype})
    return results


def _time(us: float) -> str:
    return f"{us / 1e3:.2f} ms" if us >= 1e4 else f"{us:.1f} us"


def table(results) -> str:
    rows = [[r["name"], _time(r["best_us"]), _time(r["median_us"]), f"{r['ratio_to_target']:.2f}x",
             f"{r['abs_err']:.1e}", r["dtype"]] for r in results]
    return format_table([f"sin10: d^{ORDER}/dx^{ORDER} sin(x), x f64 (2, 2)", "best", "median",
                         f"vs {TARGET_US:.0f} us", "abs err", "dtype"], rows)


def compact_rows(results):
    """Rows for ``run.py``'s table: bench, contestant, time, ratio, to, note, error, dtype."""
    return [["sin10", r["name"], _time(r["best_us"]), f"{r['ratio_to_target']:.2f}x", "target 300 us", "",
             f"{r['abs_err']:.1e}", r["dtype"]] for r in results]


def verdict(results) -> str:
    us = next(r for r in results if r["name"] == TAPEGRAD)["best_us"]
    ok = "MET" if us <= TARGET_US else "MISSED"
    return f"sin10 target tapegrad nested grad <= {TARGET_US:.0f} us: {ok} ({us:.0f} us)"


def main(argv=None):
    return standalone_main(run, table, verdict, argv)


if __name__ == "__main__":
    main()
