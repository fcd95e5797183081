"""Train a small MLP (or, with ``--model cnn``, a small CNN) on scikit-learn's handwritten digits with
tapegrad, MindSpore style.

What it shows:

- a model as a ``tg.nn.Module`` (two ``Dense`` layers, ReLU, float32; or two ``Conv2d`` + ``MaxPool2d``
  blocks and a ``Dense`` classifier);
- ``tg.value_and_grad(loss_fn, grad_position=None, weights=net.trainable_params(), has_aux=True)``:
  ``loss_fn`` returns ``(loss, logits)``, only the loss is differentiated, the logits come back as aux;
- ``tg.optim.Adam(net.trainable_params()).step(grads)`` applying the tuple of gradients;
- ``tg.grad(loss_fn2, grad_position=(0, 1))(x, y)``: gradients with respect to the inputs themselves,
  the images (a saliency map) and the one-hot targets.
- ``with tg.blas_threads(1):``: the BLAS runs on one thread (``--blas-threads N`` to change it). These
  products are small, and BLAS threads cost more than they save on them, all the more on a busy
  machine: the CNN took 4.4 s with one thread and 109 s with OpenBLAS's default on a loaded two-core
  machine (docs/getting_started.md, "BLAS threads").

The data (1,797 8x8 images, bundled with scikit-learn, no download) is scaled to [0, 1] and split
80/20 with a fixed seed. Plots go to ``demo_output/``. Runs in a few seconds on two CPU cores:

    .venv/bin/python examples/train_digits.py               # the MLP (what ``make demo`` runs)
    .venv/bin/python examples/train_digits.py --model cnn   # the CNN, its training step under tg.jit
    .venv/bin/python examples/train_digits.py --save digits.safetensors     # then, to train on from there:
    .venv/bin/python examples/train_digits.py --resume digits.safetensors
    .venv/bin/python examples/train_digits.py --precision float16   # the MLP in float16, loss scaling
    .venv/bin/mpiexec -n 2 .venv/bin/python examples/train_digits.py --distributed   # 2 processes (MPI)
    .venv/bin/python examples/train_digits.py --device gpu  # on an NVIDIA GPU, with CuPy (either model)

With ``--precision float16`` the MLP computes in float16 from float32 master weights, under dynamic
loss scaling (``tg.optim.LossScaler``, MindSpore's ``DynamicLossScaleManager`` defaults).

With ``--device gpu`` the same code runs on CuPy arrays (``pip install 'tapegrad[cuda13]'``, or
``tapegrad[cuda12]``): the data is copied to the GPU once, the parameters are created there
(``tg.set_backend(cupy)``), batches are sliced there, and the loss and accuracy stay there until each
epoch ends, when one copy reads them. :func:`train` takes the array module as an argument, so the
tests run it on the strict device double (tests/_device.py).
"""
from __future__ import annotations

import argparse
import functools
import os
import sys
import time
import types
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only, no display needed
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from sklearn.datasets import load_digits  # noqa: E402
from sklearn.model_selection import train_test_split  # noqa: E402
from tqdm import tqdm  # noqa: E402

import tapegrad as tg  # noqa: E402
import tapegrad.numpy as tnp  # noqa: E402
from tapegrad import nn  # noqa: E402
from tapegrad.nn import functional as F  # noqa: E402

SEED = 0
EPOCHS = 30
BATCH_SIZE = 32
LEARNING_RATE = 2e-3
OUTPUT_DIR = Path(__file__).resolve().parent.parent / "demo_output"
GPU_INSTALL = "pip install 'tapegrad[cuda13]', or 'tapegrad[cuda12]' with a CUDA 12 driver"


class MLP(nn.Module):
    """64 pixels -> 128 hidden units (ReLU) -> 10 class logits."""

    def __init__(self, seed: int):
        super().__init__()
        self.fc1 = nn.Dense(64, 128, activation="relu", seed=seed)
        self.fc2 = nn.Dense(128, 10, seed=seed + 1)

    def __call__(self, x):
        return self.fc2(self.fc1(x))


class CNN(nn.Module):
    """1x8x8 image -> conv 3x3 (16) -> ReLU -> max pool 2 -> conv 3x3 (32) -> ReLU -> max pool 2 -> 10 logits.

    PyTorch's layers and default initialisation; 8x8 -> 4x4 -> 2x2, so the classifier sees 32 * 2 * 2
    features. Takes the flat 64-pixel rows the MLP takes and reshapes them to images.
    """

    def __init__(self, seed: int):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 16, 3, padding=1, seed=seed), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1, seed=seed + 1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Flatten())
        self.classifier = nn.Dense(32 * 2 * 2, 10, seed=seed + 2)

    def __call__(self, x):
        images = tg.numpy.reshape(x, (-1, 1, 8, 8))
        return self.classifier(self.features(images))


MODELS = {"mlp": MLP, "cnn": CNN}


def mlp_float16(net: MLP, x):
    """``net(x)`` computed in float16: the inputs and a float16 copy of each float32 master weight, cast
    with ``tnp.astype`` inside the differentiated function, so the gradients come back in float32."""
    w1, b1, w2, b2 = (tnp.astype(p.value, np.float16) for p in net.trainable_params())
    hidden = F.relu(F.linear(tnp.astype(x, np.float16), w1, b1))
    return F.linear(hidden, w2, b2)  # float16 logits


def load_data():
    digits = load_digits()
    x = (digits.data / 16.0).astype(np.float32)  # pixel values 0..16 -> [0, 1]
    y = digits.target.astype(np.int64)
    return train_test_split(x, y, test_size=0.2, random_state=SEED, stratify=y)


def array_module(device: str):
    """The array module for ``--device``: NumPy for ``cpu``; for ``gpu``, CuPy once it sees a GPU.

    Without CuPy or a GPU it prints one line on stderr and exits with status 2, as argparse does for
    a bad option: the user asked for something this machine lacks, and a traceback would bury the fix.
    """
    if device == "cpu":
        return np
    try:
        import cupy
        if cupy.cuda.runtime.getDeviceCount() < 1:
            raise RuntimeError("CUDA sees no device")
    except Exception as exc:  # ImportError, CUDARuntimeError (no driver, no device), ...: each means "no GPU"
        reason = " ".join(str(exc).split()) or type(exc).__name__  # one line, whatever CUDA's message
        print(f"{os.path.basename(sys.argv[0])}: --device gpu needs CuPy and a CUDA GPU: {GPU_INSTALL} ({reason})",
              file=sys.stderr)
        raise SystemExit(2) from None
    return cupy


def to_host(xp, a) -> np.ndarray:
    """``a`` as a NumPy array: the explicit device-to-host copy (``cupy.asnumpy``); NumPy's own as is."""
    return np.asarray(a) if xp is np else xp.asnumpy(a)


def n_correct(xp, model, x, y):
    """How many rows of ``x`` ``model`` classifies as ``y``: a 0-d array on their device, not yet read."""
    return xp.sum(xp.argmax(model(x), axis=1) == y)


def accuracy(xp, model, x, y) -> float:
    return float(n_correct(xp, model, x, y)) / len(y)


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", choices=sorted(MODELS), default="mlp",
                        help="mlp (default): 64-128-10 Dense layers; cnn: two conv/max-pool blocks")
    parser.add_argument("--device", choices=("cpu", "gpu"), default="cpu",
                        help=f"gpu: train on an NVIDIA GPU with CuPy ({GPU_INSTALL}); the data and the "
                             "parameters live on the GPU")
    parser.add_argument("--save", metavar="PATH",
                        help="save the model and optimizer (and the loss scaler in float16) after training")
    parser.add_argument("--resume", metavar="PATH", help="load the model and optimizer saved by --save first")
    parser.add_argument("--precision", choices=("float32", "float16"), default="float32",
                        help="float16: the MLP computes in float16 from float32 master weights, with dynamic "
                             "loss scaling (tg.optim.LossScaler)")
    parser.add_argument("--blas-threads", type=int, default=1, metavar="N",
                        help="threads of NumPy's BLAS while training (default 1: the products are small, and "
                             "more threads wait for each other; tg.blas_threads)")
    parser.add_argument("--distributed", action="store_true",
                        help="data parallel over the processes mpiexec starts (tapegrad.distributed): each takes "
                             "its share of every batch, the gradients are averaged; needs mpi4py")
    args = parser.parse_args(argv)
    if args.distributed and (args.model != "mlp" or args.precision != "float32"):
        parser.error("--distributed is implemented for the float32 MLP (the CNN's step runs under jit, and "
                     "collectives run outside it)")
    if args.distributed and args.device != "cpu":
        parser.error("--distributed is implemented for --device cpu (the demo has not been run over a "
                     "CUDA-aware MPI)")
    if args.blas_threads < 1:
        parser.error(f"--blas-threads must be at least 1, got {args.blas_threads}")
    if args.precision == "float16" and args.model != "mlp":
        parser.error("--precision float16 is implemented for --model mlp")
    return args


def float16_step(net, optimizer, scaler):
    """The training step in float16 with dynamic loss scaling: the loss (from the logits cast back to
    float32, as mixed-precision training does) is scaled before differentiation; ``scaler.step``
    unscales the gradients and applies Adam unless they overflowed. Returns the step and the list it
    appends to at each skipped step."""
    def loss_fn(x, y):
        logits = mlp_float16(net, x)
        loss = F.cross_entropy(tnp.astype(logits, np.float32), y)
        return scaler.scale(loss), loss, logits

    grad_fn = tg.value_and_grad(loss_fn, grad_position=None, weights=net.trainable_params(), has_aux=True)

    skipped = []

    def train_step(x, y):
        with np.errstate(over="ignore", invalid="ignore"):  # an overflow is expected: the scaler skips that step
            (_, loss, logits), grads = grad_fn(x, y)
        if not scaler.step(optimizer, grads):
            skipped.append(True)
        return loss, logits
    return train_step, skipped


def build(args, xp):
    """The model, Adam and what a checkpoint holds (with the loss scaler in float16), every array of them
    created on ``xp``'s device: the layers' initialisers use the default backend, and Adam's state
    follows the parameters."""
    tg.set_backend(xp)
    net = MODELS[args.model](seed=SEED)
    optimizer = tg.optim.Adam(net.trainable_params(), lr=LEARNING_RATE)
    state = {"model": net, "optimizer": optimizer}  # what a checkpoint holds
    if args.precision == "float16":
        state["loss_scaler"] = tg.optim.LossScaler()  # dynamic: MindSpore's DynamicLossScaleManager defaults
    return net, optimizer, state


def distribute(args, net, optimizer):
    """``(comm, stepper)``: with ``--distributed``, every rank starts from rank 0's weights and each step
    averages the ranks' gradients; otherwise ``(None, optimizer)``."""
    if not args.distributed:
        return None, optimizer
    import tapegrad.distributed as dist
    comm = dist.init()
    dist.broadcast_parameters(net)
    if comm.rank != 0:
        sys.stdout = open(os.devnull, "w")  # rank 0 reports for everyone
    print(f"data parallel over {comm.size} processes (MPI), {BATCH_SIZE // comm.size} examples of each "
          f"batch of {BATCH_SIZE} per process")
    return comm, dist.DistributedOptimizer(optimizer, comm)


def make_step(args, net, stepper, state):
    """``(step, model, skipped)``: the training step ``(x, y) -> (loss, logits)``, what the held-out
    accuracy is measured with, and the list of steps the loss scaler skipped (float16)."""
    def loss_fn(x, y):
        logits = net(x)
        return F.cross_entropy(logits, y), logits

    grad_fn = tg.value_and_grad(loss_fn, grad_position=None, weights=net.trainable_params(), has_aux=True)

    def train_step(x, y):
        (loss, logits), grads = grad_fn(x, y)
        stepper.step(grads)
        return loss, logits

    model, skipped = net, []
    if args.precision == "float16":
        model = functools.partial(mlp_float16, net)
        train_step, skipped = float16_step(net, state["optimizer"], state["loss_scaler"])
    # the CNN's step runs under jit: one staged program per batch shape, Parameters and Adam's state read
    # and written back at each call (the MLP's step stays eager, as the plain MindSpore pattern)
    step = tg.jit(train_step) if args.model == "cnn" else train_step
    return step, model, skipped


def fit(xp, step, model, data, *, epochs: int, comm=None) -> dict:
    """Train for ``epochs`` over ``data`` (on ``xp``'s device), printing a line per epoch; returns the history.

    Batches are sliced on the device, by a device array of indices. The summed loss and the counts of
    correct predictions stay there as 0-d arrays until the epoch ends, when one copy reads them: on a
    GPU, a ``float()`` per batch would make the host wait for the device at every batch.
    """
    x_train, x_test, y_train, y_test = data
    rng = np.random.default_rng(SEED)
    history = {"loss": [], "train_acc": [], "test_acc": []}
    for epoch in range(1, epochs + 1):
        order = xp.asarray(rng.permutation(len(x_train)))  # the same order on every device and rank
        batches = range(0, len(order), BATCH_SIZE)
        total_loss = correct = 0
        with tqdm(batches, desc=f"epoch {epoch:2d}/{epochs}", unit="batch", leave=False,
                  disable=comm is not None and comm.rank != 0) as bar:
            for i in bar:
                idx = order[i:i + BATCH_SIZE]
                if comm is not None:  # the same order on every rank (same seed): this rank's share of the batch
                    idx = np.array_split(idx, comm.size)[comm.rank]
                xb, yb = x_train[idx], y_train[idx]
                loss, logits = step(xb, yb)
                total_loss = total_loss + loss.astype(np.float64) * len(idx)
                correct = correct + xp.sum(xp.argmax(logits, axis=1) == yb)
                if xp is np:  # the running loss costs nothing on the host; on a GPU it would wait at every batch
                    bar.set_postfix(loss=f"{float(loss):.4f}", refresh=False)
        sums = xp.stack([total_loss, correct, n_correct(xp, model, x_test, y_test)])
        total_loss, correct, test_correct = to_host(xp, sums).tolist()  # the epoch's one read from the device
        if comm is not None:  # the whole batch's numbers, from every rank's share
            import tapegrad.distributed as dist
            total_loss, correct = dist.allreduce(np.array([total_loss, correct]), "sum")
        history["loss"].append(total_loss / len(x_train))
        history["train_acc"].append(correct / len(x_train))
        history["test_acc"].append(test_correct / len(x_test))
        print(f"epoch {epoch:2d}: train loss {history['loss'][-1]:.4f}, "
              f"train accuracy {history['train_acc'][-1]:.4f}, held-out accuracy {history['test_acc'][-1]:.4f}")
    return history


def train(args, xp, data, *, epochs: int | None = None) -> types.SimpleNamespace:
    """Build the model on ``xp``'s device, copy ``data`` (``load_data``'s four host arrays) there once,
    train for ``epochs`` (None: ``EPOCHS``), report, and save when ``args.save`` says so.

    ``xp`` is NumPy or CuPy (what ``--device`` chooses), or any module like them: the tests pass the
    strict device double. Returns a namespace: ``net``, ``model`` (what the accuracy is measured
    with), ``history``, ``final_accuracy``, ``comm`` (None unless ``--distributed``) and ``data`` (on
    the device).
    """
    net, optimizer, state = build(args, xp)
    print(f"model: {args.model}")
    print("trainable parameters:", ", ".join(f"{p.name} {p.shape}" for p in net.trainable_params()))
    comm, stepper = distribute(args, net, optimizer)
    data = tuple(xp.asarray(a) for a in data)  # the one host-to-device copy of the data set
    x_test, y_test = data[1], data[3]
    if args.resume:  # all or nothing: a checkpoint of another model or optimizer raises and changes nothing
        tg.load_checkpoint(args.resume, state)
        print(f"resumed model and optimizer from {args.resume} (held-out accuracy "
              f"{accuracy(xp, net, x_test, y_test):.4f}, Adam step {int(optimizer.state.step)})")
    step, model, skipped = make_step(args, net, stepper, state)
    # EPOCHS read at the call, not bound as a default: the tests shorten the run by setting it
    history = fit(xp, step, model, data, epochs=EPOCHS if epochs is None else epochs, comm=comm)

    final_accuracy = accuracy(xp, model, x_test, y_test)
    if args.save and (comm is None or comm.rank == 0):  # one writer; atomic: an interrupted save keeps the old file
        tg.save_checkpoint(state, args.save)
        print(f"saved model and optimizer to {args.save}")
    print(f"final held-out accuracy: {final_accuracy:.4f} ({int(round(final_accuracy * len(y_test)))}"
          f"/{len(y_test)} test images)")
    if args.precision == "float16":
        print(f"float16 with loss scaling: final loss scale {state['loss_scaler'].get_loss_scale():g}, "
              f"{len(skipped)} skipped steps (Adam took {int(optimizer.state.step)})")
    return types.SimpleNamespace(net=net, model=model, history=history, final_accuracy=final_accuracy,
                                 comm=comm, data=data)


def input_gradients(xp, net, data, host_data):
    """Print what the gradients with respect to the inputs say about 8 test images. They are computed
    where the model lives, then copied to the host once for printing and plotting; returns
    ``(x, labels, grad_x, predicted)``, NumPy arrays for the saliency plot."""
    def loss_fn2(x, y):
        return F.cross_entropy(net(x), y)  # y: probabilities (here one-hot), same shape as the logits

    x_test, y_test = data[1], data[3]
    x, labels = host_data[1][:8], host_data[3][:8]  # the same images, on the host
    y = F.one_hot(y_test[:8], 10)  # float32 one-hot targets
    grad_x, grad_y = tg.grad(loss_fn2, grad_position=(0, 1))(x_test[:8], y)
    logits = net(x_test[:8])
    probs = F.softmax(logits)
    grad_x, grad_y, logits, probs = (to_host(xp, a) for a in (grad_x, grad_y, logits, probs))
    print("\ngradients of the loss on 8 test images, tg.grad(loss_fn2, grad_position=(0, 1))(x, y):")
    print(f"  d loss / d x: shape {grad_x.shape}, dtype {grad_x.dtype}  (one 64-pixel saliency map per image)")
    print(f"  d loss / d y: shape {grad_y.shape}, dtype {grad_y.dtype}  (one entry per image and class)")
    saliency = np.linalg.norm(grad_x, axis=1)
    p_true = probs[np.arange(len(x)), labels]
    print("  saliency norm per image |d loss / d x|:", np.array2string(saliency, precision=4))
    print("  probability of the true class:         ", np.array2string(p_true, precision=4))
    print("  (a confident, correct image has a flat loss around it; the least sure one has the largest "
          "saliency)")
    top = np.argsort(np.abs(grad_x[0]))[::-1][:3]
    print(f"  image 0 (a {labels[0]}): its most influential pixels are {[(int(p) // 8, int(p) % 8) for p in top]}"
          " (row, column); changing those moves the loss most")
    # The loss is -sum(y * log_softmax(logits)) / N, so d loss / d y = -log p(class | image) / N >= 0:
    # the entry is smallest at the class the network finds most likely.
    predicted = np.argmax(logits, axis=1)
    from_grad = np.argmin(grad_y, axis=1)
    print("  d loss / d y = -log p(class | image) / 8, so its smallest entry per row is the predicted "
          f"class: {from_grad.tolist()} (predictions {predicted.tolist()}, labels {labels.tolist()})")
    recovered = np.exp(-grad_y * len(x))
    print(f"  exp(-8 * d loss / d y) recovers the softmax probabilities: rows sum to "
          f"{np.array2string(recovered.sum(axis=1), precision=4)}")
    return x, labels, grad_x, predicted


def plot(model_name: str, history: dict, x, labels, grad_x, predicted):
    """The training curves and the saliency maps, as PNG files in OUTPUT_DIR; returns their paths."""
    OUTPUT_DIR.mkdir(exist_ok=True)
    epochs = np.arange(1, len(history["loss"]) + 1)
    fig, (ax_loss, ax_acc) = plt.subplots(1, 2, figsize=(10, 4))
    ax_loss.plot(epochs, history["loss"], marker="o")
    ax_loss.set(xlabel="epoch", ylabel="mean cross-entropy", title="training loss", yscale="log")
    ax_acc.plot(epochs, history["train_acc"], marker="o", label="training")
    ax_acc.plot(epochs, history["test_acc"], marker="s", label="held-out")
    lowest = min(history["train_acc"] + history["test_acc"])
    ax_acc.set(xlabel="epoch", ylabel="accuracy", title="accuracy", ylim=(max(0.0, lowest - 0.02), 1.0))
    ax_acc.legend()
    fig.suptitle(f"tapegrad: {'64-128-10 MLP' if model_name == 'mlp' else 'CNN'} on sklearn digits (Adam)")
    fig.tight_layout()
    path = OUTPUT_DIR / f"digits_training_{model_name}.png"
    fig.savefig(path, dpi=100)
    plt.close(fig)

    fig, axes = plt.subplots(2, 4, figsize=(8, 4.4))
    for k, ax in enumerate(axes.flat[:4]):
        ax.imshow(x[k].reshape(8, 8), cmap="gray_r")
        ax.set_title(f"label {labels[k]}, pred {predicted[k]}", fontsize=9)
    for k, ax in enumerate(axes.flat[4:]):
        limit = np.abs(grad_x[k]).max()
        ax.imshow(grad_x[k].reshape(8, 8), cmap="RdBu_r", vmin=-limit, vmax=limit)
        ax.set_title(f"d loss / d x, image {k}", fontsize=9)
    for ax in axes.flat:
        ax.set_xticks([])
        ax.set_yticks([])
    fig.tight_layout()
    saliency_path = OUTPUT_DIR / f"digits_saliency_{model_name}.png"
    fig.savefig(saliency_path, dpi=100)
    plt.close(fig)
    return path, saliency_path


def describe_gpu(cupy) -> str:
    name = cupy.cuda.runtime.getDeviceProperties(cupy.cuda.Device().id)["name"]
    return f"device: {name.decode() if isinstance(name, bytes) else name} (CuPy {cupy.__version__})"


def main(argv=None) -> None:
    args = parse_args(argv)
    xp = array_module(args.device)  # first: a missing GPU is reported before anything slow runs
    start = time.perf_counter()
    host_data = load_data()
    print(f"digits: {len(host_data[0])} training and {len(host_data[1])} test images of 8x8 = 64 pixels, "
          "10 classes")
    if xp is not np:
        print(describe_gpu(xp))
    print(f"BLAS threads: {args.blas_threads}")
    with tg.blas_threads(args.blas_threads):  # a block, not tg.set_blas_threads: the tests call main() in-process
        run = train(args, xp, host_data)
    if run.comm is not None and run.comm.rank != 0:
        return  # the gradients with respect to the inputs and the plots are rank 0's
    x, labels, grad_x, predicted = input_gradients(xp, run.net, run.data, host_data)
    path, saliency_path = plot(args.model, run.history, x, labels, grad_x, predicted)
    print(f"\nplots saved to {path} and {saliency_path}")
    print(f"total wall time: {time.perf_counter() - start:.1f} s")
    expected = 0.97 if args.model == "cnn" else 0.95
    if run.final_accuracy < expected:
        raise SystemExit(f"held-out accuracy {run.final_accuracy:.4f} is below the expected {expected}")


if __name__ == "__main__":
    main()
