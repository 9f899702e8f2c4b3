"""The failures document collections expect, each a one-line message for the user.

They are :class:`~agenvoy_desktop.core.errors.KnownError` subclasses, so the
CLI and the window show the message instead of "internal error"; each also
keeps the built-in base an ``except`` written without the taxonomy would use.
"""

from __future__ import annotations

from agenvoy_desktop.core.errors import KnownError


class CollectionError(KnownError):
    """Base of every collection failure."""


class InvalidCollectionNameError(CollectionError, ValueError):
    """A name that cannot be a folder name (it names the collection's index folder)."""


class UnknownCollectionError(CollectionError, KeyError):
    """No collection with that name."""

    def __str__(self) -> str:
        return f"no document collection {self.args[0]!r}: see the list of collections"


class DuplicateCollectionError(CollectionError, ValueError):
    """A collection with that name exists already."""


class InvalidRootError(CollectionError, ValueError):
    """A root that cannot be indexed: relative, missing, nested, or a binary file."""


class InvalidGlobError(CollectionError, ValueError):
    """An include/exclude pattern that could point outside the collection or is malformed."""


class RegistryTooNewError(CollectionError, RuntimeError):
    """The collections file was written by a newer version: it is read, never overwritten."""


class UnreadableFileError(KnownError, ValueError):
    """A file a reader cannot turn into text; ``reason`` is the short why.

    Never fatal to an index run: the scan and the indexer list such files
    with their reason and go on.
    """

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(path, reason)
        self.path = path
        self.reason = reason

    def __str__(self) -> str:
        return f"cannot read {self.path}: {self.reason}"
