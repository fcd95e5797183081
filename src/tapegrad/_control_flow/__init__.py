"""Control flow that ``jit`` stages as one operation and every transform differentiates or batches:
``cond``/``switch`` (``_switch.py``), ``scan``/``fori_loop``/``map`` (``_scan.py``), ``while_loop``
(``_while.py``, its reverse mode in ``_while_rev.py``) and ``custom_root``/``custom_linear_solve``
(``_solves.py``), built on the staged sub-programs of ``_closed.py``."""
from tapegrad._control_flow import _dependencies, _while_rev  # noqa: F401 (dependency rules; while's reverse mode)
from tapegrad._control_flow._scan import fori_loop, map, scan
from tapegrad._control_flow._solves import custom_linear_solve, custom_root
from tapegrad._control_flow._switch import cond, switch
from tapegrad._control_flow._while import while_loop

__all__ = ["cond", "custom_linear_solve", "custom_root", "fori_loop", "map", "scan", "switch", "while_loop"]
