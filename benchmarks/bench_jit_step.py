"""``jit_step``: a whole training step of the digits demo, eager against ``jit``.

The model, data and optimiser of ``examples/train_digits.py``: scikit-learn's digits (8x8 images scaled
to [0, 1], float32; split 80/20 with seed 0), the demo's ``MLP`` (``nn.Dense(64, 128, "relu")`` then
``nn.Dense(128, 10)``), ``F.cross_entropy`` on integer labels, ``tg.optim.Adam(lr=2e-3)``, batches of 32.
One step is the demo's loop body: the loss, its logits (aux) and the gradients with respect to the four
Parameters, then the Adam update of the Parameters; it returns ``(loss, logits)``. Each timed call
trains on the next batch of a fixed shuffle of the training set (the 44 full batches, cycled).

Contestants (each starts from the same initial weights, its own copy):

- ``tapegrad eager``: the demo's body as written, ``grad_fn(x, y)`` then ``optimizer.step(grads)``;
- ``tapegrad jit``: that same body under ``tg.jit``, unchanged. The Parameters, and the optimiser's
  state when it is kept in Parameters (``opt.state_params``), are implicit inputs of the program, and
  their new values are outputs that the call writes back (docs/jit.md); the error column says
  whether it trains as eager does (state kept in a plain Python attribute would be baked into the
  program at the first call);
- ``tapegrad jit, functional Adam state``: the optimiser in its functional style: the Adam state is an
  argument and a result of the jitted step (``opt.update(grads, state, values)``), and the new values
  are written with ``p.assign`` inside;
- ``tapegrad jit, state donated``: the same with ``donate_argnums=(2,)`` (the state's buffers may be reused);
- ``numpy step (hand)``: the forward, the backward and Adam written by hand in NumPy, in place where free;
- ``torch eager step``: ``nn.Linear``/``ReLU``/``nn.Linear``, ``F.cross_entropy``, ``torch.optim.Adam``
  (one intra-op thread, see ``_timing.one_torch_thread``), when installed.

Correctness: before timing, each contestant trains on the same ``CHECK_STEPS`` batches from the same
start; the error column is the worst relative difference of its Parameters from eager tapegrad's
(max |p - p_ref| / max |p_ref|, worst Parameter). Reported: microseconds and steps per second, the
speed-up over eager tapegrad, the ratio to the NumPy step; and the jitted step's first call (staging
plus compiling) beyond a steady call. No target in the issue: it asks for steps per second against
eager (its headline: a jitted step should cost what hand-written NumPy costs, or less).

Run alone: ``python benchmarks/bench_jit_step.py [--quick] [--threads N]``.
"""
from __future__ import annotations

import functools
import importlib.util
import itertools
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _timing import apply_thread_flag, format_table, interleaved, one_torch_thread, standalone_main, try_import  # noqa: E402

if __name__ == "__main__":
    apply_thread_flag(sys.argv)  # before NumPy is imported

import numpy as np  # noqa: E402

import tapegrad as tg  # noqa: E402
from tapegrad._core import Tracer  # noqa: E402
from tapegrad.nn import functional as F  # noqa: E402

EXAMPLES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples")
# the demo's imports: the ``examples`` extra (``pip install -e '.[examples]'``), not the ``bench`` one
MISSING = [name for name in ("sklearn", "matplotlib", "tqdm") if importlib.util.find_spec(name) is None]
CHECK_STEPS = 5
EAGER = "tapegrad eager"
JIT = "tapegrad jit"
NUMPY = "numpy step (hand)"


def load_batches():
    """The demo's training split as the 44 full batches of 32 of one fixed shuffle: ``[(x, y), ...]``."""
    demo = _demo()
    x_train, _, y_train, _ = demo.load_data()
    order = np.random.default_rng(demo.SEED).permutation(len(x_train))
    n = len(order) // demo.BATCH_SIZE * demo.BATCH_SIZE
    return [(np.ascontiguousarray(x_train[order[i:i + demo.BATCH_SIZE]]), y_train[order[i:i + demo.BATCH_SIZE]])
            for i in range(0, n, demo.BATCH_SIZE)]


@functools.cache
def _demo():
    """``examples/train_digits.py`` as a module (imported on first use: it needs the examples extra)."""
    if MISSING:
        raise ImportError(f"bench_jit_step needs {', '.join(MISSING)} (the examples extra: "
                          "pip install -e '.[examples]')")
    sys.path.insert(0, EXAMPLES)
    import train_digits
    return train_digits


# ---- tapegrad ------------------------------------------------------------------------------------
class TapegradTrainer:
    """The demo's network and Adam; ``step(x, y) -> (loss, logits)`` in one of three styles."""

    def __init__(self, style: str):
        demo = _demo()
        self.net = demo.MLP(seed=demo.SEED)
        self.weights = self.net.trainable_params()
        self.optimizer = tg.optim.Adam(self.weights, lr=demo.LEARNING_RATE)
        self.grad_fn = tg.value_and_grad(self._loss, grad_position=None, weights=self.weights, has_aux=True)
        if style == "eager":
            self.step = self._eager_step
        elif style == "stateful jit":
            self.step = tg.jit(self._eager_step)
        else:
            self.state = self.optimizer.state
            donate = (2,) if style == "functional jit, donated" else ()
            self._jitted = tg.jit(self._functional_step, donate_argnums=donate)
            self.step = self._call_functional

    def _loss(self, x, y):
        logits = self.net(x)
        return F.cross_entropy(logits, y), logits

    def _eager_step(self, x, y):
        (loss, logits), grads = self.grad_fn(x, y)
        self.optimizer.step(grads)
        return loss, logits

    def _functional_step(self, x, y, state):
        (loss, logits), grads = self.grad_fn(x, y)
        values = tuple(p.value for p in self.weights)
        new_values, state = self.optimizer.update(grads, state, values)
        for p, value in zip(self.weights, new_values):
            p.assign(value)
        return loss, logits, state

    def _call_functional(self, x, y):
        loss, logits, self.state = self._jitted(x, y, self.state)
        return loss, logits

    def params(self):
        return [np.asarray(p) for p in self.weights]

    def state_leaked(self) -> bool:
        """Whether the stateful optimiser's state holds tracers left over from staging."""
        return any(isinstance(leaf, Tracer) for leaf in tg.tree.tree_leaves(self.optimizer.state))


# ---- hand-written NumPy --------------------------------------------------------------------------
class NumpyTrainer:
    """Forward, backward and Adam (PyTorch's rule, as ``tg.optim.Adam``) written by hand, float32."""

    def __init__(self, init):
        self.p = [np.array(a) for a in init]  # W1 (128, 64), b1, W2 (10, 128), b2
        self.m = [np.zeros_like(a) for a in self.p]
        self.v = [np.zeros_like(a) for a in self.p]
        self.t = 0
        self.lr, self.beta1, self.beta2 = _demo().LEARNING_RATE, 0.9, 0.999

    def step(self, x, y):
        W1, b1, W2, b2 = self.p
        h = x @ W1.T
        h += b1
        np.maximum(h, 0, out=h)
        logits = h @ W2.T
        logits += b2
        z = logits - logits.max(axis=1, keepdims=True)
        e = np.exp(z)
        s = e.sum(axis=1, keepdims=True)
        rows = np.arange(len(y))
        loss = np.mean(np.log(s[:, 0]) - z[rows, y])
        d = e / s  # d loss / d logits = (softmax - onehot) / batch
        d[rows, y] -= 1.0
        d *= np.float32(1.0 / len(y))
        dh = d @ W2
        dh *= h > 0
        self._adam([dh.T @ x, dh.sum(axis=0), d.T @ h, d.sum(axis=0)])
        return loss, logits

    def _adam(self, grads):
        self.t += 1
        step_size = self.lr / (1.0 - self.beta1 ** self.t)
        correction2 = np.sqrt(1.0 - self.beta2 ** self.t)
        for p, g, m, v in zip(self.p, grads, self.m, self.v):
            m *= self.beta1
            m += (1.0 - self.beta1) * g
            v *= self.beta2
            v += (1.0 - self.beta2) * (g * g)
            denom = np.sqrt(v)
            denom /= correction2
            denom += 1e-8
            p -= step_size * (m / denom)

    def params(self):
        return self.p


# ---- peers ---------------------------------------------------------------------------------------
class TorchTrainer:
    """The same network in PyTorch eager with ``torch.optim.Adam``."""

    def __init__(self, torch, init):
        self.torch = torch
        self.model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10))
        with torch.no_grad():
            for p, a in zip(self.model.parameters(), init):
                p.copy_(torch.from_numpy(np.asarray(a)))
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=_demo().LEARNING_RATE)

    def step(self, x, y):
        self.optimizer.zero_grad(set_to_none=True)
        logits = self.model(self.torch.from_numpy(x))
        loss = self.torch.nn.functional.cross_entropy(logits, self.torch.from_numpy(y))
        loss.backward()
        self.optimizer.step()
        return loss.detach().numpy(), logits.detach().numpy()

    def params(self):
        return [p.detach().numpy() for p in self.model.parameters()]


def contestants():
    """name -> a zero-argument factory of a fresh trainer (``.step(x, y)``, ``.params()``)."""
    init = TapegradTrainer("eager").params()
    out = {
        EAGER: lambda: TapegradTrainer("eager"),
        JIT: lambda: TapegradTrainer("stateful jit"),
        "tapegrad jit, functional Adam state": lambda: TapegradTrainer("functional jit"),
        "tapegrad jit, state donated": lambda: TapegradTrainer("functional jit, donated"),
        NUMPY: lambda: NumpyTrainer(init),
    }
    torch = try_import("torch")
    if torch is not None:
        out["torch eager step"] = lambda: TorchTrainer(torch, init)
    return out


def check(trainers, batches):
    """name -> worst relative difference of the Parameters from eager tapegrad's after ``CHECK_STEPS``
    steps (each trainer fresh), and the first call's seconds."""
    finals, first = {}, {}
    for name, trainer in trainers.items():
        t0 = time.perf_counter()
        trainer.step(*batches[0])
        first[name] = time.perf_counter() - t0
        for x, y in batches[1:CHECK_STEPS]:
            trainer.step(x, y)
        finals[name] = [np.asarray(p, np.float64) for p in trainer.params()]
    ref = finals[EAGER]
    errors = {name: max(float(np.max(np.abs(p - r)) / np.max(np.abs(r))) for p, r in zip(ps, ref))
              for name, ps in finals.items()}
    return errors, first


def cycling(trainer, batches):
    """A zero-argument call: ``trainer.step`` on the next batch, cycling."""
    it = itertools.cycle(batches)

    def call():
        return trainer.step(*next(it))
    return call


def run(quick: bool = False):
    batches = load_batches()
    restore = one_torch_thread()
    try:
        trainers = {name: make() for name, make in contestants().items()}
        errors, first = check(trainers, batches)
        leaked = trainers[JIT].state_leaked()
        timings = interleaved({name: cycling(t, batches) for name, t in trainers.items()},
                              repeat=3 if quick else 9, target_s=0.05 if quick else 0.1)
    finally:
        restore()
    eager, numpy_ = timings[EAGER].best, timings[NUMPY].best
    results = []
    for name in trainers:
        t = timings[name]
        results.append({
            "bench": "jit_step", "name": name, "best_us": t.best * 1e6, "median_us": t.median * 1e6,
            "steps_per_s": 1.0 / t.best, "speedup_over_eager": eager / t.best, "ratio_to_numpy": t.best / numpy_,
            "first_call_extra_ms": (first[name] - t.best) * 1e3 if name.startswith("tapegrad jit") else None,
            "rel_err": errors[name], "state_leaked": leaked if name == JIT else None,
        })
    return results


def table(results) -> str:
    rows = []
    for r in results:
        first = "" if r["first_call_extra_ms"] is None else f"{r['first_call_extra_ms']:.1f}"
        rows.append([r["name"], f"{r['best_us']:.0f}", f"{r['median_us']:.0f}", f"{r['steps_per_s']:,.0f}",
                     f"{r['speedup_over_eager']:.2f}x", f"{r['ratio_to_numpy']:.2f}x", first, f"{r['rel_err']:.1e}"])
    return format_table(["digits step 64-128-10, B=32, Adam", "us best", "us median", "steps/s", "vs eager",
                         "vs numpy", "1st call +ms", "rel err"], rows)


def compact_rows(results):
    """Rows for ``run.py``'s table: bench, contestant, time, ratio, to, note, rel err, dtype."""
    return [["jit_step", r["name"], f"{r['best_us']:.0f} us", f"{r['speedup_over_eager']:.2f}x", "eager (speed-up)",
             f"{r['steps_per_s']:,.0f} steps/s", f"{r['rel_err']:.1e}", ""] for r in results]


def verdict(results) -> str:
    by = {r["name"]: r for r in results}
    jit, eager = by[JIT], by[EAGER]
    line = (f"jit_step (no target): jit {jit['steps_per_s']:,.0f} steps/s against eager "
            f"{eager['steps_per_s']:,.0f} ({jit['speedup_over_eager']:.2f}x faster), "
            f"{jit['ratio_to_numpy']:.2f}x the NumPy step's time; first call +{jit['first_call_extra_ms']:.1f} ms")
    if jit["rel_err"] > 1e-5 or jit["state_leaked"]:
        line += (f"\njit_step: optimizer.step inside jit does NOT train as eager (rel err {jit['rel_err']:.1e}"
                 f"{'; opt.state holds tracers after staging' if jit['state_leaked'] else ''})")
    return line


def main(argv=None):
    return standalone_main(run, table, verdict, argv)


if __name__ == "__main__":
    main()
