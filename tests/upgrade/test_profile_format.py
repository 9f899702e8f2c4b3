"""The profile format stands for the formats of every file in a profile.

When a file's format changes, a profile written by this version can no
longer be opened by the previous one: ``PROFILE_FORMAT`` must move with it
(and ``scripts/make_profile_fixture.py`` should then keep a profile of the
release for ``test_profile_upgrade.py``).  This test fails until both sides
of the table below are updated together.
"""

from __future__ import annotations

from agenvoy_desktop import settings
from agenvoy_desktop.core import archive, session_settings, summary
from agenvoy_desktop.core.error_memory import schema as error_schema
from agenvoy_desktop.core.profile import PROFILE_FORMAT
from agenvoy_desktop.llm import catalogue
from agenvoy_desktop.rag import index_schema, registry

FILE_FORMATS_OF_PROFILE_FORMAT = {
    2: {
        "archive": 4,
        "error memory": 1,
        "settings": 1,
        "model catalogue": 1,
        "document collections": 1,
        "document index": 1,
        "summary": 2,
        "session settings": 1,
    },
    3: {
        "archive": 4,
        "error memory": 1,
        "settings": 1,
        "model catalogue": 1,
        "document collections": 1,
        "document index": 1,
        "summary": 3,
        "session settings": 1,
    },
    4: {
        "archive": 5,
        "error memory": 1,
        "settings": 1,
        "model catalogue": 1,
        "document collections": 1,
        "document index": 1,
        "summary": 3,
        "session settings": 1,
    },
}


def test_the_profile_format_moves_with_every_file_format() -> None:
    current = {
        "archive": archive.SCHEMA_VERSION,
        "error memory": error_schema.SCHEMA_VERSION,
        "settings": settings.SETTINGS_VERSION,
        "model catalogue": catalogue.CATALOGUE_VERSION,
        "document collections": registry.REGISTRY_VERSION,
        "document index": index_schema.SCHEMA_VERSION,
        "summary": summary.SUMMARY_VERSION,
        "session settings": session_settings.SETTINGS_VERSION,
    }
    assert FILE_FORMATS_OF_PROFILE_FORMAT[PROFILE_FORMAT] == current
