"""The one-time extra-buffers probe: verdicts, the stored file, the environment override."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from agenvoy_desktop.cli import main as cli_main
from agenvoy_desktop.llm import buffer_probe, cpu_features
from agenvoy_desktop.llm.buffer_probe import (
    VERDICT_FILE,
    Verdict,
    ensure_verdict,
    probe,
    read_verdict,
)
from agenvoy_desktop.llm.cpu_features import EXTRA_BUFFERS_ENV, extra_buffers_choice
from agenvoy_desktop.llm.machine_identity import machine_key

exercises_extra_buffers_really = buffer_probe.exercises_extra_buffers


@pytest.fixture(autouse=True)
def _fresh_choice(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test starts unprobed and without the environment override."""
    monkeypatch.delenv(EXTRA_BUFFERS_ENV, raising=False)
    monkeypatch.setattr(cpu_features, "_verdict", {})
    monkeypatch.setattr(buffer_probe, "exercises_extra_buffers", lambda path: path.is_file())


def _child(monkeypatch: pytest.MonkeyPatch, code: str) -> None:
    """Replace the probe's child by a tiny Python program."""
    monkeypatch.setattr(buffer_probe, "probe_command", lambda _model: [sys.executable, "-c", code])


def test_clean_exit_with_marker_keeps_the_buffers_on(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _child(monkeypatch, f"print({buffer_probe._DONE!r})")
    verdict = probe(tmp_path / "m.gguf")
    assert verdict.enabled
    assert verdict.machine == machine_key()


def test_a_crash_turns_them_off_and_names_the_signal(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _child(monkeypatch, "import os, signal; os.kill(os.getpid(), signal.SIGSEGV)")
    verdict = probe(tmp_path / "m.gguf")
    assert not verdict.enabled
    assert "SIGSEGV" in verdict.reason


def test_an_error_exit_or_a_hang_turns_them_off(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _child(monkeypatch, "import sys; sys.exit('model is broken')")
    failed = probe(tmp_path / "m.gguf")
    assert not failed.enabled
    assert "model is broken" in failed.reason
    _child(monkeypatch, "import time; time.sleep(30)")
    hung = probe(tmp_path / "m.gguf", timeout_s=0.5)
    assert not hung.enabled
    assert "did not finish" in hung.reason


def test_the_verdict_is_stored_applied_and_not_probed_again(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    model = tmp_path / "m.gguf"
    model.write_bytes(b"GGUF")
    calls: list[Path] = []

    def fake_probe(model: Path, **_kw: object) -> Verdict:
        calls.append(model)
        return Verdict(False, "killed by SIGILL", machine_key())

    monkeypatch.setattr(buffer_probe, "probe", fake_probe)
    first = ensure_verdict(tmp_path, model)
    second = ensure_verdict(tmp_path, model)
    assert first == second
    assert len(calls) == 1
    assert extra_buffers_choice() == (False, "killed by SIGILL")


def test_another_machine_or_a_damaged_file_means_probe_again(tmp_path: Path) -> None:
    stored = {"enabled": True, "reason": "ok", "machine": "someone-else", "probed_at": 1.0}
    (tmp_path / VERDICT_FILE).write_text(json.dumps(stored))
    assert read_verdict(tmp_path) is None
    (tmp_path / VERDICT_FILE).write_text("{not json")
    assert read_verdict(tmp_path) is None


def test_the_environment_decides_without_a_probe(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv(EXTRA_BUFFERS_ENV, "0")
    monkeypatch.setattr(buffer_probe, "probe", lambda *_a, **_k: pytest.fail("probed"))
    assert ensure_verdict(tmp_path, tmp_path / "m.gguf") is None
    assert extra_buffers_choice() == (False, f"forced by {EXTRA_BUFFERS_ENV}=0")


def test_version_names_folders_and_the_kernel_path(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    with pytest.raises(SystemExit) as done:
        cli_main(["--data-dir", str(tmp_path), "--version"])
    assert done.value.code == 0
    out = capsys.readouterr().out
    assert str(tmp_path / "config") in out
    assert str(tmp_path / "data" / "models") in out
    assert "llama.cpp" in out
    assert "extra buffers" in out
    assert "GPU offload" in out


def test_an_inconclusive_probe_is_not_stored(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    model = tmp_path / "m.gguf"
    model.write_bytes(b"GGUF")
    _child(monkeypatch, "import sys; sys.exit('cannot load the model')")
    verdict = ensure_verdict(tmp_path, model)
    assert verdict is not None
    assert not verdict.conclusive
    assert not (tmp_path / VERDICT_FILE).exists()
    assert extra_buffers_choice()[1].startswith("not probed yet")


def test_a_missing_model_is_not_probed(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(buffer_probe, "probe", lambda *_a, **_k: pytest.fail("probed"))
    assert ensure_verdict(tmp_path, tmp_path / "missing.gguf") is None


def test_an_unquantised_model_teaches_nothing(tmp_path: Path) -> None:
    """An F32 model never takes the repacked paths: it would pass where the starter faults."""
    from tests.tiny_gguf import write_tiny_llama

    tiny = write_tiny_llama(tmp_path / "tiny.gguf")
    assert not exercises_extra_buffers_really(tiny)
    assert not exercises_extra_buffers_really(tmp_path / "missing.gguf")
