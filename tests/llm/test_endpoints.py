"""The endpoint registry, probing real (tiny, loopback) HTTP servers, and API keys."""

from __future__ import annotations

import json
import sys
import types
from pathlib import Path
from typing import Any

import pytest

from agenvoy_desktop.llm.catalogue import ModelCatalogue
from agenvoy_desktop.llm.endpoints import (
    ENDPOINTS_FILE,
    Endpoint,
    EndpointConfigError,
    EndpointRegistry,
    answered_by,
    api_key_for,
    describe_answerer,
    endpoint_name,
    endpoint_profile,
    is_loopback,
    keyring_problem,
    look_for_servers,
    normalise_url,
    open_endpoint_model,
    parameters_from_name,
    probe,
    server_root,
    store_api_key,
)
from agenvoy_desktop.llm.openai_chat import EndpointError
from tests.loopback import (
    Reply,
    allow_loopback,
    fake_server,
    free_port,
    llamacpp_routes,
    lmstudio_routes,
    models_listing,
    ollama_routes,
    plain_routes,
)
from tests.tiny_gguf import write_tiny_llama

__all__ = ["allow_loopback", "fake_server"]  # fixtures, used by name


@pytest.fixture
def registry(tmp_path: Path) -> EndpointRegistry:
    return EndpointRegistry(tmp_path / "models")


# -- addresses -----------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("127.0.0.1:11434", "http://127.0.0.1:11434/v1"),
        ("http://localhost:1234/", "http://localhost:1234/v1"),
        ("HTTP://LocalHost:8080/v1/", "http://localhost:8080/v1"),
        ("http://127.0.0.1:8080/v1/chat/completions", "http://127.0.0.1:8080/v1"),
        ("http://127.0.0.1:8080/v1/models", "http://127.0.0.1:8080/v1"),
        ("https://openrouter.ai/api/v1", "https://openrouter.ai/api/v1"),
        ("https://api.groq.com/openai/v1/", "https://api.groq.com/openai/v1"),
        ("http://[::1]:8080", "http://[::1]:8080/v1"),
        ("  http://10.0.0.5:8000?x=1#y ", "http://10.0.0.5:8000/v1"),
    ],
)
def test_normalise_url(given: str, expected: str) -> None:
    assert normalise_url(given) == expected
    assert normalise_url(expected) == expected


@pytest.mark.parametrize(
    "bad", ["", "ftp://host/v1", "http://", "http://user:secret@host:1/v1", "http://h:99999"]
)
def test_normalise_url_refuses(bad: str) -> None:
    with pytest.raises(EndpointConfigError) as caught:
        normalise_url(bad)
    assert "\n" not in str(caught.value)
    assert "secret" not in str(caught.value)


@pytest.mark.parametrize(
    ("url", "local"),
    [
        ("http://127.0.0.1:1/v1", True),
        ("http://127.8.9.10/v1", True),
        ("http://localhost:11434", True),
        ("http://[::1]:8080/v1", True),
        ("http://[::ffff:127.0.0.1]:8080", True),
        ("127.0.0.1:1234", True),
        ("http://192.168.1.20:11434/v1", False),
        ("http://0.0.0.0:8080", False),
        ("https://api.openai.com/v1", False),
        ("http://localhost.evil.example/v1", False),
        ("http://128.0.0.1/v1", False),
        ("http://[::2]/v1", False),
    ],
)
def test_is_loopback(url: str, local: bool) -> None:
    assert is_loopback(url) is local


def test_server_root_and_choice_names() -> None:
    assert server_root("http://127.0.0.1:11434/v1") == "http://127.0.0.1:11434"
    assert server_root("https://x.example/api/v1") == "https://x.example/api"
    assert endpoint_name("endpoint:big one") == "big one"
    assert endpoint_name("qwen2.5-coder-0.5b-instruct") is None


# -- the registry --------------------------------------------------------------------------
def test_add_get_remove_round_trip(registry: EndpointRegistry) -> None:
    added = registry.add("127.0.0.1:11434", "llama3.1:8b", context_size=8192, preset="ollama")
    assert added == Endpoint(
        "llama3.1:8b",
        "http://127.0.0.1:11434/v1",
        "llama3.1:8b",
        8192,
        None,
        False,
        False,
        "ollama",
    )
    assert (added.remote, added.choice) == (False, "endpoint:llama3.1:8b")
    again = EndpointRegistry(registry.models_dir)  # another process reading the file
    assert again.entries() == [added]
    assert again.get("LLAMA3.1:8B") == added
    assert again.get("endpoint:llama3.1:8b") == added
    assert registry.remove("llama3.1:8b") == added
    assert registry.entries() == []
    with pytest.raises(EndpointConfigError, match="no endpoint named 'gone'"):
        registry.get("gone")


def test_names_are_unique_and_made_from_the_model_id(
    registry: EndpointRegistry, tmp_path: Path
) -> None:
    first = registry.add("127.0.0.1:1234", "qwen/qwen2.5-7b")
    second = registry.add("127.0.0.1:1235", "qwen/qwen2.5-7b")
    assert (first.name, second.name) == ("qwen-qwen2.5-7b", "qwen-qwen2.5-7b-2")
    with pytest.raises(EndpointConfigError, match="already used"):
        registry.add("127.0.0.1:9", "m", name="QWEN-qwen2.5-7b")
    with pytest.raises(EndpointConfigError, match="bad endpoint name"):
        registry.add("127.0.0.1:9", "m", name="a/b")
    gguf = write_tiny_llama(tmp_path / "local.gguf")
    ModelCatalogue(registry.models_dir).add(gguf, name="shared")
    with pytest.raises(EndpointConfigError, match="already used"):
        registry.add("127.0.0.1:9", "m", name="shared")
    assert registry.add("127.0.0.1:9", "shared").name == "shared-2"


def test_remote_needs_confirmation(registry: EndpointRegistry) -> None:
    with pytest.raises(EndpointConfigError, match="conversation text will be sent there"):
        registry.add("https://api.example.com/v1", "gpt-x")
    assert registry.entries() == []
    remote = registry.add("https://api.example.com/v1", "gpt-x", remote_confirmed=True)
    assert remote.remote
    assert remote.remote_confirmed
    local = registry.add("127.0.0.1:1", "m", remote_confirmed=True)
    assert not local.remote_confirmed  # nothing to confirm for this machine


def test_file_never_holds_a_key(
    registry: EndpointRegistry, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MY_ENDPOINT_KEY", "sk-very-secret")
    endpoint = registry.add(
        "https://api.example.com/v1", "m", api_key_env="MY_ENDPOINT_KEY", remote_confirmed=True
    )
    assert api_key_for(endpoint) == "sk-very-secret"
    text = registry.file.read_text(encoding="utf-8")
    assert "sk-very-secret" not in text
    data = json.loads(text)
    assert data["version"] == 1
    assert data["entries"][0]["api_key_env"] == "MY_ENDPOINT_KEY"
    assert (registry.file.stat().st_mode & 0o777) == 0o600
    monkeypatch.delenv("MY_ENDPOINT_KEY")
    with pytest.raises(EndpointConfigError, match=r"MY_ENDPOINT_KEY .* is not set"):
        api_key_for(endpoint)
    with pytest.raises(EndpointConfigError, match="bad environment variable"):
        registry.add("127.0.0.1:1", "m", api_key_env="NOT A NAME")
    with pytest.raises(EndpointConfigError, match="choose one place"):
        registry.add("127.0.0.1:1", "m", api_key_env="K", keyring=True)


def test_damaged_file_is_moved_aside(registry: EndpointRegistry) -> None:
    registry.models_dir.mkdir(parents=True)
    registry.file.write_text("{not json", encoding="utf-8")
    assert registry.entries() == []
    assert registry.last_problem is not None
    assert "moved to" in registry.last_problem
    aside = list(registry.models_dir.glob(ENDPOINTS_FILE + ".corrupt-*"))
    assert len(aside) == 1
    assert aside[0].read_text(encoding="utf-8") == "{not json"
    assert registry.add("127.0.0.1:1", "m").name == "m"


def test_wrong_shapes_count_as_damage(registry: EndpointRegistry) -> None:
    registry.models_dir.mkdir(parents=True)
    registry.file.write_text(json.dumps({"version": 1, "entries": [{"name": 3}]}), "utf-8")
    assert registry.entries() == []
    assert list(registry.models_dir.glob(ENDPOINTS_FILE + ".corrupt-*"))


def test_newer_file_is_left_alone(registry: EndpointRegistry) -> None:
    registry.models_dir.mkdir(parents=True)
    newer = json.dumps({"version": 99, "entries": [{"whatever": True}]})
    registry.file.write_text(newer, encoding="utf-8")
    assert registry.entries() == []
    assert registry.last_problem is not None
    assert "newer version" in registry.last_problem
    with pytest.raises(EndpointConfigError, match="newer version"):
        registry.add("127.0.0.1:1", "m")
    assert registry.file.read_text(encoding="utf-8") == newer
    assert not list(registry.models_dir.glob(ENDPOINTS_FILE + ".corrupt-*"))


# -- keys in the keyring -------------------------------------------------------------------
def test_no_keyring_says_so_in_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "keyring", None)  # as if not installed
    problem = keyring_problem()
    assert problem is not None
    assert "--api-key-env" in problem
    assert "\n" not in problem
    with pytest.raises(EndpointConfigError, match="--api-key-env"):
        store_api_key("e", "sk-1")
    endpoint = Endpoint("e", "http://127.0.0.1:1/v1", "m", None, None, True, False)
    with pytest.raises(EndpointConfigError, match="--api-key-env"):
        api_key_for(endpoint)


def test_keyring_round_trip(registry: EndpointRegistry, monkeypatch: pytest.MonkeyPatch) -> None:
    kept: dict[tuple[str, str], str] = {}
    fake = types.ModuleType("keyring")
    fake.get_keyring = lambda: types.SimpleNamespace(priority=5)  # type: ignore[attr-defined]
    fake.get_password = lambda s, n: kept.get((s, n))  # type: ignore[attr-defined]
    fake.set_password = lambda s, n, k: kept.__setitem__((s, n), k)  # type: ignore[attr-defined]
    fake.delete_password = lambda s, n: kept.pop((s, n))  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "keyring", fake)
    assert keyring_problem() is None
    store_api_key("remote", "sk-2")
    endpoint = registry.add(
        "https://api.example.com/v1", "m", name="remote", keyring=True, remote_confirmed=True
    )
    assert api_key_for(endpoint) == "sk-2"
    assert "sk-2" not in registry.file.read_text(encoding="utf-8")
    registry.remove("remote")
    assert kept == {}
    with pytest.raises(EndpointConfigError, match="no API key for endpoint 'remote'"):
        api_key_for(endpoint)


# -- probing real servers on this machine --------------------------------------------------
@pytest.mark.parametrize(
    ("routes", "model", "n_ctx", "n_params"),
    [
        (ollama_routes("llama3.1:8b", 131072, 8_030_261_248), "llama3.1:8b", 131072, 8_030_261_248),
        (lmstudio_routes("qwen2.5-7b-instruct", 32768), "qwen2.5-7b-instruct", 32768, None),
        (llamacpp_routes("tiny.gguf", 4096, 494_032_768), "tiny.gguf", 4096, 494_032_768),
        (plain_routes("tiny"), "tiny", None, None),
    ],
    ids=["ollama", "lmstudio", "llamacpp", "llama-cpp-python"],
)
def test_probe_reads_models_context_and_size(
    fake_server: Any, routes: Any, model: str, n_ctx: int | None, n_params: int | None
) -> None:
    server = fake_server(routes)
    found = probe(server.base_url, timeout=5)
    assert [(m.id, m.context_size, m.parameters) for m in found] == [(model, n_ctx, n_params)]


def test_probe_sends_the_key(fake_server: Any) -> None:
    server = fake_server(plain_routes("a", "b", "a"))
    found = probe(server.root, api_key="sk-3", timeout=5)
    assert [m.id for m in found] == ["a", "b"]
    assert server.seen[0][:2] == ("GET", "/v1/models")
    assert server.seen[0][2] == "Bearer sk-3"


@pytest.mark.parametrize(
    ("reply", "kind"),
    [
        (Reply({"error": "boom"}, status=500), "http"),
        (Reply({"error": "key"}, status=401), "auth"),
        (Reply(b"<html>not json", raw=True), "malformed"),
        (Reply({"models": []}), "malformed"),
        (Reply(models_listing("x"), delay_s=1.5), "timeout"),
    ],
    ids=["http-500", "auth", "not-json", "not-a-list", "timeout"],
)
def test_probe_failures_are_one_line(fake_server: Any, reply: Reply, kind: str) -> None:
    server = fake_server({("GET", "/v1/models"): reply})
    with pytest.raises(EndpointError) as caught:
        probe(server.base_url, timeout=0.5)
    assert caught.value.kind == kind
    assert "\n" not in str(caught.value)
    assert server.base_url in str(caught.value)


def test_probe_refused(allow_loopback: None) -> None:
    with pytest.raises(EndpointError) as caught:
        probe(f"http://127.0.0.1:{free_port()}", timeout=1)
    assert caught.value.kind == "refused"
    assert "is the server running" in str(caught.value)


def test_look_for_servers_finds_running_ones(fake_server: Any) -> None:
    ollama = fake_server(ollama_routes("llama3.2:1b", 8192))
    lmstudio = fake_server(lmstudio_routes("phi-4", 16384))
    odd = fake_server({("GET", "/v1/models"): Reply({"hello": "world"})})
    presets = {
        "ollama": ollama.port,
        "lmstudio": lmstudio.port,
        "llamacpp": free_port(),  # nothing there
        "other": odd.port,  # something that is not an OpenAI server
    }
    found = look_for_servers(timeout=2, presets=presets)
    assert [(f.preset, f.base_url, f.label) for f in found] == [
        ("ollama", ollama.base_url, "Ollama"),
        ("lmstudio", lmstudio.base_url, "LM Studio"),
    ]
    assert [(m.id, m.context_size) for m in found[0].models] == [("llama3.2:1b", 8192)]
    assert [(m.id, m.context_size) for m in found[1].models] == [("phi-4", 16384)]


def test_look_for_servers_stays_on_this_machine() -> None:
    with pytest.raises(EndpointConfigError, match="loopback"):
        look_for_servers(presets={"ollama": 11434}, host="192.168.1.2")


# -- what the agent may expect and who answered --------------------------------------------
@pytest.mark.parametrize(
    ("model_id", "parameters"),
    [
        ("llama3.1:8b", 8_000_000_000),
        ("llama3.2:1b", 1_000_000_000),
        ("qwen2.5-0.5b-instruct", 500_000_000),
        ("mixtral:8x7b", 7_000_000_000),
        ("Qwen3-30B-A3B", 30_000_000_000),
        ("gpt-4o", None),
        ("bge-m3", None),
    ],
)
def test_parameters_from_name(model_id: str, parameters: int | None) -> None:
    assert parameters_from_name(model_id) == parameters


def test_endpoint_profile() -> None:
    assert not endpoint_profile("gpt-4o").small  # unknown size: the full tool set
    assert not endpoint_profile("llama3.1:70b").small
    assert endpoint_profile("llama3.2:1b").small
    # the size the server reported wins over a name that says nothing (an alias)
    assert endpoint_profile("qwen-starter", 494_032_768).small
    assert not endpoint_profile("my-model", 8_030_261_248).small


def test_reported_size_is_stored_and_reaches_the_model(registry: EndpointRegistry) -> None:
    added = registry.add("127.0.0.1:8080", "qwen-starter", parameters=494_032_768)
    stored = registry.get(added.name)
    assert stored.parameters == 494_032_768
    assert open_endpoint_model(stored).parameters == 494_032_768
    assert registry.add("127.0.0.1:8081", "other", parameters=0).parameters is None


def test_answered_by_records_and_describes() -> None:
    endpoint = types.SimpleNamespace(
        name="big", backend="endpoint", base_url="http://127.0.0.1:11434/v1", model="llama3.1:8b"
    )
    record = answered_by(endpoint)
    assert record == {
        "model": "big",
        "backend": "endpoint",
        "served_model": "llama3.1:8b",
        "address": "http://127.0.0.1:11434/v1",
    }
    assert describe_answerer(record) == "big (llama3.1:8b) at http://127.0.0.1:11434 (endpoint)"
    remote = types.SimpleNamespace(
        name="gpt", backend="endpoint", base_url="https://api.example.com/v1", model="gpt"
    )
    assert describe_answerer(answered_by(remote)) == (
        "gpt at https://api.example.com (remote endpoint)"
    )
    local = types.SimpleNamespace(name="qwen2.5-coder-0.5b")
    assert answered_by(local) == {
        "model": "qwen2.5-coder-0.5b",
        "backend": "llama.cpp",
        "address": None,
    }
    assert describe_answerer(answered_by(local)) == "qwen2.5-coder-0.5b (llama.cpp, in-process)"
    assert describe_answerer(None) is None
    assert describe_answerer({"model": 3}) is None
