"""imp.stream: react's tool calls and results, cancellation that stops everything, typed errors."""

from __future__ import annotations

import contextlib
import gc
from typing import Any

import anyio
import pytest
from imp_backends import both_backends
from stream_lms import ChunkedLM, scripted

import imp

LOOKUP = {"tool_calls": [{"name": "lookup", "arguments": {"key": "a"}}], "next_thought": "look it up"}
ANSWER = {"answer": "the value is 1", "tool_calls": []}


@imp.tool
def lookup(key: str) -> dict[str, Any]:
    """Look a key up."""
    return {"key": key, "value": 1}


@both_backends
async def test_react_streams_each_tool_call_and_result_then_imp_calls_prediction() -> None:
    program = imp.react("question -> answer", [lookup])
    expected = await imp.call(program.with_lm(scripted(LOOKUP, ANSWER)), question="q")
    parts = [p async for p in imp.stream(program.with_lm(ChunkedLM(scripted(LOOKUP, ANSWER), 4)), question="q")]
    kinds = [p.kind for p in parts if p.kind != "field"]
    assert kinds == ["tool_call", "tool_result", "final"]
    call, result, final = (p for p in parts if p.kind != "field")
    assert (call.tool_name, call.arguments) == ("lookup", {"key": "a"})
    assert result.tool_call_id == call.tool_call_id and result.output == {"key": "a", "value": 1}
    assert result.outcome == "result"
    assert final.prediction is not None
    assert final.prediction.fields == expected.fields
    assert final.prediction.metadata.history == expected.metadata.history
    assert final.prediction.metadata.termination_reason == expected.metadata.termination_reason


async def test_a_failing_tool_streams_its_error() -> None:
    @imp.tool
    def broken(key: str) -> str:
        """Fails."""
        raise ValueError("no such key")

    step = {"tool_calls": [{"name": "broken", "arguments": {"key": "a"}}]}
    program = imp.react("question -> answer", [broken], lm=ChunkedLM(scripted(step, ANSWER)))
    parts = [p async for p in imp.stream(program, question="q")]
    (result,) = (p for p in parts if p.kind == "tool_result")
    assert result.error and "no such key" in result.error and result.outcome != "result"


@both_backends
async def test_leaving_the_loop_cancels_the_lm_stream() -> None:
    lm = ChunkedLM(scripted("[[ ## answer ## ]]\n" + "word " * 200), 5, delay=0.01)
    async with contextlib.aclosing(imp.stream(imp.predict("question -> answer", lm=lm), question="q")) as parts:
        async for part in parts:
            if part.kind == "field":
                break
    assert lm.closed == 1


async def test_a_break_without_aclosing_cancels_the_run_too() -> None:
    lm = ChunkedLM(scripted("[[ ## answer ## ]]\n" + "word " * 200), 5, delay=0.01)
    async for part in imp.stream(imp.predict("question -> answer", lm=lm), question="q"):
        if part.kind == "field":
            break
    gc.collect()
    with anyio.fail_after(2):
        while lm.closed == 0:  # noqa: ASYNC110 - asyncio's finalizer closes the generator soon
            await anyio.sleep(0.01)
    await anyio.sleep(0.1)
    assert lm.closed == 1 and lm.streams == 1


async def test_a_reader_cancelled_outside_the_stream_cancels_the_run() -> None:
    # FastAPI's SSE producer: it pulls a part, is cancelled while handing it on (not inside the
    # generator), and the generator stays referenced and unclosed; the LM stream must still end.
    lm = ChunkedLM(scripted("[[ ## answer ## ]]\n" + "word " * 400), 5, delay=0.01)
    parts = imp.stream(imp.predict("question -> answer", lm=lm), question="q")
    got_one = anyio.Event()

    async def read() -> None:
        async for _ in parts:
            got_one.set()
            await anyio.sleep(30)  # cancelled here, outside the generator

    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(read)
            await got_one.wait()
            tg.cancel_scope.cancel()
        while lm.closed == 0:  # noqa: ASYNC110 - the run's task is cancelled from a callback
            await anyio.sleep(0.01)
    assert lm.closed == 1 and lm.streams == 1
    with anyio.fail_after(2), pytest.raises(RuntimeError, match=r"start a new imp\.stream"):
        await anext(parts)  # read again later: told so, never left waiting


async def test_a_stream_handed_to_another_task_keeps_running() -> None:
    lm = ChunkedLM(scripted("[[ ## answer ## ]]\n" + "word " * 20), 5, delay=0.01)
    parts = imp.stream(imp.predict("question -> answer", lm=lm), question="q")

    async def first() -> str:
        part = await anext(parts)
        return part.kind

    async with anyio.create_task_group() as tg:  # the first reader's task ends here
        tg.start_soon(first)
    with anyio.fail_after(5):
        rest = [p async for p in parts]
    assert rest[-1].kind == "final" and rest[-1].prediction is not None
    assert rest[-1].prediction.answer.startswith("word") and lm.closed == 0


@both_backends
async def test_cancelling_the_reader_cancels_the_running_tool() -> None:
    started, cancelled = anyio.Event(), []

    @imp.tool
    async def slow(key: str) -> str:
        """Takes long."""
        started.set()
        try:
            await anyio.sleep(30)
        except BaseException:
            cancelled.append(key)
            raise
        return "late"

    step = {"tool_calls": [{"name": "slow", "arguments": {"key": "a"}}]}
    program = imp.react("question -> answer", [slow], lm=ChunkedLM(scripted(step, ANSWER)))
    seen: list[str] = []

    async def read() -> None:
        async for part in imp.stream(program, question="q"):
            seen.append(part.kind)

    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(read)
            await started.wait()
            tg.cancel_scope.cancel()
    assert cancelled == ["a"] and seen == ["tool_call"]


@both_backends
async def test_an_lm_error_is_raised_from_the_iterator_typed() -> None:
    lm = ChunkedLM(scripted(imp.RateLimited("slow down", status=429, provider="chunked")))
    with pytest.raises(imp.RateLimited, match="slow down"):
        async for _ in imp.stream(imp.predict("question -> answer", lm=lm), question="q"):
            pass


async def test_a_parse_error_is_raised_as_imp_call_raises_it() -> None:
    program = imp.predict("question -> answer", json_fallback=False)
    with pytest.raises(imp.AdapterParseError) as from_call:
        await imp.call(program.with_lm(scripted("nothing")), question="q")
    with pytest.raises(imp.AdapterParseError) as from_stream:
        async for _ in imp.stream(program.with_lm(ChunkedLM(scripted("nothing"))), question="q"):
            pass
    assert str(from_stream.value) == str(from_call.value)


@both_backends
async def test_a_deadline_ends_the_stream_with_deadline_exceeded() -> None:
    lm = ChunkedLM(scripted("[[ ## answer ## ]]\n" + "word " * 200), 5, delay=0.01)
    parts: list[str] = []
    with pytest.raises(imp.DeadlineExceeded), imp.deadline(0.4):
        async for part in imp.stream(imp.predict("question -> answer", lm=lm), question="q"):
            parts.append(part.kind)
    assert "field" in parts and "final" not in parts and lm.closed == 1


async def test_bad_arguments_are_refused_before_anything_runs() -> None:
    with pytest.raises(TypeError, match=r"imp\.stream runs an imp program"):
        async for _ in imp.stream("not a program"):  # type: ignore[arg-type]
            pass
    lm = ChunkedLM(scripted("x"))
    with pytest.raises(imp.MissingInputError):
        async for _ in imp.stream(imp.predict("question -> answer", lm=lm)):
            pass
    assert lm.streams == 0


@both_backends
async def test_the_deadline_option_ends_the_run_like_a_deadline_block() -> None:
    lm = ChunkedLM(scripted("[[ ## answer ## ]]\n" + "word " * 200), 5, delay=0.01)
    parts: list[str] = []
    with pytest.raises(imp.DeadlineExceeded):
        async for part in imp.stream(imp.predict("question -> answer", lm=lm), question="q", deadline=0.4):
            parts.append(part.kind)
    assert "field" in parts and "final" not in parts and lm.closed == 1


async def test_a_plain_text_answer_of_a_react_turn_streams_as_its_text_field() -> None:
    program = imp.react("question -> answer", [lookup], lm=ChunkedLM(scripted(LOOKUP, ANSWER), 4))
    parts = [p async for p in imp.stream(program, question="q")]
    kinds = [p.kind for p in parts]
    last_tool = kinds.index("tool_result")
    after = "".join(p.delta for p in parts[last_tool:] if p.kind == "field" and p.field == "answer")
    assert after == "the value is 1" == parts[-1].prediction.answer  # type: ignore[union-attr]
    # the step's thought, written beside its tool call, streams before the call
    before = "".join(p.delta for p in parts[:last_tool] if p.kind == "field")
    assert before == "look it up"


async def test_a_program_a_tool_calls_is_not_streamed_into_the_outer_stream() -> None:
    inner = imp.predict("text -> summary", lm=ChunkedLM(scripted("[[ ## summary ## ]]\ninner words"), 2))

    @imp.tool
    async def summarize(text: str) -> str:
        """Summarize with another program."""
        return (await imp.call(inner, text=text)).summary

    step = {"tool_calls": [{"name": "summarize", "arguments": {"text": "long"}}]}
    program = imp.react("question -> answer", [summarize], lm=ChunkedLM(scripted(step, ANSWER), 4))
    parts = [p async for p in imp.stream(program, question="q")]
    assert [p.kind for p in parts if p.kind != "field"] == ["tool_call", "tool_result", "final"]
    assert {p.field for p in parts if p.kind == "field"} == {"answer"}
    assert all("inner" not in p.delta for p in parts)
    (result,) = (p for p in parts if p.kind == "tool_result")
    assert result.output == "inner words"
