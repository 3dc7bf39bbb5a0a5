"""Media on each client's wire, against recorded provider traffic (tests/models/fixtures/providers/media/).

Most fixtures are pydantic-ai's recordings of real requests that OpenAI and Anthropic answered
(MIT; each file's `source` names its cassette); the Responses API's `input_audio` and the
compatible servers' shapes are hand-written from their documentation, as their `source` says.
Each test sends the same conversation through imp's client to a fake provider on 127.0.0.1 and
compares what arrives with what was recorded, media bytes and all, then reads the recorded reply.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
from fake_provider import FakeProvider, Reply
from lm_constants import FAST_RETRIES, SECRET
from media_fixtures import KIWI, MP3, PDF, PNG, POTATO, WAV, asset, image, load_media_fixture

import imp
from imp.models.anthropic import AnthropicLM
from imp.models.openai import OpenAILM
from imp.models.openai_responses import OpenAIResponsesLM


def official(cls: type[Any], model: str, fake: FakeProvider) -> Any:
    """A client that takes the fake provider for the provider's own service (its own limits apply)."""
    own = type(f"Official{cls.__name__}", (cls,), {"default_base_url": fake.base_url})
    return own(model, api_key=SECRET, retry_policy=FAST_RETRIES, timeout=10.0)


def replay(fake: FakeProvider, relative: str, index: int = 0) -> dict[str, Any]:
    """The fixture, with the fake provider set to answer its `index`-th recorded reply."""
    fixture = load_media_fixture(relative)
    response = fixture["interactions"][index]["response"]
    fake.add(Reply(response["status"], json=response["json"]))
    return fixture


def without(body: Any, *keys: str) -> Any:
    """A JSON value with some keys left out at every level (what imp does not send: `n`, `is_error: false`)."""
    if isinstance(body, dict):
        return {k: without(v, *keys) for k, v in body.items() if k not in keys}
    if isinstance(body, list):
        return [without(v, *keys) for v in body]
    return body


def reply_text(response: dict[str, Any]) -> str:
    if "choices" in response:
        return str(response["choices"][0]["message"]["content"])
    if response.get("object") == "response":
        return "".join(c["text"] for item in response["output"] if item["type"] == "message" for c in item["content"])
    return "".join(b["text"] for b in response["content"] if b["type"] == "text")


# --- a media value in a user message: every kind and source, each client --------------------------


USER_CASES = [
    ("openai/image_data_uri.json", OpenAILM, "gpt-4.1-nano", "What is this vegetable?", lambda: image(POTATO)),
    ("openai/audio_mp3.json", OpenAILM, "gpt-4o-audio-preview", "Whose name is mentioned in the audio?",
     lambda: imp.Audio.from_bytes(asset(MP3))),
    ("openai/document_pdf.json", OpenAILM, "gpt-4o", "What is the main content on this document?",
     lambda: imp.File.from_bytes(asset(PDF), name="filename.pdf")),
    ("openai_responses/image_url.json", OpenAIResponsesLM, "gpt-4o", "hello",
     lambda: imp.Image.from_url("https://t3.ftcdn.net/jpg/00/85/79/92/360_F_85799278_0BBGV9OAdQDTLnKwAPBCcg1J7QtiieJY.jpg")),
    ("openai_responses/document_pdf.json", OpenAIResponsesLM, "gpt-4o", "What is in the document?",
     lambda: imp.File.from_bytes(asset(PDF), name="filename.pdf")),
    ("openai_responses/audio_wav.json", OpenAIResponsesLM, "gpt-audio", "What do you hear?",
     lambda: imp.Audio.from_bytes(asset(WAV))),
    ("anthropic/image_url.json", AnthropicLM, "claude-haiku-4-5", "What is this vegetable?",
     lambda: imp.Image.from_url("https://t3.ftcdn.net/jpg/00/85/79/92/360_F_85799278_0BBGV9OAdQDTLnKwAPBCcg1J7QtiieJY.jpg")),
    ("anthropic/image_base64.json", AnthropicLM, "claude-haiku-4-5", "What is this vegetable?", lambda: image(POTATO)),
    ("anthropic/document_pdf.json", AnthropicLM, "claude-sonnet-4-5", "What is the main content on this document?",
     lambda: imp.File.from_bytes(asset(PDF))),
    ("anthropic/document_url.json", AnthropicLM, "claude-sonnet-4-5", "What is the main content on this document?",
     lambda: imp.File.from_url("https://pdfobject.com/pdf/sample.pdf")),
    ("anthropic/document_text.json", AnthropicLM, "claude-sonnet-4-5", "What does this text file say?",
     lambda: imp.File.from_bytes(b"Dummy TXT file\n")),
]  # fmt: skip


@pytest.mark.parametrize(("relative", "cls", "model", "text", "make"), USER_CASES, ids=[c[0] for c in USER_CASES])
async def test_a_user_message_with_media_is_sent_as_recorded(
    fake: FakeProvider, relative: str, cls: type[Any], model: str, text: str, make: Any
) -> None:
    fixture = replay(fake, relative)
    options = {"prompt_cache": "off"} if cls is AnthropicLM else {}  # the recordings carry no cache marks
    async with official(cls, model, fake) as lm:
        response = await lm.request([{"role": "user", "content": [text, make()]}], **options)
    recorded = fixture["interactions"][0]
    sent = fake.requests[0].json
    key = "input" if cls is OpenAIResponsesLM else "messages"
    assert sent[key] == recorded["request"]["body"][key]
    assert sent["model"] == recorded["request"]["body"]["model"]
    assert response.text == reply_text(recorded["response"]["json"])


# --- a tool's result holding media ------------------------------------------------------------------


def _tool_turn(first: str, call_id: str, result: Any, thought: str | None = None) -> list[imp.models.base.Message]:
    return [
        {"role": "user", "content": first},
        {"role": "assistant", "content": thought, "tool_calls": [imp.ToolCall(call_id, "get_file", {})]},
        {"role": "tool", "tool_call_id": call_id, "content": [result]},
    ]


ASK = "Use the get_file tool now to retrieve a {} file, then describe what you received."

ANTHROPIC_TOOL_CASES = [
    ("anthropic/image_base64_tool_result.json", "image", "I'll retrieve the file for you now.", lambda: image(KIWI)),
    ("anthropic/document_pdf_tool_result.json", "document", "I'll retrieve the document file for you now.",
     lambda: imp.File.from_bytes(asset(PDF))),
    ("anthropic/document_url_tool_result.json", "document", "I'll retrieve the document file for you.",
     lambda: imp.File.from_url("https://pdfobject.com/pdf/sample.pdf")),
]  # fmt: skip


@pytest.mark.parametrize(
    ("relative", "kind", "thought", "make"), ANTHROPIC_TOOL_CASES, ids=[c[0] for c in ANTHROPIC_TOOL_CASES]
)
async def test_anthropic_carries_media_inside_the_tool_result(
    fake: FakeProvider, relative: str, kind: str, thought: str, make: Any
) -> None:
    fixture = replay(fake, relative, 1)
    recorded = fixture["interactions"][1]["request"]["body"]
    call_id = recorded["messages"][1]["content"][1]["id"]
    async with official(AnthropicLM, "claude-sonnet-4-5", fake) as lm:
        response = await lm.request(_tool_turn(ASK.format(kind), call_id, make(), thought), prompt_cache="off")
    sent = fake.requests[0].json
    assert sent["messages"] == without(recorded["messages"], "is_error")
    assert response.text == reply_text(fixture["interactions"][1]["response"]["json"])


OPENAI_TOOL_CASES = [
    ("openai/image_data_uri_tool_result.json", "image", "gpt-5-mini", lambda: image(KIWI)),
    ("openai/document_pdf_tool_result.json", "document", "gpt-5-mini",
     lambda: imp.File.from_bytes(asset(PDF), name="filename.pdf")),
]  # fmt: skip


@pytest.mark.parametrize(
    ("relative", "kind", "model", "make"), OPENAI_TOOL_CASES, ids=[c[0] for c in OPENAI_TOOL_CASES]
)
async def test_chat_completions_sends_a_tool_results_media_in_a_user_message_after_it(
    fake: FakeProvider, relative: str, kind: str, model: str, make: Any
) -> None:
    """A tool message takes text only: the media follow in one user message, as the recording shows
    OpenAI answering (the words around them are imp's own)."""
    fixture = replay(fake, relative, 1)
    recorded = fixture["interactions"][1]["request"]["body"]["messages"]
    call_id = recorded[1]["tool_calls"][0]["id"]
    value = make()
    async with official(OpenAILM, model, fake) as lm:
        await lm.request(_tool_turn(ASK.format(kind), call_id, value))
    sent = fake.requests[0].json["messages"]
    assert [m["role"] for m in sent] == [m["role"] for m in recorded] == ["user", "assistant", "tool", "user"]
    assert sent[2]["tool_call_id"] == call_id and str(value) in sent[2]["content"]
    label, part = sent[3]["content"]
    assert label == {"type": "text", "text": f"{value} from tool call {call_id}:"}
    assert part == recorded[3]["content"][1]  # the media part itself, byte for byte
    assert "[base64" not in sent[2]["content"] and len(sent[2]["content"]) < 200


async def test_audio_for_a_model_that_reads_none_is_refused_before_sending(fake: FakeProvider) -> None:
    """The recording shows OpenAI answering 400 ("Content blocks are expected to be either text or
    image_url type") to gpt-5-mini given audio; imp says so before sending, naming where it stood."""
    fixture = load_media_fixture("openai/audio_mp3_tool_result.json")
    assert fixture["interactions"][1]["response"]["status"] == 400
    recorded = fixture["interactions"][1]["request"]["body"]["messages"]
    assert recorded[3]["content"][1]["type"] == "input_audio"
    async with official(OpenAILM, "gpt-5-mini", fake) as lm:
        with pytest.raises(imp.MediaRefused, match="gpt-5-mini reads no audio") as caught:
            await lm.request(_tool_turn(ASK.format("audio"), "call_1", imp.Audio.from_bytes(asset(MP3))))
    assert fake.requests == []
    assert caught.value.provider == "openai" and caught.value.origin is None


def test_the_recorded_openai_url_tool_result_has_the_same_shape(fake: FakeProvider) -> None:
    fixture = load_media_fixture("openai/image_url_tool_result.json")
    recorded = fixture["interactions"][1]["request"]["body"]["messages"]
    assert recorded[3]["content"][1] == {
        "type": "image_url",
        "image_url": {
            "url": "https://t3.ftcdn.net/jpg/00/85/79/92/360_F_85799278_0BBGV9OAdQDTLnKwAPBCcg1J7QtiieJY.jpg"
        },
    }


async def test_chat_completions_sends_a_tool_results_image_url_as_recorded(fake: FakeProvider) -> None:
    fixture = replay(fake, "openai/image_url_tool_result.json", 1)
    recorded = fixture["interactions"][1]["request"]["body"]["messages"]
    url = recorded[3]["content"][1]["image_url"]["url"]
    async with official(OpenAILM, "gpt-4o", fake) as lm:
        await lm.request(
            _tool_turn(recorded[0]["content"][0]["text"], recorded[1]["tool_calls"][0]["id"], imp.Image.from_url(url))
        )
    sent = fake.requests[0].json["messages"]
    assert sent[3]["content"][1] == recorded[3]["content"][1]


RESPONSES_TOOL_CASES = [
    ("openai_responses/image_data_uri_tool_output.json", "image", lambda: image(KIWI)),
    ("openai_responses/image_url_tool_output.json", "image", None),
    ("openai_responses/document_pdf_tool_output.json", "document",
     lambda: imp.File.from_bytes(asset(PDF), name="filename.pdf")),
    ("openai_responses/document_url_tool_output.json", "document",
     lambda: imp.File.from_url("https://pdfobject.com/pdf/sample.pdf")),
]  # fmt: skip


@pytest.mark.parametrize(("relative", "kind", "make"), RESPONSES_TOOL_CASES, ids=[c[0] for c in RESPONSES_TOOL_CASES])
async def test_the_responses_api_sends_a_tool_results_media_as_its_output_parts(
    fake: FakeProvider, relative: str, kind: str, make: Any
) -> None:
    fixture = replay(fake, relative, 1)
    recorded = fixture["interactions"][1]["request"]["body"]["input"]
    output = next(item for item in recorded if item.get("type") == "function_call_output")
    if make is None:  # the recorded URL
        value: Any = imp.Image.from_url(output["output"][0]["image_url"])
    else:
        value = make()
    async with official(OpenAIResponsesLM, "gpt-5-mini", fake) as lm:
        await lm.request(_tool_turn(ASK.format(kind), output["call_id"], value))
    sent = next(item for item in fake.requests[0].json["input"] if item.get("type") == "function_call_output")
    assert sent == output


# --- OpenAI-compatible servers (hand-written from their documentation) ---------------------------------


COMPATIBLE_CASES = [
    ("compatible/llama_cpp_image.json", "What colour is this?", lambda: imp.Image.from_bytes(asset(PNG))),
    ("compatible/llama_cpp_audio.json", "What do you hear?", lambda: imp.Audio.from_bytes(asset(WAV))),
    ("compatible/vllm_image_url.json", "What colour is this?", lambda: imp.Image.from_url("https://example.com/red.png")),
    ("compatible/ollama_image.json", "What colour is this?", lambda: imp.Image.from_bytes(asset(PNG))),
]  # fmt: skip


@pytest.mark.parametrize(("relative", "text", "make"), COMPATIBLE_CASES, ids=[c[0] for c in COMPATIBLE_CASES])
async def test_a_compatible_server_gets_the_parts_its_documentation_names(
    fake: FakeProvider, relative: str, text: str, make: Any
) -> None:
    fixture = replay(fake, relative)
    recorded = fixture["interactions"][0]
    model = recorded["request"]["body"]["model"]
    async with imp.lm(f"openai:{model}", base_url=fake.base_url, retry_policy=FAST_RETRIES) as lm:
        response = await lm.request([{"role": "user", "content": [text, make()]}])
    assert fake.requests[0].json["messages"] == recorded["request"]["body"]["messages"]
    assert response.text == reply_text(recorded["response"]["json"])


def test_every_fixture_says_where_it_comes_from() -> None:
    from media_fixtures import MEDIA

    for path in MEDIA.rglob("*.json"):
        source = load_media_fixture(str(path.relative_to(MEDIA)))["source"]
        assert source.startswith(("pydantic-ai test suite (MIT), tests/", "hand-written from ")), path


async def test_the_streamed_body_is_the_same_bytes_as_a_whole_one(fake: FakeProvider) -> None:
    """The request streams its media's base64 with an exact content-length, no chunked encoding."""
    fake.add(
        Reply(
            json=copy.deepcopy(load_media_fixture("openai/image_data_uri.json")["interactions"][0]["response"]["json"])
        )
    )
    value = image(KIWI)
    async with official(OpenAILM, "gpt-4o", fake) as lm:
        await lm.request([{"role": "user", "content": ["What fruit?", value]}])
    received = fake.requests[0]
    headers = {k.lower(): v for k, v in received.headers.items()}
    assert int(headers["content-length"]) == len(received.raw)
    assert "transfer-encoding" not in headers
    assert received.json["messages"][0]["content"][1]["image_url"]["url"] == value.data_uri()


async def test_the_cache_keys_on_the_media_digest_never_its_bytes(fake: FakeProvider) -> None:
    from imp.models import MemoryCache
    from imp.models.cache import cache_key
    from imp.models.openai import _wire_messages

    reply = load_media_fixture("openai/image_data_uri.json")["interactions"][0]["response"]["json"]
    fake.add(Reply(json=reply), Reply(json=reply))
    async with official(OpenAILM, "gpt-4o", fake) as lm:
        cache = MemoryCache()
        first = await lm.request([{"role": "user", "content": ["Which?", image(KIWI)]}], cache=cache)
        again = await lm.request([{"role": "user", "content": ["Which?", image(KIWI)]}], cache=cache)  # same bytes
        other = await lm.request([{"role": "user", "content": ["Which?", image(POTATO)]}], cache=cache)
        assert (first.cache_hit, again.cache_hit, other.cache_hit) == (False, True, False)
        assert len(fake.requests) == 2
        body = {"model": "gpt-4o", "messages": _wire_messages(lm, [{"role": "user", "content": [image(KIWI)]}])}
    assert image(KIWI).sha256 in str(body) and image(KIWI).base64()[:64] not in str(body)
    assert cache_key("openai", "x", body) == cache_key(
        "openai", "x", {"model": "gpt-4o", "messages": _wire_messages(lm, [{"role": "user", "content": [image(KIWI)]}])}
    )
