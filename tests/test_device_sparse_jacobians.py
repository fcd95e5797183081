"""sparse_jacfwd, sparse_jacrev and sparse_hessian on a device: on the strict device double
(``tests/_device_sparse.py`` stands for ``cupyx.scipy.sparse``) and on real CuPy with
``TAPEGRAD_DEVICE=cupy``. The result is the device's ``csr_matrix`` whose data never left the device,
equal to the host's Jacobian entry for entry; a missing entry of the pattern is still reported."""
from __future__ import annotations

import importlib

import numpy as np
import pytest
import scipy.sparse as sp

import _device  # noqa: F401 (installs the double's cupyx.scipy)
import tapegrad as tg
import tapegrad.numpy as tnp
from _device import DeviceArray, xp

xsparse = importlib.import_module(f"{xp.__name__}x.scipy.sparse")


def chain(v):
    return v[1:] * tnp.sin(v[:-1]) + v[1:] ** 2


CHAIN = sp.eye_array(7, 8) + sp.eye_array(7, 8, k=1) != 0


def energy(x):
    """A tridiagonal Hessian with a dense last row and column (an arrow): star colouring takes 4."""
    return tnp.sum(tnp.sin(x[1:] * x[:-1])) + tnp.sum(x ** 4) / 4 + x[-1] * tnp.sum(tnp.cos(x[:-1]))


def energy_pattern(n: int):
    mask = (sp.eye_array(n) + sp.eye_array(n, k=1) + sp.eye_array(n, k=-1)).toarray() != 0
    mask[-1] = mask[:, -1] = True
    return mask


def assert_device_equal(J, host):
    assert type(J) is xsparse.csr_matrix and type(J.data) is DeviceArray
    got = J.get()
    np.testing.assert_array_equal(got.indptr, host.indptr)
    np.testing.assert_array_equal(got.indices, host.indices)
    np.testing.assert_allclose(got.data, host.data, rtol=1e-12, atol=0)


@pytest.mark.parametrize("jit", [False, True])
@pytest.mark.parametrize("transform", [tg.sparse_jacfwd, tg.sparse_jacrev])
def test_jacobians_on_the_device_equal_the_host(transform, jit):
    v = np.linspace(0.5, 1.5, 8)
    jac = transform(chain, CHAIN, jit=jit)
    assert_device_equal(jac(xp.asarray(v)), transform(chain, CHAIN)(v))


@pytest.mark.parametrize("colouring", ["star", "column"])
def test_hessian_on_the_device_equals_the_host(colouring):
    x = np.linspace(-1.0, 1.0, 9)
    pattern = energy_pattern(9)
    hess = tg.sparse_hessian(energy, pattern, colouring=colouring, jit=True)
    assert_device_equal(hess(xp.asarray(x)), tg.sparse_hessian(energy, pattern)(x))


def test_a_missing_entry_is_reported_on_the_device():
    fn = lambda x: x * tnp.concatenate([x[:1] ** 0, x[:-1]])  # noqa: E731 (J bidiagonal; x ** 0 on x's device)
    pattern = np.eye(4, dtype=bool)
    pattern[2, 2] = False
    with pytest.raises(ValueError, match="does not list"):
        tg.sparse_jacfwd(fn, pattern)(xp.asarray(np.linspace(1.0, 2.0, 4)))
