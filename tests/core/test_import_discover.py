"""Finding other apps' chat histories on this computer: read-only, bounded, newest first."""

from __future__ import annotations

import json
import os
import zipfile
from pathlib import Path

from agenvoy_desktop.core.import_formats.detect import read_source
from agenvoy_desktop.core.import_formats.discover import find_histories
from tests.core.import_format_samples import (
    claude_conversation,
    gpt_branching,
    jan_message,
    jan_thread,
    lms_conversation,
)


def _tree_state(root: Path) -> dict[str, tuple[int, int]]:
    return {str(p): (p.stat().st_size, p.stat().st_mtime_ns) for p in root.rglob("*")}


def _home(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    lms = home / ".lmstudio" / "conversations" / "folder"
    lms.mkdir(parents=True)
    (lms / "1700000000000.conversation.json").write_text(json.dumps(lms_conversation()))
    thread = home / ".local" / "share" / "Jan" / "data" / "threads" / "jan_1"
    thread.mkdir(parents=True)
    (thread / "thread.json").write_text(json.dumps(jan_thread()))
    (thread / "messages.jsonl").write_text(
        json.dumps(jan_message("m1", "user", "I keep my bike in the hall.", 1_700_000_000)) + "\n"
    )
    downloads = home / "Downloads"
    downloads.mkdir()
    with zipfile.ZipFile(downloads / "chatgpt-export.zip", "w") as zf:
        zf.writestr("conversations.json", json.dumps([gpt_branching()]))
        zf.writestr("chat.html", "<html></html>")
    with zipfile.ZipFile(downloads / "data-2024-batch-0000.zip", "w") as zf:
        zf.writestr("conversations.json", json.dumps([claude_conversation()]))
        zf.writestr("users.json", "[]")
    with zipfile.ZipFile(downloads / "photos.zip", "w") as zf:
        zf.writestr("a.jpg", b"\xff\xd8")
    (downloads / "broken.zip").write_bytes(b"PK not really")
    return home


def test_histories_are_found_where_the_apps_keep_them(tmp_path: Path) -> None:
    home = _home(tmp_path)
    before = _tree_state(home)
    found = find_histories(home, env={})
    assert sorted(f.app for f in found) == ["chatgpt", "claude", "jan", "lm_studio"]
    assert _tree_state(home) == before  # only read
    by_app = {f.app: f for f in found}
    assert by_app["lm_studio"].conversations == 1
    assert by_app["jan"].conversations == 1
    # every place found is one the import reads as that app
    for place in found:
        assert read_source(place.path).app == place.app


def test_newest_first_and_nothing_when_nothing_is_there(tmp_path: Path) -> None:
    home = _home(tmp_path)
    old = home / "Downloads" / "chatgpt-export.zip"
    os.utime(old, (1_000_000_000, 1_000_000_000))
    found = find_histories(home, env={})
    assert found[-1].path == old
    assert find_histories(tmp_path / "nobody", env={}) == []
