"""What a journal keeps of a step: an LM response or a tool result as JSON, and a request's digest.

Nothing secret is kept: a response's text, reasoning and tool-call arguments pass the redaction of
events and logs (a credential-shaped string becomes `[REDACTED]`), the provider's raw payload is
dropped, and a request is kept only as its digest. A stored record is read as data, checked field by
field; it can never name code to run.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

from imp._redact import redact, redact_text
from imp.errors import JournalError
from imp.models.base import LM, LMResponse
from imp.records import Message, ToolCall, ToolResult, Usage, plain

__all__ = [
    "RequestDigest",
    "call_digest",
    "differences",
    "dump_response",
    "dump_tool_result",
    "load_response",
    "load_tool_result",
    "request_digest",
    "value_digest",
]

RequestDigest = dict[str, Any]
"""`{"all": hex, "model": "provider:model", "messages": [hex, ...], "roles": [...], "options": hex}`."""

_USAGE_INTS = ("input_tokens", "output_tokens", "cached_tokens", "reasoning_tokens", "cache_write_tokens", "requests")


def _default(value: object) -> object:
    """JSON for what the encoder does not know: a record by its dump, bytes by their hash, a dataclass
    by its fields, a pydantic model by its JSON dump, a date by its ISO form, else its type's name."""
    if type(value) is ToolCall:  # in every assistant message of a tool loop: its fields, no copy
        return (value.id, value.name, redact(value.arguments))
    dump = getattr(value, "dump", None)
    if callable(dump):
        return dump()
    if isinstance(value, bytes | bytearray):
        return {"sha256": hashlib.sha256(value).hexdigest()}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json")
    if isinstance(value, _dt.date):
        return value.isoformat()
    if isinstance(value, set | frozenset):
        return sorted(map(str, value))
    return f"<{type(value).__name__}>"


_encode = json.JSONEncoder(sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=_default).encode


def value_digest(value: object) -> str:
    """A digest of a JSON-like value (records and pydantic models read as their dumps)."""
    return _hash(value)


def _text_hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def _hash(value: object) -> str:
    # The C encoder walks the value once (no copy made first): a request's digest costs a few µs per message.
    return hashlib.sha256(_encode(value).encode()).hexdigest()[:32]


# A message is digested as the journal keeps it (redacted: the secret shapes over its encoded text,
# tool-call arguments by key name too), so a request after a replayed reply that echoed a credential
# is digested as the live request was.


def request_digest(
    lm: LM, messages: Sequence[Message], options: Mapping[str, Any], seen: dict[str, str] | None = None
) -> RequestDigest:
    """The digest that identifies a request: its model, each message's, and the options'. `seen` (one
    per run) keeps each message's digest by its text: a loop's requests repeat the earlier messages,
    so each is searched for secrets once."""
    if seen is None:
        seen = {}
    elif len(seen) > 10_000:
        seen.clear()
    hashes = []
    for message in messages:
        text = _encode(message)
        found = seen.get(text)
        if found is None:
            found = seen[text] = _text_hash(redact_text(text))
        hashes.append(found)
    model = f"{lm.provider}:{lm.model}"
    options_hash = _hash(options)
    whole = hashlib.sha256("|".join([model, options_hash, *hashes]).encode()).hexdigest()[:32]
    roles = [str(m.get("role", "")) for m in messages]
    return {"all": whole, "model": model, "messages": hashes, "roles": roles, "options": options_hash}


def call_digest(call: ToolCall) -> str:
    """A tool call's name and arguments, as a digest."""
    return _hash(redact({"name": call.name, "arguments": call.dump()["arguments"]}))


def differences(recorded: Mapping[str, Any], live: RequestDigest) -> str:
    """What differs between a recorded request's digest and the one about to be sent, in words."""
    found: list[str] = []
    if recorded.get("model") != live["model"]:
        found.append(f"the model ({recorded.get('model')} recorded, {live['model']} now)")
    old = recorded.get("messages") if isinstance(recorded.get("messages"), list) else []
    roles = live["roles"]
    assert isinstance(old, list)
    if len(old) != len(live["messages"]):
        found.append(f"the number of messages ({len(old)} recorded, {len(live['messages'])} now)")
    changed = [i for i, (a, b) in enumerate(zip(old, live["messages"], strict=False)) if a != b]
    if changed:
        shown = ", ".join(f"{i} ({roles[i]})" for i in changed[:5])
        found.append(f"message {shown}" if len(changed) == 1 else f"messages {shown}")
    if recorded.get("options") != live["options"]:
        found.append("the request options (tools, their descriptions, or settings)")
    return "; ".join(found) or "the request"


def dump_response(response: LMResponse) -> dict[str, Any]:
    """A response as the journal keeps it: redacted, without the provider's raw payload."""
    return {
        "text": redact_text(response.text),
        "tool_calls": [redact(c.dump()) for c in response.tool_calls],
        "fields": redact(plain(dict(response.fields))) if response.fields is not None else None,
        "reasoning": redact_text(response.reasoning) if response.reasoning is not None else None,
        "reasoning_data": plain(response.reasoning_data),
        "usage": response.usage.dump(),
        "finish_reason": response.finish_reason,
        "model": response.model,
        "request_id": response.request_id,
        "cache_hit": response.cache_hit,
    }


def _str(data: Mapping[str, Any], key: str, *, optional: bool = True) -> str | None:
    value = data.get(key)
    if value is None and optional:
        return None
    if not isinstance(value, str):
        raise JournalError(f"a journaled response's `{key}` is a string, got {type(value).__name__}")
    return value


def load_response(data: object) -> LMResponse:
    """Read a journaled response back; anything malformed is a JournalError naming the key."""
    if not isinstance(data, Mapping):
        raise JournalError("a journaled response is a mapping")
    calls = data.get("tool_calls") or []
    if not isinstance(calls, list) or not all(isinstance(c, Mapping) for c in calls):
        raise JournalError("a journaled response's `tool_calls` is a list of calls")
    fields = data.get("fields")
    if fields is not None and not isinstance(fields, Mapping):
        raise JournalError("a journaled response's `fields` is a mapping or null")
    usage = data.get("usage") or {}
    if not isinstance(usage, Mapping):
        raise JournalError("a journaled response's `usage` is a mapping")
    counts: dict[str, Any] = {}
    for key in _USAGE_INTS:
        value = usage.get(key, 0)
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise JournalError(f"a journaled response's usage `{key}` is a whole number >= 0, got {value!r}")
        counts[key] = value
    cost = usage.get("cost")
    if cost is not None and (not isinstance(cost, int | float) or isinstance(cost, bool)):
        raise JournalError("a journaled response's usage `cost` is a number or null")
    return LMResponse(
        text=_str(data, "text", optional=False) or "",
        tool_calls=tuple(ToolCall.load(c) for c in calls),
        fields=dict(fields) if fields is not None else None,
        reasoning=_str(data, "reasoning"),
        reasoning_data=data.get("reasoning_data"),
        usage=Usage(**counts, cost=cost),
        finish_reason=_str(data, "finish_reason"),
        model=_str(data, "model"),
        request_id=_str(data, "request_id"),
        cache_hit=data.get("cache_hit") is True,
    )


def dump_tool_result(result: ToolResult) -> dict[str, Any]:
    """A tool call's result (or error) as the journal keeps it, redacted."""
    out: dict[str, Any] = redact(result.dump())
    return out


def load_tool_result(data: object) -> ToolResult:
    """Read a journaled tool result back; a malformed one is a JournalError."""
    if not isinstance(data, Mapping):
        raise JournalError("a journaled tool result is a mapping")
    error = data.get("error")
    if error is not None and not isinstance(error, str):
        raise JournalError("a journaled tool result's `error` is a string or null")
    try:
        return ToolResult.load(data)
    except ValueError as exc:
        raise JournalError(f"a journaled tool result does not read: {exc}") from None
