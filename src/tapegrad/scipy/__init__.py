"""``tapegrad.scipy``: SciPy functions that trace."""
from tapegrad.scipy import linalg, special, stats

__all__ = ["linalg", "special", "stats"]
