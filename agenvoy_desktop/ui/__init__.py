"""PySide6 views: the only package allowed to import Qt."""
