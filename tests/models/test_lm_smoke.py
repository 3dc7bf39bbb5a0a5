"""A first end-to-end check: one request through the fake provider."""

from fake_provider import FakeProvider

from imp.models._http import HTTPLM


async def test_plain_reply(fake: FakeProvider, openai_lm: HTTPLM) -> None:
    fake.add_fixture("llama_cpp/plain.json")
    response = await openai_lm.request([{"role": "user", "content": "hi"}])
    assert response.text == "Your friend,\n#BridgettoLemmage"
    assert response.usage.input_tokens == 15
    assert fake.requests[0].path == "/v1/chat/completions"
