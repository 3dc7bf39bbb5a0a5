"""`imp.mcp`: import tools from MCP servers (needs the optional extra `imp[mcp]`)."""

from imp.tools.mcp import *  # noqa: F403
from imp.tools.mcp import __all__ as __all__
