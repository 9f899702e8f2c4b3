"""Add an OpenAI-compatible server as a chat model: address, model, API key, consent.

The dialog asks the server for its models (Probe, off the UI thread) and
lists them with their context size to pick one.  The API key is never
written to the settings: the user names an environment variable that holds
it, or types it once and it goes straight to the OS keyring.  An address
that is not this computer (not loopback) shows a box the user must tick —
"Conversation text will be sent to <host>" — before Add is possible, because
from then on messages, recalled memory and document passages leave the
machine.  Add saves the endpoint through :class:`EndpointRegistry` on a
worker thread and emits :attr:`AddEndpointDialog.added`.

The dialog is non-modal-friendly: open it with ``open()``, never ``exec()``
inside a coroutine.  Closing it cancels a probe still in flight, so no answer
reaches a deleted widget.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from urllib.parse import urlsplit

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QButtonGroup,
    QCheckBox,
    QDialog,
    QDialogButtonBox,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QPushButton,
    QRadioButton,
    QVBoxLayout,
    QWidget,
)

from agenvoy_desktop.agent.services import AppServices
from agenvoy_desktop.core.errors import KnownError
from agenvoy_desktop.llm.endpoints import (
    Endpoint,
    EndpointRegistry,
    FoundServer,
    RemoteModel,
    is_loopback,
    keyring_problem,
    normalise_url,
    probe,
    store_api_key,
)
from agenvoy_desktop.ui.async_runner import AsyncRunner, Operation
from agenvoy_desktop.ui.theme import apply_sheet, colors

ProbeFn = Callable[[str, str | None], list[RemoteModel]]
"""``probe(base_url, api_key)``: the server's models (blocking; EndpointError on failure)."""
StoreKey = Callable[[str, str], None]
"""``store_api_key(name, key)``: put a key in the OS keyring (blocking)."""
KeyringCheck = Callable[[], str | None]
"""Why the OS keyring cannot be used here, or None (blocking: may load a backend)."""

KEY_NONE, KEY_ENV, KEY_KEYRING = 0, 1, 2


def registry_of(services: AppServices) -> EndpointRegistry:
    """``services.endpoints`` when the services keep one, else one over the models folder."""
    registry = getattr(services, "endpoints", None)
    if isinstance(registry, EndpointRegistry):
        return registry
    return EndpointRegistry(services.paths.models_dir)


def host_of(url: str) -> str:
    """The host name of *url* (``api.example.com``), or *url* itself when it has none."""
    try:
        return urlsplit(url if "//" in url else "http://" + url).hostname or url
    except ValueError:
        return url


def context_text(size: int | None) -> str:
    """``32k ctx`` / ``4,096 ctx`` / ``ctx ?`` — short enough for a combo row."""
    if not size:
        return "ctx ?"
    return f"{size // 1024}k ctx" if size % 1024 == 0 else f"{size:,} ctx"


def key_source(endpoint: Endpoint) -> str:
    """Where the endpoint's API key comes from, in words (never the key)."""
    if endpoint.api_key_env:
        return f"${endpoint.api_key_env}"
    return "OS keyring" if endpoint.keyring else "none"


def where_text(endpoint: Endpoint) -> str:
    return f"remote ({host_of(endpoint.base_url)})" if endpoint.remote else "this computer"


def remote_notice(host: str) -> str:
    """The one sentence the remote marker and the confirmation share."""
    return f"Conversation text will be sent to {host}"


class AddEndpointDialog(QDialog):
    """See the module docstring.  ``found`` pre-fills a server "Look for servers" found."""

    added = Signal(object)
    """The :class:`Endpoint` just saved."""

    def __init__(
        self,
        registry: EndpointRegistry,
        runner: AsyncRunner,
        parent: QWidget | None = None,
        *,
        found: FoundServer | None = None,
        probe_fn: ProbeFn = probe,
        store_key: StoreKey = store_api_key,
        keyring_check: KeyringCheck = keyring_problem,
    ) -> None:
        super().__init__(parent)
        self.registry = registry
        self.runner = runner
        self.probe_fn = probe_fn
        self.store_key = store_key
        self.preset = found.preset if found is not None else None
        self.probing: Operation | None = None
        self.adding: Operation | None = None
        self.checking: Operation | None = None
        self._probed_url: str | None = None
        self.setWindowTitle("Add a chat model endpoint")
        self.setMinimumWidth(480)
        self._build()
        if found is not None:
            self.url_edit.setText(found.base_url)
            self._show_models(found.base_url, found.models)
        self._update()
        self.checking = runner.run(
            asyncio.to_thread(keyring_check),
            what="look for the OS keyring",
            on_success=self._keyring_checked,
            on_failure=lambda exc: self._keyring_checked(runner.readable(exc)),
        )

    def _keyring_checked(self, problem: str | None) -> None:
        """Without a usable keyring, only an environment variable can hold a key."""
        self.checking = None
        if problem is None:
            return
        if self.key_mode() == KEY_KEYRING:
            self.key_none.setChecked(True)
        self.key_keyring.setEnabled(False)
        self.key_keyring.setToolTip(problem)
        self.key_edit.setPlaceholderText("no OS keyring here: use an environment variable")
        self.key_edit.setToolTip(problem)
        self._update()

    # -- construction ------------------------------------------------------------------------
    def _build(self) -> None:
        intro = QLabel(
            "An OpenAI-compatible server (llama.cpp server, Ollama, LM Studio, or a hosted "
            "API) answers the chat instead of a local model file."
        )
        intro.setWordWrap(True)
        self.url_edit = QLineEdit()
        self.url_edit.setPlaceholderText("http://localhost:8080 or https://api.example.com/v1")
        self.url_edit.textChanged.connect(self._url_changed)
        self.probe_button = QPushButton("Probe")
        self.probe_button.setToolTip("Ask the server which models it serves")
        self.probe_button.clicked.connect(self.start_probe)
        url_row = QHBoxLayout()
        url_row.addWidget(self.url_edit, 1)
        url_row.addWidget(self.probe_button)
        self.name_edit = QLineEdit()
        self.name_edit.setPlaceholderText("optional — made from the model's name")
        self.model_list = QListWidget()
        self.model_list.setMinimumHeight(90)
        self.model_list.itemSelectionChanged.connect(self._update)
        self.probe_status = QLabel("Press Probe to list the server's models.")
        self.probe_status.setObjectName("DialogNote")
        self.probe_status.setWordWrap(True)
        form = QFormLayout()
        form.addRow("Address:", url_row)
        form.addRow("Name:", self.name_edit)
        form.addRow("Model:", self.model_list)
        form.addRow("", self.probe_status)
        form.addRow("API key:", self._key_box())
        self.error_label = QLabel()
        self.error_label.setObjectName("DialogError")
        self.error_label.setWordWrap(True)
        self.error_label.hide()
        self.buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Cancel)
        self.add_button = self.buttons.addButton("Add", QDialogButtonBox.ButtonRole.AcceptRole)
        self.buttons.accepted.connect(self.start_add)
        self.buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addWidget(intro)
        layout.addLayout(form)
        layout.addWidget(self._remote_box())
        layout.addWidget(self.error_label)
        layout.addWidget(self.buttons)
        apply_sheet(
            self,
            lambda p: (
                f"#DialogNote {{ color: {colors(p).muted}; }}"
                f" #DialogError {{ color: {colors(p).error_fg}; }}"
                f" #RemoteConsent {{ background: {colors(p).warning_bg};"
                f" border: 1px solid {colors(p).border}; border-radius: 4px; }}"
                f" #RemoteConsent QLabel, #RemoteConsent QCheckBox"
                f" {{ color: {colors(p).warning_fg}; }}"
            ),
        )

    def _remote_box(self) -> QWidget:
        """The consent a non-loopback address needs before Add (hidden for this computer)."""
        self.remote_check = QCheckBox()
        bold = self.remote_check.font()
        bold.setBold(True)
        self.remote_check.setFont(bold)
        self.remote_check.toggled.connect(self._update)
        self.remote_note = QLabel()
        self.remote_note.setObjectName("RemoteNote")
        self.remote_note.setWordWrap(True)
        self.remote_box = QWidget()
        self.remote_box.setObjectName("RemoteConsent")
        self.remote_box.setAttribute(Qt.WidgetAttribute.WA_StyledBackground, True)
        remote = QVBoxLayout(self.remote_box)
        remote.setContentsMargins(8, 6, 8, 6)
        remote.addWidget(self.remote_check)
        remote.addWidget(self.remote_note)
        return self.remote_box

    def _key_box(self) -> QWidget:
        box = QWidget()
        self.key_none = QRadioButton("None")
        self.key_env = QRadioButton("Environment variable:")
        self.key_keyring = QRadioButton("Store in the OS keyring:")
        self.key_none.setChecked(True)
        self.key_group = QButtonGroup(box)
        for index, button in enumerate((self.key_none, self.key_env, self.key_keyring)):
            self.key_group.addButton(button, index)
        self.key_group.idToggled.connect(lambda _id, _on: self._update())
        self.env_edit = QLineEdit()
        self.env_edit.setPlaceholderText("e.g. OPENAI_API_KEY")
        self.env_edit.textChanged.connect(self._update)
        self.key_edit = QLineEdit()
        self.key_edit.setEchoMode(QLineEdit.EchoMode.Password)
        self.key_edit.setPlaceholderText("the key (saved only in the keyring)")
        self.key_edit.textChanged.connect(self._update)
        grid = QFormLayout(box)
        grid.setContentsMargins(0, 0, 0, 0)
        grid.addRow(self.key_none)
        grid.addRow(self.key_env, self.env_edit)
        grid.addRow(self.key_keyring, self.key_edit)
        return box

    # -- state -------------------------------------------------------------------------------
    def base_url(self) -> str | None:
        """The normalised address typed (None while it is not a usable URL)."""
        text = self.url_edit.text().strip()
        if not text:
            return None
        try:
            return normalise_url(text)
        except (ValueError, KnownError):
            return None

    def remote(self) -> bool:
        url = self.base_url()
        return url is not None and not is_loopback(url)

    def key_mode(self) -> int:
        return self.key_group.checkedId()

    def selected_model(self) -> RemoteModel | None:
        item = self.model_list.currentItem()
        model = item.data(Qt.ItemDataRole.UserRole) if item is not None else None
        return model if isinstance(model, RemoteModel) else None

    def missing(self) -> str:
        """What still stops Add ('' when nothing does)."""
        if self.base_url() is None:
            return "Type the server's address."
        if self.selected_model() is None:
            return "Probe the server and pick a model."
        if self.key_mode() == KEY_ENV and not self.env_edit.text().strip():
            return "Name the environment variable that holds the key."
        if self.key_mode() == KEY_KEYRING and not self.key_edit.text():
            return "Type the key to store in the keyring."
        if self.remote() and not self.remote_check.isChecked():
            return "Confirm that conversation text may be sent to this server."
        return ""

    def _update(self) -> None:
        remote = self.remote()
        url = self.base_url()
        self.remote_box.setVisible(remote)
        if remote and url is not None:
            host = host_of(url)
            self.remote_check.setText(remote_notice(host))
            self.remote_note.setText(
                f"Your messages, the memories recalled for them and document passages leave "
                f"this computer and go to {host}. Add it only if you trust that server."
            )
        self.env_edit.setEnabled(self.key_mode() == KEY_ENV)
        self.key_edit.setEnabled(self.key_mode() == KEY_KEYRING)
        busy = self.adding is not None
        self.probe_button.setEnabled(url is not None and self.probing is None and not busy)
        missing = self.missing()
        self.add_button.setEnabled(not missing and not busy)
        self.add_button.setToolTip(missing)

    def _url_changed(self) -> None:
        """Models listed for another address no longer apply."""
        if self._probed_url is not None and self.base_url() != self._probed_url:
            self.model_list.clear()
            self._probed_url = None
            self.preset = None
            self.probe_status.setText("Press Probe to list the server's models.")
        self._hide_error()
        self._update()

    def _probe_key(self) -> str | None:
        """The key the probe sends: the typed one, or the named variable's value."""
        if self.key_mode() == KEY_KEYRING:
            return self.key_edit.text() or None
        if self.key_mode() == KEY_ENV:
            name = self.env_edit.text().strip()
            return (os.environ.get(name) or None) if name else None
        return None

    # -- probing -----------------------------------------------------------------------------
    def start_probe(self) -> Operation | None:
        """Ask the server for its models on a worker thread."""
        url = self.base_url()
        if url is None or self.probing is not None:
            return None
        self._hide_error()
        self.probe_status.setText(f"Asking {host_of(url)} for its models…")
        self.probing = self.runner.run(
            asyncio.to_thread(self.probe_fn, url, self._probe_key()),
            what="probe the server",
            on_success=lambda models: self._probed(url, models),
            on_failure=self._probe_failed,
        )
        self._update()
        return self.probing

    def _probed(self, url: str, models: list[RemoteModel]) -> None:
        self.probing = None
        self._show_models(url, models)
        self._update()

    def _probe_failed(self, exc: BaseException) -> None:
        self.probing = None
        self.probe_status.setText("No models listed.")
        self._show_error(self.runner.readable(exc))
        self._update()

    def _show_models(self, url: str, models: list[RemoteModel]) -> None:
        self._probed_url = normalise_url(url)
        self.model_list.clear()
        for model in models:
            item = QListWidgetItem(f"{model.id}  ·  {context_text(model.context_size)}")
            item.setData(Qt.ItemDataRole.UserRole, model)
            item.setToolTip(model.id)
            self.model_list.addItem(item)
        if models:
            self.model_list.setCurrentRow(0)
        count = len(models)
        self.probe_status.setText(
            f"The server offers {count} model{'s' if count != 1 else ''}; pick one."
            if count
            else "The server answered but lists no models; load one there and probe again."
        )

    # -- adding ------------------------------------------------------------------------------
    def start_add(self) -> Operation | None:
        """Save the endpoint (and the key in the keyring) on a worker thread."""
        url, model = self.base_url(), self.selected_model()
        if self.missing() or url is None or model is None or self.adding is not None:
            return None
        mode = self.key_mode()
        env = self.env_edit.text().strip() if mode == KEY_ENV else None
        key = self.key_edit.text() if mode == KEY_KEYRING else None
        name = self.name_edit.text().strip() or None
        remote_confirmed = self.remote() and self.remote_check.isChecked()
        registry, store_key, preset = self.registry, self.store_key, self.preset

        def add() -> Endpoint:
            endpoint = registry.add(
                url,
                model.id,
                name=name,
                context_size=model.context_size,
                parameters=model.parameters,
                api_key_env=env,
                keyring=key is not None,
                remote_confirmed=remote_confirmed,
                preset=preset,
            )
            if key is not None:
                try:
                    store_key(endpoint.name, key)
                except BaseException:
                    registry.remove(endpoint.name)  # no endpoint whose key went nowhere
                    raise
            return endpoint

        self._hide_error()
        self.adding = self.runner.run(
            asyncio.to_thread(add),
            what="add the endpoint",
            on_success=self._added,
            on_failure=self._add_failed,
        )
        self._update()
        return self.adding

    def _added(self, endpoint: Endpoint) -> None:
        self.adding = None
        self.key_edit.clear()
        self.added.emit(endpoint)
        self.accept()

    def _add_failed(self, exc: BaseException) -> None:
        self.adding = None
        self._show_error(f"Not added: {self.runner.readable(exc)}")
        self._update()

    def _show_error(self, text: str) -> None:
        self.error_label.setText(text)
        self.error_label.show()

    def _hide_error(self) -> None:
        self.error_label.clear()
        self.error_label.hide()

    def done(self, result: int) -> None:
        """Closing drops a probe still running (its answer has nowhere to go)."""
        for op in (self.probing, self.adding, self.checking):
            if op is not None and not op.done:
                op.cancel()
        self.probing = self.checking = None
        super().done(result)
