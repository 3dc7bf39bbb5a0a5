"""One error tree: every kind of provider failure is its own `imp.LMError` subclass, caught by class."""

from __future__ import annotations

import inspect
import json
import logging
import pickle
import socket
from pathlib import Path
from typing import Any

import anyio
import pytest
from fake_provider import FakeProvider, Reply
from lm_constants import FAST_RETRIES, SECRET
from test_lm_errors import OVERFLOWS

import imp
import imp.errors
from imp.models import lm
from imp.models.errors import classify_error, error_from_payload, safe_url
from imp.runtime.run import run_scope

HI = [{"role": "user", "content": "hi"}]

KINDS = [
    imp.AuthenticationError,
    imp.BadRequest,
    imp.ConnectionFailed,
    imp.ContentFiltered,
    imp.ContextWindowExceeded,
    imp.InvalidResponse,
    imp.NotFound,
    imp.ProviderUnavailable,
    imp.QuotaExceeded,
    imp.RateLimited,
    imp.StreamBroken,
    imp.ToolChoiceUnsupported,
    imp.UnsupportedOption,
]
RETRIED = {imp.ConnectionFailed, imp.StreamBroken, imp.ProviderUnavailable, imp.RateLimited}


def _classify(status: int, body: Any, **kwargs: Any) -> imp.LMError:
    content = body.encode() if isinstance(body, str) else json.dumps(body).encode()
    return classify_error(status, content, {}, provider="p", **kwargs)


def test_everything_in_the_errors_module_is_an_imp_error() -> None:
    classes = [c for _, c in inspect.getmembers(imp.errors, inspect.isclass) if issubclass(c, BaseException)]
    assert len(classes) >= 20
    for cls in classes:
        assert issubclass(cls, imp.ImpError), cls
        assert getattr(imp, cls.__name__) is cls, f"imp.{cls.__name__} is exported"
        assert cls.__name__ in imp.__all__
        assert cls.__doc__, f"{cls.__name__} says what it is for"
    assert issubclass(imp.ToolError, imp.ImpError)
    from imp.tools.errors import ToolError

    assert ToolError is imp.ToolError


def test_the_tree_is_drawn_in_the_module_docstring() -> None:
    doc = imp.errors.__doc__ or ""
    for cls in [*KINDS, imp.LMError, imp.ToolError, imp.DeadlineExceeded, imp.AdapterParseError]:
        assert cls.__name__ in doc


@pytest.mark.parametrize("kind", KINDS)
def test_flags_are_read_only_properties_derived_from_the_class(kind: type[imp.LMError]) -> None:
    error = kind("no", status=400 if issubclass(kind, imp.BadRequest) else None)
    assert isinstance(error, imp.LMError)
    assert error.retryable is (kind in RETRIED)
    assert error.context_window_exceeded is (kind is imp.ContextWindowExceeded)
    assert error.content_filtered is (kind is imp.ContentFiltered)
    assert error.tool_choice_unsupported is (kind is imp.ToolChoiceUnsupported)
    for flag in ("retryable", "context_window_exceeded", "content_filtered", "tool_choice_unsupported"):
        with pytest.raises(AttributeError):
            setattr(error, flag, True)


@pytest.mark.parametrize(
    ("kwargs", "kind"),
    [
        ({"status": 401}, imp.AuthenticationError),
        ({"status": 403}, imp.AuthenticationError),
        ({"status": 402}, imp.QuotaExceeded),
        ({"status": 404}, imp.NotFound),
        ({"status": 400}, imp.BadRequest),
        ({"status": 422}, imp.BadRequest),
        ({"status": 409}, imp.BadRequest),
        ({"status": 429}, imp.RateLimited),
        ({"status": 408}, imp.ProviderUnavailable),
        ({"status": 500}, imp.ProviderUnavailable),
        ({"status": 503, "retryable": True}, imp.ProviderUnavailable),
        ({"status": 529}, imp.ProviderUnavailable),
        ({"status": 501}, imp.LMError),
        ({}, imp.LMError),
        ({"retryable": True}, imp.ProviderUnavailable),
        ({"status": 400, "context_window_exceeded": True}, imp.ContextWindowExceeded),
        ({"status": 400, "tool_choice_unsupported": True}, imp.ToolChoiceUnsupported),
        ({"content_filtered": True, "retryable": False}, imp.ContentFiltered),
    ],
)
def test_calling_lm_error_builds_the_kind_its_arguments_name(kwargs: dict[str, Any], kind: type) -> None:
    error = imp.LMError("message", provider="scripted", **kwargs)
    assert type(error) is kind
    assert error.status == kwargs.get("status") and error.message == "message"


def test_a_flag_that_contradicts_the_kind_is_refused() -> None:
    with pytest.raises(ValueError, match="retryable=True contradicts BadRequest"):
        imp.LMError("no", status=400, retryable=True)
    with pytest.raises(ValueError, match="context_window_exceeded=True contradicts RateLimited"):
        imp.RateLimited("slow", context_window_exceeded=True)


def test_errors_survive_pickling_with_their_kind() -> None:
    error = imp.LMError("slow down", status=429, provider="openai", retry_after=2.0)
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is imp.RateLimited and copy.retry_after == 2.0 and str(copy) == str(error)


@pytest.mark.parametrize("body", OVERFLOWS)
def test_every_overflow_is_a_context_window_exceeded_bad_request(body: Any) -> None:
    error = _classify(400, body)
    assert isinstance(error, imp.ContextWindowExceeded) and isinstance(error, imp.BadRequest)


@pytest.mark.parametrize(
    ("status", "message", "forced"),
    [
        (400, "Invalid value for 'tool_choice': 'required' is not a supported string", False),
        (400, "tool_choice: unsupported value required", False),
        (400, "only `auto` is supported for `tool_choice`", False),
        (400, "tool_choice only supports 'auto' on this deployment", False),
        (400, "Invalid 'tool_choice': only 'none', 'auto' and 'required' are supported", False),
        (404, "No endpoints found that support the provided 'tool_choice' value.", False),
        (400, '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set', False),
        (400, "Thinking may not be enabled when tool_choice forces tool use.", False),
        (500, "", True),  # llama-cpp-python's empty 500 for a forced choice
    ],
)
def test_every_tool_choice_refusal_is_tool_choice_unsupported(status: int, message: str, forced: bool) -> None:
    error = _classify(status, {"error": {"message": message}}, forced_tool_choice=forced)
    assert isinstance(error, imp.ToolChoiceUnsupported) and isinstance(error, imp.BadRequest)
    assert error.option == "tool_choice" and not error.retryable


@pytest.mark.parametrize(
    ("status", "body", "kind"),
    [
        (429, {"error": {"message": "Rate limit reached", "code": "rate_limit_exceeded"}}, imp.RateLimited),
        (
            429,
            {"error": {"message": "You exceeded your current quota", "code": "insufficient_quota"}},
            imp.QuotaExceeded,
        ),
        (402, {"error": {"message": "Insufficient Balance"}}, imp.QuotaExceeded),
        (401, {"error": {"message": "Incorrect API key provided"}}, imp.AuthenticationError),
        (403, {"error": {"message": "forbidden"}}, imp.AuthenticationError),
        (404, {"error": {"message": "The model `gpt-9` does not exist"}}, imp.NotFound),
        (422, {"detail": [{"loc": ["body", "messages"], "msg": "Field required", "type": "missing"}]}, imp.BadRequest),
        (
            529,
            {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
            imp.ProviderUnavailable,
        ),
        (502, "<html>502 Bad Gateway</html>", imp.ProviderUnavailable),
        (500, {"error": {"message": "CUDA error: out of memory"}}, imp.ProviderUnavailable),
        (
            500,
            {
                "error": {
                    "message": "1 validation error for Request\nmessages.0.role\n  Input should be 'user' [type=x]"
                }
            },
            imp.BadRequest,
        ),
    ],
)
def test_each_status_and_wording_has_its_kind(status: int, body: Any, kind: type[imp.LMError]) -> None:
    error = _classify(status, body)
    assert type(error) is kind and error.status == status


def test_a_validation_500_is_not_retried(fake: FakeProvider) -> None:
    body = {"error": {"message": "1 validation error for X\nstop\n  Input should be a valid list [type=list_type]"}}
    fake.add(Reply(500, json=body), Reply(500, json=body), Reply(500, json=body))

    async def main() -> None:
        async with lm("openai:m", base_url=fake.base_url, retry_policy=FAST_RETRIES) as client:
            with pytest.raises(imp.BadRequest) as info:
                await client.request(HI)
        assert info.value.status == 500 and info.value.attempts == 1

    anyio.run(main)
    assert len(fake.requests) == 1


def test_in_stream_errors_have_kinds() -> None:
    overloaded = error_from_payload(
        status=None,
        body={"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
        provider="anthropic",
        in_stream=True,
    )
    assert type(overloaded) is imp.ProviderUnavailable
    groq = error_from_payload(
        status=None, body={"error": {"message": "bad", "status_code": 400}}, provider="groq", in_stream=True
    )
    assert type(groq) is imp.BadRequest


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("http://user:pass@127.0.0.1:8080/v1/chat/completions", "http://127.0.0.1:8080/v1/chat/completions"),
        (
            "https://x.openai.azure.com/openai/deployments/d/chat/completions?api-version=2024-06-01&api-key=abc",
            "https://x.openai.azure.com/openai/deployments/d/chat/completions?api-version=2024-06-01&api-key=[REDACTED]",
        ),
        ("http://[::1]:9/v1?token=t&x=1", "http://[::1]:9/v1?token=[REDACTED]&x=1"),
    ],
)
def test_safe_url_strips_credentials(url: str, shown: str) -> None:
    assert safe_url(url) == shown


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_connection_refused_and_dns_errors_name_the_url_without_credentials(backend: str) -> None:
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    refused = f"http://admin:hunter2@127.0.0.1:{port}/v1"
    unknown = "http://admin:hunter2@no-such-host.invalid/v1"
    seen: list[imp.LMError] = []

    async def main() -> None:
        for base_url in (refused, unknown):
            async with lm("openai:m", api_key=SECRET, base_url=base_url, max_retries=0, connect_timeout=3.0) as client:
                with pytest.raises(imp.ConnectionFailed) as info:
                    await client.request(HI)
                seen.append(info.value)

    anyio.run(main, backend=backend)
    assert f"POST http://127.0.0.1:{port}/v1/chat/completions" in str(seen[0])
    assert seen[0].url == f"http://127.0.0.1:{port}/v1/chat/completions" and seen[0].retryable
    assert "POST http://no-such-host.invalid/v1/chat/completions" in str(seen[1])
    for error in seen:
        assert "hunter2" not in str(error) and "admin" not in str(error) and SECRET not in repr(vars(error))


async def test_a_404_names_the_url(fake: FakeProvider) -> None:
    fake.add(Reply(404, json={"error": {"message": "Not Found", "type": "not_found_error"}}))
    base = fake.base_url.replace("http://", "http://me:pw@")
    async with lm("openai:m", base_url=base, retry_policy=FAST_RETRIES) as client:
        with pytest.raises(imp.NotFound) as info:
            await client.request(HI)
    assert info.value.url == f"{fake.base_url}/chat/completions"
    assert f"(POST {fake.base_url}/chat/completions)" in str(info.value) and "pw" not in str(info.value)
    assert len(fake.requests) == 1


async def test_retry_lines_carry_the_call_id(fake: FakeProvider, caplog: pytest.LogCaptureFixture) -> None:
    fake.add(Reply(503, json={"error": {"message": "busy"}}), Reply(503, json={"error": {"message": "busy"}}))
    fake.add(Reply(200, json={"choices": [{"message": {"content": "ok"}, "finish_reason": "stop"}]}))
    caplog.set_level(logging.WARNING, logger="imp")
    async with lm("openai:m", base_url=fake.base_url, retry_policy=FAST_RETRIES) as client:
        with run_scope(on_event=lambda event: None) as run:
            assert (await client.request(HI)).text == "ok"
        fake.add(Reply(429, json={"error": {"message": "slow down"}}), _ok())
        await client.request(HI)  # outside any call: no call id
    lines = [r.msg for r in caplog.records if isinstance(r.msg, dict) and r.msg.get("event") == "lm_retry"]
    assert [line["call_id"] for line in lines] == [run.call_id, run.call_id, None]
    assert [line["attempt"] for line in lines] == [1, 2, 1]
    assert [line["kind"] for line in lines] == ["ProviderUnavailable", "ProviderUnavailable", "RateLimited"]


def _ok() -> Reply:
    return Reply(200, json={"choices": [{"message": {"content": "ok"}, "finish_reason": "stop"}]})


def _imp_imports(path: Path) -> set[str]:
    import ast

    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("imp"):
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("imp"))
    return found


def test_the_error_tree_sits_at_the_bottom_and_lm_imports_no_program() -> None:
    package = Path(imp.__file__).parent
    assert _imp_imports(package / "errors.py") <= {"imp.records", "imp._redact"}  # a parse error's excerpt is redacted
    for module in (package / "lm").glob("*.py"):
        above = {m for m in _imp_imports(module) if m.startswith(("imp.programs", "imp.adapters", "imp.tools"))}
        assert not above, f"{module.name} imports {above}"
