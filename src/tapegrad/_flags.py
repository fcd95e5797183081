"""Flags: plain Python attributes of a model that a staged program builds in (a module's ``training``).

A program that ``jit`` staged while ``net.training`` was True draws dropout masks and updates the
BatchNorm statistics; after ``net.eval()`` it must be staged again. A :class:`Flag` attribute notes
each read made while ``jit`` stages a function (as a Parameter notes its reads, ``_params``), so the
cached program keeps ``(object, attribute, value read)`` for the flags it depends on, and only a
change of one of those stages it again: a jitted function that never read a module's flag is not
affected by that module's ``train()``/``eval()``.
"""
from __future__ import annotations

import threading
import weakref

from tapegrad._params import _staging, _staging_builder

# bumped by every write of a Flag and every death of an object whose flags a program read: a program
# whose flags were found unchanged at this count needs no look at them (the check of a cache hit).
# Under a lock: a lost increment could let a program miss a write. Reentrant: the bump of a weak
# reference's callback may run wherever an object is freed.
_writes = [0]
_writes_lock = threading.RLock()


def _bump(_ref=None) -> None:
    with _writes_lock:
        _writes[0] += 1


class Flag:
    """A class attribute whose value lives in each instance and whose reads while ``jit`` stages are
    recorded (a data descriptor: the instance's ``__dict__`` holds the value under the same name).

    Args:
        default: the value of an instance that never set it.

    Values are compared with ``!=`` to decide whether a program is stale: use bools or other plain
    Python values. The instance must take weak references (the cache must not keep it alive).
    """

    def __init__(self, default):
        self.default = default
        self.name = None

    def __set_name__(self, owner, name):
        self.name = name

    def __get__(self, obj, objtype=None):
        if obj is None:
            return self
        value = obj.__dict__.get(self.name, self.default)
        builder = _staging_builder()
        if builder is not None:
            self.note(builder, obj, value)
        return value

    def __set__(self, obj, value):
        obj.__dict__[self.name] = value
        _bump()

    def note(self, builder, obj, value) -> None:
        """Record that the program ``builder`` stages read ``value`` (its first read is what it builds in)."""
        builder.flags_read.setdefault((id(obj), self.name), (obj, self, value))


class FlagReads:
    """The flags one staging read, as ``(weak reference, Flag, value)`` triples, and the write count
    at which they were last found unchanged."""

    __slots__ = ("reads", "checked")

    def __init__(self, reads):
        self.reads = tuple((weakref.ref(obj, _bump), flag, value) for obj, flag, value in reads)
        self.checked = -1

    def hold(self) -> bool:
        """Whether each flag still has the value read; a flag of an object that is gone does not.

        Within a ``jit`` staging (one jitted function calling another) the flags are recorded as
        read by it too: the outer program builds in the inner one, and with it what the inner one
        read. Outside one, and with no flag written since the last check, nothing is looked at."""
        count = _writes[0]
        if count == self.checked and _staging.get() is None:
            return True
        builder = _staging_builder()
        for ref, flag, value in self.reads:
            obj = ref()
            if obj is None:
                return False
            current = obj.__dict__.get(flag.name, flag.default)
            if builder is not None:
                flag.note(builder, obj, current)
            if current != value:
                return False
        self.checked = count
        return True


def flags_read(builder) -> FlagReads | None:
    """The flags read while ``builder`` staged (None: none)."""
    return FlagReads(builder.flags_read.values()) if builder.flags_read else None
