"""A loaded file is data, never authority: every option and field a saved file can carry, tried as an attacker.

A saved file's checksum is a plain SHA-256 anyone can recompute, so each attack here edits a real
saved file and recomputes it (`_resign`), as an attacker would.
"""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fake_provider import FakeProvider, Reply, chat_completion
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import imp
from imp.models import lm as make_lm
from imp.saving import LoadError, dump_program, load, load_program, save
from imp.saving._file import _checksum

KEY = "sk-env-abcdefghijklmnopqrstuvwx0123456789"


def _resign(document: dict[str, Any]) -> dict[str, Any]:
    document["checksum"] = _checksum(document)
    return document


def _write(path: Path, document: dict[str, Any]) -> Path:
    path.write_text(json.dumps(_resign(document)), encoding="utf-8")
    return path


def _saved(lm: Any = None, **program: Any) -> dict[str, Any]:
    client = lm or make_lm("openai:gpt-4o-mini", api_key="sk-unused-0000000000000000000000")
    return dump_program(imp.predict("question -> answer", lm=client, **program))


class _Recorder:
    """The fake provider answering like an OpenAI-compatible server; `headers` are each request's, lower-cased."""

    def __init__(self) -> None:
        answer = Reply(json=chat_completion("[[ ## answer ## ]]\nhi", model="m"))
        self.provider = FakeProvider(responder=lambda received: answer).start()
        self.url = self.provider.base_url

    @property
    def headers(self) -> list[dict[str, str]]:
        with self.provider.lock:
            return [{k.lower(): v for k, v in r.headers.items()} for r in self.provider.requests]


@pytest.fixture
def recorder() -> Iterator[_Recorder]:
    server = _Recorder()
    yield server
    server.provider.stop()


@pytest.fixture(autouse=True)
def env_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "OPENROUTER_API_KEY"):
        monkeypatch.setenv(name, KEY)


# --- the endpoint: the environment's key never goes where a file says, unless the caller says so ----------------


def test_a_file_that_names_another_endpoint_is_refused_and_sends_nothing(tmp_path: Path, recorder: _Recorder) -> None:
    document = _saved()
    document["program"]["lm"]["base_url"] = recorder.url  # the attacker's host
    path = _write(tmp_path / "p.json", document)
    with pytest.raises(LoadError, match=r"trust_endpoint") as caught:
        load(path)
    assert recorder.url in str(caught.value) and "lm=imp.lm" in str(caught.value)
    assert recorder.headers == []


def test_the_caller_who_trusts_the_endpoint_gets_the_file_as_saved(tmp_path: Path, recorder: _Recorder) -> None:
    document = _saved()
    document["program"]["lm"]["base_url"] = recorder.url
    path = _write(tmp_path / "p.json", document)
    for trust in (True, recorder.url, [recorder.url + "/"], ("https://other.example/v1", recorder.url)):
        program = load(path, trust_endpoint=trust)
        assert imp.call_sync(program, question="hi").answer == "hi"
    assert [h["authorization"] for h in recorder.headers] == [f"Bearer {KEY}"] * 4
    # ... and a caller who passes lm= picks the model: the file's LM is not even read
    scripted = imp.ScriptedLM(["[[ ## answer ## ]]\nmine"])
    assert imp.call_sync(load(path, lm=scripted), question="hi").answer == "mine"


@pytest.mark.parametrize(
    "url",
    [
        "https://api.openai.com@evil.example/v1",  # userinfo: the host is evil.example
        "https://user:pw@api.openai.com/v1",  # credentials in the file
        "https://api.openai.com.evil.example/v1",
        "https://evil.example/v1#api.openai.com",
        "https://evil.example/v1?api.openai.com",
        "http://api.openai.com/v1",  # the key in clear text
        "https://api.openai.com:8443/v1",
        "https://api.openai.com/v1/../../evil",
        "https://evil.example\\@api.openai.com/v1",
        "https://api.openai.com\t.evil.example/v1",
        "https://xn--pi-7ka.openai.com/v1",
        "https://\u0430pi.openai.com/v1",  # a Cyrillic a
        "ftp://api.openai.com/v1",
        "//evil.example/v1",
    ],
)
def test_no_spelling_of_another_endpoint_passes_for_the_providers_own(tmp_path: Path, url: str) -> None:
    document = _saved()
    document["program"]["lm"]["base_url"] = url
    with pytest.raises(LoadError):
        load(_write(tmp_path / "p.json", document))


@pytest.mark.parametrize(
    "url",
    [
        "https://api.openai.com/v1",
        "https://API.OpenAI.com/v1/",
        "https://api.openai.com:443/v1",
        "HTTPS://api.openai.com./v1",
    ],
)
def test_the_providers_own_endpoint_however_spelled_needs_no_word(tmp_path: Path, url: str) -> None:
    document = _saved()
    document["program"]["lm"]["base_url"] = url
    program = load(_write(tmp_path / "p.json", document))
    assert program.lm.base_url.startswith(("https://", "HTTPS://"))  # type: ignore[attr-defined]


def test_trusting_one_endpoint_does_not_trust_its_look_alikes(tmp_path: Path) -> None:
    document = _saved()
    for url in ("https://llm.example/v1.evil", "https://llm.example.evil/v1", "http://llm.example/v1"):
        document["program"]["lm"]["base_url"] = url
        with pytest.raises(LoadError, match="trust_endpoint"):
            load(_write(tmp_path / "p.json", document), trust_endpoint="https://llm.example/v1")


def test_a_file_saved_for_a_local_server_loads_when_the_caller_trusts_it(tmp_path: Path) -> None:
    client = make_lm("openai:smollm2", base_url="http://127.0.0.1:8080/v1", temperature=0.0)
    path = save(imp.predict("question -> answer", lm=client), tmp_path / "p.json")
    with pytest.raises(LoadError, match=r"127\.0\.0\.1:8080"):
        load(path)
    assert load(path, trust_endpoint="http://127.0.0.1:8080/v1").lm.base_url == "http://127.0.0.1:8080/v1"  # type: ignore[attr-defined]


# --- options: never code, never a path, never a credential; unknown ones refused ------------------------------------


NEVER = {
    "http_backend": "evil_backend_module",
    "http_client": "evil.Client",
    "retry_policy": "evil.Policy",
    "headers": {"Authorization": "Bearer attacker"},
    "api_key": "sk-attacker-0000000000000000000000",
    "token": "t",
    "Authorization": "Bearer attacker",
    "base_url": "https://evil.example/v1",
}


@pytest.mark.parametrize("trust", [False, True])
@pytest.mark.parametrize("option", sorted(NEVER))
def test_an_option_that_names_code_or_a_credential_is_refused_even_when_trusted(
    tmp_path: Path, option: str, trust: bool
) -> None:
    document = _saved()
    document["program"]["lm"]["options"][option] = NEVER[option]
    with pytest.raises(LoadError, match=option):
        load(_write(tmp_path / "p.json", document), trust_endpoint=trust)


def test_a_module_named_by_a_file_is_never_imported(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    marker = tmp_path / "imported"
    (tmp_path / "evil_backend_module.py").write_text(f"open({str(marker)!r}, 'w').close()\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    for where in ("lm", "config"):
        document = _saved()
        target = document["program"]["lm"]["options"] if where == "lm" else document["program"]["config"]
        target["http_backend"] = "evil_backend_module"
        with pytest.raises(LoadError):
            load(_write(tmp_path / "p.json", document), trust_endpoint=True)
    assert not marker.exists() and "evil_backend_module" not in sys.modules


@pytest.mark.parametrize("where", ["lm", "config"])
@pytest.mark.parametrize("trust", [False, True])
def test_a_cache_path_in_a_file_is_refused_and_no_file_is_created(tmp_path: Path, where: str, trust: bool) -> None:
    planted = tmp_path / "planted" / "cache.sqlite"
    planted.parent.mkdir()
    document = _saved()
    target = document["program"]["lm"]["options"] if where == "lm" else document["program"]["config"]
    target["cache"] = str(planted)
    with pytest.raises(LoadError, match="cache"):
        program = load(_write(tmp_path / "p.json", document), trust_endpoint=trust)
        imp.call_sync(program.with_lm(imp.ScriptedLM(["[[ ## answer ## ]]\nx"])), question="q")  # type: ignore[attr-defined]
    assert not planted.exists()


@pytest.mark.parametrize("where", ["lm", "config"])
@pytest.mark.parametrize(
    ("option", "value"), [("extra_body", {"store": True}), ("extra_headers", {"OpenAI-Project": "proj_attacker"})]
)
def test_what_a_file_adds_to_requests_needs_the_callers_word(
    tmp_path: Path, where: str, option: str, value: Any
) -> None:
    document = _saved()
    target = document["program"]["lm"]["options"] if where == "lm" else document["program"]["config"]
    target[option] = value
    path = _write(tmp_path / "p.json", document)
    with pytest.raises(LoadError, match=f"{option}.*trust_endpoint"):
        load(path)
    program = load(path, trust_endpoint=True)
    sent = program.lm.defaults if where == "lm" else program.config  # type: ignore[attr-defined]
    assert sent[option] == value


@pytest.mark.parametrize("where", ["lm", "config"])
@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("frobnicate", 1),
        ("temperature", "hot"),
        ("max_tokens", -1),
        ("max_tokens", True),
        ("stop", [1, 2]),
        ("timeout", 0),
        ("max_retries", 10_000),
        ("n", 5),
        ("response_format", "json"),
        ("extra_body", ["not", "an", "object"]),
    ],
)
def test_an_unknown_or_mistyped_option_is_refused_naming_it(
    tmp_path: Path, where: str, option: str, value: Any
) -> None:
    document = _saved()
    target = document["program"]["lm"]["options"] if where == "lm" else document["program"]["config"]
    target[option] = value
    with pytest.raises(LoadError, match=option):
        load(_write(tmp_path / "p.json", document), trust_endpoint=True)


def test_every_option_imp_save_writes_loads_back_without_a_word(tmp_path: Path) -> None:
    client = make_lm(
        "openai:gpt-4o-mini",
        temperature=0.2,
        top_p=0.9,
        max_tokens=300,
        seed=7,
        stop=["\n\n"],
        reasoning_effort="low",
        parallel_tool_calls=False,
        response_format={"type": "json_object"},
        rollout_id="r1",
    )
    program = imp.predict("question -> answer", lm=client, config={"temperature": 0.1, "timeout": 30, "max_retries": 1})
    loaded = load(save(program, tmp_path / "p.json"))
    assert loaded.lm.defaults == client.defaults and dict(loaded.config) == dict(program.config)  # type: ignore[attr-defined]


# --- fields: every key a file can carry is one imp writes -------------------------------------------------------


@pytest.mark.parametrize(
    "edit",
    [
        lambda d: d.__setitem__("extra", 1),
        lambda d: d["program"].__setitem__("http_backend", "evil"),
        lambda d: d["program"]["lm"].__setitem__("http_backend", "evil"),
        lambda d: d["program"]["lm"].__setitem__("headers", {"a": "b"}),
        lambda d: d["program"]["adapter_opts"].__setitem__("system_renderer", "os.system"),
        lambda d: d["program"]["adapter_opts"].__setitem__("importer", "evil"),
        lambda d: d["program"].__setitem__("adapter", "evil.module.Adapter"),
        lambda d: d["program"].__setitem__("kind", "evil"),
    ],
)
def test_a_key_imp_never_writes_is_refused(tmp_path: Path, edit: Any) -> None:
    document = _saved()
    edit(document)
    with pytest.raises(LoadError):
        load(_write(tmp_path / "p.json", document), trust_endpoint=True)


def lookup(order: str) -> str:
    """Look an order up."""
    return order


def test_a_tool_with_a_key_imp_never_writes_is_refused(tmp_path: Path) -> None:
    document = dump_program(imp.react("question -> answer", [imp.tool(lookup)]), include_lm=False)
    document["program"]["tools"][0]["module"] = "os"
    with pytest.raises(LoadError, match="module"):
        load(_write(tmp_path / "p.json", document), registry={"lookup": lookup})


def test_a_file_nested_too_deep_is_a_load_error(tmp_path: Path) -> None:
    path = tmp_path / "deep.json"
    path.write_text('{"format": "imp.program", "program": ' + "[" * 100_000 + "]" * 100_000 + "}")
    with pytest.raises(LoadError, match="nested deeper"):
        load(path)


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=8,
)


def _paths(node: Any, here: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [here]
    if isinstance(node, dict):
        for key, value in node.items():
            found += _paths(value, (*here, key))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            found += _paths(value, (*here, i))
    return found


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_any_edit_of_a_saved_file_loads_or_is_a_load_error(data: st.DataObject) -> None:
    program = imp.react(
        "question -> answer: int", [imp.tool(lookup)], lm=make_lm("openai:gpt-4o-mini", temperature=0.1), max_iters=3
    )
    document = dump_program(program)
    where = data.draw(st.sampled_from(_paths(document["program"])[1:]))
    node = document["program"]
    for key in where[:-1]:
        node = node[key]
    node[where[-1]] = data.draw(_JSON)
    with contextlib.suppress(LoadError):  # every other exception fails the test
        load_program(_resign(document), registry={"lookup": lookup})
