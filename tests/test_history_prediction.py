"""History, Prediction, Example and scripted LM steps."""

import pytest

import imp
from imp.models.scripted import to_response


def test_history_is_immutable_and_append_returns_a_new_one() -> None:
    h = imp.History([{"question": "q1", "answer": "a1"}])
    h2 = h.append({"question": "q2", "answer": "a2"})
    assert len(h) == 1 and len(h2) == 2
    with pytest.raises(TypeError):
        h[0]["question"] = "changed"  # type: ignore[index]
    assert h2[1]["answer"] == "a2"
    assert isinstance(h2[0:1], imp.History)


def test_history_dump_load_round_trips_tool_steps() -> None:
    h = imp.History(
        [
            {
                "ticket": "charged twice",
                "next_thought": "money",
                "tool_calls": [imp.ToolCall("c1", "on_call", {"team": "atlas"})],
                "tool_call_results": [imp.ToolResult("c1", "on_call", "Maya")],
            },
            {"tool_calls": [], "team": "atlas", "contact": "Maya"},
        ]
    )
    data = h.dump()
    assert data["type"] == "history"
    assert data["messages"][0]["tool_calls"] == [{"id": "c1", "name": "on_call", "arguments": {"team": "atlas"}}]
    again = imp.History.load(data)
    assert again == h
    assert again[0]["tool_calls"][0] == imp.ToolCall("c1", "on_call", {"team": "atlas"})
    with pytest.raises(ValueError, match="history dump"):
        imp.History.load({"messages": []})


def test_history_redact_hides_secrets_by_key_and_shape() -> None:
    h = imp.History([{"question": "use Bearer abcdefghijklmnop123", "api_key": "plain-value", "answer": "ok"}])
    red = h.redact()
    assert red[0]["api_key"] == "[REDACTED]"
    assert "abcdefghijklmnop123" not in red[0]["question"]
    assert h[0]["api_key"] == "plain-value"


def test_prediction_access_and_metadata() -> None:
    pred = imp.Prediction({"team": "atlas"}, imp.PredictionMetadata(termination_reason="submit"))
    assert pred.team == "atlas" and pred["team"] == "atlas" and "team" in pred
    assert pred.metadata.termination_reason == "submit" and pred.metadata["termination_reason"] == "submit"
    assert pred.metadata.get("nope") is None
    with pytest.raises(AttributeError, match="fields: team"):
        _ = pred.contact
    with pytest.raises(AttributeError):
        pred.team = "x"  # type: ignore[misc]
    assert not imp.Prediction({}, complete=False).complete


def test_example_inputs_and_labels() -> None:
    ex = imp.Example(question="2+2?", answer="4").with_inputs("question")
    assert ex.inputs() == {"question": "2+2?"} and ex.labels() == {"answer": "4"}
    assert ex.question == "2+2?" and ex["answer"] == "4"
    with pytest.raises(ValueError, match="with_inputs"):
        imp.Example(question="q").inputs()
    with pytest.raises(KeyError):
        imp.Example(question="q").with_inputs("nope")


def test_scripted_steps_normalise() -> None:
    text = to_response("hello")
    assert text.text == "hello" and text.fields is None
    fields = to_response({"answer": "4"})
    assert fields.fields == {"answer": "4"}
    calls = to_response(
        {"next_thought": "look", "tool_calls": [{"name": "on_call", "arguments": {"team": "atlas"}}]}, request_number=3
    )
    assert calls.text == "look" and calls.tool_calls[0] == imp.ToolCall("call_3_0", "on_call", {"team": "atlas"})
    reply = to_response({"reply": "Maya is on it.", "tool_calls": []})
    assert reply.text == "Maya is on it." and reply.tool_calls == ()
    string_args = to_response({"tool_calls": [{"id": "x", "function": {"name": "f", "arguments": '{"a": 1,}'}}]})
    assert string_args.tool_calls[0].arguments == {"a": 1}
    with pytest.raises(imp.LMError):
        to_response(imp.LMError("boom"))


async def test_scripted_lm_runs_out_with_a_clear_error() -> None:
    lm = imp.ScriptedLM(["one"])
    assert (await lm.request([{"role": "user", "content": "x"}])).text == "one"
    with pytest.raises(imp.LMError, match="ran out of steps after 1"):
        await lm.request([])
    seed_style = imp.ScriptedLM([], exhausted={"tool_calls": []})
    assert (await seed_style.request([])).tool_calls == ()


def test_predictions_and_examples_survive_pickle_and_copy() -> None:
    import copy
    import pickle

    pred = imp.Prediction({"team": "atlas"}, imp.PredictionMetadata(termination_reason="submit"), complete=False)
    again = pickle.loads(pickle.dumps(pred))
    assert again == pred and again.metadata.termination_reason == "submit" and not again.complete
    assert copy.copy(pred) == pred
    ex = imp.Example(q="2+2?", a="4").with_inputs("q")
    assert pickle.loads(pickle.dumps(ex)) == ex and copy.deepcopy(ex).inputs() == {"q": "2+2?"}


def test_a_tool_step_is_a_typed_record_that_reads_as_its_saved_mapping() -> None:
    call = imp.ToolCall("c1", "on_call", {"team": "atlas"})
    result = imp.ToolResult("c1", "on_call", "Maya")
    step = imp.History(
        [
            {
                "ticket": "t",
                "user_name": "alice",
                "next_thought": "money",
                "tool_calls": [call.dump()],
                "tool_call_results": [result.dump()],
                "reasoning": "r",
                "reasoning_data": {"k": 1},
                "last_request_note": "n",
            }
        ]
    )[0]
    assert isinstance(step, imp.Step) and step.is_tool_step
    assert (step.thought, step.tool_calls, step.results) == ("money", (call,), (result,))
    assert (step.note, step.reasoning, step.reasoning_data, step.user_name) == ("n", "r", {"k": 1}, "alice")
    assert dict(step.fields) == {"ticket": "t"}
    assert step["next_thought"] == "money" and step.get("tool_call_results") == (result,)
    assert "assistant_name" not in step and step.get("assistant_name") is None
    assert imp.Step.load(step.dump()) == step == dict(step)
    assert set(step) == {
        "ticket",
        "user_name",
        "next_thought",
        "tool_calls",
        "tool_call_results",
        "reasoning",
        "reasoning_data",
        "last_request_note",
    }


def test_a_conversation_turn_keeps_every_key_but_the_names_as_fields() -> None:
    # A chain_of_thought history has a `reasoning` output: in a conversation turn it is a field.
    turn = imp.History([{"question": "q", "reasoning": "because", "answer": "a", "assistant_name": "bot"}])[0]
    assert not turn.is_tool_step and turn.tool_calls is None and turn.calls == ()
    assert dict(turn.fields) == {"question": "q", "reasoning": "because", "answer": "a"}
    assert turn.reasoning is None and turn.assistant_name == "bot"
    assert turn.dump() == {"question": "q", "reasoning": "because", "answer": "a", "assistant_name": "bot"}


def test_a_history_takes_steps_and_mappings_alike() -> None:
    step = imp.Step(fields={"ticket": "t"}, thought="hm", tool_calls=(), results=())
    history = imp.History([step, {"question": "q", "answer": "a"}])
    assert history[0] is step and history.dump()["messages"][0] == {
        "ticket": "t",
        "next_thought": "hm",
        "tool_calls": [],
        "tool_call_results": [],
    }
    assert imp.History.load(history.dump()) == history
    with pytest.raises(TypeError, match="mapping"):
        imp.History(["not a turn"])  # type: ignore[list-item]


def test_a_step_is_frozen_through_and_through() -> None:
    step = imp.Step(fields={"ticket": "t"}, tool_calls=[imp.ToolCall("c1", "look")], results=[])  # type: ignore[arg-type]
    assert step.tool_calls == (imp.ToolCall("c1", "look"),) and step.results == ()
    with pytest.raises(TypeError):
        step.fields["ticket"] = "changed"  # type: ignore[index]
    with pytest.raises(AttributeError):
        step.thought = "changed"  # type: ignore[misc]
