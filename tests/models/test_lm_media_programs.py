"""Media through whole programs, every client under every adapter: the request carries each value as a
part where its field's section stands, whole or streamed, and the reply is read as usual."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from fake_provider import FakeProvider, Received, Reply, message_item, responses_body, responses_reply
from lm_constants import FAST_RETRIES, SECRET
from media_fixtures import KIWI, MP3, PDF, asset

import imp
from imp.models.anthropic import AnthropicLM
from imp.models.openai import OpenAILM
from imp.models.openai_responses import OpenAIResponsesLM

CLIENTS = {
    "openai": (OpenAILM, "gpt-4o"),
    "openai-audio": (OpenAILM, "gpt-4o-audio-preview"),
    "responses": (OpenAIResponsesLM, "gpt-4o"),
    "anthropic": (AnthropicLM, "claude-sonnet-4-5"),
    "compatible": (None, "qwen2.5-vl"),
}
ADAPTERS: dict[str, Callable[[], imp.Adapter]] = {
    "chat": imp.ChatAdapter,
    "json": imp.JSONAdapter,
    "xml": imp.XMLAdapter,
    "template": lambda: imp.TemplateAdapter([imp.user("Look at {media}\nQ: {question}")]),
}
REPLIES = {
    "chat": "[[ ## answer ## ]]\nA kiwi.\n\n[[ ## completed ## ]]",
    "json": '{"answer": "A kiwi."}',
    "xml": "<answer>A kiwi.</answer>",
    "template": "A kiwi.",
}
SECTION = {"chat": "[[ ## media ## ]]\n", "json": "[[ ## media ## ]]\n", "xml": "<media>\n", "template": "Look at "}
VALUES: dict[str, Callable[[], Any]] = {
    "image bytes": lambda: imp.Image.from_bytes(asset(KIWI)),
    "image url": lambda: imp.Image.from_url("https://example.com/kiwi.jpg"),
    "pdf bytes": lambda: imp.File.from_bytes(asset(PDF), name="doc.pdf"),
    "pdf url": lambda: imp.File.from_url("https://example.com/doc.pdf"),
    "audio bytes": lambda: imp.Audio.from_bytes(asset(MP3)),
}
TAKEN = {
    "openai": {"image bytes", "image url", "pdf bytes"},
    "openai-audio": {"audio bytes"},
    "responses": {"image bytes", "image url", "pdf bytes", "pdf url"},
    "anthropic": {"image bytes", "image url", "pdf bytes", "pdf url"},
    "compatible": {"image bytes", "image url", "audio bytes"},
}


def _client(name: str, fake: FakeProvider) -> Any:
    cls, model = CLIENTS[name]
    if cls is None:
        return imp.lm(f"openai:{model}", base_url=fake.base_url, retry_policy=FAST_RETRIES)
    own = type(f"Official{cls.__name__}", (cls,), {"default_base_url": fake.base_url})
    return own(model, api_key=SECRET, retry_policy=FAST_RETRIES)


def _sse(events: list[dict[str, Any]], *, named: bool = False) -> str:
    if named:
        return "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events)
    return "".join(f"data: {json.dumps(e)}\n\n" for e in events) + "data: [DONE]\n\n"


def _reply(client: str, text: str, stream: bool) -> Reply:
    if client == "responses":
        return responses_reply(responses_body(message_item(text)), stream=stream)
    if client == "anthropic":
        if not stream:
            return Reply(json={"id": "msg_1", "type": "message", "role": "assistant", "model": "claude",
                               "content": [{"type": "text", "text": text}], "stop_reason": "end_turn",
                               "usage": {"input_tokens": 9, "output_tokens": 3}})  # fmt: skip
        events = [
            {"type": "message_start", "message": {"id": "msg_1", "model": "claude", "usage": {"input_tokens": 9}}},
            {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
            *({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": text[i : i + 5]}}
              for i in range(0, len(text), 5)),
            {"type": "content_block_stop", "index": 0},
            {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 3}},
            {"type": "message_stop"},
        ]  # fmt: skip
        return Reply(body=_sse(events, named=True), headers={"content-type": "text/event-stream"}, chunk_size=31)
    if not stream:
        return Reply(json={"choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": text}}],
                           "usage": {"prompt_tokens": 9, "completion_tokens": 3}})  # fmt: skip
    chunks = [{"choices": [{"index": 0, "delta": {"content": text[i : i + 5]}}]} for i in range(0, len(text), 5)]
    chunks.append({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
    return Reply(body=_sse(chunks), headers={"content-type": "text/event-stream"}, chunk_size=31)


def _user_parts(client: str, received: Received) -> list[Any]:
    body = received.json
    if client == "responses":
        content = [i for i in body["input"] if i.get("role") == "user"][-1]["content"]
    else:
        content = [m for m in body["messages"] if m["role"] == "user"][-1]["content"]
    assert isinstance(content, list), content
    return list(content)


def _is_media_part(part: dict[str, Any]) -> bool:
    return part.get("type") not in ("text", "input_text")


def _text(part: dict[str, Any]) -> str:
    return str(part.get("text", ""))


@pytest.mark.parametrize("value_name", VALUES)
@pytest.mark.parametrize("adapter_name", ADAPTERS)
@pytest.mark.parametrize("client", CLIENTS)
async def test_every_client_under_every_adapter(
    fake: FakeProvider, client: str, adapter_name: str, value_name: str
) -> None:
    value = VALUES[value_name]()
    kind = {"image": "Image", "audio": "Audio", "file": "File"}[value.kind]
    program = imp.predict(
        f"media: {kind}, question -> answer", lm=_client(client, fake), adapter=ADAPTERS[adapter_name]()
    )
    if value_name not in TAKEN[client]:
        with pytest.raises(imp.MediaRefused, match=r"^the input `media`: "):
            await imp.call(program, media=value, question="What is it?")
        assert fake.requests == []
        return
    fake.add(_reply(client, REPLIES[adapter_name], stream=False))
    prediction = await imp.call(program, media=value, question="What is it?")
    assert prediction.answer == "A kiwi."
    parts = _user_parts(client, fake.requests[0])
    media = [i for i, p in enumerate(parts) if _is_media_part(p)]
    assert len(media) == 1
    assert _text(parts[media[0] - 1]).endswith(SECTION[adapter_name])
    assert "What is it?" in _text(parts[media[0] + 1])
    sent = json.dumps(parts[media[0]])
    if value.data is not None:
        assert value.base64() in sent
    else:
        assert value.url in sent


@pytest.mark.parametrize("client", ["openai", "responses", "anthropic", "compatible"])
async def test_a_streamed_call_sends_the_same_media(fake: FakeProvider, client: str) -> None:
    value = imp.Image.from_bytes(asset(KIWI))
    program = imp.predict("media: Image, question -> answer", lm=_client(client, fake))
    fake.add(_reply(client, REPLIES["chat"], stream=True))
    deltas = [part async for part in imp.stream(program, media=value, question="What is it?")]
    assert deltas[-1].prediction is not None and deltas[-1].prediction.answer == "A kiwi."
    parts = _user_parts(client, fake.requests[0])
    assert value.base64() in json.dumps(parts)
    assert fake.requests[0].json.get("stream") is True


async def test_anthropic_cache_marks_land_on_the_media_block_that_ends_a_message(fake: FakeProvider) -> None:
    """Anthropic takes `cache_control` on an image or document block; the newest message's last block
    is marked as for text, so the next step reads the image from the cache."""
    value = imp.Image.from_bytes(asset(KIWI))
    fake.add(_reply("anthropic", "ok", stream=False))
    lm = _client("anthropic", fake)
    async with lm:
        await lm.request([{"role": "system", "content": "Look."}, {"role": "user", "content": ["Which fruit?", value]}])
    body = fake.requests[0].json
    assert body["system"][0]["cache_control"] == {"type": "ephemeral"}
    blocks = body["messages"][0]["content"]
    assert blocks[-1]["type"] == "image" and blocks[-1]["cache_control"] == {"type": "ephemeral"}
    assert "cache_control" not in blocks[0]
