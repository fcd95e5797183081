"""``tapegrad.scipy``: SciPy functions that trace."""
from tapegrad.scipy import special

__all__ = ["special"]
