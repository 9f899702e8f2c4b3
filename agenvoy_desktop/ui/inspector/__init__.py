"""The memory-inspector panel: summary, context, recall, error memory, models."""

from agenvoy_desktop.ui.inspector.panel import InspectorPanel

__all__ = ["InspectorPanel"]
