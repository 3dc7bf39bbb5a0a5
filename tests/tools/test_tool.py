"""`tool` and `Tool`: names, descriptions, schemas from type hints, specs and runners."""

from __future__ import annotations

import enum
from typing import Annotated, Any, Literal

import pytest
from pydantic import BaseModel, Field

from imp.tools import Tool, tool


class Severity(enum.Enum):
    LOW = "low"
    HIGH = "high"


class Owner(BaseModel):
    name: str
    title: str = "engineer"


def test_decorator_takes_name_and_first_docstring_paragraph() -> None:
    @tool
    def on_call(team: Literal["atlas", "harbor"]) -> str:
        """Look up the on-call engineer
        for a squad.

        This paragraph is not part of the description.
        """
        return team

    assert isinstance(on_call, Tool)
    assert on_call.name == "on_call"
    assert on_call.description == "Look up the on-call engineer for a squad."
    assert on_call.parameters["properties"]["team"] == {"enum": ["atlas", "harbor"], "type": "string"}
    assert on_call.parameters["required"] == ["team"]
    assert on_call.timeout is None and on_call.sequential is False


def test_decorator_with_options() -> None:
    @tool(name="page", description="Page an engineer.", timeout=2.5, sequential=True, metadata={"risk": "high"})
    def page_someone(name: str) -> str:
        """Ignored docstring."""
        return name

    assert (page_someone.name, page_someone.description) == ("page", "Page an engineer.")
    assert page_someone.timeout == 2.5 and page_someone.sequential is True
    assert page_someone.metadata == {"risk": "high"}


def test_schema_from_hints_covers_enum_nested_model_defaults_and_optional() -> None:
    @tool
    def file_ticket(
        title: Annotated[str, Field(description="A short title", min_length=3)],
        severity: Severity = Severity.LOW,
        owner: Owner | None = None,
        tags: list[str] | None = None,
        count: int = 1,
    ) -> str:
        """File a ticket."""
        return title

    params = file_ticket.parameters
    props = params["properties"]
    assert params["type"] == "object" and params["additionalProperties"] is False
    assert params["required"] == ["title"]
    assert props["title"] == {"description": "A short title", "minLength": 3, "type": "string"}
    assert props["severity"]["default"] == "low"
    assert params["$defs"]["Severity"] == {"enum": ["low", "high"], "type": "string"}
    assert props["owner"]["anyOf"][1] == {"type": "null"}
    # A property named "title" survives the title stripping; generated titles do not.
    assert "title" in params["$defs"]["Owner"]["properties"]
    assert "title" not in params and "title" not in params["$defs"]["Owner"]
    assert props["count"] == {"default": 1, "type": "integer"}


def test_explicit_schema_is_kept_as_given() -> None:
    schema = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
    page = tool(lambda name: f"paged {name}", name="page", description="Page an engineer.", schema=schema)
    assert page.parameters == schema
    assert page.arguments_model is None


def test_spec_is_the_openai_function_tool_dict() -> None:
    @tool
    def ping() -> str:
        """Ping."""
        return "pong"

    assert ping.spec() == {
        "type": "function",
        "function": {"name": "ping", "description": "Ping.", "parameters": ping.spec()["function"]["parameters"]},
    }
    bare = tool(lambda: "x", name="bare", schema={})
    assert bare.spec()["function"]["parameters"] == {"type": "object", "properties": {}}


def test_with_runner_keeps_what_the_model_sees() -> None:
    @tool(timeout=3)
    def on_call(team: Literal["atlas", "harbor"]) -> str:
        """Look up the on-call engineer."""
        return "Maya"

    def paging(team: str) -> str:
        return f"paged {team}"

    other = on_call.with_runner(paging)
    assert other.runner is paging
    assert other.spec() == on_call.spec()
    assert other.timeout == 3
    assert other.arguments_model is on_call.arguments_model
    assert on_call.runner is not paging  # the original is unchanged


def test_submit_is_reserved_unless_internal() -> None:
    def submit(answer: str) -> str:
        return answer

    with pytest.raises(ValueError, match="reserved"):
        tool(submit)
    assert tool(submit, internal=True).name == "submit"


@pytest.mark.parametrize("bad", ["", "has space", "x" * 65, "dot.name"])
def test_names_are_checked(bad: str) -> None:
    with pytest.raises(ValueError, match="tool name"):
        tool(lambda: None, name=bad, schema={})


def test_lambda_needs_a_name() -> None:
    with pytest.raises(ValueError, match="name="):
        tool(lambda: None)


def test_var_arguments_need_an_explicit_schema() -> None:
    def loose(*args: Any, **kwargs: Any) -> None:
        return None

    with pytest.raises(TypeError, match="schema"):
        tool(loose)
    assert tool(loose, schema={"type": "object"}).name == "loose"


def test_mapping_style_needs_a_schema() -> None:
    def handler(args: dict[str, Any]) -> None:
        return None

    with pytest.raises(ValueError, match="schema"):
        tool(handler, call_with="mapping")


def test_bad_timeout_and_non_object_schema_are_refused() -> None:
    with pytest.raises(ValueError, match="timeout"):
        tool(lambda: None, name="t", schema={}, timeout=0)
    with pytest.raises(ValueError, match="object"):
        tool(lambda: None, name="t", schema={"type": "string"})


def test_tool_is_frozen() -> None:
    t = tool(lambda: None, name="t", schema={})
    with pytest.raises(AttributeError):
        t.name = "other"  # type: ignore[misc]
    with pytest.raises(TypeError):
        t.parameters["x"] = 1  # type: ignore[index]


def test_async_runner_is_detected() -> None:
    async def fetch() -> str:
        return "x"

    assert tool(fetch).is_async
    assert not tool(lambda: None, name="s", schema={}).is_async


def test_google_style_args_describe_parameters() -> None:
    @tool
    def page(name: str, urgent: bool = False, note: Annotated[str, Field(description="kept")] = "") -> str:
        """Page an engineer.

        Args:
            name: Who to page,
                by first name.
            urgent (bool): Whether to wake them.
            note: Not used, the Field description wins.

        Returns:
            What happened.
        """
        return name

    props = page.parameters["properties"]
    assert page.description == "Page an engineer."
    assert props["name"]["description"] == "Who to page, by first name."
    assert props["urgent"]["description"] == "Whether to wake them."
    assert props["note"]["description"] == "kept"
