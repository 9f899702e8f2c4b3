"""``python -m agenvoy_desktop`` runs the same entry point as ``agenvoy-desktop``."""

from agenvoy_desktop.cli import main

raise SystemExit(main())
