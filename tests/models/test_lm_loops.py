"""One LM value serves call after call, each on an event loop of its own (`imp.call_sync`, a
notebook's helper thread, `anyio.run` twice): its pool is remade for a new loop, never reused dead."""

from __future__ import annotations

import threading
from typing import Any

import anyio
import pytest
from fake_provider import FakeProvider, Reply
from lm_constants import FAST_RETRIES, SECRET

import imp


def _completion(text: str) -> Reply:
    return Reply(
        json={
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "model": "gpt-4o",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7},
        }
    )


def _program(fake: FakeProvider) -> Any:
    client = imp.lm("openai:gpt-4o", api_key=SECRET, base_url=fake.base_url, retry_policy=FAST_RETRIES, max_retries=0)
    return imp.predict("question -> answer", lm=client)


@pytest.mark.filterwarnings("ignore::ResourceWarning", "ignore::pytest.PytestUnraisableExceptionWarning")
def test_call_sync_again_and_again_with_one_lm(fake: FakeProvider) -> None:
    fake.add(*(_completion(f"[[ ## answer ## ]]\nA{i}") for i in range(4)))
    program = _program(fake)
    answers = [imp.call_sync(program, question=f"q{i}").answer for i in range(4)]
    assert answers == ["A0", "A1", "A2", "A3"] and len(fake.requests) == 4


@pytest.mark.filterwarnings("ignore::ResourceWarning", "ignore::pytest.PytestUnraisableExceptionWarning")
@pytest.mark.parametrize(
    "backends", [("asyncio", "asyncio"), ("trio", "trio"), ("asyncio", "trio"), ("trio", "asyncio")]
)
def test_one_lm_on_successive_loops_of_either_library(fake: FakeProvider, backends: tuple[str, str]) -> None:
    fake.add(*(_completion(f"[[ ## answer ## ]]\nA{i}") for i in range(2)))
    program = _program(fake)
    answers = []
    for index, backend in enumerate(backends):
        answers.append(anyio.run(lambda i=index: imp.call(program, question=f"q{i}"), backend=backend).answer)
    assert answers == ["A0", "A1"]


@pytest.mark.filterwarnings("ignore::ResourceWarning", "ignore::pytest.PytestUnraisableExceptionWarning")
def test_one_lm_from_two_threads_in_turn(fake: FakeProvider) -> None:
    fake.add(*(_completion(f"[[ ## answer ## ]]\nA{i}") for i in range(2)))
    program = _program(fake)
    answers: list[str] = []
    for index in range(2):
        worker = threading.Thread(
            target=lambda i=index: answers.append(imp.call_sync(program, question=f"q{i}").answer)
        )
        worker.start()
        worker.join()
    assert answers == ["A0", "A1"]
