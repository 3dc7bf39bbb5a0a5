"""A run's stream as AG-UI events, for web UIs that speak the Agent-User Interaction protocol
(CopilotKit and others): `events(imp.stream(...), thread_id=..., run_id=...)`, and `encode` for the
server-sent events an endpoint returns.

Needs the optional extra `imp[agui]` (the `ag-ui-protocol` package); `import imp` never loads it.
"""

try:
    import ag_ui as _protocol  # noqa: F401  (only to say clearly what is missing)
except ImportError as exc:  # pragma: no cover - only without the extra
    raise ImportError("imp.agui needs the AG-UI protocol package: pip install 'imp[agui]'") from exc

from imp.agui._events import CONTENT_TYPE, encode, events

__all__ = ["CONTENT_TYPE", "encode", "events"]
