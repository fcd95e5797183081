"""``tapegrad.scipy.sparse``: SciPy's sparse submodules that trace. The sparse arrays themselves are
:mod:`tapegrad.sparse`; this package holds :mod:`tapegrad.scipy.sparse.linalg`, the solvers."""
from tapegrad.scipy.sparse import linalg

__all__ = ["linalg"]
