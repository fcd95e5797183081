"""Loops the control-flow tests share: one computation as a ``tg.while_loop`` and as a Python loop."""
import tapegrad as tg
import tapegrad.numpy as tnp


def halvings(v):
    """Halve ``v`` (plus a little of its sine) until it is at most 0.1; ``(steps, v)``. The trip count is
    decided by the traced input itself."""
    return tg.while_loop(lambda c: c[1] > 0.1, lambda c: (c[0] + 1, c[1] * 0.5 + tnp.sin(c[1]) * 0.01), (0, v))


def python_halvings(v):
    """:func:`halvings` as a Python loop (on a traced ``v`` under ``grad``, the unrolled reference)."""
    n = 0
    while v > 0.1:
        n, v = n + 1, v * 0.5 + tnp.sin(v) * 0.01
    return n, v
