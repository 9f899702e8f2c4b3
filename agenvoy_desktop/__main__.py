"""``python -m agenvoy_desktop`` runs the same entry point as ``agenvoy-desktop``."""

from agenvoy_desktop.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
