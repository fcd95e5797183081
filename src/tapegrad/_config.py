"""``tapegrad.config``: the library's switches, set in code or from the environment.

One object, as ``jax.config``: ``tg.config.explain_cache_misses = True``. A name it does not have is an
``AttributeError`` (a typo must not pass silently), and each switch checks its value's type. A switch's
default comes from its environment variable, read once when tapegrad is imported.
"""
from __future__ import annotations

import os
from collections.abc import Callable

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


def _switch(name: str, on_set: Callable[[Config], None] | None = None) -> property:
    """A boolean switch of :class:`Config`, kept in the slot ``_<name>``; setting anything but a bool
    is a ``TypeError`` naming the switch. ``on_set(config)`` runs after each change."""
    slot = "_" + name

    def get(self: Config) -> bool:
        return getattr(self, slot)

    def set_(self: Config, value: bool) -> None:
        if not isinstance(value, bool):
            raise TypeError(f"config.{name} must be a bool (True or False), got {value!r}")
        setattr(self, slot, value)
        if on_set is not None:
            on_set(self)
    return property(get, set_)


# whether any value check (debug_nans, debug_infs) is on; the modules on the primitives' hot paths
# (tapegrad._core, _tape, _jvp) keep a copy in a global of their own, ``_checking``, so that with both
# checks off a primitive pays one global-variable test
checking = False
_mirrors: list[dict] = []


def mirror_checking(module_globals: dict) -> None:
    """Keep ``module_globals["_checking"]`` equal to :data:`checking`, now and at each change."""
    _mirrors.append(module_globals)
    module_globals["_checking"] = checking


def _set_checking(changed: Config) -> None:
    global checking
    if changed is not config:  # another instance (a test's) switches nothing
        return
    checking = changed._debug_nans or changed._debug_infs
    for module_globals in _mirrors:
        module_globals["_checking"] = checking


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
        debug_nans: when True, the first primitive whose result holds a NaN raises
            ``FloatingPointError`` naming the primitive, its operands' and result's shapes and dtypes,
            the pass that ran it (forward, reverse or jvp) and the line of your code that called it
            (JAX's ``jax_debug_nans``; PyTorch's ``detect_anomaly``). Eagerly every primitive's result is
            checked; a ``jit``-compiled function's outputs are checked after each call, and when one
            holds a NaN the function runs again op by op (without jit) to find the primitive, as JAX
            does. Each check reads the whole result (on CuPy, a device-to-host synchronisation), so
            leave it off for speed: off, it costs one flag test per primitive. Default: the environment
            variable ``TAPEGRAD_DEBUG_NANS`` (unset: off).
        debug_infs: the same for infinities (``TAPEGRAD_DEBUG_INFS``).
        compiled_executor: when True (the default where numba imports), ``jit`` compiles a NumPy
            program whose primitives all have a lowering into one native function with numba
            (``tapegrad._jit.native``); other programs, and every program when False or without numba,
            run with the Python executor. ``jit(f).executor(*args)`` says which one a program got.
            Default: the environment variable ``TAPEGRAD_COMPILED_EXECUTOR`` (unset: on).
    """

    __slots__ = ("_explain_cache_misses", "_warn_missing_has_aux", "_compiled_executor", "_debug_nans", "_debug_infs")

    def __init__(self) -> None:
        self._explain_cache_misses = _env_flag("TAPEGRAD_EXPLAIN_CACHE_MISSES")
        self._warn_missing_has_aux = _env_flag("TAPEGRAD_WARN_MISSING_HAS_AUX", default=True)
        self._compiled_executor = _env_flag("TAPEGRAD_COMPILED_EXECUTOR", default=True)
        self._debug_nans = _env_flag("TAPEGRAD_DEBUG_NANS")
        self._debug_infs = _env_flag("TAPEGRAD_DEBUG_INFS")

    explain_cache_misses = _switch("explain_cache_misses")
    warn_missing_has_aux = _switch("warn_missing_has_aux")
    compiled_executor = _switch("compiled_executor")
    debug_nans = _switch("debug_nans", on_set=_set_checking)
    debug_infs = _switch("debug_infs", on_set=_set_checking)

    def __repr__(self):
        switches = ", ".join(f"{name[1:]}={getattr(self, name)}" for name in self.__slots__)
        return f"Config({switches})"


config = Config()
_set_checking(config)
