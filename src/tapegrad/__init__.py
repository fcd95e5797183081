"""tapegrad: MindSpore-style ``grad`` and JAX-style transforms on NumPy and CuPy arrays.

``grad(fn, grad_position, weights, has_aux)`` runs ``fn`` under a tape-recording interpreter and
returns gradients selected by input position or by Parameters, in MindSpore's return structure.
The docs (``docs/``) describe the API and its conventions.
"""
from tapegrad import errors, extend, nn, numpy, optim, random, scipy, testing, tree
from tapegrad._api import get_grad, grad, jvp, linearize, stop_gradient, value_and_grad, vjp
from tapegrad._backend import set_backend
from tapegrad._checkpoint import checkpoint
from tapegrad._config import config
from tapegrad._control_flow import cond, fori_loop, map, scan, switch, while_loop
from tapegrad._custom import custom_jvp, custom_vjp
from tapegrad._jacobians import hessian, hvp, jacfwd, jacrev
from tapegrad._jit import jit, make_program
from tapegrad._params import Parameter, ParameterTuple
from tapegrad._vmap_api import vmap

__version__ = "0.1.0"

__all__ = [
    "Parameter", "ParameterTuple", "checkpoint", "cond", "config", "custom_jvp", "custom_vjp", "errors", "extend",
    "fori_loop", "get_grad", "grad", "hessian", "hvp", "jacfwd", "jacrev", "jit", "jvp", "linearize", "make_program",
    "map", "nn", "numpy", "optim", "random", "scan", "scipy", "set_backend", "stop_gradient", "switch", "testing",
    "tree", "value_and_grad", "vmap", "vjp", "while_loop",
]
