"""An OpenAI-compatible server before it is an endpoint: its address and what it offers.

The registry (:mod:`.endpoints`) stores endpoints built from these; the HTTP side
(:mod:`.endpoint_probe`) fills them in from a running server.  Both import this module and
neither imports the other's internals, so the probe (httpx) stays out of every command
that only reads ``endpoints.json``.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from urllib.parse import urlsplit, urlunsplit

from agenvoy_desktop.core.errors import KnownError

PRESETS: dict[str, int] = {"ollama": 11434, "lmstudio": 1234, "llamacpp": 8080}
"""Local servers :func:`.endpoints.look_for_servers` knows, with their default ports."""
PRESET_LABELS = {"ollama": "Ollama", "lmstudio": "LM Studio", "llamacpp": "llama.cpp server"}
_API_SUFFIXES = ("/chat/completions", "/completions", "/models")


class EndpointConfigError(KnownError, ValueError):
    """An endpoint request that cannot be done (bad URL, duplicate name, no key...)."""


@dataclass(frozen=True)
class RemoteModel:
    """A model a server offers."""

    id: str
    context_size: int | None
    parameters: int | None = None
    """Weights, where the server says (llama.cpp's ``meta.n_params``, Ollama's model info)."""


@dataclass(frozen=True)
class FoundServer:
    """A known local server found running by :func:`.endpoints.look_for_servers`."""

    preset: str
    base_url: str
    models: list[RemoteModel]

    @property
    def label(self) -> str:
        return PRESET_LABELS.get(self.preset, self.preset)


# -- addresses -------------------------------------------------------------------------
def normalise_url(url: str) -> str:
    """The API base of *url*: ``http://`` added when no scheme, ``/v1`` when no path.

    A pasted full route (``.../chat/completions``, ``.../models``) is cut back
    to its base; any other path (``/api/v1``, ``/openai/v1``) is kept as given.
    A user name or password in the address is refused: it would be stored in
    plain text, and keys belong in the keyring or an environment variable.
    """
    text = url.strip()
    if not text:
        raise EndpointConfigError("an endpoint needs an address such as http://127.0.0.1:11434")
    if "://" not in text:
        text = "http://" + text
    parts = urlsplit(text)
    if parts.scheme.lower() not in ("http", "https"):
        raise EndpointConfigError(f"{url!r}: only http:// and https:// addresses are supported")
    try:
        host, port = parts.hostname, parts.port
    except ValueError as exc:
        raise EndpointConfigError(f"{url!r} is not a valid address ({exc})") from exc
    if not host:
        raise EndpointConfigError(f"{url!r} has no host name")
    if parts.username or parts.password:
        raise EndpointConfigError(
            "leave the user name and password out of the address; "
            "keep an API key in the keyring (--keyring) or an environment variable (--api-key-env)"
        )
    path = parts.path.rstrip("/")
    for suffix in _API_SUFFIXES:
        if path.endswith(suffix):
            path = path[: -len(suffix)]
            break
    path = path.rstrip("/") or "/v1"
    netloc = f"[{host}]" if ":" in host else host
    if port is not None:
        netloc += f":{port}"
    return urlunsplit((parts.scheme.lower(), netloc, path, "", ""))


def is_loopback(url: str) -> bool:
    """Whether *url* points at this machine: ``localhost``, 127.0.0.0/8 or ``::1``.

    Other names are treated as remote without a DNS lookup: a wrong "remote"
    costs a confirmation, a wrong "local" would leak text.
    """
    text = url.strip()
    if "://" not in text:
        text = "http://" + text
    try:
        host = urlsplit(text).hostname or ""
    except ValueError:
        return False
    host = host.rstrip(".").lower()
    if host == "localhost":
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped.is_loopback
    return address.is_loopback


def server_root(base_url: str) -> str:
    """The server address without the API path (where ``/props`` and ``/api`` live)."""
    url = normalise_url(base_url)
    parts = urlsplit(url)
    path = parts.path
    for suffix in ("/v1", "/api/v0"):
        if path.endswith(suffix):
            path = path[: -len(suffix)]
            break
    return urlunsplit((parts.scheme, parts.netloc, path, "", ""))
