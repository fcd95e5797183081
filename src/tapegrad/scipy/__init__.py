"""``tapegrad.scipy``: SciPy functions that trace."""
from tapegrad.numpy._operators import register_alternatives
from tapegrad.scipy import linalg, special, stats

# scipy.special.gammaln(tracer) and friends raise an error that names the function here
for _name, _module in (("linalg", linalg), ("special", special)):
    register_alternatives(f"scipy.{_name}", f"tapegrad.scipy.{_name}", _module.__all__)

__all__ = ["linalg", "special", "stats"]
