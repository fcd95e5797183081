"""Public pytree utilities: optree's functions bound to tapegrad's namespace.

``tg.tree.register_node(cls, flatten, unflatten)`` registers a container class for every tapegrad
transform (optree's ``register_pytree_node`` with ``namespace="tapegrad"``).
"""
from __future__ import annotations

import functools

import optree

from tapegrad._tree import NAMESPACE, tree_flatten, tree_leaves, tree_map, tree_structure, tree_unflatten

register_node = functools.partial(optree.register_pytree_node, namespace=NAMESPACE)

__all__ = ["register_node", "tree_flatten", "tree_leaves", "tree_map", "tree_structure",
           "tree_unflatten", "NAMESPACE"]
