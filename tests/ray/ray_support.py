"""What the Ray tests share and the workers import by name: the fake model's answers, a devset, a metric."""

from __future__ import annotations

import json
import re
from typing import Any

from fake_provider import FakeProvider, Received, Reply

import imp

SIG = "question -> answer"


def answer_of(question: str) -> str:
    """The fake model's answer: right for even numbers, wrong for odd ones."""
    number = int(re.findall(r"\d+", question)[-1])
    return str(number * 2 if number % 2 == 0 else number * 2 + 1)


def chat_reply(received: Received, *, delay: float = 0.0) -> Reply:
    """An OpenAI-shaped completion in the Chat adapter's format, answering the request's question."""
    user = [m for m in received.json["messages"] if m["role"] == "user"][-1]["content"]
    question = user.split("[[ ## question ## ]]")[-1].split("[[")[0].strip()
    content = f"[[ ## answer ## ]]\n{answer_of(question)}\n\n[[ ## completed ## ]]"
    body = {
        "id": "chatcmpl-ray",
        "object": "chat.completion",
        "model": "x",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 10 + len(question), "completion_tokens": 7, "total_tokens": 17 + len(question)},
    }
    return Reply(json=body, delay=delay)


def program_for(fake: FakeProvider) -> imp.Predict:
    client = imp.lm("openai:gpt-4o-mini", base_url=fake.base_url, max_retries=2)
    return imp.predict(SIG, lm=client)


def devset(count: int) -> list[imp.Example]:
    return [
        imp.Example(question=f"What is twice {n}?", answer=str(n * 2)).with_inputs("question") for n in range(count)
    ]


def metric(example: imp.Example, prediction: imp.Prediction) -> bool:
    return bool(example.answer == prediction.answer)


def comparable(report: imp.EvaluationReport) -> dict[str, Any]:
    """A report's record without its elapsed time."""
    record = report.to_dict()
    record.pop("elapsed_seconds")
    return json.loads(json.dumps(record))


def worker_lm(base_url: str) -> imp.LM:
    """The LM a worker builds for itself (an `lm_factory`): it marks each request with the worker's pid."""
    import os

    return imp.lm("openai:gpt-4o-mini", base_url=base_url, max_retries=3, headers={"x-worker": str(os.getpid())})


def crash_once(marker: str, example: imp.Example, prediction: imp.Prediction) -> bool:
    """A metric that kills its worker process the first time it sees question 7 (a crashed worker)."""
    import os
    from pathlib import Path

    if "twice 7?" in example.question and not Path(marker).exists():
        Path(marker).write_text("crashed")
        os._exit(1)
    return metric(example, prediction)


def crash_always(example: imp.Example, prediction: imp.Prediction) -> bool:
    """A metric that kills its worker every time it sees question 7."""
    import os

    if "twice 7?" in example.question:
        os._exit(1)
    return metric(example, prediction)


def metric_failing_on_5(example: imp.Example, prediction: imp.Prediction) -> bool:
    """A metric that raises on question 5 (a metric-stage failure)."""
    if "twice 5?" in example.question:
        raise ValueError("the metric cannot read row 5")
    return metric(example, prediction)


def refusing_some(received: Received) -> Reply:
    """The fake model, refusing questions about multiples of 10 with a 400 (a program-stage failure)."""
    user = [m for m in received.json["messages"] if m["role"] == "user"][-1]["content"]
    if re.search(r"twice (\d*0)\?", user) and "twice 0?" not in user:
        return Reply(400, json={"error": {"message": "refused", "type": "invalid_request_error"}})
    return chat_reply(received)


def max_in_window(times: list[float], width: float) -> int:
    """The most arrivals inside any window of `width` seconds."""
    times = sorted(times)
    most, start = 0, 0
    for end, at in enumerate(times):
        while at - times[start] > width:
            start += 1
        most = max(most, end - start + 1)
    return most


class Throttler:
    """A fake model that answers 429 with a Retry-After to its first request, then answers after `delay`."""

    def __init__(self, retry_after: float, delay: float) -> None:
        self.retry_after = retry_after
        self.delay = delay
        self.throttled_at: float | None = None

    def __call__(self, received: Received) -> Reply:
        if self.throttled_at is None:
            self.throttled_at = received.at
            error = {"error": {"message": "Rate limit reached", "type": "requests", "code": "rate_limit_exceeded"}}
            return Reply(429, json=error, headers={"retry-after": str(self.retry_after)})
        return chat_reply(received, delay=self.delay)


class Counting:
    """A fake model that takes `delay` seconds per request and records the most requests open at once."""

    def __init__(self, delay: float) -> None:
        import threading

        self.delay = delay
        self.open = 0
        self.most = 0
        self._lock = threading.Lock()

    def __call__(self, received: Received) -> Reply:
        import time

        with self._lock:
            self.open += 1
            self.most = max(self.most, self.open)
        time.sleep(self.delay)
        with self._lock:
            self.open -= 1
        return chat_reply(received)


def slow_on_3(received: Received) -> Reply:
    """The fake model, taking three seconds to answer question 3 (a row that passes its timeout)."""
    user = [m for m in received.json["messages"] if m["role"] == "user"][-1]["content"]
    return chat_reply(received, delay=3.0 if "twice 3?" in user else 0.0)


def broken_lm() -> imp.LM:
    """An `lm_factory` that fails inside the worker (its environment lacks what the model needs)."""
    raise RuntimeError("OPENAI_API_KEY is not set on this worker")
