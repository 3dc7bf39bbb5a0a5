"""`imp.Budget`: a request's worst case is reserved before it is sent and settled after, so concurrent
requests can never together pass a limit, and no request that fits is refused while budget remains."""

from __future__ import annotations

import io
import json
import random
import threading
import wave
from typing import Any

import anyio
import pytest
from fake_provider import FakeProvider, Received, Reply, chat_completion, message_item, responses_body, sse_chunks
from hypothesis import Phase, given, settings
from hypothesis import strategies as st

import imp
from imp.models._tokens import tokens_at_most
from imp.runtime.budget import LIMITS, Budget, Spend, budget_scope, reserve, reserve_tool_calls, settle

CALLS = 1_000


def _prompt_bytes(received: Received) -> int:
    body = received.json
    return sum(len((m.get("content") or "").encode()) for m in body["messages"])


class Billing:
    """The fake provider's bill: random token counts within what the request allows, summed per run."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.lock = threading.Lock()
        self.billed = Spend()

    def __call__(self, received: Received) -> Reply:
        body = received.json
        with self.lock:
            prompt = self.rng.randint(1, _prompt_bytes(received))  # a tokenizer writes at least a byte a token
            completion = self.rng.randint(0, body["max_tokens"])
            self.billed = self.billed + Spend(1, prompt, completion)
        return Reply(json=chat_completion("ok", prompt=prompt, completion=completion))


def _limits(draw: Any) -> dict[str, Any]:
    chosen = draw(
        st.sets(st.sampled_from(["requests", "input_tokens", "output_tokens", "total_tokens", "usd"]), min_size=1)
    )
    ranges = {
        "requests": st.integers(50, 900),
        "input_tokens": st.integers(2_000, 40_000),
        "output_tokens": st.integers(2_000, 60_000),
        "total_tokens": st.integers(4_000, 80_000),
        "usd": st.floats(0.005, 0.2),
    }
    return {name: draw(ranges[name]) for name in chosen}


@st.composite
def runs(draw: st.DrawFn) -> tuple[dict[str, Any], int]:
    return _limits(draw), draw(st.integers(0, 2**32))


@settings(
    max_examples=4,
    deadline=None,
    phases=[Phase.explicit, Phase.generate],  # a failing run is reported as it is: shrinking 1,000 calls takes minutes
)
@given(run=runs())
def test_a_thousand_concurrent_calls_never_overspend_and_only_requests_that_do_not_fit_are_refused(
    run: tuple[dict[str, Any], int],
) -> None:
    limits, seed = run
    billing = Billing(seed)
    with FakeProvider(responder=billing) as fake:
        _run_thousand(fake, billing, limits, seed)


def _run_thousand(fake: FakeProvider, billing: Billing, limits: dict[str, Any], seed: int) -> None:
    rng = random.Random(seed)
    prompts = ["word " * rng.randint(1, 60) for _ in range(CALLS)]
    caps = [rng.randint(1, 200) for _ in range(CALLS)]
    budget = imp.Budget(**limits)
    lm = imp.lm(
        "openai:m", base_url=fake.base_url, api_key="k", max_retries=0, prices=imp.models.Prices(input=1.0, output=4.0)
    )
    sent: list[int] = []
    refused: list[imp.BudgetExceeded] = []

    async def one(index: int) -> None:
        try:
            await lm.request([{"role": "user", "content": prompts[index]}], max_tokens=caps[index])
            sent.append(index)
        except imp.BudgetExceeded as error:
            refused.append(error)

    async def main() -> None:
        with budget_scope(budget):
            async with anyio.create_task_group() as group:
                for index in range(CALLS):
                    group.start_soon(one, index)
        await lm.aclose()

    anyio.run(main)
    spent = budget.spent
    assert budget.reserved == Spend(), "every reservation settled"
    for name in limits:
        limit = budget.limit(name)  # dollars in nanodollars, as the budget keeps them
        assert limit is not None and spent.value(name) <= limit, f"{name} overspent: {spent.value(name)} > {limit}"
    # What settled is what the provider billed, request for request.
    assert (spent.requests, spent.input_tokens, spent.output_tokens) == (
        billing.billed.requests,
        billing.billed.input_tokens,
        billing.billed.output_tokens,
    )
    assert len(sent) + len(refused) == CALLS and len(fake.requests) == len(sent)
    # A refusal happened only when the request's worst case did not fit what the limit left after
    # what had settled and what the requests in flight held at that moment.
    for error in refused:
        limit = budget.limit(error.limit)
        assert limit is not None
        assert (
            error.needed.value(error.limit) + error.spent.value(error.limit) + error.reserved.value(error.limit) > limit
        )
    if "requests" in limits and len(limits) == 1:
        assert len(sent) == min(CALLS, limits["requests"])  # every request that fits went out


def test_nothing_is_reserved_or_refused_without_a_budget() -> None:
    assert reserve("p:m", input_tokens=10**9, output_tokens=10**9, usd_in=1.0, usd_out=1.0, default_output=1) is None
    reserve_tool_calls(10**6)  # no budget open: nothing to spend


@pytest.mark.parametrize("limit", [n for n in LIMITS if n != "tool_calls"])
def test_each_limit_refuses_the_request_that_would_pass_it_naming_it(limit: str) -> None:
    budget = Budget(**{limit: 200 if limit == "total_tokens" else 100})
    with budget_scope(budget):
        first = reserve("p:m", input_tokens=60, output_tokens=60, usd_in=0.5, usd_out=0.5, default_output=4096)
        assert first is not None
        if limit == "requests":
            return  # 100 requests: the second fits; counted in the test below
        with pytest.raises(imp.BudgetExceeded) as caught:
            reserve("p:m", input_tokens=60, output_tokens=60, usd_in=0.5, usd_out=0.5, default_output=4096)
    error = caught.value
    assert error.limit == limit and error.budget is budget and error.model == "p:m"
    assert error.reserved == first.held and error.spent == Spend()
    assert limit in str(error) and "p:m" in str(error)
    assert budget.reserved == first.held  # the refused request holds nothing


def test_the_requests_limit_counts_requests_in_flight() -> None:
    budget = Budget(requests=2)
    with budget_scope(budget):
        held = [
            reserve("p:m", input_tokens=1, output_tokens=1, usd_in=None, usd_out=None, default_output=1)
            for _ in range(2)
        ]
        with pytest.raises(imp.BudgetExceeded, match="requests limit of 2"):
            reserve("p:m", input_tokens=1, output_tokens=1, usd_in=None, usd_out=None, default_output=1)
        settle(held[0], imp.Usage(1, 1, requests=1))
        assert budget.spent.requests == 1 and budget.reserved.requests == 1


def test_settling_replaces_the_worst_case_with_what_was_reported() -> None:
    budget = Budget(total_tokens=1_000)
    with budget_scope(budget):
        held = reserve("p:m", input_tokens=300, output_tokens=500, usd_in=None, usd_out=None, default_output=1)
        assert budget.remaining("total_tokens") == 200
        settle(held, imp.Usage(120, 30, requests=1))
        assert budget.spent.total_tokens == 150 and budget.remaining("total_tokens") == 850
        settle(held, imp.Usage(1, 1, requests=1))  # a second settle changes nothing
        assert budget.spent.total_tokens == 150


def test_a_reply_that_reports_no_usage_is_charged_its_worst_case() -> None:
    budget = Budget(output_tokens=1_000)
    with budget_scope(budget):
        held = reserve("p:m", input_tokens=10, output_tokens=400, usd_in=None, usd_out=None, default_output=1)
        settle(held, imp.Usage(requests=1))
    assert budget.spent.output_tokens == 400


def test_without_max_tokens_the_request_gets_the_room_the_budget_leaves() -> None:
    budget = Budget(output_tokens=1_000)
    with budget_scope(budget):
        first = reserve("p:m", input_tokens=10, output_tokens=None, usd_in=None, usd_out=None, default_output=600)
        second = reserve("p:m", input_tokens=10, output_tokens=None, usd_in=None, usd_out=None, default_output=600)
        assert first is not None and second is not None
        assert (first.output_tokens, second.output_tokens) == (600, 400)
        with pytest.raises(imp.BudgetExceeded, match="output_tokens"):
            reserve("p:m", input_tokens=10, output_tokens=None, usd_in=None, usd_out=None, default_output=600)


def test_a_dollar_budget_prices_the_worst_case_at_the_models_price() -> None:
    budget = Budget(usd=1.0)
    with budget_scope(budget):
        held = reserve("p:m", input_tokens=100_000, output_tokens=None, usd_in=2e-6, usd_out=8e-6, default_output=10**9)
        assert held is not None
        # ($1 - 100k * $2/M) / $8/M, less one token kept for the rounding of dollars to nanodollars
        assert held.output_tokens == 99_999
        assert 0.99999 <= held.held.usd <= 1.0


def test_a_dollar_budget_on_a_model_without_a_price_is_refused_naming_the_model() -> None:
    with budget_scope(Budget(usd=1.0)), pytest.raises(ValueError, match="price of local:llama"):
        reserve("local:llama", input_tokens=1, output_tokens=1, usd_in=None, usd_out=None, default_output=1)


def test_nested_budgets_both_apply_and_the_same_budget_counts_once() -> None:
    outer, inner = Budget(requests=3), Budget(requests=1)
    with budget_scope(outer):
        with budget_scope(inner), budget_scope(inner):  # given again by a nested call: one account
            held = reserve("p:m", input_tokens=1, output_tokens=1, usd_in=None, usd_out=None, default_output=1)
            with pytest.raises(imp.BudgetExceeded) as caught:
                reserve("p:m", input_tokens=1, output_tokens=1, usd_in=None, usd_out=None, default_output=1)
            assert caught.value.budget is inner
            settle(held, imp.Usage(1, 1, requests=1))
        assert (outer.spent.requests, inner.spent.requests) == (1, 1)
        assert outer.reserved == Spend()  # the refused request held nothing in the outer budget either


@pytest.mark.parametrize(
    ("kwargs", "word"),
    [
        ({"requests": -1}, "requests"),
        ({"total_tokens": 1.5}, "total_tokens"),
        ({"usd": float("nan")}, "usd"),
        ({"tool_calls": True}, "tool_calls"),
        ({"usd": "1"}, "usd"),
    ],
)
def test_a_limit_that_is_not_a_count_or_dollars_is_refused_at_construction(kwargs: dict[str, Any], word: str) -> None:
    with pytest.raises(ValueError, match=word):
        imp.Budget(**kwargs)


def test_a_budget_that_is_not_a_budget_is_refused() -> None:
    with pytest.raises(TypeError, match=r"imp\.Budget"), budget_scope({"usd": 1}):  # type: ignore[arg-type]
        pass


def test_the_refusal_carries_the_usage_so_far() -> None:
    budget = Budget(requests=1)
    with budget_scope(budget):
        settle(
            reserve("p:m", input_tokens=5, output_tokens=5, usd_in=None, usd_out=None, default_output=1),
            imp.Usage(4, 3, cost=0.25, requests=1),
        )
        with pytest.raises(imp.BudgetExceeded) as caught:
            reserve("p:m", input_tokens=5, output_tokens=5, usd_in=None, usd_out=None, default_output=1)
    usage = caught.value.usage
    assert (usage.input_tokens, usage.output_tokens, usage.cost, usage.requests) == (4, 3, 0.25, 1)


# --- through imp's HTTP clients ------------------------------------------------------------------


async def test_a_request_sent_without_max_tokens_carries_the_one_its_reservation_chose(fake: FakeProvider) -> None:
    fake.add(Reply(json=chat_completion("ok", prompt=5, completion=3)), Reply(json=chat_completion("ok")))
    lm = imp.lm("openai:m", base_url=fake.base_url, api_key="k")
    budget = imp.Budget(output_tokens=300)
    with budget_scope(budget):
        await lm.request([{"role": "user", "content": "hi"}])
    await lm.request([{"role": "user", "content": "hi"}])  # no budget: the request is left as it is
    assert fake.requests[0].json["max_tokens"] == 300 and "max_tokens" not in fake.requests[1].json
    assert budget.spent == Spend(1, 5, 3)
    await lm.aclose()


ANTHROPIC_REPLY = {
    "id": "msg_1",
    "type": "message",
    "role": "assistant",
    "model": "claude-sonnet-4-6",
    "content": [{"type": "text", "text": "ok"}],
    "stop_reason": "end_turn",
    "usage": {"input_tokens": 5, "output_tokens": 3},
}
REPLIES = {
    "openai": (lambda: Reply(json=chat_completion("ok", prompt=5, completion=3)), "max_tokens"),
    "openai-responses": (
        lambda: Reply(json=responses_body(message_item("ok"), usage={"input_tokens": 5, "output_tokens": 3})),
        "max_output_tokens",
    ),
    "anthropic": (lambda: Reply(json=ANTHROPIC_REPLY), "max_tokens"),
}


@pytest.mark.parametrize("how", ["request", "stream"])
@pytest.mark.parametrize("provider", sorted(REPLIES))
async def test_every_provider_sends_a_request_without_max_tokens_with_the_room_the_budget_leaves(
    fake: FakeProvider, provider: str, how: str
) -> None:
    """Anthropic requires a `max_tokens` (4,096 when a request gives none): under a budget it gets the
    room the budget leaves, as every provider's request does, never a refusal for 4,096 unasked."""
    reply, field = REPLIES[provider]
    fake.responder = lambda received: reply()
    whole = imp.LMCapabilities(streaming=False)  # a stream read whole: the same reservation either way
    lm = imp.lm(f"{provider}:m", base_url=fake.base_url, api_key="k", capabilities=whole, max_retries=0)
    budget = imp.Budget(output_tokens=300)
    with budget_scope(budget):
        if how == "request":
            await lm.request([{"role": "user", "content": "hi"}])
        else:
            [event async for event in lm.stream([{"role": "user", "content": "hi"}])]
    assert fake.requests[0].json[field] == 300
    assert budget.spent == Spend(1, 5, 3) and budget.reserved == Spend()
    with budget_scope(imp.Budget(requests=5)):  # no token or dollar limit: the request is left as it is
        await lm.request([{"role": "user", "content": "hi"}])
    assert fake.requests[1].json.get(field) == (4096 if provider == "anthropic" else None)
    await lm.aclose()


@pytest.mark.parametrize("how", ["request", "stream"])
async def test_a_request_refused_before_sending_for_its_media_holds_nothing(fake: FakeProvider, how: str) -> None:
    """A medium the provider cannot take is refused before anything is sent (`imp.MediaRefused`): nothing
    was billed, so the reservation is given back, as for a refusal the provider answered."""
    wav = io.BytesIO()
    with wave.open(wav, "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(8000)
        out.writeframes(b"\x00\x00" * 80)
    clip = imp.Audio.from_bytes(wav.getvalue())
    lm = imp.lm("anthropic:m", base_url=fake.base_url, api_key="k", max_retries=0)
    budget = imp.Budget(output_tokens=1_000)
    messages = [{"role": "user", "content": ["Transcribe this.", clip]}]
    with budget_scope(budget), pytest.raises(imp.MediaRefused):
        if how == "request":
            await lm.request(messages, max_tokens=100)
        else:
            [event async for event in lm.stream(messages, max_tokens=100)]
    assert fake.requests == [] and budget.spent == Spend() and budget.reserved == Spend()
    await lm.aclose()


async def test_a_refused_request_is_never_sent(fake: FakeProvider) -> None:
    lm = imp.lm("openai:m", base_url=fake.base_url, api_key="k")
    with budget_scope(imp.Budget(input_tokens=5)), pytest.raises(imp.BudgetExceeded, match="input_tokens"):
        await lm.request([{"role": "user", "content": "a prompt longer than five bytes"}])
    assert fake.requests == []
    await lm.aclose()


async def test_a_refusal_by_the_provider_gives_the_reservation_back(fake: FakeProvider) -> None:
    fake.add(Reply(status=400, json={"error": {"message": "bad", "type": "invalid_request_error"}}))
    lm = imp.lm("openai:m", base_url=fake.base_url, api_key="k", max_retries=0)
    budget = imp.Budget(requests=5)
    with budget_scope(budget), pytest.raises(imp.BadRequest):
        await lm.request([{"role": "user", "content": "hi"}], max_tokens=10)
    assert budget.spent == Spend() and budget.reserved == Spend()
    await lm.aclose()


async def test_a_stream_broken_after_its_first_delta_is_charged_its_worst_case(fake: FakeProvider) -> None:
    pieces = sse_chunks("hello there", 3)
    fake.add(Reply(headers={"content-type": "text/event-stream"}, pieces=pieces[:2], fault="reset_mid_stream"))
    lm = imp.lm("openai:m", base_url=fake.base_url, api_key="k", max_retries=0)
    budget = imp.Budget(output_tokens=1_000)
    messages = [{"role": "user", "content": "hi"}]
    with budget_scope(budget), pytest.raises((imp.StreamBroken, imp.ConnectionFailed)):
        async for _ in lm.stream(messages, max_tokens=50):
            pass
    assert budget.spent.output_tokens == 50 and budget.reserved == Spend()
    await lm.aclose()


async def test_a_stream_settles_to_its_reported_usage_and_a_stream_left_early_keeps_its_worst_case(
    fake: FakeProvider,
) -> None:
    fake.add(
        Reply(headers={"content-type": "text/event-stream"}, pieces=sse_chunks("hello there", 3)),
        Reply(headers={"content-type": "text/event-stream"}, pieces=sse_chunks("hello there", 3)),
    )
    lm = imp.lm("openai:m", base_url=fake.base_url, api_key="k", max_retries=0)
    budget = imp.Budget(output_tokens=1_000)
    messages = [{"role": "user", "content": "hi"}]
    with budget_scope(budget):
        async for _ in lm.stream(messages, max_tokens=50):
            pass
        reported = budget.spent.output_tokens
        assert 0 < reported < 50
        events = lm.stream(messages, max_tokens=70)
        async for _ in events:
            break
        await events.aclose()  # type: ignore[attr-defined]
    assert budget.spent.output_tokens == reported + 70 and budget.reserved == Spend()
    await lm.aclose()


async def test_a_reply_from_imps_cache_costs_nothing(fake: FakeProvider) -> None:
    fake.add(Reply(json=chat_completion("ok", prompt=5, completion=3)))
    lm = imp.lm("openai:m", base_url=fake.base_url, api_key="k", cache=True)
    budget = imp.Budget(requests=2)
    messages = [{"role": "user", "content": "hi"}]
    with budget_scope(budget):
        await lm.request(messages, max_tokens=10)
        await lm.request(messages, max_tokens=10)  # the cache answers: its reservation is given back
    assert budget.spent == Spend(1, 5, 3) and budget.reserved == Spend() and len(fake.requests) == 1
    await lm.aclose()


def test_the_input_bound_holds_every_byte_of_the_messages_and_the_tools() -> None:
    text = "naïve — 東京 " * 20
    messages = [{"role": "system", "content": "s"}, {"role": "user", "content": text}]
    tools = [{"type": "function", "function": {"name": "f", "description": "d" * 100, "parameters": {}}}]
    bare = tokens_at_most(messages, {})
    assert bare >= len(text.encode()) + 1
    assert tokens_at_most(messages, {"tools": tools}) >= bare + len(json.dumps(tools)) + 300


async def test_an_lm_of_your_own_that_reserves_nothing_is_charged_what_it_reports() -> None:
    class Own(imp.LM):
        provider, model = "mine", "m"

        async def request(self, messages: Any, **options: Any) -> imp.LMResponse:
            return imp.LMResponse(text="[[ ## answer ## ]]\nyes", usage=imp.Usage(30, 4, requests=1))

    program = imp.predict("question -> answer", lm=Own())
    budget = imp.Budget(total_tokens=50)
    await imp.call(program, question="?", budget=budget)
    assert budget.spent == Spend(1, 30, 4)
    await imp.call(program, question="?", budget=budget)  # not refused before: it could not be
    assert budget.spent.total_tokens == 68


async def test_imp_stream_takes_a_budget_as_imp_call_does() -> None:
    lm = imp.ScriptedLM(["[[ ## answer ## ]]\nx"] * 2)
    program = imp.predict("question -> answer", lm=lm)
    with pytest.raises(imp.BudgetExceeded, match="requests limit of 0"):
        async for _ in imp.stream(program, question="q", budget=imp.Budget(requests=0)):
            pass
    parts = [part async for part in imp.stream(program, question="q", budget=imp.Budget(requests=1))]
    assert parts[-1].kind == "final" and parts[-1].prediction is not None and parts[-1].prediction.answer == "x"


@pytest.mark.parametrize("kind", ["react", "react_trajectory"])
async def test_a_resumed_turn_runs_its_approved_calls_only_within_its_budget(kind: str) -> None:
    ran: list[str] = []

    @imp.tool(requires_approval=True)
    def refund(order: str) -> str:
        """Refund an order."""
        ran.append(order)
        return "refunded"

    if kind == "react":
        step: object = {"tool_calls": [{"name": "refund", "arguments": {"order": "A-1"}}]}
        lm = imp.ScriptedLM([step, {"answer": "done", "tool_calls": []}], exhausted={"tool_calls": []})
        agent: imp.Program = imp.react("question -> answer", [refund], lm=lm)
    else:
        step = {"next_thought": "refund it", "next_tool_name": "refund", "next_tool_args": {"order": "A-1"}}
        finish = {"next_thought": "done", "next_tool_name": "finish", "next_tool_args": {}}
        lm = imp.ScriptedLM([step, finish, {"reasoning": "r", "answer": "done"}])
        agent = imp.react_trajectory("question -> answer", [refund], lm=lm)
    pending = (await imp.call(agent, question="refund A-1")).metadata.pending
    assert pending is not None and ran == []
    allow = {call.id: imp.Allow() for call in pending.calls}
    with pytest.raises(imp.BudgetExceeded, match="tool_calls"):
        await imp.call(agent, resume=pending, decisions=allow, budget=imp.Budget(tool_calls=0))
    assert ran == []  # refused before anything ran; the pending turn is still good to resume
    done = await imp.call(agent, resume=pending, decisions=allow, budget=imp.Budget(tool_calls=1))
    assert ran == ["A-1"] and done.complete
