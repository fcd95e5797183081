"""``tg.save``/``tg.load`` and ``tg.save_checkpoint``/``tg.load_checkpoint``: round trips through safetensors
files, every refusal (each leaving the file and the module as they were), atomic saves (an exception
mid-save, a process killed mid-save), and files written by other tools."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
import zlib
from typing import NamedTuple

import numpy as np
import optree
import pytest

import tapegrad as tg
from _device import DeviceArray
from tapegrad import nn, optim

st = pytest.importorskip("safetensors.numpy", reason="tg.save needs safetensors (pip install tapegrad[checkpoint])")


def assert_same_tree(got, want):
    """Same containers (types and keys), and leaves equal bit for bit in value, shape and dtype."""
    got_leaves, got_def = optree.tree_flatten(got, namespace="tapegrad")
    want_leaves, want_def = optree.tree_flatten(want, namespace="tapegrad")
    assert got_def == want_def
    for g, w in zip(got_leaves, want_leaves):
        w = np.asarray(w)
        assert isinstance(g, np.ndarray) and g.dtype == w.dtype and g.shape == w.shape
        assert np.array_equal(g, w, equal_nan=w.dtype.kind == "f")


def leftovers(folder) -> list:
    return sorted(p.name for p in folder.iterdir() if p.name.endswith(".tmp"))


class Net(nn.Module):
    """Dense -> BatchNorm1d -> Dropout -> Dense: trainable weights, running statistics and a key."""

    def __init__(self, seed: int):
        super().__init__()
        self.fc1 = nn.Dense(4, 6, seed=seed)
        self.bn = nn.BatchNorm1d(6)
        self.drop = nn.Dropout(0.3, seed=seed + 1)
        self.fc2 = nn.Dense(6, 3, seed=seed + 2)

    def __call__(self, x):
        return self.fc2(self.drop(self.bn(self.fc1(x))))


def snapshot(obj) -> dict:
    return {k: np.array(v) for k, v in obj.state_dict().items()}


def assert_unchanged(obj, before: dict):
    after = snapshot(obj)
    assert after.keys() == before.keys()
    for k in before:
        assert after[k].dtype == before[k].dtype and np.array_equal(after[k], before[k]), k


X = np.random.default_rng(0).standard_normal((5, 4)).astype(np.float32)


def trained(seed: int = 0):
    """A Net and its Adam after three training steps: moved weights, moments, statistics and key."""
    net = Net(seed)
    opt = optim.Adam(net.trainable_params(), lr=1e-2)
    grad_fn = tg.grad(lambda x: (net(x) ** 2).mean(), grad_position=None, weights=net.trainable_params())
    for _ in range(3):
        opt.step(grad_fn(X))
    return net, opt


# ---- round trips ---------------------------------------------------------------------------------
def test_nested_tree_round_trips_with_every_dtype(tmp_path):
    rng = np.random.default_rng(1)
    tree = {
        "floats": [rng.standard_normal((2, 3)).astype(d) for d in (np.float16, np.float32, np.float64)],
        "ints": tuple(np.arange(-3, 3, dtype=d) for d in (np.int8, np.int16, np.int32, np.int64)),
        "uints": {"u8": np.arange(4, dtype=np.uint8), "u64": np.array([2**63 + 5], np.uint64)},
        "mask": rng.standard_normal(7) > 0,
        "scalar": np.array(2.5, np.float32),
        "empty": {},
        "nothing": None,
        "no_rows": np.zeros((0, 3), np.float32),
        "special": np.array([np.inf, -np.inf, np.nan, -0.0], np.float32),
    }
    tg.save(tmp_path / "t.safetensors", tree)
    assert_same_tree(tg.load(tmp_path / "t.safetensors"), tree)
    assert leftovers(tmp_path) == []


def test_scalars_parameters_and_memory_layouts_are_stored_as_arrays(tmp_path):
    fortran = np.asfortranarray(np.arange(6.0).reshape(2, 3))
    big_endian = np.arange(4, dtype=">i4")
    tree = [3, 0.5, True, np.float16(1.5), tg.Parameter(np.ones((2, 2), np.float32)), fortran, big_endian[::-1]]
    tg.save(tmp_path / "s.safetensors", tree)
    got = tg.load(tmp_path / "s.safetensors")
    want = [np.array(3), np.array(0.5), np.array(True), np.array(1.5, np.float16), np.ones((2, 2), np.float32),
            fortran, np.array([3, 2, 1, 0], np.int32)]
    assert_same_tree(got, want)


def test_a_bare_array_and_an_empty_tree(tmp_path):
    tg.save(tmp_path / "a", np.arange(3.0))
    assert_same_tree(tg.load(tmp_path / "a"), np.arange(3.0))
    tg.save(tmp_path / "e", {})
    assert tg.load(tmp_path / "e") == {}


def test_keys_are_dotted_paths_readable_without_tapegrad(tmp_path):
    tree = {"fc1": {"weight": np.ones((2, 2)), "bias": np.zeros(2)}, "layers": [np.ones(1), (np.ones(2),)]}
    tg.save(tmp_path / "k", tree)
    flat = st.load_file(tmp_path / "k")  # safetensors alone, as PyTorch or Hugging Face read it
    assert sorted(flat) == ["fc1.bias", "fc1.weight", "layers.0", "layers.1.0"]
    assert np.array_equal(flat["layers.1.0"], np.ones(2))


def test_device_arrays_are_copied_to_the_host_explicitly(tmp_path):
    value = np.arange(6, dtype=np.float32).reshape(2, 3)
    tg.save(tmp_path / "d", {"w": DeviceArray(value.copy()), "p": tg.Parameter(DeviceArray(value + 1))})
    assert_same_tree(tg.load(tmp_path / "d"), {"w": value, "p": value + 1})


def test_a_module_state_loads_into_a_fresh_module_with_identical_outputs(tmp_path):
    net, _ = trained()
    tg.save(tmp_path / "net", net.state_dict())
    fresh = Net(seed=42)
    assert not np.array_equal(fresh.fc1.weight, net.fc1.weight)
    fresh.load_state_dict(tg.load(tmp_path / "net"))
    assert_unchanged(fresh, snapshot(net))  # weights, running statistics, batch count and dropout key
    for model in (net, fresh):
        model.train()
    assert np.array_equal(fresh(X), net(X))  # the same dropout mask, from the same key
    assert np.array_equal(fresh(X), net(X))  # and the keys advance alike
    for model in (net, fresh):
        model.eval()
    assert np.array_equal(fresh(X), net(X))  # running statistics


def test_an_optimizer_state_resumes_the_same_updates(tmp_path):
    net, opt = trained()
    tg.save(tmp_path / "opt", opt.state_dict())
    twin = Net(seed=0)
    twin.load_state_dict(net.state_dict())
    twin_opt = optim.Adam(twin.trainable_params(), lr=1e-2)
    twin_opt.load_state_dict(tg.load(tmp_path / "opt"))
    assert int(twin_opt.state.step) == 3
    g = tuple(np.full(p.shape, 0.1, p.dtype) for p in net.trainable_params())
    opt.step(g)
    twin_opt.step(g)
    assert_unchanged(twin, snapshot(net))


# ---- checkpoints ---------------------------------------------------------------------------------
def test_save_checkpoint_of_a_model_and_its_optimizer(tmp_path):
    net, opt = trained()
    tg.save_checkpoint({"model": net, "optimizer": opt}, tmp_path / "ckpt")
    new_net = Net(seed=7)
    new_opt = optim.Adam(new_net.trainable_params(), lr=1e-2)
    flat = tg.load_checkpoint(tmp_path / "ckpt", net={"model": new_net, "optimizer": new_opt})
    assert "model.fc1.weight" in flat and "optimizer.adam.step" in flat and "model.drop.key" in flat
    assert_unchanged(new_net, snapshot(net))
    assert_unchanged(new_opt, snapshot(opt))
    # tg.load gives the same file back as a tree: one state dict per object
    tree = tg.load(tmp_path / "ckpt")
    assert sorted(tree) == ["model", "optimizer"] and np.array_equal(tree["model"]["fc1.weight"], net.fc1.weight)


def test_save_checkpoint_of_one_module_and_of_a_list(tmp_path):
    net, opt = trained()
    tg.save_checkpoint(net, tmp_path / "one")
    assert sorted(tg.load_checkpoint(tmp_path / "one")) == sorted(net.state_dict())
    tg.save_checkpoint([net, opt], tmp_path / "two")
    a = Net(seed=3)
    b = optim.Adam(a.trainable_params(), lr=1e-2)
    tg.load_checkpoint(tmp_path / "two", [a, b])
    assert_unchanged(a, snapshot(net))
    assert_unchanged(b, snapshot(opt))


def test_save_checkpoint_of_a_plain_tree_and_non_strict_loading(tmp_path):
    net, _ = trained()
    tg.save_checkpoint({"model": net, "epoch": np.array(4)}, tmp_path / "c")
    assert int(tg.load_checkpoint(tmp_path / "c")["epoch"]) == 4
    with pytest.raises(KeyError, match="epoch"):
        tg.load_checkpoint(tmp_path / "c", {"model": Net(seed=1)})
    fresh = Net(seed=1)
    tg.load_checkpoint(tmp_path / "c", {"model": fresh}, strict=False)
    assert_unchanged(fresh, snapshot(net))


def test_a_file_written_without_tapegrad_loads_as_a_flat_dict(tmp_path):
    """NumPy reference for the PyTorch interop test below: a plain safetensors file, no tapegrad metadata."""
    net = Net(seed=0)
    st.save_file({k: np.array(v) for k, v in net.state_dict().items()}, tmp_path / "plain")
    flat = tg.load(tmp_path / "plain")
    assert isinstance(flat, dict) and sorted(flat) == sorted(net.state_dict())
    fresh = Net(seed=9)
    tg.load_checkpoint(tmp_path / "plain", fresh)
    assert_unchanged(fresh, snapshot(net))


@pytest.mark.peer("torch")
def test_a_file_written_by_pytorch_loads():
    import tempfile

    import safetensors.torch as safetensors_torch
    import torch
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "torch.safetensors")
        linear = torch.nn.Linear(4, 3)
        safetensors_torch.save_file({k: v.detach().contiguous() for k, v in linear.state_dict().items()}, path)
        layer = nn.Dense(4, 3, seed=5)
        tg.load_checkpoint(path, layer)
        x = np.random.default_rng(2).standard_normal((2, 4)).astype(np.float32)
        want = linear(torch.from_numpy(x)).detach().numpy()
    assert np.array_equal(np.asarray(layer.weight), linear.weight.detach().numpy())
    np.testing.assert_allclose(layer(x), want, rtol=1e-6, atol=1e-6)  # the same layer, PyTorch's layout


# ---- refusals: nothing changes -------------------------------------------------------------------
class Pair(NamedTuple):
    a: object
    b: object


@pytest.mark.parametrize(("tree", "error", "match"), [
    ({"w": np.ones(2), "name": "fc"}, TypeError, "'name' is a str, not an array"),
    ({"w": [np.ones(2), object()]}, TypeError, "'w.1' is a object"),
    ({1: np.ones(2)}, TypeError, "key 1 of type int"),
    ({"p": Pair(np.ones(1), np.ones(1))}, TypeError, "'p' is a Pair"),
    ({"a.b": np.ones(1), "a": {"b": np.zeros(1)}}, ValueError, "key 'a.b'"),
    ({"z": np.ones(2, np.complex64)}, ValueError, "'z' has dtype complex64"),
    ({"q": np.ones(2, np.longdouble)}, ValueError, "'q' has dtype"),
])
def test_what_cannot_be_stored_is_refused_and_the_old_file_kept(tmp_path, tree, error, match):
    if error is ValueError and "'q'" in match and np.dtype(np.longdouble) == np.float64:
        pytest.skip("long double is float64 on this platform")
    path = tmp_path / "keep"
    tg.save(path, {"old": np.arange(3)})
    before = path.read_bytes()
    with pytest.raises(error, match=match):
        tg.save(path, tree)
    assert path.read_bytes() == before and leftovers(tmp_path) == []


def test_a_traced_value_is_refused():
    def f(x):
        tg.save("never-written", {"x": x})
        return x.sum()
    with pytest.raises(TypeError, match="traced value cannot be saved"):
        tg.grad(f)(np.ones(2))
    assert not os.path.exists("never-written")


def test_missing_truncated_and_corrupted_files(tmp_path):
    with pytest.raises(FileNotFoundError, match="nothing-here"):
        tg.load(tmp_path / "nothing-here")
    path = tmp_path / "good"
    tg.save(path, {"w": np.arange(100, dtype=np.float32)})
    data = path.read_bytes()
    (tmp_path / "cut").write_bytes(data[:-10])
    with pytest.raises(ValueError, match="cut.*truncated or corrupted"):
        tg.load(tmp_path / "cut")
    (tmp_path / "garbage").write_bytes(b"\x07" * 64)
    with pytest.raises(ValueError, match="garbage"):
        tg.load(tmp_path / "garbage")
    flipped = bytearray(data)
    flipped[-5] ^= 0xFF  # inside the array's bytes: the header still parses, the checksum catches it
    (tmp_path / "flipped").write_bytes(bytes(flipped))
    with pytest.raises(ValueError, match="flipped.*corrupted.*'w'"):
        tg.load(tmp_path / "flipped")
    net = Net(seed=0)
    before = snapshot(net)
    with pytest.raises(ValueError, match="flipped"):
        tg.load_checkpoint(tmp_path / "flipped", net)
    assert_unchanged(net, before)


def _mismatched(state: dict, how: str) -> dict:
    state = {k: np.array(v) for k, v in state.items()}
    if how == "missing":
        del state["fc2.bias"]
    elif how == "unexpected":
        state["fc3.weight"] = np.ones(2, np.float32)
    elif how == "shape":
        state["fc2.bias"] = np.ones(4, np.float32)
    elif how == "dtype":
        state["fc2.bias"] = state["fc2.bias"].astype(np.float64)
    return state


@pytest.mark.parametrize(("how", "error", "match"), [
    ("missing", KeyError, r"missing keys \['fc2.bias'\]"),
    ("unexpected", KeyError, r"unexpected keys \['fc3.weight'\]"),
    ("shape", ValueError, r"'fc2.bias' has shape \(4,\)"),
    ("dtype", ValueError, "'fc2.bias' has dtype float64.*cast=True"),
])
def test_a_mismatched_checkpoint_changes_neither_model_nor_optimizer(tmp_path, how, error, match):
    source, source_opt = trained(seed=0)
    tg.save_checkpoint({"model": _mismatched(source.state_dict(), how), "optimizer": source_opt}, tmp_path / "c")
    net, opt = trained(seed=4)
    before, before_opt = snapshot(net), snapshot(opt)
    with pytest.raises(error, match=match):
        tg.load_checkpoint(tmp_path / "c", {"model": net, "optimizer": opt})
    assert_unchanged(net, before)
    assert_unchanged(opt, before_opt)


def test_a_bad_optimizer_part_leaves_the_model_unchanged_too(tmp_path):
    """The model's part is valid and checked first; the optimizer's is not: nothing is assigned."""
    net, opt = trained(seed=0)
    state = {k: np.array(v) for k, v in opt.state_dict().items()}
    state["adam.step"] = np.zeros(2, np.int32)
    tg.save_checkpoint({"model": net, "optimizer": state}, tmp_path / "c")
    other, other_opt = trained(seed=4)
    before, before_opt = snapshot(other), snapshot(other_opt)
    with pytest.raises(ValueError, match="'adam.step' has shape"):
        tg.load_checkpoint(tmp_path / "c", {"model": other, "optimizer": other_opt})
    assert_unchanged(other, before)
    assert_unchanged(other_opt, before_opt)


def test_cast_converts_only_when_asked(tmp_path):
    source, _ = trained()
    state = {k: (np.array(v, np.float64) if np.asarray(v).dtype == np.float32 else np.array(v))
             for k, v in source.state_dict().items()}
    tg.save(tmp_path / "f64", state)
    net = Net(seed=3)
    tg.load_checkpoint(tmp_path / "f64", net, cast=True)
    assert net.fc1.weight.dtype == np.float32
    assert np.array_equal(net.fc1.weight, source.fc1.weight)  # float32 -> float64 -> float32 is exact


def test_load_checkpoint_refuses_what_cannot_load(tmp_path):
    tg.save_checkpoint({"model": Net(seed=0)}, tmp_path / "c")
    with pytest.raises(TypeError, match=r"net\['model'\] is a str"):
        tg.load_checkpoint(tmp_path / "c", {"model": "Net"})
    with pytest.raises(KeyError, match="model.fc1.weight"):  # an array stands for one array, not a model
        tg.load_checkpoint(tmp_path / "c", {"model": np.ones(2)})


def test_a_missing_safetensors_names_the_extra(tmp_path, monkeypatch):
    for name in [m for m in sys.modules if m == "safetensors" or m.startswith("safetensors.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "safetensors", None)  # import safetensors now raises ImportError
    with pytest.raises(ImportError, match=r"pip install tapegrad\[checkpoint\]"):
        tg.save(tmp_path / "x", {"w": np.ones(1)})
    with pytest.raises(ImportError, match=r"pip install tapegrad\[checkpoint\]"):
        tg.load(tmp_path / "x")
    assert leftovers(tmp_path) == [] and not (tmp_path / "x").exists()


# ---- atomicity -----------------------------------------------------------------------------------
class FailingDeviceArray(DeviceArray):
    """A device array whose copy to the host is interrupted (Ctrl-C while the save copies it)."""

    __slots__ = ()

    def get(self):
        raise KeyboardInterrupt


def test_an_interrupt_mid_save_keeps_the_old_file(tmp_path):
    path = tmp_path / "ckpt"
    old = {"w": np.arange(4.0), "b": np.ones(2)}
    tg.save(path, old)
    with pytest.raises(KeyboardInterrupt):
        tg.save(path, {"a": np.zeros(3), "w": FailingDeviceArray(np.zeros(4)), "z": np.ones(2)})
    assert leftovers(tmp_path) == []
    assert_same_tree(tg.load(path), old)


def test_a_write_error_mid_save_keeps_the_old_file(tmp_path, monkeypatch):
    path = tmp_path / "ckpt"
    old = {"w": np.arange(4.0)}
    tg.save(path, old)

    def half_then_fail(tensors, filename, metadata=None):
        with open(filename, "wb") as f:
            f.write(b"{\"partial")
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(st, "save_file", half_then_fail)
    with pytest.raises(OSError, match="No space left"):
        tg.save(path, {"w": np.ones(4)})
    assert leftovers(tmp_path) == []
    monkeypatch.undo()
    assert_same_tree(tg.load(path), old)


def test_a_process_killed_mid_save_leaves_the_old_checkpoint(tmp_path):
    """SIGKILL while a child writes a large checkpoint over an old one: the old one still loads, equal."""
    if not hasattr(signal, "SIGKILL"):
        pytest.skip("no SIGKILL on this platform")
    path = tmp_path / "ckpt"
    old = {"w": np.arange(10.0), "step": np.array(7)}
    tg.save(path, old)
    child = textwrap.dedent(f"""
        import numpy as np, tapegrad as tg
        big = {{f"layer{{i}}": np.full((1024, 1024), i, np.float64) for i in range(16)}}  # 128 MiB
        tg.save({str(path)!r}, big)
    """)
    proc = subprocess.Popen([sys.executable, "-c", child])
    try:
        deadline = time.monotonic() + 60
        while not leftovers(tmp_path):  # the temporary file exists: the save has begun
            assert proc.poll() is None, "the child finished before it could be killed"
            assert time.monotonic() < deadline, "the child never started writing"
            time.sleep(0.001)
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.wait()
    assert proc.returncode == -signal.SIGKILL
    assert_same_tree(tg.load(path), old)
    assert leftovers(tmp_path)  # a crash leaves the temporary file, never a half-written checkpoint


def test_damaged_or_newer_metadata_is_refused(tmp_path):
    for name, meta in (("bad-json", "{not json"), ("no-structure", '{"format": 1, "crc32": {}}'),
                       ("newer", '{"format": 99, "structure": null, "crc32": {"w": 0}}')):
        st.save_file({"w": np.zeros(2)}, tmp_path / name, metadata={"tapegrad": meta})
        with pytest.raises(ValueError, match=name):
            tg.load(tmp_path / name)
    crc = zlib.crc32(np.zeros(2).tobytes())  # right checksums, a structure naming a tensor that is not there
    st.save_file({"w": np.zeros(2)}, tmp_path / "wrong-key",
                 metadata={"tapegrad": f'{{"format": 1, "structure": "v", "crc32": {{"w": {crc}}}}}'})
    with pytest.raises(ValueError, match="wrong-key.*structure does not match"):
        tg.load(tmp_path / "wrong-key")


def test_two_objects_claiming_one_key_are_refused(tmp_path):
    net = Net(seed=0)
    tg.save(tmp_path / "c", {f"m.{k}": v for k, v in net.state_dict().items()})
    before = snapshot(net)
    with pytest.raises(ValueError, match="'m.fc1.(weight|bias)' falls under two objects"):
        tg.load_checkpoint(tmp_path / "c", {"m": net, "m.fc1": nn.Dense(4, 6)}, strict=False)
    assert_unchanged(net, before)


def test_a_checkpoint_gets_an_ordinary_files_permissions(tmp_path):
    umask = os.umask(0o022)
    os.umask(umask)
    tg.save(tmp_path / "new", {"w": np.ones(1)})
    assert (tmp_path / "new").stat().st_mode & 0o777 == 0o666 & ~umask  # not mkstemp's 0o600
    (tmp_path / "new").chmod(0o640)
    tg.save(tmp_path / "new", {"w": np.zeros(1)})  # replacing a file keeps its permissions
    assert (tmp_path / "new").stat().st_mode & 0o777 == 0o640


def test_an_array_in_net_claims_the_array_saved_there(tmp_path):
    """The resume recipe: the step saved beside model and optimiser comes back in the result, and its
    key is claimed by a placeholder array, so a strict load still checks everything else."""
    net = nn.Dense(3, 2, seed=0)
    opt = optim.Adam(net.trainable_params())
    path = str(tmp_path / "ckpt.safetensors")
    tg.save_checkpoint({"model": net, "optimizer": opt, "step": np.array(42)}, path)
    fresh = nn.Dense(3, 2, seed=1)
    fresh_opt = optim.Adam(fresh.trainable_params())
    with pytest.raises(KeyError, match="'step'"):
        tg.load_checkpoint(path, net={"model": fresh, "optimizer": fresh_opt})
    assert not np.array_equal(fresh.weight.value, net.weight.value)  # nothing loaded
    ckpt = tg.load_checkpoint(path, net={"model": fresh, "optimizer": fresh_opt, "step": np.array(0)})
    assert int(ckpt["step"]) == 42
    assert np.array_equal(fresh.weight.value, net.weight.value)
    with pytest.raises(TypeError, match="placeholders"):
        tg.load_checkpoint(path, net={"model": fresh, "optimizer": fresh_opt, "step": "42"})


def test_a_save_through_a_symlink_replaces_its_target_and_keeps_the_link(tmp_path):
    target, link = tmp_path / "ckpt_100.safetensors", tmp_path / "latest.safetensors"
    tg.save(target, {"w": np.zeros(2)})
    os.symlink(target.name, link)
    tg.save(link, {"w": np.ones(2)})
    assert link.is_symlink() and os.readlink(link) == target.name
    assert np.array_equal(tg.load(target)["w"], np.ones(2))
    assert leftovers(tmp_path) == []
