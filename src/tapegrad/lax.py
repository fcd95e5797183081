"""``tapegrad.lax``: JAX's ``lax`` spellings over tapegrad's operations (being written)."""
__all__: list[str] = []
