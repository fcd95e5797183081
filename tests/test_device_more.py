"""More tables on the strict device double: sorting, medians and quantiles (tests/test_sorting.py),
scipy.stats (tests/test_stats.py), complex holomorphic functions (tests/test_complex.py) and the
pooling, normalisation and convolution functionals, each through the routes of ``_device_check``."""
from __future__ import annotations

import numpy as np
import pytest

import test_complex as complex_table
import test_sorting as sorting_table
import test_stats as stats_table
from _device_check import check_route, grid
from tapegrad.nn import functional as F
from tapegrad.scipy.stats import multivariate_normal as mvn
from tapegrad.scipy.stats import norm

NAME = lambda d: np.dtype(d).name  # noqa: E731


@pytest.mark.parametrize("spec,shapes,dtype,route", grid(
    [(c.values[0], c.values[1]) for c in sorting_table.CASES], [np.float64, np.float32], unpack=True,
    ids=(lambda c: f"{c[0].name}-{c[1]}", NAME)))
def test_sorting_and_quantiles(spec, shapes, dtype, route):
    import tapegrad.numpy as tnp
    check_route(route, lambda *a: spec.op(tnp, *a), sorting_table._args(spec, shapes, dtype))


@pytest.mark.parametrize("name,shapes,dtype,route", grid(
    stats_table.NORM_X + stats_table.NORM_Q, stats_table.NORM_SHAPES, [np.float64, np.float32],
    ids=(str, str, NAME)))
def test_norm(name, shapes, dtype, route):
    check_route(route, getattr(norm, name), stats_table._norm_args(name, shapes, dtype))


@pytest.mark.parametrize("name,shapes,route", grid(["logpdf", "pdf"], stats_table.MVN_SHAPES, ids=(str, str)))
def test_multivariate_normal(name, shapes, route):
    rng = np.random.default_rng(1)
    d = shapes[1][-1]
    mean = rng.standard_normal(shapes[1])
    x = mean + rng.standard_normal(shapes[0])
    check_route(route, getattr(mvn, name), (x, mean, stats_table._spd(d, np.float64, rng)))


@pytest.mark.parametrize("name,fn,domain,dtype,route", grid(
    complex_table.HOLOMORPHIC, [np.complex128, np.complex64], unpack=True, ids=(lambda c: c[0], NAME)))
def test_holomorphic(name, fn, domain, dtype, route):
    check_route(route, fn, (complex_table._draw((3, 2), dtype, np.random.default_rng(0), domain),))


FUNCTIONALS = [
    ("max_pool2d", lambda x: F.max_pool2d(x, 2, stride=1, padding=1), (2, 2, 5, 4)),
    ("avg_pool1d", lambda x: F.avg_pool1d(x, 3, stride=2, padding=1, count_include_pad=False), (2, 3, 7)),
    ("adaptive_avg_pool2d", lambda x: F.adaptive_avg_pool2d(x, (2, 3)), (1, 2, 5, 7)),
    ("batch_norm", lambda x: F.batch_norm(x, None, None, training=True), (4, 3, 2)),
    ("layer_norm", lambda x: F.layer_norm(x, (3, 2)), (4, 3, 2)),
    ("group_norm", lambda x: F.group_norm(x, 2), (2, 4, 3)),
    ("conv2d", lambda x: F.conv2d(x, x[:3, :, :2, :2] * 0.5, padding=1), (3, 2, 4, 5)),
    ("conv_transpose2d", lambda x: F.conv_transpose2d(x, x[:2, :, :3, :3], stride=2), (2, 2, 3, 3)),
]


@pytest.mark.parametrize("name,fn,shape,route", grid(FUNCTIONALS, unpack=True, ids=(lambda c: c[0],)))
def test_functional(name, fn, shape, route):
    check_route(route, fn, (np.random.default_rng(2).standard_normal(shape),))
