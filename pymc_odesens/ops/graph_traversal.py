"""``ancestors`` of PyTensor variables, wherever this PyTensor version keeps it."""

from __future__ import annotations

try:  # pytensor >= 2.31
    from pytensor.graph.traversal import ancestors
except ImportError:  # pragma: no cover - older pytensor
    from pytensor.graph.basic import ancestors

__all__ = ["ancestors"]
