"""What each provider takes: media it cannot take are refused before sending, by name, with the limit.

Each refusal names where the value stands (the input `photo`), the provider and the limit, shows
the value by its description only, and sends nothing: the fake provider must see no request.
"""

from __future__ import annotations

from typing import Any

import pytest
from fake_provider import FakeProvider, Reply
from lm_constants import FAST_RETRIES, SECRET

import imp
from imp.models.anthropic import AnthropicLM
from imp.models.openai import OpenAILM
from imp.models.openai_responses import OpenAIResponsesLM

MB = 1024 * 1024
PNG = b"\x89PNG\r\n\x1a\n"
WAV = b"RIFF\x24\x00\x00\x00WAVEfmt " + bytes(32)
PDF = b"%PDF-1.4\n" + bytes(64)


def official(cls: type[Any], model: str, fake: FakeProvider, **kwargs: Any) -> Any:
    own = type(f"Official{cls.__name__}", (cls,), {"default_base_url": fake.base_url})
    return own(model, api_key=SECRET, retry_policy=FAST_RETRIES, **kwargs)


def compatible(fake: FakeProvider, **kwargs: Any) -> Any:
    return imp.lm("openai:local-model", base_url=fake.base_url, retry_policy=FAST_RETRIES, **kwargs)


REFUSED = [
    ("anthropic audio", lambda f: official(AnthropicLM, "claude-sonnet-4-5", f), lambda: imp.Audio.from_bytes(WAV),
     "anthropic takes no audio"),
    ("anthropic bmp", lambda f: official(AnthropicLM, "claude-sonnet-4-5", f), lambda: imp.Image.from_bytes(b"BM" + bytes(60)),
     "anthropic takes images of type image/gif, image/jpeg, image/png, image/webp, not image/bmp"),
    ("anthropic image over 5 MB as base64", lambda f: official(AnthropicLM, "claude-sonnet-4-5", f),
     lambda: imp.Image.from_bytes(PNG + bytes(4 * MB)), "5.3 MB as base64 is over anthropic's 5.0 MB limit"),
    ("anthropic docx", lambda f: official(AnthropicLM, "claude-sonnet-4-5", f),
     lambda: imp.File.from_bytes(b"PK\x03\x04" + bytes(30), "application/vnd.openxmlformats-officedocument.wordprocessingml.document"),
     "takes documents of type application/pdf"),
    ("openai image to gpt-3.5", lambda f: official(OpenAILM, "gpt-3.5-turbo", f), lambda: imp.Image.from_bytes(PNG),
     "openai's gpt-3.5-turbo reads no images"),
    ("openai pdf to o3-mini", lambda f: official(OpenAILM, "o3-mini", f), lambda: imp.File.from_bytes(PDF),
     "o3-mini reads no images or PDFs"),
    ("openai audio to gpt-4o", lambda f: official(OpenAILM, "gpt-4o", f), lambda: imp.Audio.from_bytes(WAV),
     "gpt-4o reads no audio"),
    ("openai flac", lambda f: official(OpenAILM, "gpt-4o-audio-preview", f), lambda: imp.Audio.from_bytes(b"fLaC" + bytes(40)),
     "takes audio clips of type audio/mpeg, audio/wav, not audio/flac"),
    ("openai image over 20 MB", lambda f: official(OpenAILM, "gpt-4o", f), lambda: imp.Image.from_bytes(PNG + bytes(21 * MB)),
     "over openai's 20.0 MB limit for one image"),
    ("openai chat pdf by url", lambda f: official(OpenAILM, "gpt-4o", f), lambda: imp.File.from_url("https://example.com/a.pdf"),
     "openai takes documents only as data, not as a URL"),
    ("openai audio by url", lambda f: official(OpenAILM, "gpt-audio", f), lambda: imp.Audio.from_url("https://example.com/a.wav"),
     "await value.fetch()"),
    ("responses audio to gpt-5", lambda f: official(OpenAIResponsesLM, "gpt-5-mini", f), lambda: imp.Audio.from_bytes(WAV),
     "gpt-5-mini reads no audio"),
    ("compatible pdf", lambda f: compatible(f), lambda: imp.File.from_bytes(PDF),
     "an OpenAI-compatible server takes no file parts"),
    ("compatible text-only model", lambda f: compatible(f, capabilities=imp.LMCapabilities(media=frozenset())),
     lambda: imp.Image.from_bytes(PNG), "is declared to take no images (capabilities.media)"),
    ("compatible image-only model, audio", lambda f: compatible(f, capabilities=imp.LMCapabilities(media={"image"})),
     lambda: imp.Audio.from_bytes(WAV), "is declared to take no audios"),
]  # fmt: skip


@pytest.mark.parametrize(("name", "make_lm", "make", "says"), REFUSED, ids=[c[0] for c in REFUSED])
@pytest.mark.parametrize("streamed", [False, True])
async def test_a_value_the_provider_cannot_take_is_refused_before_sending(
    fake: FakeProvider, name: str, make_lm: Any, make: Any, says: str, streamed: bool
) -> None:
    value = make()
    program = imp.predict("photo: Image | Audio | File, question -> answer", lm=make_lm(fake))
    with pytest.raises(imp.MediaRefused) as caught:
        if streamed:
            async for _ in imp.stream(program, photo=value, question="What is it?"):
                pass
        else:
            await imp.call(program, photo=value, question="What is it?")
    error = caught.value
    assert fake.requests == []
    assert says in str(error)
    assert str(error).startswith("the input `photo`: ") and error.origin == "the input `photo`"
    assert error.media is value and len(str(error)) < 400
    assert isinstance(error, ValueError) and isinstance(error, imp.ImpError)


async def test_the_request_totals_are_checked_too(fake: FakeProvider) -> None:
    """Anthropic: 32 MB for a whole request; OpenAI: 50 MB of images in one request."""
    images = [imp.Image.from_bytes(PNG + bytes(3 * MB + i)) for i in range(9)]
    async with official(AnthropicLM, "claude-sonnet-4-5", fake) as lm:
        with pytest.raises(imp.MediaRefused, match=r"over anthropic's 32\.0 MB request limit"):
            await lm.request([{"role": "user", "content": ["Compare:", *images]}])
    bigger = [imp.Image.from_bytes(PNG + bytes(11 * MB + i)) for i in range(5)]
    async with official(OpenAILM, "gpt-4o", fake) as lm:
        with pytest.raises(imp.MediaRefused, match=r"the request's images come to 55\.0 MB, over openai's 50\.0 MB"):
            await lm.request([{"role": "user", "content": ["Compare:", *bigger]}])
    assert fake.requests == []


async def test_a_declared_capability_widens_a_compatible_server(fake: FakeProvider) -> None:
    """A local server that does take `file` parts says so; the part is OpenAI's shape."""
    fake.add(
        Reply(
            json={"choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "ok"}}]}
        )
    )
    lm = compatible(fake, capabilities=imp.LMCapabilities(media={"image", "file"}))
    async with lm:
        await lm.request([{"role": "user", "content": ["Read:", imp.File.from_bytes(PDF, name="a.pdf")]}])
    part = fake.requests[0].json["messages"][0]["content"][1]
    assert part["type"] == "file" and part["file"]["filename"] == "a.pdf"


async def test_a_text_document_is_text_where_no_file_part_is_taken(fake: FakeProvider) -> None:
    fake.add(
        Reply(
            json={"choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "ok"}}]}
        )
    )
    async with compatible(fake) as lm:
        await lm.request(
            [{"role": "user", "content": ["Summarise:", imp.File.from_bytes(b"Line one.\n", name="a.txt")]}]
        )
    assert fake.requests[0].json["messages"][0]["content"] == (
        "Summarise:[document a.txt (text/plain)]\nLine one.\n\n[end of document a.txt]"
    )


async def test_a_provider_error_that_echoes_base64_is_shortened(fake: FakeProvider) -> None:
    import base64

    wall = base64.b64encode(bytes(range(256)) * 20).decode()
    fake.add(
        Reply(
            400,
            json={
                "error": {"message": f"Invalid image: data:image/png;base64,{wall}", "type": "invalid_request_error"}
            },
        )
    )
    async with compatible(fake) as lm:
        with pytest.raises(imp.BadRequest) as caught:
            await lm.request([{"role": "user", "content": ["x", imp.Image.from_bytes(PNG)]}])
    assert wall[:100] not in str(caught.value) and wall[:100] not in repr(caught.value.body)
    assert "[base64: " in str(caught.value)


async def test_urls_of_a_type_not_taken_and_text_by_url_are_refused(fake: FakeProvider) -> None:
    async with official(AnthropicLM, "claude-sonnet-4-5", fake) as lm:
        with pytest.raises(imp.MediaRefused, match="takes documents of type application/pdf, not text/plain"):
            await lm.request(
                [{"role": "user", "content": ["Read:", imp.File.from_url("https://example.com/notes.txt")]}]
            )
    async with official(OpenAILM, "gpt-4o", fake) as lm:
        with pytest.raises(imp.MediaRefused, match="only as data, not as a URL"):
            await lm.request(
                [{"role": "user", "content": ["Read:", imp.File.from_url("https://example.com/notes.txt")]}]
            )
    async with compatible(fake) as lm:
        with pytest.raises(imp.MediaRefused, match="takes no file parts"):
            await lm.request(
                [{"role": "user", "content": ["Read:", imp.File.from_url("https://example.com/notes.txt")]}]
            )
    assert fake.requests == []
