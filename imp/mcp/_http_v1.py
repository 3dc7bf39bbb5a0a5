"""The Streamable HTTP transport of `imp.mcp` under mcp 1.x: the SDK's transport, with two changes.

- A request the server answers with an HTTP error (or that never reaches it) fails that one
  request with a JSON-RPC error imp can classify, instead of ending the whole connection.
- Each request's task is bound to its own message. The SDK 1.x `post_writer` starts a task per
  request with a closure over the loop variable `ctx`; when the task starts after the loop has
  taken the next message (as under trio), it posts that one instead, and a response is lost.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator, Callable, Mapping

import anyio
import httpx
from anyio.abc import TaskGroup
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.client.streamable_http import RequestContext, StreamableHTTPTransport
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.message import ClientMessageMetadata, SessionMessage
from mcp.types import ErrorData, JSONRPCError, JSONRPCMessage, JSONRPCRequest

from imp.mcp._codes import HTTP_BROKEN, HTTP_STATUS_ERROR, HTTP_UNREACHABLE

__all__ = ["http_streams"]

_logger = logging.getLogger("imp.mcp")


class _Transport(StreamableHTTPTransport):
    async def post_writer(
        self,
        client: httpx.AsyncClient,
        write_stream_reader: MemoryObjectReceiveStream[SessionMessage],
        read_stream_writer: MemoryObjectSendStream[SessionMessage | Exception],
        write_stream: MemoryObjectSendStream[SessionMessage],
        start_get_stream: Callable[[], None],
        tg: TaskGroup,
    ) -> None:
        try:
            async with write_stream_reader:
                async for session_message in write_stream_reader:
                    message = session_message.message
                    metadata = session_message.metadata
                    metadata = metadata if isinstance(metadata, ClientMessageMetadata) else None
                    if self._is_initialized_notification(message):
                        start_get_stream()
                    ctx = RequestContext(
                        client=client,
                        session_id=self.session_id,
                        session_message=session_message,
                        metadata=metadata,
                        read_stream_writer=read_stream_writer,
                    )
                    handle = self._handle_resumption_request if metadata and metadata.resumption_token else None
                    handle = handle or self._handle_post_request
                    if isinstance(message.root, JSONRPCRequest):
                        tg.start_soon(handle, ctx)  # the task holds its own ctx
                    else:
                        await handle(ctx)
        except Exception:
            _logger.exception("the MCP HTTP writer failed")
        finally:
            await read_stream_writer.aclose()
            await write_stream.aclose()

    async def _handle_post_request(self, ctx: RequestContext) -> None:
        root = ctx.session_message.message.root
        request_id = root.id if isinstance(root, JSONRPCRequest) else None
        try:
            await super()._handle_post_request(ctx)
        except httpx.HTTPStatusError as exc:
            status = exc.response.status_code
            error = ErrorData(code=HTTP_STATUS_ERROR, message=f"HTTP {status}", data={"status": status})
            await _fail(ctx, request_id, error)
        except (httpx.ConnectError, httpx.ConnectTimeout, httpx.UnsupportedProtocol) as exc:
            await _fail(ctx, request_id, ErrorData(code=HTTP_UNREACHABLE, message=_text(exc)))
        except httpx.HTTPError as exc:
            await _fail(ctx, request_id, ErrorData(code=HTTP_BROKEN, message=_text(exc)))


def _text(exc: BaseException) -> str:
    return str(exc) or type(exc).__name__


async def _fail(ctx: RequestContext, request_id: object, error: ErrorData) -> None:
    if not isinstance(request_id, str | int):
        return  # a notification: nobody waits for it
    message = JSONRPCMessage(JSONRPCError(jsonrpc="2.0", id=request_id, error=error))
    with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
        await ctx.read_stream_writer.send(SessionMessage(message))


@contextlib.asynccontextmanager
async def http_streams(
    url: str, headers: Mapping[str, str], *, http_timeout: float
) -> AsyncIterator[
    tuple[MemoryObjectReceiveStream[SessionMessage | Exception], MemoryObjectSendStream[SessionMessage]]
]:
    """The (read, write) streams a `ClientSession` takes, over one httpx client of our own.

    The body follows the SDK's `streamable_http_client`; leaving it ends the session on the
    server (DELETE) and closes the client.
    """
    read_writer, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_stream, write_reader = anyio.create_memory_object_stream[SessionMessage](0)
    transport = _Transport(url)
    client = create_mcp_http_client(headers=dict(headers), timeout=httpx.Timeout(http_timeout, read=300.0))
    async with client, anyio.create_task_group() as tasks:
        try:

            def start_get_stream() -> None:
                tasks.start_soon(transport.handle_get_stream, client, read_writer)

            tasks.start_soon(
                transport.post_writer, client, write_reader, read_writer, write_stream, start_get_stream, tasks
            )
            try:
                yield read_stream, write_stream
            finally:
                if transport.get_session_id() is not None:
                    with anyio.move_on_after(min(http_timeout, 5.0), shield=True):
                        await transport.terminate_session(client)
                tasks.cancel_scope.cancel()
        finally:
            await read_writer.aclose()
            await write_stream.aclose()
