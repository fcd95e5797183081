"""Program passes (each a function from a program to an equivalent program)."""
from __future__ import annotations


def optimize(program):
    """The pass pipeline run before a program is compiled."""
    return program
