"""A recording TCP proxy in front of the live server: relays every byte both ways, unchanged, and keeps
each HTTP request the client sent (method, path, body), to count what reached the server.

A request counts as received by the server once the server answers on its connection (imp sends one
request at a time on a connection: no pipelining). A request written to a connection the server had
already closed (a kept-alive connection after a failed stream, say) gets no answer: it is kept apart,
in `unanswered`, since the server never read it.
"""

from __future__ import annotations

import contextlib
import json
import socket
import socketserver
import threading
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Sent:
    """One request as it went to the server."""

    method: str
    path: str
    body: bytes

    @property
    def json(self) -> Any:
        return json.loads(self.body) if self.body else None


class _Requests:
    """Reads HTTP/1.1 requests (with a content-length body, as imp sends them) out of a byte stream."""

    def __init__(self, sink: list[Sent], lock: threading.Lock) -> None:
        self._buffer = b""
        self._sink = sink
        self._lock = lock
        self.pending: list[Sent] = []
        """Requests sent on, not answered yet."""

    def answered(self) -> None:
        """The server sent bytes back: the requests sent before them reached it."""
        with self._lock:
            self._sink.extend(self.pending)
            self.pending.clear()

    def feed(self, data: bytes) -> None:
        self._buffer += data
        while True:
            head, found, rest = self._buffer.partition(b"\r\n\r\n")
            if not found:
                return
            lines = head.decode("latin-1").split("\r\n")
            method, path, _ = lines[0].split(" ", 2)
            length = 0
            for line in lines[1:]:
                name, _, value = line.partition(":")
                if name.strip().lower() == "content-length":
                    length = int(value.strip())
            if len(rest) < length:
                return
            with self._lock:
                self.pending.append(Sent(method, path, rest[:length]))
            self._buffer = rest[length:]


class RecordingProxy:
    """`http://127.0.0.1:<port>` relaying to `upstream` (host, port); `sent` holds every request."""

    def __init__(self, upstream: tuple[str, int]) -> None:
        self.sent: list[Sent] = []
        """Requests the server answered (so received), in order."""
        self.unanswered: list[Sent] = []
        """Requests written to a connection the server closed without answering them."""
        lock = threading.Lock()
        proxy = self

        class Relay(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                client: socket.socket = self.request
                server = socket.create_connection(upstream)
                requests = _Requests(proxy.sent, lock)

                def pipe(source: socket.socket, target: socket.socket, record: bool) -> None:
                    try:
                        while data := source.recv(65536):
                            if record:
                                requests.feed(data)
                            else:
                                requests.answered()
                            target.sendall(data)
                    except OSError:
                        pass
                    finally:
                        for sock in (source, target):
                            with contextlib.suppress(OSError):
                                sock.shutdown(socket.SHUT_RDWR)

                back = threading.Thread(target=pipe, args=(server, client, False), daemon=True)
                back.start()
                pipe(client, server, True)
                back.join()
                server.close()
                with lock:
                    proxy.unanswered.extend(requests.pending)

        self._server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Relay)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.05,), daemon=True)
        self._thread.start()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def bodies(self, path_end: str = "/chat/completions") -> list[Any]:
        """The JSON bodies sent to paths ending in `path_end`, in order."""
        return [s.json for s in self.sent if s.path.endswith(path_end)]

    def repeated(self) -> list[Any]:
        """Request bodies the server received more than once."""
        seen: set[str] = set()
        again = []
        for body in self.bodies():
            text = json.dumps(body, sort_keys=True)
            if text in seen:
                again.append(body)
            seen.add(text)
        return again

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
