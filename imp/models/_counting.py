"""`count_tokens` where a provider or a server counts: Anthropic's counting endpoint, llama.cpp's
`/apply-template` and `/tokenize`, llama-cpp-python's `/extras/tokenize/count`; else an estimate.

A count is one POST through the client's own pool, key and time caps, never retried: a server that
does not answer it (404, a refusal, no connection) leaves an estimate marked as such, and the
client remembers that it has no counting endpoint.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

from imp.models._media_wire import encode_body
from imp.models._tokens import PER_MESSAGE, TokenCount, estimate, text_of
from imp.models._transport import BodyTooLarge, HTTPFailure
from imp.records import Message

if TYPE_CHECKING:
    from imp.models._http import HTTPLM
    from imp.models._options import Options

__all__ = ["TokenizerKind", "count_anthropic", "count_local_server"]

_COUNT_LIMIT = 1024 * 1024
"""A count's reply is small (`{"input_tokens": 12}`, or a list of token ids): 1 MiB bounds it."""

_ANTHROPIC_KEYS = ("model", "messages", "system", "tools", "tool_choice", "thinking")
"""What Anthropic's counting endpoint takes of a Messages body (no `max_tokens`, no `stream`)."""


async def _post(lm: HTTPLM, url: str, body: Mapping[str, object], options: Options) -> Any:
    """One POST of `body` to `url` with the client's headers; the JSON reply, or None when the server
    answered with an error status, no JSON, or not at all."""
    headers = lm._headers(options)
    try:
        response = await lm._transport.send(url, encode_body(dict(body)), headers, lm._cap(options))
    except HTTPFailure:
        return None
    try:
        if response.status >= 300:
            if response.status in (401, 403):
                raise await lm._refusal(response, False)  # a refused key is the caller's to see
            return None
        raw = await response.read(_COUNT_LIMIT)
    except BodyTooLarge:
        return None
    finally:
        await response.aclose()
    try:
        return json.loads(raw)
    except ValueError:
        return None


async def count_anthropic(lm: HTTPLM, messages: Sequence[Message], options: Options) -> TokenCount:
    """Anthropic's `POST /v1/messages/count_tokens`: the Messages body without `max_tokens`, answered
    with `{"input_tokens": N}` (the system prompt, tools and images counted as the request would be)."""
    body = lm.build_body(messages, options, stream=False)
    counted = await _post(lm, f"{lm.url}/count_tokens", {k: body[k] for k in _ANTHROPIC_KEYS if k in body}, options)
    tokens = counted.get("input_tokens") if isinstance(counted, Mapping) else None
    if isinstance(tokens, int) and not isinstance(tokens, bool) and tokens >= 0:
        return TokenCount(tokens, "provider", exact=True)
    return estimate(messages, options)


TokenizerKind = Literal["llama.cpp", "llama-cpp-python", "none"]
"""Which tokenizer endpoint a local server has (`none`: neither answered)."""


async def count_local_server(
    lm: HTTPLM, messages: Sequence[Message], options: Options, kind: TokenizerKind | None
) -> tuple[TokenCount, TokenizerKind]:
    """A local OpenAI-compatible server's tokenizer.

    llama.cpp's server renders the chat with the model's own template (`POST /apply-template`) and
    tokenizes the prompt it gives (`POST /tokenize`): an exact count. llama-cpp-python's server has
    no template endpoint; its `POST /extras/tokenize/count` counts the messages' text with the
    model's tokenizer, and the template's few tokens a message are added (`exact` False). Returns the
    count and which endpoint answered, for the client to ask only that one next time.
    """
    root = lm.base_url.removesuffix("/v1")
    if kind in (None, "llama.cpp"):
        wire = lm.build_body(messages, options, stream=False)
        template = await _post(lm, f"{root}/apply-template", {"messages": wire.get("messages", [])}, options)
        prompt = template.get("prompt") if isinstance(template, Mapping) else None
        if isinstance(prompt, str):
            tokens = await _post(lm, f"{root}/tokenize", {"content": prompt, "add_special": True}, options)
            ids = tokens.get("tokens") if isinstance(tokens, Mapping) else None
            if isinstance(ids, list):
                return TokenCount(len(ids), "tokenizer", exact=True), "llama.cpp"
    if kind in (None, "llama-cpp-python"):
        text = text_of(messages)
        # A server of several models (its config file) tokenizes with the model named, else with its first.
        counted = await _post(lm, f"{root}/extras/tokenize/count", {"input": text, "model": lm.model}, options)
        count = counted.get("count") if isinstance(counted, Mapping) else None
        if isinstance(count, int) and not isinstance(count, bool):
            return TokenCount(count + PER_MESSAGE * len(messages), "tokenizer", exact=False), "llama-cpp-python"
    return estimate(messages, options), "none"
