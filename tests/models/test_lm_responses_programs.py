"""Programs end to end on `openai-responses:` (the fake provider): reasoning replayed across a ReAct
turn, a second turn, a saved history and a saved program; predict and chain of thought per adapter."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from fake_provider import (
    FakeProvider,
    function_call_item,
    message_item,
    reasoning_item,
    responses_body,
    responses_reply,
)
from imp_backends import both_backends
from lm_constants import FAST_RETRIES, SECRET

import imp
from imp.models import lm


def look(place: str) -> str:
    """Look at a place."""
    return f"a box in the {place}"


def _reasoning(n: int) -> dict[str, Any]:
    return reasoning_item(f"Step {n}: where next?", item_id=f"rs_{n}", encrypted=f"gAAAA-encrypted-{n}")


def _turn(fake: FakeProvider, *, stream: bool = False) -> None:
    """Three steps: look in the attic, look in the cellar, answer (each with its own reasoning)."""
    bodies = [
        responses_body(
            _reasoning(1), function_call_item("look", {"place": "attic"}, call_id="call_1"), response_id="r1"
        ),
        responses_body(
            _reasoning(2), function_call_item("look", {"place": "cellar"}, call_id="call_2"), response_id="r2"
        ),
        responses_body(_reasoning(3), message_item("Two boxes.", item_id="msg_3"), response_id="r3"),
    ]
    fake.add(*(responses_reply(b, stream=stream) for b in bodies))


def _steps(n: int) -> list[dict[str, Any]]:
    """The items a request after `n` tool steps carries after the task: reasoning, call, output."""
    places = ["attic", "cellar"]
    out: list[dict[str, Any]] = []
    for i in range(1, n + 1):
        out += [
            _reasoning(i),
            {"type": "function_call", "id": f"fc_call_{i}", "call_id": f"call_{i}", "name": "look"},
            {"type": "function_call_output", "call_id": f"call_{i}", "output": f"a box in the {places[i - 1]}"},
        ]
    return out


def _without_arguments(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    for item in items:
        if item.get("type") == "function_call":
            assert json.loads(item["arguments"])["place"] in ("attic", "cellar")
    return [{k: v for k, v in i.items() if k != "arguments"} for i in items]


@both_backends
async def test_a_react_turn_replays_each_steps_reasoning_in_order(fake: FakeProvider, backend: str) -> None:
    _turn(fake, stream=backend == "trio")  # streamed requests feed the same history
    async with lm(
        "openai-responses:gpt-5.4-mini", api_key=SECRET, base_url=fake.base_url, retry_policy=FAST_RETRIES
    ) as client:
        program = imp.react("question -> answer", [look], lm=client)
        if backend == "trio":
            parts = [p async for p in imp.stream(program, question="what is upstairs and downstairs?")]
            prediction = parts[-1].prediction
        else:
            prediction = await imp.call(program, question="what is upstairs and downstairs?")
    assert prediction.answer == "Two boxes."
    inputs = [r.json["input"] for r in fake.requests]
    assert len(inputs) == 3
    task = inputs[0]
    assert [i.get("role") for i in task] == ["user"]
    for n, sent in enumerate(inputs):
        assert sent[: len(task)] == task
        assert _without_arguments(sent[len(task) :]) == _steps(n)  # every earlier step's reasoning, call, output
        assert all(r.json["include"] == ["reasoning.encrypted_content"] for r in fake.requests)
    dumped = json.dumps(prediction.metadata.history.dump())
    assert all(f'"rs_{n}"' in dumped and f"gAAAA-encrypted-{n}" in dumped for n in (1, 2))  # kept in the history


async def test_later_turns_a_saved_history_and_a_saved_program_replay_the_same_reasoning(
    fake: FakeProvider, tmp_path: Path
) -> None:
    _turn(fake)
    client = lm("openai-responses:gpt-5.4-mini", api_key=SECRET, base_url=fake.base_url, retry_policy=FAST_RETRIES)
    async with client:
        program = imp.react("question -> answer", [look], lm=client)
        first = await imp.call(program, question="what is upstairs and downstairs?")
        history = first.metadata.history
        saved = json.loads(json.dumps(history.dump()))  # as a file holds it
        fake.add(responses_reply(responses_body(message_item("Still two."), response_id="r4")))
        await imp.call(program, question="and now?", history=history)
        fake.add(responses_reply(responses_body(message_item("Still two."), response_id="r5")))
        await imp.call(program, question="and now?", history=imp.History.load(saved))
        path = imp.save(program, tmp_path / "agent.json", registry={"look": look})
        loaded = imp.load(path, registry={"look": look}, trust_endpoint=True)  # its own file, for the fake server
        reloaded_lm = loaded.lm
        assert reloaded_lm is not None and reloaded_lm.model_key == "openai-responses:gpt-5.4-mini"  # type: ignore[attr-defined]
        fake.add(responses_reply(responses_body(message_item("Still two."), response_id="r6")))
        async with lm("openai-responses:gpt-5.4-mini", api_key=SECRET, base_url=fake.base_url) as again:
            await imp.call(loaded.with_lm(again), question="and now?", history=imp.History.load(saved))
    live, from_file, from_program = (r.json for r in fake.requests[3:])
    assert live == from_file == from_program
    second_turn = live["input"]
    first_turn_request = fake.requests[2].json["input"]
    # the whole first turn (its reasoning items in order before their calls) comes before the new question
    assert second_turn[: len(first_turn_request)] == first_turn_request
    kinds = [i.get("type", i.get("role")) for i in second_turn]
    assert kinds.count("reasoning") == 2 and kinds[-1] == "user"
    for n in (1, 2):
        at = second_turn.index(_reasoning(n))
        assert second_turn[at + 1]["call_id"] == f"call_{n}" and second_turn[at + 1]["id"] == f"fc_call_{n}"


ADAPTERS: list[tuple[Any, str, str]] = [
    (
        imp.ChatAdapter(),
        "[[ ## answer ## ]]\nParis\n\n[[ ## completed ## ]]",
        "[[ ## reasoning ## ]]\nIt is known.\n\n",
    ),
    (imp.JSONAdapter(), '{"answer": "Paris"}', '{"reasoning": "It is known.", '),
    (imp.XMLAdapter(), "<answer>Paris</answer>", "<reasoning>It is known.</reasoning>\n"),
]


@pytest.mark.parametrize(("adapter", "reply", "thought"), ADAPTERS, ids=["chat", "json", "xml"])
@pytest.mark.parametrize("stream", [False, True], ids=["request", "stream"])
async def test_predict_and_chain_of_thought_run_under_every_adapter(
    fake: FakeProvider, adapter: Any, reply: str, thought: str, stream: bool
) -> None:
    cot_reply = thought + (reply[1:] if reply.startswith("{") else reply)
    for text in (reply, cot_reply):
        body = responses_body(reasoning_item("Think.", item_id="rs_p", encrypted="e"), message_item(text))
        fake.add(responses_reply(body, stream=stream))
    async with lm("openai-responses:gpt-5.4-mini", api_key=SECRET, base_url=fake.base_url) as client:
        programs = [
            imp.predict("question -> answer", lm=client, adapter=adapter),
            imp.chain_of_thought("question -> answer", lm=client, adapter=adapter),
        ]
        for program in programs:
            if stream:
                parts = [p async for p in imp.stream(program, question="capital of France?")]
                prediction = parts[-1].prediction
            else:
                prediction = await imp.call(program, question="capital of France?")
            assert prediction.answer == "Paris"
    (plain, cot) = (r.json for r in fake.requests)
    assert plain["input"][-1]["role"] == "user" and plain["store"] is False
    if isinstance(adapter, imp.JSONAdapter):  # the JSON adapter's structured mode is text.format here
        assert plain["text"]["format"]["type"] == "json_schema"
        assert set(plain["text"]["format"]["schema"]["properties"]) == {"answer"}
        assert set(cot["text"]["format"]["schema"]["properties"]) == {"reasoning", "answer"}
    else:
        assert "text" not in plain


@pytest.mark.parametrize(
    "adapter", [imp.ChatAdapter(), imp.JSONAdapter(), imp.XMLAdapter()], ids=["chat", "json", "xml"]
)
async def test_react_replays_reasoning_under_every_adapter(fake: FakeProvider, adapter: Any) -> None:
    _turn(fake)
    async with lm("openai-responses:gpt-5.4-mini", api_key=SECRET, base_url=fake.base_url) as client:
        program = imp.react("question -> answer", [look], lm=client, adapter=adapter)
        prediction = await imp.call(program, question="what is upstairs and downstairs?")
    assert prediction.answer == "Two boxes."
    last = fake.requests[-1].json["input"]
    assert [i for i in last if i.get("type") == "reasoning"] == [_reasoning(1), _reasoning(2)]
    assert _without_arguments([i for i in last if "type" in i]) == _steps(2)
