"""vmap of the linear-algebra and FFT primitives: every primitive (through its public function) against
a Python loop over the examples, with the batch axis at 0, 1 and -1 and shared operands, in float64
and float32; then under composition (vmap of grad, grad of vmap, vmap of vmap, vmap of jvp).

Each case also checks that the batch rule ran, not the loop fallback. Eigen and singular vectors are
compared through sign-invariant products (``v * v``). Test matrices are well conditioned: ``x + n I``,
``x x^T + n I``, and symmetric ones with eigenvalues far apart.
"""
from __future__ import annotations

import numpy as np
import pytest

import tapegrad as tg
import tapegrad._vmap
import tapegrad.numpy as tnp
import tapegrad.numpy.fft  # noqa: F401  (registers the FFT primitives)
import tapegrad.scipy.linalg as tsl
from _tol import assert_close
from tapegrad._rules import PRIMITIVES

B = 4  # examples per batch
N = 3  # matrix size
PRIMS = ["cholesky", "det", "slogdet", "eigh", "qr", "solve", "inv", "pinv", "svd", "solve_triangular", "expm",
         "fft", "rfft", "irfft"]


@pytest.fixture(autouse=True)
def looped(monkeypatch):
    """The names of the primitives that ran through the loop fallback during the test."""
    names = []
    fallback = tapegrad._vmap.loop_rule

    def spy(prim, *args):
        names.append(prim.name)
        return fallback(prim, *args)
    monkeypatch.setattr(tapegrad._vmap, "loop_rule", spy)
    yield names
    assert not set(names) & set(PRIMS), f"loop fallback ran for {sorted(set(names) & set(PRIMS))}"


def test_every_primitive_has_a_batch_rule():
    rules = {p.name: p.batch_rule for p in PRIMITIVES}
    assert all(rules[name] is not None for name in PRIMS), [n for n in PRIMS if rules[n] is None]


# ---- data ----------------------------------------------------------------------------------------
def _rng(seed=0):
    return np.random.default_rng(seed)


def _sq(shape, rng):
    return rng.standard_normal(shape) + shape[-1] * np.eye(shape[-1])


def _spd(shape, rng):
    x = rng.standard_normal(shape)
    return x @ np.swapaxes(x, -1, -2) + shape[-1] * np.eye(shape[-1])


def _sym(shape, rng):
    """Symmetric, eigenvalues 1.5 apart (distinct: eigenvectors are differentiable)."""
    *batch, n, _ = shape
    q = np.linalg.qr(rng.standard_normal(tuple(batch) + (n, n)))[0]
    return (q * (1.5 * np.arange(n) - 1.0)[..., None, :]) @ np.swapaxes(q, -1, -2)


def _wc(shape, rng):
    """Any shape, singular values spread over [1, 2.5]."""
    *batch, m, n = shape
    k = min(m, n)
    u = np.linalg.qr(rng.standard_normal(tuple(batch) + (m, k)))[0]
    v = np.linalg.qr(rng.standard_normal(tuple(batch) + (n, k)))[0]
    return (u * np.linspace(1.0, 2.5, k)) @ np.swapaxes(v, -1, -2)


def _gen(shape, rng):
    return rng.standard_normal(shape)


def _batched(draw, shape, axis, rng, dtype=np.float64):
    """``B`` examples of ``shape`` stacked along ``axis`` (None: one shared example)."""
    if axis is None:
        return draw(shape, rng).astype(dtype)
    return np.moveaxis(draw((B,) + shape, rng), 0, axis).astype(dtype)


def _example(x, axis, b):
    return x if axis is None else np.take(x, b, axis=axis)


def _leaves(out):
    return [np.asarray(o) for o in (out if isinstance(out, (tuple, list)) else (out,))]


def _loop(f, args, in_axes):
    """``f`` once per example, each output stacked along axis 0."""
    size = next(np.shape(x)[ax] for x, ax in zip(args, in_axes) if ax is not None)
    outs = [_leaves(f(*[_example(x, ax, b) for x, ax in zip(args, in_axes)])) for b in range(size)]
    return [np.stack(o) for o in zip(*outs)]


def _tol(dtype):
    return dict(rtol=1e-4, atol=1e-4) if dtype == np.float32 else dict(rtol=1e-10, atol=1e-10)


def _check(f, args, in_axes, dtype=np.float64):
    got = _leaves(tg.vmap(f, in_axes=in_axes)(*args))
    want = _loop(f, args, in_axes)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype, (g.shape, w.shape, g.dtype, w.dtype)
        assert_close(g, w, **_tol(dtype))


# ---- one operand ---------------------------------------------------------------------------------
def _eigh(a):
    w, v = tnp.linalg.eigh(a)
    return w, v * v


def _svd(a):
    u, s, vh = tnp.linalg.svd(a, full_matrices=False)
    return u * u, s, vh * vh


UNARY = {  # name: (function of one example, data, example shape)
    "cholesky": (tnp.linalg.cholesky, _spd, (N, N)),
    "cholesky_upper": (lambda a: tnp.linalg.cholesky(a, upper=True), _spd, (N, N)),
    "det": (tnp.linalg.det, _sq, (N, N)),
    "slogdet": (lambda a: tuple(tnp.linalg.slogdet(a)), _sq, (N, N)),
    "eigh": (_eigh, _sym, (N, N)),
    "qr": (lambda a: tuple(tnp.linalg.qr(a)), _wc, (N + 1, N)),
    "qr_complete": (lambda a: tuple(tnp.linalg.qr(a, mode="complete")), _wc, (N + 1, N)),
    "inv": (tnp.linalg.inv, _sq, (N, N)),
    "pinv": (tnp.linalg.pinv, _wc, (N + 1, N)),
    "svd": (_svd, _wc, (N, N + 1)),
    "svd_values": (lambda a: tnp.linalg.svd(a, compute_uv=False), _wc, (N + 1, N)),
    "expm": (tsl.expm, lambda shape, rng: 0.5 * rng.standard_normal(shape), (N, N)),
    "stacked_det": (tnp.linalg.det, _sq, (2, N, N)),  # the examples are stacks themselves
    "stacked_eigh": (_eigh, _sym, (2, N, N)),
}


@pytest.mark.parametrize("axis", [0, 1, -1])
@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary(name, axis):
    f, draw, shape = UNARY[name]
    _check(f, (_batched(draw, shape, axis, _rng()),), (axis,))


@pytest.mark.parametrize("name", ["cholesky", "eigh", "svd", "solve", "inv", "expm"])
def test_float32(name):
    if name == "solve":
        a, b = _batched(_sq, (N, N), 0, _rng(), np.float32), _batched(_gen, (N,), None, _rng(), np.float32)
        _check(tnp.linalg.solve, (a, b), (0, None), np.float32)
        return
    f, draw, shape = UNARY[name]
    _check(f, (_batched(draw, shape, 1, _rng(), np.float32),), (1,), np.float32)


def test_batch_axis_stays_among_stack_axes():
    """An example that is a stack: the batch axis in the stack needs no moveaxis (one bind)."""
    a = _batched(_sq, (2, N, N), 1, _rng())
    out = tg.vmap(tnp.linalg.inv, in_axes=1, out_axes=1)(a)
    assert_close(out, np.linalg.inv(a), rtol=1e-12)


# ---- two operands: solve and solve_triangular -------------------------------------------------------
def _tri(lower, unit=False, trans=0):
    return lambda a, b: tsl.solve_triangular(a, b, lower=lower, unit_diagonal=unit, trans=trans)


SOLVERS = {
    "solve": tnp.linalg.solve,
    "tri_lower": _tri(True),
    "tri_upper_T": _tri(False, trans="T"),
    "tri_lower_unit_T": _tri(True, unit=True, trans=1),
}
AXES_PAIRS = [(0, 0), (1, -1), (-1, 0), (None, 0), (None, -1), (0, None), (1, None)]


@pytest.mark.parametrize("b_shape", [(N,), (N, 2)])
@pytest.mark.parametrize("axes", AXES_PAIRS)
@pytest.mark.parametrize("name", sorted(SOLVERS))
def test_solve(name, axes, b_shape):
    rng = _rng(1)
    a = _batched(_sq, (N, N), axes[0], rng)
    b = _batched(_gen, b_shape, axes[1], rng)
    _check(SOLVERS[name], (a, b), axes)


@pytest.mark.parametrize("n", [2, 3 * B])  # fewer rows than matrices (substitution), more (a loop)
@pytest.mark.parametrize("name", ["tri_lower", "tri_upper_T", "tri_lower_unit_T"])
def test_solve_triangular_stacks(name, n):
    """Both ways the impl solves a stack of triangular matrices, with stacked examples that broadcast."""
    rng = _rng(2)
    a = _batched(_sq, (2, n, n), 0, rng)
    b = _batched(_gen, (1, n, 3), 2, rng)
    _check(SOLVERS[name], (a, b), (0, 2))
    _check(SOLVERS[name], (a[:, 0], b[:, :, 0]), (0, None))


def test_solve_stacked_shared_matrix_broadcasts():
    """A shared stack of matrices against mapped right-hand sides (the columns fold) and the reverse
    (a mapped matrix against a shared stack of right-hand sides)."""
    rng = _rng(3)
    a, b = _sq((2, N, N), rng), _batched(_gen, (N, 2), 1, rng)
    _check(tnp.linalg.solve, (a, b), (None, 1))
    _check(_tri(True), (a, b), (None, 1))
    a, b = _batched(_sq, (N, N), 0, rng), _gen((2, N, 2), rng)
    _check(tnp.linalg.solve, (a, b), (0, None))
    _check(_tri(False), (a, b), (0, None))


def test_solve_triangular_singular_raises():
    a = np.tril(_batched(_sq, (2, 2), 0, _rng()))
    a[1, 1, 1] = 0.0
    with pytest.raises(np.linalg.LinAlgError):
        tg.vmap(_tri(True))(a, np.ones((B, 2)))


# ---- FFT -----------------------------------------------------------------------------------------
FFTS = {
    "fft": lambda x: tnp.fft.fft(x),
    "fft_axis0_n": lambda x: tnp.fft.fft(x, n=7, axis=0, norm="ortho"),
    "ifft": lambda x: tnp.fft.ifft(x, axis=-1, norm="forward"),
    "fft2": lambda x: tnp.fft.fft2(x),
    "rfft": lambda x: tnp.fft.rfft(x),
    "rfft_axis0_n": lambda x: tnp.fft.rfft(x, n=5, axis=0),
    "rfftn": lambda x: tnp.fft.rfftn(x),
    "irfft": lambda x: tnp.fft.irfft(x),
    "irfft_axis0_n": lambda x: tnp.fft.irfft(x, n=7, axis=0, norm="ortho"),
    "irfftn": lambda x: tnp.fft.irfftn(x, s=(4, 6)),
}


@pytest.mark.parametrize("axis", [0, 1, -1])
@pytest.mark.parametrize("name", sorted(FFTS))
def test_fft(name, axis):
    rng = _rng(4)
    x = _batched(_gen, (4, 6), axis, rng)
    if name.startswith("irfft"):
        x = x + 1j * _batched(_gen, (4, 6), axis, rng)
    _check(FFTS[name], (x,), (axis,))


def test_fft_float32_stays_single():
    x = _batched(_gen, (3, 8), 1, _rng(), np.float32)
    _check(lambda x: tnp.fft.rfft(x, axis=0), (x,), (1,), np.float32)
    assert tg.vmap(tnp.fft.rfft, in_axes=1)(x).dtype == np.complex64
    z = tg.vmap(tnp.fft.rfft, in_axes=1)(x)
    _check(tnp.fft.irfft, (z,), (0,), np.float32)


# ---- composition ---------------------------------------------------------------------------------
def _scalar(f):
    """A scalar function of the operands: the sum of every output, a sin to make it non-linear."""
    return lambda *xs: sum(tnp.sum(tnp.sin(tnp.real(o))) for o in (lambda out: out if isinstance(out, tuple)
                                                                   else (out,))(f(*xs)))


COMPOSED = {  # name: (function, draws per operand, example shapes)
    "cholesky": (tnp.linalg.cholesky, [_spd], [(N, N)]),
    "slogdet": (lambda a: tnp.linalg.slogdet(a).logabsdet, [_sq], [(N, N)]),
    "det": (tnp.linalg.det, [_sq], [(N, N)]),
    "eigh": (_eigh, [_sym], [(N, N)]),
    "qr": (lambda a: tuple(tnp.linalg.qr(a)), [_wc], [(N + 1, N)]),
    "svd": (_svd, [_wc], [(N, N + 1)]),
    "inv": (tnp.linalg.inv, [_sq], [(N, N)]),
    "pinv": (tnp.linalg.pinv, [_wc], [(N + 1, N)]),
    "expm": (tsl.expm, [lambda shape, rng: 0.5 * rng.standard_normal(shape)], [(N, N)]),
    "solve": (tnp.linalg.solve, [_sq, _gen], [(N, N), (N,)]),
    "solve_triangular": (_tri(True), [_sq, _gen], [(N, N), (N, 2)]),
    "fft": (lambda x: tnp.fft.fft(x, n=5), [_gen], [(4,)]),
    "rfft": (lambda x: tnp.fft.rfft(x, axis=0), [_gen], [(4, 2)]),
    "irfft": (lambda x: tnp.fft.irfft(x, n=5), [_gen], [(4,)]),
}


def _operands(name, axes, seed=5):
    _, draws, shapes = COMPOSED[name]
    rng = _rng(seed)
    return tuple(_batched(d, s, ax, rng) for d, s, ax in zip(draws, shapes, axes))


def _axes_for(name):
    """Every operand mapped, and (two operands) only the second mapped."""
    return [(0,) * len(COMPOSED[name][1])] + ([(None, -1)] if len(COMPOSED[name][1]) == 2 else [])


def _close(got, want):
    for g, w in zip(_leaves(got), _leaves(want)):
        assert_close(g, w, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("name", sorted(COMPOSED))
def test_vmap_of_grad(name):
    f = _scalar(COMPOSED[name][0])
    for axes in _axes_for(name):
        args = _operands(name, axes)
        argnums = tuple(i for i, ax in enumerate(axes) if ax is not None)
        g = tg.grad(f, grad_position=argnums)
        got = tg.vmap(g, in_axes=axes)(*args)
        want = _loop(g, args, axes)
        _close(got, want)


@pytest.mark.parametrize("name", sorted(COMPOSED))
def test_grad_of_vmap(name):
    """The gradient of the batch's sum: per example the example's gradient; a shared operand's is
    the sum over the examples."""
    f = _scalar(COMPOSED[name][0])
    for axes in _axes_for(name):
        args = _operands(name, axes)
        positions = tuple(range(len(args)))
        got = tg.grad(lambda *xs, axes=axes: tnp.sum(tg.vmap(f, in_axes=axes)(*xs)), grad_position=positions)(*args)
        per_example = _loop(tg.grad(f, grad_position=positions), args, axes)
        want = [np.moveaxis(p, 0, ax) if ax is not None else p.sum(0) for p, ax in zip(per_example, axes)]
        _close(got, tuple(want))


@pytest.mark.parametrize("name", sorted(COMPOSED))
def test_vmap_of_vmap(name):
    """Two batch axes: the outer at 0 of the data, the inner (2 examples: ``x`` and ``2 x + I``, as
    well conditioned as ``x``) at 1 of the outer's examples, among the matrix axes."""
    f = COMPOSED[name][0]
    args = _operands(name, [0] * len(COMPOSED[name][1]))
    args = tuple(np.stack([x, 2.0 * x + (np.eye(*x.shape[-2:]) if x.ndim >= 3 else 0.0)], axis=min(2, x.ndim))
                 for x in args)
    inner = (1,) * len(args)
    got = _leaves(tg.vmap(tg.vmap(f, in_axes=inner), in_axes=0)(*args))
    want = _loop(lambda *xs: tuple(_loop(f, xs, inner)), args, (0,) * len(args))
    _close(got, want)


@pytest.mark.parametrize("name", ["cholesky", "eigh", "solve", "solve_triangular", "expm", "rfft", "irfft"])
def test_vmap_of_jvp(name):
    f = COMPOSED[name][0]
    axes = (0,) * len(COMPOSED[name][1])
    args = _operands(name, axes)
    tangents = _operands(name, axes, seed=6)

    def tangent_out(*xs):
        n = len(xs) // 2
        return tg.jvp(f, tuple(xs[:n]), tuple(xs[n:]))[1]
    both = args + tangents
    got = tg.vmap(tangent_out)(*both)
    _close(got, tuple(_loop(tangent_out, both, (0,) * len(both))))


@pytest.mark.parametrize("name", ["solve", "solve_triangular", "svd", "fft"])
def test_jvp_of_vmap(name):
    """The batch rules on forward-mode tracers: the tangent of the batch is the batch of tangents."""
    f = COMPOSED[name][0]
    for axes in _axes_for(name):
        args = _operands(name, axes)
        tangents = _operands(name, axes, seed=6)
        got = tg.jvp(tg.vmap(f, in_axes=axes), args, tangents)[1]
        n = len(args)
        want = _loop(lambda *xs, n=n: tg.jvp(f, xs[:n], xs[n:])[1], args + tangents, axes * 2)
        _close(got, want)
