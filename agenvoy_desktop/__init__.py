"""Agenvoy Desktop: an offline personal assistant that remembers."""

__version__ = "0.1.0"
