"""The wheel's smoke test: ``make dist`` installs the built wheel (with its ``checkpoint`` extra) into a
fresh virtual environment and runs this script with that environment's Python, from an empty temporary
folder, so that nothing can come from ``src/``.

    python tests/smoke_wheel.py                # in the fresh environment: tapegrad must be installed there
    python tests/smoke_wheel.py --from-source  # anywhere (tests/test_packaging.py runs it so in make test)

It checks where tapegrad was imported from, its version and package data (``py.typed``, the coverage
reference), and real numbers: ``grad`` by position and by ``weights``, ``jit``, ``vmap`` and a checkpoint
round trip, each against a closed form. It imports only tapegrad, NumPy and the standard library.
"""
from __future__ import annotations

import importlib.metadata
import importlib.resources
import json
import pathlib
import sys
import tempfile

import numpy as np


def check_installed(tg) -> None:
    """tapegrad comes from this environment's site-packages, not from a source tree on the path."""
    here = pathlib.Path(tg.__file__).resolve()
    prefix = pathlib.Path(sys.prefix).resolve()
    assert prefix in here.parents, f"tapegrad was imported from {here}, not from the environment at {prefix}"
    assert "site-packages" in here.parts, here
    assert not any(pathlib.Path(p or ".").resolve().joinpath("tapegrad").is_dir() for p in sys.path
                   if prefix not in pathlib.Path(p or ".").resolve().parents), "a source tree is on sys.path"


def check_metadata(tg) -> None:
    assert tg.__version__ == importlib.metadata.version("tapegrad"), tg.__version__
    package = importlib.resources.files("tapegrad")
    assert (package / "py.typed").is_file(), "py.typed is not in the installed package"
    reference = json.loads((package / "coverage_reference.json").read_text())
    assert len(reference["names"]["tapegrad.numpy"]) > 300 and "jax" in reference["generated_with"]


def check_numbers(tg) -> None:
    tnp = tg.numpy
    # grad by position: f(x, y) = sum(sin(x) * y), df/dx = cos(x) * y, df/dy = sin(x)
    x, y = np.array([0.1, 0.5, 2.0]), np.array([3.0, -1.0, 0.25])
    f = lambda x, y: tnp.sum(tnp.sin(x) * y)
    gx, gy = tg.grad(f, grad_position=(0, 1))(x, y)
    np.testing.assert_allclose(gx, np.cos(x) * y, rtol=1e-12)
    np.testing.assert_allclose(gy, np.sin(x), rtol=1e-12)
    # grad of grad: d2/dx2 of x**3 at 2 is 12
    assert abs(float(tg.grad(tg.grad(lambda x: x**3))(2.0)) - 12.0) < 1e-12
    # grad by weights: loss(w, b) = sum((x @ w + b)**2) over Parameters
    w, b = tg.Parameter(np.array([[1.0], [2.0]]), name="w"), tg.Parameter(np.array([0.5]), name="b")
    xs = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    loss = lambda xs: tnp.sum((xs @ w + b) ** 2)
    gw, gb = tg.grad(loss, grad_position=None, weights=(w, b))(xs)
    residual = xs @ w.value + b.value
    np.testing.assert_allclose(gw, 2 * xs.T @ residual, rtol=1e-12)
    np.testing.assert_allclose(gb, 2 * residual.sum(0), rtol=1e-12)
    # jit: the same values as eager, and the jitted gradient too
    g = tg.jit(tg.grad(f))
    np.testing.assert_allclose(g(x, y), np.cos(x) * y, rtol=1e-12)
    np.testing.assert_allclose(g(2 * x, y), np.cos(2 * x) * y, rtol=1e-12)
    # vmap: one gradient per row of the batch
    per_row = tg.vmap(tg.grad(lambda v: tnp.sum(v**2)))(np.arange(6.0).reshape(3, 2))
    np.testing.assert_array_equal(per_row, 2 * np.arange(6.0).reshape(3, 2))


def check_checkpoint(tg) -> None:
    """A model and its optimiser saved and loaded into fresh ones (safetensors, the checkpoint extra)."""
    net = tg.nn.Dense(3, 2, seed=0)
    opt = tg.optim.Adam(net.trainable_params(), lr=0.1)
    x = np.ones((4, 3), np.float32)
    step = lambda: opt(tg.grad(lambda x: tg.numpy.sum(net(x) ** 2), grad_position=None,
                               weights=net.trainable_params())(x))
    step()
    with tempfile.TemporaryDirectory() as folder:
        path = pathlib.Path(folder) / "step1.safetensors"
        tg.save_checkpoint({"model": net, "optimizer": opt}, path)
        other = tg.nn.Dense(3, 2, seed=1)
        other_opt = tg.optim.Adam(other.trainable_params(), lr=0.1)
        tg.load_checkpoint(path, {"model": other, "optimizer": other_opt})
    np.testing.assert_array_equal(other.weight.value, net.weight.value)
    # the restored optimiser continues exactly as the original does
    step()
    other_opt(tg.grad(lambda x: tg.numpy.sum(other(x) ** 2), grad_position=None,
                      weights=other.trainable_params())(x))
    np.testing.assert_array_equal(other.weight.value, net.weight.value)
    np.testing.assert_array_equal(other.bias.value, net.bias.value)


def main(argv: list[str]) -> None:
    import tapegrad as tg

    if "--from-source" not in argv:
        check_installed(tg)
    check_metadata(tg)
    check_numbers(tg)
    check_checkpoint(tg)
    print(f"smoke test passed: tapegrad {tg.__version__} from {pathlib.Path(tg.__file__).parent}")


if __name__ == "__main__":
    main(sys.argv[1:])
