"""How the code itself imports each file: the source root (the folder above its topmost
package, the one with no ``__init__.py``) and the dotted name under it.  A tree can hold
several source roots (a fork beside its upstream), each with a package of the same name."""

from __future__ import annotations

import os


def _is_package(directory: str) -> bool:
    return os.path.isfile(os.path.join(directory, "__init__.py"))


def import_name(base: str, path: str) -> tuple[str, str]:
    """(source root relative to ``base``, dotted module) of the file ``path``."""
    parts = path[:-3].split("/") if path.endswith(".py") else path.split("/")
    if parts[-1] == "__init__":
        parts = parts[:-1]
    folders = path.split("/")[:-1]
    top = len(folders)
    while top > 0 and _is_package(os.path.join(base, *folders[:top])):
        top -= 1
    root = "/".join(folders[:top])
    return root, ".".join(parts[top:])


def module_index(base: str, paths: list[str]) -> dict[str, list[tuple[str, str]]]:
    """dotted module -> [(source root, path)] of every file in ``paths``."""
    out: dict[str, list[tuple[str, str]]] = {}
    for path in sorted(paths):
        root, dotted = import_name(base, path)
        out.setdefault(dotted, []).append((root, path))
    return out


def find_module(index: dict[str, list[tuple[str, str]]], dotted: str, near: str, base: str) -> str | None:
    """The file of module ``dotted`` (or of the longest module prefix of a dotted name) in
    the source root of the file ``near`` when there is one there, else the only one."""
    root = import_name(base, near)[0]
    head = dotted
    while head:
        found = index.get(head)
        if found:
            same = [p for r, p in found if r == root]
            if same:
                return same[0]
            return found[0][1] if len(found) == 1 else None
        head = head.rsplit(".", 1)[0] if "." in head else ""
    return None
