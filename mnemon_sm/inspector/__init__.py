"""A read-only web inspector of a storage root (``mnemon-sm inspect``; the ``inspect`` extra):
hot memory, recall, spaces, documents, agents, and where each flow stands."""

from mnemon_sm.inspector.app import check_bind, create_app
from mnemon_sm.inspector.serve import Running, open_read_only, serve

__all__ = ["Running", "check_bind", "create_app", "open_read_only", "serve"]
