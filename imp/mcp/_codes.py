"""The JSON-RPC codes imp's HTTP transports give a request that failed below the protocol."""

from __future__ import annotations

__all__ = ["HTTP_BROKEN", "HTTP_STATUS_ERROR", "HTTP_UNREACHABLE"]

HTTP_STATUS_ERROR = -32901
"""The JSON-RPC code of a request the server answered with an HTTP error; `data` holds `status`."""

HTTP_UNREACHABLE = -32902
"""The JSON-RPC code of a request that could not be delivered (no connection was made)."""

HTTP_BROKEN = -32903
"""The JSON-RPC code of a request whose connection broke after it was sent."""
