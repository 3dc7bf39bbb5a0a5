"""Predict and ChainOfThought: inputs, the JSON fallback, settings, scripted LMs, deadlines; asyncio and trio."""

import io
import json
import warnings
from typing import Any

import anyio
import anyio.lowlevel
import httpx
import pytest
from imp_backends import both_backends

import imp

ESCALATION = imp.signature(
    "ticket -> team: enum[atlas,harbor,beacon,quill], contact: string",
    "Find the squad that owns the ticket and its on-call engineer.",
)
GOOD = "[[ ## team ## ]]\natlas\n\n[[ ## contact ## ]]\nMaya\n\n[[ ## completed ## ]]"


@both_backends
async def test_runs_under_each_backend(backend: str) -> None:
    import sniffio

    assert sniffio.current_async_library() == backend


@both_backends
async def test_predict_formats_sends_and_parses() -> None:
    lm = imp.ScriptedLM([GOOD])
    pred = await imp.call(imp.predict(ESCALATION, lm=lm), {"ticket": "We were charged twice."})
    assert (pred.team, pred.contact) == ("atlas", "Maya")
    assert pred["team"] == "atlas" and pred.fields == {"team": "atlas", "contact": "Maya"}
    assert pred.complete and pred.metadata.lm_calls == 1 and pred.metadata["finish_reason"] == "stop"
    assert pred.metadata.usage is not None and pred.metadata.usage.requests == 1
    assert len(lm.requests) == 1
    assert lm.requests[0].messages[-1]["content"].startswith("[[ ## ticket ## ]]\nWe were charged twice.")


@both_backends
async def test_inputs_as_keywords_and_a_scripted_mapping_of_fields() -> None:
    lm = imp.ScriptedLM([{"team": "harbor", "contact": "Tom"}])
    pred = await imp.call(imp.predict(ESCALATION, lm=lm), ticket="The deploy is stuck.")
    assert pred.fields == {"team": "harbor", "contact": "Tom"}


@both_backends
async def test_missing_input_fails_before_any_lm_call() -> None:
    lm = imp.ScriptedLM([GOOD])
    with pytest.raises(imp.MissingInputError, match="`ticket`") as caught, pytest.warns(UserWarning, match="tickt"):
        await imp.call(imp.predict(ESCALATION, lm=lm), {"tickt": "typo"})
    assert lm.requests == []
    assert "`tickt` was given: did you mean `ticket`?" in str(caught.value) and caught.value.names == ("ticket",)


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ({"q": "x"}, "(given instead: `q`)"),
        ({}, "missing required input field: `ticket`"),
    ],
)
def test_a_missing_input_says_what_was_given_instead(given: dict[str, str], expected: str) -> None:
    program = imp.predict(ESCALATION, lm=imp.StaticLM(lambda messages, options: {}))
    with pytest.raises(imp.MissingInputError) as caught, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        imp.call_sync(program, given)
    assert str(caught.value).endswith(expected)


@pytest.mark.parametrize(
    ("name", "hint"), [("deadline", "imp.deadline"), ("timeout", "imp.deadline"), ("lm", "using(lm=")]
)
def test_a_run_setting_passed_as_an_input_says_where_it_goes(name: str, hint: str) -> None:
    program = imp.predict("question -> answer", lm=imp.StaticLM(lambda messages, options: {"answer": "a"}))
    with pytest.warns(UserWarning, match=f"ignored: {name}") as caught:
        imp.call_sync(program, question="q", **{name: 1})
    assert hint in str(caught[0].message)


@both_backends
async def test_unknown_inputs_are_a_warning() -> None:
    lm = imp.ScriptedLM([GOOD])
    with pytest.warns(UserWarning, match="extra"):
        await imp.call(imp.predict(ESCALATION, lm=lm), ticket="t", extra=1)


def test_unknown_options_raise_at_construction() -> None:
    with pytest.raises(TypeError, match=r"\['temperature'\].*config="):
        imp.predict(ESCALATION, temperature=0.2)
    with pytest.raises(TypeError, match="bogus"):
        imp.chain_of_thought(ESCALATION, bogus=True)


@both_backends
async def test_config_goes_to_the_lm_and_merges_per_call() -> None:
    lm = imp.ScriptedLM([GOOD, GOOD])
    program = imp.predict(ESCALATION, lm=lm, config={"temperature": 0.1, "max_tokens": 100})
    await imp.call(program, ticket="a")
    await imp.call(program, ticket="b", config={"max_tokens": 5})
    assert lm.requests[0].options == {"temperature": 0.1, "max_tokens": 100}
    assert lm.requests[1].options == {"temperature": 0.1, "max_tokens": 5}


@both_backends
async def test_json_fallback_asks_once_through_the_json_adapter() -> None:
    lm = imp.ScriptedLM(["The team is atlas and Maya is on call.", '{"team": "atlas", "contact": "Maya"}'])
    pred = await imp.call(imp.predict(ESCALATION, lm=lm), ticket="t")
    assert pred.fields == {"team": "atlas", "contact": "Maya"}
    assert pred.metadata.json_fallback and pred.metadata.adapter == "JSONAdapter" and pred.metadata.lm_calls == 2
    retry = lm.requests[1].messages
    assert "Outputs will be a JSON object with the following fields." in retry[0]["content"]
    assert retry[-1]["content"].endswith(
        "Respond with a JSON object in the following order of fields: `team` (must be formatted as one of: "
        "atlas, harbor, beacon, quill), then `contact`."
    )


@both_backends
async def test_fallback_failure_raises_the_original_error_after_two_calls() -> None:
    lm = imp.ScriptedLM(["no fields here", "still none", GOOD])
    with pytest.raises(imp.AdapterParseError) as info:
        await imp.call(imp.predict(ESCALATION, lm=lm), ticket="t")
    assert info.value.adapter == "ChatAdapter"
    assert info.value.completion == "no fields here"
    assert len(lm.requests) == 2


@both_backends
async def test_an_lm_error_never_triggers_the_fallback() -> None:
    lm = imp.ScriptedLM([imp.LMError("overloaded", status=529, provider="x"), GOOD])
    with pytest.raises(imp.LMError):
        await imp.call(imp.predict(ESCALATION, lm=lm), ticket="t")
    assert len(lm.requests) == 1


@both_backends
async def test_the_fallbacks_lm_error_is_raised_as_is() -> None:
    lm = imp.ScriptedLM(["no fields", imp.LMError("bad gateway", status=502)])
    with pytest.raises(imp.LMError, match="bad gateway"):
        await imp.call(imp.predict(ESCALATION, lm=lm), ticket="t")


@both_backends
async def test_json_fallback_can_be_turned_off() -> None:
    lm = imp.ScriptedLM(["no fields", GOOD])
    with pytest.raises(imp.AdapterParseError):
        await imp.call(imp.predict(ESCALATION, lm=lm, json_fallback=False), ticket="t")
    assert len(lm.requests) == 1


@both_backends
async def test_renderers_get_the_fallback_adapters_own_default() -> None:
    seen: list[str] = []

    def terse(signature: imp.Signature, opts: dict[str, Any]) -> str:
        text = "Answer tersely.\n\n" + opts["default_system"](signature, opts)
        seen.append(text)
        return text

    lm = imp.ScriptedLM(["unparseable", '{"team": "quill", "contact": "Raj"}'])
    pred = await imp.call(imp.predict(ESCALATION, lm=lm, adapter_opts={"system_renderer": terse}), ticket="t")
    assert pred.team == "quill"
    assert seen[0].startswith("Answer tersely.\n\nYour input fields are:") and "[[ ## completed ## ]]" in seen[0]
    assert seen[1].startswith("Answer tersely.\n\n") and "Outputs will be a JSON object" in seen[1]


@both_backends
async def test_xml_adapter_program_and_its_fallback() -> None:
    lm = imp.ScriptedLM(["<team>beacon</team>\n<contact>Ines</contact>"])
    pred = await imp.call(imp.predict(ESCALATION, lm=lm, adapter=imp.XMLAdapter()), ticket="t")
    assert pred.fields == {"team": "beacon", "contact": "Ines"}
    lm = imp.ScriptedLM(["nothing", '{"team": "beacon", "contact": "Ines"}'])
    pred = await imp.call(imp.predict(ESCALATION, lm=lm, adapter=imp.XMLAdapter()), ticket="t")
    assert pred.metadata.json_fallback


@both_backends
async def test_json_adapter_asks_for_structured_output_by_capability() -> None:
    schema_lm = imp.ScriptedLM(['{"team": "atlas", "contact": "Maya"}'], response_format="json_schema")
    await imp.call(imp.predict(ESCALATION, lm=schema_lm, adapter=imp.JSONAdapter()), ticket="t")
    fmt = schema_lm.requests[0].options["response_format"]
    assert fmt["type"] == "json_schema" and fmt["json_schema"]["strict"] is True
    assert fmt["json_schema"]["schema"]["required"] == ["team", "contact"]
    assert fmt["json_schema"]["schema"]["additionalProperties"] is False
    object_lm = imp.ScriptedLM(['{"team": "atlas", "contact": "Maya"}'], response_format="json_object")
    await imp.call(imp.predict(ESCALATION, lm=object_lm, adapter=imp.JSONAdapter()), ticket="t")
    assert object_lm.requests[0].options == {"response_format": {"type": "json_object"}}
    plain_lm = imp.ScriptedLM(['{"team": "atlas", "contact": "Maya"}'])
    await imp.call(imp.predict(ESCALATION, lm=plain_lm, adapter=imp.JSONAdapter()), ticket="t")
    assert plain_lm.requests[0].options == {}


@both_backends
async def test_chain_of_thought_adds_reasoning_first() -> None:
    lm = imp.ScriptedLM(["[[ ## reasoning ## ]]\nMoney is atlas.\n\n" + GOOD])
    program = imp.chain_of_thought(ESCALATION, lm=lm)
    assert list(program.signature.outputs) == ["reasoning", "team", "contact"]
    pred = await imp.call(program, ticket="charged twice")
    assert pred.reasoning == "Money is atlas." and pred.team == "atlas"
    assert "`[[ ## reasoning ## ]]`, then `[[ ## team ## ]]`" in lm.requests[0].messages[-1]["content"]


@both_backends
async def test_static_lm_with_an_async_handler_receives_messages_and_options() -> None:
    calls: list[tuple[int, dict[str, Any]]] = []

    async def handler(messages: list[dict[str, Any]], options: dict[str, Any]) -> str:
        await anyio.lowlevel.checkpoint()
        calls.append((len(messages), options))
        return GOOD

    pred = await imp.call(imp.predict(ESCALATION, lm=imp.StaticLM(handler), config={"seed": 1}), ticket="t")
    assert pred.contact == "Maya" and calls == [(2, {"seed": 1})]


@both_backends
async def test_programs_are_immutable_values() -> None:
    program = imp.predict(ESCALATION)
    lm = imp.ScriptedLM([GOOD])
    pinned = program.with_lm(lm)
    assert program.lm is None and pinned.lm is lm
    assert program.with_demos([{"ticket": "x", "team": "atlas", "contact": "Maya"}]).demos != program.demos
    with pytest.raises(AttributeError):
        program.lm = lm  # type: ignore[misc]


@both_backends
async def test_no_lm_configured_is_a_clear_error() -> None:
    with pytest.raises(imp.ImpError, match="no LM configured"):
        await imp.call(imp.predict(ESCALATION), ticket="t")


@both_backends
async def test_context_overrides_never_leak_between_concurrent_tasks() -> None:
    def lm_for(team: str) -> imp.StaticLM:
        async def handler(messages: list[dict[str, Any]], options: dict[str, Any]) -> str:
            await anyio.sleep(0.01)
            return GOOD.replace("atlas", team)

        return imp.StaticLM(handler)

    program = imp.predict(ESCALATION)
    results: dict[str, str] = {}

    async def run(team: str) -> None:
        with imp.context(lm=lm_for(team)):
            for _ in range(3):
                results[team] = (await imp.call(program, ticket="t")).team
                await anyio.lowlevel.checkpoint()

    async with anyio.create_task_group() as tg:
        for team in ("atlas", "harbor", "beacon", "quill"):
            tg.start_soon(run, team)
    assert results == {t: t for t in ("atlas", "harbor", "beacon", "quill")}
    assert imp.settings().lm is None


@both_backends
async def test_configure_sets_the_process_default() -> None:
    lm = imp.ScriptedLM([GOOD])
    imp.configure(lm=lm)
    try:
        assert (await imp.call(imp.predict(ESCALATION), ticket="t")).team == "atlas"
    finally:
        imp.configure(lm=None)
    with pytest.raises(TypeError, match="unknown setting"):
        imp.configure(lmm=lm)


@both_backends
async def test_deadline_on_a_hanging_lm_raises_deadline_exceeded_promptly() -> None:
    async def hang(messages: list[dict[str, Any]], options: dict[str, Any]) -> str:
        await anyio.sleep(30)
        return GOOD

    program = imp.predict(ESCALATION, lm=imp.StaticLM(hang))
    start = anyio.current_time()
    with pytest.raises(imp.DeadlineExceeded), imp.deadline(0.05):
        await imp.call(program, ticket="t")
    assert anyio.current_time() - start < 1.0
    assert isinstance(imp.DeadlineExceeded("x"), TimeoutError)


@both_backends
async def test_usage_of_concurrent_children_reaches_the_parent() -> None:
    from imp.runtime.usage import track_usage

    lm = imp.ScriptedLM([GOOD] * 5)
    program = imp.predict(ESCALATION, lm=lm)
    with track_usage() as total:
        async with anyio.create_task_group() as tg:
            for _ in range(5):
                tg.start_soon(imp.call, program, {"ticket": "t"})
    assert total.total.requests == 5


def test_call_sync_and_inspect_history_redacts() -> None:
    secret = "sk-abcdefghijklmnopqrstuvwx"
    lm = imp.ScriptedLM([GOOD])
    pred = imp.call_sync(imp.predict(ESCALATION, lm=lm), ticket=f"my key is {secret}")
    assert pred.team == "atlas"
    buffer = io.StringIO()
    text = imp.inspect_history(1, file=buffer)
    assert "System message:" in text and "User message:" in text and "Response:" in text
    assert "Maya" in text
    assert secret not in text and "[REDACTED]" in text


@both_backends
async def test_call_sync_inside_a_running_loop_runs_on_a_helper_thread() -> None:
    # A notebook runs a loop in its thread; call_sync then runs its own on a helper thread.
    pred = imp.call_sync(imp.predict(ESCALATION, lm=imp.ScriptedLM([GOOD])), ticket="t")
    assert pred.team == "atlas"


class _OwnLM(imp.LM):
    """A user's LM: returns usage and leaves recording it to the program."""

    provider = "mine"
    model = "m1"

    def __init__(self, replies: list[imp.LMResponse]) -> None:
        self.replies = list(replies)

    async def request(self, messages: Any, **options: Any) -> imp.LMResponse:
        await anyio.lowlevel.checkpoint()
        return self.replies.pop(0)


@both_backends
async def test_the_usage_a_users_lm_returns_is_counted_once() -> None:
    from imp.runtime.usage import track_usage

    usage = imp.Usage(input_tokens=20, output_tokens=4, requests=1)
    lm = _OwnLM([imp.LMResponse(text=GOOD, usage=usage) for _ in range(3)])
    program = imp.predict(ESCALATION, lm=lm)
    with track_usage() as parent:
        pred = await imp.call(program, ticket="t")
        assert pred.metadata.usage == usage
        assert dict(pred.metadata.usage_by_model or {}) == {"mine:m1": usage}
        async with anyio.create_task_group() as tg:
            for _ in range(2):
                tg.start_soon(imp.call, program, {"ticket": "t"})
    assert parent.total == imp.Usage(input_tokens=60, output_tokens=12, requests=3)


@both_backends
async def test_a_recording_lm_is_not_counted_twice() -> None:
    from imp.runtime.usage import track_usage

    class Wrapper(imp.LM):
        """A user's LM that delegates to one of imp's, which records the usage itself."""

        provider = "wrap"
        model = "w"

        def __init__(self, inner: imp.LM) -> None:
            self.inner = inner

        async def request(self, messages: Any, **options: Any) -> imp.LMResponse:
            return await self.inner.request(messages, **options)

    for lm in (imp.ScriptedLM([GOOD]), Wrapper(imp.ScriptedLM([GOOD]))):  # each records one request itself
        with track_usage() as parent:
            pred = await imp.call(imp.predict(ESCALATION, lm=lm), ticket="t")
        assert pred.metadata.usage is not None and pred.metadata.usage.requests == 1
        assert parent.total.requests == 1


@both_backends
async def test_a_react_turn_counts_the_usage_of_a_users_lm() -> None:
    def lookup(ticket: str) -> str:
        """Look a ticket up."""
        return "atlas"

    usage = imp.Usage(input_tokens=5, output_tokens=1, requests=1)
    call = imp.ToolCall(id="c1", name="lookup", arguments={"ticket": "t"})
    submit = imp.ToolCall(id="c2", name="submit", arguments={"team": "atlas", "contact": "Maya"})
    lm = _OwnLM([imp.LMResponse(tool_calls=(c,), usage=usage) for c in (call, submit)])
    pred = await imp.call(imp.react(ESCALATION, tools=[lookup], lm=lm), ticket="t")  # a plain function is a tool
    assert pred.team == "atlas" and pred.metadata.history is not None
    assert pred.metadata.history[0]["tool_call_results"][0].result == "atlas"
    assert pred.metadata.usage == imp.Usage(input_tokens=10, output_tokens=2, requests=2)


def test_render_gives_the_request_as_it_is_sent_with_the_clients_default_options() -> None:
    """`program.render(inputs)` is the exact request: the LM's own default options (`imp.lm(...,
    temperature=0.2)`) under the program's, as they are sent and as `inspect_history` shows them;
    a credential among them is redacted, as in every other view."""
    sent: list[dict[str, Any]] = []

    def provider(request: httpx.Request) -> httpx.Response:
        sent.append(json.loads(request.content))
        reply = {"role": "assistant", "content": '{"answer": "ok"}'}
        return httpx.Response(200, json={"choices": [{"index": 0, "message": reply, "finish_reason": "stop"}]})

    secret = "sk-never-shown-0123456789abcdef"
    client = httpx.AsyncClient(transport=httpx.MockTransport(provider))
    lm = imp.lm("openai:m", base_url="http://127.0.0.1:9/v1", http_client=client, temperature=0.2, max_tokens=99)
    qa = imp.predict(
        "question -> answer",
        lm=lm,
        adapter=imp.JSONAdapter(),
        config={"top_p": 0.5, "extra_headers": {"Authorization": f"Bearer {secret}"}},
    )
    rendered = qa.render(question="q")
    imp.call_sync(qa, question="q")
    body = {k: v for k, v in sent[0].items() if k not in ("model", "messages")}
    shown = {k: v for k, v in rendered.options.items() if k != "extra_headers"}
    assert shown == body and list(rendered.messages) == sent[0]["messages"]
    assert secret not in repr(rendered) and rendered.options["extra_headers"]["Authorization"] == "[REDACTED]"


def test_a_programs_repr_never_shows_a_credential_in_its_config() -> None:
    """Secrets never appear in reprs: a `config` carrying `extra_headers` or a credential in `extra_body`
    is shown redacted, by key name and by shape, for every kind of program; the rest reads as before."""
    secret = "sk-never-shown-0123456789abcdef"
    config = {
        "temperature": 0.1,
        "extra_headers": {"Authorization": f"Bearer {secret}"},
        "extra_body": {"api_key": "plain-credential-value", "note": f"key {secret}"},
    }
    programs = [
        imp.predict("question -> answer", config=config),
        imp.chain_of_thought("question -> answer", config=config),
        imp.react("question -> answer", [], config=config),
        imp.react_trajectory("question -> answer", [], config=config),
    ]
    for program in programs:
        shown = repr(program)
        assert secret not in shown and "plain-credential-value" not in shown, shown
        assert shown.startswith(f"{type(program).__name__}(signature=Signature(question -> ") and "0.1" in shown
