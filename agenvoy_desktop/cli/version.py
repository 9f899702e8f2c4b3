"""``agenvoy-desktop --version``: the version and where this installation keeps and finds things."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

from agenvoy_desktop.paths import app_paths


def version_text(data_dir: str | None) -> str:
    """Version, build, folders and llama.cpp's kernel path, one fact per line."""
    from agenvoy_desktop.llm.build_info import about_lines

    return "\n".join(about_lines(app_paths(data_dir)))


class VersionAction(argparse.Action):
    """``--version`` that reads ``--data-dir`` if it came first, prints and exits."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, help="show version and build, then exit")

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        sys.stdout.write(version_text(getattr(namespace, "data_dir", None)) + "\n")
        parser.exit()
