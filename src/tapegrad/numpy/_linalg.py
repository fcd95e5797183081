"""Products: ``matmul`` and ``einsum`` primitives; ``dot``, ``tensordot``, ``inner``, ``outer``,
``vdot`` on top of them."""
from __future__ import annotations

import operator
from collections.abc import Sequence
from typing import Any, cast

import numpy as np

from tapegrad import _lowerings
from tapegrad._array_type import Array
from tapegrad._backend import namespace_of
from tapegrad._core import ShapedArray, bind
from tapegrad._dependency import Contraction
from tapegrad._typing import ArrayLike
from tapegrad.extend import (
    broadcast_shapes,
    def_dependency,
    def_lowering,
    def_out_impl,
    def_shape_rule,
    defbatch,
    defjvp,
    defjvp_argnum,
    defvjp,
    defvjp_argnum,
    is_identity_basis,
    lead_batch,
    ndim_of,
    primitive,
    shape_of,
    strong_dtype,
    to_front,
)
from tapegrad.numpy import _shape
from tapegrad.numpy._creation import as_operand
from tapegrad.numpy._float16 import accumulates_in_float32, is_float16

# einsum's subscript letters: string.ascii_letters, spelled out because the string module's import was a few
# percent of `import tapegrad`'s
LETTERS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"


# ---- matmul --------------------------------------------------------------------------------------
def _matmul_vjp_x(ct, ans, x, y):
    if _shape.ndim(x) == 1 and _shape.ndim(y) == 1:
        return _shape.unbroadcast(ct * y, x)
    if _shape.ndim(y) == 1:  # (..., m, k) @ (k,) -> (..., m)
        return _shape.unbroadcast(_shape.expand_dims(ct, -1) * y, x)
    if _shape.ndim(x) == 1:  # (k,) @ (..., k, n) -> (..., n)
        return _shape.unbroadcast(_shape.squeeze(matmul(y, _shape.expand_dims(ct, -1)), -1), x)
    return _shape.unbroadcast(matmul(ct, _shape.swapaxes(y, -1, -2)), x)


def _matmul_vjp_y(ct, ans, x, y):
    if _shape.ndim(x) == 1 and _shape.ndim(y) == 1:
        return _shape.unbroadcast(ct * x, y)
    if _shape.ndim(x) == 1:  # (k,) @ (..., k, n): gy[..., k, n] = x[k] ct[..., n]
        return _shape.unbroadcast(_shape.expand_dims(x, -1) * _shape.expand_dims(ct, -2), y)
    if _shape.ndim(y) == 1 and _shape.ndim(x) == 2:  # (m, k) @ (k,): gy = ct @ x, one product, no transpose
        return _shape.unbroadcast(matmul(ct, x), y)
    if _shape.ndim(y) == 1:  # (..., m, k) @ (k,): gy[k] = sum x[..., m, k] ct[..., m]
        return _shape.unbroadcast(_shape.squeeze(matmul(_shape.swapaxes(x, -1, -2), _shape.expand_dims(ct, -1)), -1), y)
    return _shape.unbroadcast(matmul(_shape.swapaxes(x, -1, -2), ct), y)


def _matmul_aval(x, y):
    """``(..., m, k) @ (..., k, n) -> (..., m, n)``, a 1-D operand a vector (its axis dropped from
    the result); None (NumPy decides, or refuses) for scalars and mismatched ``k``."""
    xs, ys = tuple(x.shape), tuple(y.shape)
    if not xs or not ys or xs[-1] != (ys[0] if len(ys) == 1 else ys[-2]):
        return None
    batch = broadcast_shapes(xs[:-2], ys[:-2])
    shape = batch + xs[-2:-1] + ys[-1:] if len(ys) > 1 else batch + xs[-2:-1]
    # cast: the stubs of numpy 2.2.0 (the floor) lack ufunc.resolve_dtypes
    dtype = cast(Any, np.matmul).resolve_dtypes((strong_dtype(x), strong_dtype(y), None))[-1]
    return ShapedArray(shape, dtype)


matmul_p = primitive("matmul", lambda x, y: namespace_of(x, y).matmul(x, y))
def_shape_rule(matmul_p, _matmul_aval)  # the dummy evaluation would run the product itself
defvjp(matmul_p, _matmul_vjp_x, _matmul_vjp_y)
defjvp(matmul_p, lambda t, ans, x, y: matmul(t, y), lambda t, ans, x, y: matmul(x, t))
def_lowering(matmul_p, _lowerings.matmul)


def _matmul_batch(vals, dims):
    """The batch folded into one matrix product where an operand is shared: a batch of vectors or
    matrices times a shared matrix becomes one large product (``A @ X`` with the examples side by side
    as columns, or the rows of every example stacked), which BLAS runs far faster than a stack of
    small products. Otherwise a vector operand becomes a one-row or one-column matrix and the batch
    leads the stacked axes."""
    (x, y), (dx, dy) = vals, dims
    rx, ry = ndim_of(x) - (dx is not None), ndim_of(y) - (dy is not None)
    if dy is None and rx == 1 and _times_identity(x, y):  # e_b @ y for every basis vector e_b: y itself
        return _as_product(y, x), (0 if ry <= 2 else ry - 2)
    if dx is None and ry == 1 and _times_identity(y, x):  # x @ e_b: x's columns, x itself
        return _as_product(x, y), (rx - 1 if rx > 1 else 0)
    if dy is None and rx == 1:  # rows x_b @ y: (B, k) @ (..., k, n)
        return matmul(to_front(x, dx), y), (0 if ry <= 2 else ry - 2)
    if dx is None and ry == 1:  # x @ y_b for every b: x (..., m, k) @ (k, B)
        return matmul(x, _shape.moveaxis(y, dy, -1)), rx - 1 if rx > 1 else 0
    if dy is None and ry == 2:  # a shared matrix on the right: (B * ... * m, k) @ (k, n)
        x = to_front(x, dx)
        x_shape = shape_of(x)
        out = matmul(_shape.reshape(x, (-1, x_shape[-1])), y)
        return _shape.reshape(out, x_shape[:-1] + shape_of(y)[-1:]), 0
    if dx is None and rx == 2 and ry == 2:  # a shared matrix on the left: (m, k) @ (k, B * n)
        y = _shape.moveaxis(y, dy, 1)
        k, size, n = shape_of(y)
        out = matmul(x, _shape.reshape(y, (k, size * n)))
        return _shape.reshape(out, (shape_of(x)[0], size, n)), 1
    x, y = (v if d is None else to_front(v, d) for v, d in ((x, dx), (y, dy)))
    x = _shape.expand_dims(x, -2) if rx == 1 else x
    y = _shape.expand_dims(y, -1) if ry == 1 else y
    rank = max(rx, ry, 2)
    x, y = (v if d is None else lead_batch(v, 0, rank) for v, d in ((x, dx), (y, dy)))
    out = matmul(x, y)
    squeeze = tuple(a for a, r in ((-2, rx), (-1, ry)) if r == 1)
    return (_shape.squeeze(out, squeeze) if squeeze else out), 0


def _times_identity(basis, other) -> bool:
    """Whether ``basis`` is a Jacobian's identity basis and ``other`` a concrete NumPy array: then the
    product is ``other`` (:func:`_as_product`), exactly, without the n-fold work of multiplying by ones
    and zeros (a non-finite entry stays itself where BLAS would spread ``inf * 0 = nan`` over its row)."""
    return type(other) is np.ndarray and is_identity_basis(basis)


def _as_product(other, basis):
    """``other`` as the product with the identity ``basis``: in the product's dtype, and, where that is
    its own, a read-only view of it rather than a copy (a fresh array of a Hessian's size costs its page
    faults; no operation writes into its operands, and a transform copies a read-only result before
    handing it back)."""
    dtype = np.result_type(other, basis)
    if other.dtype != dtype:
        return other.astype(dtype)
    view = other.view()
    view.flags.writeable = False
    return view


defbatch(matmul_p, _matmul_batch)
def_out_impl(matmul_p, np.matmul)  # jit's buffer reuse: the product into a dead intermediate


def _matmul_subscripts(node) -> tuple[tuple[str, str], str]:
    """``matmul`` as an einsum term: ``...ik,...kj->...ij``, a 1-D operand without its ``i`` (``j``),
    the batch axes aligned from the right (a length-1 one broadcasts: ``letter_map`` sees it)."""
    sx, sy = (tuple(a.shape) for a in node.avals)
    n_batch = len(node.out_avals[0].shape) - (len(sx) >= 2) - (len(sy) >= 2)
    batch = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"[:n_batch]
    x = (batch[n_batch - (len(sx) - 2):] + "ik") if len(sx) >= 2 else "k"
    y = (batch[n_batch - (len(sy) - 2):] + "kj") if len(sy) >= 2 else "k"
    return (x, y), batch + ("i" if len(sx) >= 2 else "") + ("j" if len(sy) >= 2 else "")


def_dependency(matmul_p, Contraction(_matmul_subscripts))


def matmul(x1: ArrayLike, x2: ArrayLike) -> Array:
    """Matrix product with broadcasting over leading axes, as ``numpy.matmul`` (the ``@`` operator)."""
    x1, x2 = as_operand(x1), as_operand(x2)
    return bind(matmul_p, x1, x2)


# ---- einsum --------------------------------------------------------------------------------------
def _parse_einsum(subscripts: str, shapes) -> tuple[tuple[str, ...], str]:
    """Explicit subscripts with no ellipsis and no size-1 broadcasting.

    ``...`` becomes unused letters; where one operand has size 1 on a letter that another operand
    has longer, the size-1 operand gets a fresh letter of its own (summing over a length-1 axis is
    the same as broadcasting it), so every letter has one size and the vjp einsums are well formed.
    """
    subscripts = subscripts.replace(" ", "")
    if "->" in subscripts:
        lhs, out = subscripts.split("->")
    else:
        lhs, out = subscripts, None
    ins = lhs.split(",")
    if len(ins) != len(shapes):
        raise ValueError(f"einsum: {len(ins)} subscripts for {len(shapes)} operands")
    used = set(subscripts) - set(".,->")
    free = [c for c in LETTERS if c not in used]
    n_ell = max((len(s) - (len(sub) - 3) for sub, s in zip(ins, shapes) if "..." in sub), default=0)
    ell = "".join(free[:n_ell])
    del free[:n_ell]
    ins = [sub.replace("...", ell[n_ell - (len(s) - (len(sub) - 3)):]) if "..." in sub else sub
           for sub, s in zip(ins, shapes)]
    if out is None:
        counts = {c: "".join(ins).count(c) for c in set("".join(ins))}
        out = ell + "".join(sorted(c for c, n in counts.items() if n == 1 and c not in ell))
    else:
        out = out.replace("...", ell)
    sizes: dict = {}
    for sub, s in zip(ins, shapes):
        for c, d in zip(sub, s):
            sizes[c] = max(sizes.get(c, 1), d)
    renamed = []
    for sub, s in zip(ins, shapes):
        chars = list(sub)
        for k, (c, d) in enumerate(zip(sub, s)):
            if d == 1 and sizes[c] != 1:
                chars[k] = free.pop(0)
        renamed.append("".join(chars))
    return tuple(renamed), out


def _einsum_vjp(argnum, ct, ans, *operands, subscripts, optimize):
    """``d/d operand_i`` is an einsum of ``ct`` with the other operands (autograd's ``grad_einsum``)."""
    ins, out = subscripts.split("->")
    ins = ins.split(",")
    target = ins[argnum]
    unique = "".join(dict.fromkeys(target))  # a repeated letter (a diagonal, "ii") once
    others = [s for j, s in enumerate(ins) if j != argnum]
    present = set(out).union(*others)
    kept = "".join(c for c in unique if c in present)
    g = einsum(",".join([out] + others) + "->" + kept, ct, *[o for j, o in enumerate(operands) if j != argnum],
               optimize=optimize)
    x = operands[argnum]
    sizes = dict(zip(target, x.shape))
    if kept != unique:  # letters only this operand has were summed out: broadcast back along them
        g = _shape.broadcast_to(_shape.reshape(g, tuple(sizes[c] if c in present else 1 for c in unique)),
                                tuple(sizes[c] for c in unique))
    if unique != target:
        g = _onto_diagonals(g, unique, target, sizes, x)
    return _shape.unbroadcast(g, x)


def _onto_diagonals(g, unique: str, target: str, sizes: dict, x):
    """``g`` (letters ``unique``) written onto the diagonals of an array with letters ``target``, where a
    letter repeats (``"ii"``) and zeros elsewhere: each later occurrence of a letter gets a fresh letter
    tied to the first by an identity matrix, so it is one einsum, linear in ``g``."""
    free = iter(c for c in LETTERS if c not in target)
    renamed, eyes, seen = [], [], set()
    for c in target:
        if c in seen:
            fresh = next(free)
            renamed.append(fresh)
            eyes.append((c + fresh, namespace_of(x).eye(sizes[c], dtype=x.dtype)))
        else:
            seen.add(c)
            renamed.append(c)
    subscripts = ",".join([unique] + [s for s, _ in eyes]) + "->" + "".join(renamed)
    return einsum(subscripts, g, *[e for _, e in eyes])


def _einsum_impl(*ops, subscripts, optimize):
    xp = namespace_of(*ops)
    if any(is_float16(o) for o in ops):
        # numpy.einsum adds float16 products in float16; accumulate in float32 as tensor cores do
        wide = [o.astype(np.float32) if is_float16(o) else o for o in ops]
        return xp.einsum(subscripts, *wide, optimize=optimize).astype(np.float16)
    return xp.einsum(subscripts, *ops, optimize=optimize)


einsum_p = primitive("einsum", _einsum_impl)
def_lowering(einsum_p, _lowerings.einsum)
accumulates_in_float32("einsum", "numpy.einsum adds float16 products in float16 (tensor cores use float32)")


def _einsum_aval(*operands, subscripts, optimize):
    """Explicit subscripts (as ``einsum`` binds them): each output letter's size from the operands,
    the operands' result type; None for Python scalars and for a letter of two sizes."""
    ins, out = subscripts.split("->")
    sizes: dict = {}
    for sub, aval in zip(ins.split(","), operands):
        if len(sub) != len(aval.shape) or not isinstance(aval.dtype, np.dtype):
            return None
        for c, d in zip(sub, aval.shape):
            if sizes.setdefault(c, d) != d:
                return None
    return ShapedArray(tuple(sizes[c] for c in out), np.result_type(*[a.dtype for a in operands]))


def_shape_rule(einsum_p, _einsum_aval)
defvjp_argnum(einsum_p, _einsum_vjp)
# multilinear: operand i's tangent takes its place (repeated indices in one operand are fine here)
defjvp_argnum(einsum_p, lambda argnum, t, ans, *operands, subscripts, optimize:
              bind(einsum_p, *operands[:argnum], t, *operands[argnum + 1:], subscripts=subscripts,
                   optimize=optimize))


def _einsum_batch(vals, dims, *, subscripts, optimize):
    """A fresh letter for the batch axis, at each batched operand's batch axis and first in the
    output: the batch joins the contraction, no operand moves."""
    letter = next(c for c in LETTERS if c not in subscripts)
    ins, out = subscripts.split("->")
    ins = [sub if d is None else sub[:d] + letter + sub[d:] for sub, d in zip(ins.split(","), dims)]
    return bind(einsum_p, *vals, subscripts=",".join(ins) + "->" + letter + out, optimize=optimize), 0


defbatch(einsum_p, _einsum_batch)
def_dependency(einsum_p, Contraction(lambda node: (lambda ins, out: (ins.split(","), out))(
    *node.params["subscripts"].split("->"))))


def einsum(subscripts: str, *operands: ArrayLike, optimize: bool = False) -> Array:
    """Einstein summation, as ``numpy.einsum`` (string subscripts, ``...`` and implicit output).

    Gradients are einsums again; an operand whose subscripts repeat an index (a diagonal) is not
    differentiable yet. float16 operands are multiplied and added in float32 and the result rounded
    to float16 (as GPU tensor cores accumulate).
    """
    operands = [as_operand(o) for o in operands]
    shapes = [tuple(o.shape) if hasattr(o, "shape") else np.shape(o) for o in operands]
    ins, out = _parse_einsum(subscripts, shapes)
    optimize = optimize if isinstance(optimize, (bool, str)) else bool(optimize)
    return bind(einsum_p, *operands, subscripts=",".join(ins) + "->" + out, optimize=optimize)


# ---- built on einsum and matmul ------------------------------------------------------------------
def tensordot(a: ArrayLike, b: ArrayLike, axes: int | tuple[Sequence[int], Sequence[int]] = 2) -> Array:
    """Sum of products over ``axes`` of ``a`` and ``b``, as ``numpy.tensordot``."""
    a, b = as_operand(a), as_operand(b)
    na, nb = _shape.ndim(a), _shape.ndim(b)
    if isinstance(axes, (int, np.integer)):
        axes_a, axes_b = list(range(na - axes, na)), list(range(axes))
    else:
        axes_a, axes_b = ([axes[0]] if isinstance(axes[0], (int, np.integer)) else list(axes[0]),
                          [axes[1]] if isinstance(axes[1], (int, np.integer)) else list(axes[1]))
    axes_a = [operator.index(i) % na for i in axes_a]
    axes_b = [operator.index(i) % nb for i in axes_b]
    letters = iter(LETTERS)
    sub_a = [next(letters) for _ in range(na)]
    sub_b = [next(letters) for _ in range(nb)]
    for i, j in zip(axes_a, axes_b):
        sub_b[j] = sub_a[i]
    out = [c for i, c in enumerate(sub_a) if i not in axes_a] + [c for j, c in enumerate(sub_b) if j not in axes_b]
    return einsum("".join(sub_a) + "," + "".join(sub_b) + "->" + "".join(out), a, b)


def dot(a: ArrayLike, b: ArrayLike) -> Array:
    """``numpy.dot``: a product for scalars, ``matmul`` up to 2-D, a last-by-second-last sum beyond."""
    a, b = as_operand(a), as_operand(b)
    na, nb = _shape.ndim(a), _shape.ndim(b)
    if na == 0 or nb == 0:
        return a * b
    if na <= 2 and nb <= 2:
        return matmul(a, b)
    return tensordot(a, b, axes=([na - 1], [max(nb - 2, 0)]))


def inner(a: ArrayLike, b: ArrayLike) -> Array:
    """Sum of products over the last axes, as ``numpy.inner``."""
    a, b = as_operand(a), as_operand(b)
    if _shape.ndim(a) == 0 or _shape.ndim(b) == 0:
        return a * b
    return tensordot(a, b, axes=([-1], [-1]))


def outer(a: ArrayLike, b: ArrayLike) -> Array:
    """``ravel(a)[:, None] * ravel(b)[None, :]``, as ``numpy.outer``."""
    a, b = as_operand(a), as_operand(b)
    return _shape.expand_dims(_shape.ravel(a), 1) * _shape.expand_dims(_shape.ravel(b), 0)


def vdot(a: ArrayLike, b: ArrayLike) -> Array:
    """Dot product of the flattened arrays, as ``numpy.vdot`` for real inputs (it does not conjugate
    ``a``), a 0-d array.
    """
    return dot(_shape.ravel(a), _shape.ravel(b))
