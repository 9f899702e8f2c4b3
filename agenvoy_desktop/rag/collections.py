"""A document collection: a name, the folders or files it covers, and which files in them count.

The name also names the collection's index folder, so it follows the same
rule as a session id (letters, digits, ``.``, ``_``, ``-``; no device names)
and can never be a path such as ``../x``.  Roots are absolute; they are
checked when the collection is made (it exists, it is a folder or a
readable file, it is not inside another root) and not again when the
registry is read, because a folder on an unplugged disk is still wanted.
``watch`` asks the window to follow the folders' changes as they happen;
registries written before it existed load with it off.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agenvoy_desktop.core.store import valid_session_id
from agenvoy_desktop.rag.errors import (
    InvalidCollectionNameError,
    InvalidRootError,
    UnreadableFileError,
)
from agenvoy_desktop.rag.globs import PathFilter, check_patterns
from agenvoy_desktop.rag.readers.formats import format_of
from agenvoy_desktop.rag.readers.textdecode import SNIFF_BYTES, decode_text

MAX_ROOTS = 64


@dataclass(frozen=True, slots=True)
class Collection:
    """One named collection; immutable (the registry replaces it to change it)."""

    name: str
    roots: tuple[Path, ...]
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    created_ns: int = 0
    watch: bool = False
    """Whether the window re-indexes the collection when its files change (see :mod:`.watch`)."""

    def path_filter(self) -> PathFilter:
        """The include/exclude decision for paths relative to one of the roots."""
        return PathFilter(self.include, self.exclude)

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "roots": [str(root) for root in self.roots],
            "include": list(self.include),
            "exclude": list(self.exclude),
            "created_ns": self.created_ns,
            "watch": self.watch,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Collection:
        """A collection read back from the registry; raises a ``CollectionError`` if malformed.

        Only the shape is checked: a root that is missing now (an unplugged
        disk) stays in the collection.
        """
        roots = data.get("roots")
        created = data.get("created_ns", 0)
        watch = data.get("watch", False)
        if not isinstance(roots, list) or not isinstance(created, int):
            raise InvalidRootError("a collection entry has no list of folders")
        if not isinstance(watch, bool):
            raise InvalidRootError("a collection entry's watch setting is not true or false")
        return cls(
            name=check_collection_name(data.get("name")),
            roots=check_roots(roots, must_exist=False),
            include=check_patterns(_strings(data.get("include", []))),
            exclude=check_patterns(_strings(data.get("exclude", []))),
            created_ns=created,
            watch=watch,
        )


def _strings(value: object) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise InvalidRootError("a collection entry's file patterns are not a list of text")
    return value


def check_collection_name(name: object) -> str:
    """*name* if it can name a collection (and its index folder), else raise."""
    if not isinstance(name, str) or not valid_session_id(name):
        shown = repr(name)[:70]
        raise InvalidCollectionNameError(
            f"invalid collection name {shown}: use letters, digits, '.', '_' or '-'"
            " (up to 64, not starting with a dot)"
        )
    return name


def check_roots(
    roots: Sequence[str | Path], *, must_exist: bool = True, known: Sequence[Path] = ()
) -> tuple[Path, ...]:
    """The roots, normalised and de-duplicated; raises :class:`InvalidRootError` on a bad one.

    Roots in *known* (a collection's present ones) are not checked on disk
    again: changing a collection must not fail because one of its folders is
    on a drive that is unplugged now.
    """
    if not roots:
        raise InvalidRootError("a collection needs at least one folder or file")
    if len(roots) > MAX_ROOTS:
        raise InvalidRootError(f"a collection can have at most {MAX_ROOTS} folders or files")
    out: list[Path] = []
    for root in roots:
        path = _absolute(root)
        if must_exist and path not in known:
            _check_exists(path)
        if path not in out:
            out.append(path)
    _check_not_nested(out)
    return tuple(out)


def _absolute(root: str | Path) -> Path:
    if not isinstance(root, str | Path) or not str(root).strip() or "\x00" in str(root):
        raise InvalidRootError(f"not a folder or file name: {str(root)[:70]!r}")
    path = Path(root)
    if not path.is_absolute():
        raise InvalidRootError(f"{root} is not an absolute path: give the full path of the folder")
    return Path(os.path.normpath(path))


def _check_exists(path: Path) -> None:
    if path.is_dir():
        return
    if not path.exists():
        raise InvalidRootError(f"folder or file not found: {path}")
    if not path.is_file():
        raise InvalidRootError(f"{path} is neither a folder nor a regular file")
    if format_of(path) in ("pdf", "docx", "mail"):
        return
    try:
        with path.open("rb") as handle:
            decode_text(handle.read(SNIFF_BYTES), path.name)
    except UnreadableFileError:
        raise InvalidRootError(
            f"{path} is a binary file: name a folder, or a text, Markdown, code, PDF,"
            " Word or mail file"
        ) from None
    except OSError as exc:
        raise InvalidRootError(f"cannot open {path}: {exc.strerror}") from None


def _check_not_nested(roots: list[Path]) -> None:
    """Refuse a root inside another: its files would be indexed twice."""
    for root in roots:
        for other in roots:
            if other != root and root.is_relative_to(other):
                raise InvalidRootError(
                    f"{root} is inside {other}, which is already in the collection"
                )
