"""Asking an OpenAI-compatible server what it serves, over HTTP (httpx, synchronous).

:func:`probe_server` lists a server's models (``GET {base}/models``) and
finds each one's context size from whichever server-specific route answers:
llama.cpp server ``/props``, LM Studio ``/api/v0/models``, Ollama
``POST /api/show``; llama-cpp-python's server has none, so the size stays
unknown.  :func:`find_servers` asks the known local ports at once.  Kept
apart from the registry so that reading ``endpoints.json`` never imports
httpx; :mod:`agenvoy_desktop.llm.endpoints` calls in here when asked; both share
:mod:`agenvoy_desktop.llm.openai_servers`.
"""

from __future__ import annotations

import json
import logging
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx

from agenvoy_desktop.core.errors import KnownError
from agenvoy_desktop.llm.openai_chat import EndpointError, ErrorKind
from agenvoy_desktop.llm.openai_servers import (
    EndpointConfigError,
    FoundServer,
    RemoteModel,
    is_loopback,
    normalise_url,
    server_root,
)

log = logging.getLogger(__name__)

PROBE_BODY_BYTES = 4 << 20
"""The most one probe request reads: model lists and server facts are kilobytes."""
PROBE_DEADLINE_S = 10.0
"""Seconds one probe request may take in all: a server that trickles bytes is never caught
by the read timeout (``models add-endpoint`` waited on one forever)."""


def probe_server(base_url: str, api_key: str | None, timeout: float) -> list[RemoteModel]:
    """The models the server offers (``GET {base}/models``), with context sizes when known.

    The context size comes from whichever server-specific route answers:
    llama.cpp server ``/props``, LM Studio ``/api/v0/models``, Ollama
    ``/api/show``; a server with none of them (llama-cpp-python) gives None.
    Raises EndpointError (one line) when the server cannot be reached or
    does not answer like an OpenAI-compatible server.
    """
    url = normalise_url(base_url)
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    with httpx.Client(timeout=timeout, headers=headers, follow_redirects=False) as client:
        data = _get_json(client, f"{url}/models")
        ids = _model_ids(data, url)
        sizes = _context_sizes(client, server_root(url), ids, data)
        weights = _llamacpp_params(data) or _ollama_params(client, server_root(url), ids)
    return [RemoteModel(model_id, sizes.get(model_id), weights.get(model_id)) for model_id in ids]


def _fetch(client: httpx.Client, method: str, url: str, body: Any = None) -> tuple[int, bytes]:
    """One request read whole: its status and at most :data:`PROBE_BODY_BYTES` of body,
    within :data:`PROBE_DEADLINE_S`; EndpointError past either."""
    ends = time.monotonic() + PROBE_DEADLINE_S
    with client.stream(method, url, json=body) as response:
        chunks: list[bytes] = []
        size = 0
        for chunk in response.iter_bytes():
            size += len(chunk)
            if size > PROBE_BODY_BYTES:
                raise _error(
                    "oversize",
                    f"{url} sent more than {PROBE_BODY_BYTES >> 20} MB — reading stopped "
                    "there; is it an OpenAI-compatible server?",
                )
            if time.monotonic() > ends:
                raise _error(
                    "deadline",
                    f"{url} was still sending after {PROBE_DEADLINE_S:g} s — reading stopped "
                    "there; is it an OpenAI-compatible server?",
                )
            chunks.append(chunk)
        return response.status_code, b"".join(chunks)


def _get_json(client: httpx.Client, url: str) -> Any:
    """GET *url* as JSON; EndpointError with a one-line reason on any failure."""
    try:
        status, raw = _fetch(client, "GET", url)
    except httpx.ConnectError as exc:
        raise _error("refused", f"cannot connect to {url}: is the server running? ({exc})") from exc
    except httpx.TimeoutException as exc:
        raise _error("timeout", f"{url} did not answer in time") from exc
    except httpx.HTTPError as exc:
        raise _error("http", f"{url}: {exc}") from exc
    if status in (401, 403):
        raise _error(
            "auth",
            f"{url} refused the API key (HTTP {status}); "
            "check the key in the keyring or the environment variable",
        )
    if status >= 400:
        raise _error("http", f"{url} answered HTTP {status}")
    try:
        return json.loads(raw)
    except ValueError as exc:
        raise _error("malformed", f"{url} did not answer with JSON") from exc


def _model_ids(data: Any, url: str) -> list[str]:
    items = data.get("data") if isinstance(data, dict) else None
    if not isinstance(items, list):
        raise _error("malformed", f"{url}/models is not an OpenAI-style model list")
    ids = [
        item["id"] for item in items if isinstance(item, dict) and isinstance(item.get("id"), str)
    ]
    return list(dict.fromkeys(ids))


def _context_sizes(
    client: httpx.Client, root: str, ids: list[str], listing: Any
) -> dict[str, int | None]:
    """Context size per model id from the first server-specific route that knows it."""
    sizes: dict[str, int | None] = {}
    n_ctx = _llamacpp_n_ctx(client, root)
    if n_ctx is not None:
        return dict.fromkeys(ids, n_ctx)
    sizes.update(_lmstudio_sizes(client, root))
    if not any(sizes.get(i) for i in ids):
        for model_id in ids[:16]:
            sizes[model_id] = _ollama_size(client, root, model_id)
            if sizes[model_id] is None:
                break  # not Ollama: do not ask once per model
    return sizes


def _try_json(client: httpx.Client, method: str, url: str, body: Any = None) -> Any:
    """A best-effort request for optional facts: None on any failure."""
    try:
        status, raw = _fetch(client, method, url, body)
        if status >= 400:
            return None
        return json.loads(raw)
    except (httpx.HTTPError, ValueError, EndpointError):
        return None


def _llamacpp_params(listing: Any) -> dict[str, int]:
    """Weights per model id from llama.cpp server's listing (``meta.n_params``)."""
    items = listing.get("data") if isinstance(listing, dict) else None
    found: dict[str, int] = {}
    for item in items if isinstance(items, list) else []:
        meta = item.get("meta") if isinstance(item, dict) else None
        value = meta.get("n_params") if isinstance(meta, dict) else None
        if isinstance(value, int) and value > 0 and isinstance(item.get("id"), str):
            found[item["id"]] = value
    return found


def _ollama_params(client: httpx.Client, root: str, ids: list[str]) -> dict[str, int]:
    """Weights per model id from Ollama's ``/api/show`` (``general.parameter_count``)."""
    found: dict[str, int] = {}
    for model_id in ids[:16]:
        data = _try_json(client, "POST", f"{root}/api/show", {"model": model_id})
        info = data.get("model_info") if isinstance(data, dict) else None
        value = info.get("general.parameter_count") if isinstance(info, dict) else None
        if not isinstance(value, int) or value <= 0:
            break  # not Ollama (or it does not say): do not ask once per model
        found[model_id] = value
    return found


def _llamacpp_n_ctx(client: httpx.Client, root: str) -> int | None:
    data = _try_json(client, "GET", f"{root}/props")
    settings = data.get("default_generation_settings") if isinstance(data, dict) else None
    value = settings.get("n_ctx") if isinstance(settings, dict) else None
    return value if isinstance(value, int) and value > 0 else None


def _lmstudio_sizes(client: httpx.Client, root: str) -> dict[str, int | None]:
    data = _try_json(client, "GET", f"{root}/api/v0/models")
    items = data.get("data") if isinstance(data, dict) else None
    sizes: dict[str, int | None] = {}
    for item in items if isinstance(items, list) else []:
        if isinstance(item, dict) and isinstance(item.get("id"), str):
            value = item.get("loaded_context_length") or item.get("max_context_length")
            sizes[item["id"]] = value if isinstance(value, int) and value > 0 else None
    return sizes


def _ollama_size(client: httpx.Client, root: str, model_id: str) -> int | None:
    data = _try_json(client, "POST", f"{root}/api/show", {"model": model_id})
    info = data.get("model_info") if isinstance(data, dict) else None
    if not isinstance(info, dict):
        return None
    for key, value in info.items():
        if key.endswith(".context_length") and isinstance(value, int) and value > 0:
            return value
    return None


def _error(kind: ErrorKind, message: str) -> EndpointError:
    """An EndpointError of *kind* (the chat model's error class, shared with the window)."""
    return EndpointError(message, kind=kind)


def find_servers(presets: dict[str, int], host: str, timeout: float) -> list[FoundServer]:
    """The *presets* (name -> port) that answer on *host* like an OpenAI-compatible server.

    Only loopback addresses are asked (*host* must be one); all ports at
    once, each with a short timeout; one that does not answer is skipped.
    """
    if not is_loopback(host):
        raise EndpointConfigError("looking for servers asks this machine only (a loopback address)")
    netloc = f"[{host}]" if ":" in host else host

    def ask(preset: str, port: int) -> FoundServer | None:
        url = f"http://{netloc}:{port}/v1"
        try:
            return FoundServer(preset, url, probe_server(url, None, timeout))
        except KnownError as exc:
            log.debug("no %s server at %s: %s", preset, url, exc)
            return None

    if not presets:
        return []
    with ThreadPoolExecutor(max_workers=len(presets), thread_name_prefix="find-servers") as pool:
        found = list(pool.map(lambda item: ask(*item), presets.items()))
    return [server for server in found if server is not None]
