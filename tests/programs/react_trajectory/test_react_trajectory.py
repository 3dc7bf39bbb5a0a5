"""imp.ReActTrajectory: DSPy's older trajectory loop on imp.Predict, with imp's tools, policies and events."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import pytest

import imp
from imp.models.scripted import Step
from imp.programs.react_trajectory import FINISH, MAX_TRIMS, ReActTrajectory, react_trajectory
from imp.runtime.run import Event, run_scope
from imp.tools import AuthorizationRequest, tool

Run = Callable[[Callable[[], Awaitable[Any]]], Any]

LOOKUPS: list[str] = []


def _search(query: str) -> str:
    """Search the wiki."""
    LOOKUPS.append(query)
    return f"Paris is the capital of France ({query})."


search = tool(_search, name="search")


def step(tool_name: str, args: Mapping[str, Any] | None = None, thought: str = "thinking") -> dict[str, Any]:
    """One scripted step reply, as a mapping of the step's output fields."""
    return {"next_thought": thought, "next_tool_name": tool_name, "next_tool_args": dict(args or {})}


def extraction(answer: str, reasoning: str = "From the trajectory.") -> dict[str, Any]:
    return {"reasoning": reasoning, "answer": answer}


def user_text(request: Any) -> str:
    return str(request.messages[-1]["content"])


def program(lm: imp.LM, **options: Any) -> ReActTrajectory:
    return react_trajectory("question -> answer", [search], lm=lm, **options)


async def ask(prog: ReActTrajectory, **kwargs: Any) -> imp.Prediction:
    return await imp.call(prog, question="What is the capital of France?", **kwargs)


@pytest.fixture(autouse=True)
def _clear_lookups() -> None:
    LOOKUPS.clear()


# --- the finish path ---------------------------------------------------------------------


def test_finish_path_with_text_replies(run: Run) -> None:
    lm = imp.ScriptedLM(
        [
            "[[ ## next_thought ## ]]\nI should search.\n\n[[ ## next_tool_name ## ]]\nsearch\n\n"
            '[[ ## next_tool_args ## ]]\n{"query": "capital of France"}\n\n[[ ## completed ## ]]',
            "[[ ## next_thought ## ]]\nI know it.\n\n[[ ## next_tool_name ## ]]\nfinish\n\n"
            "[[ ## next_tool_args ## ]]\n{}\n\n[[ ## completed ## ]]",
            "[[ ## reasoning ## ]]\nThe search says Paris.\n\n[[ ## answer ## ]]\nParis\n\n[[ ## completed ## ]]",
        ]
    )
    prediction = run(lambda: ask(program(lm)))
    assert prediction.answer == "Paris"
    assert prediction.complete
    meta = prediction.metadata
    assert meta.termination_reason == "finish"
    assert meta.termination_cause is None
    assert meta.extra["reasoning"] == "The search says Paris."
    assert meta.extra["trajectory"] == {
        "thought_0": "I should search.",
        "tool_name_0": "search",
        "tool_args_0": {"query": "capital of France"},
        "observation_0": "Paris is the capital of France (capital of France).",
        "thought_1": "I know it.",
        "tool_name_1": "finish",
        "tool_args_1": {},
        "observation_1": "Completed.",
    }
    assert meta.lm_calls == 3 and meta.usage is not None and meta.usage.requests == 3
    assert LOOKUPS == ["capital of France"]
    first, second, third = lm.requests
    system = str(first.messages[0]["content"])
    assert "(1) search: Search the wiki." in system
    assert "(2) finish: Marks the task as complete" in system
    assert "`next_tool_name` (one of: search, finish)" in system
    assert "[[ ## trajectory ## ]]\n\n" in user_text(first)
    assert "[[ ## tool_name_0 ## ]]\nsearch" in user_text(second)
    assert "[[ ## observation_0 ## ]]\nParis is the capital" in user_text(second)
    assert "[[ ## observation_1 ## ]]\nCompleted." in user_text(third)
    assert "[[ ## reasoning ## ]]" in str(third.messages[0]["content"])


def test_signature_and_step_signature() -> None:
    prog = react_trajectory("question -> answer", [search])
    step_sig = prog.step_signature()
    assert list(step_sig.inputs) == ["question", "trajectory"]
    assert list(step_sig.outputs) == ["next_thought", "next_tool_name", "next_tool_args"]
    assert step_sig.instructions.startswith(prog.signature.instructions)
    assert isinstance(prog, imp.Program)


# --- max_iters ---------------------------------------------------------------------------


def test_max_iters_then_extraction(run: Run) -> None:
    lm = imp.ScriptedLM(
        [step("search", {"query": "a"}), step("search", {"query": "b"}), extraction("Paris")],
    )
    prediction = run(lambda: ask(program(lm, max_iters=2)))
    assert prediction.answer == "Paris"
    assert prediction.metadata.termination_reason == "extracted"
    assert prediction.metadata.termination_cause == "max_iters"
    assert LOOKUPS == ["a", "b"]
    assert "[[ ## observation_1 ## ]]" in user_text(lm.requests[-1])


def test_per_call_max_iters_and_zero(run: Run) -> None:
    lm = imp.ScriptedLM([step("search", {"query": "a"}), extraction("Paris")])
    prediction = run(lambda: ask(program(lm), max_iters=1))
    assert prediction.metadata.termination_cause == "max_iters"
    assert len(lm.requests) == 2

    lm = imp.ScriptedLM([extraction("Paris")])
    prediction = run(lambda: ask(program(lm), max_iters=0))
    assert prediction.answer == "Paris"
    assert prediction.metadata.extra["trajectory"] == {}
    assert len(lm.requests) == 1


# --- refused tools -----------------------------------------------------------------------


def test_bad_arguments_are_an_observation(run: Run) -> None:
    lm = imp.ScriptedLM([step("search", {"q": 1}), step(FINISH), extraction("unknown")])
    prediction = run(lambda: ask(program(lm)))
    observation = prediction.metadata.extra["trajectory"]["observation_0"]
    assert observation.startswith("Error: search got invalid arguments:")
    assert "`query`" in observation
    assert LOOKUPS == []
    assert prediction.metadata.termination_reason == "finish"


def test_unknown_tool_name_ends_the_loop_like_dspy(run: Run) -> None:
    # The tool name is a Literal of the roster: an unknown name fails the step's parse (and its
    # JSON fallback), and the loop goes to the extraction, as DSPy's does.
    lm = imp.ScriptedLM([step("browse", {"url": "x"}), step("browse", {"url": "x"}), extraction("Paris")])
    prediction = run(lambda: ask(program(lm)))
    assert prediction.answer == "Paris"
    assert prediction.metadata.termination_reason == "extracted"
    assert prediction.metadata.termination_cause == "parse_error"
    assert "must be one of: search, finish" in prediction.metadata.termination_error[0]
    assert len(lm.requests) == 3


def test_policy_refuses_a_tool(run: Run) -> None:
    lm = imp.ScriptedLM([step("search", {"query": "a"}), step(FINISH), extraction("unknown")])
    prediction = run(lambda: ask(program(lm, tool_policy=[FINISH])))
    assert prediction.metadata.extra["trajectory"]["observation_0"] == (
        "Error: search was not allowed; the tool policy does not permit it."
    )
    assert LOOKUPS == []


def test_policy_function_and_finish_is_subject_to_it(run: Run) -> None:
    def no_finish(call: imp.ToolCall) -> bool | str:
        return call.name != FINISH or "not yet"

    lm = imp.ScriptedLM([step(FINISH), extraction("Paris")])
    prediction = run(lambda: ask(program(lm, tool_policy=no_finish, max_iters=1)))
    assert prediction.metadata.extra["trajectory"]["observation_0"] == "Error: finish was not allowed; not yet."
    assert prediction.metadata.termination_cause == "max_iters"


# --- authorization -----------------------------------------------------------------------


def test_authorization_deny_and_finish_is_never_asked(run: Run) -> None:
    asked: list[str] = []

    def authorize(request: AuthorizationRequest) -> imp.Deny:
        asked.append(request.tool_name)
        return imp.Deny("the wiki is off limits")

    lm = imp.ScriptedLM([step("search", {"query": "a"}), step(FINISH), extraction("unknown")])
    prediction = run(lambda: ask(program(lm), authorize=authorize))
    assert prediction.metadata.extra["trajectory"]["observation_0"] == (
        "Error: search was not allowed; the wiki is off limits."
    )
    assert asked == ["search"]
    assert LOOKUPS == []
    assert prediction.metadata.termination_reason == "finish"


def test_authorization_through_run_scope_and_cancel(run: Run) -> None:
    lm = imp.ScriptedLM([step("search", {"query": "a"})])

    async def body() -> None:
        with run_scope(authorize=lambda request: imp.Cancel("stop everything")):
            await program(lm).acall({"question": "q"})

    with pytest.raises(imp.ExecutionCancelled, match="stop everything"):
        run(body)
    assert LOOKUPS == []


# --- context window ----------------------------------------------------------------------


class Overflowing:
    """Replies from a script, but refuses (context window) any request that shows one of `too_long`."""

    def __init__(self, steps: list[Step], too_long: tuple[str, ...]) -> None:
        self.steps = list(steps)
        self.too_long = too_long
        self.refused = 0

    def __call__(self, messages: list[Any], options: dict[str, Any]) -> Step:
        if any(marker in str(messages[-1]["content"]) for marker in self.too_long):
            self.refused += 1
            raise imp.LMError("prompt is too long", context_window_exceeded=True)
        return self.steps.pop(0)


def test_overflow_trims_the_oldest_steps(run: Run) -> None:
    script = Overflowing(
        [step("search", {"query": "a"}, "first"), step(FINISH, thought="second"), extraction("Paris")],
        too_long=("[[ ## thought_0 ## ]]",),
    )
    lm = imp.StaticLM(script)
    events: list[Event] = []

    async def body() -> imp.Prediction:
        with run_scope(on_event=events.append):
            return await program(lm).acall({"question": "q"})

    prediction = run(body)
    assert prediction.answer == "Paris"
    assert prediction.metadata.termination_reason == "finish"
    assert script.refused == 1
    assert prediction.metadata.context_projection == {
        "reason": "context_window_exceeded",
        "omitted_steps": 1,
        "recovery_requests": 1,
    }
    # the full trajectory is returned; later requests keep the oldest step out, numbering kept
    assert prediction.metadata.extra["trajectory"]["thought_0"] == "first"
    last = user_text(lm.requests[-1])
    assert "thought_0" not in last and "[[ ## thought_1 ## ]]\nsecond" in last
    projected = [e for e in events if e.kind == "context_projected"]
    assert [e.payload["omitted_steps"] for e in projected] == [1]


def test_overflow_with_nothing_to_trim(run: Run) -> None:
    script = Overflowing(
        [extraction("Paris")],
        too_long=("Respond with the corresponding output fields, starting with the field `[[ ## next_thought",),
    )
    prediction = run(lambda: ask(program(imp.StaticLM(script))))
    assert prediction.answer == "Paris"
    assert prediction.metadata.termination_reason == "extracted"
    assert prediction.metadata.termination_cause == "context_window_exceeded"
    assert prediction.metadata.context_projection is None


def test_overflow_gives_up_after_max_trims_and_extraction_overflows(run: Run) -> None:
    steps: list[Step] = [step("search", {"query": str(i)}, f"t{i}") for i in range(MAX_TRIMS + 2)]
    # the script answers five steps, then every request overflows however much is trimmed
    script = Overflowing(steps, too_long=())
    lm = imp.StaticLM(lambda messages, options: script(messages, options) if script.steps else _overflow())
    prediction = run(lambda: ask(program(lm, max_iters=MAX_TRIMS + 3)))
    assert not prediction.complete
    assert prediction.answer is None
    assert prediction.metadata.termination_reason == "incomplete"
    assert prediction.metadata.termination_cause == "context_window_exceeded"
    assert prediction.metadata.termination_error
    assert len(prediction.metadata.extra["trajectory"]) == 4 * (MAX_TRIMS + 2)
    # the sixth step: three trims, then it gives up; the extraction trims the rest, then gives up
    assert prediction.metadata.context_projection == {
        "reason": "context_window_exceeded",
        "omitted_steps": MAX_TRIMS + 2,
        "recovery_requests": MAX_TRIMS + 2,
    }
    assert len(lm.requests) == (MAX_TRIMS + 2) + (MAX_TRIMS + 1) + 3


def _overflow() -> Step:
    raise imp.LMError("prompt is too long", context_window_exceeded=True)


# --- events ------------------------------------------------------------------------------


def test_events_in_order(run: Run) -> None:
    lm = imp.ScriptedLM([step("search", {"query": "a"}, "look it up"), step(FINISH, thought="done"), extraction("P")])
    events: list[Event] = []
    run(lambda: ask(program(lm), on_event=events.append))
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
        "reasoning",
        "tool_call",
        "tool_result",
        "model_request",
        "run_finished",
    ]
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    result = events[5].payload
    assert result["tool_name"] == "search" and result["outcome"] == "result"
    assert events[-1].payload["termination_reason"] == "finish"
    assert events[-2].payload["extract"] is True


# --- construction ------------------------------------------------------------------------


def test_options_are_checked() -> None:
    with pytest.raises(TypeError, match="unknown option"):
        react_trajectory("question -> answer", [search], finish="submit")
    with pytest.raises(TypeError, match="config"):
        react_trajectory("question -> answer", [search], temperature=0.2)
    with pytest.raises(ValueError, match="reserved"):
        react_trajectory("question -> answer", [tool(lambda: "x", name="finish")])
    with pytest.raises(ValueError, match="trajectory"):
        react_trajectory("question, trajectory -> answer", [search])
    with pytest.raises(ValueError, match="max_iters"):
        react_trajectory("question -> answer", [search], max_iters=-1)
    with pytest.raises(TypeError, match="tool policy"):
        react_trajectory("question -> answer", [search], tool_policy=3)
    with pytest.raises(TypeError):
        react_trajectory("question -> answer", search)  # type: ignore[arg-type]


def test_missing_input_fails_before_any_request(run: Run) -> None:
    lm = imp.ScriptedLM([])
    with pytest.raises(imp.MissingInputError):
        run(lambda: imp.call(program(lm)))
    assert lm.requests == []


def test_config_reaches_every_request(run: Run) -> None:
    lm = imp.ScriptedLM([step(FINISH), extraction("Paris")])
    run(lambda: ask(program(lm, config={"temperature": 0.1}), config={"max_tokens": 50}))
    assert all(r.options.get("temperature") == 0.1 and r.options.get("max_tokens") == 50 for r in lm.requests)


# --- tools that fail, other adapters -----------------------------------------------------


async def _flaky(query: str) -> str:
    """Search a flaky index."""
    raise RuntimeError("index offline")


flaky = tool(_flaky, name="flaky")


def test_a_raising_async_tool_is_an_observation(run: Run) -> None:
    lm = imp.ScriptedLM([step("flaky", {"query": "a"}), step(FINISH), extraction("unknown")])
    prediction = run(lambda: imp.call(react_trajectory("question -> answer", [flaky], lm=lm), question="q"))
    assert prediction.metadata.extra["trajectory"]["observation_0"] == "Error: flaky failed: index offline"
    assert prediction.metadata.termination_reason == "finish"


def test_json_adapter_renders_the_trajectory(run: Run) -> None:
    lm = imp.ScriptedLM([step("search", {"query": "a"}), step(FINISH), extraction("Paris")])
    prediction = run(lambda: ask(program(lm, adapter=imp.JSONAdapter())))
    assert prediction.answer == "Paris"
    assert prediction.metadata.adapter == "JSONAdapter"
    assert "observation_0" in user_text(lm.requests[-1])


def test_a_failed_step_request_goes_to_the_extraction(run: Run) -> None:
    lm = imp.ScriptedLM([imp.LMError("upstream unavailable", status=503), extraction("Paris")])
    prediction = run(lambda: ask(program(lm)))
    assert prediction.answer == "Paris"
    assert prediction.metadata.termination_reason == "extracted"
    assert prediction.metadata.termination_cause == "prediction_error"
    assert "upstream unavailable" in prediction.metadata.termination_error[0]


def test_an_unreadable_extraction_is_incomplete(run: Run) -> None:
    lm = imp.ScriptedLM([step(FINISH), "no sections here", "still not JSON"])
    prediction = run(lambda: ask(program(lm)))
    assert not prediction.complete
    assert prediction.fields == {"answer": None}
    assert prediction.metadata.termination_reason == "incomplete"
    assert prediction.metadata.termination_cause == "parse_error"
    assert prediction.metadata.extra["trajectory"]["tool_name_0"] == FINISH


def test_a_plain_function_is_taken_as_a_tool_and_anything_else_is_refused() -> None:
    def lookup(ticket: str) -> str:
        """Look a ticket up."""
        return "atlas"

    program = react_trajectory("ticket -> team", [lookup])
    assert [t.name for t in program.tools] == ["lookup"] and program.tools[0].description == "Look a ticket up."
    with pytest.raises(TypeError, match=r"imp\.react_trajectory takes imp tools or functions, got int"):
        react_trajectory("ticket -> team", [3])  # type: ignore[list-item]
    with pytest.raises(TypeError, match=r"imp\.react takes imp tools or functions, got str"):
        imp.react("ticket -> team", ["lookup"])  # type: ignore[list-item]


async def test_a_budgets_tool_call_limit_counts_its_tools_but_not_finish() -> None:
    lm = imp.ScriptedLM([step("search", {"query": "a"}), step("finish"), extraction("Paris")])
    prediction = await ask(program(lm), budget=imp.Budget(tool_calls=1))
    assert prediction.answer == "Paris" and LOOKUPS == ["a"]
    lm = imp.ScriptedLM([step("search", {"query": "a"}), step("search", {"query": "b"}), step("finish")])
    with pytest.raises(imp.BudgetExceeded, match="tool_calls"):
        await ask(program(lm), budget=imp.Budget(tool_calls=1))
    assert LOOKUPS == ["a", "a"]
