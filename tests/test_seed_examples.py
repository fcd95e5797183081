"""The seed libraries' documented gradient examples, reproduced through tapegrad's public API with the
documented inputs and asserted against the documented numbers.

Sources (each test names its own):

- MindSpore ``mindspore.grad`` / ``mindspore.value_and_grad`` / ``mindspore.get_grad`` /
  ``mindspore.vjp`` API pages (docstrings of ``mindspore/python/mindspore/ops/function/grad/grad_func.py``,
  e.g. https://www.mindspore.cn/docs/en/r2.2/api_python/mindspore/mindspore.grad.html), and the older
  ``mindspore.ops.grad`` page (https://mindspore.cn/docs/en/r1.7/api_python/ops/mindspore.ops.grad.html).
- Paddle ``paddle.grad`` API page (https://paddlepaddle.org.cn/documentation/docs/en/api/paddle/grad_en.html;
  docstring of ``python/paddle/base/dygraph/base.py``), code examples 1 and 2.
- nnabla ``nnabla.grad.grad`` API page, "Example (Higer-order Gradients)"
  (https://sony.github.io/nnabla-doc/nnabla/versions/v1.18.0/python/api/grad.html; docstring of
  ``python/src/nnabla/grad.py``).

The code is ours; the inputs and numbers are the docs'. Where a documented example uses a random
initialisation (MindSpore's ``nn.Dense(10, 1)`` example) we pass explicit ``weight_init``/``bias_init``
arrays and fixed-seed data, and compute the expected gradients by hand with NumPy.
"""
import numpy as np
import pytest

import tapegrad as tg
import tapegrad.numpy as tnp
from _tol import assert_close


def f32(a):
    return np.asarray(a, dtype=np.float32)


def assert_f32_close(actual, expected, **kw):
    assert isinstance(actual, np.ndarray), type(actual)
    assert actual.dtype == np.float32, actual.dtype
    assert_close(actual, expected, **kw)


# ------------------------------------------------------------------------------------------------
# MindSpore: mindspore.grad, Net.construct(x, y, z) = x * y * z
# ------------------------------------------------------------------------------------------------
def xyz_net(x, y, z):
    return x * y * z


# mindspore.grad API page (r2.x), first example:
#   x = [1, 2], y = [-2, 3], z = [0, 3] (float32); grad(net, grad_position=(1, 2))(x, y, z)
#   -> ([0, 6], [-2, 6])
def test_mindspore_grad_positions_1_2():
    x, y, z = f32([1, 2]), f32([-2, 3]), f32([0, 3])
    out = tg.grad(xyz_net, grad_position=(1, 2))(x, y, z)
    assert isinstance(out, tuple) and len(out) == 2
    assert_f32_close(out[0], [0, 6])
    assert_f32_close(out[1], [-2, 6])


# mindspore.ops.grad API page (r1.7): the same net on 2x2 inputs
#   x = [[1, 2], [3, 4]], y = [[-2, 3], [-1, 2]], z = [[0, 3], [5, -1]]; grad_position=(1, 2)
#   -> dy = x * z = [[0, 6], [15, -4]] (printed in the docs); dz = x * y = [[-2, 6], [-3, 8]].
def test_mindspore_ops_grad_positions_1_2_matrices():
    x = f32([[1, 2], [3, 4]])
    y = f32([[-2, 3], [-1, 2]])
    z = f32([[0, 3], [5, -1]])
    dy, dz = tg.grad(xyz_net, grad_position=(1, 2))(x, y, z)
    assert_f32_close(dy, [[0, 6], [15, -4]])
    assert_f32_close(dz, [[-2, 6], [-3, 8]])


# mindspore.grad API page, "Case 4: return the gradient with ids", and mindspore.get_grad API page:
#   grad(net, grad_position=(1, 2), return_ids=True)(x, y, z) -> ((1, [0, 6]), (2, [-2, 6]));
#   get_grad(out_grad, 1) -> [0, 6]
def test_mindspore_grad_return_ids_and_get_grad():
    x, y, z = f32([1, 2]), f32([-2, 3]), f32([0, 3])
    out = tg.grad(xyz_net, grad_position=(1, 2), return_ids=True)(x, y, z)
    assert len(out) == 2
    (id1, g1), (id2, g2) = out
    assert (id1, id2) == (1, 2)
    assert_f32_close(g1, [0, 6])
    assert_f32_close(g2, [-2, 6])
    assert_f32_close(tg.get_grad(out, 1), [0, 6])
    assert_f32_close(tg.get_grad(out, 2), [-2, 6])


# mindspore.value_and_grad API page, first example:
#   value_and_grad(net, grad_position=1)(x, y, z) -> output [-0., 18.], inputs_gradient [0., 6.]
def test_mindspore_value_and_grad_position_1():
    x, y, z = f32([1, 2]), f32([-2, 3]), f32([0, 3])
    output, inputs_gradient = tg.value_and_grad(xyz_net, grad_position=1)(x, y, z)
    assert_f32_close(output, [-0.0, 18.0])
    assert_f32_close(inputs_gradient, [0, 6])


# ------------------------------------------------------------------------------------------------
# MindSpore: has_aux, fn(x, y, z) = (x * exp(y) * z**2, z)
# ------------------------------------------------------------------------------------------------
def aux_fn(x, y, z):
    res = x * tnp.exp(y) * tnp.power(z, 2)
    return res, z


# mindspore.grad API page, "Function object to be differentiated":
#   x = [3, 3], y = [0, 0], z = [5, 5]; gradient, aux = grad(fn, (1, 2), None, True)(x, y, z)
#   -> gradient ([75, 75], [30, 30]), aux ([5, 5],)
def test_mindspore_grad_has_aux():
    x, y, z = f32([3, 3]), f32([0, 0]), f32([5, 5])
    gradient, aux = tg.grad(aux_fn, (1, 2), None, True)(x, y, z)
    assert isinstance(gradient, tuple) and len(gradient) == 2
    assert_f32_close(gradient[0], [75, 75])
    assert_f32_close(gradient[1], [30, 30])
    assert isinstance(aux, tuple) and len(aux) == 1
    assert_f32_close(aux[0], [5, 5])


# mindspore.value_and_grad API page, "Function object to be differentiated":
#   value_and_grad(fn, grad_position=(1, 2), weights=None, has_aux=True)(x, y, z)
#   -> output ([75, 75], [5, 5]), inputs_gradient ([75, 75], [30, 30])
def test_mindspore_value_and_grad_has_aux():
    x, y, z = f32([3, 3]), f32([0, 0]), f32([5, 5])
    output, inputs_gradient = tg.value_and_grad(aux_fn, grad_position=(1, 2), weights=None,
                                                has_aux=True)(x, y, z)
    assert isinstance(output, tuple) and len(output) == 2
    assert_f32_close(output[0], [75, 75])
    assert_f32_close(output[1], [5, 5])
    assert len(inputs_gradient) == 2
    assert_f32_close(inputs_gradient[0], [75, 75])
    assert_f32_close(inputs_gradient[1], [30, 30])


# ------------------------------------------------------------------------------------------------
# MindSpore: vjp
# ------------------------------------------------------------------------------------------------
# mindspore.vjp API page: Net.construct(x, y) = x**3 + y, x = y = [[1, 2], [3, 4]], v = ones
#   outputs [[2, 10], [30, 68]]; vjp_fn(v) -> ([[3, 12], [27, 48]], ones)
#   fn(x, y) = (2 * x + y, y**3) with has_aux=True: outputs [[3, 6], [9, 12]],
#   aux [[1, 8], [27, 64]] (bare, two outputs), vjp_fn(v) -> (2 * ones, ones)
def test_mindspore_vjp_example():
    x = f32([[1, 2], [3, 4]])
    y = f32([[1, 2], [3, 4]])
    v = f32([[1, 1], [1, 1]])
    outputs, vjp_fn = tg.vjp(lambda x, y: x ** 3 + y, x, y)
    assert_f32_close(outputs, [[2, 10], [30, 68]])
    gradient = vjp_fn(v)
    assert isinstance(gradient, tuple) and len(gradient) == 2
    assert_f32_close(gradient[0], [[3, 12], [27, 48]])
    assert_f32_close(gradient[1], [[1, 1], [1, 1]])


def test_mindspore_vjp_has_aux_example():
    x = f32([[1, 2], [3, 4]])
    y = f32([[1, 2], [3, 4]])
    v = f32([[1, 1], [1, 1]])
    outputs, vjp_fn, aux = tg.vjp(lambda x, y: (2 * x + y, y ** 3), x, y, has_aux=True)
    assert_f32_close(outputs, [[3, 6], [9, 12]])
    assert_f32_close(aux, [[1, 8], [27, 64]])          # bare aux: exactly two outputs
    gradient = vjp_fn(v)
    assert_f32_close(gradient[0], [[2, 2], [2, 2]])
    assert_f32_close(gradient[1], [[1, 1], [1, 1]])    # y**3 is aux: no gradient through it


# ------------------------------------------------------------------------------------------------
# MindSpore: nn.Dense(10, 1) + MSELoss, weights = net.trainable_params()
# (needs tapegrad.nn.Dense and tapegrad.nn.functional.mse_loss)
# ------------------------------------------------------------------------------------------------
# mindspore.grad / mindspore.value_and_grad API pages, "For given network to be differentiated with
# both inputs and weights":
#   net = nn.Dense(10, 1); loss_fn = nn.MSELoss()
#   def forward(inputs, labels): logits = net(inputs); loss = loss_fn(logits, labels); return loss, logits
#   inputs (16, 10), labels (16, 1) float32; weights = net.trainable_params()
#   Case 1: grad_position=(0, 1), has_aux=True  -> len(inputs_gradient) == 2, aux_logits.shape == (16, 1)
#   Case 2: grad_position=None, weights=weights, has_aux=True -> len(weights) == len(params_gradient) == 2
#   Case 3: grad_position=0, weights=weights, has_aux=False -> (inputs_gradient, params_gradient)
# The docs use np.random data and random init and print shapes only; we fix the data and the init
# and check the values against hand-computed NumPy gradients.
class DenseMSE:
    def __init__(self):
        rng = np.random.default_rng(20240501)
        self.W = rng.standard_normal((1, 10)).astype(np.float32)
        self.b = rng.standard_normal((1,)).astype(np.float32)
        self.inputs = rng.standard_normal((16, 10)).astype(np.float32)
        self.labels = rng.standard_normal((16, 1)).astype(np.float32)
        self.net = tg.nn.Dense(10, 1, weight_init=self.W, bias_init=self.b)
        self.weights = self.net.trainable_params()

    def forward(self, inputs, labels):
        logits = self.net(inputs)
        loss = tg.nn.functional.mse_loss(logits, labels)
        return loss, logits

    def expected(self, has_aux):
        """Hand-derived gradients (float64). Without has_aux both loss and logits are differentiated
        (sensitivity ones on every output), so d/dlogits gains a +1."""
        X, Y = self.inputs.astype(np.float64), self.labels.astype(np.float64)
        W, b = self.W.astype(np.float64), self.b.astype(np.float64)
        logits = X @ W.T + b
        r = logits - Y
        loss = np.mean(r ** 2)
        g_logits = 2 * r / r.size + (0.0 if has_aux else 1.0)
        return dict(loss=loss, logits=logits, g_inputs=g_logits @ W, g_labels=-2 * r / r.size,
                    g_W=g_logits.T @ X, g_b=g_logits.sum(axis=0))


TOL = dict(rtol=1e-5, atol=1e-6)


def test_mindspore_dense_case1_inputs_only():
    m = DenseMSE()
    grad_fn = tg.grad(m.forward, grad_position=(0, 1), weights=None, has_aux=True)
    inputs_gradient, (aux_logits,) = grad_fn(m.inputs, m.labels)
    e = m.expected(has_aux=True)
    assert len(inputs_gradient) == 2
    assert aux_logits.shape == (16, 1)
    assert_f32_close(aux_logits, e["logits"], **TOL)
    assert inputs_gradient[0].shape == (16, 10)
    assert_f32_close(inputs_gradient[0], e["g_inputs"], **TOL)
    assert_f32_close(inputs_gradient[1], e["g_labels"], **TOL)


def test_mindspore_dense_case2_weights_only():
    m = DenseMSE()
    weights = m.weights
    grad_fn = tg.grad(m.forward, grad_position=None, weights=weights, has_aux=True)
    params_gradient, (aux_logits,) = grad_fn(m.inputs, m.labels)
    e = m.expected(has_aux=True)
    assert len(weights) == 2 and len(params_gradient) == 2
    assert [w.name for w in weights] == ["weight", "bias"]   # attribute paths, as MindSpore names them
    assert isinstance(params_gradient, tuple)
    assert aux_logits.shape == (16, 1)
    g_W, g_b = params_gradient                          # trainable_params order: weight, bias
    assert g_W.shape == (1, 10) and g_b.shape == (1,)
    assert_f32_close(g_W, e["g_W"], **TOL)
    assert_f32_close(g_b, e["g_b"], **TOL)


@pytest.mark.filterwarnings("ignore::tapegrad.errors.MissingHasAuxWarning")  # MindSpore's sum of (loss, logits)
def test_mindspore_dense_case3_inputs_and_weights():
    m = DenseMSE()
    weights = m.weights
    grad_fn = tg.grad(m.forward, grad_position=0, weights=weights, has_aux=False)
    inputs_gradient, params_gradient = grad_fn(m.inputs, m.labels)
    e = m.expected(has_aux=False)
    assert len(weights) == 2 and len(params_gradient) == 2
    assert_f32_close(inputs_gradient, e["g_inputs"], **TOL)
    assert_f32_close(params_gradient[0], e["g_W"], **TOL)
    assert_f32_close(params_gradient[1], e["g_b"], **TOL)


def test_mindspore_dense_case4_return_ids_by_parameter():
    m = DenseMSE()
    weight, bias = m.weights
    grad_fn = tg.grad(m.forward, grad_position=0, weights=m.weights, has_aux=True, return_ids=True)
    gradients, _ = grad_fn(m.inputs, m.labels)
    e = m.expected(has_aux=True)
    assert_f32_close(tg.get_grad(gradients, 0), e["g_inputs"], **TOL)
    assert_f32_close(tg.get_grad(gradients, weight), e["g_W"], **TOL)
    assert_f32_close(tg.get_grad(gradients, bias), e["g_b"], **TOL)
    assert_f32_close(tg.get_grad(gradients, bias.name), e["g_b"], **TOL)


# mindspore.value_and_grad API page, the same three cases.
@pytest.mark.filterwarnings("ignore::tapegrad.errors.MissingHasAuxWarning")  # MindSpore's sum of (loss, logits)
def test_mindspore_dense_value_and_grad_cases():
    m = DenseMSE()
    e_aux, e_all = m.expected(has_aux=True), m.expected(has_aux=False)

    # Case 1: gradient with respect to inputs; only loss contributes.
    (loss, logits), inputs_gradient = tg.value_and_grad(
        m.forward, grad_position=0, weights=None, has_aux=True)(m.inputs, m.labels)
    assert logits.shape == (16, 1)
    assert m.inputs.shape == inputs_gradient.shape == (16, 10)
    assert_f32_close(loss, e_aux["loss"], **TOL)
    assert_f32_close(logits, e_aux["logits"], **TOL)
    assert_f32_close(inputs_gradient, e_aux["g_inputs"], **TOL)

    # Case 2: gradient with respect to weights; only loss contributes.
    (loss, logits), params_gradient = tg.value_and_grad(
        m.forward, grad_position=None, weights=m.weights, has_aux=True)(m.inputs, m.labels)
    assert logits.shape == (16, 1)
    assert len(m.weights) == len(params_gradient) == 2
    assert_f32_close(params_gradient[0], e_aux["g_W"], **TOL)
    assert_f32_close(params_gradient[1], e_aux["g_b"], **TOL)

    # Case 3: inputs and weights; has_aux=False, so both loss and logits contribute.
    (loss, logits), (inputs_gradient, params_gradient) = tg.value_and_grad(
        m.forward, grad_position=0, weights=m.weights, has_aux=False)(m.inputs, m.labels)
    assert logits.shape == (16, 1)
    assert inputs_gradient.shape == (16, 10)
    assert len(params_gradient) == 2
    assert_f32_close(loss, e_all["loss"], **TOL)
    assert_f32_close(inputs_gradient, e_all["g_inputs"], **TOL)
    assert_f32_close(params_gradient[0], e_all["g_W"], **TOL)
    assert_f32_close(params_gradient[1], e_all["g_b"], **TOL)


# ------------------------------------------------------------------------------------------------
# Paddle: paddle.grad
# ------------------------------------------------------------------------------------------------
# paddle.grad API page, code example 2 (grad_outputs):
#   x = 2.0; y1 = x * x; y2 = x * 3; dx = paddle.grad([y1, y2], [x], grad_outputs)[0]
#   dx = 2 * x * dy1 + 3 * dy2 = 4 * dy1 + 3 * dy2; a None entry (or None for all) means ones:
#   None -> 7, [None, 4] -> 16, [4, None] -> 19, [3, 4] -> 24.
# tapegrad spelling (docs/grad.md): vjp(fn, x)[1](cotangents); one vjp_fn serves all four calls
# (retain_graph).
@pytest.mark.parametrize("grad_outputs, expected", [
    (None, 7.0),
    ([None, 4.0], 16.0),
    ([4.0, None], 19.0),
    ([3.0, 4.0], 24.0),
])
def test_paddle_grad_outputs(grad_outputs, expected):
    x = f32(2.0)
    _, vjp_fn = tg.vjp(lambda x: [x * x, x * 3], x)
    if grad_outputs is not None:
        grad_outputs = [None if g is None else f32(g) for g in grad_outputs]
    (dx,) = vjp_fn(grad_outputs)
    assert_f32_close(dx, expected)
    assert dx.shape == ()


def test_paddle_grad_outputs_one_vjp_fn_reused():
    x = f32(2.0)
    outs, vjp_fn = tg.vjp(lambda x: [x * x, x * 3], x)
    assert_close(outs[0], 4.0)
    assert_close(outs[1], 6.0)
    g4, g3 = f32(4.0), f32(3.0)
    results = [vjp_fn(None)[0], vjp_fn([None, g4])[0], vjp_fn([g4, None])[0], vjp_fn([g3, g4])[0],
               vjp_fn(None)[0]]
    assert_close([float(r) for r in results], [7.0, 16.0, 19.0, 24.0, 7.0])


# paddle.grad API page, code example 1 (create_graph):
#   x = ones([1]); y = x * x; dx = paddle.grad([y], [x], create_graph=...)[0]; z = y + dx;
#   z.backward(); x.gradient() -> [4.] with create_graph=True (z = x*x + 2x), [2.] with
#   create_graph=False (dx treated as a constant, as no_grad_vars / stop_gradient do).
# tapegrad: create_graph is always on; the create_graph=False behaviour is stop_gradient (§1.2).
def test_paddle_create_graph():
    x = np.ones([1], dtype=np.float32)
    dy_dx = tg.grad(lambda x: x * x)

    g = tg.grad(lambda x: x * x + dy_dx(x))(x)
    assert_f32_close(g, [4.0])
    assert g.shape == (1,)


def test_paddle_create_graph_false_is_stop_gradient():
    x = np.ones([1], dtype=np.float32)
    dy_dx = tg.grad(lambda x: x * x)
    g = tg.grad(lambda x: x * x + tg.stop_gradient(dy_dx(x)))(x)
    assert_f32_close(g, [2.0])


# ------------------------------------------------------------------------------------------------
# nnabla: nnabla.grad.grad, "Example (Higer-order Gradients)"
# ------------------------------------------------------------------------------------------------
#   x = randn(2, 2); y = F.sin(x); dnx = grad(y, x, n=10) (nn.grad applied ten times)
#   np.allclose(-np.sin(x.d), dnx.d) -> True; dnx.backward(): np.allclose(-np.cos(x.d), x.g) -> True
def test_nnabla_tenth_derivative_of_sin():
    x = np.random.default_rng(0).standard_normal((2, 2))
    f = tnp.sin
    for _ in range(10):
        f = tg.grad(f)
    dnx = f(x)
    assert_close(dnx, -np.sin(x), rtol=1e-12, atol=1e-12)
    # dnx.backward(): the gradient of (the sum of) the tenth derivative is the eleventh, -cos(x)
    assert_close(tg.grad(f)(x), -np.cos(x), rtol=1e-12, atol=1e-12)


# nnabla.grad.grad API page, Returns: "If the backpropagation does not reach input(s), the
# corresponding returned value(s) are zero" (tapegrad: zeros of the input's shape and dtype).
def test_nnabla_unreached_input_is_zero():
    x, w = np.ones((2, 3)), np.ones((4,), np.float32)
    gx, gw = tg.grad(lambda x, w: tnp.sin(x).sum(), grad_position=(0, 1))(x, w)
    assert_close(gx, np.cos(x))
    assert gw.shape == (4,) and gw.dtype == np.float32
    np.testing.assert_array_equal(gw, 0)
