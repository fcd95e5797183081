"""Flags: plain Python attributes of a model that a staged program builds in (a module's ``training``).

A program that ``jit`` staged while ``net.training`` was True draws dropout masks and updates the
BatchNorm statistics; after ``net.eval()`` it must be staged again. A :class:`Flag` attribute notes
each read made while ``jit`` stages a function (as a Parameter notes its reads, ``_params``), so the
cached program keeps ``(object, attribute, value read)`` for the flags it depends on, and only a
change of one of those stages it again: a jitted function that never read a module's flag is not
affected by that module's ``train()``/``eval()``.
"""
from __future__ import annotations

import weakref

from tapegrad._params import _staging_builder


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
        if builder is not None:  # the first read is what the program builds in
            builder.flags_read.setdefault((id(obj), self.name), (obj, self.name, value))
        return value

    def __set__(self, obj, value):
        obj.__dict__[self.name] = value


def flags_read(builder) -> tuple:
    """The flags read while ``builder`` staged, as ``(weak reference, attribute, value)`` triples."""
    return tuple((weakref.ref(obj), name, value) for obj, name, value in builder.flags_read.values())


def flags_hold(flags: tuple) -> bool:
    """Whether each flag of ``flags`` (from :func:`flags_read`) still has the value read; a flag of an
    object that is gone does not. The flags are read again through their attributes, so a ``jit``
    staging in progress (one jitted function calling another) records them as read too: the outer
    program builds in the inner one, and with it what the inner one read."""
    for ref, name, value in flags:
        obj = ref()
        if obj is None or getattr(obj, name) != value:
            return False
    return True
