"""Serving an imp program over ACP (the Agent Client Protocol): editors talk to it over stdio.

Needs the `acp` extra (`pip install 'imp[acp]'`, the official `agent-client-protocol` SDK).
"""

from imp.acp._agent import PermissionPolicy, SessionContext, SessionStore, serve

__all__ = ["PermissionPolicy", "SessionContext", "SessionStore", "serve"]
