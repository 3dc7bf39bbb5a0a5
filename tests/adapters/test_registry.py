"""imp's adapters by name: each dialect registers itself, and saved programs name only those (an allowlist)."""

from __future__ import annotations

import pytest

import imp
from imp.adapters import ADAPTER_NAMES, as_adapter, load_adapter, saved_adapter, saved_names
from imp.adapters._registry import register_adapter

TEMPLATE = [imp.system("{instruction}\nAnswer: {answer}"), imp.user("{question}")]


@pytest.mark.parametrize(
    "adapter", [imp.ChatAdapter(), imp.JSONAdapter(), imp.XMLAdapter(), imp.TemplateAdapter(TEMPLATE)]
)
def test_each_of_imps_dialects_is_saved_by_name_and_read_back(adapter: imp.Adapter) -> None:
    saved = saved_adapter(adapter)
    assert saved is not None
    again = load_adapter(saved)
    assert type(again) is type(adapter)
    if isinstance(adapter, imp.TemplateAdapter):
        assert saved == {"template": adapter.dump()} and again == adapter  # a template is saved as its data


def test_the_names_adapter_takes_are_the_registered_dialects() -> None:
    assert sorted(ADAPTER_NAMES) == ["chat", "json", "xml"]
    for name, cls in ADAPTER_NAMES.items():
        assert type(as_adapter(name)) is cls
    assert saved_names() == ["ChatAdapter", "JSONAdapter", "XMLAdapter"]


def test_a_class_outside_imps_adapters_cannot_join_the_allowlist() -> None:
    class Mine(imp.ChatAdapter):
        pass

    with pytest.raises(TypeError, match="not one of imp's adapters"):
        register_adapter(Mine, saved="Mine")
    assert saved_adapter(Mine()) is None  # a subclass is not its parent: its exact class is what is saved
    assert load_adapter("Mine") is None


@pytest.mark.parametrize(
    "data",
    ["os.system", "imp.adapters.chat.ChatAdapter", {"template": None, "x": 1}, {"ChatAdapter": []}, ["ChatAdapter"], 3],
)
def test_a_saved_name_outside_the_registry_names_nothing(data: object) -> None:
    assert load_adapter(data) is None
