"""docs/examples/fastapi_approvals.py under uvicorn on 127.0.0.1: a turn started by one request,
decided by another (across a restart of the service, too)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

from fastapi_harness import AppServer, load_example

import imp

example = load_example(Path(__file__).resolve().parents[2] / "docs" / "examples" / "fastapi_approvals.py")


def model(messages: list[dict[str, Any]], options: dict[str, Any]) -> Any:
    """The agent's model: refunds 40 on the order the ticket names, then says what the tool said."""
    last = messages[-1]
    if last["role"] == "tool":
        return imp.LMResponse(text=f"Done: {last['content']}")
    return {"tool_calls": [{"id": "r1", "name": "refund", "arguments": {"order": "A-1", "amount": 40}}]}


def serve(db: Path) -> AppServer:
    return AppServer(example.create_app(lm=imp.StaticLM(model), db_path=db)).start()


async def _start(client: httpx.AsyncClient) -> dict[str, Any]:
    response = await client.post("/tickets", json={"ticket": "Order A-1 was charged twice."})
    assert response.status_code == 200
    body: dict[str, Any] = response.json()
    return body


async def test_one_request_starts_the_turn_and_another_decides_it_across_a_restart(tmp_path: Path) -> None:
    db = tmp_path / "approvals.db"
    server = serve(db)
    try:
        async with httpx.AsyncClient(base_url=server.url, timeout=10) as client:
            started = await _start(client)
    finally:
        server.stop()
    assert started["status"] == "awaiting_approval"
    assert started["calls"] == [
        {
            "id": "r1",
            "tool": "refund",
            "arguments": {"order": "A-1", "amount": 40},
            "reason": "refund waits for approval.",
        }
    ]
    server = serve(db)  # redeployed: a new process would read the same store
    try:
        async with httpx.AsyncClient(base_url=server.url, timeout=10) as client:
            url = f"/approvals/{started['approval_id']}"
            decided = await client.post(url, json={"decisions": {"r1": {"allow": True}}})
            again = await client.post(url, json={"decisions": {"r1": {"allow": True}}})
    finally:
        server.stop()
    assert decided.status_code == 200
    assert decided.json() == {"status": "answered", "reply": "Done: refunded 40 on A-1", "complete": True}
    assert again.status_code == 404  # decided once: it never runs again


@pytest.mark.parametrize(
    ("decision", "reply"),
    [
        ({"allow": True, "arguments": {"order": "A-1", "amount": 15}}, "Done: refunded 15 on A-1"),
        ({"deny": "needs a manager"}, "Done: Error: refund was not allowed; needs a manager."),
    ],
)
async def test_an_edit_or_a_denial(tmp_path: Path, decision: dict[str, Any], reply: str) -> None:
    server = serve(tmp_path / "approvals.db")
    try:
        async with httpx.AsyncClient(base_url=server.url, timeout=10) as client:
            started = await _start(client)
            decided = await client.post(f"/approvals/{started['approval_id']}", json={"decisions": {"r1": decision}})
    finally:
        server.stop()
    assert decided.json()["reply"] == reply


async def test_unusable_decisions_are_refused_and_the_turn_still_waits(tmp_path: Path) -> None:
    server = serve(tmp_path / "approvals.db")
    try:
        async with httpx.AsyncClient(base_url=server.url, timeout=10) as client:
            started = await _start(client)
            url = f"/approvals/{started['approval_id']}"
            missing = await client.post(url, json={"decisions": {}})
            bad = await client.post(url, json={"decisions": {"r1": {"allow": True, "arguments": {"order": "A-1"}}}})
            decided = await client.post(url, json={"decisions": {"r1": {"allow": True}}})
    finally:
        server.stop()
    assert missing.status_code == 422 and "r1" in missing.json()["detail"]
    assert bad.status_code == 422 and "amount" in bad.json()["detail"]
    assert decided.status_code == 200 and decided.json()["reply"] == "Done: refunded 40 on A-1"


async def test_decisions_posted_at_once_run_the_call_once(tmp_path: Path) -> None:
    runs: list[str] = []
    original = example.refund.runner

    def counted(order: str, amount: float) -> str:
        runs.append(order)
        return original(order, amount)

    example.refund = example.refund.with_runner(counted)  # the app's agent is built when it starts
    server = serve(tmp_path / "approvals.db")
    statuses: list[int] = []
    try:
        async with httpx.AsyncClient(base_url=server.url, timeout=10) as client:
            started = await _start(client)
            url = f"/approvals/{started['approval_id']}"

            async def post() -> None:
                statuses.append((await client.post(url, json={"decisions": {"r1": {"allow": True}}})).status_code)

            async with anyio.create_task_group() as group:
                for _ in range(8):
                    group.start_soon(post)
    finally:
        server.stop()
        example.refund = example.refund.with_runner(original)
    assert sorted(statuses) == [200] + [404] * 7
    assert runs == ["A-1"]
