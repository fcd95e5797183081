"""Saving state to safetensors files and loading it back: ``save``/``load`` for any pytree of arrays, and
MindSpore's ``save_checkpoint``/``load_checkpoint`` for modules, optimisers and anything else with a
``state_dict``.

The format is Hugging Face's safetensors (the ``safetensors`` package, an optional extra): a JSON header
and the raw bytes of each array, no pickle, so loading a file cannot run code, and PyTorch and Hugging Face
tools read what tapegrad writes (and the reverse). Each leaf is stored under its pytree path joined with
dots (``"fc1.weight"``, ``"0.bias"``); the tree's shape (dicts, lists, tuples, None) and a CRC-32 of each
array go into the header's metadata as JSON, under the key ``"tapegrad"``, so that ``load`` rebuilds the
same structure and notices a damaged file (safetensors itself has no checksum).

A save never leaves a half-written file behind: it writes a temporary file in the target's folder, flushes
it to disk, then renames it over the target (``os.replace``, atomic on POSIX and Windows).
"""
from __future__ import annotations

import json
import os
import tempfile
import zlib
from typing import Any

import numpy as np
import optree

from tapegrad._backend import to_host
from tapegrad._params import Parameter
from tapegrad._state_dict import load_state_dicts
from tapegrad._tree import NAMESPACE
from tapegrad._typing import PyTree

METADATA_KEY = "tapegrad"
FORMAT_VERSION = 1
# what every safetensors release since 0.4 stores; complex, float128, strings and objects are refused
_STORABLE = {np.dtype(t) for t in ("bool", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64",
                                   "uint64", "float16", "float32", "float64")}


def _safetensors():
    try:
        import safetensors.numpy  # optional dependency, imported on first save or load
    except ImportError as e:
        raise ImportError("saving and loading checkpoints needs the safetensors package: "
                          "pip install tapegrad[checkpoint]") from e
    return safetensors


# ---- save ----------------------------------------------------------------------------------------
def save(path: Any, tree: PyTree) -> None:
    """Write ``tree``, a pytree of arrays, to the safetensors file ``path``, atomically.

    Each leaf becomes one tensor named by its path in the tree, the keys joined with dots
    (``{"fc1": {"weight": w}}`` -> ``"fc1.weight"``, ``[w, b]`` -> ``"0"``, ``"1"``; a bare array is
    named ``""``). The structure (dicts with str keys, lists, tuples, None) is stored in the file's
    metadata, so :func:`load` returns the same structure.

    Leaves may be NumPy arrays (any C or Fortran order; written as C-ordered little-endian), NumPy or
    Python scalars (stored as 0-d arrays, and loaded back as 0-d arrays: an ``int`` becomes int64, a
    ``float`` float64), Parameters (their current value), and CuPy arrays, which are copied to the host
    here, explicitly (``x.get()``), one at a time.

    The file is written to a temporary file in the same folder, flushed and fsynced, then renamed over
    ``path``; on any exception (``KeyboardInterrupt`` included) or a crash, ``path`` keeps what it held
    (or still does not exist) and the temporary file is removed (after a crash it may remain, named
    ``.<name>.*.tmp``).

    Args:
        path: the file to write (str or ``os.PathLike``); its folder must exist.
        tree: a pytree of arrays: nested dicts (str keys), lists, tuples and None.

    Raises:
        TypeError: a leaf is not an array, scalar or Parameter (a traced value, a string, an object);
            a dict key is not a str; a container is a custom pytree node (a NamedTuple, a registered
            class): convert it to a dict first. The message names the leaf's key.
        ValueError: two leaves get the same key (``{"a.b": x, "a": {"b": y}}``), or a leaf's dtype
            cannot be stored (complex, float128): the message names the key and what to do.
        ImportError: safetensors is not installed (``pip install tapegrad[checkpoint]``).

    Returns:
        None.
    """
    st = _safetensors()
    keys, leaves, structure = _flatten(tree)
    for key, leaf in zip(keys, leaves):
        _check_leaf(key, leaf)  # everything is checked before the disk is touched
    _write_atomically(os.fspath(path), lambda tmp: _write(st, tmp, keys, leaves, structure))


def _flatten(tree) -> tuple:
    """``(keys, leaves, structure)``: each leaf's dotted key, the leaves, and the tree's shape as JSON."""
    paths, leaves, treedef = optree.tree_flatten_with_path(tree, namespace=NAMESPACE)
    structure = _structure(treedef, ())  # first: it refuses non-str keys, which would make odd key names
    keys = [_dotted(p) for p in paths]
    seen: dict = {}
    for path, key in zip(paths, keys):
        if key in seen:
            raise ValueError(f"tg.save: the leaves at {seen[key]} and {path} would both be stored under the key "
                             f"{key!r}; rename a dict key so that no dotted path repeats")
        seen[key] = path
    return keys, leaves, structure


def _dotted(path: tuple) -> str:
    """A pytree path as a tensor name: ``("fc1", "weight")`` -> ``"fc1.weight"``, ``(0,)`` -> ``"0"``."""
    return ".".join(str(k) for k in path)


def _structure(treedef, path: tuple):
    """``treedef`` as JSON: a leaf is its dotted key, None ``null``, containers ``["dict", [[k, ...], ...]]``,
    ``["list", [...]]``, ``["tuple", [...]]``; anything else is refused."""
    kind, where = treedef.kind, repr(_dotted(path)) if path else "the root"
    if kind == optree.PyTreeKind.LEAF:
        return _dotted(path)
    if kind == optree.PyTreeKind.NONE:
        return None
    children = treedef.children()
    if kind == optree.PyTreeKind.DICT:
        names = treedef.entries()
        for name in names:
            if not isinstance(name, str):
                raise TypeError(f"tg.save: the dict at {where} has the key {name!r} of type {type(name).__name__}; "
                                "only str keys can be stored (they name the tensors)")
        return ["dict", [[name, _structure(c, (*path, name))] for name, c in zip(names, children)]]
    if kind in (optree.PyTreeKind.LIST, optree.PyTreeKind.TUPLE):
        tag = "list" if kind == optree.PyTreeKind.LIST else "tuple"
        return [tag, [_structure(c, (*path, i)) for i, c in enumerate(children)]]
    raise TypeError(f"tg.save: the node at {where} is a {treedef.type.__name__}, a pytree node that a file cannot "
                    "rebuild; store plain dicts (str keys), lists, tuples and None (convert it, e.g. "
                    "dict(obj._asdict()) for a NamedTuple)")


def _check_leaf(key: str, leaf) -> None:
    """Refuse what cannot be stored, naming the leaf's key."""
    leaf = _unwrapped(leaf)
    if isinstance(leaf, (bool, int, float, complex)):
        leaf = np.asarray(leaf)
    if not (isinstance(leaf, (np.ndarray, np.generic)) or callable(getattr(leaf, "get", None))
            and hasattr(leaf, "dtype") and hasattr(leaf, "shape")):
        raise TypeError(f"tg.save: the leaf {key!r} is a {type(leaf).__name__}, not an array; store arrays, "
                        "scalars or Parameters (a traced value cannot be saved: save outside the transform)")
    if np.dtype(leaf.dtype).newbyteorder("=") not in _STORABLE:
        raise ValueError(f"tg.save: the leaf {key!r} has dtype {leaf.dtype}, which safetensors cannot store; "
                         "convert it first (complex: store x.real and x.imag; float128: float64)")


def _unwrapped(leaf):
    return leaf.value if isinstance(leaf, Parameter) else leaf


def _host(leaf) -> np.ndarray:
    """``leaf`` as a C-ordered host array: a CuPy array is copied to the host here, on purpose."""
    leaf = np.asarray(to_host(_unwrapped(leaf)), order="C")  # not ascontiguousarray, which makes a 0-d array 1-d
    return leaf.astype(leaf.dtype.newbyteorder("<"), copy=False)  # safetensors is little-endian


def _write(st, tmp: str, keys: list, leaves: list, structure) -> None:
    tensors = {key: _host(leaf) for key, leaf in zip(keys, leaves)}
    crc = {key: _crc32(a) for key, a in tensors.items()}
    meta = {METADATA_KEY: json.dumps({"format": FORMAT_VERSION, "structure": structure, "crc32": crc})}
    st.numpy.save_file(tensors, tmp, metadata=meta)


def _crc32(a: np.ndarray) -> int:
    """CRC-32 of a C-ordered array's bytes (0 when empty: a 0-byte memoryview cannot be cast)."""
    # a.data, not memoryview(a): numpy's stubs type ndarray as a buffer (__buffer__) on Python 3.12+ only,
    # so memoryview(a) needs an ignore under 3.10/3.11 that mypy reports as unused under 3.12/3.13
    return zlib.crc32(a.data.cast("B")) if a.size else 0


def _write_atomically(path: str, write) -> None:
    """Call ``write(tmp)`` on a fresh temporary file next to ``path``, fsync it, rename it over ``path``.

    A symbolic link at ``path`` (``latest -> ckpt_100``) is followed: its target is replaced and the
    link kept, as writing through it in place would (a rename over the link would replace the link)."""
    path = os.path.realpath(path)
    folder, name = os.path.split(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{name}.", suffix=".tmp", dir=folder)
    os.close(fd)  # the writer opens the file by name
    try:
        write(tmp)
        with open(tmp, "r+b") as f:
            os.fsync(f.fileno())  # the bytes reach the disk before the rename makes them the checkpoint
        os.chmod(tmp, _mode(path))  # mkstemp's 0o600, else: a checkpoint gets an ordinary file's mode
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise
    _fsync_folder(folder)


def _mode(path: str) -> int:
    """The permissions the file at ``path`` has, or a new file would get (0o666 less the umask)."""
    try:
        return os.stat(path).st_mode & 0o777
    except FileNotFoundError:
        umask = os.umask(0o022)  # reading the umask means setting it; put it back at once
        os.umask(umask)
        return 0o666 & ~umask


def _fsync_folder(folder: str) -> None:
    # makes the rename itself durable; folders cannot be opened on Windows, where it is not needed
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


# ---- load ----------------------------------------------------------------------------------------
def load(path: Any) -> Any:
    """Read a safetensors file into NumPy arrays.

    Args:
        path: the file (str or ``os.PathLike``), one :func:`save` wrote or any safetensors file.

    Returns:
        For a file :func:`save` wrote, the saved pytree, same structure, each leaf a NumPy array (a
        scalar comes back as a 0-d array, a Parameter as its array); a dict's keys come back in sorted
        order (optree's), which ``==`` on dicts does not see. For a file without tapegrad's
        metadata (written by PyTorch's or Hugging Face's ``safetensors``): a flat ``dict`` of tensor
        name -> NumPy array, in the file's (sorted) order.

    Raises:
        FileNotFoundError: ``path`` does not exist (the message names it).
        ValueError: the file is not a valid safetensors file (truncated, corrupted header), or its
            arrays do not match the checksums tapegrad stored (corrupted data); the message names
            ``path``.
        ImportError: safetensors is not installed (``pip install tapegrad[checkpoint]``).
    """
    arrays, info = _read(path)
    if info is None:
        return arrays
    try:
        return _rebuild(info["structure"], arrays)
    except (KeyError, TypeError, ValueError) as e:
        raise ValueError(f"tg.load: {os.fspath(path)!r} has damaged tapegrad metadata: its structure does not "
                         f"match its tensors ({e!r})") from e


def _read(path) -> tuple:
    """``(flat dict name -> array, tapegrad's metadata or None)``, with the checks :func:`load` lists."""
    st = _safetensors()
    path = os.fspath(path)
    if not os.path.exists(path):
        raise FileNotFoundError(f"tg.load: no file {path!r}")
    try:
        with st.safe_open(path, framework="np") as f:
            meta = f.metadata() or {}
            arrays = {key: f.get_tensor(key) for key in f.keys()}
        info = json.loads(meta[METADATA_KEY]) if METADATA_KEY in meta else None
    except (OSError, MemoryError):
        raise  # the file cannot be read (permissions, I/O) or is too big: not a question of its format
    except Exception as e:  # safetensors' own errors (SafetensorError) are not exported as a class
        raise ValueError(f"tg.load: {path!r} is not a readable safetensors file (truncated or corrupted?): "
                         f"{e}") from e
    if info is not None:
        _verify(path, arrays, info)
    return arrays, info


def _verify(path: str, arrays: dict, info) -> None:
    """Refuse tapegrad metadata that a later format wrote, that is damaged, or whose checksums fail."""
    if not isinstance(info, dict) or not isinstance(info.get("crc32"), dict) or "structure" not in info:
        raise ValueError(f"tg.load: {path!r} has damaged tapegrad metadata")
    if info.get("format") != FORMAT_VERSION:
        raise ValueError(f"tg.load: {path!r} was written in tapegrad's checkpoint format {info.get('format')}, "
                         f"this version reads format {FORMAT_VERSION}; load it with the tapegrad that wrote it")
    expected = info["crc32"]
    if set(expected) != set(arrays):
        raise ValueError(f"tg.load: {path!r} is corrupted: its tensors {sorted(arrays)} are not those its "
                         f"metadata lists {sorted(expected)}")
    for key, a in arrays.items():
        if _crc32(np.asarray(a, order="C")) != expected[key]:
            raise ValueError(f"tg.load: {path!r} is corrupted: the data of {key!r} does not match its "
                             "checksum; load an earlier checkpoint")


def _rebuild(node, arrays: dict):
    if node is None:
        return None
    if isinstance(node, str):
        return arrays[node]
    tag, children = node
    if tag == "dict":
        return {name: _rebuild(child, arrays) for name, child in children}
    items = [_rebuild(child, arrays) for child in children]
    return items if tag == "list" else tuple(items)


# ---- MindSpore's spellings -----------------------------------------------------------------------
def save_checkpoint(obj: Any, path: Any) -> None:
    """Save a model, an optimiser, several of them, or a pytree of arrays (MindSpore's
    ``mindspore.save_checkpoint(save_obj, ckpt_file_name)``), with :func:`save`'s format and atomicity.

    Args:
        obj: anything with a ``state_dict()`` (an ``nn.Module``, an optimiser, a loss scaler, a
            learning-rate schedule), a dict, list or tuple of such objects and arrays
            (``{"model": net, "optimizer": opt}``: keys ``"model.fc1.weight"``,
            ``"optimizer.adam.step"``), or a plain pytree of arrays.
        path: the file to write.

    Returns:
        None; ``path`` holds one tensor per state entry, keyed by its dotted name.

    Raises:
        TypeError: as :func:`save` (a leaf that is not an array, scalar or Parameter; a non-str dict
            key; a custom pytree node).
        ValueError: two entries get the same key (two objects' state names collide), or a dtype
            safetensors cannot store.
        ImportError: safetensors is not installed (``pip install tapegrad[checkpoint]``).
    """
    save(path, _states(obj))


def _states(obj):
    """``obj`` with each object that has a ``state_dict`` replaced by its state dict."""
    return optree.tree_map(lambda x: x.state_dict() if _is_stateful(x) else x, obj, namespace=NAMESPACE)


def _is_stateful(x) -> bool:
    return callable(getattr(x, "state_dict", None)) and callable(getattr(x, "load_state_dict", None))


def load_checkpoint(path: Any, net: Any = None, strict: bool = True, cast: bool = False) -> dict:
    """Read a checkpoint and, given ``net``, load it into ``net``: all of it or nothing (MindSpore's
    ``load_checkpoint(ckpt_file_name, net=None, strict_load=False)``, with PyTorch's ``strict``).

    Args:
        path: a file :func:`save_checkpoint` or :func:`save` wrote, or any safetensors file (PyTorch's,
            Hugging Face's).
        net: None, an object with ``load_state_dict`` (``nn.Module``, optimiser, ...), or a dict, list
            or tuple of them in the structure given to :func:`save_checkpoint`
            (``{"model": net, "optimizer": opt}`` takes the keys under ``"model."`` and
            ``"optimizer."``). Every object's part is checked before any Parameter changes, so a
            failed load leaves every one of them as it was. An array in ``net`` stands for an array
            saved at its place (``{"model": net, "step": np.array(0)}``): it claims that key, whose
            value the result holds, and is not changed.
        strict: whether the file's keys must be exactly those of ``net`` (PyTorch's ``strict``); with
            False, keys missing on either side are skipped.
        cast: whether an array of another dtype is cast to its Parameter's (same-kind casting);
            without it a dtype mismatch is an error.

    Returns:
        The file's contents as a flat ``dict`` of key -> NumPy array (``"model.fc1.weight"``), whether
        or not ``net`` was given (MindSpore returns a dict of name -> Parameter).

    Raises:
        FileNotFoundError, ValueError: as :func:`load` (a missing, truncated or corrupted file).
        TypeError: ``net`` holds something without ``load_state_dict``.
        KeyError: under ``strict``, keys missing from the file or not claimed by any object of
            ``net`` (named in the message).
        ValueError: a shape mismatch, or a dtype mismatch without ``cast`` (the key is named); a key
            claimed by two objects of ``net``.
    """
    flat, _ = _read(path)
    if net is None:
        return flat
    pairs, claimed = _split(flat, net)
    if strict:
        unclaimed = [key for key in flat if key not in claimed]
        if unclaimed:
            raise KeyError(f"tg.load_checkpoint: {path!r} has keys no object of net takes: {unclaimed}; pass "
                           "the objects in the structure they were saved in, or strict=False")
    load_state_dicts([(obj, state) for obj, state, _ in pairs], strict=strict, cast=cast)
    return flat


def _split(flat: dict, net) -> tuple:
    """``([(object, its state, the file keys it takes)], every key claimed)``: each object of ``net`` gets
    the keys under its dotted path, without that prefix; an array of ``net`` claims the key of its path."""
    paths, objects, _ = optree.tree_flatten_with_path(net, namespace=NAMESPACE)
    owner: dict
    pairs, owner = [], {}
    for path, obj in zip(paths, objects):
        prefix = _dotted(path)
        is_array = not _is_stateful(obj) and hasattr(obj, "shape") and hasattr(obj, "dtype")
        if not _is_stateful(obj) and not is_array:
            raise TypeError(f"tg.load_checkpoint: net{''.join(f'[{k!r}]' for k in path)} is a "
                            f"{type(obj).__name__}, which has no load_state_dict; pass modules, optimisers, "
                            "arrays (placeholders for arrays saved there) or dicts/lists/tuples of them")
        if is_array:  # a placeholder: it claims its key, whose value the result returns
            keys = [k for k in flat if k == prefix]
            for key in keys:
                owner.setdefault(key, prefix)
            continue
        keys = [k for k in flat if not prefix or k.startswith(prefix + ".")]
        for key in keys:
            if key in owner:
                raise ValueError(f"tg.load_checkpoint: the key {key!r} falls under two objects of net "
                                 f"({owner[key]!r} and {prefix!r}); give them names that do not prefix each "
                                 "other")
            owner[key] = prefix
        pairs.append((obj, {k[len(prefix) + 1:] if prefix else k: flat[k] for k in keys}, keys))
    return pairs, set(owner)


__all__ = ["load", "load_checkpoint", "save", "save_checkpoint"]
