"""Every example of the ReAct guide's walkthrough, ported to Python with ScriptedLM, with the results it shows."""

import pytest
from react_fixtures import call_names, escalation, on_call, page, results, script

import imp

TICKET = "We were charged twice this month."


async def test_the_loop_routes_and_submits() -> None:
    lm = script(
        [
            {
                "next_thought": "A double charge is money, so atlas.",
                "tool_calls": [{"name": "on_call", "arguments": {"team": "atlas"}}],
            },
            {"tool_calls": [{"name": "submit", "arguments": {"team": "atlas", "contact": "Maya"}}]},
        ]
    )
    prediction = await imp.call(imp.react(escalation, [on_call], lm=lm), {"ticket": TICKET})
    assert (prediction.team, prediction.contact, prediction.metadata.termination_reason) == ("atlas", "Maya", "submit")
    assert call_names(prediction) == ["on_call", "submit"]
    assert prediction.fields == {"team": "atlas", "contact": "Maya"}
    assert prediction.complete


async def test_each_request_is_the_previous_one_plus_the_newest_exchange() -> None:
    lm = script(
        [
            {"next_thought": "money", "tool_calls": [{"name": "on_call", "arguments": {"team": "atlas"}}]},
            {"tool_calls": [{"name": "submit", "arguments": {"team": "atlas", "contact": "Maya"}}]},
            {"tool_calls": [{"name": "submit", "arguments": {"team": "atlas", "contact": "Maya"}}]},
        ]
    )
    escalate = imp.react(escalation, [on_call], lm=lm, max_iters=5)
    first = await imp.call(escalate, {"ticket": TICKET})
    second = await imp.call(escalate, {"ticket": "It happened again today.", "history": first.metadata.history})
    r1, r2, r3 = (r.messages for r in lm.requests)
    assert r2[: len(r1)] == r1
    assert r2[len(r1)]["tool_calls"][0].name == "on_call"
    assert r2[-1] == {"role": "tool", "tool_call_id": "call_1_0", "content": "Maya"}
    # the next call replays the whole first turn, then asks the new ticket
    assert r3[: len(r2)] == r2
    assert r3[-1] == {"role": "user", "content": "[[ ## ticket ## ]]\nIt happened again today."}
    assert len(second.metadata.history) == 3
    assert lm.requests[0].options["tool_choice"] == "auto"
    assert [t["function"]["name"] for t in lm.requests[0].options["tools"]] == ["on_call", "submit"]


async def test_a_text_answer_ends_the_turn() -> None:
    lm = script(
        [
            {"tool_calls": [{"name": "on_call", "arguments": {"team": "atlas"}}]},
            {"reply": "Maya from atlas is looking at the duplicate charge.", "tool_calls": []},
        ]
    )
    reply = imp.react(
        imp.signature("ticket -> reply", "Tell the customer who is handling their ticket."), [on_call], lm=lm
    )
    prediction = await imp.call(reply, {"ticket": TICKET})
    assert (prediction.reply, prediction.metadata.termination_reason) == (
        "Maya from atlas is looking at the duplicate charge.",
        "answered",
    )
    assert [t["function"]["name"] for t in lm.requests[0].options["tools"]] == ["on_call"]


SEED_SYSTEM = """Your input fields are:
1. `intent` (string):
Inputs will be structured in the following way, with the appropriate values filled in.

[[ ## intent ## ]]
{intent}

In adhering to this structure, your objective is: 
        Given the fields `intent`, produce the fields `answer`.
        You are an Agent. Use the supplied tools to gather information and take actions.
        Call tools when more information is needed.
        When the final answer is ready, write it as plain text without calling a tool.
        The available tools are: `look`."""  # noqa: W291


async def test_the_text_loops_system_message_is_the_seeds() -> None:
    look = imp.tools.tool(lambda: "a cat", name="look", description="Look in the box.")
    lm = script(["A cat."])
    prediction = await imp.call(imp.react("intent -> answer", [look], lm=lm), intent="What is in the box?")
    assert prediction.answer == "A cat."
    system, user = lm.requests[0].messages
    assert system == {"role": "system", "content": SEED_SYSTEM}
    assert user == {"role": "user", "content": "[[ ## intent ## ]]\nWhat is in the box?"}


async def test_a_reply_with_marker_sections_is_read_as_before() -> None:
    lm = script(["[[ ## reply ## ]]\nMaya is on it.\n\n[[ ## completed ## ]]"])
    prediction = await imp.call(imp.react("ticket -> reply", [on_call], lm=lm), ticket=TICKET)
    assert prediction.reply == "Maya is on it."


async def test_finish_submit_makes_text_a_thought() -> None:
    lm = script(
        [
            {"next_thought": "Let me check who is on call for atlas.", "tool_calls": []},
            {"tool_calls": [{"name": "on_call", "arguments": {"team": "atlas"}}]},
            {"tool_calls": [{"name": "submit", "arguments": {"reply": "Maya from atlas is on it."}}]},
        ]
    )
    reply = imp.react(imp.signature("ticket -> reply"), [on_call], lm=lm, finish="submit")
    prediction = await imp.call(reply, {"ticket": TICKET})
    assert (prediction.reply, prediction.metadata.termination_reason) == ("Maya from atlas is on it.", "submit")
    line = "Your message above was not sent. To reply, call `submit` with `reply`; to keep working, call a tool."
    second = lm.requests[1].messages
    assert second[-2] == {"role": "assistant", "content": "Let me check who is on call for atlas."}
    assert second[-1] == {"role": "user", "content": line}
    third = lm.requests[2].messages
    assert third[: len(second)] == second  # the line stays on replay
    assert lm.requests[1].options["tool_choice"] == "auto"


async def test_one_more_request_on_a_history_you_hold() -> None:
    first_lm = script(
        [
            {"next_thought": "money", "tool_calls": [{"name": "on_call", "arguments": {"team": "atlas"}}]},
            {"tool_calls": [{"name": "submit", "arguments": {"team": "atlas", "contact": "Maya"}}]},
        ]
    )
    held = await imp.call(imp.react(escalation, [on_call], lm=first_lm), {"ticket": TICKET})
    lm = script([{"reply": "Maya from atlas has the duplicate charge.", "tool_calls": []}])
    reply = imp.react(imp.signature("ticket -> reply"), [on_call], lm=lm)
    summary = await imp.call(
        reply,
        {
            "history": held.metadata.history,
            "max_iters": 0,
            "last_request_note": "Summarise this ticket for the next shift.",
        },
    )
    assert (summary.reply, summary.metadata.termination_reason) == (
        "Maya from atlas has the duplicate charge.",
        "last_text",
    )
    assert summary.metadata.termination_cause == "max_iters"
    assert len(lm.requests) == 1
    assert lm.requests[0].messages[-1] == {"role": "user", "content": "Summarise this ticket for the next shift."}
    assert summary.metadata.finish_reason == "stop"
    assert summary.metadata.history[-2]["last_request_note"] == "Summarise this ticket for the next shift."


async def test_a_calls_own_config_is_merged_for_that_call() -> None:
    lm = script(["ok"])
    await imp.call(
        imp.react("ticket -> reply", [on_call], lm=lm, config={"temperature": 0}),
        ticket="t",
        config={"max_tokens": 4000},
    )
    assert lm.requests[0].options["max_tokens"] == 4000 and lm.requests[0].options["temperature"] == 0
    with pytest.raises(ValueError, match="tool_choice"):
        await imp.call(imp.react("ticket -> reply", [on_call], lm=lm), ticket="t", config={"tool_choice": "none"})


async def test_one_calls_own_tool_runners() -> None:
    paging = on_call.with_runner(lambda team: f"paged {team}")
    lm = script(
        [{"tool_calls": [{"name": "on_call", "arguments": {"team": "harbor"}}]}, {"reply": "Paged.", "tool_calls": []}]
    )
    reply = imp.react(imp.signature("ticket -> reply"), [on_call], lm=lm)
    prediction = await imp.call(reply, {"ticket": "The deploy is stuck.", "tools": [paging]})
    assert results(prediction) == ["paged harbor"]
    assert reply.tools == (on_call,)


async def test_a_tool_shown_differently_or_not_held_is_refused_before_a_request() -> None:
    lm = script(["never"])
    reply = imp.react(imp.signature("ticket -> reply"), [on_call], lm=lm)
    renamed = imp.tools.tool(lambda team: team, name="on_call", description="Something else.")
    with pytest.raises(ValueError, match="invalid react tools: `on_call` is shown differently"):
        await imp.call(reply, {"ticket": "t", "tools": [renamed]})
    with pytest.raises(ValueError, match="does not hold a tool named `page`"):
        await imp.call(reply, {"ticket": "t", "tools": [page]})
    assert lm.requests == []


async def test_acting_in_the_last_request() -> None:
    lm = script(
        [
            {"tool_calls": [{"name": "on_call", "arguments": {"team": "atlas"}}]},
            {
                "reply": "Paged Maya.",
                "tool_calls": [
                    {"name": "page", "arguments": {"name": "Maya"}},
                    {"name": "on_call", "arguments": {"team": "harbor"}},
                ],
            },
        ]
    )
    pager = imp.react(
        imp.signature("ticket -> reply"), [on_call, page], lm=lm, max_iters=1, last_request_tools=["page"]
    )
    prediction = await imp.call(pager, {"ticket": TICKET})
    assert (
        prediction.reply,
        prediction.metadata.termination_reason,
        results(prediction),
        [c.name for c in prediction.metadata.unexecuted_tool_calls],
    ) == ("Paged Maya.", "last_text", ["Maya", "paged Maya"], ["on_call"])

    lm2 = script(
        [
            {
                "reply": "Maya was paged about the double charge.",
                "tool_calls": [{"name": "page", "arguments": {"name": "Maya"}}],
            }
        ]
    )
    pager2 = imp.react(imp.signature("ticket -> reply"), [on_call, page], lm=lm2, last_request_tools=["page"])
    summary = await imp.call(
        pager2,
        {
            "history": prediction.metadata.history,
            "max_iters": 0,
            "last_request_note": "Summarise this ticket for the next shift.",
            "last_request_tools": [],
        },
    )
    assert (summary.reply, [c.name for c in summary.metadata.unexecuted_tool_calls]) == (
        "Maya was paged about the double charge.",
        ["page"],
    )


def test_last_request_tools_is_refused_for_a_submit_signature() -> None:
    with pytest.raises(ValueError, match="last_request_tools"):
        imp.react(escalation, [on_call, page], last_request_tools=["page"])


async def test_ending_the_turn_from_a_tool() -> None:
    lm = script([{"tool_calls": [{"name": "on_call", "arguments": {"team": "beacon"}}]}])
    page_and_stop = imp.react(
        escalation,
        [on_call],
        lm=lm,
        finish_on={"on_call": lambda args, contact, inputs: imp.Finish({"team": args["team"], "contact": contact})},
    )
    prediction = await imp.call(page_and_stop, {"ticket": "I can't log in."})
    assert (prediction.contact, prediction.metadata.termination_reason, prediction.metadata.finished_by_tool) == (
        "Ines",
        "finished_by_tool",
        "on_call",
    )


async def test_interrupted_by_max_iters_the_forced_submit_answers() -> None:
    lm = script(
        [
            {"tool_calls": [{"name": "on_call", "arguments": {"team": "atlas"}}]},
            {"tool_calls": [{"name": "submit", "arguments": {"team": "atlas", "contact": "Maya"}}]},
        ]
    )
    prediction = await imp.call(imp.react(escalation, [on_call], lm=lm, max_iters=1), {"ticket": TICKET})
    assert (
        prediction.metadata.termination_reason,
        prediction.metadata.termination_cause,
        prediction.contact,
    ) == ("forced_submit", "max_iters", "Maya")
    assert lm.requests[1].options["tool_choice"] == {"type": "function", "function": {"name": "submit"}}


async def test_an_enum_output_keeps_submit_and_text_alone_has_no_answer() -> None:
    lm = script([{"next_thought": "team: atlas", "tool_calls": []}, {"next_thought": "team: atlas", "tool_calls": []}])
    router = imp.react(imp.signature("ticket -> team: enum[atlas,harbor,beacon,quill]"), [on_call], lm=lm)
    prediction = await imp.call(router, {"ticket": TICKET})
    assert (prediction.metadata.termination_reason, prediction.metadata.termination_cause, prediction.complete) == (
        "incomplete",
        "empty_tool_calls",
        False,
    )
