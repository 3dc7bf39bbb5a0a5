"""imp.save / imp.load: round trips, checksum, atomic 0600 writes, no credentials, functions by name."""

from __future__ import annotations

import enum
import json
import os
import re
import stat
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pydantic
import pytest
from runtime_lms import answering_lm, echo

import imp
from imp.models import lm as make_lm
from imp.models.base import LMResponse, Message
from imp.programs.base import Program
from imp.saving import (
    ChecksumError,
    Loader,
    LoadError,
    ProgramKind,
    SaveError,
    Saver,
    dump_program,
    load,
    load_program,
    register_program_kind,
    save,
)
from imp.saving._file import _checksum

SECRET = "sk-live-abcdefghijklmnopqrstuvwxyz0123"
TWICE_SIGNATURE = imp.signature("question -> answer")


def shout_renderer(field: imp.Field, text: str) -> str:
    return f"## {field.name.upper()}\n{text}"


def full_program() -> imp.Predict:
    return imp.predict(
        imp.signature("question, context -> answer: int", "Answer with a number."),
        adapter=imp.JSONAdapter(),
        demos=[{"question": "1+1", "context": "", "answer": 2}],
        config={"temperature": 0.2, "max_tokens": 50, "api_key": SECRET, "extra_headers": {"X-Team": "t"}},
        adapter_opts={"input_section_renderer": shout_renderer, "agent_line": None, "omit_empty_request": True},
        json_fallback=False,
    )


def test_a_predict_round_trips(tmp_path: Path) -> None:
    program = full_program()
    path = save(program, tmp_path / "qa.json")
    loaded = load(path, registry={"shout_renderer": shout_renderer})
    assert type(loaded) is imp.Predict
    assert loaded.signature == program.signature
    assert loaded.demos == program.demos
    assert dict(loaded.config) == {"temperature": 0.2, "max_tokens": 50}
    assert isinstance(loaded.adapter, imp.JSONAdapter) and loaded.lm is None
    assert loaded.adapter_opts == {
        "input_section_renderer": shout_renderer,
        "agent_line": None,
        "omit_empty_request": True,
    }
    assert loaded.json_fallback is False


@pytest.mark.parametrize("adapter", [imp.ChatAdapter(), imp.JSONAdapter(), imp.XMLAdapter()])
def test_a_guidance_option_round_trips_and_formats_as_before(tmp_path: Path, adapter: imp.Adapter) -> None:
    guidance = imp.Guidance(lines=("Answer in one word.", "Cite nothing."), text_answer=False)
    program = imp.predict("question -> answer", adapter=adapter, adapter_opts={"guidance": guidance})
    path = save(program, tmp_path / "guided.json")
    assert json.loads(path.read_text())["program"]["adapter_opts"]["guidance"] == {
        "lines": ["Answer in one word.", "Cite nothing."],
        "text_answer": False,
    }
    loaded = load(path)
    assert loaded.adapter_opts == {"guidance": guidance}
    assert loaded.render(question="2+2?").messages == program.render(question="2+2?").messages


@pytest.mark.parametrize(
    ("guidance", "message"),
    [
        ({"lines": ["x"], "tool_names": ["a"]}, "unknown keys ['tool_names']"),
        ({"lines": "x"}, "guidance is"),
        ({"lines": ["x"], "text_answer": "yes"}, "text_answer is true or false"),
    ],
)
def test_a_saved_guidance_of_another_shape_is_refused(tmp_path: Path, guidance: Any, message: str) -> None:
    path = save(imp.predict("question -> answer"), tmp_path / "qa.json")
    document = json.loads(path.read_text())
    document["program"]["adapter_opts"] = {"guidance": guidance}
    document["checksum"] = _checksum(document)  # a plain SHA-256: anyone can recompute it
    path.write_text(json.dumps(document))
    with pytest.raises(LoadError, match=re.escape(message)):
        load(path)


def test_the_loaded_program_runs_and_formats_as_before(tmp_path: Path) -> None:
    program = full_program()
    save(program, tmp_path / "qa.json")
    lm = imp.ScriptedLM([{"answer": 3}, {"answer": 3}])
    loaded = load(tmp_path / "qa.json", registry={"shout_renderer": shout_renderer}, lm=lm)
    assert imp.call_sync(loaded, question="1+2", context="").answer == 3
    imp.call_sync(program.with_lm(lm), question="1+2", context="")
    assert lm.requests[0].messages == lm.requests[1].messages
    assert "## QUESTION" in json.dumps(lm.requests[0].messages)


def test_a_chain_of_thought_keeps_its_kind_and_reasoning_once(tmp_path: Path) -> None:
    program = imp.chain_of_thought("question -> answer")
    loaded = load(save(program, tmp_path / "cot.json"))
    assert type(loaded) is imp.ChainOfThought
    assert list(loaded.signature.outputs) == ["reasoning", "answer"]


def test_the_file_is_versioned_checksummed_and_private(tmp_path: Path) -> None:
    target = tmp_path / "qa.json"
    target.write_text("old")
    os.chmod(target, 0o644)
    save(imp.predict("question -> answer"), target)
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    assert os.listdir(tmp_path) == ["qa.json"]  # the temporary file was renamed into place
    document = json.loads(target.read_text())
    assert document["format"] == "imp.program" and document["schema_version"] == 1
    assert document["checksum"].startswith("sha256:") and len(document["checksum"]) == 7 + 64
    assert document["program"]["kind"] == "predict"


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path: Path) -> None:
    target = tmp_path / "qa.json"
    save(imp.predict("question -> answer"), target)
    before = target.read_text()
    with pytest.raises(SaveError):
        save(imp.predict("question -> answer", config={"x": object()}), target)
    assert target.read_text() == before and os.listdir(tmp_path) == ["qa.json"]


def test_a_hand_edited_file_fails_its_checksum(tmp_path: Path) -> None:
    path = save(full_program(), tmp_path / "qa.json")
    document = json.loads(path.read_text())
    document["program"]["demos"][0]["answer"] = 3
    path.write_text(json.dumps(document, indent=2))
    with pytest.raises(ChecksumError, match=r"qa\.json: .*does not match its checksum.*edited by hand"):
        load(path, registry={"shout_renderer": shout_renderer})


def test_files_that_are_not_saved_programs_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "x.json"
    path.write_text("{not json")
    with pytest.raises(LoadError, match="is not JSON"):
        load(path)
    path.write_text('{"format": "something else"}')
    with pytest.raises(LoadError, match="not a saved imp program"):
        load(path)
    document = dump_program(imp.predict("question -> answer"))
    document["schema_version"] = 99
    with pytest.raises(LoadError, match="schema version 99; this imp reads schema version 1"):
        load_program(document)
    document = dump_program(imp.predict("question -> answer"))
    document["program"]["kind"] = "mystery"
    document["checksum"] = dump_program_checksum(document)
    with pytest.raises(LoadError, match="unknown program kind 'mystery'"):
        load_program(document)


def dump_program_checksum(document: Mapping[str, Any]) -> str:
    from imp.saving._file import _checksum

    return _checksum(document)


def test_a_scripted_lm_refuses_to_be_saved(tmp_path: Path) -> None:
    with pytest.raises(SaveError, match=r"ScriptedLM\(scripted:scripted\), a scripted LM.*include_lm=False"):
        save(imp.predict("question -> answer", lm=imp.ScriptedLM(["x"])), tmp_path / "a.json")
    with pytest.raises(SaveError, match="StaticLM"):
        save(imp.predict("question -> answer", lm=answering_lm(echo)), tmp_path / "a.json")
    assert not (tmp_path / "a.json").exists()
    path = save(imp.predict("question -> answer", lm=imp.ScriptedLM(["x"])), tmp_path / "a.json", include_lm=False)
    assert load(path).lm is None  # type: ignore[attr-defined]


def test_an_lm_from_imp_lm_is_saved_without_credentials_or_headers(tmp_path: Path) -> None:
    client = make_lm(
        "openai:gpt-4o-mini",
        api_key=SECRET,
        base_url="https://user:hunter22@llm.example.com/v1?api_key=abc123&region=eu",
        headers={"X-Custom": "header-value"},
        temperature=0.1,
        max_tokens=300,
        extra_body={"provider_token": "tok-1234567890", "top_k": 4},
    )
    path = save(imp.predict("question -> answer", lm=client), tmp_path / "qa.json")
    text = path.read_text()
    for leaked in (SECRET, "hunter22", "abc123", "header-value", "X-Custom", "tok-1234567890", "api_key"):
        assert leaked not in text
    saved = json.loads(text)["program"]["lm"]
    assert saved == {
        "provider": "openai",
        "model": "gpt-4o-mini",
        "options": {"temperature": 0.1, "max_tokens": 300, "extra_body": {"top_k": 4}},
        "base_url": "https://llm.example.com/v1?region=eu",
    }
    with pytest.raises(LoadError, match="trust_endpoint"):  # the file names an endpoint: the caller must say
        load(path)
    loaded = load(path, trust_endpoint="https://llm.example.com/v1?region=eu")
    rebuilt = loaded.lm  # type: ignore[attr-defined]
    assert (rebuilt.provider, rebuilt.model, rebuilt.base_url) == ("openai", "gpt-4o-mini", saved["base_url"])
    assert rebuilt.defaults == saved["options"]


def test_a_default_base_url_is_not_written(tmp_path: Path) -> None:
    client = make_lm("anthropic:claude-sonnet-4-6", api_key=SECRET)
    saved = json.loads(save(imp.predict("q -> a", lm=client), tmp_path / "p.json").read_text())["program"]["lm"]
    assert saved == {"provider": "anthropic", "model": "claude-sonnet-4-6", "options": {}}


class HomeMadeLM(imp.LM):
    provider = "home"
    model = "made"

    async def request(self, messages: Any, **options: Any) -> LMResponse:
        return LMResponse(text="")


def test_other_lms_adapters_and_programs_are_refused(tmp_path: Path) -> None:
    with pytest.raises(SaveError, match=r"HomeMadeLM\(home:made\), which is not an imp\.lm"):
        save(imp.predict("q -> a", lm=HomeMadeLM()), tmp_path / "p.json")

    class LoudAdapter(imp.ChatAdapter):
        pass

    with pytest.raises(SaveError, match="adapter LoudAdapter cannot be saved"):
        save(imp.predict("q -> a", adapter=LoudAdapter()), tmp_path / "p.json")

    @dataclass(frozen=True, eq=False)
    class Custom(imp.Predict):
        pass

    with pytest.raises(SaveError, match="does not know how to save a Custom"):
        save(Custom(imp.signature("q -> a")), tmp_path / "p.json")
    with pytest.raises(TypeError, match="saves an imp program"):
        save("program", tmp_path / "p.json")  # type: ignore[arg-type]


def test_functions_are_saved_by_name_and_resolved_from_the_registry(tmp_path: Path) -> None:
    lam = lambda field, text: text  # noqa: E731
    with pytest.raises(SaveError, match=r"adapter_opts\.input_section_renderer .*registry="):
        save(imp.predict("q -> a", adapter_opts={"input_section_renderer": lam}), tmp_path / "p.json")
    path = save(
        imp.predict("q -> a", adapter_opts={"input_section_renderer": lam}),
        tmp_path / "p.json",
        registry={"plain": lam},
    )
    assert json.loads(path.read_text())["program"]["adapter_opts"] == {"input_section_renderer": {"$function": "plain"}}
    assert load(path, registry={"plain": lam}).adapter_opts["input_section_renderer"] is lam  # type: ignore[attr-defined]
    with pytest.raises(LoadError, match=r"function 'plain', which is not in the registry.*registry=\{'plain': fn\}"):
        load(path)


class Verdict(pydantic.BaseModel):
    label: str
    confidence: float


def test_custom_types_come_back_through_the_registry(tmp_path: Path) -> None:
    class Judge(imp.Signature):
        """Judge the claim."""

        claim: str = imp.InputField()
        verdict: Verdict = imp.OutputField()

    path = save(imp.predict(Judge), tmp_path / "judge.json")
    with pytest.raises(LoadError, match=r"registry=\{'ClassName': ClassName\}"):
        load(path)
    loaded = load(path, registry={"Verdict": Verdict})
    assert loaded.signature.outputs["verdict"].annotation is Verdict


def test_values_json_cannot_hold_are_refused_by_name(tmp_path: Path) -> None:
    with pytest.raises(SaveError, match=r"config\.x is a object"):
        save(imp.predict("q -> a", config={"x": object()}), tmp_path / "p.json")
    with pytest.raises(SaveError, match=r"demos\[0\]\.a is nan"):
        save(imp.predict("q -> a", demos=[{"q": "1", "a": float("nan")}]), tmp_path / "p.json")


@dataclass(frozen=True, eq=False)
class Twice(Program):
    """A program of another kind, holding a nested program and a function: how ReAct will register."""

    inner: imp.Predict
    combine: Any
    signature: imp.Signature = TWICE_SIGNATURE

    async def acall(self, inputs: dict[str, Any], **call_options: Any) -> imp.Prediction:
        first = await imp.call(self.inner, inputs)
        return imp.Prediction({"answer": self.combine(first.answer, first.answer)})


def _dump_twice(program: Twice, saver: Saver) -> dict[str, Any]:
    return {"inner": saver.program(program.inner), "combine": saver.function(program.combine, "combine")}


def _load_twice(data: Mapping[str, Any], loader: Loader) -> Program:
    inner = loader.program(data["inner"])
    assert isinstance(inner, imp.Predict)
    return Twice(inner, loader.function(data["combine"], "combine"))


@pytest.fixture
def twice_kind() -> Iterator[None]:
    from imp.saving._codec import KINDS as _KINDS

    register_program_kind(ProgramKind("twice", Twice, _dump_twice, _load_twice))
    try:
        yield
    finally:
        _KINDS.pop("twice", None)


def join(a: str, b: str) -> str:
    return f"{a}+{b}"


def test_a_new_program_kind_registers_itself(tmp_path: Path, twice_kind: None) -> None:
    program = Twice(imp.predict("question -> answer", config={"temperature": 0}), join)
    path = save(program, tmp_path / "twice.json")
    lm = imp.ScriptedLM([{"answer": "x"}])
    loaded = load(path, registry={"join": join}, lm=lm)
    assert isinstance(loaded, Twice) and loaded.inner.lm is lm and dict(loaded.inner.config) == {"temperature": 0}
    assert imp.call_sync(loaded, question="q").answer == "x+x"


def test_the_registry_names_functions_even_with_a_qualified_name(tmp_path: Path) -> None:
    def messages_of(m: list[Message]) -> str:
        return ""

    path = save(
        imp.predict("q -> a", adapter_opts={"system_renderer": join}),
        tmp_path / "p.json",
        registry={"my.join": join},
    )
    assert json.loads(path.read_text())["program"]["adapter_opts"]["system_renderer"] == {"$function": "my.join"}
    path = save(imp.predict("q -> a", adapter_opts={"system_renderer": join}), tmp_path / "p.json")
    assert json.loads(path.read_text())["program"]["adapter_opts"]["system_renderer"] == {"$function": "join"}
    with pytest.raises(SaveError, match="locals"):
        save(imp.predict("q -> a", adapter_opts={"system_renderer": messages_of}), tmp_path / "p.json")


def test_examples_as_demos_are_saved_as_their_fields(tmp_path: Path) -> None:
    demo = imp.Example(question="1+1", answer="2").with_inputs("question")
    loaded = load(save(imp.predict("question -> answer", demos=[demo]), tmp_path / "p.json"))
    assert loaded.demos == ({"question": "1+1", "answer": "2"},)  # type: ignore[attr-defined]


# --- secrets in what a program says, tools in the registry, ReActTrajectory --------------------------

KEYISH = "sk-proj-abcdefghijklmnopqrstuvwx0123"


def _passes_the_log_scan(text: str) -> bool:
    """The scan logs pass: redacting by value shape changes nothing."""
    from imp._redact import redact_text

    return redact_text(text) == text


def test_key_shaped_text_in_demos_and_instructions_is_redacted_in_the_file(tmp_path: Path) -> None:
    signature = imp.signature("question -> answer", f"Answer; the service key is {KEYISH}.")
    demos = [
        {"question": "connect to postgres://app:hunter2hunter2@db/x", "answer": "password=Tr0ub4dor3 works"},
        {"question": "plain question", "answer": "plain answer"},
    ]
    for program in (
        imp.predict(signature, demos=demos),
        imp.chain_of_thought(signature, demos=demos),
        imp.react(signature, [lookup_order], demos=demos),
    ):
        path = save(program, tmp_path / "p.json", include_lm=False)
        text = path.read_text()
        for secret in (KEYISH, "hunter2hunter2", "Tr0ub4dor3"):
            assert secret not in text
        assert _passes_the_log_scan(text)
        loaded = load(path, registry={"lookup_order": lookup_order})
        assert loaded.demos[1] == {"question": "plain question", "answer": "plain answer"}  # type: ignore[attr-defined]
        assert loaded.demos[0]["question"] == "connect to postgres://app:[REDACTED]@db/x"  # type: ignore[attr-defined]
        assert loaded.signature.instructions == "Answer; the service key is [REDACTED]."  # type: ignore[attr-defined]


def test_a_tool_description_with_a_secret_is_redacted_in_the_file(tmp_path: Path) -> None:
    secretive = imp.tool(lookup_order.runner, name="lookup", description=f"Look up; uses token={KEYISH}.")
    path = save(imp.react("question -> answer", [secretive]), tmp_path / "p.json", include_lm=False)
    assert KEYISH not in path.read_text() and _passes_the_log_scan(path.read_text())
    loaded = load(path, registry={"lookup_order": lookup_order})
    assert loaded.tools[0].description == "Look up; uses token=[REDACTED]."  # type: ignore[attr-defined]


class Priority(enum.Enum):
    LOW = "low"
    HIGH = "high"


SEEN: list[Any] = []


@imp.tool
def lookup_order(order: str, priority: Priority = Priority.LOW) -> str:
    """Look an order up.

    Args:
        order: The order id.
        priority: How urgent.
    """
    SEEN.append(priority)
    return f"{order}: shipped"


def test_a_registry_takes_tools_on_save_and_load(tmp_path: Path) -> None:
    program = imp.react("question -> answer", [lookup_order])
    path = save(program, tmp_path / "p.json", registry={"lookup": lookup_order}, include_lm=False)
    assert json.loads(path.read_text())["program"]["tools"][0]["runner"] == "lookup"
    loaded = load(path, registry={"lookup": lookup_order})
    [tool] = loaded.tools  # type: ignore[attr-defined]
    assert tool.runner is lookup_order.runner
    assert tool.arguments_model is lookup_order.arguments_model  # typed values still reach the function
    assert tool.spec() == lookup_order.spec()
    # A function works as before, and so does a tool saved without a registry, found by its name.
    assert load(path, registry={"lookup": lookup_order.runner}).tools[0].runner is lookup_order.runner  # type: ignore[attr-defined]
    plain = save(program, tmp_path / "plain.json", include_lm=False)
    assert load(plain, registry={"lookup_order": lookup_order}).tools[0].runner is lookup_order.runner  # type: ignore[attr-defined]


def test_a_loaded_tool_from_the_registry_gets_typed_arguments(tmp_path: Path) -> None:
    path = save(imp.react("question -> answer", [lookup_order]), tmp_path / "p.json", include_lm=False)
    loaded = load(path, registry={"lookup_order": lookup_order})
    lm = imp.ScriptedLM(
        [
            {"tool_calls": [{"name": "lookup_order", "arguments": {"order": "A1", "priority": "high"}}]},
            {"answer": "ok"},
        ],
        exhausted={"answer": "ok"},
    )
    SEEN.clear()
    imp.call_sync(loaded.with_lm(lm), question="Where is A1?")  # type: ignore[attr-defined]
    assert SEEN == [Priority.HIGH]


def test_registry_mistakes_are_named(tmp_path: Path) -> None:
    path = save(imp.react("question -> answer", [lookup_order]), tmp_path / "p.json", include_lm=False)
    with pytest.raises(LoadError, match=r"'lookup_order', which is not in the registry.*function or an @imp.tool"):
        load(path, registry={"other": lookup_order})
    with pytest.raises(LoadError, match=r"registry\['lookup_order'\] is a str, not a function or an @imp.tool"):
        load(path, registry={"lookup_order": "lookup_order"})


def _search(query: str) -> str:
    """Search the wiki."""
    return f"Paris is the capital of France ({query})."


def test_a_react_trajectory_round_trips_and_runs(tmp_path: Path) -> None:
    from imp.programs.react_trajectory import ReActTrajectory, react_trajectory

    program = react_trajectory(
        "question -> answer",
        [_search],
        adapter=imp.JSONAdapter(),
        demos=[{"question": "q", "answer": "a"}],
        config={"temperature": 0.3, "api_key": SECRET},
        max_iters=4,
        tool_policy=["_search", "finish"],
    )
    path = save(program, tmp_path / "rt.json", include_lm=False)
    assert SECRET not in path.read_text()
    assert json.loads(path.read_text())["program"]["kind"] == "react_trajectory"
    lm = imp.ScriptedLM(
        [
            {"next_thought": "look", "next_tool_name": "_search", "next_tool_args": {"query": "France"}},
            {"next_thought": "done", "next_tool_name": "finish", "next_tool_args": {}},
            {"reasoning": "From the trajectory.", "answer": "Paris"},
        ]
    )
    loaded = load(path, registry={"_search": _search}, lm=lm)
    assert type(loaded) is ReActTrajectory
    assert loaded.signature == program.signature and loaded.demos == program.demos
    assert [t.name for t in loaded.tools] == ["_search"] and loaded.tools[0].runner is _search
    assert loaded.tools[0].spec() == program.tools[0].spec()
    assert type(loaded.adapter) is imp.JSONAdapter and loaded.max_iters == 4
    assert loaded.config == {"temperature": 0.3} and loaded.tool_policy == ["_search", "finish"]
    prediction = imp.call_sync(loaded, question="Capital of France?")
    assert prediction.answer == "Paris"
    with pytest.raises(LoadError, match="_search"):
        load(path)


SAVED_BY_MAIN = Path(__file__).parent / "saved_by_main"


def _lookup(order: str) -> str:
    return f"{order}: shipped"


def test_programs_saved_before_the_saving_package_still_load() -> None:
    """Files written by imp before saving became a package (kept as fixtures) load the same."""
    predict = load(SAVED_BY_MAIN / "predict.json")
    assert type(predict) is imp.Predict and type(predict.adapter) is imp.JSONAdapter
    assert predict.signature.instructions == "Answer with a number."
    assert predict.demos == ({"question": "1+1", "context": "", "answer": 2},)
    assert predict.config == {"temperature": 0.2}
    cot = load(SAVED_BY_MAIN / "chain_of_thought.json")
    assert type(cot) is imp.ChainOfThought and cot.demos == ({"question": "q", "reasoning": "r", "answer": "a"},)
    react = load(SAVED_BY_MAIN / "react.json", registry={"lookup": _lookup})
    assert isinstance(react, imp.ReAct) and react.max_iters == 5
    assert [t.name for t in react.tools] == ["lookup"] and react.tools[0].runner is _lookup
    assert react.tool_policy == ["lookup", "submit"]
    # Loaded and saved again, each file keeps its meaning.
    for program, registry in ((predict, None), (cot, None), (react, {"lookup": _lookup})):
        again = dump_program(program, registry=registry)
        original = json.loads((SAVED_BY_MAIN / f"{again['program']['kind']}.json").read_text())
        assert again["program"] == original["program"]
