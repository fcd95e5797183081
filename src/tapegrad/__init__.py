"""tapegrad: MindSpore-style ``grad`` and JAX-style transforms on NumPy and CuPy arrays.

``grad(fn, grad_position, weights, has_aux)`` runs ``fn`` under a tape-recording interpreter and
returns gradients selected by input position or by Parameters, in MindSpore's return structure.
The docs (``docs/``) describe the API and its conventions.
"""
import functools
import importlib
from typing import TYPE_CHECKING

from tapegrad import _post_import, _rules, errors, extend, numpy, tree
from tapegrad._api import get_grad, grad, jvp, linearize, stop_gradient, value_and_grad, vjp
from tapegrad._array_type import Array
from tapegrad._backend import set_backend
from tapegrad._checkpoint import checkpoint
from tapegrad._config import config
from tapegrad._custom import custom_jvp, custom_vjp
from tapegrad._jacobians import hessian, hvp, jacfwd, jacrev
from tapegrad._params import Parameter, ParameterTuple
from tapegrad._threads import blas_threads, set_blas_threads
from tapegrad.numpy._operators import defer_registrations

if TYPE_CHECKING:  # what __getattr__ below imports on first use, spelled out for type checkers only
    __version__: str  # pyproject.toml's version (_version below)
    from tapegrad import debug, distributed, flatten_util, lax, nn, optim, random, scipy, sparse, testing
    from tapegrad._callback import ShapeDtypeStruct, pure_callback
    from tapegrad._control_flow import cond, custom_linear_solve, custom_root, fori_loop, map, scan, switch, while_loop
    from tapegrad._jit import jit, make_program
    from tapegrad._serialization import load, load_checkpoint, save, save_checkpoint
    from tapegrad._sparse_jacobians import sparse_hessian, sparse_jacfwd, sparse_jacrev
    from tapegrad._sparsity import hessian_sparsity, jacobian_sparsity
    from tapegrad._vmap_api import vmap

__all__ = [
    "Array", "Parameter", "ParameterTuple", "ShapeDtypeStruct", "blas_threads", "checkpoint", "cond", "config",
    "custom_jvp", "custom_linear_solve", "custom_root", "custom_vjp", "debug", "distributed", "errors", "extend",
    "flatten_util", "fori_loop", "get_grad", "grad", "hessian", "hessian_sparsity", "hvp", "jacfwd",
    "jacobian_sparsity", "jacrev", "jit", "jvp", "lax", "linearize", "load", "load_checkpoint", "make_program",
    "map", "nn", "numpy", "optim", "pure_callback", "random", "save", "save_checkpoint", "scan", "scipy",
    "set_backend", "set_blas_threads", "sparse", "sparse_hessian", "sparse_jacfwd", "sparse_jacrev",
    "stop_gradient", "switch", "testing", "tree", "value_and_grad", "vmap", "vjp", "while_loop"
]

# imported on first use (PEP 562), so that `import tapegrad` stays a small fraction of NumPy's own import:
# tapegrad.scipy and tapegrad.nn alone took longer than all the rest, and jit's staging and code generation
# (which control flow stages its bodies with) about a fifth of what is left; vmap's front end imports optree,
# which the other transforms import when they first flatten a pytree (tapegrad._tree)
_LAZY_SUBMODULES = ("debug", "distributed", "flatten_util", "lax", "nn", "optim", "random", "scipy", "sparse",
                    "testing")
_LAZY_NAMES = {"jit": "_jit", "make_program": "_jit", "vmap": "_vmap_api", **dict.fromkeys(
    ("cond", "custom_linear_solve", "custom_root", "fori_loop", "map", "scan", "switch", "while_loop"),
    "_control_flow"),
    **dict.fromkeys(("load", "load_checkpoint", "save", "save_checkpoint"), "_serialization"),
    **dict.fromkeys(("ShapeDtypeStruct", "pure_callback"), "_callback"),
    **dict.fromkeys(("sparse_hessian", "sparse_jacfwd", "sparse_jacrev"), "_sparse_jacobians"),
    **dict.fromkeys(("hessian_sparsity", "jacobian_sparsity"), "_sparsity")}
# a traced value meeting SciPy's ufuncs or functions first imports tapegrad.scipy, which registers ours
defer_registrations("scipy", f"{__name__}.scipy")
# SciPy's and cupyx's sparse arrays and matrices are pytrees (data the leaf, the pattern static) from the
# moment the program imports them: tapegrad.sparse registers them, imported then, not at `import tapegrad`
for _sparse_module in ("scipy.sparse", "cupyx.scipy.sparse"):
    _post_import.when_imported(_sparse_module, lambda _: importlib.import_module(f"{__name__}.sparse"))
# extend.primitives() imports these first: the lazy modules that declare primitives
_rules.UNIMPORTED.extend(f"{__name__}.{name}" for name in ("_callback", "_control_flow", "nn", "random", "scipy"))


@functools.cache
def _version() -> str:
    """pyproject.toml's ``version`` (its one source), from the installed distribution's metadata (a wheel's,
    or the editable install's). Read on first use: importlib.metadata imports email and zipfile, which
    take as long as all of tapegrad's own modules."""
    import importlib.metadata
    try:
        return importlib.metadata.version("tapegrad")
    except importlib.metadata.PackageNotFoundError:  # src/ put on the path without installing
        return "0+unknown"


if not TYPE_CHECKING:  # to a checker, a name that is neither above nor in the block at the top is an error
    def __getattr__(name: str) -> object:
        if name in _LAZY_SUBMODULES:
            return importlib.import_module(f"{__name__}.{name}")  # binds it here too: the next access is direct
        if name in _LAZY_NAMES:  # an imported module's attribute: a dictionary look-up after the first call
            return getattr(importlib.import_module(f"{__name__}.{_LAZY_NAMES[name]}"), name)
        if name == "__version__":
            return _version()
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY_SUBMODULES, *_LAZY_NAMES, "__version__"})
