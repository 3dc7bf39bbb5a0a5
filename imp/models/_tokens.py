"""How many tokens a request holds, without sending it: a bound from above (what a budget reserves),
a bound from below (what refuses a request that cannot fit a context window), and an estimate.

Every tokenizer imp's providers use (byte-level BPE: OpenAI's, Anthropic's, Llama's; SentencePiece
with byte fallback: Gemma's) writes at least one UTF-8 byte per token, and splits on whitespace
before merging, so a request's text holds at most one token per byte and at least one per word.
What the provider adds that is not in the messages (a chat template's few tokens per message, the
system prompt Anthropic adds for tools, about 350 tokens) is added to the upper bound. The lower
bound takes one token per two words, not one per word: a SentencePiece vocabulary may merge a short
word with the space before the next one.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from imp.media import Media
from imp.records import MediaPart, Message

__all__ = ["TokenCount", "estimate", "text_of", "tokens_at_least", "tokens_at_most"]

CountMethod = Literal["provider", "tokenizer", "estimate"]

PER_MESSAGE = 8
"""Tokens a chat template adds around one message, at most (ChatML's `<|im_start|>role\\n...<|im_end|>\\n`
is 5; Llama 3's header is 5; Anthropic's turns fewer)."""

WITH_TOOLS = 400
"""Tokens a provider adds to a request that offers tools (Anthropic's tool-use system prompt is
346 with `tool_choice` auto; OpenAI's framing of the functions is smaller)."""

IMAGE_AT_MOST = 3_000
"""An image's tokens, at most, whatever its size: providers scale images down before counting
(Anthropic to about 1.15 megapixels, about 1,600 tokens; OpenAI's patch models cap at 1,536 patches,
about 2,500 tokens)."""

AUDIO_BYTES_PER_TOKEN = 16
"""Audio is counted by its bytes: 16 bytes a token is 1,000 tokens a second of 128 kbit/s audio,
well over what providers bill (OpenAI's audio models about 10 a second)."""

_WORD = re.compile(r"\S+")


@dataclass(frozen=True, slots=True)
class TokenCount:
    """The input tokens a request would take: counted by the provider's counting endpoint
    (`"provider"`), by the server's own tokenizer (`"tokenizer"`), or estimated from the text
    (`"estimate"`, about four characters a token: `exact` is False)."""

    input_tokens: int
    method: CountMethod
    exact: bool

    def __int__(self) -> int:
        return self.input_tokens


def _parts(message: Message) -> Iterator[str | Media]:
    """The text and media of one message: its content, tool calls and reasoning."""
    content = message.get("content")
    if isinstance(content, str):
        yield content
    elif isinstance(content, list):
        for part in content:
            if isinstance(part, str):
                yield part
            elif isinstance(part, MediaPart):
                yield part.media
            elif isinstance(part, Media):
                yield part
            elif isinstance(part, Mapping):
                yield json.dumps(part, default=str)
    for call in message.get("tool_calls") or ():
        yield call.name
        yield json.dumps(call.arguments, default=str)
    reasoning = message.get("reasoning")
    if reasoning:
        yield reasoning
    name = message.get("name")
    if name:
        yield name


def text_of(messages: Sequence[Message]) -> str:
    """The text of the messages, one after another (media left out)."""
    return "\n".join(p for m in messages for p in _parts(m) if isinstance(p, str))


def _media_at_most(media: Media) -> int:
    if media.kind == "image":
        return IMAGE_AT_MOST
    size = media.size
    if size is None:  # a URL the provider fetches: its size is unknown here
        return 100_000
    return size if media.kind == "file" else math.ceil(size / AUDIO_BYTES_PER_TOKEN)


def _extras(options: Mapping[str, object]) -> str:
    """What the options add to the prompt: the tools' schemas and a response format's."""
    extra = []
    tools = options.get("tools")
    if tools:
        extra.append(json.dumps(tools, default=str))
    response_format = options.get("response_format")
    if response_format:
        extra.append(json.dumps(response_format, default=str))
    return "".join(extra)


def tokens_at_most(messages: Sequence[Message], options: Mapping[str, object]) -> int:
    """An upper bound of the request's input tokens: one per UTF-8 byte of its text, the media's
    bound, and what templates and tools add (what a budget reserves)."""
    total = PER_MESSAGE * len(messages) + 3
    for message in messages:
        for part in _parts(message):
            total += len(part.encode("utf-8", "surrogatepass")) if isinstance(part, str) else _media_at_most(part)
    extra = _extras(options)
    if extra:
        total += len(extra.encode("utf-8", "surrogatepass"))
    if options.get("tools"):
        total += WITH_TOOLS
    return total


def tokens_at_least(messages: Sequence[Message], options: Mapping[str, object]) -> int:
    """A lower bound of the request's input tokens: one per two words of its text, so a request
    refused for it could never have fit."""
    text = text_of(messages) + _extras(options)
    return len(_WORD.findall(text)) // 2


def estimate(messages: Sequence[Message], options: Mapping[str, object]) -> TokenCount:
    """An estimate of the input tokens: four characters a token, three tokens a message, and
    the images at what providers usually count (`exact` False)."""
    chars = len(text_of(messages)) + len(_extras(options))
    media = sum(
        (765 if p.kind == "image" else _media_at_most(p) // 4)
        for m in messages
        for p in _parts(m)
        if isinstance(p, Media)
    )
    return TokenCount(math.ceil(chars / 4) + 3 * len(messages) + media, "estimate", exact=False)
