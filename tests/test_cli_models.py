"""``agenvoy-desktop models``: a small parser calling register() as build_parser does."""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agenvoy_desktop import cli
from agenvoy_desktop.cli import models as cli_models
from agenvoy_desktop.cli.common import CliError
from agenvoy_desktop.cli.models import format_count, format_size, register
from agenvoy_desktop.llm import discovery
from agenvoy_desktop.llm.catalogue import CATALOGUE_FILE
from agenvoy_desktop.llm.endpoints import EndpointConfigError
from agenvoy_desktop.llm.openai_chat import EndpointError
from tests.loopback import (
    allow_loopback,
    fake_server,
    free_port,
    llamacpp_routes,
    lmstudio_routes,
    ollama_routes,
    plain_routes,
)
from tests.tiny_gguf import write_tiny_llama

__all__ = ["allow_loopback", "fake_server"]  # fixtures, used by name

Run = Callable[..., int]


def build_parser() -> argparse.ArgumentParser:
    """The shape of cli.build_parser: a common --data-dir and an ``add`` helper."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--data-dir", default=argparse.SUPPRESS)
    parser = argparse.ArgumentParser(prog="agenvoy-desktop", parents=[common])
    sub = parser.add_subparsers(dest="command")

    def add(
        name: str, func: Callable[[argparse.Namespace], int], text: str
    ) -> argparse.ArgumentParser:
        cmd = sub.add_parser(name, parents=[common], help=text)
        cmd.set_defaults(func=func)
        return cmd

    register(add)
    return parser


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    return tmp_path / "profile"


@pytest.fixture
def models_dir(data_dir: Path) -> Path:
    return data_dir / "data" / "models"


@pytest.fixture
def run(data_dir: Path) -> Run:
    def run(*argv: str) -> int:
        args = build_parser().parse_args(["--data-dir", str(data_dir), *argv])
        args.data_dir = getattr(args, "data_dir", None)
        result: int = args.func(args)
        return result

    return run


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_tiny_llama(tmp_path_factory.mktemp("src") / "tiny.gguf")


@pytest.fixture
def model(tmp_path: Path, tiny: Path) -> Path:
    path = tmp_path / "downloads" / "tiny-chat.gguf"
    path.parent.mkdir()
    shutil.copyfile(tiny, path)
    return path


def listed(run: Run, capsys: pytest.CaptureFixture[str]) -> list[dict[str, Any]]:
    capsys.readouterr()
    assert run("models", "--json") == 0
    data: list[dict[str, Any]] = json.loads(capsys.readouterr().out)
    return data


def test_empty_list_says_how_to_start(run: Run, capsys: pytest.CaptureFixture[str]) -> None:
    assert run("models") == 0
    assert "agenvoy-desktop setup" in capsys.readouterr().out
    assert listed(run, capsys) == []


def test_add_then_list(run: Run, model: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run("models", "add", str(model)) == 0
    out = capsys.readouterr().out
    assert "added 'tiny-chat' (llama, 115K parameters, F32, context 2048)" in out
    assert "models verify tiny-chat" in out
    assert run("models") == 0
    table = capsys.readouterr().out.splitlines()
    assert table[1].split()[0] == "NAME"
    row = table[2].split()
    assert row[:8] == ["tiny-chat", "chat", "user", "llama", "115K", "2048", "F32", "460"]
    assert row[-1] == str(model)
    (entry,) = listed(run, capsys)
    assert entry["name"] == "tiny-chat"
    assert entry["path"] == str(model)
    assert entry["parameters"] == 115392
    assert entry["sha256"] is None
    assert {
        "role",
        "source",
        "architecture",
        "context_length",
        "quantisation",
        "size_bytes",
    } <= set(entry)


def test_list_action_and_json_spelling(
    run: Run, model: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run("models", "add", str(model), "--name", "n1", "--role", "any")
    capsys.readouterr()
    assert run("models", "list", "--json") == 0
    assert json.loads(capsys.readouterr().out)[0]["role"] == "any"


def test_add_bad_file_is_a_one_line_error(run: Run, tmp_path: Path, models_dir: Path) -> None:
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"<html>not a model</html>")
    with pytest.raises(cli.CliError, match=f"{bad}: not a GGUF file"):
        run("models", "add", str(bad))
    assert not (models_dir / CATALOGUE_FILE).exists(), "nothing stored"


def test_add_duplicate_keeps_catalogue(run: Run, model: Path, models_dir: Path) -> None:
    run("models", "add", str(model))
    before = (models_dir / CATALOGUE_FILE).read_bytes()
    with pytest.raises(cli.CliError, match="already in the catalogue"):
        run("models", "add", str(model), "--name", "again")
    assert (models_dir / CATALOGUE_FILE).read_bytes() == before


def test_copy_and_remove(
    run: Run, model: Path, models_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run("models", "add", str(model), "--copy")
    copy = models_dir / model.name
    assert copy.is_file()
    (entry,) = listed(run, capsys)
    assert entry["copied"]
    assert entry["sha256"] is not None
    assert run("models", "remove", "tiny-chat") == 0
    assert "deleted the app's copy" in capsys.readouterr().out
    assert not copy.exists()
    assert model.exists()


def test_remove_unknown(run: Run) -> None:
    with pytest.raises(cli.CliError, match="no model named 'nope'"):
        run("models", "remove", "nope")


def test_verify(run: Run, model: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run("models", "add", str(model), "--name", "v")
    capsys.readouterr()
    assert run("models", "verify", "v") == 0
    assert "recorded" in capsys.readouterr().out
    assert run("models", "verify", "v") == 0
    assert "OK" in capsys.readouterr().out
    data = bytearray(model.read_bytes())
    data[-1] ^= 1
    model.write_bytes(bytes(data))
    with pytest.raises(cli.CliError, match=f"{model}: sha256 mismatch"):
        run("models", "verify", "v")


def test_discover(
    run: Run,
    tiny: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    home = tmp_path / "home"
    found_file = home / ".lmstudio/models/pub/repo/found.gguf"
    found_file.parent.mkdir(parents=True)
    shutil.copyfile(tiny, found_file)
    monkeypatch.setattr(
        cli_models, "discover_gguf_files", lambda: discovery.discover_gguf_files(home=home, env={})
    )
    assert run("models", "discover") == 0
    out = capsys.readouterr().out
    assert "LM Studio" in out
    assert "pub/repo/found.gguf" in out
    assert "models add PATH" in out
    run("models", "add", str(found_file), "--name", "mine")
    capsys.readouterr()
    assert run("models", "discover", "--json") == 0
    (item,) = json.loads(capsys.readouterr().out)
    assert item["app"] == "LM Studio"
    assert item["path"] == str(found_file)
    assert item["catalogued_as"] == "mine"
    assert item["architecture"] == "llama"


def test_discover_nothing(
    run: Run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(
        cli_models,
        "discover_gguf_files",
        lambda: discovery.discover_gguf_files(home=tmp_path / "nobody", env={}),
    )
    assert run("models", "discover") == 0
    assert "no GGUF files found" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("n", "text"),
    [
        (None, "-"),
        (999, "999"),
        (115392, "115K"),
        (22_565_376, "22.6M"),
        (630167424, "630M"),
        (7_241_732_096, "7.2B"),
    ],
)
def test_format_count(n: int | None, text: str) -> None:
    assert format_count(n) == text


@pytest.mark.parametrize(
    ("n", "text"),
    [
        (None, "-"),
        (512, "512 B"),
        (470880, "460 KiB"),
        (491400064, "469 MiB"),
        (4_200_000_000, "3.9 GiB"),
    ],
)
def test_format_size(n: int | None, text: str) -> None:
    assert format_size(n) == text


def test_through_the_real_cli_once_wired(
    data_dir: Path, model: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """After the lead adds register() to cli.build_parser, the whole path runs end to end."""
    try:
        cli.build_parser().parse_args(["models"])
    except SystemExit:
        pytest.skip("cli.build_parser does not register the models commands yet")
    assert cli.main(["--data-dir", str(data_dir), "models", "add", str(model)]) == 0
    assert cli.main(["models", "--data-dir", str(data_dir), "--json"]) == 0
    out = capsys.readouterr().out
    assert '"name": "tiny-chat"' in out
    assert cli.main(["models", "remove", "nope", "--data-dir", str(data_dir)]) == 1
    assert "no model named 'nope'" in capsys.readouterr().err


# -- endpoints ------------------------------------------------------------------------------
def _settings(data_dir: Path) -> dict[str, Any]:
    from agenvoy_desktop.paths import app_paths

    data: dict[str, Any] = json.loads(app_paths(str(data_dir)).settings_file.read_text("utf-8"))
    return data


def test_add_endpoint_probes_and_lists(
    run: Run, fake_server: Any, capsys: pytest.CaptureFixture[str], models_dir: Path
) -> None:
    server = fake_server(ollama_routes("llama3.1:8b", 131072))
    assert run("models", "add-endpoint", server.root) == 0
    out = capsys.readouterr().out
    assert f"added endpoint 'llama3.1:8b': llama3.1:8b at {server.base_url}" in out
    assert "context 131072 tokens (on this machine)" in out
    assert "models use endpoint:llama3.1:8b" in out
    assert run("models") == 0
    row = capsys.readouterr().out.splitlines()[-1].split()
    assert row[:6] == ["llama3.1:8b", "chat", "endpoint", "-", "8.0B", "131072"]
    assert row[-1] == server.base_url
    (entry,) = listed(run, capsys)
    assert entry["source"] == "endpoint"
    assert entry["choice"] == "endpoint:llama3.1:8b"
    assert (entry["base_url"], entry["remote"], entry["api_key"]) == (server.base_url, False, None)
    assert (models_dir / "endpoints.json").is_file()


def test_add_endpoint_with_several_models_asks_which(
    run: Run, fake_server: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    server = fake_server(plain_routes("small", "big"))
    with pytest.raises(CliError, match="offers 2 models; choose one with --model: small, big"):
        run("models", "add-endpoint", server.base_url)
    with pytest.raises(CliError, match="has no model 'huge'; it offers: small, big"):
        run("models", "add-endpoint", server.base_url, "--model", "huge")
    assert run("models", "add-endpoint", server.base_url, "--model", "BIG", "--json") == 0
    data = json.loads(capsys.readouterr().out)
    assert (data["name"], data["model"], data["context_length"]) == ("big", "big", None)


def test_add_endpoint_refuses_remote_without_confirmation(run: Run, models_dir: Path) -> None:
    with pytest.raises(CliError) as caught:
        run("models", "add-endpoint", "https://api.example.com/v1", "--model", "m")
    message = str(caught.value)
    assert "on another machine" in message
    assert "--yes-remote" in message
    assert "\n" not in message
    assert not (models_dir / "endpoints.json").exists()


def test_add_endpoint_keys(
    run: Run,
    fake_server: Any,
    models_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    server = fake_server(plain_routes("m"))
    with pytest.raises(CliError, match="TEST_ENDPOINT_KEY is not set"):
        run("models", "add-endpoint", server.root, "--api-key-env", "TEST_ENDPOINT_KEY")
    monkeypatch.setenv("TEST_ENDPOINT_KEY", "sk-test-secret")
    assert run("models", "add-endpoint", server.root, "--api-key-env", "TEST_ENDPOINT_KEY") == 0
    assert server.seen[-1][2] == "Bearer sk-test-secret"
    assert "sk-test-secret" not in (models_dir / "endpoints.json").read_text("utf-8")
    (entry,) = listed(run, capsys)
    assert entry["api_key"] == "env:TEST_ENDPOINT_KEY"
    monkeypatch.setitem(sys.modules, "keyring", None)  # no keyring installed
    with pytest.raises(CliError, match="--api-key-env VAR") as caught:
        run("models", "add-endpoint", server.root, "--keyring", "--name", "k")
    assert "\n" not in str(caught.value)


def test_add_endpoint_to_a_stopped_server(run: Run, allow_loopback: None) -> None:
    with pytest.raises(EndpointError, match="is the server running") as caught:
        run("models", "add-endpoint", f"127.0.0.1:{free_port()}", "--timeout", "1")
    assert caught.value.kind == "refused"


def test_use_and_remove_endpoint(
    run: Run,
    fake_server: Any,
    data_dir: Path,
    model: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    server = fake_server(lmstudio_routes("qwen2.5-7b-instruct", 32768))
    assert run("models", "add-endpoint", server.root, "--name", "lm") == 0
    assert run("models", "use", "endpoint:lm") == 0
    assert "chat model: lm (qwen2.5-7b-instruct at" in capsys.readouterr().out
    assert _settings(data_dir)["models"]["chat_model"] == "endpoint:lm"
    assert run("models", "add", str(model)) == 0
    assert run("models", "use", "tiny-chat") == 0
    assert _settings(data_dir)["models"]["chat_model"] == "tiny-chat"
    assert run("models", "use", "lm") == 0  # a bare endpoint name works too
    assert _settings(data_dir)["models"]["chat_model"] == "endpoint:lm"
    with pytest.raises(CliError, match="no chat model or endpoint named 'nope'"):
        run("models", "use", "nope")
    capsys.readouterr()
    assert run("models", "remove-endpoint", "lm") == 0
    out = capsys.readouterr().out
    assert "removed endpoint 'lm'" in out
    assert "the starter chat model is used again" in out
    assert _settings(data_dir)["models"]["chat_model"] == ""
    with pytest.raises(EndpointConfigError, match="no endpoint named 'lm'"):
        run("models", "remove-endpoint", "lm")


def test_find_servers(
    run: Run, fake_server: Any, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from agenvoy_desktop.llm import endpoints

    monkeypatch.setattr(endpoints, "PRESETS", {"ollama": free_port(), "llamacpp": free_port()})
    assert run("models", "find-servers") == 0
    assert "no chat server is running on this machine" in capsys.readouterr().out
    server = fake_server(llamacpp_routes("tiny.gguf", 2048))
    monkeypatch.setattr(endpoints, "PRESETS", {"ollama": free_port(), "llamacpp": server.port})
    assert run("models", "find-servers") == 0
    out = capsys.readouterr().out.splitlines()
    assert out[1].split() == ["llama.cpp", "server", "tiny.gguf", "2048", server.base_url]
    assert run("models", "find-servers", "--json") == 0
    (found,) = json.loads(capsys.readouterr().out)
    assert found["preset"] == "llamacpp"
    assert found["models"] == [{"id": "tiny.gguf", "context_size": 2048}]
