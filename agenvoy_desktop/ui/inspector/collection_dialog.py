"""The dialog that adds or edits a document collection: name, folders or files, patterns, watching.

It only gathers what the person typed; the registry checks it when the
Documents tab adds or changes the collection (and the tab shows why, if it
refuses).  Editing, it opens filled in with the collection as it is, and
the name (which names the collection's index) cannot change.
"""

from __future__ import annotations

from dataclasses import dataclass

from PySide6.QtWidgets import (
    QCheckBox,
    QDialog,
    QDialogButtonBox,
    QFileDialog,
    QFormLayout,
    QHBoxLayout,
    QLineEdit,
    QListWidget,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from agenvoy_desktop.operations.documents import CollectionView

WATCH_TEXT = "Watch these folders for changes"
WATCH_TIP = (
    "While the app runs, a change to the files is indexed by itself a moment later;"
    " changes made while it was closed are indexed when it starts."
)


@dataclass(frozen=True, slots=True)
class CollectionValues:
    """What the dialog gathered, unchecked."""

    name: str
    roots: list[str]
    include: list[str]
    exclude: list[str]
    watch: bool


def split_patterns(text: str) -> list[str]:
    """Glob patterns typed with commas or spaces between them."""
    return [p for p in text.replace(",", " ").split() if p]


class CollectionDialog(QDialog):
    """Name, folders or files, which files count (include/exclude patterns), and watching.

    *editing*: the collection to change (the dialog opens filled in with it).
    """

    def __init__(
        self, parent: QWidget | None = None, *, editing: CollectionView | None = None
    ) -> None:
        super().__init__(parent)
        self.editing = editing
        self.setWindowTitle(
            "Add a document collection" if editing is None else "Edit the collection"
        )
        self.setMinimumWidth(520)
        self.name_edit = QLineEdit()
        self.name_edit.setPlaceholderText("e.g. notes (letters, digits, . _ -)")
        self.roots = QListWidget()
        self.roots.setMaximumHeight(110)
        add_folder = QPushButton("Add folder…")
        add_folder.clicked.connect(self._choose_folder)
        add_file = QPushButton("Add file…")
        add_file.clicked.connect(self._choose_files)
        drop = QPushButton("Remove")
        drop.clicked.connect(self._remove_selected)
        row = QHBoxLayout()
        for button in (add_folder, add_file, drop):
            row.addWidget(button)
        row.addStretch(1)
        self.include_edit = QLineEdit()
        self.include_edit.setPlaceholderText("every readable file (e.g. *.md, docs/**)")
        self.exclude_edit = QLineEdit()
        self.exclude_edit.setPlaceholderText("nothing (e.g. drafts/**, *.log)")
        form = QFormLayout()
        form.addRow("Name:", self.name_edit)
        form.addRow("Folders and files:", self.roots)
        form.addRow("", row)
        form.addRow("Only files matching:", self.include_edit)
        form.addRow("Leave out:", self.exclude_edit)
        self.watch_check = QCheckBox(WATCH_TEXT)
        self.watch_check.setToolTip(WATCH_TIP)
        self.watch_check.setChecked(True)
        form.addRow("", self.watch_check)
        self.buttons = QDialogButtonBox(
            QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel
        )
        ok = self.buttons.button(QDialogButtonBox.StandardButton.Ok)
        ok.setText("Add" if editing is None else "Save")
        self.buttons.accepted.connect(self.accept)
        self.buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addLayout(form)
        layout.addWidget(self.buttons)
        if editing is not None:
            self._fill(editing)

    def _fill(self, view: CollectionView) -> None:
        self.name_edit.setText(view.name)
        self.name_edit.setReadOnly(True)
        self.name_edit.setToolTip("The name cannot change: it names the collection's index")
        for root in view.roots:
            self.roots.addItem(root)
        self.include_edit.setText(" ".join(view.include))
        self.exclude_edit.setText(" ".join(view.exclude))
        self.watch_check.setChecked(view.watch)

    def add_root(self, path: str) -> None:
        if path and path not in self.root_paths():
            self.roots.addItem(path)
            if not self.name_edit.text():
                self.name_edit.setText(_suggest_name(path))

    def root_paths(self) -> list[str]:
        return [self.roots.item(i).text() for i in range(self.roots.count())]

    def values(self) -> CollectionValues:
        return CollectionValues(
            self.name_edit.text().strip(),
            self.root_paths(),
            split_patterns(self.include_edit.text()),
            split_patterns(self.exclude_edit.text()),
            self.watch_check.isChecked(),
        )

    def _choose_folder(self) -> None:
        self.add_root(QFileDialog.getExistingDirectory(self, "Add a folder to the collection"))

    def _choose_files(self) -> None:
        files, _ = QFileDialog.getOpenFileNames(self, "Add files to the collection")
        for file in files:
            self.add_root(file)

    def _remove_selected(self) -> None:
        for item in self.roots.selectedItems():
            self.roots.takeItem(self.roots.row(item))


def _suggest_name(path: str) -> str:
    base = path.rstrip("/").rsplit("/", 1)[-1]
    name = "".join(c if c.isalnum() or c in "._-" else "-" for c in base).lstrip(".")
    return name[:64] or "documents"
