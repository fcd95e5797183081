"""Exceptions tapegrad raises for misuse of traced values."""


class TracerArrayConversionError(TypeError):
    """A traced value was turned into a concrete array (``np.asarray(tracer)``, ``tracer.__array__()``).

    Inside a transformed function use ``tapegrad.numpy`` (or plain NumPy functions, which dispatch
    to it) instead of converting.
    """


class ConcretizationError(TypeError):
    """Python control flow, ``float()`` or ``bool()`` needed the value of an abstract traced value.

    Under ``jit`` or ``vmap`` values are abstract: mark the argument static (``static_argnums``) or
    express the branch with ``tnp.where``.
    """
