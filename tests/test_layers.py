"""The bottom layers import only downward: no circle, and no import tucked into a function to dodge one."""

from __future__ import annotations

import ast
import importlib
import pathlib
from typing import Any

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent / "imp"

# Lowest first; a module may import only modules listed before it.
LAYERS = [
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
    "imp.signature",
    "imp.values",
    "imp.history",
    "imp.prediction",
    "imp.settings",
    "imp.adapters._fields",
    "imp.adapters._split",
    "imp.adapters.base",
    "imp.adapters._registry",
    "imp.adapters.json",
    "imp.adapters._xml_values",
    "imp.adapters.chat",
    "imp.adapters.xml",
    "imp.adapters._template_text",
    "imp.adapters._template_form",
    "imp.adapters._template_bind",
    "imp.adapters.template",
    "imp.adapters._names",
    "imp.adapters",
]


def _path(module: str) -> pathlib.Path:
    parts = module.split(".")[1:]
    package = ROOT.joinpath(*parts)
    return package / "__init__.py" if package.is_dir() else package.with_suffix(".py")


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(module: str, source: str | None = None) -> set[str]:
    """Every `imp` module this one imports at run time, wherever the import statement sits."""
    tree = ast.parse(_path(module).read_text() if source is None else source)
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0 and node.module.startswith("imp"):
            found.add(node.module)
            for alias in node.names:
                if f"{node.module}.{alias.name}" in LAYERS:
                    found.add(f"{node.module}.{alias.name}")
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("imp"))
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    found.discard(module)
    return found


@pytest.mark.parametrize("module", LAYERS)
def test_each_module_imports_only_layers_below_it(module: str) -> None:
    below = set(LAYERS[: LAYERS.index(module)])
    upward = sorted(_imports(module) - below)
    assert not upward, f"{module} imports {upward}, which are not below it"


def test_the_layer_check_sees_function_local_imports_and_skips_type_checking_ones() -> None:
    source = (
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from imp.models import LM\n"
        "def f():\n    from imp.history import History\n"
        "import imp.adapters.chat\n"
        "from imp.adapters import json\n"
    )
    assert _imports("imp.values", source) == {"imp.history", "imp.adapters.chat", "imp.adapters", "imp.adapters.json"}


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
