"""OpenAI-compatible chat endpoints the user added: the registry, probing and API keys.

An endpoint is a server that speaks the OpenAI chat API (Ollama, LM Studio,
llama.cpp's server, a hosted service) and one model id on it.  It can answer
chat in place of a local GGUF; embeddings always stay local, so memory never
depends on it.  ``endpoints.json`` (in the models folder, versioned, written
atomically) records each one; it never holds an API key: the key comes from
an environment variable or the OS keyring, read when the model is opened.

A server on a non-loopback address receives the conversation text, so adding
one needs ``remote_confirmed`` (the user said yes to that).  Probing a running
server on this machine (:func:`look_for_servers`) asks loopback addresses only,
and only when the user asks for it.

A damaged ``endpoints.json`` is moved aside (``endpoints.json.corrupt-<ns>``)
and the list starts empty; one written by a newer app version is left as it is
and no endpoint is offered.  Every mutation re-reads the file first, so the
CLI and the window can both edit it.

The HTTP side (:mod:`~agenvoy_desktop.llm.endpoint_probe`, httpx) and the
model class are imported inside the functions that need them: the CLI
starts faster without them and most commands never probe a server.
"""

from __future__ import annotations

import dataclasses
import importlib
import logging
import os
import re
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agenvoy_desktop.core.versioned_json import VersionedJsonFile
from agenvoy_desktop.llm.openai_servers import (
    PRESET_LABELS,
    PRESETS,
    EndpointConfigError,
    FoundServer,
    RemoteModel,
    is_loopback,
    normalise_url,
    server_root,
)

if TYPE_CHECKING:
    from agenvoy_desktop.llm.model_profile import ModelProfile
    from agenvoy_desktop.llm.openai_chat import EndpointChatModel

__all__ = [
    "ENDPOINTS_FILE",
    "ENDPOINTS_VERSION",
    "ENDPOINT_PREFIX",
    "KEYRING_SERVICE",
    "PRESETS",
    "PRESET_LABELS",
    "Endpoint",
    "EndpointConfigError",
    "EndpointRegistry",
    "FoundServer",
    "RemoteModel",
    "answered_by",
    "api_key_for",
    "describe_answerer",
    "endpoint_name",
    "endpoint_profile",
    "forget_api_key",
    "is_loopback",
    "keyring_problem",
    "look_for_servers",
    "normalise_url",
    "open_endpoint_model",
    "parameters_from_name",
    "probe",
    "server_root",
    "store_api_key",
]
"""The registry's names, with the server types it shares with the probe (:mod:`.openai_servers`)."""

log = logging.getLogger(__name__)

ENDPOINT_PREFIX = "endpoint:"
"""``settings.models.chat_model == "endpoint:<name>"`` selects an endpoint."""
ENDPOINTS_FILE = "endpoints.json"
ENDPOINTS_VERSION = 1
KEYRING_SERVICE = "agenvoy-desktop"
_NAME_RE = re.compile(r"^[^\x00-\x1f\x7f/\\]{1,100}$")
_ENV_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")


@dataclass(frozen=True)
class Endpoint:
    """One chat endpoint as stored: where it is, which model, where its key lives."""

    name: str
    base_url: str
    """Normalised (:func:`normalise_url`): scheme, host, port, the API path such as ``/v1``."""
    model: str
    """The model id on the server."""
    context_size: int | None
    """Tokens the server keeps for one request, when the probe could tell; else None."""
    api_key_env: str | None
    """Environment variable that holds the API key, if any."""
    keyring: bool
    """The key is in the OS keyring under (:data:`KEYRING_SERVICE`, name)."""
    remote_confirmed: bool
    """The user confirmed that conversation text leaves the machine (needed when remote)."""
    preset: str | None = None
    """``ollama``, ``lmstudio``, ``llamacpp`` (found by :func:`look_for_servers`) or None."""
    parameters: int | None = None
    """The model's weights as the server reported them when added (None: it did not say)."""

    @property
    def remote(self) -> bool:
        """Whether the server is on another machine (text leaves this one)."""
        return not is_loopback(self.base_url)

    @property
    def choice(self) -> str:
        """The ``models.chat_model`` value that selects this endpoint."""
        return ENDPOINT_PREFIX + self.name


def endpoint_name(choice: str) -> str | None:
    """The endpoint name in a ``models.chat_model`` value, or None for a local model."""
    return choice[len(ENDPOINT_PREFIX) :] if choice.startswith(ENDPOINT_PREFIX) else None


# -- the registry ----------------------------------------------------------------------
class EndpointRegistry:
    """The endpoints of one models folder; safe to share between threads."""

    def __init__(self, models_dir: Path) -> None:
        self.models_dir = Path(models_dir)
        self.file = self.models_dir / ENDPOINTS_FILE
        self._store = VersionedJsonFile(
            self.file, ENDPOINTS_VERSION, EndpointConfigError, "no endpoint is offered"
        )
        self.last_problem: str | None = None
        """A one-line note for the user about the file itself, if any."""
        self._lock = threading.RLock()

    def entries(self) -> list[Endpoint]:
        """The endpoints in the order added (empty when the file is unreadable)."""
        with self._lock:
            try:
                return self._load()
            except EndpointConfigError as exc:
                self.last_problem = str(exc)
                return []

    def get(self, name: str) -> Endpoint:
        """The endpoint called *name* (exact, then case-insensitive); the error lists names."""
        name = endpoint_name(name) or name
        with self._lock:
            entries = self._load()
        found = _find(entries, name)
        if found is None:
            known = ", ".join(e.name for e in entries) or "none yet"
            raise EndpointConfigError(
                f"no endpoint named {name!r} (endpoints: {known}); "
                "add one with `agenvoy-desktop models add-endpoint URL`"
            )
        return found

    def add(
        self,
        base_url: str,
        model: str,
        *,
        name: str | None = None,
        context_size: int | None = None,
        api_key_env: str | None = None,
        keyring: bool = False,
        remote_confirmed: bool = False,
        preset: str | None = None,
        parameters: int | None = None,
    ) -> Endpoint:
        """Record an endpoint (nothing is probed here); EndpointConfigError says what is wrong."""
        url = normalise_url(base_url)
        model = model.strip()
        if not model:
            raise EndpointConfigError("an endpoint needs a model id; the server lists its models")
        if not is_loopback(url) and not remote_confirmed:
            raise EndpointConfigError(
                f"{url} is on another machine: conversation text will be sent there; "
                "confirm that to add it (--yes-remote)"
            )
        if api_key_env is not None and not _ENV_RE.match(api_key_env):
            raise EndpointConfigError(f"bad environment variable name {api_key_env!r}")
        if api_key_env is not None and keyring:
            raise EndpointConfigError("choose one place for the API key: keyring or --api-key-env")
        if preset is not None and preset not in PRESETS:
            raise EndpointConfigError(f"preset must be one of {', '.join(PRESETS)}")
        if context_size is not None and context_size <= 0:
            context_size = None
        if parameters is not None and parameters <= 0:
            parameters = None
        with self._lock:
            entries = self._load()
            taken = {e.name.casefold() for e in entries} | _catalogue_names(self.models_dir)
            chosen = _pick_name(taken, name, model)
            endpoint = Endpoint(
                name=chosen,
                base_url=url,
                model=model,
                context_size=context_size,
                api_key_env=api_key_env,
                keyring=keyring,
                remote_confirmed=remote_confirmed and not is_loopback(url),
                preset=preset,
                parameters=parameters,
            )
            self._save([*entries, endpoint])
            return endpoint

    def remove(self, name: str) -> Endpoint:
        """Forget an endpoint (and its keyring entry, if it had one)."""
        with self._lock:
            endpoint = self.get(name)
            self._save([e for e in self._load() if e.name != endpoint.name])
        if endpoint.keyring:
            forget_api_key(endpoint.name)
        return endpoint

    # -- the file ----------------------------------------------------------------------
    def _load(self) -> list[Endpoint]:
        return self._store.load(_parse_entries, self._start_empty) or []

    def _start_empty(self, why: str, aside: Path) -> list[Endpoint]:
        """After a damaged file was moved aside: no endpoints, and a note saying so."""
        self.last_problem = self._store.damage_note(
            why, aside, "the endpoint list starts empty (add them again)"
        )
        log.warning("%s", self.last_problem)
        return []

    def _save(self, entries: Iterable[Endpoint]) -> None:
        self._store.save([dataclasses.asdict(e) for e in entries])


def _parse_entries(data: Any) -> list[Endpoint]:
    if not isinstance(data, dict) or not isinstance(data.get("entries"), list):
        raise ValueError("no entry list")
    entries = []
    for raw in data["entries"]:
        if not isinstance(raw, dict):
            raise ValueError("an entry is not an object")
        context = raw.get("context_size")
        parameters = raw.get("parameters")
        endpoint = Endpoint(
            name=_text(raw, "name"),
            base_url=normalise_url(_text(raw, "base_url")),
            model=_text(raw, "model"),
            context_size=context if isinstance(context, int) and context > 0 else None,
            api_key_env=raw.get("api_key_env") if isinstance(raw.get("api_key_env"), str) else None,
            keyring=raw.get("keyring") is True,
            remote_confirmed=raw.get("remote_confirmed") is True,
            preset=raw.get("preset") if raw.get("preset") in PRESETS else None,
            parameters=parameters if isinstance(parameters, int) and parameters > 0 else None,
        )
        entries.append(endpoint)
    return entries


def _text(raw: dict[str, Any], key: str) -> str:
    value = raw[key]
    if not isinstance(value, str) or not value:
        raise ValueError(f"{key} is not a non-empty string")
    return value


def _find(entries: list[Endpoint], name: str) -> Endpoint | None:
    exact = next((e for e in entries if e.name == name), None)
    return exact or next((e for e in entries if e.name.casefold() == name.casefold()), None)


def _catalogue_names(models_dir: Path) -> set[str]:
    """Names the model catalogue uses (casefolded), so one name never means two models."""
    from agenvoy_desktop.llm.catalogue import ModelCatalogue

    return {e.name.casefold() for e in ModelCatalogue(models_dir).entries()}


def _pick_name(taken: set[str], wanted: str | None, model: str) -> str:
    """The wanted name if valid and free; else the model id made into a free name."""
    if wanted is not None:
        wanted = wanted.strip()
        if not _NAME_RE.match(wanted):
            raise EndpointConfigError(
                f"bad endpoint name {wanted!r}: 1-100 characters, no slashes or control characters"
            )
        if wanted.casefold() in taken:
            raise EndpointConfigError(
                f"the name {wanted!r} is already used by another model or endpoint; "
                "choose another with --name"
            )
        return wanted
    base = re.sub(r"[\x00-\x1f\x7f/\\]", "-", model).strip("- ")[:90] or "endpoint"
    name, n = base, 1
    while name.casefold() in taken:
        n += 1
        name = f"{base}-{n}"
    return name


# -- probing (the HTTP side lives in endpoint_probe, imported when used) ----------------------
def probe(base_url: str, api_key: str | None = None, timeout: float = 3.0) -> list[RemoteModel]:
    """The models the server offers, with context sizes when known; EndpointError on failure.

    See :func:`agenvoy_desktop.llm.endpoint_probe.probe_server`.
    """
    from agenvoy_desktop.llm.endpoint_probe import probe_server

    return probe_server(base_url, api_key, timeout)


def look_for_servers(
    timeout: float = 0.5, *, presets: dict[str, int] | None = None, host: str = "127.0.0.1"
) -> list[FoundServer]:
    """Known local servers running now (loopback only, in parallel, short timeouts).

    See :func:`agenvoy_desktop.llm.endpoint_probe.find_servers`.
    """
    from agenvoy_desktop.llm.endpoint_probe import find_servers

    return find_servers(PRESETS if presets is None else presets, host, timeout)


# -- API keys --------------------------------------------------------------------------
def api_key_for(endpoint: Endpoint) -> str | None:
    """The endpoint's API key: its environment variable, else the keyring; None when it has none."""
    if endpoint.api_key_env:
        key = os.environ.get(endpoint.api_key_env, "").strip()
        if not key:
            raise EndpointConfigError(
                f"the environment variable {endpoint.api_key_env} (API key of endpoint "
                f"{endpoint.name!r}) is not set; set it before starting the app"
            )
        return key
    if endpoint.keyring:
        key = _keyring_call("get_password", endpoint.name)
        if not key:
            raise EndpointConfigError(
                f"no API key for endpoint {endpoint.name!r} in the keyring; add the endpoint "
                "again with --keyring, or use --api-key-env VAR"
            )
        return str(key)
    return None


def store_api_key(name: str, key: str) -> None:
    """Keep *key* in the OS keyring for endpoint *name*; EndpointConfigError when there is none."""
    if not key.strip():
        raise EndpointConfigError("the API key is empty")
    _keyring_call("set_password", name, key.strip())


def forget_api_key(name: str) -> None:
    """Drop the keyring entry of endpoint *name*, if the keyring is there and has one."""
    try:
        _keyring_call("delete_password", name)
    except EndpointConfigError as exc:
        log.info("keyring entry of %r not removed: %s", name, exc)


def keyring_problem() -> str | None:
    """Why the keyring cannot be used here (one line), or None when it can."""
    try:
        backend = _keyring_module().get_keyring()
    except EndpointConfigError as exc:
        return str(exc)
    priority = getattr(backend, "priority", 1)
    if isinstance(priority, int | float) and priority <= 0:
        return _NO_KEYRING
    return None


_NO_KEYRING = (
    "no usable OS keyring here (the keyring package is missing or has no backend); "
    "keep the key in an environment variable instead: --api-key-env VAR"
)


def _keyring_module() -> Any:
    """The optional ``keyring`` package (not bundled: the app works without it)."""
    try:
        return importlib.import_module("keyring")
    except ImportError as exc:
        raise EndpointConfigError(_NO_KEYRING) from exc


def _keyring_call(method: str, name: str, *args: str) -> Any:
    keyring = _keyring_module()
    try:
        return getattr(keyring, method)(KEYRING_SERVICE, name, *args)
    except Exception as exc:
        errors = getattr(keyring, "errors", None)
        if errors is not None and isinstance(exc, getattr(errors, "PasswordDeleteError", ())):
            return None
        raise EndpointConfigError(f"{_NO_KEYRING} ({type(exc).__name__}: {exc})") from exc


# -- opening ---------------------------------------------------------------------------
def open_endpoint_model(endpoint: Endpoint) -> EndpointChatModel:
    """The chat model for *endpoint* (not connected yet: ``load()`` checks the server)."""
    from agenvoy_desktop.llm.openai_chat import EndpointChatModel

    model = EndpointChatModel(
        base_url=endpoint.base_url,
        model=endpoint.model,
        name=endpoint.name,
        api_key=api_key_for(endpoint),
        context_size=endpoint.context_size,
    )
    model.parameters = endpoint.parameters
    return model


# -- what the agent may expect ------------------------------------------------------------
_SIZE_IN_NAME = re.compile(r"(?<![0-9a-z.])(?:\d+x)?(\d{1,4}(?:\.\d{1,2})?)b(?![a-z0-9])", re.I)


def parameters_from_name(model_id: str) -> int | None:
    """Weights named in a model id (``llama3.2:1b``, ``qwen2.5-0.5b-instruct``), else None.

    A server does not say how big its model is; the id usually does.  A
    mixture (``8x7b``) counts one expert, which is how it behaves per token.
    """
    sizes = [float(m.group(1)) for m in _SIZE_IN_NAME.finditer(model_id.replace("_", "-"))]
    return int(sizes[-1] * 1e9) if sizes else None


def endpoint_profile(model_id: str, parameters: int | None = None) -> ModelProfile:
    """The agent profile of an endpoint model: capable (the full tool set) unless the
    server reported a small size or the id names one; small gets the small-model turn
    like a small GGUF does."""
    from agenvoy_desktop.llm.model_profile import CAPABLE, ModelProfile

    parameters = parameters or parameters_from_name(model_id)
    if parameters is None:
        return CAPABLE
    return ModelProfile(parameters=parameters, template_tools=True)


# -- who answered ----------------------------------------------------------------------------
def answered_by(model: object) -> dict[str, Any]:
    """What to record with an answer about the model that wrote it (no key, no secret).

    ``{"model": name, "backend": "llama.cpp" | "endpoint", "address": base URL or None}``;
    a model without a ``backend`` attribute runs in this process (llama.cpp).
    """
    backend = str(getattr(model, "backend", "llama.cpp"))
    address = getattr(model, "base_url", None) if backend == "endpoint" else None
    record: dict[str, Any] = {"model": str(getattr(model, "name", "?")), "backend": backend}
    served = getattr(model, "model", None) if backend == "endpoint" else None
    if isinstance(served, str) and served != record["model"]:
        record["served_model"] = served
    record["address"] = str(address) if address else None
    return record


def describe_answerer(record: object) -> str | None:
    """``llama3.1:8b at http://127.0.0.1:11434 (endpoint)`` or ``qwen (llama.cpp, in-process)``.

    None when *record* is not an :func:`answered_by` record (an older answer).
    """
    if not isinstance(record, dict) or not isinstance(record.get("model"), str):
        return None
    served = record.get("served_model")
    name = f"{record['model']} ({served})" if isinstance(served, str) else record["model"]
    if record.get("backend") == "endpoint":
        address = record.get("address")
        where = f" at {_shown_address(address)}" if isinstance(address, str) else ""
        remote = isinstance(address, str) and not is_loopback(address)
        return f"{name}{where} ({'remote ' if remote else ''}endpoint)"
    return f"{name} ({record.get('backend') or 'llama.cpp'}, in-process)"


def _shown_address(address: str) -> str:
    try:
        return server_root(address)
    except EndpointConfigError:
        return address
