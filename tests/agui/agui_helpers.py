"""Helpers of the AG-UI tests: collecting a run's events, the protocol's ordering rules, and the
protocol's own TypeScript schemas (`@ag-ui/core`, from npm) run by node."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import AsyncIterable
from pathlib import Path
from typing import Any

import pytest
from ag_ui.core import Event
from pydantic import TypeAdapter

import imp.agui

HERE = Path(__file__).resolve().parent
NODE_DIR = Path(os.environ.get("IMP_TEST_ARTIFACTS", HERE.parents[1] / "build")) / "agui-node"
REQUIRED = os.environ.get("IMP_REQUIRE_BROWSER") == "1"
"""Set by `.ci/run`: there a missing node, npm or browser fails the test instead of skipping it."""

_EVENT: TypeAdapter[Any] = TypeAdapter(Event)


async def wire_events(parts: AsyncIterable[Any], **options: Any) -> list[dict[str, Any]]:
    """The run's events as the client reads them: encoded by the protocol's encoder, each line
    parsed back through the protocol package's `Event` union (which refuses an unknown shape)."""
    lines = [line async for line in imp.agui.encode(imp.agui.events(parts, **options))]
    found = []
    for line in lines:
        assert line.startswith("data: ") and line.endswith("\n\n"), line
        data = json.loads(line[len("data: ") :])
        parsed = _EVENT.validate_python(data)
        assert parsed.model_extra in (None, {}), f"fields the protocol does not have: {parsed.model_extra}"
        found.append(data)
    return found


def check_order(events: list[dict[str, Any]]) -> None:
    """The protocol's ordering rules: one run, started first and ended last; content only inside
    its message; a tool call's arguments between its start and end; a result for a started call."""
    kinds = [e["type"] for e in events]
    assert kinds[0] == "RUN_STARTED" and kinds[-1] in ("RUN_FINISHED", "RUN_ERROR")
    assert kinds.count("RUN_STARTED") == 1 and kinds.count("RUN_FINISHED") + kinds.count("RUN_ERROR") == 1
    open_text: set[str] = set()
    open_reasoning: set[str] = set()
    open_calls: set[str] = set()
    ended_calls: set[str] = set()
    for event in events:
        kind = event["type"]
        if kind == "TEXT_MESSAGE_START":
            assert not open_text and not open_reasoning, "one message at a time"
            open_text.add(event["messageId"])
        elif kind == "TEXT_MESSAGE_CONTENT":
            assert event["messageId"] in open_text and event["delta"]
        elif kind == "TEXT_MESSAGE_END":
            open_text.remove(event["messageId"])
        elif kind == "REASONING_START":
            assert not open_text and not open_reasoning
            open_reasoning.add(event["messageId"])
        elif kind in ("REASONING_MESSAGE_START", "REASONING_MESSAGE_CONTENT", "REASONING_MESSAGE_END"):
            assert event["messageId"] in open_reasoning
        elif kind == "REASONING_END":
            open_reasoning.remove(event["messageId"])
        elif kind == "TOOL_CALL_START":
            assert not open_text and not open_reasoning, "a message is ended before a tool call starts"
            open_calls.add(event["toolCallId"])
        elif kind == "TOOL_CALL_ARGS":
            assert event["toolCallId"] in open_calls
        elif kind == "TOOL_CALL_END":
            open_calls.remove(event["toolCallId"])
            ended_calls.add(event["toolCallId"])
        elif kind == "TOOL_CALL_RESULT":
            assert event["toolCallId"] in ended_calls
        elif kind in ("RUN_FINISHED", "RUN_ERROR"):
            assert not open_text and not open_reasoning and not open_calls, "everything ends before the run"


def _npm_install() -> Path | None:
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        return None
    if not (NODE_DIR / "node_modules" / "@ag-ui" / "core").is_dir():
        NODE_DIR.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            [
                npm,
                "install",
                "--silent",
                "--no-audit",
                "--no-fund",
                "--prefix",
                str(NODE_DIR),
                "@ag-ui/core@1.0.0",
                "zod@3",
            ],
            check=True,
            capture_output=True,
            timeout=300,
        )
    return NODE_DIR


def check_with_typescript_schemas(events: list[dict[str, Any]]) -> int:
    """Check the events with the protocol's zod schemas under node; the count checked."""
    folder = _npm_install()
    if folder is None:
        if REQUIRED:
            pytest.fail("IMP_REQUIRE_BROWSER=1 but node or npm is missing (apt-get install -y nodejs npm)")
        pytest.skip("node and npm are not installed")
    done = subprocess.run(
        ["node", str(HERE / "check_events.js")],
        input="\n".join(json.dumps(e) for e in events),
        capture_output=True,
        text=True,
        timeout=60,
        cwd=folder,
        env={**os.environ, "NODE_PATH": str(folder / "node_modules")},
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return int(json.loads(done.stdout)["checked"])
