"""sparse_jacfwd, sparse_jacrev and sparse_hessian for a given pattern: the colourings are valid (column
colourings proper, star colourings with no two-coloured path on four vertices), the five-point stencil
takes 5 colours, and the recovered Jacobians and Hessians equal the dense ones (tg.jacfwd, tg.jacrev,
tg.hessian) entry for entry, with exactly the pattern's entries stored."""
import numpy as np
import pytest

sp = pytest.importorskip("scipy.sparse")

import tapegrad as tg  # noqa: E402
import tapegrad.numpy as tnp  # noqa: E402
from tapegrad._colouring import color_columns as _color_columns  # noqa: E402
from tapegrad._colouring import pattern_of as _pattern  # noqa: E402
from tapegrad._colouring import star_colouring, symmetric_gather  # noqa: E402


def stencil_pattern(k: int):
    """The five-point stencil's pattern on a k x k grid, cells numbered row-major."""
    lap = sp.diags_array([np.ones(k - 1), np.ones(k), np.ones(k - 1)], offsets=[-1, 0, 1])
    eye = sp.eye_array(k)
    return sp.csr_array(sp.kron(lap, eye) + sp.kron(eye, lap)) != 0


def laplacian_fn(u):
    """A nonlinear five-point stencil on a 2-D grid, zero outside it: its Jacobian has the stencil's pattern."""
    p = tnp.pad(u, 1)
    return p[:-2, 1:-1] + p[2:, 1:-1] + p[1:-1, :-2] + p[1:-1, 2:] - 4 * u + tnp.sin(u) * u


def banded_pattern(n: int, lower: int, upper: int):
    return sp.csr_array(sp.diags_array([np.ones(n - abs(d)) for d in range(-lower, upper + 1)],
                                       offsets=list(range(-lower, upper + 1)))) != 0


def random_pattern(m: int, n: int, density: float, seed: int):
    mask = np.random.default_rng(seed).random((m, n)) < density
    return mask


def matrix_fn(pattern, seed: int):
    """f(x) = sin(A x) + A (x * x) for a random A that is zero off ``pattern``: Jacobian pattern within it."""
    a = np.asarray(pattern.toarray() if sp.issparse(pattern) else pattern, dtype=float)
    a *= np.random.default_rng(seed).uniform(0.5, 1.5, a.shape)
    return lambda x: tnp.sin(a @ x) + a @ (x * x)


PATTERNS = {
    "banded": lambda: banded_pattern(12, 2, 1),
    "stencil": lambda: stencil_pattern(4),
    "random": lambda: random_pattern(9, 11, 0.25, 0),
    "random tall": lambda: random_pattern(15, 6, 0.3, 1),
    "dense row": lambda: np.vstack([np.ones((1, 7), bool), np.eye(7, dtype=bool)]),
}


def assert_proper(pattern, colours):
    """No two columns of one colour have an entry in the same row."""
    s = sp.csr_array(_pattern(pattern, "test"), dtype=np.int64)
    for colour in range(colours.max() + 1):
        per_row = s[:, np.flatnonzero(colours == colour)].sum(axis=1)
        assert per_row.max(initial=0) <= 1, f"colour {colour} has two columns sharing a row"


@pytest.mark.parametrize("name", PATTERNS)
def test_column_and_row_colourings_are_proper(name):
    pattern = _pattern(PATTERNS[name](), "test")
    colours = _color_columns(pattern)
    assert colours.shape == (pattern.shape[1],) and colours.min() == 0
    assert_proper(pattern, colours)
    assert_proper(pattern.T, _color_columns(pattern.T))  # the row colouring of sparse_jacrev


def test_a_wrong_colouring_is_caught():
    """The validity check can fail: two columns of one row given one colour."""
    with pytest.raises(AssertionError, match="sharing a row"):
        assert_proper(banded_pattern(5, 1, 0), np.zeros(5, dtype=int))


@pytest.mark.parametrize("k", [3, 10, 40])
def test_five_point_stencil_takes_five_colours(k):
    colours = _color_columns(_pattern(stencil_pattern(k), "test"))
    assert colours.max() + 1 == 5  # the optimum: a cell and its four neighbours need five
    assert_proper(stencil_pattern(k), colours)


def test_band_takes_its_width_in_colours():
    assert _color_columns(_pattern(banded_pattern(50, 2, 3), "test")).max() + 1 == 6


def dense_jacobian(fn, x, mode):
    m = np.asarray(fn(x)).size
    return np.asarray((tg.jacfwd if mode == "fwd" else tg.jacrev)(fn)(x)).reshape(m, x.size)


SPARSE = {"fwd": tg.sparse_jacfwd, "rev": tg.sparse_jacrev}


def assert_recovered(jac, dense, pattern, rtol):
    pattern = _pattern(pattern, "test")
    assert isinstance(jac, sp.csr_array)
    np.testing.assert_array_equal(jac.indptr, pattern.indptr)  # exactly the pattern's entries, in its layout
    np.testing.assert_array_equal(jac.indices, pattern.indices)
    assert np.count_nonzero(dense[~pattern.toarray()]) == 0  # the test's functions stay on their pattern
    np.testing.assert_allclose(jac.toarray(), dense, rtol=rtol, atol=0)


@pytest.mark.parametrize("mode", ["fwd", "rev"])
@pytest.mark.parametrize("name", [n for n in PATTERNS if n != "stencil"])
def test_recovery_equals_the_dense_jacobian(mode, name):
    pattern = PATTERNS[name]()
    fn = matrix_fn(pattern, seed=3)
    x = np.random.default_rng(4).standard_normal(pattern.shape[1])
    assert_recovered(SPARSE[mode](fn, pattern)(x), dense_jacobian(fn, x, mode), pattern, 1e-12)


@pytest.mark.parametrize("mode", ["fwd", "rev"])
def test_stencil_on_a_2d_input(mode):
    """A 2-D input and output: the Jacobian of the flattened output in the flattened input (C order)."""
    k = 5
    u = np.random.default_rng(5).standard_normal((k, k))
    jac = SPARSE[mode](laplacian_fn, stencil_pattern(k))(u)
    assert_recovered(jac, dense_jacobian(laplacian_fn, u, mode), stencil_pattern(k), 1e-12)


@pytest.mark.parametrize("mode", ["fwd", "rev"])
def test_under_jit(mode):
    pattern = banded_pattern(10, 1, 2)
    fn = matrix_fn(pattern, seed=6)
    x = np.random.default_rng(7).standard_normal(10)
    sparse_jac = SPARSE[mode](tg.jit(fn), pattern)
    for _ in range(2):  # the trace, then the cached program
        assert_recovered(sparse_jac(x), dense_jacobian(fn, x, mode), pattern, 1e-12)


@pytest.mark.parametrize("mode", ["fwd", "rev"])
def test_float32(mode):
    k = 4
    u = np.random.default_rng(8).standard_normal((k, k)).astype(np.float32)
    jac = SPARSE[mode](laplacian_fn, stencil_pattern(k))(u)
    assert jac.dtype == np.float32
    assert_recovered(jac, dense_jacobian(laplacian_fn, u, mode), stencil_pattern(k), 1e-6)


@pytest.mark.parametrize("mode", ["fwd", "rev"])
def test_a_superset_pattern_stores_zeros(mode):
    """A pattern wider than the Jacobian is exact too: its extra entries hold zeros."""
    fn = lambda x: x ** 3
    x = np.linspace(0.5, 2.0, 6)
    wide = banded_pattern(6, 1, 1)
    jac = SPARSE[mode](fn, wide)(x)
    assert jac.nnz == wide.nnz
    np.testing.assert_allclose(jac.toarray(), np.diag(3 * x ** 2), rtol=1e-13)


def test_extra_arguments_are_held_fixed():
    scale = np.array([1.0, 2.0, 3.0])
    jac = tg.sparse_jacfwd(lambda x, s, power=2: s * x ** power, np.eye(3, dtype=bool))(np.ones(3), scale, power=3)
    np.testing.assert_allclose(jac.toarray(), np.diag(3 * scale))


def test_an_empty_pattern_gives_a_zero_matrix():
    jac = tg.sparse_jacfwd(lambda x: 0 * x[:2], np.zeros((2, 3), bool))(np.ones(3))
    assert jac.shape == (2, 3) and jac.nnz == 0


def test_sparse_hessian_of_a_banded_objective():
    def objective(x):  # a chain: the Hessian is tridiagonal
        return tnp.sum(tnp.sin(x[1:] * x[:-1])) + tnp.sum(x ** 4)
    x = np.random.default_rng(9).standard_normal(11)
    pattern = banded_pattern(11, 1, 1)
    hess = tg.sparse_hessian(objective, pattern)(x)
    assert_recovered(hess, np.asarray(tg.hessian(objective)(x)), pattern, 1e-12)


def test_sparse_hessian_refuses_an_asymmetric_pattern():
    with pytest.raises(ValueError, match="symmetric"):
        tg.sparse_hessian(lambda x: tnp.sum(x), banded_pattern(4, 1, 0))
    with pytest.raises(ValueError, match="square"):
        tg.sparse_hessian(lambda x: tnp.sum(x), np.ones((2, 3), bool))


@pytest.mark.parametrize("mode", ["fwd", "rev"])
def test_a_pattern_of_the_wrong_shape(mode):
    with pytest.raises(ValueError, match=r"shape \(out.size, x.size\) = \(5, 5\)"):
        SPARSE[mode](lambda x: x * 2, np.eye(4, dtype=bool))(np.ones(5))


@pytest.mark.parametrize("bad", [np.eye(3), np.ones(3, bool), [[1, 0], [0, 1]]])
def test_a_pattern_that_is_not_boolean_or_sparse(bad):
    with pytest.raises(TypeError, match="2-D Boolean array"):
        tg.sparse_jacfwd(lambda x: x, bad)


@pytest.mark.parametrize("mode", ["fwd", "rev"])
def test_a_detectable_missing_nonzero_raises(mode):
    """J is lower bidiagonal, the pattern only its diagonal minus one entry: in every colouring the
    compressed Jacobian then holds a non-zero that no entry of the pattern claims."""
    fn = lambda x: x * tnp.concatenate([tnp.ones(1), x[:-1]])
    pattern = np.eye(4, dtype=bool)
    pattern[2, 2] = False
    with pytest.raises(ValueError, match="does not list"):
        SPARSE[mode](fn, pattern)(np.linspace(1.0, 2.0, 4))
    jac = SPARSE[mode](fn, pattern, check_pattern=False)(np.linspace(1.0, 2.0, 4))  # dropped on request
    assert jac.nnz == 3


def test_an_undetectable_missing_nonzero_is_mixed_in():
    """The documented limit of compressed recovery: the identity pattern puts every column in one
    colour, so the missing sub-diagonal of a bidiagonal J is added into the diagonal unseen."""
    fn = lambda x: x * tnp.concatenate([tnp.ones(1), x[:-1]])
    x = np.array([1.0, 2.0, 3.0])
    jac = tg.sparse_jacfwd(fn, np.eye(3, dtype=bool))(x)
    dense = dense_jacobian(fn, x, "fwd")
    np.testing.assert_allclose(jac.diagonal(), dense.sum(axis=1))  # each row's entries summed into one


def test_under_a_transform_it_says_why_not():
    pattern = np.eye(3, dtype=bool)
    with pytest.raises(TypeError, match="cannot carry a traced value"):
        tg.grad(lambda x: tg.sparse_jacfwd(lambda y: y * y, pattern)(x).sum())(np.ones(3))


def test_check_pattern_must_be_a_bool():
    with pytest.raises(TypeError, match="check_pattern must be a bool"):
        tg.sparse_jacrev(lambda x: x, np.eye(2, dtype=bool), check_pattern=1)


def test_colouring_matches_networkx_dsatur_count():
    """DSATUR's count agrees with networkx's DSATUR (its ``saturation_largest_first``) on random patterns,
    within one colour (ties are broken differently)."""
    nx = pytest.importorskip("networkx")
    for seed in range(3):
        pattern = _pattern(random_pattern(30, 25, 0.12, seed), "test")
        graph = nx.Graph()
        graph.add_nodes_from(range(25))
        for row in range(30):
            cols = pattern.indices[pattern.indptr[row]:pattern.indptr[row + 1]].tolist()
            graph.add_edges_from((a, b) for i, a in enumerate(cols) for b in cols[i + 1:])
        theirs = max(nx.greedy_color(graph, strategy="saturation_largest_first").values()) + 1
        ours = _color_columns(pattern).max() + 1
        assert abs(ours - theirs) <= 1


@pytest.mark.parametrize("mode", ["fwd", "rev"])
@pytest.mark.parametrize("chunk_size", [1, 2, 100])
def test_chunks_give_the_same_jacobian(mode, chunk_size):
    k = 4
    u = np.random.default_rng(10).standard_normal((k, k))
    jac = SPARSE[mode](laplacian_fn, stencil_pattern(k), chunk_size=chunk_size)(u)
    assert_recovered(jac, dense_jacobian(laplacian_fn, u, mode), stencil_pattern(k), 1e-12)


@pytest.mark.parametrize("bad", [0, -1, 1.5, True])
def test_chunk_size_must_be_a_positive_int(bad):
    with pytest.raises(ValueError, match="chunk_size must be a positive int"):
        tg.sparse_jacfwd(lambda x: x, np.eye(2, dtype=bool), chunk_size=bad)


def test_sparse_hessian_in_chunks():
    objective = lambda x: tnp.sum(tnp.cos(x[2:] - x[:-2]) * x[1:-1])
    x = np.random.default_rng(11).standard_normal(9)
    pattern = banded_pattern(9, 2, 2)
    assert_recovered(tg.sparse_hessian(objective, pattern, chunk_size=2)(x), np.asarray(tg.hessian(objective)(x)),
                     pattern, 1e-12)


# ---------------------------------------------------------------------------------------------------------
# Star colouring and symmetric recovery (sparse_hessian)

def arrow_pattern(n: int):
    """The diagonal, the first row and the first column: column colouring needs n colours, star 2."""
    mask = np.eye(n, dtype=bool)
    mask[0] = mask[:, 0] = True
    return mask


def random_symmetric_pattern(n: int, density: float, seed: int):
    mask = np.random.default_rng(seed).random((n, n)) < density
    return mask | mask.T | np.eye(n, dtype=bool)


SYMMETRIC = {
    "band 1": lambda: banded_pattern(15, 1, 1),
    "band 3": lambda: banded_pattern(20, 3, 3),
    "arrow": lambda: arrow_pattern(12),
    "arrow and band": lambda: arrow_pattern(12) | banded_pattern(12, 1, 1).toarray(),
    "stencil": lambda: stencil_pattern(4),
    "random": lambda: random_symmetric_pattern(25, 0.1, 0),
    "random dense": lambda: random_symmetric_pattern(20, 0.3, 1),
}


def assert_star(pattern, colours):
    """Adjacent vertices differ, and no path on four vertices a - b - c - d is two-coloured (colour of a
    equal to c's and b's equal to d's): every such path is enumerated."""
    pattern = _pattern(pattern, "test")
    neighbours = [set(pattern.indices[pattern.indptr[v]:pattern.indptr[v + 1]].tolist()) - {v}
                  for v in range(pattern.shape[0])]
    for a, near in enumerate(neighbours):
        for b in near:
            assert colours[a] != colours[b], f"adjacent {a} and {b} share colour {colours[a]}"
            for c in neighbours[b] - {a}:
                for d in neighbours[c] - {a, b}:
                    assert not (colours[a] == colours[c] and colours[b] == colours[d]), \
                        f"the path {a} - {b} - {c} - {d} is two-coloured"


def test_the_star_check_can_fail():
    """A proper colouring of a path on four vertices with two colours is not a star colouring."""
    path = banded_pattern(4, 1, 1)
    assert_proper_adjacency = np.array([0, 1, 0, 1])
    with pytest.raises(AssertionError, match="two-coloured"):
        assert_star(path, assert_proper_adjacency)
    with pytest.raises(AssertionError, match="share colour"):
        assert_star(path, np.array([0, 0, 1, 2]))


@pytest.mark.parametrize("name", SYMMETRIC)
def test_star_colourings_are_star(name):
    pattern = _pattern(SYMMETRIC[name](), "test")
    colours = star_colouring(pattern)
    assert colours.shape == (pattern.shape[0],) and colours.min() == 0
    assert_star(pattern, colours)
    assert colours.max() <= _color_columns(pattern).max()  # never more colours than column colouring


def test_star_colourings_of_random_patterns():
    """Twenty random symmetric patterns from sparse to nearly dense: each colouring is star, takes no more
    colours than column colouring, and leaves every entry a place of its own (symmetric_gather)."""
    rng = np.random.default_rng(25)
    for _ in range(20):
        n, density = int(rng.integers(5, 40)), float(rng.uniform(0.02, 0.6))
        pattern = _pattern(random_symmetric_pattern(n, density, int(rng.integers(1 << 30))), "test")
        colours = star_colouring(pattern)
        assert_star(pattern, colours)
        assert colours.max() <= _color_columns(pattern).max()
        gather = symmetric_gather(pattern, colours)
        assert gather.shape == (pattern.nnz,) and gather.max() < (colours.max() + 1) * n


@pytest.mark.parametrize("half", [1, 2, 3, 5])
def test_star_colouring_of_a_band_takes_no_more_than_column_colouring(half):
    """A band of half-bandwidth b: both take 2b + 1 (no direct recovery can do with fewer: an exhaustive
    search for b = 2, 3 finds no star colouring with 2b colours)."""
    pattern = _pattern(banded_pattern(60, half, half), "test")
    star, column = star_colouring(pattern).max() + 1, _color_columns(pattern).max() + 1
    assert star <= column == 2 * half + 1


def test_star_colouring_of_an_arrow_takes_two():
    pattern = _pattern(arrow_pattern(30), "test")
    assert star_colouring(pattern).max() + 1 == 2
    assert _color_columns(pattern).max() + 1 == 30


def test_symmetric_recovery_refuses_a_colouring_that_is_not_star():
    with pytest.raises(ValueError, match="not a star colouring"):
        symmetric_gather(_pattern(banded_pattern(4, 1, 1), "test"), np.array([0, 1, 0, 1]))


def pairwise_objective(pattern, seed: int):
    """sum over the pattern's pairs i < j of a_ij sin(x_i x_j), plus sum x^4 / 4 + x_0 sum cos(x) when the
    first row is in the pattern: a Hessian on the pattern (and the diagonal). The pairs are index arrays,
    so tg.hessian_sparsity finds exactly that pattern."""
    mask = np.triu(np.asarray(pattern.toarray() if sp.issparse(pattern) else pattern, dtype=bool), 1)
    first, second = np.nonzero(mask)
    a = np.random.default_rng(seed).uniform(0.5, 1.5, first.size)
    dense_first_row = bool(mask[0, 1:].all())

    def objective(x):
        value = tnp.sum(a * tnp.sin(x[first] * x[second])) + tnp.sum(x ** 4) / 4
        return value + x[0] * tnp.sum(tnp.cos(x[1:])) if dense_first_row else value
    return objective


@pytest.mark.parametrize("colouring", ["star", "column"])
@pytest.mark.parametrize("name", SYMMETRIC)
def test_sparse_hessian_equals_the_dense_hessian(name, colouring):
    pattern = SYMMETRIC[name]()
    objective = pairwise_objective(pattern, seed=12)
    x = np.random.default_rng(13).standard_normal(_pattern(pattern, "test").shape[0])
    hess = tg.sparse_hessian(objective, pattern, colouring=colouring)(x)
    assert_recovered(hess, np.asarray(tg.hessian(objective)(x)), pattern, 1e-12)
    if colouring == "star":
        assert abs(hess - hess.T).max() == 0  # each pair read once: exactly symmetric


def test_star_hessian_under_jit_in_chunks_and_on_a_2d_input():
    pattern = stencil_pattern(4)
    objective = pairwise_objective(pattern, seed=14)
    x = np.random.default_rng(15).standard_normal((4, 4))
    flat_objective = lambda u: objective(tnp.reshape(u, (-1,)))
    dense = np.asarray(tg.hessian(objective)(x.ravel()))
    for hess_fn in (tg.sparse_hessian(tg.jit(flat_objective), pattern), tg.sparse_hessian(flat_objective, pattern,
                                                                                          chunk_size=2)):
        for _ in range(2):
            assert_recovered(hess_fn(x), dense, pattern, 1e-12)


def test_star_hessian_float32():
    pattern = arrow_pattern(8)
    objective = pairwise_objective(pattern, seed=16)
    x = np.random.default_rng(17).standard_normal(8).astype(np.float32)
    hess = tg.sparse_hessian(objective, pattern)(x)
    assert hess.dtype == np.float32
    assert_recovered(hess, np.asarray(tg.hessian(objective)(x)), pattern, 50 * np.finfo(np.float32).eps)


def test_star_hessian_checks_the_pattern():
    """An arrow Hessian given a tridiagonal pattern (3 colours): row 0 of the product holds a colour none
    of its listed entries has."""
    objective = pairwise_objective(arrow_pattern(6), seed=18)
    with pytest.raises(ValueError, match="does not list"):
        tg.sparse_hessian(objective, banded_pattern(6, 1, 1))(np.linspace(0.1, 0.6, 6))


def test_sparse_hessian_options_are_checked():
    with pytest.raises(ValueError, match="colouring must be 'star'"):
        tg.sparse_hessian(lambda x: tnp.sum(x), np.eye(3, dtype=bool), colouring="acyclic")
    with pytest.raises(TypeError, match="check_pattern must be a bool"):
        tg.sparse_hessian(lambda x: tnp.sum(x), np.eye(3, dtype=bool), check_pattern="yes")


# ---------------------------------------------------------------------------------------------------------
# jit=True: the passes staged as one program

JIT_TRANSFORMS = {"fwd": tg.sparse_jacfwd, "rev": tg.sparse_jacrev}


@pytest.mark.parametrize("mode", ["fwd", "rev"])
def test_staged_passes_give_the_eager_jacobian(mode):
    k = 5
    u = np.random.default_rng(19).standard_normal((k, k))
    scaled = lambda v, s, power=1: laplacian_fn(v) * s ** power
    staged = JIT_TRANSFORMS[mode](scaled, stencil_pattern(k), jit=True)
    for s in (2.0, 3.0, np.full((k, k), 0.5)):  # a new value of an argument is an input, not a new program
        dense = dense_jacobian(lambda v, s=s: scaled(v, s, power=2), u, mode)
        assert_recovered(staged(u, s, power=2), dense, stencil_pattern(k), 1e-12)


@pytest.mark.parametrize("colouring", ["star", "column"])
def test_staged_hessian_in_chunks(colouring):
    pattern = arrow_pattern(9) | banded_pattern(9, 1, 1).toarray()
    objective = pairwise_objective(pattern, seed=20)
    x = np.random.default_rng(21).standard_normal(9)
    hess = tg.sparse_hessian(objective, pattern, colouring=colouring, jit=True, chunk_size=2)(x)
    assert_recovered(hess, np.asarray(tg.hessian(objective)(x)), pattern, 1e-12)


@pytest.mark.parametrize("mode", ["fwd", "rev"])
def test_staged_passes_check_the_shape_and_the_pattern(mode):
    with pytest.raises(ValueError, match=r"shape \(out.size, x.size\) = \(5, 5\)"):
        JIT_TRANSFORMS[mode](lambda x: x * 2, np.eye(4, dtype=bool), jit=True)(np.ones(5))
    fn = lambda x: x * tnp.concatenate([tnp.ones(1), x[:-1]])
    pattern = np.eye(4, dtype=bool)
    pattern[2, 2] = False
    with pytest.raises(ValueError, match="does not list"):
        JIT_TRANSFORMS[mode](fn, pattern, jit=True)(np.linspace(1.0, 2.0, 4))


def test_staged_empty_pattern_and_a_bad_flag():
    jac = tg.sparse_jacfwd(lambda x: 0 * x[:2], np.zeros((2, 3), bool), jit=True)(np.ones(3))
    assert jac.shape == (2, 3) and jac.nnz == 0
    with pytest.raises(TypeError, match="jit must be a bool"):
        tg.sparse_jacfwd(lambda x: x, np.eye(2, dtype=bool), jit="yes")


# ---------------------------------------------------------------------------------------------------------
# sparsity="auto" (the default): the pattern detected by tracing, once per signature of the arguments

@pytest.mark.parametrize("mode", ["fwd", "rev"])
@pytest.mark.parametrize("jit", [False, True])
def test_detected_pattern_gives_the_dense_jacobian(mode, jit):
    u = np.random.default_rng(22).standard_normal((5, 5))
    jac = SPARSE[mode](laplacian_fn, jit=jit)(u)
    assert_recovered(jac, dense_jacobian(laplacian_fn, u, mode), stencil_pattern(5), 1e-12)


@pytest.mark.parametrize("name", ["band 3", "arrow and band", "random"])
def test_detected_hessian_pattern_gives_the_dense_hessian(name):
    pattern = SYMMETRIC[name]()
    objective = pairwise_objective(pattern, seed=23)
    x = np.random.default_rng(24).standard_normal(_pattern(pattern, "test").shape[0])
    hess = tg.sparse_hessian(objective)(x)
    dense = np.asarray(tg.hessian(objective)(x))
    np.testing.assert_allclose(hess.toarray(), dense, rtol=1e-12, atol=0)
    given = _pattern(pattern, "test") + sp.eye_array(pattern.shape[0], format="csr") != 0
    assert (hess != 0).nnz <= hess.nnz <= given.nnz  # exact: the pattern the objective was built on


def test_detection_runs_once_per_signature(monkeypatch):
    import tapegrad._sparsity as sparsity
    calls = []
    real = sparsity.jacobian_sparsity
    monkeypatch.setattr(sparsity, "jacobian_sparsity", lambda *a, **k: calls.append(1) or real(*a, **k))
    pick = lambda x, index, scale: x[index] * scale  # noqa: E731
    jac = tg.sparse_jacfwd(pick)
    x = np.linspace(1.0, 2.0, 5)
    for scale in (1.0, 2.0, 3.0):  # a float argument is data: one detection
        np.testing.assert_allclose(jac(x, np.array([0, 2]), scale).toarray(), scale * np.eye(5)[[0, 2]])
    assert len(calls) == 1
    np.testing.assert_allclose(jac(x, np.array([1, 4]), 1.0).toarray(), np.eye(5)[[1, 4]])  # new index values
    jac(np.linspace(1.0, 2.0, 6), np.array([1, 4]), 1.0)  # a new shape of x
    assert len(calls) == 3


def test_an_unknown_sparsity_string_is_refused():
    with pytest.raises(TypeError, match="'auto' to detect it by tracing"):
        tg.sparse_jacfwd(lambda x: x, "detect")
