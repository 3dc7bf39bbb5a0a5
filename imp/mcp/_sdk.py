"""The two release lines of the `mcp` SDK behind one surface: what `imp.mcp` reads and writes.

mcp 2.x renamed `McpError` to `MCPError`, turned the message unions from `RootModel`s into plain
unions, moved every field to snake_case (the wire keeps camelCase), replaced the lowlevel
server's decorators by constructor handlers, and sends `notifications/cancelled` itself when a
caller gives up. imp reads every SDK value through its wire form (`wire`), which both lines spell
the same, and builds SDK values from wire dicts (`model_validate`), which both lines accept.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version
from typing import Any

import mcp
from mcp import types
from pydantic import RootModel, TypeAdapter

__all__ = [
    "MCPError",
    "SDK_VERSION",
    "V2",
    "cancelled_notification",
    "error_of",
    "read_message",
    "unwrap",
    "wire",
    "write_message",
]


def _version() -> str:
    try:
        return version("mcp")
    except PackageNotFoundError:  # pragma: no cover - an SDK installed without metadata
        return "2" if hasattr(mcp, "MCPError") else "1"


SDK_VERSION = _version()
"""The installed SDK's version, e.g. `1.30.0` or `2.3.0`."""

V2 = int(SDK_VERSION.split(".")[0]) >= 2
"""Whether the installed SDK is of the 2.x line."""

MCPError: type[Exception] = getattr(mcp, "MCPError", None) or mcp.McpError  # type: ignore[attr-defined, unused-ignore]
"""The SDK's error for a JSON-RPC error (`McpError` in 1.x); both lines keep it as `.error` (ErrorData)."""

_MESSAGE: TypeAdapter[Any] = TypeAdapter(types.JSONRPCMessage)


def read_message(line: bytes | str) -> Any:
    """A JSON-RPC message from one line of JSON (a `RootModel` in 1.x, the member model in 2.x)."""
    return _MESSAGE.validate_json(line)


def write_message(message: Any) -> str:
    """A JSON-RPC message as one line of JSON, in wire spelling."""
    return str(message.model_dump_json(by_alias=True, exclude_none=True))


def unwrap(message: object) -> Any:
    """The message inside a 1.x `RootModel` union (`ServerNotification(...).root`); a 2.x value as it is."""
    return message.root if isinstance(message, RootModel) else message


def wire(model: object) -> dict[str, Any]:
    """An SDK value as the JSON the protocol sends (camelCase keys, no None values)."""
    dumped: dict[str, Any] = unwrap(model).model_dump(mode="json", by_alias=True, exclude_none=True)
    return dumped


def error_of(exc: BaseException) -> tuple[int, str, Any] | None:
    """The (code, message, data) of an SDK error, or None for any other exception."""
    if not isinstance(exc, MCPError):
        return None
    error = exc.error  # type: ignore[attr-defined]
    return int(error.code), str(error.message), error.data


def cancelled_notification(request_id: int | str, reason: str) -> Any:
    """`notifications/cancelled` for a request, as the line's `send_notification` takes it."""
    params = types.CancelledNotificationParams.model_validate({"requestId": request_id, "reason": reason})
    notification = types.CancelledNotification(params=params)
    if V2:
        return notification
    return types.ClientNotification(notification)  # type: ignore[call-arg, operator, unused-ignore]
