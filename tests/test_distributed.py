"""``tapegrad.distributed``: collectives, the signature check, data-parallel training equal to one process,
and faults that end the job, on host arrays and on device arrays (the strict double of tests/_device.py, or
real CuPy with ``TAPEGRAD_DEVICE=cupy``). Multi-process tests run scripts under ``mpiexec -n 2`` (the MPICH
that the ``distributed`` extra installs next to the interpreter); they skip only where mpi4py is missing,
which the ``dev`` extra prevents."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

import _device
import tapegrad as tg
from _device import DeviceArray, xp
from _gpu import cupy_or_skip
from tapegrad import distributed as dist
from tapegrad import optim
from tapegrad.distributed import _collectives, _comm

pytest.importorskip("mpi4py", reason="tapegrad.distributed needs mpi4py (pip install 'tapegrad[distributed]')")
MPIEXEC = shutil.which("mpiexec", path=str(Path(sys.executable).parent)) or shutil.which("mpiexec")
ROOT = Path(__file__).resolve().parent.parent


def _mpirun(tmp_path, script: str, n: int = 2, timeout: float = 60, check: bool = True, env: dict | None = None):
    """Run ``script`` under ``mpiexec -n n``; returns the completed process (stdout, stderr, returncode).
    ``env`` adds variables to the ranks' environment (None as a value removes one)."""
    if MPIEXEC is None:
        pytest.skip("no mpiexec next to the interpreter nor on PATH (pip install mpich)")
    path = tmp_path / "job.py"
    path.write_text(textwrap.dedent(script))
    extra = env or {}
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src") + os.pathsep + os.environ.get("PYTHONPATH", ""),
           "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", **extra}
    env = {k: v for k, v in env.items() if v is not None}
    proc = subprocess.run([MPIEXEC, "-n", str(n), sys.executable, str(path)], capture_output=True, text=True,
                          timeout=timeout, env=env, cwd=tmp_path)
    if check:
        assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc


# ---- several processes -----------------------------------------------------------------------------
def test_allreduce_and_broadcast_match_numpy_on_two_ranks(tmp_path):
    _mpirun(tmp_path, """
        import numpy as np, tapegrad as tg, tapegrad.distributed as dist
        comm = dist.init()
        assert comm.size == 2
        def tree(r):   # float32, float64 (one C- and one Fortran-ordered), int64 and a 0-d leaf per rank
            return {"w": np.full((2, 3), r + 1.0, np.float32), "b": [np.arange(4.0) * (r + 1),
                    np.asfortranarray(np.arange(6.0).reshape(2, 3) - r)], "n": np.int64(r + 5),
                    "s": np.float64(r)}
        mine, other = tree(comm.rank), tree(1 - comm.rank)
        for op, reduce in (("sum", np.add), ("max", np.maximum), ("min", np.minimum)):
            got = dist.allreduce(mine, op)
            want = tg.tree.tree_map(lambda a, b: reduce(np.asarray(a), np.asarray(b)), mine, other)
            for g, w in zip(tg.tree.tree_leaves(got), tg.tree.tree_leaves(want)):
                assert g.dtype == w.dtype and g.shape == w.shape and np.array_equal(g, w), (op, g, w)
        mean = dist.allreduce({"w": mine["w"], "b": mine["b"]}, "mean")
        assert np.array_equal(mean["w"], np.full((2, 3), 1.5, np.float32)) and mean["w"].dtype == np.float32
        assert np.array_equal(mean["b"][0], np.arange(4.0) * 1.5)
        got = dist.broadcast(mine, root=1)
        assert all(np.array_equal(g, w) for g, w in zip(tg.tree.tree_leaves(got), tg.tree.tree_leaves(tree(1))))
        assert all(np.array_equal(a, b) for a, b in zip(tg.tree.tree_leaves(mine),
                                                        tg.tree.tree_leaves(tree(comm.rank))))  # not written
        net = tg.nn.Dense(3, 2, seed=comm.rank)        # different weights on each rank ...
        opt = tg.optim.Adam(net.trainable_params(), lr=1e-3 * (comm.rank + 1))
        dist.broadcast_parameters(net)                 # ... then rank 0's everywhere
        dist.broadcast_parameters(opt)
        want = tg.nn.Dense(3, 2, seed=0)
        assert np.array_equal(net.weight.value, want.weight.value) and opt.lr == 1e-3
        print("ok", comm.rank)
    """)


def test_ranks_holding_different_trees_all_raise_naming_the_leaf(tmp_path):
    proc = _mpirun(tmp_path, """
        import numpy as np, tapegrad.distributed as dist
        comm = dist.init()
        tree = {"fc1": {"weight": np.ones((4, 3 + comm.rank)), "bias": np.ones(4)}}
        try:
            dist.allreduce(tree)
        except ValueError as e:
            print(f"rank {comm.rank} raised: {e}")
        ok = dist.allreduce({"x": np.ones(2)})   # the job goes on: nothing was left half done
        print(f"rank {comm.rank} after: {ok['x'].tolist()}")
    """)
    for r in (0, 1):
        assert f"rank {r} raised:" in proc.stdout and f"rank {r} after: [1.0, 1.0]" in proc.stdout
    assert "'fc1.weight'" in proc.stdout and "(4, 3)" in proc.stdout and "(4, 4)" in proc.stdout


# the start of a two-rank job and nothing else: what every job here pays before its own work begins
NOOP_JOB = """
    import numpy as np, tapegrad.distributed as dist
    dist.init()
    dist.allreduce({"g": np.ones(10)})
"""


def _seconds(tmp_path, script: str, **kwargs):
    """Run ``script`` under ``mpiexec -n 2``; returns the completed process and its wall time."""
    start = time.perf_counter()
    proc = _mpirun(tmp_path, script, **kwargs)
    return proc, time.perf_counter() - start


def test_a_rank_that_raises_ends_the_job_with_its_message(tmp_path):
    """Rank 1 raises at step 3 while rank 0 goes on into the next allreduce: the job must end, non-zero,
    and rank 1's message must be printed. Without the abort, rank 0 would wait in the allreduce until the
    timeout; with it, the job takes what a no-op job takes (starting two interpreters, importing, MPI_Init;
    seconds on a loaded machine, so it is measured here, not assumed) plus the one wait the abort adds on
    purpose (``_FORWARD_S``, for mpiexec to forward the traceback), plus as much again as the no-op job, for
    the machine's load to change between the two runs. When the limit is missed, the no-op job is timed
    again and the larger of the two times counts, so that a load that rose during the test does not fail it."""
    from tapegrad.distributed._faults import _FORWARD_S

    _, baseline = _seconds(tmp_path, NOOP_JOB)
    limit = 2 * baseline + _FORWARD_S
    proc, elapsed = _seconds(tmp_path, """
        import numpy as np, tapegrad.distributed as dist
        comm = dist.init()
        for step in range(1000):
            if comm.rank == 1 and step == 3:
                raise RuntimeError("the data loader of rank 1 failed at step 3")
            dist.allreduce({"g": np.ones(10)})
        print("no fault: this must not be reached")
    """, timeout=limit + 60, check=False)
    assert proc.returncode != 0, proc.stdout + proc.stderr
    assert "[rank 1]" in proc.stderr and "the data loader of rank 1 failed at step 3" in proc.stderr
    assert "must not be reached" not in proc.stdout
    if elapsed >= limit:
        baseline = max(baseline, _seconds(tmp_path, NOOP_JOB)[1])
        limit = 2 * baseline + _FORWARD_S
    assert elapsed < limit, f"the failing job took {elapsed:.2f} s, a no-op job {baseline:.2f} s (limit {limit:.2f} s)"


TRAIN = """
    import sys
    import numpy as np, tapegrad as tg, tapegrad.distributed as dist
    from sklearn.datasets import load_digits
    from tapegrad.nn import functional as F

    def train(rank, size, steps=20, global_batch=64):
        x, y = load_digits(return_X_y=True)
        x = (x / 16.0).astype(np.float32)
        net = tg.nn.Sequential(tg.nn.Dense(64, 32, activation="relu", seed=0), tg.nn.Dense(32, 10, seed=1))
        opt = tg.optim.Adam(net.trainable_params(), lr=1e-2)
        if size > 1:
            dist.broadcast_parameters(net)
            opt = dist.DistributedOptimizer(opt)
        grad_fn = tg.grad(lambda xb, yb: F.cross_entropy(net(xb), yb), grad_position=None,
                          weights=net.trainable_params())
        per_rank = global_batch // size
        for step in range(steps):
            batch = np.random.default_rng(step).choice(len(x), global_batch, replace=False)
            mine = batch[rank * per_rank:(rank + 1) * per_rank]
            opt.step(grad_fn(x[mine], y[mine]))
        return [p.value for p in net.trainable_params()]
"""


def test_two_ranks_of_32_train_as_one_process_of_64(tmp_path):
    """Averaging two ranks' gradients of a mean loss over 32 examples each is the gradient of the mean over
    all 64: the weights after 20 Adam steps agree with one process's to 1e-6."""
    _mpirun(tmp_path, TRAIN + """
    comm = dist.init()
    weights = train(comm.rank, comm.size)
    if comm.rank == 0:
        np.savez(sys.argv[0] + ".npz", *weights)
    """)
    namespace: dict = {}
    exec(textwrap.dedent(TRAIN), namespace)
    single = namespace["train"](0, 1)
    with np.load(str(tmp_path / "job.py.npz")) as saved:
        parallel = [saved[f"arr_{i}"] for i in range(len(single))]
    initial = namespace["train"](0, 1, steps=0)
    for a, b, w0 in zip(parallel, single, initial):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6)  # the bound, float32 weights
        assert np.abs(a - w0).max() > 1e-3  # and they did train


# ---- device arrays ---------------------------------------------------------------------------------
# Each check compares a device run with the host run of the same numbers on the same two ranks. The
# collectives' results are exact on any path (a sum, max or min of two values, halved for the mean); the
# optimiser's are not on a GPU (CuPy's kernels round differently), hence its tolerance.
DEVICE_JOB = """
    import numpy as np, tapegrad as tg, tapegrad.distributed as dist
    import _device
    from _device import DeviceArray, xp
    from tapegrad.distributed._comm import cuda_aware_mpi
    from tapegrad.nn import functional as F

    comm = dist.init()
    r = comm.rank
    path = "direct (CUDA-aware MPI)" if cuda_aware_mpi() else "staged"
    print(f"rank {r}: {xp.__name__} arrays, {path}", flush=True)   # one write: the ranks' lines never interleave

    def leaves(t):
        return tg.tree.tree_leaves(t)

    def same(got, want):   # device arrays with the host run's numbers, shapes and dtypes
        for g, w in zip(leaves(got), leaves(want)):
            assert type(g) is DeviceArray, type(g)
            assert g.dtype == w.dtype and g.shape == w.shape and np.array_equal(g.get(), w), (g, w)

    def tree(r):   # float32, float64 (one C- and one Fortran-ordered), int64 and 0-d leaves per rank
        return {"w": np.full((2, 3), r + 1.0, np.float32), "b": [np.arange(4.0) * (r + 1),
                np.asfortranarray(np.arange(6.0).reshape(2, 3) - r)], "n": np.int64(r + 5), "s": np.float64(r)}

    host, dev = tree(r), _device.asarray(tree(r))
    for op in ("sum", "max", "min"):
        same(dist.allreduce(dev, op), dist.allreduce(host, op))
    floats = lambda t: {"w": t["w"], "b": t["b"], "s": t["s"]}
    same(dist.allreduce(floats(dev), "mean"), dist.allreduce(floats(host), "mean"))
    same(dist.broadcast(dev, root=1), dist.broadcast(host, root=1))
    assert all(np.array_equal(a, b) for a, b in zip(leaves(_device.get(dev)), leaves(tree(r))))  # not written

    # host and device leaves in one tree: separate buffers, each leaf back on its own backend
    mixed = dist.allreduce({"h": np.full(3, r + 1.0), "d": xp.asarray(np.full(3, 10.0 * (r + 1)))}, "sum")
    assert type(mixed["h"]) is np.ndarray and np.array_equal(mixed["h"], np.full(3, 3.0))
    assert type(mixed["d"]) is DeviceArray and np.array_equal(mixed["d"].get(), np.full(3, 30.0))
    try:   # the same leaf on the host on one rank and on the device on the other: refused on both
        dist.allreduce({"g": np.ones(2) if r == 0 else xp.ones(2)})
        raise AssertionError("ranks with different backends were reduced")
    except ValueError as e:
        assert "'g'" in str(e) and "on numpy" in str(e) and f"on {xp.__name__}" in str(e), e

    def on_device(net):   # the host-built model's Parameters moved to the device, the same numbers
        for p in net.parameters():
            p.assign(xp.asarray(p.value))
        return net

    net = on_device(tg.nn.Dense(3, 2, seed=r))   # different weights on each rank ...
    opt = tg.optim.Adam(net.trainable_params(), lr=1e-3 * (r + 1))
    dist.broadcast_parameters(net)               # ... then rank 0's everywhere, still on the device
    dist.broadcast_parameters(opt)
    for p, q in zip(net.parameters(), tg.nn.Dense(3, 2, seed=0).parameters()):
        assert type(p.value) is DeviceArray and np.array_equal(p.value.get(), q.value), p.name
    assert float(opt.lr) == 1e-3

    def trained(device, steps=3):   # each rank its own batches; DistributedOptimizer averages the gradients
        net = tg.nn.Sequential(tg.nn.Dense(4, 8, activation="relu", seed=0), tg.nn.Dense(8, 3, seed=1))
        net = on_device(net) if device else net
        opt = dist.DistributedOptimizer(tg.optim.Adam(net.trainable_params(), lr=1e-2))
        grad_fn = tg.grad(lambda x, y: F.cross_entropy(net(x), y), grad_position=None,
                          weights=net.trainable_params())
        rng = np.random.default_rng(r)
        for _ in range(steps):
            x, y = rng.standard_normal((8, 4)).astype(np.float32), rng.integers(0, 3, 8)
            opt.step(grad_fn(xp.asarray(x), xp.asarray(y)) if device else grad_fn(x, y))
        return [p.value for p in net.trainable_params()]

    for d, h, h0 in zip(trained(True), trained(False), trained(False, steps=0)):
        assert type(d) is DeviceArray
        np.testing.assert_allclose(d.get(), h, rtol=1e-5, atol=1e-6)
        assert np.abs(h - h0).max() > 1e-3   # and they did train
    print(f"rank {r}: ok")
"""


def _device_job(tmp_path, env=None):
    """DEVICE_JOB on two ranks, importing tests/_device.py (the double, or CuPy with TAPEGRAD_DEVICE=cupy)."""
    script = f"import sys\nsys.path.insert(0, {str(ROOT / 'tests')!r})\n" + textwrap.dedent(DEVICE_JOB)
    proc = _mpirun(tmp_path, script, env=env)
    assert proc.stdout.count(": ok") == 2, proc.stdout + proc.stderr
    return proc


def test_device_arrays_on_two_ranks_match_the_host_run(tmp_path):
    """allreduce (each op), broadcast, broadcast_parameters of a model on the device and a
    DistributedOptimizer's steps, on the strict double, staged through the host: device results with the
    host run's numbers."""
    # staged whatever MPI is: the double's memory is host memory behind a wall, which no MPI can read
    proc = _device_job(tmp_path, env={"TAPEGRAD_DEVICE": "double", "TAPEGRAD_CUDA_AWARE_MPI": "0"})
    assert proc.stdout.count("devicearray arrays, staged") == 2


@pytest.mark.gpu
@pytest.mark.parametrize("setting", ["0", None], ids=["staged", "as-mpi-says"])
def test_cupy_arrays_on_two_ranks_match_the_host_run(tmp_path, setting):
    """The same job with real CuPy: staged through the host, then on the path MPI's own answer picks
    (direct where MPI is CUDA-aware: a wrong "yes" crashes here, which is what this is for). Both passed
    on an H100 (CuPy 14.2, pip MPICH 5.0.2, which answers no and is right: given a CuPy buffer it
    segfaults)."""
    cupy_or_skip()
    proc = _device_job(tmp_path, env={"TAPEGRAD_DEVICE": "cupy", "TAPEGRAD_CUDA_AWARE_MPI": setting})
    print(proc.stdout)


# ---- one process -----------------------------------------------------------------------------------
def test_on_one_rank_the_collectives_are_identities():
    tree = {"w": np.arange(6.0).reshape(2, 3), "n": [np.int32(4)]}
    for op in ("mean", "sum", "max", "min"):
        if op == "mean":
            got = dist.allreduce({"w": tree["w"]}, op)
            assert np.array_equal(got["w"], tree["w"])
        else:
            got = dist.allreduce(tree, op)
            assert np.array_equal(got["w"], tree["w"]) and got["n"][0] == 4 and got["n"][0].dtype == np.int32
    assert np.array_equal(dist.broadcast(tree)["w"], tree["w"])
    assert dist.size() == dist.init().size and 0 <= dist.rank() < dist.size()


def test_collectives_refuse_bad_arguments_and_traced_values():
    with pytest.raises(ValueError, match="op must be one of"):
        dist.allreduce({"a": np.ones(2)}, "prod")
    with pytest.raises(ValueError, match="leaf 'a'; use op='sum'"):
        dist.allreduce({"a": np.ones(2, np.int64)}, "mean")
    with pytest.raises(TypeError, match="'a' is a str"):
        dist.allreduce({"a": "x"})
    with pytest.raises(TypeError, match="'n' is a float, not an array; pass NumPy or CuPy arrays"):
        dist.broadcast({"w": xp.ones(2), "n": 3.0})
    with pytest.raises(ValueError, match="root must be a rank"):
        dist.broadcast({"a": np.ones(2)}, root=5)
    with pytest.raises(TypeError, match="collectives run outside jit"):
        tg.jit(lambda g: dist.allreduce({"g": g})["g"])(np.ones(2))
    with pytest.raises(TypeError, match="built with its Parameters"):
        dist.DistributedOptimizer(optim.Adam())
    with pytest.raises(TypeError, match="obj must be a module"):
        dist.broadcast_parameters(3)


class _TwoRanks:
    """An mpi4py communicator's stand-in: two ranks holding the same values, so a sum doubles and a
    broadcast keeps them. It records the type of every buffer handed to MPI, and that the device was
    synchronised first."""

    def __init__(self, synced):
        self.handed, self.synced, self.syncs_at_call = set(), synced, []

    def Get_rank(self):
        return 0

    def Get_size(self):
        return 2

    def allgather(self, obj):
        return [obj, obj]

    def Allreduce(self, send, recv, op):
        from mpi4py import MPI
        assert op == MPI.SUM
        self.syncs_at_call.append(len(self.synced))
        self.handed.add(type(recv))
        if send is not MPI.IN_PLACE:
            self.handed.add(type(send))
            recv[...] = send
        recv += recv

    def Bcast(self, buf, root):
        self.syncs_at_call.append(len(self.synced))
        self.handed.add(type(buf))


@pytest.mark.parametrize("direct", [False, True], ids=["staged", "direct"])
def test_device_buffers_reach_mpi_staged_or_direct_as_cuda_aware_mpi_says(monkeypatch, direct):
    """``_comm.cuda_aware_mpi`` alone picks the path: False stages every device buffer through the host
    (MPI gets NumPy arrays), True hands MPI the device arrays themselves, after a sync and with no copy to
    the host. The double's memory cannot really reach MPI, hence the recording communicator; the staged
    path runs for real in test_device_arrays_on_two_ranks_match_the_host_run."""
    synced = []
    monkeypatch.setattr(_comm, "cuda_aware_mpi", lambda: direct)
    monkeypatch.setattr(_collectives, "_sync", lambda module: synced.append(module))
    if direct:
        monkeypatch.setattr(_collectives, "to_host", lambda a: pytest.fail("a device buffer was copied to the host"))
    comm = dist.Communicator(_TwoRanks(synced))
    host = {"w": np.arange(6.0, dtype=np.float32).reshape(2, 3), "b": [np.arange(3.0), np.ones(2)]}
    dev = _device.asarray(host)
    for op, factor in (("sum", 2), ("mean", 1)):
        got = dist.allreduce(dev, op, comm=comm)
        for g, h in zip(tg.tree.tree_leaves(got), tg.tree.tree_leaves(host)):
            assert type(g) is DeviceArray and g.dtype == h.dtype and np.array_equal(g.get(), factor * h)
    got = dist.broadcast(dev, comm=comm)
    assert all(type(g) is DeviceArray and np.array_equal(g.get(), h)
               for g, h in zip(tg.tree.tree_leaves(got), tg.tree.tree_leaves(host)))
    assert comm.comm.handed == ({DeviceArray} if direct else {np.ndarray}), comm.comm.handed
    calls = comm.comm.syncs_at_call  # 2 dtypes x 3 collectives; direct: each call after a sync of its own
    assert calls == (list(range(1, 7)) if direct else [0] * 6), calls
    assert set(synced) <= {xp}


def test_cuda_aware_mpi_is_asked_of_mpi_unless_the_environment_says(monkeypatch):
    monkeypatch.setenv("TAPEGRAD_CUDA_AWARE_MPI", "1")
    assert _comm.cuda_aware_mpi() is True
    monkeypatch.setenv("TAPEGRAD_CUDA_AWARE_MPI", "0")
    assert _comm.cuda_aware_mpi() is False
    monkeypatch.setenv("TAPEGRAD_CUDA_AWARE_MPI", "yes")
    with pytest.raises(ValueError, match="TAPEGRAD_CUDA_AWARE_MPI must be 1 .* or 0"):
        _comm.cuda_aware_mpi()
    tree = {"g": xp.ones(2)}
    with pytest.raises(ValueError, match="TAPEGRAD_CUDA_AWARE_MPI"):  # before any MPI call
        dist.allreduce(tree)
    assert np.array_equal(dist.allreduce({"g": np.ones(2)})["g"], np.ones(2))  # host trees never ask
    monkeypatch.delenv("TAPEGRAD_CUDA_AWARE_MPI")
    assert isinstance(_comm.cuda_aware_mpi(), bool)  # MPI's own MPIX_Query_cuda_support, or False


def test_distributed_optimizer_and_grad_reducer_on_one_rank():
    w = tg.Parameter(np.ones(3))
    opt = dist.DistributedOptimizer(optim.SGD([w], lr=0.5))
    opt.step((np.full(3, 2.0),))
    assert np.array_equal(w.value, np.zeros(3)) and opt.params == (w,) and opt.lr == 0.5
    reducer = dist.DistributedGradReducer([w], mean=True, degree=4)
    assert np.array_equal(reducer((np.full(3, 2.0),))[0], np.full(3, 0.5))


@pytest.mark.parametrize("n, size, drop_last", [(10, 3, True), (10, 3, False), (64, 2, True), (7, 7, True)])
def test_shard_gives_each_rank_an_equal_disjoint_part(n, size, drop_last):
    parts = [dist.shard(n, r, size, seed=1, epoch=2, drop_last=drop_last) for r in range(size)]
    lengths = {len(p) for p in parts}
    taken = np.concatenate(parts)
    assert len(lengths) == 1
    if drop_last:
        assert lengths == {n // size} and len(set(taken.tolist())) == len(taken)  # disjoint
    else:
        assert lengths == {-(-n // size)} and set(taken.tolist()) == set(range(n))  # every example, some twice
    assert not np.array_equal(dist.shard(n, 0, size, seed=1, epoch=3, drop_last=drop_last), parts[0]) or n == size


def test_shard_refuses_bad_arguments():
    with pytest.raises(ValueError, match="rank must be in"):
        dist.shard(10, 3, 3)
    with pytest.raises(ValueError, match="drop_last=False"):
        dist.shard(2, 0, 3)
    with pytest.raises(TypeError, match="n_examples must be an int"):
        dist.shard(10.0, 0, 2)


def test_the_example_trains_on_two_ranks_as_on_one(tmp_path, monkeypatch, capsys):
    """``mpiexec -n 2 python examples/train_digits.py --distributed`` (12 epochs here, 30 in the README's
    command) reaches the held-out accuracy of one process, within two test images."""
    examples = ROOT / "examples"
    proc = _mpirun(tmp_path, f"""
        import sys
        sys.path.insert(0, {str(examples)!r})
        import train_digits
        train_digits.EPOCHS, train_digits.OUTPUT_DIR = 12, __import__("pathlib").Path({str(tmp_path)!r})
        train_digits.main(["--distributed"])
    """, timeout=120)
    assert proc.stdout.count("final held-out accuracy") == 1  # rank 0 reports for everyone
    parallel = float(proc.stdout.split("final held-out accuracy: ")[1].split()[0])
    monkeypatch.syspath_prepend(str(examples))
    import train_digits
    monkeypatch.setattr(train_digits, "EPOCHS", 12)
    monkeypatch.setattr(train_digits, "OUTPUT_DIR", tmp_path)
    train_digits.main([])
    single = float(capsys.readouterr().out.split("final held-out accuracy: ")[1].split()[0])
    sys.modules.pop("train_digits", None)
    assert parallel >= 0.95 and abs(parallel - single) <= 2 / 360 + 1e-9, (parallel, single)


def test_the_guides_jit_pattern_stages_each_part_once():
    """docs/distributed.md: the gradient and the update jitted apart, the allreduce between them."""
    from tapegrad.nn import functional as F

    net = tg.nn.Dense(4, 3, seed=0)
    opt = optim.Adam(net.trainable_params(), lr=1e-2)
    grad_fn = tg.jit(tg.grad(lambda x, y: F.cross_entropy(net(x), y), grad_position=None,
                             weights=net.trainable_params()))
    update = tg.jit(lambda grads: opt.step(grads))
    x, y = np.random.default_rng(0).random((8, 4), dtype=np.float32), np.arange(8) % 3
    before = float(F.cross_entropy(net(x), y))
    for _ in range(20):
        update(dist.allreduce(grad_fn(x, y)))
    assert float(F.cross_entropy(net(x), y)) < before - 0.1
    assert grad_fn._cache_size() == update._cache_size() == 1 and int(opt.state.step) == 20
