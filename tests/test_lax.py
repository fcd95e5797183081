"""tapegrad.lax: JAX's dynamic slices and reduce_window against hand-written NumPy (values for many
shapes, starts, paddings, strides and dilations), traced starts under jit, vmap and grad, derivatives
to order 2 in both modes and to order 3 by two routes against twins written with plain slicing, vmap
against a loop, jit on the Python executor (and the compiled one where numba is installed), the
errors, and JAX's own values and gradients (peer tests)."""
import itertools
import operator

import numpy as np
import pytest

import tapegrad as tg
import tapegrad.numpy as tnp
from _tol import assert_close
from _vmapcheck import check_vmap
from tapegrad import lax

RNG = np.random.default_rng(0)


def data(*shape):
    """Distinct values (no ties: every window's max and min is one element)."""
    return RNG.permutation(np.arange(np.prod(shape), dtype=np.float64)).reshape(shape) / 7.0 - 1.0


# ---- hand-written references ---------------------------------------------------------------------
def np_start(start, dim, size, allow_negative=True):
    """XLA's start: negative from the end (where allowed), clamped to [0, dim - size]."""
    start = start + dim if start < 0 and allow_negative else start
    return min(max(start, 0), dim - size)


def np_dynamic_slice(x, starts, sizes):
    return x[tuple(slice(np_start(s, d, n), np_start(s, d, n) + n) for s, d, n in zip(starts, x.shape, sizes))]


def np_dynamic_update_slice(x, u, starts):
    out = x.copy()
    out[tuple(slice(np_start(s, d, n), np_start(s, d, n) + n) for s, d, n in zip(starts, x.shape, u.shape))] = u
    return out


REDUCE = {"max": max, "min": min, "add": operator.add}


def np_reduce_window(x, init, name, window, strides, pads, base, dilation):
    """Every window by loops: the positions of the dilated, padded operand that hold an element of
    ``x`` (holes and padding hold none), reduced from ``init``."""
    ndim = x.ndim
    where = {}  # position in the dilated, padded frame -> x's element
    for idx in itertools.product(*(range(n) for n in x.shape)):
        where[tuple(i * b + lo for i, b, (lo, _) in zip(idx, base, pads))] = x[idx]
    frame = [(n - 1) * b + 1 + lo + hi if n else lo + hi for n, b, (lo, hi) in zip(x.shape, base, pads)]
    extent = [(w - 1) * d + 1 for w, d in zip(window, dilation)]
    out_shape = tuple(max(0, (f - e) // s + 1) if f >= e else 0 for f, e, s in zip(frame, extent, strides))
    out = np.empty(out_shape)
    for o in itertools.product(*(range(n) for n in out_shape)):
        acc = init
        for k in itertools.product(*(range(w) for w in window)):
            pos = tuple(oi * s + ki * d for oi, s, ki, d in zip(o, strides, k, dilation))
            if pos in where:
                acc = REDUCE[name](acc, where[pos])
        out[o] = acc
    assert out.ndim == ndim
    return out


# ---- dynamic_slice, dynamic_update_slice: values -------------------------------------------------
SLICES = [  # shape, starts, sizes: inside, clamped past the end, negative, past the start, empty, whole
    ((7,), (2,), (3,)), ((7,), (6,), (3,)), ((7,), (-2,), (3,)), ((7,), (-9,), (2,)), ((7,), (3,), (0,)),
    ((4, 5), (1, 2), (2, 3)), ((4, 5), (3, -1), (2, 1)), ((4, 5), (-1, 0), (1, 5)), ((4, 5), (2, 9), (4, 5)),
    ((3, 4, 5), (1, 0, 2), (2, 4, 3)), ((3, 4, 5), (-5, 3, -1), (1, 2, 2)),
]


@pytest.mark.parametrize("shape, starts, sizes", SLICES)
def test_dynamic_slice_known_and_traced_starts(shape, starts, sizes):
    x = data(*shape)
    want = np_dynamic_slice(x, starts, sizes)
    assert_close(lax.dynamic_slice(x, starts, sizes), want)
    assert_close(lax.dynamic_slice(x, np.array(starts), sizes), want)  # a 1-D array of starts
    traced = tg.jit(lambda x, *s: lax.dynamic_slice(x, s, sizes))(x, *starts)
    assert traced.shape == sizes
    assert_close(traced, want)
    assert_close(tg.jit(lambda x, s: lax.dynamic_slice(x, s, sizes))(x, np.array(starts)), want)  # traced array


@pytest.mark.parametrize("shape, starts, sizes", SLICES)
def test_dynamic_update_slice_known_and_traced_starts(shape, starts, sizes):
    x, u = data(*shape), -data(*sizes) - 10.0
    want = np_dynamic_update_slice(x, u, starts)
    assert_close(lax.dynamic_update_slice(x, u, starts), want)
    assert_close(tg.jit(lambda x, u, *s: lax.dynamic_update_slice(x, u, s))(x, u, *starts), want)


def test_negative_starts_without_allow_negative_indices_clamp_to_zero():
    x = data(6)
    f = tg.jit(lambda x, i: lax.dynamic_slice(x, (i,), (2,), allow_negative_indices=False))
    assert_close(f(x, -1), x[:2])  # JAX: counted from the end only where allowed
    assert_close(lax.dynamic_slice(x, (-1,), (2,), allow_negative_indices=True), x[4:])
    g = tg.jit(lambda x, i: lax.dynamic_update_slice(x, np.zeros(2), (i,), allow_negative_indices=[False]))
    assert_close(g(x, -3), np.concatenate([np.zeros(2), x[2:]]))


def test_in_dim_spellings():
    x = data(4, 5)
    assert_close(lax.dynamic_slice_in_dim(x, 3, 2, axis=1), x[:, 3:5])
    assert_close(lax.dynamic_slice_in_dim(x, -1, 2), x[2:])
    assert_close(lax.dynamic_index_in_dim(x, 2, axis=-1), x[:, 2:3])
    assert_close(lax.dynamic_index_in_dim(x, 7, keepdims=False), x[3])  # clamped into the axis
    u = np.full((4, 1), 9.0)
    want = x.copy()
    want[:, 1:2] = u
    assert_close(lax.dynamic_update_slice_in_dim(x, u, 1, axis=1), want)
    assert_close(tg.jit(lambda x, i: lax.dynamic_update_index_in_dim(x, u[:, 0], i, 1))(x, 1), want)  # rank n-1
    assert_close(lax.dynamic_update_index_in_dim(x, u, 1, 1), want)  # rank n


def test_dtypes_and_integer_operands_are_kept():
    x = np.arange(10, dtype=np.int32).reshape(2, 5)
    out = tg.jit(lambda x, i: lax.dynamic_slice(x, (0, i), (2, 2)))(x, np.int32(4))
    assert out.dtype == np.int32 and out.tolist() == [[3, 4], [8, 9]]
    f32 = data(5).astype(np.float32)
    assert lax.dynamic_update_slice(f32, np.ones(2, np.float32), (1,)).dtype == np.float32


# ---- dynamic slices: derivatives and vmap --------------------------------------------------------
@pytest.mark.parametrize("sizes", [(2, 3), (1, 4), (3, 1)])
def test_dynamic_slice_gradients_with_traced_starts(sizes):
    """Order 2, both modes, through jit with traced starts (the gather and the index paths)."""
    x = data(3, 4)
    sliced = tg.jit(lambda x, i, j: lax.dynamic_slice(x, (i, j), sizes))
    tg.testing.check_grads(lambda x: tnp.sin(sliced(x, 1, -2)) * 2.0, (x,), order=2, modes=("fwd", "rev"))
    g = tg.grad(lambda x, i: tnp.sum(sliced(x, i, 2) ** 2))(x, 5)
    want = np.zeros_like(x)
    window = tuple(slice(np_start(s, d, n), np_start(s, d, n) + n) for s, d, n in zip((5, 2), x.shape, sizes))
    want[window] = 2 * x[window]
    assert_close(g, want)


def test_dynamic_update_slice_gradients_in_operand_and_update():
    x, u = data(4, 5), data(2, 3)
    update = tg.jit(lambda x, u, i, j: lax.dynamic_update_slice(x, u, (i, j)))
    for i, j in ((1, 2), (3, -1)):
        tg.testing.check_grads(lambda x, u, i=i, j=j: tnp.sin(update(x, u, i, j)), (x, u), order=2,
                               modes=("fwd", "rev"))
    one_row = tg.jit(lambda x, r, i: lax.dynamic_update_index_in_dim(x, r, i, 0))  # the basic-index path
    tg.testing.check_grads(lambda x, r: tnp.cos(one_row(x, r, 2)), (x, data(5)), order=2, modes=("fwd", "rev"))


def _third_derivatives(f, x):
    """f's third derivative by two routes: jacfwd of jacrev of grad, and grad of the Hessian's weighted sum."""
    w = np.linspace(0.5, 1.5, x.size).reshape(x.shape)
    first = tg.jacfwd(tg.jacrev(tg.grad(f)))(x)
    second = tg.grad(lambda x: tnp.sum(tg.hessian(f)(x) * w[..., None, None]))(x)
    return first, second, w


def test_dynamic_slice_third_derivatives_match_a_static_slice():
    x = data(3, 4) / 3.0

    def f(x, i):
        return tnp.sum(tnp.sin(lax.dynamic_slice(x, (i, i), (2, 3))) ** 3)

    def twin(x):
        return tnp.sum(tnp.sin(x[1:3, 1:4]) ** 3)

    traced = tg.jit(f)
    got_a, got_b, w = _third_derivatives(lambda x: traced(x, 1), x)
    want_a, want_b, _ = _third_derivatives(twin, x)
    assert_close(got_a, want_a)
    assert_close(got_b, want_b)
    assert_close(got_b, np.einsum("ij,ijklmn->mn", w, want_a), ulps=256)  # the two routes agree


def test_dynamic_slices_under_vmap():
    x = data(4, 5)
    def slice_rows(x, i):
        return lax.dynamic_slice(x, (i, 1), (2, 3))
    def draw(rng):
        return data(4, 5), rng.integers(-6, 6)
    for in_axes in ((0, None), (None, 0), (0, 0), (1, 0)):
        check_vmap(slice_rows, (x, np.int64(3)), in_axes, batch=4, draw=draw)
    def write(x, u, i):
        return lax.dynamic_update_slice(x, u, (i, i))
    def draw_update(rng):
        return data(4, 5), data(1, 3), rng.integers(-5, 5)
    for in_axes in ((0, 0, 0), (None, 0, 0), (0, None, 0), (0, 0, None)):
        check_vmap(write, (x, data(1, 3), np.int64(2)), in_axes, batch=4, draw=draw_update)
    # per-example gradients with per-example starts
    grads = tg.vmap(tg.grad(lambda x, i: tnp.sum(lax.dynamic_index_in_dim(x, i) ** 2)), in_axes=(None, 0))(
        x, np.array([0, -1, 9]))
    for g, row in zip(grads, (0, 3, 3)):
        want = np.zeros_like(x)
        want[row] = 2 * x[row]
        assert_close(g, want)


# ---- reduce_window: values -----------------------------------------------------------------------
WINDOWS = [  # shape, window, strides, padding, base dilation, window dilation
    ((7,), (3,), (1,), "VALID", None, None),
    ((7,), (2,), (2,), "SAME", None, None),
    ((8,), (3,), (3,), "SAME_LOWER", None, None),
    ((7,), (2,), (1,), ((2, 1),), None, (3,)),
    ((6,), (3,), (2,), ((1, 2),), (2,), None),
    ((4, 5), (2, 3), (1, 2), "VALID", None, None),
    ((4, 5), (3, 2), (2, 1), "SAME", None, (1, 2)),
    ((4, 5), (2, 2), (1, 1), ((1, 0), (-1, 2)), (2, 1), None),
    ((5, 4), (2, 3), (3, 1), ((0, 3), (2, 2)), (1, 2), (2, 1)),
    ((2, 5, 6, 3), (1, 2, 2, 1), (1, 2, 2, 1), "VALID", None, None),  # stax's MaxPool, NHWC
    ((2, 3, 5, 4), (1, 1, 3, 3), (1, 1, 1, 1), "SAME", None, None),
    ((3, 4), (5, 1), (1, 1), "VALID", None, None),  # a window larger than the operand: no output
]


def _pads(shape, window, strides, padding, dilation):
    extent = [(w - 1) * d + 1 for w, d in zip(window, dilation or (1,) * len(window))]
    return lax.padtype_to_pads(shape, extent, strides, padding) if isinstance(padding, str) else padding


@pytest.mark.parametrize("name, init", [("max", -np.inf), ("min", np.inf), ("add", 0.0), ("max", 0.25),
                                        ("add", 1.5)])
@pytest.mark.parametrize("case", WINDOWS)
def test_reduce_window_values(case, name, init):
    shape, window, strides, padding, base, dilation = case
    x = data(*shape)
    ones = (1,) * len(shape)
    want = np_reduce_window(x, init, name, window, strides, _pads(shape, window, strides, padding, dilation),
                            base or ones, dilation or ones)
    computation = getattr(lax, name)
    got = lax.reduce_window(x, init, computation, window, strides, padding, base, dilation)
    assert got.shape == want.shape and got.dtype == x.dtype
    assert_close(got, want)
    jitted = tg.jit(lambda x: lax.reduce_window(x, init, computation, window, strides, padding, base, dilation))
    assert_close(jitted(x), want)


def test_padtype_to_pads_as_jax_spells_it():
    assert lax.padtype_to_pads((7, 6), (3, 2), (2, 2), "SAME") == [(1, 1), (0, 0)]
    assert lax.padtype_to_pads((8,), (3,), (3,), "same_lower") == [(1, 0)]
    assert lax.padtype_to_pads((8,), (3,), (3,), "VALID") == [(0, 0)]


def test_reduce_window_other_spellings_and_dtypes():
    x = data(2, 6).astype(np.float32)
    for computation in (tnp.maximum, np.maximum):
        assert_close(lax.reduce_window(x, -np.inf, computation, (1, 2), (1, 2)), x.reshape(2, 3, 2).max(-1))
    assert lax.reduce_window(x, 0.0, operator.add, (1, 3), (1, 3)).dtype == np.float32
    i = np.arange(12, dtype=np.int64).reshape(3, 4)
    out = lax.reduce_window(i, -np.inf, lax.max, (2, 2), (1, 1), "SAME")  # -inf: no init for integers
    assert out.dtype == np.int64 and out.tolist() == [[5, 6, 7, 7], [9, 10, 11, 11], [9, 10, 11, 11]]
    assert lax.reduce_window(i, 0, lax.add, (3, 4), None).tolist() == [[66]]


def test_reduce_window_ties_split_the_gradient_evenly():
    """Documented difference from JAX, which gives a tied window's gradient to one element."""
    x = np.array([1.0, 3.0, 3.0, 2.0, 3.0])
    g = tg.grad(lambda x: tnp.sum(lax.reduce_window(x, -np.inf, lax.max, (3,), (2,))))(x)
    assert_close(g, [0.0, 0.5, 1.0, 0.0, 0.5])


# ---- reduce_window: derivatives, vmap, jit -------------------------------------------------------
# every window holds an element of the operand (a window of padding alone is -inf, whose sin is nan)
GRAD_CASES = [WINDOWS[3], WINDOWS[4], WINDOWS[6], ((4, 5), (2, 2), (1, 1), ((1, 0), (-1, 1)), (2, 1), None),
              WINDOWS[8]]


@pytest.mark.parametrize("name, init", [("max", -np.inf), ("min", np.inf), ("add", 0.0)])
@pytest.mark.parametrize("case", GRAD_CASES)
def test_reduce_window_gradients_order_2(case, name, init):
    shape, window, strides, padding, base, dilation = case
    computation = getattr(lax, name)
    def f(x):
        return tnp.sin(lax.reduce_window(x, init, computation, window, strides, padding, base, dilation))
    tg.testing.check_grads(f, (data(*shape),), order=2, modes=("fwd", "rev"))


def test_reduce_window_gradient_in_a_traced_init_value():
    x = data(5)
    def f(x, init):
        return lax.reduce_window(x, init, lax.max, (2,), (1,), ((1, 1),)) ** 2
    tg.testing.check_grads(f, (x, 0.1), order=2, modes=("fwd", "rev"))
    g = tg.jit(tg.grad(lambda init: tnp.sum(lax.reduce_window(x, init, lax.add, (2,)))))(2.0)
    assert_close(g, 4.0)  # added once per window


def _max_pool_twin(x):
    """A (2, 3)-window, (1, 2)-stride max over x padded by ((1, 0), (0, 1)) with -inf, written as one
    tnp.max per window over the plain slice of x it covers (padding holds nothing)."""
    rows = []
    for r in range(x.shape[0]):  # padded height x.shape[0] + 1, window 2
        cols = []
        for c in range(0, x.shape[1] + 1 - 2, 2):  # padded width x.shape[1] + 1, window 3, stride 2
            cols.append(tnp.max(x[max(r - 1, 0):r + 1, c:min(c + 3, x.shape[1])]))
        rows.append(tnp.stack(cols))
    return tnp.stack(rows)


def test_reduce_window_third_derivatives_match_a_twin_of_plain_slices():
    x = data(3, 5) / 3.0

    def pooled(pool):
        return lambda x: tnp.sum(tnp.sin(pool(tnp.sin(x))) ** 2)

    def ours(x):
        return lax.reduce_window(x, -np.inf, lax.max, (2, 3), (1, 2), ((1, 0), (0, 1)))

    assert_close(ours(x), _max_pool_twin(x))
    got_a, got_b, w = _third_derivatives(pooled(tg.jit(ours)), x)
    want_a, want_b, _ = _third_derivatives(pooled(_max_pool_twin), x)
    assert_close(got_a, want_a)
    assert_close(got_b, want_b)
    assert_close(want_b, np.einsum("ij,ijklmn->mn", w, want_a), ulps=256)


def test_reduce_window_under_vmap():
    for name, init in (("max", -np.inf), ("add", 0.0)):
        for shape, *window_args in (WINDOWS[7], WINDOWS[8]):
            def f(x, init=init, name=name, window_args=window_args):
                return lax.reduce_window(x, init, getattr(lax, name), *window_args)
            for in_axes in ((0,), (1,), (-1,)):
                check_vmap(f, (data(*shape),), in_axes, batch=3)
    def floored(x, init):  # a traced init_value, batched or shared
        return lax.reduce_window(x, init, lax.max, (2, 2), (1, 2), "SAME")
    for in_axes in ((0, 0), (None, 0), (0, None)):
        check_vmap(floored, (data(3, 4), np.float64(0.1)), in_axes, batch=3)
    # per-example gradients of a max-pool
    xs = data(3, 4, 5)
    grads = tg.vmap(tg.grad(lambda x: tnp.sum(lax.reduce_window(x, -np.inf, lax.max, (2, 2), (2, 2)) ** 2)))(xs)
    for x, g in zip(xs, grads):
        assert_close(g, tg.grad(lambda x: tnp.sum(lax.reduce_window(x, -np.inf, lax.max, (2, 2), (2, 2)) ** 2))(x))


# ---- re-exports ----------------------------------------------------------------------------------
def test_control_flow_under_lax_names():
    for name in ("cond", "switch", "scan", "fori_loop", "while_loop", "map", "stop_gradient", "custom_root",
                 "custom_linear_solve"):
        assert getattr(lax, name) is getattr(tg, name), name
    table = data(6, 2)  # a closed-over NumPy table indexed by the loop counter
    total = tg.jit(lambda: lax.fori_loop(0, 6, lambda i, c: c + lax.dynamic_index_in_dim(table, i, 0, False),
                                         tnp.zeros(2)))()
    assert_close(total, table.sum(0))
    assert_close(lax.select(np.array([True, False]), np.ones(2), np.zeros(2)), [1.0, 0.0])


# ---- errors --------------------------------------------------------------------------------------
@pytest.mark.parametrize("call, error, words", [
    (lambda x: lax.dynamic_slice(x, (1,), (2, 2)), ValueError, ["start_indices has 1 entries", "one start per"]),
    (lambda x: lax.dynamic_slice(x, (1, 1), (2,)), ValueError, ["slice_sizes has 1 entries", "one size per"]),
    (lambda x: lax.dynamic_slice(x, (1, 1), (5, 2)), ValueError, ["slice_sizes (5, 2) does not fit"]),
    (lambda x: lax.dynamic_slice(x, (1, 1), (2.0, 2)), TypeError, ["slice_sizes must be a sequence of Python ints"]),
    (lambda x: lax.dynamic_slice(x, (np.float64(1.0), 0), (2, 2)), TypeError,
     ["start_indices[0] must be a scalar integer", ".astype(int)"]),
    (lambda x: lax.dynamic_slice(x, (-1, 0), (2, 2), allow_negative_indices=False), ValueError,
     ["start_indices[0] is -1", "allow_negative_indices=True"]),
    (lambda x: lax.dynamic_update_slice(x, np.ones(2), (0, 0)), ValueError, ["update has shape (2,)", "rank"]),
    (lambda x: lax.dynamic_slice_in_dim(x, 0, 1, axis=2), ValueError, ["axis 2 is out of range"]),
    (lambda x: lax.reduce_window(x, 0.0, lax.add, (2, 2), (1, 1), "FULL"), ValueError,
     ["padding 'FULL'", "'VALID', 'SAME', 'SAME_LOWER'"]),
    (lambda x: lax.reduce_window(x, 0.0, lax.add, (2, 2), (1, 1), ((1, 1),)), ValueError,
     ["padding has 1 pairs", "one (low, high) pair per dimension"]),
    (lambda x: lax.reduce_window(x, 0.0, lax.add, (2,)), ValueError,
     ["window_dimensions has 1 entries", "1 for an axis the window does not span"]),
    (lambda x: lax.reduce_window(x, 0.0, lax.add, (2, 2), (0, 1)), ValueError, ["window_strides (0, 1)", "positive"]),
    (lambda x: lax.reduce_window(x, 1.0, tnp.multiply, (2, 2)), NotImplementedError,
     ["lax.max, lax.min or lax.add"]),
    (lambda x: lax.reduce_window(x, np.zeros(2), lax.add, (2, 2)), TypeError, ["init_value must be a scalar"]),
])
def test_errors_name_the_argument_and_the_fix(call, error, words):
    with pytest.raises(error) as info:
        call(data(4, 3))
    for word in words:
        assert word in str(info.value), (word, str(info.value))


def test_traced_float_start_is_refused_under_jit():
    with pytest.raises(TypeError, match=r"start_indices\[1\] must be a scalar integer"):
        tg.jit(lambda x, s: lax.dynamic_slice(x, (0, s), (2, 2)))(data(3, 3), 1.0)


# ---- device arrays (the strict double; CuPy under TAPEGRAD_DEVICE=cupy) -----------------------------
def test_device_operands_stay_on_the_device_with_no_synchronisation():
    """Device operands and device start indices, eagerly and under jit, grad and vmap: the positions of
    a gather and a known init_value are made on the operand's device, and nothing is read back."""
    import warnings

    import _device
    x, starts = data(4, 5), np.array([0, 2, 3])
    dx, du, di = _device.asarray(x), _device.asarray(-np.ones((2, 3))), _device.asarray(np.int64(3))
    slice_at = tg.jit(lambda x, i: lax.dynamic_slice(x, (i, 2), (2, 3)))
    update_at = tg.jit(lambda x, u, i: lax.dynamic_update_slice(x, u, (i, 1)))
    def pooled(x):  # a known init_value, and padding and base dilation on the device
        return tnp.sum(lax.reduce_window(x, 1.5, lax.add, (2, 2), (1, 2), "SAME") ** 2) + tnp.sum(
            tnp.sin(lax.reduce_window(x, -np.inf, lax.max, (2, 2), (1, 1), ((1, 0), (0, 1)), (2, 1))))
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="cupyx.allow_synchronize will be removed")
        with _device.xpx.allow_synchronize(False):
            outs = (lax.dynamic_slice(dx, (di, 2), (2, 3)), slice_at(dx, di), update_at(dx, du, di),
                    tg.grad(lambda x: tnp.sum(slice_at(x, di) ** 2))(dx),
                    tg.vmap(lambda i: lax.dynamic_slice_in_dim(dx, i, 2, 1))(_device.asarray(starts)),
                    pooled(dx), tg.grad(pooled)(dx))
    assert all(isinstance(out, _device.DeviceArray) for out in outs)
    wants = (np_dynamic_slice(x, (3, 2), (2, 3)), np_dynamic_slice(x, (3, 2), (2, 3)),
             np_dynamic_update_slice(x, -np.ones((2, 3)), (3, 1)),
             tg.grad(lambda x: tnp.sum(slice_at(x, 3) ** 2))(x),
             np.stack([np_dynamic_slice(x, (0, i), (4, 2)) for i in starts]), pooled(x),
             tg.grad(pooled)(x))
    for out, want in zip(outs, wants):
        assert_close(_device.get(out), want)


# ---- the compiled executor -----------------------------------------------------------------------
def test_compiled_executor_runs_index_slices_and_window_sums(tmp_path, monkeypatch):
    """What lowers (docs/lax.md): slices at known starts, a traced start of a length-1 slice, window
    sums. A traced start of a longer slice (a gather) and a window max keep the Python executor."""
    pytest.importorskip("numba")
    monkeypatch.setenv("TAPEGRAD_NUMBA_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("TAPEGRAD_NATIVE_STRICT", "1")
    monkeypatch.setattr(tg.config, "compiled_executor", True)
    x = data(3, 4)  # small values, unrolled in the generated code: numba compiles arrays for seconds each
    def program(x, row, i):
        return (lax.dynamic_index_in_dim(x, i, 0, False), lax.dynamic_update_index_in_dim(x, row, i, 0),
                lax.reduce_window(x, 0.0, lax.add, (2, 3), (1, 1)))
    compiled = tg.jit(program)
    assert compiled.executor(x, data(4), 1) == "numba"
    read, written, sums = compiled(x, np.ones(4), -1)
    assert_close(read, x[2])
    assert_close(written, np.concatenate([x[:2], np.ones((1, 4))]))
    assert_close(sums, np_reduce_window(x, 0.0, "add", (2, 3), (1, 1), ((0, 0), (0, 0)), (1, 1), (1, 1)))
    gather = tg.jit(lambda x, i: lax.dynamic_slice(x, (i, 0), (2, 4)))
    assert gather.executor(x, 1) == "python"
    assert_close(gather(x, 3), x[1:])


# ---- JAX -----------------------------------------------------------------------------------------
def _jax():
    import jax
    jax.config.update("jax_enable_x64", True)
    return jax


@pytest.mark.peer("jax")
@pytest.mark.parametrize("shape, starts, sizes", SLICES)
def test_dynamic_slices_match_jax(shape, starts, sizes):
    jax = _jax()
    x, u = data(*shape), data(*sizes) + 3.0
    w = np.linspace(-1.0, 2.0, int(np.prod(sizes))).reshape(sizes)
    assert_close(lax.dynamic_slice(x, starts, sizes), jax.lax.dynamic_slice(x, starts, sizes))
    ours = tg.grad(lambda x, *s: tnp.sum(lax.dynamic_slice(x, s, sizes) * w))
    theirs = jax.grad(lambda x, *s: jax.numpy.sum(jax.lax.dynamic_slice(x, s, sizes) * w))
    assert_close(tg.jit(ours)(x, *starts), theirs(x, *starts))
    assert_close(lax.dynamic_update_slice(x, u, starts), jax.lax.dynamic_update_slice(x, u, starts))
    ours = tg.grad(lambda x, u, *s: tnp.sum(lax.dynamic_update_slice(x, u, s) ** 2), grad_position=(0, 1))
    theirs = jax.grad(lambda x, u, *s: jax.numpy.sum(jax.lax.dynamic_update_slice(x, u, s) ** 2), argnums=(0, 1))
    for a, b in zip(tg.jit(ours)(x, u, *starts), theirs(x, u, *starts)):
        assert_close(a, b)
    for axis in range(len(shape)):
        for keepdims in (True, False):
            assert_close(lax.dynamic_index_in_dim(x, starts[axis], axis, keepdims),
                         jax.lax.dynamic_index_in_dim(x, starts[axis], axis, keepdims))


@pytest.mark.peer("jax")
@pytest.mark.parametrize("name, init", [("max", -np.inf), ("min", np.inf), ("add", 0.0), ("max", 0.25),
                                        ("add", 1.5)])
@pytest.mark.parametrize("case", WINDOWS)
def test_reduce_window_matches_jax(case, name, init):
    jax = _jax()
    shape, window, strides, padding, base, dilation = case
    x = data(*shape)
    ours = lambda x: lax.reduce_window(x, init, getattr(lax, name), window, strides, padding, base, dilation)
    theirs = lambda x: jax.lax.reduce_window(x, init, getattr(jax.lax, name), window, strides, padding, base,
                                             dilation)
    assert_close(ours(x), theirs(x))
    identity = {"max": -np.inf, "min": np.inf, "add": 0.0}[name]
    if init != identity or (name != "add" and (dilation or base)):
        return  # JAX differentiates only its monoid windows, and a max or min of no dilation
    w = RNG.normal(size=ours(x).shape)
    assert_close(tg.grad(lambda x: tnp.sum(ours(x) * w))(x), jax.grad(lambda x: jax.numpy.sum(theirs(x) * w))(x))
