"""Every termination reason and cause, the last request's fallbacks, and the per-call options."""

from typing import Any

import anyio
import anyio.lowlevel
import pytest
from react_fixtures import escalation, on_call, page, results, script

import imp

TICKET = "We were charged twice this month."
SUBMIT_ATLAS = {"tool_calls": [{"name": "submit", "arguments": {"team": "atlas", "contact": "Maya"}}]}
ON_CALL_ATLAS = {"tool_calls": [{"name": "on_call", "arguments": {"team": "atlas"}}]}


def overflow() -> imp.LMError:
    return imp.LMError("maximum context length exceeded", status=400, context_window_exceeded=True)


async def test_parse_error_interrupts_and_the_forced_submit_answers() -> None:
    lm = script(['{"team": "atlas"}', SUBMIT_ATLAS])
    prediction = await imp.call(imp.react(escalation, [on_call], lm=lm), ticket=TICKET)
    assert (prediction.metadata.termination_reason, prediction.metadata.termination_cause) == (
        "forced_submit",
        "parse_error",
    )
    assert prediction.contact == "Maya"


async def test_prediction_error_interrupts() -> None:
    lm = script([imp.LMError("upstream broke", status=500), SUBMIT_ATLAS])
    prediction = await imp.call(imp.react(escalation, [on_call], lm=lm), ticket=TICKET)
    assert (prediction.metadata.termination_reason, prediction.metadata.termination_cause) == (
        "forced_submit",
        "prediction_error",
    )


async def test_a_failed_last_request_raises_with_the_history() -> None:
    lm = script([ON_CALL_ATLAS, imp.LMError("upstream broke", status=500)])
    with pytest.raises(imp.ReActStepError) as info:
        await imp.call(imp.react(escalation, [on_call], lm=lm, max_iters=1), ticket=TICKET)
    history = info.value.history
    assert [r.result for step in history for r in step["tool_call_results"]] == ["Maya"]
    assert isinstance(info.value.cause, imp.LMError) and info.value.cause.status == 500


async def test_an_empty_step_under_text_mode_is_not_an_answer() -> None:
    lm = script([{"tool_calls": []}])
    prediction = await imp.call(imp.react("ticket -> reply", [on_call], lm=lm), ticket=TICKET)
    assert prediction.reply is None and not prediction.complete
    assert (prediction.metadata.termination_reason, prediction.metadata.termination_cause) == (
        "incomplete",
        "empty_tool_calls",
    )
    assert len(lm.requests) == 2, "a step that says nothing interrupts the turn; the last request follows"


async def test_an_empty_step_under_text_mode_then_a_last_text() -> None:
    lm = script([{"tool_calls": []}, {"reply": "Maya.", "tool_calls": []}])
    prediction = await imp.call(imp.react("ticket -> reply", [on_call], lm=lm), ticket=TICKET)
    assert (prediction.reply, prediction.metadata.termination_reason, prediction.complete) == (
        "Maya.",
        "last_text",
        True,
    )
    assert prediction.metadata.termination_cause == "empty_tool_calls"


async def test_max_iters_zero_without_a_note_makes_exactly_one_request() -> None:
    lm = script([{"reply": "Hello.", "tool_calls": [{"name": "on_call", "arguments": {"team": "atlas"}}]}])
    prediction = await imp.call(imp.react("ticket -> reply", [on_call], lm=lm), ticket=TICKET, max_iters=0)
    assert len(lm.requests) == 1
    assert (prediction.reply, prediction.metadata.termination_reason, prediction.metadata.termination_cause) == (
        "Hello.",
        "last_text",
        "max_iters",
    )
    assert [c.name for c in prediction.metadata.unexecuted_tool_calls] == ["on_call"]
    assert results(prediction) == []


async def test_last_request_note_goes_last_and_stays_in_the_history() -> None:
    lm = script([ON_CALL_ATLAS, SUBMIT_ATLAS])
    program = imp.react(escalation, [on_call], lm=lm, max_iters=1, last_request_note="Answer now.")
    prediction = await imp.call(program, ticket=TICKET)
    assert lm.requests[1].messages[-1] == {"role": "user", "content": "Answer now."}
    assert prediction.metadata.history[1]["last_request_note"] == "Answer now."


async def test_invalid_submit_values_are_that_calls_error_and_the_loop_goes_on() -> None:
    lm = script(
        [
            {"tool_calls": [{"name": "submit", "arguments": {"team": "finance", "contact": "Maya"}}]},
            {"tool_calls": [{"name": "submit", "arguments": {"team": "atlas"}}]},
            SUBMIT_ATLAS,
        ]
    )
    prediction = await imp.call(imp.react(escalation, [on_call], lm=lm), ticket=TICKET)
    assert prediction.metadata.termination_reason == "submit"
    errors = [r.error for step in prediction.metadata.history for r in step["tool_call_results"] if r.error]
    assert len(errors) == 2
    assert "team" in errors[0]
    tool_messages = [m for m in lm.requests[2].messages if m["role"] == "tool"]
    assert all(m["content"].startswith("Error: ") for m in tool_messages)


async def test_submit_is_reserved() -> None:
    with pytest.raises(ValueError, match="reserved"):
        imp.react(escalation, [imp.Tool("submit", "x", {}, lambda: None, internal=True)])


async def test_named_tool_choice_refused_then_required_with_submit_alone() -> None:
    refusal = imp.LMError(
        "tool_choice: only `auto` is supported", status=400, provider="openrouter", tool_choice_unsupported=True
    )
    lm = script([ON_CALL_ATLAS, refusal, SUBMIT_ATLAS])
    prediction = await imp.call(imp.react(escalation, [on_call], lm=lm, max_iters=1), ticket=TICKET)
    assert prediction.metadata.termination_reason == "forced_submit"
    retry = lm.requests[2].options
    assert retry["tool_choice"] == "required"
    assert [t["function"]["name"] for t in retry["tools"]] == ["submit"]


async def test_then_the_extractor_reads_the_history() -> None:
    refusal = imp.LMError("tool_choice must be auto", status=400, tool_choice_unsupported=True)
    extracted = "[[ ## reasoning ## ]]\nThe tool said Maya.\n\n[[ ## team ## ]]\natlas\n\n[[ ## contact ## ]]\nMaya"
    lm = script([ON_CALL_ATLAS, refusal, refusal, extracted])
    prediction = await imp.call(imp.react(escalation, [on_call], lm=lm, max_iters=1), ticket=TICKET)
    assert (prediction.metadata.termination_reason, prediction.metadata.termination_cause) == ("extracted", "max_iters")
    assert prediction.fields == {"team": "atlas", "contact": "Maya"}
    last = prediction.metadata.history[-1]
    assert last["team"] == "atlas" and last["contact"] == "Maya" and not last["tool_calls"]
    extractor_request = lm.requests[3]
    assert "tools" not in extractor_request.options
    assert "called on_call" in extractor_request.messages[-1]["content"]
    assert "Maya" in extractor_request.messages[-1]["content"]


async def test_a_forced_reply_without_submit_goes_to_the_extractor() -> None:
    lm = script([ON_CALL_ATLAS, "I think it is atlas.", {"reasoning": "r", "team": "atlas", "contact": "Maya"}])
    prediction = await imp.call(imp.react(escalation, [on_call], lm=lm, max_iters=1), ticket=TICKET)
    assert prediction.metadata.termination_reason == "extracted"


async def test_the_forced_request_shows_a_trailing_thought_on_the_user_side() -> None:
    lm = script([{"next_thought": "team: atlas", "tool_calls": []}, SUBMIT_ATLAS])
    prediction = await imp.call(imp.react(escalation, [on_call], lm=lm), ticket=TICKET)
    assert (prediction.metadata.termination_reason, prediction.metadata.termination_cause) == (
        "forced_submit",
        "empty_tool_calls",
    )
    forced = lm.requests[1].messages
    assert forced[-1]["role"] == "user"
    assert forced[-1]["content"].endswith("[[ ## next_thought ## ]]\nteam: atlas")
    assert not any(m["role"] == "assistant" and m["content"] == "team: atlas" for m in forced)
    assert prediction.metadata.history[0]["next_thought"] == "team: atlas"


async def test_a_tool_call_written_as_json_text_is_executed() -> None:
    lm = script(['{"tool": "on_call", "args": {"team": "atlas"}}', SUBMIT_ATLAS])
    prediction = await imp.call(imp.react(escalation, [on_call], lm=lm), ticket=TICKET)
    assert results(prediction) == ["Maya", {"team": "atlas", "contact": "Maya"}]
    text_lm = script(['```json\n{"name": "on_call", "arguments": {"team": "quill"}}\n```', "Raj is on call."])
    reply = await imp.call(imp.react("ticket -> reply", [on_call], lm=text_lm), ticket=TICKET)
    assert results(reply) == ["Raj"] and reply.reply == "Raj is on call."


async def test_finish_on_first_in_call_order_wins_and_submit_outranks_it() -> None:
    def finish(args: dict[str, Any], contact: str, inputs: dict[str, Any]) -> imp.Finish:
        return imp.Finish({"team": args["team"], "contact": contact})

    two = {
        "tool_calls": [
            {"name": "on_call", "arguments": {"team": "harbor"}},
            {"name": "on_call", "arguments": {"team": "quill"}},
        ]
    }
    prediction = await imp.call(
        imp.react(escalation, [on_call], lm=script([two]), finish_on={"on_call": finish}), ticket="t"
    )
    assert prediction.contact == "Tom" and results(prediction) == ["Tom", "Raj"]
    with_submit = {"tool_calls": [*two["tool_calls"], SUBMIT_ATLAS["tool_calls"][0]]}
    prediction = await imp.call(
        imp.react(escalation, [on_call], lm=script([with_submit]), finish_on={"on_call": finish}), ticket="t"
    )
    assert (prediction.contact, prediction.metadata.termination_reason) == ("Maya", "submit")
    assert prediction.metadata.finished_by_tool is None


async def test_finish_on_continue_and_invalid_outputs() -> None:
    def maybe(args: dict[str, Any], contact: str, inputs: dict[str, Any]) -> Any:
        return imp.CONTINUE if args["team"] == "atlas" else imp.Finish({"team": "nope", "contact": contact})

    lm = script(
        [
            ON_CALL_ATLAS,
            {"tool_calls": [{"name": "on_call", "arguments": {"team": "quill"}}]},
            SUBMIT_ATLAS,
        ]
    )
    prediction = await imp.call(imp.react(escalation, [on_call], lm=lm, finish_on={"on_call": maybe}), ticket="t")
    assert prediction.metadata.termination_reason == "submit"
    second = prediction.metadata.history[1]["tool_call_results"][0]
    assert second.error is not None and "team" in second.error


# --- finish="tools" ------------------------------------------------------------------------


def _send(text: str) -> str:
    return f"sent: {text}"


send = imp.tool(_send, name="send", description="Send the reply.")


def sent(args: dict[str, Any], result: str, inputs: dict[str, Any]) -> imp.Finish:
    return imp.Finish({"reply": args["text"]})


async def test_finish_tools_ends_only_through_a_finishing_tool() -> None:
    lm = script(
        [
            {"next_thought": "I should page someone.", "tool_calls": []},
            {"tool_calls": [{"name": "send", "arguments": {"text": "Maya is on it."}}]},
        ]
    )
    program = imp.react("ticket -> reply", [on_call, send], lm=lm, finish="tools", finish_on={"send": sent})
    prediction = await imp.call(program, ticket=TICKET)
    assert (prediction.reply, prediction.metadata.termination_reason) == ("Maya is on it.", "finished_by_tool")
    assert lm.requests[1].messages[-1]["content"] == (
        "Your message above was not sent. To end the turn, call `send`; to keep working, call a tool."
    )
    assert [t["function"]["name"] for t in lm.requests[0].options["tools"]] == ["on_call", "send"]


async def test_finish_tools_never_forces_and_ends_incomplete() -> None:
    lm = script([{"next_thought": "hmm", "tool_calls": []}, {"next_thought": "hmm again", "tool_calls": []}, "extra"])
    program = imp.react(
        "ticket -> reply", [send], lm=lm, finish="tools", finish_on={"send": sent}, unsent_note="Nothing was sent yet."
    )
    prediction = await imp.call(program, ticket=TICKET)
    assert (prediction.metadata.termination_reason, prediction.metadata.termination_cause) == (
        "incomplete",
        "empty_tool_calls",
    )
    assert len(lm.requests) == 2
    assert lm.requests[1].messages[-1]["content"] == "Nothing was sent yet."
    assert not prediction.complete and prediction.reply is None


async def test_finish_tools_gives_a_failed_request_one_more_step() -> None:
    lm = script([imp.LMError("blip", status=500), {"tool_calls": [{"name": "send", "arguments": {"text": "ok"}}]}])
    program = imp.react("ticket -> reply", [send], lm=lm, finish="tools", finish_on={"send": sent})
    assert (await imp.call(program, ticket="t")).reply == "ok"
    lm = script([imp.LMError("blip", status=500), imp.LMError("blip", status=500), "never"])
    prediction = await imp.call(
        imp.react("ticket -> reply", [send], lm=lm, finish="tools", finish_on={"send": sent}), ticket="t"
    )
    assert (prediction.metadata.termination_reason, prediction.metadata.termination_cause) == (
        "incomplete",
        "prediction_error",
    )
    assert prediction.metadata.termination_error and "blip" in prediction.metadata.termination_error[-1]
    assert len(lm.requests) == 2


def test_finish_tools_needs_a_finishing_tool() -> None:
    with pytest.raises(ValueError, match="finish_on"):
        imp.react("ticket -> reply", [send], finish="tools")


async def test_max_iters_under_finish_tools_makes_no_last_request() -> None:
    lm = script([{"tool_calls": [{"name": "on_call", "arguments": {"team": "atlas"}}]}, "never"])
    program = imp.react(
        "ticket -> reply", [on_call, send], lm=lm, finish="tools", finish_on={"send": sent}, max_iters=1
    )
    prediction = await imp.call(program, ticket="t")
    assert (prediction.metadata.termination_reason, prediction.metadata.termination_cause) == (
        "incomplete",
        "max_iters",
    )
    assert len(lm.requests) == 1


async def test_a_call_can_give_its_own_finish() -> None:
    lm = script([{"reply": "Summary.", "tool_calls": []}])
    program = imp.react("ticket -> reply", [send], lm=lm, finish="tools", finish_on={"send": sent})
    prediction = await imp.call(program, ticket="t", finish="auto", max_iters=0, last_request_note="Summarise.")
    assert (prediction.reply, prediction.metadata.termination_reason) == ("Summary.", "last_text")


# --- replay ------------------------------------------------------------------------------


async def test_a_plain_text_loop_replaying_a_submit_history_says_only_not_sent() -> None:
    lm = script(
        [
            {"next_thought": "Checking.", "tool_calls": []},
            ON_CALL_ATLAS,
            {"tool_calls": [{"name": "submit", "arguments": {"reply": "Maya."}}]},
        ]
    )
    first = await imp.call(imp.react("ticket -> reply", [on_call], lm=lm, finish="submit"), ticket=TICKET)
    lm2 = script(["Done."])
    await imp.call(imp.react("ticket -> reply", [on_call], lm=lm2), ticket="again", history=first.metadata.history)
    notes = [m["content"] for m in lm2.requests[0].messages if m["role"] == "user" and "not sent" in m["content"]]
    assert notes == ["Your message above was not sent."]


async def test_history_replay_actions_drops_earlier_narration() -> None:
    lm = script(
        [
            {
                "next_thought": "Thinking about money.",
                "tool_calls": [{"name": "on_call", "arguments": {"team": "atlas"}}],
            },
            SUBMIT_ATLAS,
            {"next_thought": "Now harbor.", "tool_calls": [{"name": "on_call", "arguments": {"team": "harbor"}}]},
            {"tool_calls": [{"name": "submit", "arguments": {"team": "harbor", "contact": "Tom"}}]},
        ]
    )
    program = imp.react(escalation, [on_call], lm=lm, history_replay="actions")
    first = await imp.call(program, ticket=TICKET)
    second = await imp.call(program, ticket="The deploy is stuck.", history=first.metadata.history)
    later = lm.requests[3].messages
    assert not any(m.get("content") == "Thinking about money." for m in later)
    assert any(m.get("content") == "Now harbor." for m in later)
    assert any(m["role"] == "tool" and m["content"] == "Maya" for m in later)
    assert second.metadata.history[0]["next_thought"] == "Thinking about money."


# --- context window ----------------------------------------------------------------------


def _episodes(n: int) -> imp.History:
    turns = []
    for i in range(n):
        turns.append(
            {
                "ticket": f"ticket {i}",
                "tool_calls": [imp.ToolCall(f"c{i}", "on_call", {"team": "atlas"})],
                "tool_call_results": [imp.ToolResult(f"c{i}", "on_call", "Maya")],
            }
        )
        turns.append(
            {
                "tool_calls": [imp.ToolCall(f"s{i}", "submit", {"team": "atlas", "contact": "Maya"})],
                "tool_call_results": [imp.ToolResult(f"s{i}", "submit", {"team": "atlas", "contact": "Maya"})],
                "team": "atlas",
                "contact": "Maya",
            }
        )
    return imp.History(turns)


async def test_context_window_refusals_leave_old_episodes_out() -> None:
    events: list[Any] = []
    lm = script([overflow(), overflow(), SUBMIT_ATLAS])
    history = _episodes(8)
    prediction = await imp.call(
        imp.react(escalation, [on_call], lm=lm), ticket="new", history=history, on_event=events.append
    )
    assert prediction.metadata.termination_reason == "submit"
    assert len(prediction.metadata.history) == 17  # nothing lost
    projection = prediction.metadata.context_projection
    assert projection == {
        "reason": "context_window_exceeded",
        "omitted_prior_entries": 12,
        "omitted_prior_groups": 6,
        "recovery_requests": 2,
    }
    sizes = [len(r.messages) for r in lm.requests]
    assert sizes[0] > sizes[1] > sizes[2]
    assert lm.requests[2].messages[-1]["content"] == "[[ ## ticket ## ]]\nnew"
    assert [e.kind for e in events].count("context_projected") == 2


async def test_when_even_the_current_turn_does_not_fit_the_turn_ends_at_once() -> None:
    lm = script([overflow()] * 12)
    prediction = await imp.call(imp.react(escalation, [on_call], lm=lm), ticket="new", history=_episodes(2))
    assert (prediction.metadata.termination_reason, prediction.metadata.termination_cause) == (
        "incomplete",
        "context_window_exceeded",
    )
    assert len(lm.requests) == 3  # the first, then one retry per remaining episode
    assert len(prediction.metadata.history) == 5  # nothing lost: the new inputs are recorded too
    assert prediction.metadata.history[-1]["ticket"] == "new"
    assert len(prediction.metadata.termination_error) == 3


# --- deadlines, concurrency, policy, authorization, events ------------------------------


async def test_a_deadline_returns_the_history_so_far() -> None:
    async def slow(team: str) -> str:
        await anyio.sleep(30)
        return team

    slow_tool = imp.tool(slow, name="slow", description="Takes forever.")
    lm = script([ON_CALL_ATLAS, {"tool_calls": [{"name": "slow", "arguments": {"team": "x"}}]}])
    start = anyio.current_time()
    with imp.deadline(0.3):
        prediction = await imp.call(imp.react(escalation, [on_call, slow_tool], lm=lm), ticket=TICKET)
    assert anyio.current_time() - start < 1.5
    assert (prediction.metadata.termination_reason, prediction.metadata.termination_cause) == (
        "incomplete",
        "deadline_exceeded",
    )
    assert results(prediction)[0] == "Maya"
    assert prediction.metadata.history[-1]["tool_call_results"][0].outcome == "unknown"


async def test_a_hanging_lm_under_a_deadline() -> None:
    async def hang(messages: Any, options: Any) -> str:
        await anyio.sleep(30)
        return "never"

    with imp.deadline(0.1):
        prediction = await imp.call(imp.react(escalation, [on_call], lm=imp.StaticLM(hang)), ticket=TICKET)
    assert prediction.metadata.termination_cause == "deadline_exceeded" and not prediction.complete


async def test_one_steps_calls_run_concurrently_in_call_order() -> None:
    running = 0
    all_in: anyio.Event | None = None

    async def wait(seconds: float) -> float:
        """Finish only once all eight calls of the step are running at once (counted, not timed)."""
        nonlocal running, all_in
        all_in = all_in or anyio.Event()
        running += 1
        if running == 8:
            all_in.set()
        with anyio.fail_after(10):
            await all_in.wait()
        await anyio.sleep(seconds)  # and finish out of call order
        return seconds

    waiter = imp.tool(wait, name="wait", description="Wait.")
    delays = [0.2, 0.05, 0.15, 0.1, 0.2, 0.01, 0.2, 0.12]
    lm = script(
        [
            {"tool_calls": [{"name": "wait", "arguments": {"seconds": d}} for d in delays]},
            {"reply": "done", "tool_calls": []},
        ]
    )
    prediction = await imp.call(imp.react("ticket -> reply", [waiter], lm=lm), ticket="t")
    assert running == 8 and results(prediction) == delays
    tool_ids = [m["tool_call_id"] for m in lm.requests[1].messages if m["role"] == "tool"]
    assert tool_ids == [f"call_1_{i}" for i in range(8)]


async def test_tool_policy_applies_to_submit_too() -> None:
    lm = script([SUBMIT_ATLAS, ON_CALL_ATLAS, SUBMIT_ATLAS])
    program = imp.react(escalation, [on_call], lm=lm, tool_policy=["on_call"], max_iters=2)
    prediction = await imp.call(program, ticket="t")
    first = prediction.metadata.history[0]["tool_call_results"][0]
    assert first.outcome == "refused" and "not allowed" in (first.error or "")
    assert prediction.metadata.termination_reason == "incomplete"


async def test_authorize_deny_cancel_and_submit_never_asked() -> None:
    asked: list[str] = []

    def deny_pages(request: Any) -> Any:
        asked.append(request.tool_name)
        return imp.Deny("the person declined it") if request.tool_name == "page" else imp.Allow()

    lm = script([{"tool_calls": [{"name": "page", "arguments": {"name": "Maya"}}]}, ON_CALL_ATLAS, SUBMIT_ATLAS])
    prediction = await imp.call(imp.react(escalation, [on_call, page], lm=lm), ticket="t", authorize=deny_pages)
    assert asked == ["page", "on_call"]
    denied = prediction.metadata.history[0]["tool_call_results"][0]
    assert denied.outcome == "refused" and "declined" in (denied.error or "")
    assert prediction.metadata.termination_reason == "submit"

    lm = script([{"tool_calls": [{"name": "page", "arguments": {"name": "Maya"}}]}])
    with pytest.raises(imp.ExecutionCancelled) as info:
        await imp.call(imp.react(escalation, [page], lm=lm), ticket="t", authorize=lambda r: imp.Cancel("stop"))
    assert info.value.history is not None and info.value.history[0]["ticket"] == "t"


async def test_events_are_ordered_and_bracketed() -> None:
    events: list[Any] = []
    lm = script([{"next_thought": "money", **ON_CALL_ATLAS}, SUBMIT_ATLAS])
    await imp.call(imp.react(escalation, [on_call], lm=lm), ticket="t", on_event=events.append)
    kinds = [e.kind for e in events]
    assert kinds == [
        "run_started",
        "model_request",
        "model_response",
        "reasoning",
        "tool_call",
        "tool_result",
        "model_request",
        "model_response",
        "tool_call",
        "tool_result",
        "run_finished",
    ]
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    assert len({e.call_id for e in events}) == 1
    assert events[5].payload["outcome"] == "result"


async def test_per_call_option_errors_come_before_any_request() -> None:
    lm = script(["x"])
    program = imp.react("ticket -> reply", [on_call], lm=lm)
    for bad in (
        {"max_iters": -1},
        {"max_iters": "3"},
        {"last_request_note": 5},
        {"finish": "later"},
        {"last_request_tools": ["nope"]},
        {"history": 42},
    ):
        with pytest.raises((ValueError, TypeError)):
            await imp.call(program, ticket="t", **bad)
    assert lm.requests == []


def test_unknown_options_raise() -> None:
    with pytest.raises(TypeError, match="temperature"):
        imp.react(escalation, [on_call], temperature=0)
    with pytest.raises(ValueError, match="finish_on"):
        imp.react(escalation, [on_call], finish_on={"nope": lambda a, r, i: imp.CONTINUE})


async def test_provider_reasoning_is_kept_and_replayed_with_the_calls() -> None:
    first = imp.LMResponse(
        text="",
        tool_calls=(imp.ToolCall("c1", "on_call", {"team": "atlas"}),),
        reasoning="Double charge means money.",
        reasoning_data={"reasoning_content": "Double charge means money."},
        finish_reason="tool_calls",
    )
    lm = script([first, SUBMIT_ATLAS])
    prediction = await imp.call(imp.react(escalation, [on_call], lm=lm), ticket=TICKET)
    assert prediction.metadata.history[0]["reasoning_data"] == {"reasoning_content": "Double charge means money."}
    assistant = lm.requests[1].messages[-2]
    assert assistant["reasoning_data"] == {"reasoning_content": "Double charge means money."}


async def test_cancelling_the_turn_leaves_no_task_behind() -> None:
    import asyncio

    started = anyio.Event()

    async def hang(team: str) -> str:
        started.set()
        await anyio.sleep(30)
        return team

    hanging = imp.tool(hang, name="hang", description="Hangs.")
    lm = script(
        [{"tool_calls": [{"name": "hang", "arguments": {"team": "a"}}, {"name": "hang", "arguments": {"team": "b"}}]}]
    )
    before = len(asyncio.all_tasks())
    with anyio.CancelScope() as scope:
        async with anyio.create_task_group() as tg:
            tg.start_soon(imp.call, imp.react(escalation, [hanging], lm=lm), {"ticket": "t"})
            await started.wait()
            scope.cancel()
    await anyio.lowlevel.checkpoint()
    assert len(asyncio.all_tasks()) == before


async def test_the_loop_works_with_the_json_and_xml_adapters() -> None:
    for adapter in (imp.JSONAdapter(), imp.XMLAdapter()):
        lm = script([ON_CALL_ATLAS, "Maya from atlas is on it."])
        prediction = await imp.call(imp.react("ticket -> reply", [on_call], lm=lm, adapter=adapter), ticket=TICKET)
        assert (prediction.reply, prediction.metadata.termination_reason) == ("Maya from atlas is on it.", "answered")
        lm = script(
            ['{"next_thought": "checking"}', SUBMIT_ATLAS]
            if adapter.name == "JSONAdapter"
            else ["<next_thought>checking</next_thought>", SUBMIT_ATLAS]
        )
        prediction = await imp.call(imp.react(escalation, [on_call], lm=lm, adapter=adapter), ticket=TICKET)
        assert prediction.metadata.termination_reason == "forced_submit"
        assert prediction.metadata.history[0]["next_thought"] == "checking"


async def test_finish_tools_extra_step_after_a_failure_even_at_the_step_limit() -> None:
    lm = script([imp.LMError("blip", status=500), {"tool_calls": [{"name": "send", "arguments": {"text": "ok"}}]}])
    program = imp.react("ticket -> reply", [send], lm=lm, finish="tools", finish_on={"send": sent}, max_iters=1)
    prediction = await imp.call(program, ticket="t")
    assert (prediction.reply, len(lm.requests)) == ("ok", 2)
