"""The live tier and media: llama-cpp-python's server with SmolLM2, a text-only model.

What the server does, measured: it takes an `image_url` part and answers without seeing the image
(its text-only prompt format has no place for it), and refuses an `input_audio` part with a
request-validation error that echoes the whole request, base64 and all. So a text-only model is
declared as one (`capabilities=imp.LMCapabilities(media=frozenset())`), and imp refuses the image
by name before sending; an error that echoes base64 reaches the caller shortened.
"""

from __future__ import annotations

import io
import wave

import pytest
from live_support import SMOLLM2

import imp

pytestmark = pytest.mark.live

PNG = b"\x89PNG\r\n\x1a\n" + bytes(64)


def _wav() -> bytes:
    out = io.BytesIO()
    with wave.open(out, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(8000)
        w.writeframes(bytes(16000))  # one second of silence: 21 KB of base64
    return out.getvalue()


async def test_a_text_only_model_declared_so_refuses_media_before_sending(live_server: str) -> None:
    text_only = imp.LMCapabilities(media=frozenset())
    async with imp.lm(f"openai:{SMOLLM2.alias}", base_url=live_server, api_key="none", capabilities=text_only) as lm:
        program = imp.predict("photo: Image, question -> answer", lm=lm)
        with pytest.raises(imp.MediaRefused, match="is declared to take no images") as caught:
            await imp.call(program, photo=imp.Image.from_bytes(PNG), question="What is it?")
        assert caught.value.origin == "the input `photo`"
        # the same LM still answers text
        reply = await lm.request([{"role": "user", "content": "Say hello."}], max_tokens=4, temperature=0)
        assert reply.usage.input_tokens > 0


async def test_the_server_takes_an_image_it_cannot_see(live_server: str) -> None:
    """Undeclared, the request is sent (imp cannot know what the model reads) and answered blind."""
    async with imp.lm(f"openai:{SMOLLM2.alias}", base_url=live_server, api_key="none", timeout=300.0) as lm:
        reply = await lm.request(
            [{"role": "user", "content": ["Describe it.", imp.Image.from_bytes(PNG)]}], max_tokens=2, temperature=0
        )
    assert reply.finish_reason in ("stop", "length") and reply.usage.input_tokens > 0


async def test_the_servers_echo_of_audio_is_shortened(live_server: str) -> None:
    clip = imp.Audio.from_bytes(_wav())
    async with imp.lm(f"openai:{SMOLLM2.alias}", base_url=live_server, api_key="none", max_retries=0) as lm:
        with pytest.raises(imp.BadRequest) as caught:
            await lm.request([{"role": "user", "content": ["Hear this.", clip]}], max_tokens=2)
    shown = f"{caught.value} {caught.value.body!r}"
    assert "input_audio" in shown and clip.base64()[:200] not in shown and "[base64: " in shown
