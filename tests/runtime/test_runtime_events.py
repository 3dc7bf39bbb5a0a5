"""Run events: ordered and identified per call, redacted, bounded, logged through structlog, and
never able to slow or break the program (a raising sink is reported once; a slow one is buffered)."""

from __future__ import annotations

import io
import json
import logging
import warnings
from collections.abc import Iterator
from typing import Any

import anyio
import pytest

import imp
from imp.errors import LMError
from imp.models.base import LMResponse, Usage
from imp.runtime.logging import configure_logging, reset_logging
from imp.runtime.run import MAX_EVENT_BYTES, Event, bound_payload, buffered_sink, current_run, emit, run_scope

USAGE = Usage(input_tokens=11, output_tokens=3, requests=1)
JWT = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"
KEY = "sk-proj-abcdefghijklmnopqrstuvwxyz012345"


def answering(delay: float = 0.0, text: str = "ok") -> imp.StaticLM:
    async def handler(messages: list[dict[str, Any]], options: dict[str, Any]) -> LMResponse:
        if delay:
            await anyio.sleep(delay)
        return LMResponse(fields={"answer": text}, usage=USAGE, model="m")

    return imp.StaticLM(handler, model="m")


@pytest.fixture(autouse=True)
def quiet_logging() -> Iterator[None]:
    reset_logging()
    yield
    reset_logging()


async def test_a_predict_call_brackets_its_model_events_in_order() -> None:
    events: list[Event] = []
    prediction = await imp.call(
        imp.predict("question -> answer", lm=answering(0.02)), question="q", on_event=events.append
    )
    assert prediction.answer == "ok"
    assert [e.kind for e in events] == ["run_started", "model_request", "model_response", "run_finished"]
    assert [e.seq for e in events] == [1, 2, 3, 4]
    assert len({e.call_id for e in events}) == 1 and events[0].parent_id is None
    assert all(isinstance(e.at, float) for e in events) and events[0].at <= events[-1].at
    request, response = events[1].payload, events[2].payload
    assert request == {"model": "scripted:m", "messages": 2}
    assert response["model"] == "scripted:m" and response["finish_reason"] == "stop"
    assert response["usage"]["input_tokens"] == 11 and response["usage"]["output_tokens"] == 3
    assert 0.015 <= response["duration"] < 1.0
    dumped = events[2].dump()
    assert dumped["kind"] == "model_response" and dumped["seq"] == 3 and dumped["usage"]["requests"] == 1


async def test_a_failing_model_request_is_a_model_error_event() -> None:
    def fail(messages: list[dict[str, Any]], options: dict[str, Any]) -> Any:
        raise LMError("the provider said no", provider="scripted", status=503, retryable=True)

    events: list[Event] = []
    with pytest.raises(LMError):
        await imp.call(imp.predict("question -> answer", lm=imp.StaticLM(fail)), question="q", on_event=events.append)
    assert [e.kind for e in events] == ["run_started", "model_request", "model_error", "run_failed"]
    error = events[2].payload
    assert error["status"] == 503 and error["retryable"] is True and "said no" in error["error"]
    assert error["duration"] >= 0


async def test_a_nested_call_names_its_parent() -> None:
    inner = imp.predict("question -> answer", lm=answering())

    class Outer(imp.Program):
        signature = inner.signature

        async def acall(self, inputs: dict[str, Any], **options: Any) -> imp.Prediction:
            return await imp.call(inner, inputs)

    events: list[Event] = []
    await imp.call(Outer(), question="q", on_event=events.append)
    outer_id = events[0].call_id
    nested = [e for e in events if e.call_id != outer_id]
    assert [e.kind for e in nested] == ["run_started", "model_request", "model_response", "run_finished"]
    assert {e.parent_id for e in nested} == {outer_id}
    assert [e.seq for e in nested] == [1, 2, 3, 4]  # numbered per call


async def test_react_model_events_carry_usage_duration_and_step() -> None:
    @imp.tool
    def look(query: str) -> str:
        """Look something up."""
        return "42"

    lm = imp.ScriptedLM(
        [
            {"tool_calls": [{"name": "look", "arguments": {"query": "q"}}]},
            "42",
        ]
    )
    events: list[Event] = []
    await imp.call(imp.react("question -> answer", [look], lm=lm), question="q", on_event=events.append)
    assert [e.kind for e in events].count("model_request") == 2
    response = next(e for e in events if e.kind == "model_response").payload
    assert response["step"] == 1 and response["forced"] is False
    assert response["tool_calls"] == ["look"] and "usage" in response and response["duration"] >= 0
    assert response["model"] == "scripted:scripted"


async def test_a_raising_sink_is_reported_once_and_keeps_receiving(caplog: pytest.LogCaptureFixture) -> None:
    seen: list[str] = []

    def broken(event: Event) -> None:
        seen.append(event.kind)
        raise RuntimeError("the collector is down")

    caplog.set_level(logging.WARNING, logger="imp")
    program = imp.predict("question -> answer", lm=answering())
    prediction = await imp.call(program, question="q", on_event=broken)
    assert prediction.answer == "ok"
    assert seen == ["run_started", "model_request", "model_response", "run_finished"]
    failures: list[Any] = [r.msg for r in caplog.records if r.name == "imp" and isinstance(r.msg, dict)]
    assert len(failures) == 1
    assert failures[0]["event"] == "event_sink_failed" and "collector is down" in failures[0]["error"]


async def test_an_async_sink_passed_directly_is_reported_not_left_unawaited(caplog: pytest.LogCaptureFixture) -> None:
    async def sink(event: Event) -> None:
        raise AssertionError("never awaited")

    caplog.set_level(logging.WARNING, logger="imp")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # "coroutine was never awaited" would be a RuntimeWarning
        await imp.call(imp.predict("question -> answer", lm=answering()), question="q", on_event=sink)
    (message,) = [r.msg for r in caplog.records if r.name == "imp"]
    assert isinstance(message, dict) and "buffered_sink" in message["error"]


async def test_a_buffered_slow_sink_never_slows_the_program() -> None:
    received: list[str] = []
    release = anyio.Event()  # the sink cannot finish any event until the call has returned

    async def slow(event: Event) -> None:
        await release.wait()
        received.append(event.kind)

    program = imp.predict("question -> answer", lm=answering())
    async with buffered_sink(slow, max_queue=100) as sink:
        with anyio.fail_after(10):  # were the sink's work on the call's path, the call would wait forever
            await imp.call(program, question="q", on_event=sink)
        # The call returned while the sink was still stuck on its first event: none of the sink's
        # work is on the call's path (counted, not timed).
        assert received == [] and sink.delivered == 0
        release.set()
    assert received == ["run_started", "model_request", "model_response", "run_finished"]
    assert (sink.delivered, sink.dropped, sink.failed) == (4, 0, 0)


async def test_a_full_queue_drops_and_counts() -> None:
    def blocking(event: Event) -> None:
        pass

    program = imp.predict("question -> answer", lm=answering())
    async with buffered_sink(blocking, max_queue=2) as sink:
        await imp.call(program, question="q", on_event=sink)  # four events, no checkpoint lets the drain run
    assert sink.delivered + sink.dropped == 4 and sink.dropped >= 1
    sink(Event(1, "c", None, "late", 0.0, {}))  # after the block: dropped, never raised
    assert sink.dropped >= 2


async def test_a_raising_buffered_sink_is_counted_and_keeps_receiving(caplog: pytest.LogCaptureFixture) -> None:
    async def broken(event: Event) -> None:
        raise ValueError("nope")

    caplog.set_level(logging.WARNING, logger="imp")
    async with buffered_sink(broken) as sink:
        await imp.call(imp.predict("question -> answer", lm=answering()), question="q", on_event=sink)
    assert (sink.delivered, sink.failed) == (0, 4)
    assert len([r for r in caplog.records if r.name == "imp"]) == 1


async def test_the_drain_timeout_bounds_the_end_of_the_block() -> None:
    async def stuck(event: Event) -> None:
        await anyio.sleep(10)

    with anyio.fail_after(5):  # the stuck sink would hold the block 10 s: "did not wait for it", not a speed claim
        async with buffered_sink(stuck, drain_timeout=0.1) as sink:
            for n in range(3):
                sink(Event(n, "c", None, "x", 0.0, {}))
    assert sink.delivered == 0 and sink.dropped == 2  # one was being delivered when the block ended


@pytest.mark.parametrize("error", [LMError("the provider failed", status=500), KeyboardInterrupt()])
def test_an_error_inside_a_buffered_sink_block_surfaces_as_itself(run: Any, error: BaseException) -> None:
    """Not wrapped in an exception group by the sink's task group, under asyncio or trio."""
    received: list[str] = []

    async def body() -> None:
        async with buffered_sink(lambda e: received.append(e.kind)) as sink:
            await imp.call(imp.predict("question -> answer", lm=answering()), question="q", on_event=sink)
            raise error

    with pytest.raises(type(error)) as caught:
        run(body)
    assert caught.value is error
    # what was queued when the block failed may be dropped, but nothing is delivered out of order
    assert received == ["run_started", "model_request", "model_response", "run_finished"][: len(received)]


def test_buffered_sink_under_trio() -> None:
    received: list[str] = []

    async def main() -> None:
        async with buffered_sink(lambda e: received.append(e.kind)) as sink:
            await imp.call(imp.predict("question -> answer", lm=answering(0.01)), question="q", on_event=sink)

    anyio.run(main, backend="trio")
    assert received == ["run_started", "model_request", "model_response", "run_finished"]


def test_max_queue_must_be_positive() -> None:
    async def main() -> None:
        async with buffered_sink(print, max_queue=0):
            pass

    with pytest.raises(ValueError, match="max_queue"):
        anyio.run(main)


# --- logging ---------------------------------------------------------------------------


async def test_nothing_is_printed_or_built_until_logging_is_configured(capsys: pytest.CaptureFixture[str]) -> None:
    program = imp.predict("question -> answer", lm=answering())
    await imp.call(program, question="q")
    with run_scope() as run:
        assert run.on_event is None  # no sink and the imp logger off: no event is even built
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err == ""


async def test_json_logs_show_model_calls_with_usage_and_duration() -> None:
    stream = io.StringIO()
    configure_logging(json=True, stream=stream)
    await imp.call(imp.predict("question -> answer", lm=answering()), question="q")
    lines = [json.loads(line) for line in stream.getvalue().splitlines()]
    assert [line["event"] for line in lines] == ["run_started", "model_response", "run_finished"]  # INFO
    response = lines[1]
    assert response["logger"] == "imp" and response["level"] == "info"
    assert response["usage"]["input_tokens"] == 11 and response["duration"] >= 0
    assert response["model"] == "scripted:m" and response["seq"] == 3 and response["call_id"] == lines[0]["call_id"]
    assert "timestamp" in response and response["parent_id"] is None


async def test_debug_logs_add_requests_and_console_output_is_text() -> None:
    stream = io.StringIO()
    configure_logging(json=False, level=logging.DEBUG, stream=stream)
    events: list[Event] = []
    await imp.call(imp.predict("question -> answer", lm=answering()), question="q", on_event=events.append)
    text = stream.getvalue()
    assert len(text.splitlines()) == 4 and "model_request" in text and "usage=" in text
    assert len(events) == 4  # the sink and the log both see every event


async def test_configure_logging_replaces_its_handler_and_reset_silences() -> None:
    first, second = io.StringIO(), io.StringIO()
    configure_logging(json=True, stream=first)
    configure_logging(json=True, stream=second)
    await imp.call(imp.predict("question -> answer", lm=answering()), question="q")
    assert first.getvalue() == "" and second.getvalue().count("\n") == 3
    reset_logging()
    with run_scope() as run:
        assert run.on_event is None


async def test_a_secret_never_reaches_a_sink_or_a_log_line() -> None:
    stream = io.StringIO()
    configure_logging(json=True, level="DEBUG", stream=stream)
    events: list[Event] = []
    with run_scope(on_event=events.append):
        emit(
            "tool_call",
            arguments={"api_key": "plain-value-1", "headers": {"Authorization": "Bearer abcdefghijklmnop"}},
            note=f"use {KEY} or {JWT} or password=hunter2hunter2",
            token="tok-123456",
        )
    text = json.dumps(events[0].dump()) + stream.getvalue()
    for secret in ("plain-value-1", "abcdefghijklmnop", KEY, JWT, "hunter2hunter2", "tok-123456"):
        assert secret not in text
    assert events[0].payload["arguments"]["api_key"] == "[REDACTED]"


async def test_an_oversized_event_is_cut_and_says_so() -> None:
    events: list[Event] = []
    big = "x" * (MAX_EVENT_BYTES * 2)
    with run_scope(on_event=events.append):
        emit("tool_result", output=big, rows=list(range(5000)), tool_name="search")
        emit("tool_result", output="small")
    cut, small = events[0].payload, events[1].payload
    assert cut["truncated"] is True and cut["original_size"] > MAX_EVENT_BYTES * 2
    assert cut["tool_name"] == "search" and cut["output"].startswith("xxx") and "more characters" in cut["output"]
    assert len(json.dumps(cut)) <= MAX_EVENT_BYTES
    assert "truncated" not in small


def test_bound_payload_falls_back_to_a_preview() -> None:
    wide = {f"k{i}": "y" * 1000 for i in range(200)}
    cut = bound_payload(wide)
    assert cut["truncated"] is True and len(json.dumps(cut)) <= MAX_EVENT_BYTES
    circular: dict[str, Any] = {}
    circular["self"] = circular
    assert bound_payload(circular)["truncated"] is True


async def test_emit_outside_a_run_does_nothing() -> None:
    assert current_run() is None
    emit("model_request", messages=1)


async def test_payload_keys_that_collide_with_log_keys_are_renamed() -> None:
    stream = io.StringIO()
    configure_logging(json=True, level="DEBUG", stream=stream)
    events: list[Event] = []
    with run_scope(on_event=events.append):
        emit("custom", seq=99, call_id="mine", event="x", level="high")
    (line,) = [json.loads(x) for x in stream.getvalue().splitlines()]
    assert line["event"] == "custom" and line["seq"] == 1 and line["call_id"] != "mine"
    assert line["payload_seq"] == 99 and line["payload_call_id"] == "mine" and line["payload_level"] == "high"
    assert events[0].payload["seq"] == 99  # the sink gets the payload as emitted


async def test_a_broken_log_handler_never_breaks_the_program() -> None:
    class Broken(io.StringIO):
        def write(self, text: str) -> int:
            raise OSError("disk full")

    configure_logging(json=True, stream=Broken())
    logging.raiseExceptions = False  # stdlib's own handleError would print a traceback to stderr
    try:
        prediction = await imp.call(imp.predict("question -> answer", lm=answering()), question="q")
    finally:
        logging.raiseExceptions = True
    assert prediction.answer == "ok"


def test_a_value_that_cannot_be_shown_is_still_an_event() -> None:
    class Unprintable:
        def __repr__(self) -> str:
            raise RuntimeError("no")

        __str__ = __repr__

    cut = bound_payload({"thing": Unprintable()})
    assert cut["truncated"] is True and "cannot be shown" in cut["preview"]
