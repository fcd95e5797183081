"""Why ``jit`` staged again: the opt-in explanation of cache misses (``tg.config.explain_cache_misses``).

A cache key is ``(owner, treedef, leaf signatures, static values)`` (``api._Jitted._split``). On a miss
after a function's first staging, the new key is compared with each cached one, argument by argument,
and the closest is reported: which argument's pytree structure, leaf shape, dtype, backend or static
value differs. A program whose module flag changed (``net.eval()``) or whose Parameters changed dtype
(``Module.astype``), and a method's first call on a new
instance are reported too. Nothing here runs unless the switch is on; a cache hit never comes here.
"""
from __future__ import annotations

import inspect
import logging

import numpy as np

logger = logging.getLogger("tapegrad.jit")


def _positional_names(fn) -> list:
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):  # a builtin or a callable without a signature
        return []
    return [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]


def _label(where, names) -> str:
    if isinstance(where, int):
        return f"argument {where} ({names[where]})" if where < len(names) else f"argument {where}"
    return f"argument {where!r}"


def _arguments(key, names) -> dict:
    """``{label: (pytree structure, leaf paths, leaf signatures)}`` for each traced argument of a key."""
    _, treedef, signatures, _ = key
    args_tree, kwargs_tree = treedef.children()
    wheres = list(range(args_tree.num_children)) + list(kwargs_tree.entries())
    out, start = {}, 0
    for where, child in zip(wheres, args_tree.children() + kwargs_tree.children()):
        n = child.num_leaves
        out[_label(where, names)] = (child, child.paths(), signatures[start:start + n])
        start += n
    return out


def _path(path) -> str:
    return "".join(f"[{p!r}]" for p in path)


def _describe(signature) -> str:
    if isinstance(signature, type):
        return f"a Python {signature.__name__}"
    shape, dtype, backend = signature
    return f"a {dtype} array of shape {shape}" + ("" if backend in ("numpy", "numpy.ndarray") else f" ({backend})")


def _leaf_change(old, new) -> str:
    if isinstance(old, type) or isinstance(new, type):
        return f"{_describe(old)} -> {_describe(new)}"
    changes = [f"{what} {a} -> {b}" for what, a, b in zip(("shape", "dtype", "backend"), old, new) if a != b]
    return ", ".join(changes)


def _differences(old_key, new_key, names) -> list:
    """What differs between two cache keys, one line per argument (or bound instance)."""
    lines = []
    if old_key[0] != new_key[0]:
        lines.append("the method was called on another instance")
    old_args, new_args = _arguments(old_key, names), _arguments(new_key, names)
    for label in new_args.keys() - old_args.keys():
        lines.append(f"{label} is passed now; before, it was not (left to its default, passed the other "
                     "way, by position or by name, or static)")
    for label in old_args.keys() - new_args.keys():
        lines.append(f"{label} was passed before; now it is not (left to its default, passed the other "
                     "way, by position or by name, or static)")
    for label in [k for k in new_args if k in old_args]:
        (old_tree, paths, old_sigs), (new_tree, _, new_sigs) = old_args[label], new_args[label]
        if old_tree != new_tree:
            lines.append(f"{label}: pytree structure {old_tree} -> {new_tree}")
            continue
        lines += [f"{label}{_path(p)}: {_leaf_change(a, b)}" for p, a, b in zip(paths, old_sigs, new_sigs) if a != b]
    old_static, new_static = dict(old_key[3]), dict(new_key[3])
    for where in sorted(old_static.keys() | new_static.keys(), key=str):
        if old_static.get(where, _MISSING) != new_static.get(where, _MISSING):
            before, after = (repr(s.get(where, "(not passed)")) for s in (old_static, new_static))
            lines.append(f"static {_label(where, names)}: {before} -> {after}")
    return lines


_MISSING = object()


def _name(fn) -> str:
    return getattr(fn, "__qualname__", None) or type(fn).__name__


def explain_new_key(fn, key, cache, total_programs: int) -> None:
    """Log why ``key`` found no program in ``cache`` (the programs of ``fn``, or of one instance)
    although ``fn`` has staged before (``total_programs`` held over all its caches)."""
    names = _positional_names(fn)
    candidates = [_differences(old, key, names) for old in list(cache.keys())]
    if candidates:
        lines = min(candidates, key=len)
        why = "; ".join(lines) or "an equal key was evicted or is being staged by another thread"
        full = (f" (the cache is full: cache_size={cache.size}, the least recently used program was evicted)"
                if cache.size is not None and len(cache) >= cache.size else "")
        logger.warning("jit: staging %s again (%d program(s) cached%s): %s", _name(fn), len(cache), full, why)
    elif total_programs:
        logger.warning("jit: staging %s again: first call on this instance (each instance of a class keeps "
                       "its own programs; %d program(s) cached for other instances)", _name(fn), total_programs)
    else:
        logger.warning("jit: staging %s again: no program is cached to compare with (cache_size=%s, or the "
                       "programs staged under an outer transform that closes over its values, which are "
                       "never kept)", _name(fn), cache.size)


def explain_stale(fn, flags, param_types) -> None:
    """Log what changed since the cached program for this key was staged: a module flag
    (``training``), or the dtype or shape of a Parameter it reads or writes (``Module.astype``)."""
    changes = []
    for ref, flag, value in flags.reads if flags is not None else ():
        obj = ref()
        if obj is None:
            changes.append(f"an object whose {flag.name} it read is gone")
            continue
        current = obj.__dict__.get(flag.name, flag.default)
        if current != value:
            changes.append(f"module mode changed: {type(obj).__name__}.{flag.name} {value!r} -> {current!r}")
    for p, shape, dtype in param_types:
        if np.dtype(p.dtype) != dtype or tuple(p.shape) != shape:
            changes.append(f"Parameter {p.name!r} changed type: {dtype}{list(shape)} -> "
                           f"{np.dtype(p.dtype)}{list(p.shape)}")
    logger.warning("jit: staging %s again: %s", _name(fn), "; ".join(changes))
