"""``tapegrad.config``: the library's switches, set in code or from the environment.

One object, as ``jax.config``: ``tg.config.explain_cache_misses = True``. A name it does not have is an
``AttributeError`` (a typo must not pass silently), and each switch checks its value's type. A switch's
default comes from its environment variable, read once when tapegrad is imported.
"""
from __future__ import annotations

import os

_TRUE = ("1", "true", "yes", "on")
_FALSE = ("", "0", "false", "no", "off")


def _env_flag(name: str) -> bool:
    """The boolean environment variable ``name`` (unset: False), or a ValueError naming it."""
    raw = os.environ.get(name, "").strip().lower()
    if raw in _TRUE:
        return True
    if raw in _FALSE:
        return False
    raise ValueError(f"the environment variable {name}={os.environ[name]!r} is not a boolean; set it to 1 "
                     "(on) or 0 (off), or unset it")


class Config:
    """tapegrad's switches.

    Attributes:
        explain_cache_misses: when True, each time a ``jit``-compiled function stages again after its
            first call, the logger ``"tapegrad.jit"`` gets a warning that names the argument whose
            shape, dtype, pytree structure or static value changed (or the module flag, such as
            ``training``, or the new instance) that made the cached programs unusable. Default: the
            environment variable ``TAPEGRAD_EXPLAIN_CACHE_MISSES`` (1/true/yes/on or 0/false/no/off).
    """

    __slots__ = ("_explain_cache_misses",)

    def __init__(self):
        self._explain_cache_misses = _env_flag("TAPEGRAD_EXPLAIN_CACHE_MISSES")

    @property
    def explain_cache_misses(self) -> bool:
        return self._explain_cache_misses

    @explain_cache_misses.setter
    def explain_cache_misses(self, value: bool) -> None:
        if not isinstance(value, bool):
            raise TypeError(f"config.explain_cache_misses must be a bool (True or False), got {value!r}")
        self._explain_cache_misses = value

    def __repr__(self):
        return f"Config(explain_cache_misses={self.explain_cache_misses})"


config = Config()
