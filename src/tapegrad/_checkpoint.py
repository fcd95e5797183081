"""``checkpoint`` (rematerialisation): keep a function's inputs, not its intermediate values, and
recompute them during the backward pass (Griewank's checkpointing; JAX's ``jax.checkpoint``).

Under reverse mode the function runs one level down, so this tape records one joint node for it
whose residuals are only its inputs; its backward runs the function again under a fresh tape and
pulls the cotangents through that. Peak memory drops from all intermediates of the function to those
of one call, at the price of a second forward pass. Forward mode keeps no residuals, so there it is
an ordinary call.
"""
from __future__ import annotations

import functools
from collections.abc import Callable
from typing import ParamSpec, TypeVar

from tapegrad._core import bind_joint, is_inexact
from tapegrad._custom import _FlatCall
from tapegrad._jvp import jvp_flat
from tapegrad._params import recording_writes, substitute, traced_parameters
from tapegrad._tape import pull_back_on

P = ParamSpec("P")
R = TypeVar("R")


class _CheckpointCall(_FlatCall):
    """``fn`` as a joint call over the leaves of its arguments and the Parameters a transform has
    substituted (so ``grad(..., weights=...)`` sees through a checkpointed layer)."""

    remat = True

    def __init__(self, fn, args, kwargs):
        name = f"checkpoint({getattr(fn, '__name__', 'fn')})"
        super().__init__(name, lambda *a: fn(*a, **kwargs), args, ())
        params = traced_parameters()
        self.params = list(params)
        self.n_args = len(self.leaves)
        self.leaves += list(params.values())
        self.writes = []  # (Parameter, value before, value after) of the state fn assigned in forward

    def fun(self, *leaves):
        with substitute(dict(zip(self.params, leaves[self.n_args:]))):
            return super().fun(*leaves[:self.n_args])

    def forward(self, *primals):
        with recording_writes() as before:
            out = self.fun(*primals)
        # the state fn wrote (a Dropout key, running statistics): as it was before and after the call
        self.writes = [(p, old, p._data) for p, old in before.items()]
        return out, primals

    def backward(self, primals, out_cts):
        """Recompute ``fn`` from the state it first saw (the same dropout mask), then put back the state
        it left, so the recomputation neither changes the result nor updates the state twice."""
        try:  # the state is replaced inside the try: an interrupt between the two leaves nothing replaced
            for p, old, _ in self.writes:
                p._data = old
            return self._pull_back(primals, out_cts)
        finally:
            for p, _, new in self.writes:
                p._data = new

    def _pull_back(self, primals, out_cts):
        variables = [i for i, x in enumerate(primals) if is_inexact(x)]
        in_cts = [None] * len(primals)
        for i, ct in zip(variables, pull_back_on(self.fun, primals, variables, out_cts)):
            in_cts[i] = ct
        return in_cts

    def jvp(self, primals, tangents):
        return jvp_flat(self.fun, primals, tangents)

    def on_capture(self, args):
        """``fn`` closes over a value of the running transform (pure-style weights, say): run it as an
        ordinary call, taped in full. The derivatives are right; only the memory saving is lost."""
        return self.fun(*args)


def checkpoint(fn: Callable[P, R]) -> Callable[P, R]:
    """``fn`` with its intermediate values recomputed in the backward pass instead of stored.

    Usable as ``tg.checkpoint(fn)`` or as a decorator. The values and all derivatives (every order,
    both modes) are those of ``fn``; only the memory and time of reverse mode change: the tape keeps
    ``fn``'s inputs and outputs, and backward runs ``fn`` once more. Parameters read inside ``fn``
    while ``grad(..., weights=...)`` runs get their gradients as usual. If ``fn`` closes over a value
    that the running transform differentiates (rather than taking it as an argument), it is taped as
    an ordinary call: right derivatives, no memory saved; pass such values as arguments.

    Args:
        fn: a function of pytrees of arrays returning a pytree of arrays; keyword arguments are passed
            through as constants.

    Returns:
        A function with ``fn``'s signature and results.
    """
    @functools.wraps(fn)
    def checkpointed(*args, **kwargs):
        call = _CheckpointCall(fn, args, kwargs)
        return call.result(bind_joint(call, *call.leaves))
    return checkpointed
