"""Serving an imp program over ACP (the Agent Client Protocol): editors talk to it over stdio.

Needs the `acp` extra (`pip install 'imp[acp]'`, the official `agent-client-protocol` SDK).
"""

try:
    import acp as _sdk  # noqa: F401  (only to say clearly what is missing)
except ImportError as exc:
    raise ImportError("imp.acp needs the Agent Client Protocol SDK: pip install 'imp[acp]'") from exc

from imp.acp._agent import PermissionPolicy, SessionContext, SessionStore, serve

__all__ = ["PermissionPolicy", "SessionContext", "SessionStore", "serve"]
