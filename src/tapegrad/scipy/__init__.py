"""``tapegrad.scipy``: SciPy functions that trace."""
from tapegrad.numpy._operators import register_alternatives, register_foreign_ufuncs
from tapegrad.scipy import integrate, linalg, optimize, signal, sparse, special, stats

# a scipy function called on a traced value raises an error that names ours; scipy.special's ufuncs
# (gammaln, erf, ...) dispatch to ours through NumPy's __array_ufunc__ protocol, and so trace
for _name, _module in (("integrate", integrate), ("linalg", linalg), ("signal", signal), ("special", special)):
    register_alternatives(f"scipy.{_name}", f"tapegrad.scipy.{_name}", _module.__all__)
register_foreign_ufuncs("scipy.special", {_name: getattr(special, _name) for _name in special.__all__})

__all__ = ["integrate", "linalg", "optimize", "signal", "sparse", "special", "stats"]
