"""Fused kernels are shared on the device (and on the host): a group is keyed by its canonical form
(operands numbered by position, literals by their bits, the inputs' dtypes), so the many similar
groups of one program (Adam's update of every Parameter, the layers of a chain) and those of other
programs build one ``fuse`` kernel, or one compiled numexpr program, per distinct expression; the
numbers are those of the unfused program."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import _device
import tapegrad as tg
import tapegrad.numpy as tnp
from _device import Fused, xp
from _device_check import assert_same, device_backend
from tapegrad._jit import fusion
from tapegrad._jit.codegen import compile_program
from tapegrad._jit.passes import optimize

RNG = np.random.default_rng(0)
SHAPE = (4, 3)
N = 10


@pytest.fixture(autouse=True)
def fresh_kernel_caches():
    """Each test starts with no shared kernel, as a fresh process does."""
    fusion.clear_kernel_cache()
    yield
    fusion.clear_kernel_cache()


def _adam_setup(backend, n=N):
    """``n`` same-shaped Parameters and an Adam over them, on ``backend`` (``xp`` or ``np``)."""
    rng = np.random.default_rng(1)  # the same values at each call
    values = [rng.standard_normal(SHAPE) for _ in range(n)]
    grads = [rng.standard_normal(SHAPE) for _ in range(n)]
    move = xp.asarray if backend is xp else np.asarray
    params = [tg.Parameter(move(v)) for v in values]
    if backend is xp:
        with device_backend():
            opt = tg.optim.Adam(params, lr=0.01)
    else:
        opt = tg.optim.Adam(params, lr=0.01)
    return params, opt, [move(g) for g in grads]


def _run_adam(backend, jit: bool, steps=2):
    params, opt, grads = _adam_setup(backend)
    step = tg.jit(lambda gs: opt.step(gs)) if jit else opt.step
    for _ in range(steps):
        step(grads)
    return [p.value for p in params]


def _fused_groups(fn, *args) -> list:
    """The kernels of ``fn``'s program as ``jit`` compiles it (after all the passes)."""
    program = optimize(tg.make_program(fn)(*args))
    return [e.params["kernel"] for e in program.eqns if e.prim is fusion.fused_p]


def test_adam_over_ten_parameters_compiles_one_kernel_per_distinct_group():
    before = Fused.compiled
    got = _run_adam(xp, jit=True)
    compiled = Fused.compiled - before
    params, opt, grads = _adam_setup(xp)
    kernels = _fused_groups(lambda gs: opt.step(gs), grads)
    assert len(kernels) >= N, "Adam's update of each Parameter is fused"
    distinct = {id(k.fn) for k in kernels}
    assert len(distinct) < len(kernels) / (N - 1), "the ten Parameters' groups share their kernels"
    assert compiled == len({k.text for k in kernels}) == len(distinct), \
        f"{compiled} kernels built for {len(kernels)} groups of {len({k.text for k in kernels})} kinds"
    assert_same(got, _device.get(_run_adam(xp, jit=False)), "jitted Adam against eager Adam on the device")
    assert_same(got, _run_adam(np, jit=False), "jitted Adam on the device against eager Adam on the host")


def test_a_second_function_with_the_same_expression_compiles_nothing():
    def chain(x, y):
        for _ in range(3):
            x = tnp.tanh(x * y + 1.0) * 0.5
        return x

    x, y = RNG.standard_normal(SHAPE), RNG.standard_normal(SHAPE)
    dx, dy = xp.asarray(x), xp.asarray(y)
    first = tg.jit(chain)(dx, dy)
    before = Fused.compiled
    second = tg.jit(lambda a, b: chain(a, b))(dx, dy)  # another function, another jit cache
    assert Fused.compiled == before, "the second function's groups built kernels again"
    assert_same(second, _device.get(first), "the shared kernels")
    assert_same(second, compile_program(tg.make_program(chain)(x, y))(x, y)[0], "the unfused host program")


def test_a_chain_of_identical_layers_compiles_each_kind_once():
    """Forward and backward of 8 identical layers: as many kernels as kinds of group, not groups."""
    def loss(x, ws):
        for w in ws:
            x = tnp.tanh(x * w + 0.1) * 1.5
        return tnp.sum(x * x)

    x = RNG.standard_normal(SHAPE)
    ws = [RNG.uniform(0.5, 1.0, SHAPE) for _ in range(8)]
    dx, dws = xp.asarray(x), [xp.asarray(w) for w in ws]
    g = tg.jit(tg.grad(loss, grad_position=(0, 1)))
    before = Fused.compiled
    got = g(dx, dws)
    kernels = _fused_groups(tg.grad(loss, grad_position=(0, 1)), dx, dws)
    kinds = {k.text for k in kernels}
    assert len(kernels) >= 8 and Fused.compiled - before == len(kinds) < len(kernels)
    assert_same(got, tg.grad(loss, grad_position=(0, 1))(x, ws), "the gradient, eager on the host")


def test_a_kernel_of_another_ndim_shares_the_fuse_object():
    """CuPy's ``fuse`` keys its own kernels by each argument's dtype and ndim: one object serves
    both, and builds a kernel for each signature (as CuPy's does)."""
    fn = lambda x: tnp.sin(x) * 2.0 + 1.0  # noqa: E731
    a, b = xp.asarray(RNG.standard_normal(6)), xp.asarray(RNG.standard_normal((2, 3)))
    (k1,), (k2,) = _fused_groups(fn, a), _fused_groups(fn, b)
    assert k1.fn is k2.fn
    before = Fused.compiled
    tg.jit(fn)(a)
    tg.jit(fn)(b)
    tg.jit(fn)(xp.asarray(RNG.standard_normal(5)))  # another shape, the same ndim: nothing new
    assert Fused.compiled - before == 2


@pytest.mark.parametrize("other", [
    lambda x: tnp.sin(x) * 2.0 + 1.5,        # another literal
    lambda x: tnp.sin(x) * -0.0 + 1.0,       # a literal equal to 0.0 with other bits
    lambda x: tnp.cos(x) * 2.0 + 1.0,        # another function
    lambda x: 2.0 * tnp.sin(x) + 1.0,        # operands in another order: another kernel, the same numbers
])
def test_different_groups_get_different_kernels(other):
    fn = lambda x: tnp.sin(x) * 2.0 + 1.0  # noqa: E731
    x = RNG.standard_normal(6)
    (k1,), (k2,) = _fused_groups(fn, xp.asarray(x)), _fused_groups(other, xp.asarray(x))
    assert k1.fn is not k2.fn
    assert_same(tg.jit(other)(xp.asarray(x)), other(x), "the kernel's numbers")


def test_other_dtypes_get_other_kernels():
    fn = lambda x: tnp.sin(x) * 2.0 + 1.0  # noqa: E731
    x = RNG.standard_normal(6)
    (k1,), (k2,) = _fused_groups(fn, xp.asarray(x)), _fused_groups(fn, xp.asarray(x.astype(np.float32)))
    assert k1.fn is not k2.fn
    assert_same(tg.jit(fn)(xp.asarray(x.astype(np.float32))), fn(x.astype(np.float32)), "float32 kernel")


def _traced(kernel):
    """The function handed to ``fuse`` (on CuPy, ``Fused.fn`` is CuPy's ``Fusion``, which keeps it)."""
    return getattr(kernel.fn.fn, "func", kernel.fn.fn)


def test_the_fused_function_has_no_per_group_identifier():
    """CuPy names the kernel after the fused function and writes its operations in the order it
    calls them: a name or a constant unique to a group would give each group its own kernel source,
    which neither CuPy's in-process memo nor its on-disk cache could share."""
    fn = lambda x, y: tnp.tanh(x * y + 1.0) * 0.5  # noqa: E731
    x = xp.asarray(RNG.standard_normal(SHAPE))
    (k1,) = _fused_groups(fn, x, x)
    fusion.clear_kernel_cache()
    (k2,) = _fused_groups(lambda a, b: fn(a, b), x, x)
    (k3,) = _fused_groups(lambda a, b: tnp.exp(a - b) * 3.0, x, x)
    assert k1.fn is not k2.fn, "the cache was cleared: a new fuse object"
    bodies = [_traced(k) for k in (k1, k2, k3)]
    assert {b.__name__ for b in bodies} == {"fused"} and {b.__qualname__ for b in bodies} == {bodies[0].__qualname__}
    assert bodies[0].__code__ is bodies[2].__code__
    assert fusion.kernel_recipe(k1) == fusion.kernel_recipe(k2) != fusion.kernel_recipe(k3)
    if hasattr(k1.fn.fn, "_memo"):  # real CuPy: the two fuse objects wrote the same kernel source
        k1.fn(x, x), k2.fn(x, x)
        codes = [[code for kernel, _ in k.fn.fn._memo.values() for code in kernel.cached_codes.values()]
                 for k in (k1, k2)]
        assert codes[0] and codes[0] == codes[1]


_RECIPE_SCRIPT = """
import numpy as np, tapegrad as tg, tapegrad.numpy as tnp, _device
from tapegrad._jit import fusion
x = _device.xp.asarray(np.ones((4, 3)))
def loss(x, w):
    for _ in range(3):
        x = tnp.tanh(x * w + 0.1) * 1.5
    return tnp.sum(x * x)
program = fusion.fuse(tg.make_program(tg.grad(loss))(x, x))
for e in program.eqns:
    if e.prim is fusion.fused_p:
        print(fusion.kernel_recipe(e.params["kernel"]))
"""


def test_the_recipe_is_the_same_in_another_process():
    """What the kernel source is made of (the operations, their order, the literals' bits, the
    inputs' dtypes) is the same in every process, whatever its hash seed: so is CuPy's source, and its
    on-disk cache hits."""
    tests = Path(__file__).parent
    outputs = []
    for seed in ("1", "2"):
        env = dict(os.environ, PYTHONHASHSEED=seed,
                   PYTHONPATH=os.pathsep.join([str(tests.parent / "src"), str(tests)]))
        run = subprocess.run([sys.executable, "-c", _RECIPE_SCRIPT], env=env, capture_output=True, text=True,
                             timeout=120, check=True)
        outputs.append(run.stdout)
    assert outputs[0] == outputs[1] and outputs[0].count("\n") >= 2


# ---- numexpr on the host ------------------------------------------------------------------------------
numexpr_only = pytest.mark.skipif(fusion.numexpr is None, reason="numexpr is not installed")


@numexpr_only
@pytest.mark.python_executor  # numexpr's fusion
def test_numexpr_programs_are_compiled_once_across_programs(monkeypatch):
    monkeypatch.setattr(fusion, "_pays", lambda eqns, group: True)

    def chain(x, y):
        for _ in range(3):
            x = tnp.tanh(x * y + 1.0) * 0.5
        return x
    x, y = RNG.standard_normal(SHAPE), RNG.standard_normal(SHAPE)
    tg.jit(chain)(x, y)  # numexpr_fusible compiles each primitive once per process, to check its dtype
    fusion.clear_kernel_cache()
    compiles = []
    real = fusion._compile
    monkeypatch.setattr(fusion, "_compile", lambda *a: compiles.append(1) or real(*a))
    first = tg.jit(chain)(x, y)
    assert len(compiles) == 1, "three identical groups, one compilation"
    second = tg.jit(lambda a, b: chain(a, b))(x, y)
    assert len(compiles) == 1, "another function's identical groups compiled again"
    np.testing.assert_allclose(first, compile_program(tg.make_program(chain)(x, y))(x, y)[0], rtol=1e-14)
    np.testing.assert_array_equal(second, first)


@numexpr_only
def test_numexpr_programs_are_not_shared_between_programs(monkeypatch):
    """A compiled numexpr program keeps its registers in itself, and each program runs under its own
    lock: two programs get copies of a compiled expression, never the same object."""
    monkeypatch.setattr(fusion, "_pays", lambda eqns, group: True)
    fn = lambda x, y: tnp.tanh(x * y + 1.0) * 0.5  # noqa: E731
    x = RNG.standard_normal(SHAPE)
    (k1,), (k2,) = _fused_groups(fn, x, x), _fused_groups(fn, x, x)
    assert k1.fn is not k2.fn and fusion.kernel_recipe(k1) == fusion.kernel_recipe(k2)
    np.testing.assert_array_equal(k1.fn(x, x), k2.fn(x, x))


def test_the_shared_kernel_cache_is_bounded(monkeypatch):
    monkeypatch.setattr(fusion, "MAX_KERNELS", 4)
    x = xp.asarray(RNG.standard_normal(6))
    for k in range(10):
        _fused_groups(lambda x, k=float(k): tnp.sin(x) * k + 1.0, x)
    assert fusion.kernel_cache_size() == 4
    assert_same(tg.jit(lambda x: tnp.sin(x) * 9.0 + 1.0)(x), np.sin(_device.get(x)) * 9.0 + 1.0, "after eviction")
