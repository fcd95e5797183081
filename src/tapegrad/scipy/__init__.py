"""``tapegrad.scipy``: SciPy functions that trace."""
from tapegrad.numpy._operators import register_alternatives
from tapegrad.scipy import integrate, linalg, signal, special, stats

# scipy.special.gammaln(tracer) and friends raise an error that names the function here
for _name, _module in (("integrate", integrate), ("linalg", linalg), ("signal", signal), ("special", special)):
    register_alternatives(f"scipy.{_name}", f"tapegrad.scipy.{_name}", _module.__all__)

__all__ = ["integrate", "linalg", "signal", "special", "stats"]
