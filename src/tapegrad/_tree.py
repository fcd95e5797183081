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
