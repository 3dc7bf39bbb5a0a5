"""A tool's exception text reaches the model (and its provider) redacted, keeping its meaning."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

import imp
from imp.records import ToolCall, plain
from imp.tools import ToolError, format_tool_result, run_tool_calls, tool

Run = Callable[[Callable[[], Awaitable[Any]]], Any]

KEY = "sk-proj-abcdefghijklmnop0123456789"

# (what the tool raises, the secret in it, words of its meaning the model must still read)
FAILURES: dict[str, tuple[BaseException, str, list[str]]] = {
    "database url": (
        ConnectionError("could not connect to postgres://app:hunter2hunter2@db.internal:5432/orders"),
        "hunter2hunter2",
        ["could not connect to", "postgres://app:", "@db.internal:5432/orders"],
    ),
    "password pair": (
        RuntimeError("login failed for user=ops password=Tr0ub4dor&3 (host db)"),
        "Tr0ub4dor&3",
        ["login failed for user=ops", "password=", "(host db)"],
    ),
    "api key": (ValueError(f"Incorrect API key provided: {KEY}."), KEY, ["Incorrect API key provided:"]),
    "bearer header": (
        PermissionError("401 from upstream; sent Authorization: Bearer abcdefghijklmnopqrstuv"),
        "abcdefghijklmnopqrstuv",
        ["401 from upstream; sent Authorization:"],
    ),
    "tool error": (
        ToolError(f"the vault refused token={KEY}", outcome="refused"),
        KEY,
        ["the vault refused token="],
    ),
    "json body": (
        RuntimeError('bad request: {"client_secret": "s3cr3t value", "scope": "read"}'),
        "s3cr3t",
        ['bad request: {"client_secret": "', '", "scope": "read"}'],
    ),
}


@pytest.mark.parametrize("case", list(FAILURES))
def test_what_the_model_reads_of_a_failure_is_redacted(run: Run, case: str) -> None:
    raised, secret, meaning = FAILURES[case]

    def lookup(order: str) -> str:
        raise raised

    async def body() -> Any:
        return await run_tool_calls([ToolCall("c1", "lookup", {"order": "A1"})], [tool(lookup)])

    [result] = run(body)
    shown = format_tool_result(result)
    assert secret not in shown and secret not in (result.error or "")
    assert "[REDACTED]" in shown and "[REDACTED]]" not in shown
    for words in meaning:
        assert words in shown
    assert shown.startswith("Error:")
    if not isinstance(raised, ToolError):  # a ToolError's message is the whole sentence
        assert shown.startswith("Error: lookup failed: ")


def test_a_failure_without_a_secret_is_read_as_it_was(run: Run) -> None:
    def lookup(order: str) -> str:
        raise KeyError(f"no order {order} (see https://example.com/docs?page=2)")

    async def body() -> Any:
        return await run_tool_calls([ToolCall("c1", "lookup", {"order": "A1"})], [tool(lookup)])

    [result] = run(body)
    assert result.error == "lookup failed: 'no order A1 (see https://example.com/docs?page=2)'"


def test_the_provider_never_receives_a_tools_secret() -> None:
    def lookup(order: str) -> str:
        """Look an order up."""
        raise ConnectionError(f"postgres://app:hunter2hunter2@db/orders refused; api_key={KEY}")

    lm = imp.ScriptedLM(
        [
            {"tool_calls": [{"name": "lookup", "arguments": {"order": "A1"}}]},
            {"reply": "the database is down"},
        ],
        exhausted={"reply": "done"},
    )
    agent = imp.react("question -> reply", [lookup], lm=lm)
    prediction = imp.call_sync(agent, question="Where is A1?")
    assert prediction.reply == "the database is down"
    sent = json.dumps(plain([request.messages for request in lm.requests]))  # the calls are ToolCall records
    assert "hunter2hunter2" not in sent and KEY not in sent
    assert "postgres://app:[REDACTED]@db/orders refused" in sent


def test_a_failing_tools_events_and_history_read_cleanly() -> None:
    from imp.runtime.run import Event, run_scope

    def lookup(order: str) -> str:
        """Look an order up."""
        raise RuntimeError(f"password={KEY} refused for token: Bearer abcdefghijklmnop")

    lm = imp.ScriptedLM(
        [{"tool_calls": [{"name": "lookup", "arguments": {"order": "A1"}}]}, {"reply": "down"}],
        exhausted={"reply": "done"},
    )
    events: list[Event] = []
    with run_scope(on_event=events.append):
        prediction = imp.call_sync(imp.react("question -> reply", [lookup], lm=lm), question="A1?")
    expected = "lookup failed: password=[REDACTED] refused for token: [REDACTED]"
    [result] = prediction.metadata.history[0]["tool_call_results"]
    assert result.error == expected
    shown = [json.dumps(e.dump()) for e in events if "lookup failed" in json.dumps(e.dump())]
    assert shown, "the failure is in an event"
    for text in shown:
        assert KEY not in text and "abcdefghijklmnop" not in text
        assert "[REDACTED]]" not in text and expected in text
