"""The packaging files agree with each other and with the frozen layout the spec produces.

The Windows installer cannot be compiled here, so every path it names is
checked against the repository and the layout of ``dist/agenvoy-desktop``;
the desktop entry, the AppStream file and the icons are checked the same way.
"""

from __future__ import annotations

import re
import sys
import tomllib
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

import agenvoy_desktop

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "packaging"))
import packaging_layout as layout  # noqa: E402

ISS = (ROOT / "installer.iss").read_text(encoding="utf-8")
SPEC = (ROOT / "packaging" / "agenvoy-desktop.spec").read_text(encoding="utf-8")


def project_version() -> str:
    with (ROOT / "pyproject.toml").open("rb") as handle:
        return str(tomllib.load(handle)["project"]["version"])


def iss_define(name: str) -> str:
    found = re.search(rf'#define {name} "([^"]+)"', ISS)
    assert found, f"installer.iss does not define {name}"
    return found.group(1)


def test_versions_agree() -> None:
    assert agenvoy_desktop.__version__ == project_version()
    assert iss_define("AppVersion") == project_version()
    metainfo = ET.parse(ROOT / "resources" / "io.agenvoy.desktop.metainfo.xml").getroot()
    releases = [r.get("version") for r in metainfo.iter("release")]
    assert project_version() in releases


def test_installer_takes_the_frozen_folder_the_spec_writes() -> None:
    sources = re.findall(r'Source: "([^"]+)"', ISS)
    assert sources == [layout.INSTALLER_SOURCE + "\\*"]
    assert iss_define("AppExe") == layout.APP_NAME + ".exe"
    assert f"name={layout.APP_NAME!r}" not in SPEC  # the spec uses the shared constant
    assert "name=APP_NAME" in SPEC
    assert SPEC.count("name=APP_NAME") == 2  # the executable and the folder


@pytest.mark.parametrize("key", ["SetupIconFile"])
def test_installer_files_exist(key: str) -> None:
    found = re.search(rf"^{key}=(.+)$", ISS, re.MULTILINE)
    assert found
    assert (ROOT / found.group(1).strip().replace("\\", "/")).is_file()


def test_uninstaller_keeps_memory_unless_asked() -> None:
    assert "MB_DEFBUTTON2" in ISS  # "No" (keep) is the default answer
    assert iss_define("DataFolder") == "AgenvoyDesktop"
    assert "PrivilegesRequired=lowest" in ISS
    assert 'Parameters: "setup"' in ISS


def test_spec_names_files_that_exist() -> None:
    for relative in re.findall(r'ROOT / "([^"]+)" / "([^"]+)"(?: / "([^"]+)")?', SPEC):
        path = ROOT.joinpath(*[part for part in relative if part])
        assert path.exists(), path


def test_desktop_entry_and_icons() -> None:
    entry = (ROOT / "resources" / "agenvoy-desktop.desktop").read_text(encoding="utf-8")
    fields = dict(line.split("=", 1) for line in entry.splitlines()[1:] if "=" in line)
    assert entry.startswith("[Desktop Entry]\n")
    assert fields["Type"] == "Application"
    assert fields["Exec"] == layout.APP_NAME
    icon = fields["Icon"]
    icons = ROOT / "resources" / "icons"
    assert (icons / f"{icon}.svg").is_file()
    for size in (16, 24, 32, 48, 64, 128, 256, 512):
        png = icons / f"{icon}-{size}.png"
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", png
    assert (icons / f"{icon}.ico").is_file()
    assert (icons / f"{icon}.icns").is_file()
    metainfo = ET.parse(ROOT / "resources" / "io.agenvoy.desktop.metainfo.xml").getroot()
    launchable = metainfo.find("launchable")
    assert launchable is not None
    assert launchable.text == "agenvoy-desktop.desktop"


def test_model_packages_match_the_model_list() -> None:
    listed = [
        line.split("==")[0].replace("-", "_")
        for line in (ROOT / "packaging" / "models.txt").read_text(encoding="utf-8").splitlines()
        if line and not line.startswith("#")
    ]
    assert sorted(listed) == sorted(layout.MODEL_PACKAGES)
