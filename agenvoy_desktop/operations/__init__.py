"""What the window and the CLI do with memory, without Qt.

Each module owns one part of what a person sees (the chat's pages, the
timeline, the summary, search, the sessions list) and offers plain functions
over a :class:`~agenvoy_desktop.core.store.MemoryStore` that return plain
dataclasses.  The window runs them on its storage thread and only renders
the results; the CLI calls them directly; tests need no Qt.
"""
