"""Which app made an export, told from its structure, and everything in it.

A user picks a file, a folder or a zip; the name says little (every export
is "conversations.json" or "export.zip"), so the app is told from what is
inside: a ``mapping`` tree is ChatGPT, ``chat_messages`` is Claude, a
``chat.history`` is Open WebUI, ``versions`` per message is LM Studio,
``threads/<id>/messages.jsonl`` is Jan, and ``{"format": "agenvoy-session"}``,
a history.json array or role/content JSON Lines are our own (reported as
``"agenvoy"`` so the existing importer reads them).  Every read goes through
:mod:`.bounded`, so a hostile path costs one line, not the machine.
"""

from __future__ import annotations

import json
import re
import stat
from collections.abc import Callable, Mapping
from pathlib import Path, PurePosixPath

from agenvoy_desktop.core.import_formats import chatgpt, claude, jan, lm_studio, open_webui
from agenvoy_desktop.core.import_formats.bounded import (
    FolderTree,
    ImportLimitError,
    Tree,
    ZipTree,
    is_zip,
    read_file,
    require_regular,
)
from agenvoy_desktop.core.import_formats.model import (
    ImportedConversation,
    ImportedSource,
    Limits,
    Skip,
)
from agenvoy_desktop.core.importers import (
    ImportFormatError,
    decode_text,
    parse_json,
    strict_loads,
)

AGENVOY = "agenvoy"
APPS = (chatgpt.APP, claude.APP, open_webui.APP, lm_studio.APP, jan.APP, AGENVOY)
"""Every ``app`` an :class:`ImportedSource` can name."""

_DEFAULT_LIMITS = Limits()
_KNOWN = "ChatGPT, Claude, Open WebUI, LM Studio, Jan or Agenvoy"
_JAN_MESSAGES = re.compile(r"(?:^|/)threads/[^/]+/messages\.jsonl$")

Found = tuple[list[ImportedConversation], list[Skip]]
_Reader = Callable[[object, str], Found]
_READERS: tuple[tuple[str, Callable[[object], bool], _Reader], ...] = (
    (chatgpt.APP, chatgpt.looks_like, chatgpt.read),
    (claude.APP, claude.looks_like, claude.read),
    (open_webui.APP, open_webui.looks_like, open_webui.read),
    (lm_studio.APP, lm_studio.looks_like, lm_studio.read),
)


def read_source(path: Path, *, limits: Limits = _DEFAULT_LIMITS) -> ImportedSource:
    """Detect which app *path* (a file, a folder or a zip) came from and read it all.

    Raises :class:`ImportFormatError` with one line naming the file for
    anything unreadable: not a regular file, over the limits, a damaged zip,
    invalid JSON, or a structure no reader knows.  For our own formats it
    returns ``app="agenvoy"`` and no conversations: the caller hands the path
    to :func:`agenvoy_desktop.core.importers.read_import_file`.
    """
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        raise ImportFormatError(f"{path}: no such file or folder") from None
    except OSError as exc:
        raise ImportFormatError(f"{path}: cannot read ({exc.strerror})") from None
    if stat.S_ISDIR(mode):
        return _read_tree(FolderTree(path, limits), str(path))
    require_regular(path)
    if is_zip(path):
        tree = ZipTree(path, limits)
        try:
            return _read_tree(tree, str(path))
        finally:
            tree.close()
    return _read_single(path, limits)


def detect_app(path: Path, *, limits: Limits = _DEFAULT_LIMITS) -> str:
    """The app that made *path* (one of :data:`APPS`); reads it whole, like :func:`read_source`."""
    return read_source(path, limits=limits).app


# -- one file ---------------------------------------------------------------------------
def _read_single(path: Path, limits: Limits) -> ImportedSource:
    where = str(path)
    text = decode_text(read_file(path, limits), where)
    if not text.strip():
        raise ImportFormatError(f"{where}: empty file")
    try:
        data = strict_loads(text)
    except json.JSONDecodeError:
        return _read_lines(path, text, limits)
    except ImportFormatError as exc:
        raise ImportFormatError(f"{where}: {exc}") from None
    if isinstance(data, Mapping) and "role" in data:  # JSON Lines of a single message
        return _read_lines(path, text, limits)
    found = _from_json(data, where, path.name)
    if found is None:
        raise ImportFormatError(f"{where}: not a chat export from {_KNOWN}")
    return found


def _from_json(data: object, where: str, name: str) -> ImportedSource | None:
    """The source a parsed JSON file is, or None when no reader knows it."""
    if isinstance(data, list) and not data:
        raise ImportFormatError(f"{where}: no conversations in file (an empty list)")
    if _is_ours(data):
        return ImportedSource(AGENVOY, [])
    for app, looks_like, reader in _READERS:
        if looks_like(data):
            if app == lm_studio.APP:
                conversations, skipped = lm_studio.read(data, where, _lm_studio_id(name))
            else:
                conversations, skipped = reader(data, where)
            return ImportedSource(app, conversations, skipped)
    return None


def _is_ours(data: object) -> bool:
    """Our JSON export, or a history.json array of role/content messages."""
    if isinstance(data, Mapping):
        return data.get("format") == "agenvoy-session" or (
            isinstance(data.get("messages"), list)
            and "createdAt" not in data
            and not lm_studio.looks_like(data)
            and not open_webui.looks_like(data)  # a bare chat also lists its messages
        )
    first = data[0] if isinstance(data, list) and data else None
    return isinstance(first, Mapping) and "role" in first and "content" in first


def _read_lines(path: Path, text: str, limits: Limits) -> ImportedSource:
    """JSON Lines: Jan's messages.jsonl, or our own role/content lines."""
    number, first_line = next(
        (n, line) for n, line in enumerate(text.split("\n"), 1) if line.strip()
    )
    try:
        first = strict_loads(first_line)
    except json.JSONDecodeError as exc:
        raise ImportFormatError(f"{path}:{number}: invalid JSON ({exc.msg})") from None
    except ImportFormatError as exc:
        raise ImportFormatError(f"{path}:{number}: {exc}") from None
    if jan.looks_like_line(first):
        thread = _sibling_thread(path, limits)
        found, _ = jan.read_thread(thread, text, str(path))
        return _source(jan.APP, [(found, str(path))], [])
    if isinstance(first, Mapping) and "role" in first:
        return ImportedSource(AGENVOY, [])
    raise ImportFormatError(f"{path}: not a chat export from {_KNOWN}")


def _sibling_thread(path: Path, limits: Limits) -> object:
    """Jan's thread.json beside a messages.jsonl, for its title (None if absent or broken)."""
    thread = path.with_name(jan.THREAD)
    try:
        return parse_json(decode_text(read_file(thread, limits), str(thread)), str(thread))
    except ImportFormatError:
        return None


def _lm_studio_id(name: str) -> str:
    base = PurePosixPath(name).name
    return base.removesuffix(lm_studio.SUFFIX).removesuffix(".json")


def _source(
    app: str, conversations: list[tuple[ImportedConversation, str]], skipped: list[Skip]
) -> ImportedSource:
    """Keep (conversation, where) pairs with messages; note the empty ones as skipped."""
    kept: list[ImportedConversation] = []
    for found, where in conversations:
        if found.messages:
            kept.append(found)
        else:
            why = f"; {len(found.skipped)} skipped" if found.skipped else ""
            skipped.append(Skip(where, f"no messages to import{why}"))
    return ImportedSource(app, kept, skipped)


# -- a folder or a zip ------------------------------------------------------------------
def _read_tree(tree: Tree, label: str) -> ImportedSource:
    """Look for each app's files in turn: conversations.json, Jan threads, LM Studio chats."""
    names = tree.names()
    for reader in (_conversations_json, _jan_threads, _lm_studio_files, _loose_json):
        found = reader(tree, names)
        if found is not None:
            return found
    raise ImportFormatError(f"{label}: no chat export from {_KNOWN} found inside")


def _load(tree: Tree, name: str) -> object:
    where = tree.where(name)
    return parse_json(decode_text(tree.read(name), where), where)


def _conversations_json(tree: Tree, names: list[str]) -> ImportedSource | None:
    """ChatGPT's and Claude's exports: the shallowest ``conversations.json``."""
    candidates = [n for n in names if PurePosixPath(n).name == "conversations.json"]
    if not candidates:
        return None
    name = min(candidates, key=lambda n: (n.count("/"), n))
    where = tree.where(name)
    found = _from_json(_load(tree, name), where, name)
    if found is None or found.app == AGENVOY:
        raise ImportFormatError(f"{where}: neither a ChatGPT nor a Claude export")
    return found


def _jan_threads(tree: Tree, names: list[str]) -> ImportedSource | None:
    """Jan: every ``threads/<id>/messages.jsonl``, titled by the ``thread.json`` beside it."""
    threads = [n for n in names if _JAN_MESSAGES.search(n)]
    if not threads:
        return None
    present = set(names)
    conversations: list[tuple[ImportedConversation, str]] = []
    skipped: list[Skip] = []
    for name in threads:
        meta_name = str(PurePosixPath(name).with_name(jan.THREAD))
        meta: object = None
        if meta_name in present:
            try:
                meta = _load(tree, meta_name)
            except ImportFormatError as exc:
                skipped.append(Skip(tree.where(meta_name), f"title not read ({exc})"))
        where = tree.where(name)
        text = decode_text(tree.read(name), where)
        found, _ = jan.read_thread(meta, text, where)
        conversations.append((found, where))
    return _source(jan.APP, conversations, skipped)


def _lm_studio_files(tree: Tree, names: list[str]) -> ImportedSource | None:
    """LM Studio: every ``*.conversation.json`` (one broken chat does not stop the rest)."""
    files = [n for n in names if n.endswith(lm_studio.SUFFIX)]
    if not files:
        return None
    conversations: list[ImportedConversation] = []
    skipped: list[Skip] = []
    for name in files:
        where = tree.where(name)
        try:
            data = _load(tree, name)
        except ImportLimitError:
            raise
        except ImportFormatError as exc:
            skipped.append(Skip(where, str(exc).removeprefix(f"{where}: ")))
            continue
        found, more = lm_studio.read(data, where, _lm_studio_id(name))
        conversations += found
        skipped += more
    return ImportedSource(lm_studio.APP, conversations, skipped)


def _loose_json(tree: Tree, names: list[str]) -> ImportedSource | None:
    """Top-level ``.json`` files of one app (Open WebUI's ``chat-export-….json``, say)."""
    app: str | None = None
    conversations: list[ImportedConversation] = []
    skipped: list[Skip] = []
    for name in (n for n in names if "/" not in n and n.endswith(".json")):
        where = tree.where(name)
        try:
            found = _from_json(_load(tree, name), where, name)
        except ImportLimitError:
            raise
        except ImportFormatError:
            continue  # not an export: some other JSON file in the folder
        if found is None or found.app == AGENVOY:
            continue
        if app is None:
            app = found.app
        if found.app != app:
            skipped.append(Skip(where, f"a {found.app} export; import it on its own"))
            continue
        conversations += found.conversations
        skipped += found.skipped
    return None if app is None else ImportedSource(app, conversations, skipped)
