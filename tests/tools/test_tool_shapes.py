"""Every shape of tool a user brings (as DSPy's and pydantic-ai's own tool tests do): each docstring
style, defaults, Optional, Literal, enums, nested models, async tools, callable objects, methods and
partials; what the model is shown, and that a model's JSON call reaches the function typed."""

from __future__ import annotations

import enum
import functools
from collections.abc import Awaitable, Callable
from typing import Annotated, Any, Literal

import pytest
from pydantic import BaseModel, Field

from imp.records import ToolCall
from imp.tools import Tool, run_tool_calls, tool

Run = Callable[[Callable[[], Awaitable[Any]]], Any]


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


class Address(BaseModel):
    street: str
    city: str
    is_primary: bool = False


class Contact(BaseModel):
    email: str
    phone: str | None = None
    addresses: list[Address]


def google(foo: int, bar: str = "x") -> str:
    """Do foobar stuff, a lot.

    Args:
        foo: The foo thing.
        bar: The bar thing.
    """
    return f"{foo} {bar}"


def google_only_args(foo: int, bar: Annotated[str, Field(description="from fields")]) -> str:
    """Args:
    foo: The foo thing.
    bar: The bar thing.
    """
    return f"{foo} {bar}"


def google_no_body(foo: int, bar: Annotated[str, Field(description="from fields")]) -> str:
    """
    Args:
        foo: The foo thing.
        bar: The bar thing.
    """
    return f"{foo} {bar}"


def numpy(*, foo: int, bar: str) -> str:
    """Numpy style docstring.

    Parameters
    ----------
    foo : int
        The foo thing.
    bar : str
        The bar thing.
    """
    return f"{foo} {bar}"


def sphinx(foo: int) -> str:
    """Sphinx style docstring.

    :param foo: The foo thing.
    """
    return str(foo)


def sphinx_with_returns(x: int) -> str:
    """A sphinx function with returns.

    :param x: The input value.
    :rtype: str
    :return: The result as a string with type.
    """
    return str(x)


async def async_google(foo: int, bar: str = "x") -> str:
    """An async one.

    Args:
        foo: The foo thing.
        bar: The bar thing.
    """
    return f"{foo} {bar}"


STYLES: dict[str, tuple[Callable[..., Any], str, dict[str, str]]] = {
    "google": (google, "Do foobar stuff, a lot.", {"foo": "The foo thing.", "bar": "The bar thing."}),
    "google, only Args": (google_only_args, "", {"foo": "The foo thing.", "bar": "from fields"}),
    "google, blank first line": (google_no_body, "", {"foo": "The foo thing.", "bar": "from fields"}),
    "numpy": (numpy, "Numpy style docstring.", {"foo": "The foo thing.", "bar": "The bar thing."}),
    "sphinx": (sphinx, "Sphinx style docstring.", {"foo": "The foo thing."}),
    "sphinx with returns": (sphinx_with_returns, "A sphinx function with returns.", {"x": "The input value."}),
    "async google": (async_google, "An async one.", {"foo": "The foo thing.", "bar": "The bar thing."}),
}


@pytest.mark.parametrize("style", list(STYLES))
def test_every_docstring_style_describes_the_parameters(style: str) -> None:
    fn, summary, described = STYLES[style]
    made = tool(fn)
    assert made.description == summary
    props = made.parameters["properties"]
    assert {name: prop.get("description") for name, prop in props.items()} == described
    # The description sits beside the type; the type is untouched.
    for prop in props.values():
        assert prop["type"] in ("integer", "string")
    assert made.spec()["function"]["parameters"]["properties"] == {k: dict(v) for k, v in props.items()}


def test_defaults_optional_literal_enum_and_nested_models() -> None:
    def reach(
        contact: Contact,
        color: Color = Color.RED,
        mode: Literal["fast", "slow"] = "fast",
        limit: int | None = None,
        notes: list[Address] | None = None,
    ) -> str:
        """Reach someone.

        Args:
            contact: Who, with where.
            color: Which color.
            mode: How.
            limit: At most this many.
            notes: Extra addresses.
        """
        return contact.email

    params = tool(reach).parameters
    props = params["properties"]
    assert params["required"] == ["contact"]
    assert props["contact"] == {"description": "Who, with where.", "$ref": "#/$defs/Contact"}
    assert props["color"] == {"description": "Which color.", "$ref": "#/$defs/Color", "default": "red"}
    assert props["mode"] == {"description": "How.", "default": "fast", "enum": ["fast", "slow"], "type": "string"}
    assert props["limit"]["anyOf"] == [{"type": "integer"}, {"type": "null"}]
    assert props["limit"]["default"] is None and props["limit"]["description"] == "At most this many."
    assert props["notes"]["anyOf"][0] == {"items": {"$ref": "#/$defs/Address"}, "type": "array"}
    contact = params["$defs"]["Contact"]
    assert contact["properties"]["phone"]["anyOf"] == [{"type": "string"}, {"type": "null"}]
    assert params["$defs"]["Address"]["properties"]["is_primary"]["default"] is False


class Adder:
    """Adds numbers (the class docstring)."""

    def __init__(self, offset: int) -> None:
        self.offset = offset

    def __call__(self, a: int, b: int = 0) -> int:
        """Add two numbers.

        Args:
            a: The first.
            b: The second.
        """
        return a + b + self.offset

    def scaled(self, x: int, color: Color = Color.RED) -> str:
        """Scale a number.

        :param x: The number.
        :param color: Its color.
        """
        return f"{x * self.offset} {color.value}"

    @classmethod
    def named(cls, who: str) -> str:
        """Name someone.

        Parameters
        ----------
        who : str
            Whom.
        """
        return f"{cls.__name__}:{who}"

    @staticmethod
    def doubled(z: float) -> float:
        """Double it.

        Args:
            z: The value.
        """
        return z * 2


class AsyncAdder:
    async def __call__(self, a: int, b: int) -> int:
        """Add asynchronously."""
        return a + b


class Undocumented:
    """What the class says."""

    def __call__(self, a: int) -> int:
        return a


def test_a_callable_object_given_a_name_is_read_through_its_call() -> None:
    made = tool(Adder(10), name="add")
    assert made.name == "add"
    assert made.description == "Add two numbers."
    assert made.parameters["properties"] == {
        "a": {"description": "The first.", "type": "integer"},
        "b": {"description": "The second.", "default": 0, "type": "integer"},
    }
    assert made.parameters["required"] == ["a"]
    assert tool(AsyncAdder(), name="add_async").is_async
    # Without a docstring of its own, `__call__` borrows its class's.
    assert tool(Undocumented(), name="same").description == "What the class says."
    with pytest.raises(ValueError, match="name="):
        tool(Adder(1))


def test_methods_and_partials_are_tools() -> None:
    adder = Adder(3)
    scaled = tool(adder.scaled)
    assert scaled.description == "Scale a number."
    assert list(scaled.parameters["properties"]) == ["x", "color"]  # no `self`
    assert scaled.parameters["properties"]["x"]["description"] == "The number."
    named = tool(Adder.named)
    assert list(named.parameters["properties"]) == ["who"]
    assert named.parameters["properties"]["who"]["description"] == "Whom."
    doubled = tool(Adder.doubled)
    assert doubled.parameters["properties"]["z"] == {"description": "The value.", "type": "number"}
    assert tool(functools.partial(google, bar="y"), name="google_y").description == "Do foobar stuff, a lot."
    assert tool(functools.partial(Adder(1), b=2), name="add_two").description == "Add two numbers."
    partial = tool(functools.partial(adder.scaled, color=Color.BLUE), name="scaled_blue")
    assert partial.description == "Scale a number."
    assert partial.parameters["properties"]["x"] == {"description": "The number.", "type": "integer"}


@pytest.mark.parametrize(
    ("made", "arguments", "expected"),
    [
        (tool(google), '{"foo": 1}', "1 x"),
        (tool(numpy), {"foo": 2, "bar": "y"}, "2 y"),
        (tool(async_google), {"foo": 3}, "3 x"),
        (tool(Adder(10), name="add"), '{"a": 1, "b": 2}', "13"),
        (tool(AsyncAdder(), name="add_async"), {"a": 1, "b": 2}, "3"),
        (tool(Adder(2).scaled), {"x": 4, "color": "blue"}, "8 blue"),
        (tool(Adder.named), {"who": "Ada"}, "Adder:Ada"),
        (tool(Adder.doubled), {"z": 1.5}, "3.0"),
        (tool(functools.partial(Adder(2).scaled, color=Color.BLUE), name="scaled_blue"), {"x": 1}, "2 blue"),
    ],
    ids=["google", "numpy", "async", "object", "async object", "method", "classmethod", "staticmethod", "partial"],
)
def test_each_shape_runs_with_typed_arguments(run: Run, made: Tool, arguments: Any, expected: str) -> None:
    async def body() -> Any:
        return await run_tool_calls([ToolCall(id="c1", name=made.name, arguments=arguments)], [made])

    [result] = run(body)
    assert result.outcome == "result", result
    assert str(result.result) == expected


def test_a_nested_model_argument_arrives_as_the_model(run: Run) -> None:
    seen: list[Any] = []

    def reach(contact: Contact) -> str:
        seen.append(contact)
        return "ok"

    async def body() -> Any:
        call = ToolCall(
            id="c", name="reach", arguments={"contact": {"email": "a@b", "addresses": [{"street": "s", "city": "c"}]}}
        )
        return await run_tool_calls([call], [tool(reach)])

    [result] = run(body)
    assert result.outcome == "result"
    assert isinstance(seen[0], Contact) and isinstance(seen[0].addresses[0], Address)


@pytest.mark.parametrize(
    "data",
    [
        {"id": "c", "name": "f", "arguments": ""},
        {"id": "c", "name": "f", "arguments": "  "},
        {"id": "c", "function": {"name": "f", "arguments": ""}},
        {"id": "c", "name": "f", "arguments": None},
        {"id": "c", "name": "f"},
    ],
)
def test_tool_call_load_reads_empty_arguments_as_an_empty_object(data: dict[str, Any]) -> None:
    loaded = ToolCall.load(data)
    assert loaded.name == "f" and dict(loaded.arguments) == {}


def test_tool_call_load_still_refuses_arguments_that_are_not_an_object() -> None:
    with pytest.raises((TypeError, ValueError)):
        ToolCall.load({"id": "c", "name": "f", "arguments": "[1, 2]"})


def test_a_default_without_a_type_hint_is_kept_untyped() -> None:
    def foo(x=100):  # type: ignore[no-untyped-def]
        return x

    assert tool(foo).parameters["properties"] == {"x": {"default": 100}}


def test_nested_lists_of_models_and_typed_dicts_arrive_typed(run: Run) -> None:
    from typing import TypedDict

    class Point(TypedDict):
        x: int
        y: int

    seen: list[Any] = []

    def draw(shapes: list[list[Address]], origin: Point) -> str:
        """Draw.

        Args:
            shapes: Rows of addresses.
            origin (Point): Where to start.
        """
        seen.append((shapes, origin))
        return "ok"

    made = tool(draw)
    assert made.parameters["properties"]["origin"]["description"] == "Where to start."
    arguments = {"shapes": [[{"street": "s", "city": "c"}]], "origin": {"x": 1, "y": 2}}

    async def body() -> Any:
        return await run_tool_calls([ToolCall("c", "draw", arguments)], [made])

    [result] = run(body)
    assert result.outcome == "result", result
    shapes, origin = seen[0]
    assert shapes == [[Address(street="s", city="c")]] and origin == {"x": 1, "y": 2}
