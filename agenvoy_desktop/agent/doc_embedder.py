"""The embedding model of the document indexer's child process.

The indexer (``agenvoy_desktop.rag``) may not import the llama.cpp layer,
so its child process is told the dotted name of this factory
(:data:`FACTORY`) and calls it to get its embedder.  The model is the one
the conversation memory uses (MiniLM, or the one chosen in Settings →
Models), found the same way, so a query embedded by the window compares
with the chunks embedded here.
"""

from __future__ import annotations

from pathlib import Path

from agenvoy_desktop.core.embedding import TextEmbedder
from agenvoy_desktop.llm.catalogue import ModelCatalogue
from agenvoy_desktop.paths import AppPaths
from agenvoy_desktop.settings import load_settings

FACTORY = "agenvoy_desktop.agent.doc_embedder:open_document_embedder"
"""What the window passes to the indexer child as its embedder factory."""


def embedding_model_path(paths: AppPaths) -> Path:
    """The embedding model file the app uses (converted from the bundled MiniLM if needed).

    Raises ``ModelUnavailableError``, ``OSError`` or ``ValueError`` when there is none.
    """
    from agenvoy_desktop.llm.model_prep import prepare_embedding_model

    settings = load_settings(paths.settings_file)
    if settings.models.embedding_model:
        return ModelCatalogue(paths.models_dir).resolve(
            settings.models.embedding_model, "embedding"
        )
    return prepare_embedding_model(paths.models_dir)


def open_document_embedder(paths: AppPaths, model_path: str | None) -> TextEmbedder:
    """The indexer's embedder: the given model file, or the app's own.

    It gets half the configured threads: indexing runs in the background
    while the chat model and the window want the cores too.
    """
    from agenvoy_desktop.llm.embedder import Embedder

    threads = max(1, load_settings(paths.settings_file).models.threads // 2)
    path = Path(model_path) if model_path else embedding_model_path(paths)
    return Embedder(path, n_threads=threads)
