"""``jit``: staging to a program (``program.py``, ``staging.py``), running it (``codegen.py``), and the
cache and API (``api.py``)."""
from tapegrad._jit.api import jit, make_program

__all__ = ["jit", "make_program"]
