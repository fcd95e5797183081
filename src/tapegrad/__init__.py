"""tapegrad: MindSpore-style ``grad`` and JAX-style transforms on NumPy and CuPy arrays.

``grad(fn, grad_position, weights, has_aux)`` runs ``fn`` under a tape-recording interpreter and
returns gradients selected by input position or by Parameters, in MindSpore's return structure.
See DESIGN.md and the docs for the contract.
"""
from tapegrad import errors, numpy, scipy, testing, tree
from tapegrad._api import get_grad, grad, stop_gradient, value_and_grad, vjp
from tapegrad._backend import set_backend
from tapegrad._params import Parameter, ParameterTuple
from tapegrad import nn, optim

__version__ = "0.1.0"

__all__ = [
    "Parameter", "ParameterTuple", "errors", "get_grad", "grad", "nn", "numpy", "optim", "scipy",
    "set_backend", "stop_gradient", "testing", "tree", "value_and_grad", "vjp",
]
