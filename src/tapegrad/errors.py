"""Exceptions tapegrad raises for misuse of traced values, and its warnings."""

__all__ = ["ConcretizationError", "MissingHasAuxWarning", "TracerArrayConversionError"]


class ConcretizationError(TypeError):
    """A traced value was needed as a concrete Python or NumPy value.

    Raised when the conversion would lose something: under a derivative transform (``grad``, ``vjp``,
    ``jvp``, ``jacrev``...), ``float(x)``, ``int(x)``, ``complex(x)``, ``operator.index(x)``,
    ``round(x)``, ``x.item()``, ``x.tolist()``, ``math.exp(x)`` or ``np.float32(x)`` of a value that
    carries a derivative would make it a constant and drop the derivative; under ``jit`` or ``vmap``
    the value is abstract (only its shape and dtype are known, or it differs per example), so Python
    control flow and ``bool(x)`` cannot read it either. The message names the conversion and the way
    out: compute with ``tapegrad.numpy``, wrap a value meant as a constant in ``tg.stop_gradient``,
    branch or loop with ``tg.cond``/``tg.while_loop``, select with ``tnp.where``, or, for a value
    computed from a Python-scalar argument of ``jit``, mark that argument static (``static_argnums``).
    """


class TracerArrayConversionError(ConcretizationError):
    """A traced value was turned into a concrete array (``np.asarray(tracer)``, ``tracer.__array__()``,
    and the NumPy scalar types other than ``np.float64``, which convert through ``__array__``).

    Inside a transformed function use ``tapegrad.numpy`` (or plain NumPy functions, which dispatch
    to it) instead of converting. A subclass of :class:`ConcretizationError` (and so of ``TypeError``):
    it is the same loss of a derivative, reached through NumPy's array protocol.
    """


class MissingHasAuxWarning(UserWarning):
    """``grad`` or ``value_and_grad`` without ``has_aux=True`` got outputs of different shapes.

    Every output is differentiated (MindSpore's convention: the gradient of the sum of all output
    elements), so ``loss`` returning ``(cross_entropy, logits)`` differentiates
    ``cross_entropy + sum(logits)``; that is almost always a forgotten ``has_aux=True`` (JAX raises
    there). Outputs of one shape (a tuple of scalar losses) are taken as a deliberate sum and do not
    warn. Issued once per function (per code object: re-wrapping the same function each step does not
    repeat it). Silence it with ``tg.config.warn_missing_has_aux = False`` (or the environment
    variable ``TAPEGRAD_WARN_MISSING_HAS_AUX=0``), or precisely with
    ``warnings.filterwarnings("ignore", category=tg.errors.MissingHasAuxWarning)``.
    """
