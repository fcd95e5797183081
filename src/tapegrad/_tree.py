"""Pytrees, through optree, always in the ``"tapegrad"`` namespace.

Transforms flatten only at the API boundary: each has a flat core over lists of leaves and a pytree
wrapper built from these helpers.
"""
from __future__ import annotations

import optree

NAMESPACE = "tapegrad"


def tree_flatten(tree, none_is_leaf: bool = False):
    """``(leaves, treedef)`` of ``tree``; with ``none_is_leaf`` a None is a leaf (cotangent 'ones')."""
    return optree.tree_flatten(tree, none_is_leaf=none_is_leaf, namespace=NAMESPACE)


def tree_unflatten(treedef, leaves):
    return optree.tree_unflatten(treedef, leaves)


def tree_leaves(tree):
    return optree.tree_leaves(tree, namespace=NAMESPACE)


def tree_map(fn, tree, *rest, none_is_leaf: bool = False):
    return optree.tree_map(fn, tree, *rest, none_is_leaf=none_is_leaf, namespace=NAMESPACE)


def tree_structure(tree):
    return optree.tree_structure(tree, namespace=NAMESPACE)


def unregistered_container_hint(leaf) -> str:
    """For an error about a leaf that is an object holding arrays (a dataclass, an attrs class): how
    to make its fields leaves."""
    if isinstance(leaf, (bool, int, float, complex, str, bytes)) or leaf is None:
        return ""
    kind = type(leaf).__name__
    return (f". If {kind} is a container of arrays (a dataclass, say), register it as a pytree node, "
            f"tapegrad.tree.register_node({kind}, flatten, unflatten), so that its fields become leaves")
