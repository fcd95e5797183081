"""``tapegrad.debug``: host calls inside transforms (being written)."""
__all__: list[str] = []
