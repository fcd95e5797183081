"""``tapegrad.config``: the library's switches, set in code or from the environment.

One object, as ``jax.config``: ``tg.config.explain_cache_misses = True``. A name it does not have is an
``AttributeError`` (a typo must not pass silently), and each switch checks its value's type. A switch's
default comes from its environment variable, read once when tapegrad is imported.
"""
from __future__ import annotations

import os

_TRUE = ("1", "true", "yes", "on")
_FALSE = ("", "0", "false", "no", "off")


def _env_flag(name: str, default: bool = False) -> bool:
    """The boolean environment variable ``name`` (unset or empty: ``default``), or a ValueError naming it."""
    raw = os.environ.get(name, "").strip().lower()
    if not raw:
        return default
    if raw in _TRUE:
        return True
    if raw in _FALSE:
        return False
    raise ValueError(f"the environment variable {name}={os.environ[name]!r} is not a boolean; set it to 1 "
                     "(on) or 0 (off), or unset it")


def _switch(name: str) -> property:
    """A boolean switch of :class:`Config`, kept in the slot ``_<name>``; setting anything but a bool
    is a ``TypeError`` naming the switch."""
    slot = "_" + name

    def get(self: Config) -> bool:
        return getattr(self, slot)

    def set_(self: Config, value: bool) -> None:
        if not isinstance(value, bool):
            raise TypeError(f"config.{name} must be a bool (True or False), got {value!r}")
        setattr(self, slot, value)
    return property(get, set_)


class Config:
    """tapegrad's switches.

    Attributes:
        explain_cache_misses: when True, each time a ``jit``-compiled function stages again after its
            first call, the logger ``"tapegrad.jit"`` gets a warning that names the argument whose
            shape, dtype, pytree structure or static value changed (or the module flag, such as
            ``training``, or the new instance) that made the cached programs unusable. Default: the
            environment variable ``TAPEGRAD_EXPLAIN_CACHE_MISSES`` (1/true/yes/on or 0/false/no/off).
        warn_missing_has_aux: when True (the default), ``grad`` and ``value_and_grad`` without
            ``has_aux=True`` warn (:class:`tapegrad.errors.MissingHasAuxWarning`, once per function)
            when the function's outputs differ in shape, such as ``(loss, logits)``: every output is
            differentiated (MindSpore's convention), so a forgotten ``has_aux=True`` would otherwise
            give the gradient of ``loss + sum(logits)`` without a word. Set it to False when the sum is
            what you mean. Default: the environment variable ``TAPEGRAD_WARN_MISSING_HAS_AUX`` (unset:
            on).
        compiled_executor: when True (the default where numba imports), ``jit`` compiles a NumPy
            program whose primitives all have a lowering into one native function with numba
            (``tapegrad._jit.native``); other programs, and every program when False or without numba,
            run with the Python executor. ``jit(f).executor(*args)`` says which one a program got.
            Default: the environment variable ``TAPEGRAD_COMPILED_EXECUTOR`` (unset: on).
    """

    __slots__ = ("_explain_cache_misses", "_warn_missing_has_aux", "_compiled_executor")

    def __init__(self) -> None:
        self._explain_cache_misses = _env_flag("TAPEGRAD_EXPLAIN_CACHE_MISSES")
        self._warn_missing_has_aux = _env_flag("TAPEGRAD_WARN_MISSING_HAS_AUX", default=True)
        self._compiled_executor = _env_flag("TAPEGRAD_COMPILED_EXECUTOR", default=True)

    explain_cache_misses = _switch("explain_cache_misses")
    warn_missing_has_aux = _switch("warn_missing_has_aux")
    compiled_executor = _switch("compiled_executor")

    def __repr__(self):
        return (f"Config(explain_cache_misses={self.explain_cache_misses}, "
                f"warn_missing_has_aux={self.warn_missing_has_aux}, compiled_executor={self.compiled_executor})")


config = Config()
