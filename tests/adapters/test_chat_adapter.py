"""The Chat adapter: layout, demos, history, tool turns, parse rules, options and renderer seams."""

from typing import Any

import pytest

import imp
from imp.adapters.base import FormatOptions
from imp.programs.react._messages import guidance_lines

chat = imp.ChatAdapter()
QA = imp.signature("question -> answer")

QA_SYSTEM = """Your input fields are:
1. `question` (string):
Your output fields are:
1. `answer` (string):
All interactions will be structured in the following way, with the appropriate values filled in.

[[ ## question ## ]]
{question}

[[ ## answer ## ]]
{answer}

[[ ## completed ## ]]
In adhering to this structure, your objective is: 
        Given the fields `question`, produce the fields `answer`."""  # noqa: W291 - DSPy's trailing space


def test_system_and_request_layout() -> None:
    messages = chat.format(QA, {"question": "What is the capital of France?"})
    assert messages == [
        {"role": "system", "content": QA_SYSTEM},
        {
            "role": "user",
            "content": "[[ ## question ## ]]\nWhat is the capital of France?\n\n"
            "Respond with the corresponding output fields, starting with the field `[[ ## answer ## ]]`, "
            "and then ending with the marker for `[[ ## completed ## ]]`.",
        },
    ]


def test_typed_outputs_get_notes_requirements_and_constraints() -> None:
    sig = imp.signature(
        'ticket -> team: enum[atlas,harbor] "owning squad", n: int, tags: list[str]', "Route it.\nCarefully."
    )
    system, user = chat.format(sig, {"ticket": "x"})
    content = system["content"]
    assert (
        "1. `team` (one of: atlas, harbor): owning squad\n2. `n` (integer): \n3. `tags` (list of strings):" in content
    )
    assert (
        "{team}        # note: the value you produce must exactly match (no extra characters) one of: atlas; harbor"
        in content
    )
    # DSPy's words, and its JSON schema with `type` first at every level.
    assert "{n}        # note: the value you produce must be a single int value" in content
    assert (
        '{tags}        # note: the value you produce must adhere to the JSON schema: {"type": "array", "items": {"type": "string"}}'
        in content
    )
    assert content.endswith("your objective is: \n        Route it.\n        Carefully.")
    assert (
        "starting with the field `[[ ## team ## ]]` (must be formatted as one of: atlas, harbor), "
        "then `[[ ## n ## ]]` (must be formatted as an integer), then `[[ ## tags ## ]]` "
        "(must be formatted as a list of strings), and then ending" in user["content"]
    )


def test_constraints_appear_under_the_field() -> None:
    class Rated(imp.Signature):
        review: str = imp.InputField()
        stars: int = imp.OutputField(desc="the rating", ge=1, le=5)

    system = chat.format(Rated, {"review": "ok"})[0]["content"]
    assert (
        "1. `stars` (integer): the rating\nConstraints: greater than or equal to: 1, less than or equal to: 5" in system
    )


def test_demos_incomplete_first_then_complete() -> None:
    demos = [
        {"question": "2+2?", "answer": "4"},
        {"question": "Capital of Peru?"},  # no output: dropped
        {"question": "3+3?", "answer": None},  # incomplete
    ]
    messages = chat.format(QA, {"question": "1+1?"}, demos=demos)
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "user", "assistant", "user"]
    assert messages[1]["content"].startswith(
        "This is an example of the task, though some input or output fields are not supplied.\n\n[[ ## question ## ]]\n3+3?"
    )
    assert messages[2]["content"] == "[[ ## answer ## ]]\nnull\n\n[[ ## completed ## ]]\n"
    assert messages[3]["content"] == "[[ ## question ## ]]\n2+2?"
    assert messages[4]["content"] == "[[ ## answer ## ]]\n4\n\n[[ ## completed ## ]]\n"


def test_incomplete_demo_missing_output_reads_not_supplied() -> None:
    sig = imp.signature("q -> a, b")
    messages = chat.format(sig, {"q": "x"}, demos=[{"q": "y", "a": "1"}])
    assert messages[2]["content"] == (
        "[[ ## a ## ]]\n1\n\n[[ ## b ## ]]\nNot supplied for this particular example.\n\n[[ ## completed ## ]]\n"
    )


HISTORY_QA = imp.signature("question, history: History -> answer")


def test_naming_messages_as_seed_000_shows() -> None:
    history = imp.History(
        [
            {"question": "Who won?", "answer": "Blue team.", "user_name": "alice"},
            {"question": "By how much?", "answer": "Two points.", "user_name": "bob"},
        ]
    )
    messages = chat.format(HISTORY_QA, {"question": "Rematch?", "history": history, "user_name": "alice"})
    roles_names = [(m["role"], m.get("name")) for m in messages]
    assert roles_names == [
        ("system", None),
        ("user", "alice"),
        ("assistant", None),
        ("user", "bob"),
        ("assistant", None),
        ("user", "alice"),
    ]
    assert messages[1]["content"] == "[[ ## question ## ]]\nWho won?"
    assert messages[2]["content"] == "[[ ## answer ## ]]\nBlue team.\n\n[[ ## completed ## ]]\n"
    assert "user_name" not in messages[0]["content"]
    assert "`history` (" not in messages[0]["content"]
    assert "alice" not in messages[-1]["content"]


def test_names_need_a_non_empty_string_and_assistant_names_apply() -> None:
    history = imp.History([{"question": "q", "answer": "a", "user_name": "", "assistant_name": "helper_1"}])
    messages = chat.format(HISTORY_QA, {"question": "next", "history": history, "user_name": 7})
    assert "name" not in messages[1]
    assert messages[2]["name"] == "helper_1"
    assert "name" not in messages[-1]


def test_a_signature_field_called_user_name_stays_a_field() -> None:
    sig = imp.signature("user_name, question -> answer")
    messages = chat.format(sig, {"user_name": "alice", "question": "hi"})
    assert "name" not in messages[-1]
    assert "[[ ## user_name ## ]]\nalice" in messages[-1]["content"]


def tool_history() -> imp.History:
    return imp.History(
        [
            {
                "question": "Who is on call for atlas?",
                "next_thought": "Look it up.",
                "tool_calls": [
                    imp.ToolCall("call_1", "on_call", {"team": "atlas"}),
                    imp.ToolCall("call_2", "on_call", {"team": "quill"}),
                ],
                "tool_call_results": [
                    imp.ToolResult("call_1", "on_call", "Maya"),
                    imp.ToolResult("call_2", "on_call", None, "unknown", "on_call failed: timed out."),
                ],
            },
            {"tool_calls": [], "next_thought": "", "answer": "Maya."},
        ]
    )


def test_native_tool_turns_replay_as_tool_calls_and_tool_messages() -> None:
    messages = chat.format(HISTORY_QA, {"question": "And harbor?", "history": tool_history()})
    assert messages[1] == {"role": "user", "content": "[[ ## question ## ]]\nWho is on call for atlas?"}
    assert messages[2] == {
        "role": "assistant",
        "content": "Look it up.",
        "tool_calls": [
            imp.ToolCall("call_1", "on_call", {"team": "atlas"}),
            imp.ToolCall("call_2", "on_call", {"team": "quill"}),
        ],
    }
    assert messages[3] == {"role": "tool", "tool_call_id": "call_1", "content": "Maya"}
    assert messages[4] == {"role": "tool", "tool_call_id": "call_2", "content": "Error: on_call failed: timed out."}
    assert messages[5]["role"] == "assistant" and "Maya." in messages[5]["content"]


def test_tool_calls_without_thought_send_empty_content_not_null() -> None:
    history = imp.History(
        [
            {
                "tool_calls": [imp.ToolCall("c", "look", {})],
                "tool_call_results": [imp.ToolResult("c", "look", {"box": "cat"})],
            }
        ]
    )
    messages = chat.format(HISTORY_QA, {"question": "q", "history": history})
    assert messages[1]["content"] == ""
    assert messages[2]["content"] == '{"box": "cat"}'


def test_tool_result_renderer_bounds_what_the_prompt_shows() -> None:
    seen: list[dict[str, Any]] = []

    def short(result: imp.ToolResult, call: dict[str, Any]) -> str:
        seen.append(call)
        return f"{call['name']}: {str(result.result)[:2]}"

    messages = chat.format(HISTORY_QA, {"question": "q", "history": tool_history()}, tool_result_renderer=short)
    assert messages[3]["content"] == "on_call: Ma"
    assert seen[0] == {"id": "call_1", "name": "on_call"}


def test_history_note_renderer_follows_every_turn_tool_turns_included() -> None:
    def note(signature: imp.Signature, turn: Any) -> str | None:
        return "The answer was not delivered." if turn.get("tool_calls") else None

    messages = chat.format(HISTORY_QA, {"question": "q", "history": tool_history()}, history_note_renderer=note)
    assert messages[5] == {"role": "user", "content": "The answer was not delivered."}
    assert sum(1 for m in messages if m["content"] == "The answer was not delivered.") == 1


def test_omit_empty_request_and_response_instruction() -> None:
    history = imp.History([{"question": "q", "answer": "a"}])
    messages = chat.format(HISTORY_QA, {"history": history, "question": None}, omit_empty_request=True)
    assert messages[-1]["role"] == "assistant"
    kept = chat.format(
        HISTORY_QA,
        {
            "history": history,
            "question": None,
        },
        response_instruction=False,
    )
    assert kept[-1] == {"role": "user", "content": ""}
    plain = chat.format(QA, {"question": "x"}, response_instruction=False)
    assert plain[-1]["content"] == "[[ ## question ## ]]\nx"


def test_options_outside_the_list_are_ignored_and_non_mappings_refused() -> None:
    assert chat.format(QA, {"question": "x"}, colour="blue") == chat.format(QA, {"question": "x"})
    with pytest.raises(TypeError, match="mapping"):
        FormatOptions.read([("demos", [])])  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="adapter_opts must be a mapping"):
        imp.predict(QA, adapter_opts=[("agent_line", None)])


SEED_001_SYSTEM = """Your input fields are:
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


def test_guidance_renders_seed_001_system_message() -> None:
    sig = imp.signature("intent -> answer")
    guidance = imp.Guidance(tuple(guidance_lines(tool_names=["look"])), text_answer=True)
    system, user = chat.format(sig, {"intent": "What is in the box?"}, guidance=guidance, response_instruction=False)
    assert system["content"] == SEED_001_SYSTEM
    assert user["content"] == "[[ ## intent ## ]]\nWhat is in the box?"


def test_agent_line_replaced_or_left_out() -> None:
    sig = imp.signature("intent -> answer")
    guidance = imp.Guidance(tuple(guidance_lines(tool_names=["look"])), text_answer=True)
    mine = chat.format(sig, {"intent": "x"}, guidance=guidance, agent_line="You route tickets.")[0]["content"]
    assert "        You route tickets.\n        Call tools" in mine
    none = chat.format(sig, {"intent": "x"}, guidance=guidance, agent_line=None)[0]["content"]
    assert "You are an Agent" not in none and "`answer`.\n        Call tools" in none


def test_submit_guidance() -> None:
    sig = imp.signature("ticket -> team, contact")
    lines = guidance_lines(submit_tool="submit", output_names=["team", "contact"], tool_names=["on_call", "submit"])
    guidance = imp.Guidance(tuple(lines))
    system = chat.format(sig, {"ticket": "x"}, guidance=guidance)[0]["content"]
    assert "When the final answer is ready, call `submit` with `team`, `contact`." in system
    assert "The available tools are: `on_call`, `submit`." in system
    assert "[[ ## completed ## ]]" in system


# --- renderer seams ---------------------------------------------------------------------


def test_system_renderer_extends_the_default() -> None:
    def terse(signature: imp.Signature, opts: dict[str, Any]) -> str:
        return "Answer tersely.\n\n" + opts["default_system"](signature, opts)

    system = chat.format(QA, {"question": "x"}, system_renderer=terse)[0]["content"]
    assert system == "Answer tersely.\n\n" + QA_SYSTEM


def test_output_renderer_arity_3_and_4() -> None:
    demos = [{"question": "2+2?", "answer": "4"}]

    def three(signature: imp.Signature, outputs: dict[str, Any], missing: str) -> str:
        return f"ANSWER={outputs['answer']}"

    def four(signature: imp.Signature, outputs: dict[str, Any], missing: str, opts: dict[str, Any]) -> str:
        return "(checked)\n" + opts["default_outputs"](signature, outputs, missing)

    assert chat.format(QA, {"question": "x"}, demos=demos, output_renderer=three)[2]["content"] == "ANSWER=4"
    assert (
        chat.format(QA, {"question": "x"}, demos=demos, output_renderer=four)[2]["content"]
        == "(checked)\n[[ ## answer ## ]]\n4\n\n[[ ## completed ## ]]\n"
    )


def test_input_section_renderer() -> None:
    def section(field: imp.Field, value: str) -> str:
        return f"{field.name.upper()}: {value}"

    assert (
        chat.format(QA, {"question": "x"}, input_section_renderer=section, response_instruction=False)[-1]["content"]
        == "QUESTION: x"
    )


# --- parsing ----------------------------------------------------------------------------


def test_parse_reads_sections_and_the_first_wins() -> None:
    sig = imp.signature("q -> a, b: int")
    reply = "preamble\n[[ ## a ## ]]\nfirst line\nsecond line\n[[ ## b ## ]] 7\n[[ ## a ## ]]\nignored\n[[ ## completed ## ]]"
    assert chat.parse(sig, reply) == {"a": "first line\nsecond line", "b": 7}


def test_parse_fills_defaults_and_optionals_but_requires_the_rest() -> None:
    class Sig(imp.Signature):
        q: str = imp.InputField()
        a: str = imp.OutputField()
        b: int = imp.OutputField(default=3)
        c: int | None = imp.OutputField()

    assert chat.parse(Sig, "[[ ## a ## ]]\nhi") == {"a": "hi", "b": 3, "c": None}
    with pytest.raises(imp.AdapterParseError, match="missing output field"):
        chat.parse(Sig, "[[ ## b ## ]]\n4")


def test_a_reply_with_no_section_is_an_error_even_when_every_output_has_a_default() -> None:
    class Sig(imp.Signature):
        q: str = imp.InputField()
        b: int = imp.OutputField(default=3)
        c: str | None = imp.OutputField()

    with pytest.raises(imp.AdapterParseError, match="no output fields"):
        chat.parse(Sig, "I think the answer is 3.")


def test_parse_accepts_a_mapping_or_a_prediction() -> None:
    sig = imp.signature("q -> n: int")
    assert chat.parse(sig, {"n": "5"}) == {"n": 5}
    assert chat.parse(sig, imp.Prediction({"n": 6})) == {"n": 6}


STEP = imp.signature("question -> next_thought: str | None, answer: str | None").with_metadata(
    text_field="next_thought"
)


def test_text_field_takes_a_marker_free_reply() -> None:
    assert chat.parse(STEP, "I will look it up.") == {"next_thought": "I will look it up.", "answer": None}


@pytest.mark.parametrize(
    "reply",
    [
        "Thinking...\n[[ ## other ## ]]\nx",  # any marker line
        "Here: <answer>42</answer>",  # an opening tag for an output
        'Result: {"answer": "42"}',  # a JSON object with an output key
        "   \n  ",  # blank
    ],
)
def test_text_field_exception_is_narrow(reply: str) -> None:
    with pytest.raises(imp.AdapterParseError):
        chat.parse(STEP, reply)


def test_text_field_still_reads_markers() -> None:
    assert chat.parse(STEP, "[[ ## answer ## ]]\n42") == {"next_thought": None, "answer": "42"}


def test_without_metadata_plain_text_is_an_error() -> None:
    with pytest.raises(imp.AdapterParseError):
        chat.parse(imp.signature("question -> next_thought"), "I will look it up.")
