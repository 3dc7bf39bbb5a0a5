"""The live tier, cost: `count_tokens` against llama-cpp-python's own tokenizer, a request too long for
the server's window refused before it is sent, and a budget settled with the server's real usage."""

from __future__ import annotations

import pytest
from live_support import LiveModel

import imp
from imp.models._http import HTTPLM
from imp.runtime.budget import budget_scope

pytestmark = pytest.mark.live

ASK = [
    {"role": "system", "content": "You answer in one short sentence."},
    {"role": "user", "content": "Which planet is known as the red planet, and why is it red?"},
]


async def test_count_tokens_uses_the_servers_tokenizer_and_comes_close_to_what_it_bills(
    live_lm: HTTPLM, live_model: LiveModel
) -> None:
    counted = await live_lm.count_tokens(ASK)
    assert counted.method == "tokenizer" and counted.exact is False  # llama-cpp-python: the template estimated
    billed = (await live_lm.request(ASK, max_tokens=1, temperature=0)).usage.input_tokens
    estimate = imp.models._tokens.estimate(ASK, {}).input_tokens
    # The text is counted by the model's own tokenizer; only the template's tokens are estimated.
    assert abs(counted.input_tokens - billed) <= 12, (counted.input_tokens, billed, live_model.alias)
    assert abs(counted.input_tokens - billed) <= abs(estimate - billed) + 4


async def test_a_request_past_the_servers_window_is_refused_before_it_is_sent(
    live_server: str, live_model: LiveModel
) -> None:
    async with imp.lm(f"openai:{live_model.alias}", base_url=live_server, api_key="none", context_window=2048) as lm:
        with pytest.raises(imp.ContextWindowExceeded, match="it was not sent"):
            await lm.request([{"role": "user", "content": "the planet mars is red " * 1000}])
        short = await lm.request(ASK, max_tokens=4, temperature=0)  # a request that fits is sent
        assert short.usage.input_tokens > 0


async def test_a_budget_settles_with_the_servers_reported_usage(live_lm: HTTPLM) -> None:
    budget = imp.Budget(total_tokens=10_000)
    with budget_scope(budget):
        response = await live_lm.request(ASK, max_tokens=8, temperature=0)
    assert budget.spent.input_tokens == response.usage.input_tokens > 0
    assert budget.spent.output_tokens == response.usage.output_tokens <= 8
    assert budget.reserved.total_tokens == 0
