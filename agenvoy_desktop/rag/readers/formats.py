"""Which reader a file gets, decided by its extension (or, for a few, its whole name).

Code is recognised by extension and tagged with a language so the chunker
can cut it at top-level definitions.  Files with no known extension are left
out of a folder scan (most are binary), but a file the user names directly
is tried as plain text.
"""

from __future__ import annotations

from pathlib import PurePath

from agenvoy_desktop.rag.documents import Format

MARKDOWN_EXTENSIONS = frozenset({".md", ".markdown", ".mdown", ".mkd", ".mdx"})
TEXT_EXTENSIONS = frozenset(
    {".txt", ".text", ".rst", ".org", ".adoc", ".asciidoc", ".tex", ".log", ".csv", ".tsv"}
)
TEXT_NAMES = frozenset({"README", "LICENSE", "COPYING", "CHANGELOG", "NOTES", "TODO", "AUTHORS"})
CODE_NAMES = {"Makefile": "make", "Dockerfile": "docker", "CMakeLists.txt": "cmake"}
CODE_EXTENSIONS: dict[str, str] = {
    ".py": "python", ".pyi": "python", ".pyw": "python",
    ".js": "javascript", ".mjs": "javascript", ".cjs": "javascript", ".jsx": "javascript",
    ".ts": "typescript", ".tsx": "typescript", ".mts": "typescript",
    ".java": "java", ".kt": "kotlin", ".kts": "kotlin", ".scala": "scala", ".groovy": "groovy",
    ".go": "go", ".rs": "rust", ".swift": "swift", ".dart": "dart",
    ".c": "c", ".h": "c", ".cc": "cpp", ".cpp": "cpp", ".cxx": "cpp", ".hpp": "cpp",
    ".hh": "cpp", ".hxx": "cpp", ".cs": "csharp", ".m": "objc", ".mm": "objc",
    ".rb": "ruby", ".php": "php", ".pl": "perl", ".pm": "perl", ".lua": "lua",
    ".sh": "shell", ".bash": "shell", ".zsh": "shell", ".fish": "shell", ".ps1": "powershell",
    ".r": "r", ".jl": "julia", ".hs": "haskell", ".ml": "ocaml", ".mli": "ocaml",
    ".ex": "elixir", ".exs": "elixir", ".erl": "erlang", ".clj": "clojure", ".el": "elisp",
    ".sql": "sql", ".html": "html", ".htm": "html", ".css": "css", ".scss": "css",
    ".vue": "vue", ".svelte": "svelte", ".json": "json", ".yaml": "yaml", ".yml": "yaml",
    ".toml": "toml", ".ini": "ini", ".cfg": "ini", ".xml": "xml", ".proto": "protobuf",
}  # fmt: skip
PDF_EXTENSIONS = frozenset({".pdf"})
DOCX_EXTENSIONS = frozenset({".docx"})
MAIL_EXTENSIONS = frozenset({".eml", ".mbox"})


def format_of(path: PurePath | str) -> Format | None:
    """The reader format for *path*, or ``None`` when its name says nothing."""
    name = PurePath(path).name
    suffix = PurePath(name).suffix.lower()
    if name in CODE_NAMES or suffix in CODE_EXTENSIONS:
        return "code"
    if suffix in MARKDOWN_EXTENSIONS:
        return "markdown"
    if suffix in TEXT_EXTENSIONS or name in TEXT_NAMES:
        return "text"
    if suffix in PDF_EXTENSIONS:
        return "pdf"
    if suffix in DOCX_EXTENSIONS:
        return "docx"
    if suffix in MAIL_EXTENSIONS:
        return "mail"
    return None


def language_of(path: PurePath | str) -> str:
    """A code file's language tag (``""`` for anything else)."""
    name = PurePath(path).name
    return CODE_NAMES.get(name) or CODE_EXTENSIONS.get(PurePath(name).suffix.lower(), "")
