"""The memory-inspector panel (issue 5): summary, context, recall, error memory, models."""

from agenvoy_desktop.ui.inspector.panel import InspectorPanel

__all__ = ["InspectorPanel"]
