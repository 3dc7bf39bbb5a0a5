"""Settings: every one accepted is read; `history_size` bounds inspect_history's record; the removed
`track_usage` and the process-only `history_size` in a context are refused, saying what to do."""

from __future__ import annotations

import io
from collections.abc import Iterator

import pytest
from runtime_lms import answering_lm, echo

import imp
from imp.exchanges import recent_exchanges
from imp.settings import process_settings

QA = imp.signature("question -> answer")


@pytest.fixture(autouse=True)
def default_history_size() -> Iterator[None]:
    before = process_settings().history_size
    yield
    imp.configure(history_size=before)


def ask(*questions: str) -> None:
    program = imp.predict(QA, lm=answering_lm(echo))
    for question in questions:
        imp.call_sync(program, question=question)


def test_history_size_bounds_the_record_inspect_history_reads() -> None:
    imp.configure(history_size=3)
    ask(*(f"q{i}" for i in range(6)))
    kept = recent_exchanges(10)
    assert len(kept) == 3
    assert [e.response.fields for e in kept if e.response is not None] == [{"answer": f"Q{i}"} for i in (3, 4, 5)]
    text = imp.inspect_history(10, file=io.StringIO())
    assert "q5" in text and "q2" not in text


def test_shrinking_history_size_keeps_the_newest_and_zero_keeps_none() -> None:
    imp.configure(history_size=5)
    ask("a", "b", "c", "d")
    imp.configure(history_size=2)
    assert [e.response.fields["answer"] for e in recent_exchanges(10) if e.response and e.response.fields] == ["C", "D"]
    imp.configure(history_size=0)
    assert recent_exchanges(10) == []
    ask("e")
    assert recent_exchanges(10) == [] and imp.inspect_history(5, file=io.StringIO()) == ""
    imp.configure(history_size=4)
    ask("f")
    assert len(recent_exchanges(10)) == 1


def test_the_default_history_size_is_200() -> None:
    assert imp.Settings().history_size == 200


@pytest.mark.parametrize("bad", [-1, 2.5, "10", True, None])
def test_a_bad_history_size_is_refused_naming_the_setting(bad: object) -> None:
    with pytest.raises(ValueError, match="history_size is how many LM exchanges"):
        imp.configure(history_size=bad)
    with pytest.raises(ValueError, match="history_size"):
        imp.Settings(history_size=bad)  # type: ignore[arg-type]
    assert process_settings().history_size == 200


def test_history_size_is_set_for_the_process_only() -> None:
    refused = pytest.raises(TypeError, match=r"imp\.context cannot set \['history_size'\].*imp\.configure")
    with refused, imp.context(history_size=5):
        pass


@pytest.mark.parametrize("where", ["configure", "context"])
def test_track_usage_is_refused_saying_usage_is_always_tracked(where: str) -> None:
    with pytest.raises(TypeError, match=r"no longer takes track_usage: usage is always tracked.*metadata\.usage"):
        if where == "configure":
            imp.configure(track_usage=False)
        else:
            with imp.context(track_usage=False):
                pass
    assert not hasattr(imp.settings(), "track_usage")


def test_every_setting_is_read_somewhere() -> None:
    """A setting imp accepts and never reads is a trap: each is read as `settings().<name>` somewhere (in
    settings.py itself for the ones it hands down to a lower layer: `cache` to `imp.models.cache`)."""
    import re
    from pathlib import Path

    root = Path(imp.__file__).parent
    sources = "\n".join(p.read_text() for p in root.rglob("*.py"))
    for name in imp.Settings.__dataclass_fields__:
        if name == "parse_limits":  # handed by configure to imp._json, which lies below settings (tested below)
            continue
        assert re.search(rf"settings\(\)\.{name}\b", sources), f"Settings.{name} is never read"


def test_parse_limits_set_with_configure_bound_every_parser() -> None:
    from imp._json import limits, loads

    deep = "[" * 30 + "]" * 30
    assert isinstance(loads(deep), list)  # within the default of 100 levels
    try:
        imp.configure(parse_limits=imp.ParseLimits(max_depth=20))
        assert limits().max_depth == 20
        with pytest.raises(ValueError, match=r"deeper than 20 levels \(imp\.ParseLimits\.max_depth"):
            loads(deep)
        with pytest.raises(imp.AdapterParseError, match="deeper than 20"):
            imp.XMLAdapter().parse(imp.signature("q -> a: list[Any]"), "<a>" + "<item>" * 25 + "</item>" * 25 + "</a>")
        with pytest.raises(TypeError, match="context cannot set"), imp.context(parse_limits=imp.ParseLimits()):
            pass
        with pytest.raises(TypeError, match=r"takes an imp\.ParseLimits"):
            imp.configure(parse_limits={"max_depth": 5})
        with pytest.raises(ValueError, match="max_chars is a positive integer"):
            imp.ParseLimits(max_chars=0)
    finally:
        imp.configure(parse_limits=imp.ParseLimits())
    assert limits() == imp.ParseLimits()


def test_unknown_settings_are_still_refused_with_the_known_names() -> None:
    with pytest.raises(TypeError, match=r"unknown setting\(s\) \['lmm'\]; known: \['adapter', 'cache'"):
        imp.configure(lmm=None)


@pytest.mark.parametrize("where", ["configure", "context"])
def test_a_model_name_for_lm_is_refused_at_once_naming_imp_lm(where: str) -> None:
    before = process_settings().lm
    with pytest.raises(TypeError, match=rf"imp\.{where}\(lm=\.\.\.\) takes an LM client.*imp\.lm\('openai:gpt-4o'\)"):
        if where == "configure":
            imp.configure(lm="openai:gpt-4o")
        else:
            with imp.context(lm="openai:gpt-4o"):
                pass
    with pytest.raises(TypeError, match=r"takes an LM client such as imp\.lm"):
        imp.configure(lm=42)
    assert process_settings().lm is before  # nothing was set


@pytest.mark.parametrize(
    ("given", "kind"), [("json", imp.JSONAdapter), ("XML", imp.XMLAdapter), (imp.ChatAdapter, imp.ChatAdapter)]
)
def test_an_adapter_setting_reads_names_and_classes_as_programs_do(given: object, kind: type) -> None:
    reply = {imp.JSONAdapter: '{"answer": "4"}', imp.XMLAdapter: "<answer>4</answer>"}.get(
        kind, "[[ ## answer ## ]]\n4"
    )
    with imp.context(adapter=given) as current:
        assert isinstance(current.adapter, kind)
        prediction = imp.call_sync(imp.predict(QA, lm=imp.ScriptedLM([reply])), question="2+2")
        assert prediction.answer == "4" and prediction.metadata.adapter == kind.__name__


@pytest.mark.parametrize("bad", ["jsn", 3])
def test_a_bad_adapter_setting_is_refused_naming_the_choices(bad: object) -> None:
    with pytest.raises(TypeError, match=r"imp\.context: adapter.*'chat', 'json', 'xml'"), imp.context(adapter=bad):
        pass
