"""Reading other chat apps' exports (ChatGPT, Claude, Open WebUI, LM Studio, Jan).

Qt-free and store-free: :func:`read_source` turns a file, folder or zip into
:class:`ImportedSource` records, bounded by :class:`Limits`; importing them
into the store is the caller's job.
"""

from agenvoy_desktop.core.import_formats.bounded import ImportLimitError
from agenvoy_desktop.core.import_formats.detect import APPS, detect_app, read_source
from agenvoy_desktop.core.import_formats.model import (
    ImportedConversation,
    ImportedMessage,
    ImportedSource,
    Limits,
    Skip,
)

__all__ = [
    "APPS",
    "ImportLimitError",
    "ImportedConversation",
    "ImportedMessage",
    "ImportedSource",
    "Limits",
    "Skip",
    "detect_app",
    "read_source",
]
