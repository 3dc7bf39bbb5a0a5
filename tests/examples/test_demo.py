"""`make demo` (`python examples/demo.py`): runs anywhere on its scripted LM and shows what happened."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "examples" / "demo.py"


def run_demo(**env: str) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if k not in {"IMP_LM", "IMP_BASE_URL", "NO_COLOR"}}
    environ.update(env)
    return subprocess.run(
        [sys.executable, str(DEMO)],
        cwd=ROOT,
        env=environ,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.fixture(scope="module")
def demo() -> subprocess.CompletedProcess[str]:
    return run_demo()


def test_exits_zero_without_configuration(demo: subprocess.CompletedProcess[str]) -> None:
    assert demo.returncode == 0, demo.stderr
    assert demo.stderr == ""


def test_shows_the_agent_its_tool_and_the_scripted_lm(demo: subprocess.CompletedProcess[str]) -> None:
    out = demo.stdout
    assert "the escalation agent" in out
    assert "imp.react(signature, [on_call], max_iters=5)" in out
    assert "on_call: Look up the on-call engineer for a squad." in out
    assert "ScriptedLM" in out


def test_shows_the_system_message_with_its_marker_lines(demo: subprocess.CompletedProcess[str]) -> None:
    lines = [line.lstrip(" │|") for line in demo.stdout.splitlines()]
    assert "system" in lines
    assert "user" in lines
    assert "Your input fields are:" in lines
    for marker in ("ticket", "next_thought", "completed"):
        assert f"[[ ## {marker} ## ]]" in lines
    assert "In adhering to this structure, your objective is:" in lines
    assert "When the final answer is ready, call `submit` with `team`, `contact`." in lines


def test_shows_each_request_step_answer_and_ending(demo: subprocess.CompletedProcess[str]) -> None:
    out = demo.stdout
    assert "Request  1: 2 messages to scripted-demo" in out
    assert "Request  2: the previous request, plus" in out
    assert "tool (result of call_1_0)" in out
    assert '-> on_call({"team": "atlas"})  [call_1_0]' in out
    assert 'on_call({"team": "atlas"}) = "Maya" [result]' in out
    assert "termination_reason  submit" in out
    assert "team=atlas  contact=Maya  termination_reason=submit" in out


def test_no_colour_when_stdout_is_not_a_terminal(demo: subprocess.CompletedProcess[str]) -> None:
    assert "\x1b[" not in demo.stdout


def test_a_model_string_needs_its_provider_key() -> None:
    env = {k: "" for k in ("OPENAI_API_KEY",)}
    result = run_demo(IMP_LM="openai:gpt-5.4-mini", **env)
    assert result.returncode == 2
    assert "OPENAI_API_KEY" in result.stdout


class _Terminal:
    encoding = "utf-8"

    def isatty(self) -> bool:
        return True


def test_colour_on_a_terminal_unless_no_color(monkeypatch: pytest.MonkeyPatch) -> None:
    spec = importlib.util.spec_from_file_location("imp_demo", DEMO)
    assert spec is not None and spec.loader is not None
    demo = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, demo)  # its dataclasses look their module up there
    spec.loader.exec_module(demo)
    Style = demo.Style

    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setenv("TERM", "xterm-256color")
    assert Style.detect(_Terminal()).color  # type: ignore[arg-type]
    monkeypatch.setenv("NO_COLOR", "1")
    assert not Style.detect(_Terminal()).color  # type: ignore[arg-type]


def test_the_demo_is_not_shipped_in_the_package() -> None:
    import imp

    assert not (Path(imp.__file__).parent / "demo.py").exists()
    assert DEMO.is_file()
