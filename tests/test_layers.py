"""Every room has its place in one order, and imports only the rooms below it: at the top of a
module, inside a function, or under `if TYPE_CHECKING:` (a type-only import that points up is
allowed only where `UPWARD_TYPE_ONLY` lists it, with the reason). The bottom rooms are ordered
module by module as well. docs/architecture.md draws the same order.
"""

from __future__ import annotations

import importlib
from typing import Any

import import_graph
import pytest

EDGES = import_graph.edges()
MODULES = import_graph.modules()

# Lowest first; a room may import only rooms listed before it. A top-level module is a room of
# its own; a package (`imp.models`) is one room, whose modules import one another freely as long
# as no circle forms (tests/test_architecture.py).
ROOMS = [
    "imp._version",
    "imp._jsondata",
    "imp._json",
    "imp._redact",
    "imp._frozen",
    "imp._sniff",
    "imp.media",
    "imp.records",
    "imp.errors",
    "imp._annotation",
    "imp._typeparse",
    "imp._field_names",
    "imp._field",
    "imp.signature",
    "imp.values",
    "imp.history",
    "imp.prediction",
    "imp.runtime",
    "imp.tools",
    "imp.adapters",
    "imp.models",
    "imp.settings",
    "imp.exchanges",
    "imp.programs",
    "imp.mcp",
    "imp.saving",
    "imp.observe",
    "imp.evaluation",
    "imp.optimize",
    "imp.durable",
    "imp.ray",
    "imp.acp",
    "imp.agui",
    "imp.trace",
]
"""`imp` itself (the package root, which re-exports) sits above them all."""

# The bottom of the house, module by module (the adapters' modules too, the lowest room with several).
MODULE_ORDER = [
    "imp._jsondata",
    "imp._json",
    "imp._redact",
    "imp._frozen",
    "imp._sniff",
    "imp.media",
    "imp.records",
    "imp.errors",
    "imp._annotation",
    "imp._typeparse",
    "imp._field_names",
    "imp._field",
    "imp.signature",
    "imp.values",
    "imp.history",
    "imp.prediction",
    "imp.adapters._fields",
    "imp.adapters._split",
    "imp.adapters._partial_tree",
    "imp.adapters.base",
    "imp.adapters._registry",
    "imp.adapters.json",
    "imp.adapters._xml_values",
    "imp.adapters.chat",
    "imp.adapters.xml",
    "imp.adapters._template_text",
    "imp.adapters._template_items",
    "imp.adapters._template_form",
    "imp.adapters._template_bind",
    "imp.adapters.template",
    "imp.adapters._names",
    "imp.adapters",
]

UPWARD_TYPE_ONLY: dict[tuple[str, str], str] = {}
"""(module, module it names a type from) -> why the type cannot live below. Empty: every type-only
import points down, as the imports that run do."""


def _place(module: str) -> int:
    room = import_graph.room(module)
    return len(ROOMS) if room == "imp" else ROOMS.index(room)


def test_every_room_has_its_place() -> None:
    rooms = {import_graph.room(m) for m in MODULES} - {"imp"}
    assert sorted(rooms - set(ROOMS)) == [], "rooms missing from ROOMS (give each its place in the order)"
    assert sorted(set(ROOMS) - rooms) == [], "ROOMS names rooms that do not exist"
    assert len(ROOMS) == len(set(ROOMS))
    ordered_rooms = {import_graph.room(m) for m in MODULE_ORDER}
    unlisted = sorted(m for m in MODULES if import_graph.room(m) in ordered_rooms and m not in MODULE_ORDER)
    assert unlisted == [], "modules of a room ordered module by module, missing from MODULE_ORDER"


@pytest.mark.parametrize("room", ROOMS)
def test_each_room_imports_only_rooms_below_it(room: str) -> None:
    upward = sorted(
        f"{e.source} -> {e.target} (line {e.line}, {'type-only' if e.kind == 'type' else 'runs'})"
        for e in EDGES
        if import_graph.room(e.source) == room
        and _place(e.target) > _place(e.source)
        and (e.source, e.target) not in UPWARD_TYPE_ONLY
    )
    assert upward == [], f"{room} imports rooms above it"


@pytest.mark.parametrize("module", MODULE_ORDER)
def test_each_bottom_module_imports_only_modules_below_it(module: str) -> None:
    below = set(MODULE_ORDER[: MODULE_ORDER.index(module)])
    mine = {e.target for e in EDGES if e.source == module and e.target in MODULE_ORDER}
    upward = sorted(mine - below)
    assert upward == [], f"{module} imports {upward}, which are not below it"


def test_the_allowed_upward_imports_are_type_only_and_still_there() -> None:
    kinds = {(e.source, e.target): e.kind for e in EDGES}
    for pair in UPWARD_TYPE_ONLY:
        assert kinds.get(pair) == "type", f"{pair} is listed as an allowed type-only import but is not one"


def test_the_graph_reader_sees_function_local_and_type_only_imports() -> None:
    source = (
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from imp.models import LM\n"
        "else:\n    import imp.records\n"
        "def f():\n    from imp.history import History\n"
        "import imp.adapters.chat\n"
        "from imp.adapters import json\n"
        "from . import prediction\n"
    )
    found = {(e.target, e.kind) for e in import_graph.imports("imp.values", source, MODULES)}
    assert found == {
        ("imp.models", "type"),
        ("imp.records", "run"),
        ("imp.history", "run"),
        ("imp.adapters.chat", "run"),
        ("imp.adapters.json", "run"),
        ("imp.prediction", "run"),
    }


def test_the_history_type_is_recognised_without_importing_it() -> None:
    history = importlib.import_module("imp.history").History
    annotation = importlib.import_module("imp._annotation")
    assert annotation.is_history(history) and annotation.history_type() is history
    assert not annotation.is_history(list) and not annotation.is_history("History")


def test_caches_live_where_their_owner_declares_them() -> None:
    import imp

    class Terse(imp.ChatAdapter):
        def default_system(self, signature: imp.Signature, options: Any) -> str:
            return "Be terse."

    sig = imp.signature("question -> answer: int")
    chat, terse = imp.ChatAdapter(), Terse()
    first = chat.format(sig, {"question": "q"})[0]["content"]
    assert terse.format(sig, {"question": "q"})[0]["content"] == "Be terse."  # its own entry, not Chat's
    assert chat.format(sig, {"question": "q"})[0]["content"] == first
    assert set(sig.derived) == {imp.ChatAdapter, Terse}
    # A copy with other instructions starts empty and says the new instructions.
    other = sig.with_instructions("Count.")
    assert other.derived == {} and "Count." in chat.format(other, {"question": "q"})[0]["content"]
    # Nothing is written into another object's __dict__ any more.
    for field in sig.fields.values():
        assert not [k for k in vars(field) if k.startswith("_imp")]
    assert not [k for k in vars(sig) if k.startswith("_imp")]
    # Copies of a field share one validator per annotation and constraints.
    answer = sig.outputs["answer"]
    assert answer.replace(desc="x").type_adapter is answer.type_adapter
