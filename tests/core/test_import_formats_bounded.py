"""Hostile paths: pipes, devices, huge and growing files, zip bombs, lying zip headers.

Each gets one line naming the file, and none may take the memory it asks
for: the hostile cases also run in a subprocess whose peak RSS is checked.
"""

from __future__ import annotations

import json
import os
import socket
import struct
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import pytest

from agenvoy_desktop.core.import_formats import ImportLimitError, Limits, read_source
from agenvoy_desktop.core.import_formats.bounded import read_capped, read_file
from agenvoy_desktop.core.importers import ImportFormatError
from tests.core.import_format_samples import gpt_branching, lms_conversation

MIB = 1024 * 1024
SMALL = Limits(max_file_bytes=10 * MIB, max_total_bytes=10 * MIB, max_entries=50)
POSIX = pytest.mark.skipif(os.name != "posix", reason="pipes and devices are POSIX")


def sparse(path: Path, size: int) -> Path:
    """A file of *size* bytes that takes no disk (truncate makes a hole)."""
    with path.open("wb") as handle:
        handle.truncate(size)
    return path


def zeros_zip(path: Path, name: str, size: int) -> Path:
    """A zip bomb: *size* bytes of zeros deflated to about a thousandth, written streaming."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive, archive.open(name, "w") as w:
        for _ in range(size // MIB):
            w.write(bytes(MIB))
    return path


def lying_zip(path: Path, name: str, size: int, claimed: int) -> Path:
    """:func:`zeros_zip` whose headers claim the member is only *claimed* bytes."""
    zeros_zip(path, name, size)
    data = bytearray(path.read_bytes())
    struct.pack_into("<I", data, 22, claimed)  # local header: uncompressed size
    central = data.rindex(b"PK\x01\x02")
    struct.pack_into("<I", data, central + 24, claimed)
    path.write_bytes(bytes(data))
    return path


# -- files -----------------------------------------------------------------------------
def test_a_file_over_the_limit_is_refused_before_reading(tmp_path: Path) -> None:
    path = sparse(tmp_path / "conversations.json", 50 * MIB)
    with pytest.raises(ImportLimitError) as caught:
        read_source(path, limits=SMALL)
    assert str(caught.value) == f"{path}: 50.0 MiB is larger than the import limit of 10.0 MiB"


def test_a_2_gb_file_is_one_line_with_the_default_limits(tmp_path: Path) -> None:
    path = sparse(tmp_path / "big.json", 2 * 1024 * MIB)
    with pytest.raises(ImportLimitError, match=r"2\.0 GiB is larger than the import limit"):
        read_source(path)


def test_a_file_that_grows_while_read_stops_at_the_cap() -> None:
    def endless(n: int) -> bytes:
        return b"x" * n

    with pytest.raises(ImportFormatError, match="grew"):
        read_capped(endless, 3 * MIB, lambda: "grew")


@POSIX
@pytest.mark.parametrize("device", ["/dev/zero", "/dev/urandom"])
def test_devices_are_refused(device: str) -> None:
    with pytest.raises(ImportFormatError, match=rf"^{device}: is a device, not a file"):
        read_source(Path(device))


@POSIX
def test_a_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "conversations.json"
    os.mkfifo(fifo)
    with pytest.raises(ImportFormatError, match=r"is a pipe \(FIFO\), not a file"):
        read_source(fifo)
    with pytest.raises(ImportFormatError, match="is a pipe"):
        read_source(tmp_path)  # found inside a folder, refused the same way


@POSIX
def test_a_socket_is_refused() -> None:
    with tempfile.TemporaryDirectory() as folder:  # short path: sockets' names are limited
        path = Path(folder) / "s"
        with socket.socket(socket.AF_UNIX) as server:
            server.bind(str(path))
            with pytest.raises(ImportFormatError, match="is a socket"):
                read_source(path)


@POSIX
def test_a_link_to_a_device_inside_a_folder_is_refused(tmp_path: Path) -> None:
    (tmp_path / "conversations.json").symlink_to("/dev/zero")
    with pytest.raises(ImportFormatError, match="is a device"):
        read_source(tmp_path)


def test_missing_path_binary_and_bad_encoding(tmp_path: Path) -> None:
    with pytest.raises(ImportFormatError, match="no such file or folder"):
        read_source(tmp_path / "nope.json")
    (tmp_path / "b.json").write_bytes(b"\x00\x01binary")
    with pytest.raises(ImportFormatError, match="binary data"):
        read_source(tmp_path / "b.json")
    (tmp_path / "l.json").write_bytes('[{"title": "café"}]'.encode("latin-1"))
    with pytest.raises(ImportFormatError, match="not UTF-8"):
        read_source(tmp_path / "l.json")


def test_a_folder_with_too_many_entries_is_refused(tmp_path: Path) -> None:
    for i in range(60):
        (tmp_path / f"{i}.txt").write_text("x")
    with pytest.raises(ImportLimitError, match="more than 50 entries; choose the export folder"):
        read_source(tmp_path, limits=SMALL)


def test_read_file_returns_the_bytes(tmp_path: Path) -> None:
    (tmp_path / "a").write_bytes(b"abc")
    assert read_file(tmp_path / "a", SMALL) == b"abc"


# -- zips ------------------------------------------------------------------------------
def test_a_zip_is_read_without_extracting(tmp_path: Path) -> None:
    path = tmp_path / "export.zip"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("chat.html", "<html></html>")
        archive.writestr("file-abc.png", b"\x89PNG")
        archive.writestr("conversations.json", json.dumps([gpt_branching()]))
    source = read_source(path, limits=SMALL)
    assert source.app == "chatgpt"
    assert len(source.conversations[0].messages) == 4
    assert sorted(p.name for p in tmp_path.iterdir()) == ["export.zip"]


def test_a_zip_bomb_is_refused_from_its_header(tmp_path: Path) -> None:
    path = zeros_zip(tmp_path / "x.zip", "conversations.json", 8 * MIB)
    with pytest.raises(ImportLimitError, match=r"expands more than 200× \(a zip bomb\?\)"):
        read_source(path, limits=SMALL)


def test_a_member_over_the_limit_is_refused_from_its_header(tmp_path: Path) -> None:
    path = zeros_zip(tmp_path / "x.zip", "conversations.json", 12 * MIB)
    with pytest.raises(ImportLimitError, match=r"12\.0 MiB is larger than the import limit"):
        read_source(path, limits=Limits(max_file_bytes=10 * MIB, max_ratio=10_000))


def test_a_lying_header_is_caught_while_streaming(tmp_path: Path) -> None:
    path = lying_zip(tmp_path / "x.zip", "conversations.json", 8 * MIB, claimed=100)
    with pytest.raises(ImportFormatError, match=r"x\.zip \(conversations\.json\)"):
        read_source(path, limits=SMALL)


def test_too_many_members(tmp_path: Path) -> None:
    path = tmp_path / "x.zip"
    with zipfile.ZipFile(path, "w") as archive:
        for i in range(51):
            archive.writestr(f"{i}.txt", "x")
    with pytest.raises(ImportLimitError, match="more than 50 members"):
        read_source(path, limits=SMALL)


def many_members(path: Path, count: int, claimed: int | None = None) -> Path:
    """A zip of *count* empty members; *claimed* overwrites the count its end record states."""
    with zipfile.ZipFile(path, "w") as archive:
        for i in range(count):
            archive.writestr(f"{i:05x}", b"")
    if claimed is not None:
        data = bytearray(path.read_bytes())
        end = data.rindex(b"PK\x05\x06")
        struct.pack_into("<HH", data, end + 8, claimed, claimed)
        path.write_bytes(bytes(data))
    return path


def test_a_lying_member_count_is_caught_after_listing(tmp_path: Path) -> None:
    path = many_members(tmp_path / "x.zip", 60, claimed=3)
    with pytest.raises(ImportLimitError, match="more than 50 members"):
        read_source(path, limits=SMALL)


def test_a_huge_member_list_is_refused_before_it_is_loaded(tmp_path: Path) -> None:
    path = many_members(tmp_path / "x.zip", 40)
    with pytest.raises(ImportLimitError, match=r"its list of members is 2 KiB, over the limit"):
        read_source(path, limits=Limits(max_entries=50, max_zip_index_bytes=1000))


def test_a_zip64_member_count_is_read_from_its_own_record(tmp_path: Path) -> None:
    path = many_members(tmp_path / "x.zip", 0x10000)  # past 65,535: zip64 end records
    assert b"PK\x06\x06" in path.read_bytes()[-200:]
    with pytest.raises(ImportLimitError, match="more than 50 members"):
        read_source(path, limits=SMALL)


def test_the_total_read_from_one_zip_is_bounded(tmp_path: Path) -> None:
    path = tmp_path / "x.zip"
    chat = lms_conversation()
    chat["name"] = os.urandom(3 * MIB).hex()  # 6 MiB of text that does not compress away
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("a.conversation.json", json.dumps(chat))
        archive.writestr("b.conversation.json", json.dumps(chat))
    with pytest.raises(ImportLimitError, match=r"more than 10\.0 MiB to read in one import"):
        read_source(path, limits=SMALL)


def test_a_damaged_zip_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "x.zip"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("conversations.json", json.dumps([gpt_branching()]) * 50)
    data = bytearray(path.read_bytes())
    data[60:200] = bytes(140)  # scribble over the compressed stream
    path.write_bytes(bytes(data))
    with pytest.raises(ImportFormatError, match=r"x\.zip \(conversations\.json\): damaged"):
        read_source(path, limits=SMALL)


# -- memory ----------------------------------------------------------------------------
_HOSTILE = """
import json, resource, sys
from pathlib import Path
from agenvoy_desktop.core.import_formats import Limits, read_source
from agenvoy_desktop.core.importers import ImportFormatError

small = Limits(max_file_bytes=10 * 2**20, max_total_bytes=10 * 2**20)
lines = []
for path, limits in json.loads(sys.argv[1]):
    try:
        read_source(Path(path), limits=small if limits else Limits())
        lines.append(None)
    except ImportFormatError as exc:
        lines.append(str(exc))
status = Path("/proc/self/status")
if status.exists():  # this process's own high-water mark (see the test's docstring)
    rows = status.read_text().splitlines()
    peak = next(int(row.split()[1]) for row in rows if row.startswith("VmHWM:"))
else:
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    peak = peak // 1024 if sys.platform == "darwin" else peak
print(json.dumps({"lines": lines, "peak_kib": peak}))
"""


@pytest.fixture
def hostile(tmp_path: Path) -> list[tuple[str, bool]]:
    """(path, use the small limits) for every hostile input, built once."""
    cases = [
        (sparse(tmp_path / "sparse.json", 50 * MIB), True),
        (sparse(tmp_path / "two-gb.json", 2 * 1024 * MIB), False),
        (zeros_zip(tmp_path / "bomb.zip", "conversations.json", 100 * MIB), True),
        (zeros_zip(tmp_path / "bomb-default.zip", "conversations.json", 100 * MIB), False),
        (lying_zip(tmp_path / "liar.zip", "conversations.json", 100 * MIB, 1000), True),
        (lying_zip(tmp_path / "liar-big.zip", "conversations.json", 100 * MIB, 5 * MIB), True),
        (many_members(tmp_path / "many.zip", 120_000, claimed=10), False),
    ]
    if os.name == "posix":
        os.mkfifo(tmp_path / "fifo")
        cases += [(Path("/dev/zero"), False), (Path("/dev/urandom"), False)]
        cases += [(tmp_path / "fifo", False)]
    return [(str(path), small) for path, small in cases]


@pytest.mark.skipif(sys.platform == "win32", reason="resource is POSIX-only")
def test_hostile_inputs_stay_under_300_mb(hostile: list[tuple[str, bool]]) -> None:
    """Peak RSS of a process that reads every hostile input, taken in that process.

    The child reports its own peak rather than the parent reading
    ``RUSAGE_CHILDREN``: the latter is the largest of every child this test
    process ever waited for, so another test's subprocess could fail this one.
    On Linux it reads ``VmHWM`` (the high-water mark of its own memory map):
    ``RUSAGE_SELF`` keeps the parent's peak across fork and exec, and inside
    the full suite pytest's ~850 MB showed up as the child's.
    """
    result = subprocess.run(
        [sys.executable, "-c", _HOSTILE, json.dumps(hostile)],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    report = json.loads(result.stdout)
    assert all(line and "\n" not in line for line in report["lines"]), report["lines"]
    assert report["peak_kib"] < 300 * 1024
