"""Host callbacks inside transforms (being written)."""
