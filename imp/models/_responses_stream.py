"""The Responses API's semantic stream events read into imp's stream events and the whole response.

Text comes in `response.output_text.delta`, reasoning summaries in
`response.reasoning_summary_text.delta` (raw reasoning, from servers of open-weight models, in
`response.reasoning_text.delta`), a function call starts with `response.output_item.added` and its
arguments arrive in `response.function_call_arguments.delta`. The stream ends with
`response.completed` or `response.incomplete` (the whole response, read like a non-streamed one),
or fails with `response.failed` / an `error` event. There is no `[DONE]`: a body that ends without
a terminal event is a broken stream.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING

from imp.errors import StreamBroken
from imp.models._http import StreamState
from imp.models._responses_output import read_output, to_response
from imp.models._wire import JSONObject
from imp.models.base import LMResponse, StreamEvent

if TYPE_CHECKING:
    from imp.models._http import HTTPLM
    from imp.models._sse import SSEEvent

__all__ = ["ResponsesStream"]

_REASONING_DELTAS = frozenset({"response.reasoning_summary_text.delta", "response.reasoning_text.delta"})
_TERMINAL = frozenset({"response.completed", "response.incomplete"})


class ResponsesStream(StreamState):
    """Accumulates one streamed response: deltas as they come, the terminal event's whole response."""

    def __init__(self, lm: HTTPLM, step: int, request_id: str | None) -> None:
        self._lm = lm
        self._step = step
        self._request_id = request_id
        self._model: str | None = None
        self._tools: dict[str, int] = {}
        """A function call's tool index by its item id (and by `output_index`, as a string)."""
        self._call_ids: dict[int, str] = {}
        self._done_items: dict[int, JSONObject] = {}
        self._reasoned = False
        self._final: JSONObject | None = None

    def feed(self, event: SSEEvent) -> list[StreamEvent]:
        try:
            payload = json.loads(event.data)
        except ValueError:
            if event.event == "error":
                raise self._lm.stream_error({"error": {"message": event.data}}, request_id=self._request_id) from None
            return []
        if not isinstance(payload, Mapping):
            return []
        kind = str(payload.get("type") or event.event)
        if kind == "error":
            raise self._lm.stream_error(payload, request_id=self._request_id)
        if kind == "response.failed":
            response = payload.get("response")
            error = response.get("error") if isinstance(response, Mapping) else None
            raise self._lm.stream_error(
                {"error": error or {"message": "the response failed"}, "response": response},
                request_id=self._request_id,
            )
        if kind in ("response.created", "response.in_progress") or kind in _TERMINAL:
            response = payload.get("response")
            if isinstance(response, Mapping):
                self._model = response.get("model") or self._model
                self._request_id = self._request_id or response.get("id")
                if kind in _TERMINAL:
                    self._final = response
            return []
        if kind == "response.output_text.delta":
            return _delta("text", payload)
        if kind in _REASONING_DELTAS:
            return self._reasoning(payload)
        if kind == "response.reasoning_summary_part.added" and self._reasoned:
            return [StreamEvent(kind="reasoning", delta="\n\n")]  # the final reasoning joins parts so too
        if kind == "response.output_item.added":
            return self._item_added(payload)
        if kind == "response.function_call_arguments.delta":
            index = self._tool_index(payload)
            piece = str(payload.get("delta") or "")
            if index is None or not piece:
                return []
            return [StreamEvent(kind="tool_call", delta=piece, index=index, tool_call_id=self._call_ids.get(index))]
        if kind == "response.output_item.done":
            item = payload.get("item")
            if isinstance(item, Mapping):
                self._done_items[int(payload.get("output_index", len(self._done_items)))] = item
        return []

    def _reasoning(self, payload: JSONObject) -> list[StreamEvent]:
        events = _delta("reasoning", payload)
        self._reasoned = self._reasoned or bool(events)
        return events

    def _item_added(self, payload: JSONObject) -> list[StreamEvent]:
        item = payload.get("item")
        if not isinstance(item, Mapping) or item.get("type") != "function_call":
            return []
        index = len(self._call_ids)
        call_id = str(item.get("call_id") or f"call_{self._step}_{index}")
        self._call_ids[index] = call_id
        if isinstance(item.get("id"), str):
            self._tools[item["id"]] = index
        if "output_index" in payload:
            self._tools[f"#{payload['output_index']}"] = index
        return [
            StreamEvent(
                kind="tool_call",
                delta=str(item.get("arguments") or ""),
                index=index,
                tool_name=str(item.get("name") or ""),
                tool_call_id=call_id,
            )
        ]

    def _tool_index(self, payload: JSONObject) -> int | None:
        found = self._tools.get(str(payload.get("item_id")))
        if found is None and "output_index" in payload:
            found = self._tools.get(f"#{payload['output_index']}")
        return found

    def finish(self) -> LMResponse:
        if self._final is None:
            raise StreamBroken(
                "the stream ended before response.completed",
                provider=self._lm.provider,
                code="stream_truncated",
                request_id=self._request_id,
            )
        items = self._final.get("output")
        if not isinstance(items, list) or not items:  # a server that sends the items only one by one
            items = [item for _, item in sorted(self._done_items.items())]
        return to_response(
            self._final,
            read_output(items, self._step),
            model=self._model or self._lm.model,
            request_id=self._request_id,
        )


def _delta(kind: str, payload: JSONObject) -> list[StreamEvent]:
    piece = payload.get("delta")
    if not isinstance(piece, str) or not piece:
        return []
    return [StreamEvent(kind="text" if kind == "text" else "reasoning", delta=piece)]
