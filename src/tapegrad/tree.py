"""Public pytree utilities: optree's functions bound to tapegrad's namespace.

``tg.tree.register_node(cls, flatten, unflatten)`` registers a container class for every tapegrad
transform (optree's ``register_pytree_node`` with ``namespace="tapegrad"``).
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tapegrad._tree import NAMESPACE, tree_flatten, tree_leaves, tree_map, tree_structure, tree_unflatten


def register_node(cls, /, flatten_func: Callable[..., Any], unflatten_func: Callable[..., Any], *,
                  namespace: Any = NAMESPACE, **options: Any) -> Any:
    """Make ``cls`` a pytree node for every tapegrad transform: ``optree.register_pytree_node`` with
    ``namespace="tapegrad"`` (JAX's ``jax.tree_util.register_pytree_node``).

    After it, the fields ``flatten_func`` returns are leaves (or subtrees) that transforms trace and
    differentiate, and results of that type are rebuilt with ``unflatten_func``.

    Args:
        cls: the container class.
        flatten_func: ``obj -> (children, metadata)`` or ``(children, metadata, entries)``: an
            iterable of children (flattened further), hashable metadata kept in the treedef (static:
            part of ``jit``'s cache key), and optional path entries.
        unflatten_func: ``(metadata, children) -> obj``.
        namespace: the optree namespace; tapegrad's transforms read only ``"tapegrad"``.
        **options: passed on to ``optree.register_pytree_node`` (in recent optree,
            ``path_entry_type``), so that what the installed optree accepts is accepted here.

    Returns:
        ``cls`` itself.

    Raises:
        TypeError: ``cls`` is not a class.
        ValueError: ``cls`` is already registered in the namespace.
    """
    import optree  # on first use, as in tapegrad._tree
    return optree.register_pytree_node(cls, flatten_func, unflatten_func, namespace=namespace, **options)


__all__ = ["register_node", "tree_flatten", "tree_leaves", "tree_map", "tree_structure",
           "tree_unflatten", "NAMESPACE"]
