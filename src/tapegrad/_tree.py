"""Pytrees, through optree, always in the ``"tapegrad"`` namespace.

Transforms flatten only at the API boundary: each has a flat core over lists of leaves and a pytree
wrapper built from these helpers.

Each helper imports optree when it runs, not this module: optree (with typing_extensions, which it
imports) took over a third of ``import tapegrad``, and a cached import costs a dictionary look-up.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tapegrad._typing import PyTree

NAMESPACE = "tapegrad"


def tree_flatten(tree: PyTree, none_is_leaf: bool = False) -> Any:
    """The leaves of ``tree`` and its structure, as ``optree.tree_flatten`` in the ``"tapegrad"`` namespace.

    Leaves come in optree's order: sequences in order, dicts by sorted key, registered nodes in the
    order their ``flatten`` gives. None is an empty subtree (no leaf) unless ``none_is_leaf``.

    Args:
        tree: a pytree: nested tuples, lists, dicts, namedtuples, None and registered classes
            (:func:`tapegrad.tree.register_node`); anything else is a leaf.
        none_is_leaf: count each None as a leaf (the transforms use it for a cotangent whose None
            entries mean "ones").

    Returns:
        ``(leaves, treedef)``, a list of the leaves and an ``optree.PyTreeSpec``, which
        :func:`tree_unflatten` turns back into a pytree.
    """
    import optree
    return optree.tree_flatten(tree, none_is_leaf=none_is_leaf, namespace=NAMESPACE)


def tree_unflatten(treedef: Any, leaves: PyTree) -> Any:
    """The pytree of structure ``treedef`` holding ``leaves``, as ``optree.tree_unflatten``.

    Args:
        treedef: an ``optree.PyTreeSpec``, from :func:`tree_flatten` or :func:`tree_structure`.
        leaves: an iterable of as many leaves as ``treedef`` has, in its order.

    Returns:
        The pytree; ``tree_unflatten(*reversed(tree_flatten(t)))`` rebuilds ``t``.

    Raises:
        ValueError: the number of leaves differs from ``treedef``'s.
    """
    import optree
    return optree.tree_unflatten(treedef, leaves)


def tree_leaves(tree: PyTree) -> Any:
    """The leaves of ``tree`` in flattening order (None is no leaf), as ``optree.tree_leaves`` in the
    ``"tapegrad"`` namespace.

    Args:
        tree: a pytree.

    Returns:
        A list of the leaves (``tree_flatten(tree)[0]``).
    """
    import optree
    return optree.tree_leaves(tree, namespace=NAMESPACE)


def tree_map(fn: Callable[..., Any], tree: PyTree, *rest: Any, none_is_leaf: bool = False) -> Any:
    """``fn`` applied leaf by leaf, as ``optree.tree_map`` (``jax.tree.map``) in the ``"tapegrad"``
    namespace.

    Args:
        fn: a function of as many arguments as there are trees.
        tree: the pytree whose structure the result has.
        *rest: more pytrees with ``tree``'s structure (or one it is a prefix of, as optree allows);
            their leaves are ``fn``'s further arguments.
        none_is_leaf: pass None entries to ``fn`` as leaves instead of keeping them as empty subtrees.

    Returns:
        A pytree with ``tree``'s structure holding ``fn(leaf, *rest_leaves)`` at each leaf.

    Raises:
        ValueError: a tree in ``rest`` has another structure.
    """
    import optree
    return optree.tree_map(fn, tree, *rest, none_is_leaf=none_is_leaf, namespace=NAMESPACE)


def tree_structure(tree: PyTree) -> Any:
    """The structure of ``tree`` (None is an empty subtree), as ``optree.tree_structure`` in the
    ``"tapegrad"`` namespace.

    Args:
        tree: a pytree.

    Returns:
        An ``optree.PyTreeSpec`` (``tree_flatten(tree)[1]``).
    """
    import optree
    return optree.tree_structure(tree, namespace=NAMESPACE)


def unregistered_container_hint(leaf) -> str:
    """For an error about a leaf that is an object holding arrays (a dataclass, an attrs class): how
    to make its fields leaves."""
    if isinstance(leaf, (bool, int, float, complex, str, bytes)) or leaf is None:
        return ""
    kind = type(leaf).__name__
    return (f". If {kind} is a container of arrays (a dataclass, say), register it as a pytree node, "
            f"tapegrad.tree.register_node({kind}, flatten, unflatten), so that its fields become leaves")
