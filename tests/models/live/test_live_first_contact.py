"""The live tier, a newcomer's first steps on the recommended server (llama-cpp-python serving SmolLM2
with `--chat_format chatml-function-calling`): a sync call under a deadline, a parse error that tells
what happened, and where the `&#34;` in the model's output comes from (the server's prompt format
escapes what imp sends; imp sends plain text)."""

from __future__ import annotations

import json
import subprocess
import time
from typing import Any

import anyio
import pytest
from fake_provider import FakeProvider, Reply
from live_support import LIVE_PYTHON, SMOLLM2

import imp

pytestmark = pytest.mark.live

CONFIG = {"max_tokens": 48, "temperature": 0}


def smollm2(base: str) -> Any:
    return imp.lm(f"openai:{SMOLLM2.alias}", base_url=base, api_key="none", timeout=120.0)


def test_a_sync_call_under_a_deadline_ends_at_the_deadline_and_the_server_serves_on(live_server: str) -> None:
    """The README's style, `with imp.deadline(s): imp.call_sync(...)`, in a script (no event loop)."""
    long = imp.predict("topic -> essay", lm=smollm2(live_server), config={"max_tokens": 400, "temperature": 0})
    started = time.monotonic()
    with pytest.raises(imp.DeadlineExceeded), imp.deadline(0.5):
        imp.call_sync(long, topic="The history of the printing press, in detail.")
    assert time.monotonic() - started < 5.0
    short = imp.predict("question -> answer", lm=smollm2(live_server), config=CONFIG)
    with imp.deadline(120):
        prediction = imp.call_sync(short, question="What is 2 + 3?")
    assert isinstance(prediction.answer, str)


def test_a_bool_question_ends_typed_or_in_an_error_that_tells_the_whole_story(live_server: str) -> None:
    """The issue's case: Chat, then the JSON fallback asking json_schema (refused: a 500), then json_object."""
    program = imp.predict("question -> answer: bool", lm=smollm2(live_server), config=CONFIG)
    try:
        prediction = imp.call_sync(program, question="Is the sky blue?")
    except imp.AdapterParseError as error:
        message = str(error)
        assert message.startswith("ChatAdapter could not parse the reply: ")
        assert "the model wrote '" in message or "the reply was empty" in message, message
        if error.fallback is not None:  # the Chat reply failed: the fallback's story is told too
            assert error.adapters_tried == ("ChatAdapter", "JSONAdapter")
            assert (
                "Asked again with the JSON fallback (response_format json_schema, which the server refused; "
                "sent again with response_format json_object)" in message
            ), message
    else:
        assert isinstance(prediction.answer, bool)


# --- where `&#34;` comes from ---------------------------------------------------------------------

RENDER = """
import inspect, json, sys
import jinja2
from jinja2.sandbox import ImmutableSandboxedEnvironment
import llama_cpp.llama_chat_format as formats

source = inspect.getsource(formats.chatml_function_calling)
assert "autoescape=jinja2.select_autoescape" in source, "the format no longer escapes: update the docs"
template = eval("(" + source.split("function_calling_template = (")[1].split("\\n    )\\n")[0] + ")")
env = ImmutableSandboxedEnvironment(autoescape=jinja2.select_autoescape(["html", "xml"]), undefined=jinja2.StrictUndefined)
body = json.load(sys.stdin)
print(env.from_string(template).render(messages=body["messages"], tools=body["tools"], tool_calls=True, add_generation_prompt=True))
"""
"""The server's own prompt for a request body: llama-cpp-python's chatml-function-calling template,
taken from the installed package and rendered the way the package renders it."""


async def _imps_request_body() -> dict[str, Any]:
    """The body imp sends for a react step that replays a tool call whose argument holds quotes."""

    @imp.tool
    def read_file(path: str) -> str:
        """Read a file."""
        return '{"answer": 42}'

    fake = FakeProvider().start()
    try:
        call = {
            "id": "c1",
            "type": "function",
            "function": {"name": "read_file", "arguments": '{"path": "./data.json"}'},
        }
        fake.add(
            Reply(200, json={"choices": [{"message": {"role": "assistant", "content": "", "tool_calls": [call]}}]}),
            Reply(
                200, json={"choices": [{"message": {"role": "assistant", "content": "42"}, "finish_reason": "stop"}]}
            ),
        )
        async with imp.lm("openai:smollm2", base_url=fake.base_url, api_key="none") as lm:
            await imp.call(imp.react("question -> answer", [read_file], lm=lm), question='What is in "./data.json"?')
        body: dict[str, Any] = fake.requests[-1].json
        assert b"&#34;" not in fake.requests[-1].raw
        return body
    finally:
        fake.stop()


def test_the_entity_is_written_by_the_servers_prompt_format_not_by_imp() -> None:
    body = anyio.run(_imps_request_body)
    sent = json.dumps(body, ensure_ascii=False)
    assert "&#34;" not in sent and 'What is in \\"./data.json\\"?' in sent  # imp's text, JSON-escaped on the wire
    rendered = subprocess.run(
        [LIVE_PYTHON, "-c", RENDER], input=json.dumps(body), capture_output=True, text=True, check=True
    ).stdout
    assert "What is in &#34;./data.json&#34;?" in rendered  # the user's quotes, as the model reads them
    assert "{&#34;path&#34;: &#34;./data.json&#34;}" in rendered  # the replayed call's arguments
    # The format has no case for a `tool` message: the tool's result never reaches the model.
    assert '{"answer": 42}' not in rendered and "&#34;answer&#34;: 42" not in rendered
