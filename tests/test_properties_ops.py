"""Property: on any shape, memory layout, dtype and value, each function of the table
(tests/_property_ops.py) computes what NumPy computes, or refuses clearly; it never writes to its
arguments nor returns a view of them. Profiles and example counts: tests/conftest.py, docs/fuzzing.md."""
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import tapegrad.numpy as tnp
from _property_ops import BINARY, NOT_OWNED, SPECS, cross_entropy_ref
from _strategies import COMPLEX, INEXACT, INTS, NONEMPTY, SHAPES, arrays, check_like_numpy
from tapegrad.nn import functional as F


@pytest.mark.parametrize("spec", SPECS, ids=repr)
@given(data=st.data())
def test_matches_numpy(spec, data):
    dtype = data.draw(st.sampled_from(spec.dtypes + spec.other_dtypes), label="dtype")
    operands, static = data.draw(spec.args(dtype, spec.any_values), label="arguments")
    check_like_numpy(spec.op, spec.ref, *operands, refuse_ok=dtype not in spec.dtypes, ulps=spec.ulps,
                     owned=spec.name not in NOT_OWNED, **static)


ALL_DTYPES = INEXACT + INTS + (np.bool_,)
# Python scalars are weak (NumPy 2): they take the array's dtype
SCALARS = st.one_of(st.integers(-3, 3), st.floats(-3, 3), st.sampled_from([0.0, np.inf, np.nan, 1e300]),
                    st.complex_numbers(max_magnitude=3))


@pytest.mark.parametrize("spec", [s for s in BINARY if s.name not in ("where", "clip")], ids=repr)
@given(data=st.data())
def test_binary_promotion(spec, data):
    """Mixed dtypes and Python scalars promote as NumPy 2 does: ``float32 * 2.0`` stays float32."""
    x = data.draw(arrays(st.sampled_from(ALL_DTYPES), SHAPES), label="x")
    y = data.draw(st.one_of(SCALARS, arrays(st.sampled_from(ALL_DTYPES), SHAPES.filter(
        lambda s: _broadcasts(s, x.shape)))), label="y")
    operands = (y, x) if data.draw(st.booleans(), label="swap") else (x, y)
    # dtypes the op does not document may be refused (clearly), never computed wrongly
    documented = all(np.result_type(o).type in spec.dtypes for o in operands if isinstance(o, np.ndarray))
    check_like_numpy(spec.op, spec.ref, *operands, refuse_ok=not documented, ulps=spec.ulps)


def _broadcasts(a, b):
    try:
        np.broadcast_shapes(a, b)
        return True
    except ValueError:
        return False


@given(x=arrays(st.sampled_from(INEXACT), SHAPES))
def test_python_operators(x):
    """The operators on plain arrays stay NumPy's, and tapegrad's functions agree with them."""
    check_like_numpy(lambda a: tnp.add(tnp.multiply(a, 2.0), 1), lambda a: a * 2.0 + 1, x)


@pytest.mark.parametrize("name", ["var", "std"])
@given(x=arrays(st.sampled_from(COMPLEX), NONEMPTY))
def test_complex_var_std(name, x):
    check_like_numpy(getattr(tnp, name), getattr(np, name), x)


@given(x=arrays(np.float16, NONEMPTY, lo=-65504, hi=65504))
def test_mean_float16_accumulates_in_float32(x):
    check_like_numpy(tnp.mean, np.mean, np.concatenate([x.ravel(), [65504, 65504]]).astype(np.float16))


@given(x=arrays(np.float64, (2, 3), lo=-3, hi=3))
def test_cross_entropy_minus_inf(x):
    """A masked logit (-inf, off the target) contributes nothing: PyTorch gives a finite loss."""
    x = x.copy()
    x[:, 2] = -np.inf
    labels = np.array([0, 1])
    check_like_numpy(lambda a: F.cross_entropy(a, labels), lambda a: cross_entropy_ref(a, labels), x)
