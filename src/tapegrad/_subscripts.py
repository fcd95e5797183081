"""The error for a traced value meeting NumPy's indexing of its own arrays: ``y[0] = x`` (a NumPy array
cannot hold a traced value) and ``table[i]`` (a NumPy array cannot be indexed by one).

NumPy converts the value (or index) from C, with ``__array__`` or ``float()``/``operator.index()``,
straight from the user's frame, so that frame's current instruction (``STORE_SUBSCR``, ``BINARY_SUBSCR``)
tells these cases from ``np.asarray(x)``. The bytecode is read only once a conversion has already failed:
nothing is paid while conversions succeed. ``y[0] = x`` on a float array calls ``float(x)``, and NumPy
replaces what it raises by "ValueError: setting an array element with a sequence." (a tracer has
``__getitem__``, so NumPy takes it for a sequence), keeping the error as the ValueError's cause, where
this one names the fix.
"""
from __future__ import annotations

import dis

from tapegrad.errors import TracerArrayConversionError


def numpy_subscript_error(value, frame) -> TracerArrayConversionError | None:
    """The error naming the fix when ``frame`` (the frame NumPy converts ``value`` for) is indexing a NumPy
    array with, or writing into it, the traced ``value``; None when it is doing something else."""
    subscript = _subscript_at(frame)
    return None if subscript is None else TracerArrayConversionError(_message(value, subscript))


def _subscript_at(frame) -> str | None:
    """``"write"`` when ``frame`` is executing ``y[idx] = v``, ``"read"`` for ``y[idx]``, else None.

    NumPy indexing one of its own arrays converts a traced value or index with ``__array__`` or
    ``float()``/``operator.index()``, called from C straight from that frame, so its current instruction
    tells the two apart from ``np.asarray(x)``. Read from the bytecode only when the conversion has
    already failed: nothing is paid while conversions succeed."""
    code, at = (frame.f_code.co_code, frame.f_lasti) if frame is not None else (b"", -1)
    if not 0 <= at < len(code):
        return None
    name = dis.opname[code[at]]
    if name == "BINARY_OP":  # Python 3.14 spells BINARY_SUBSCR as BINARY_OP "[]": read its argument
        ins = next(i for i in dis.get_instructions(frame.f_code) if i.offset == at)
        name = "BINARY_SUBSCR" if ins.argrepr == "[]" else name
    return {"STORE_SUBSCR": "write", "BINARY_SUBSCR": "read"}.get(name)


def _message(value, subscript: str) -> str:
    """Why a NumPy array cannot be written with, or indexed by, the traced ``value``, and the fix."""
    if subscript == "write":
        return (f"a NumPy array cannot hold a traced value ({value!r}): y[idx] = v on a NumPy array y "
                "stores numbers, and a traced value (or index) is known only as the program runs, with "
                "its derivative. Build the array with tapegrad.numpy instead: collect the values and call "
                "tnp.stack(values) or tnp.array([v0, v1, ...]); place a value into a constant array with "
                "tapegrad.lax.dynamic_update_index_in_dim(y, v, idx, 0); and write y = y.at[idx].set(v) "
                "where y is itself traced (.at[] returns the updated array; a NumPy array has no .at)")
    return (f"a NumPy array cannot be indexed by a traced value ({value!r}): table[i] on a NumPy array "
            "(a constant defined outside the function, a lookup table in a fori_loop body) needs i as a "
            "number. Gather with tapegrad.numpy instead: tnp.take(table, i) (tnp.take(table, i, axis=0) for "
            "a row), or tapegrad.lax.dynamic_index_in_dim(table, i, keepdims=False); a slice with traced "
            "bounds is tapegrad.lax.dynamic_slice_in_dim(table, i, size). (tnp.asarray(table) is still a "
            "NumPy array: it does not help)")
