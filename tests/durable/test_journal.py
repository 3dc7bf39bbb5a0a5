"""The journal: every program kind recorded and replayed, a crash mid-run resumed, divergence refused,
forks, idempotency keys, what a journal file holds (nothing secret, 0600, versioned), hostile files."""

from __future__ import annotations

import json
import os
import re
import sqlite3
import stat
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from imp_backends import both_backends

import imp
from imp.models.base import LMResponse
from imp.records import Message

FIXTURES = Path(__file__).parent / "fixtures"


class Crash(BaseException):
    """Stands in for a killed process: nothing in imp catches it."""


class CrashingLM(imp.ScriptedLM):
    """A scripted LM whose request number `crash_at` (1-based) never returns."""

    def __init__(self, steps: Sequence[Any], crash_at: int | None = None) -> None:
        super().__init__(list(steps))
        self.crash_at = crash_at
        self.sent = 0

    async def request(self, messages: Sequence[Message], **options: Any) -> LMResponse:
        self.sent += 1
        if self.sent == self.crash_at:
            raise Crash
        return await super().request(messages, **options)


class Counter:
    """Tools that count their runs and the idempotency keys they were given."""

    def __init__(self) -> None:
        self.runs: list[tuple[str, str | None]] = []

    def tool(self, *, fail_on: str | None = None) -> imp.Tool:
        @imp.tool
        async def lookup(order: str) -> str:
            """Look up an order."""
            self.runs.append((order, imp.idempotency_key()))
            if order == fail_on:
                raise Crash
            return f"{order}: shipped"

        return lookup


def calls(*orders: str) -> dict[str, Any]:
    return {"tool_calls": [{"name": "lookup", "arguments": {"order": o}} for o in orders]}


REACT_SCRIPT = [calls("A", "B", "C"), calls("D"), "All shipped."]


def journal(tmp_path: Path) -> imp.SQLiteJournal:
    return imp.SQLiteJournal(tmp_path / "runs.db")


@both_backends
async def test_a_react_run_crashed_between_steps_resumes_without_repeating_them(tmp_path: Path) -> None:
    counter = Counter()
    j = journal(tmp_path)
    crashing = CrashingLM(REACT_SCRIPT, crash_at=3)
    agent = imp.react("question -> answer", tools=[counter.tool()], lm=crashing)
    with pytest.raises(Crash):
        await imp.call(agent, question="where?", run_id="r1", journal=j)
    assert sorted(o for o, _ in counter.runs) == ["A", "B", "C", "D"]

    resumed_lm = CrashingLM(REACT_SCRIPT[2:])
    resumed = imp.react("question -> answer", tools=[counter.tool()], lm=resumed_lm)
    prediction = await imp.call(resumed, question="where?", run_id="r1", journal=j)

    reference = await imp.call(
        imp.react("question -> answer", tools=[Counter().tool()], lm=imp.ScriptedLM(REACT_SCRIPT)), question="where?"
    )
    assert prediction == reference
    assert prediction.metadata.history == reference.metadata.history
    assert len(resumed_lm.requests) == 1  # only the request the crash interrupted
    assert sorted(o for o, _ in counter.runs) == ["A", "B", "C", "D"]  # no tool ran again
    assert prediction.metadata.replayed == 2 + 4  # two LM exchanges, four tool calls
    assert prediction.metadata.usage.requests == reference.metadata.usage.requests  # counted once
    assert prediction.metadata.lm_calls == reference.metadata.lm_calls


@both_backends
async def test_a_crash_mid_step_reruns_only_the_unfinished_calls_with_the_same_idempotency_key(tmp_path: Path) -> None:
    counter = Counter()
    j = journal(tmp_path)
    # C crashes the process while running; A and B finished first (they do not wait).
    agent = imp.react("question -> answer", tools=[counter.tool(fail_on="C")], lm=imp.ScriptedLM(REACT_SCRIPT))
    with pytest.raises(BaseException):  # noqa: B017 - the Crash, maybe wrapped by the task group
        await imp.call(agent, question="where?", run_id="r2", journal=j)
    first_keys = dict(counter.runs)
    assert set(first_keys) == {"A", "B", "C"}
    assert all(key is not None and key.startswith("r2:") for key in first_keys.values())

    counter.runs.clear()
    again = imp.react("question -> answer", tools=[counter.tool()], lm=imp.ScriptedLM(REACT_SCRIPT[1:]))
    prediction = await imp.call(again, question="where?", run_id="r2", journal=j)
    assert prediction.answer == "All shipped."
    assert sorted(o for o, _ in counter.runs) == ["C", "D"]  # C was running at the crash: it runs again
    assert dict(counter.runs)["C"] == first_keys["C"]  # with the key it had


@both_backends
async def test_a_finished_run_called_again_returns_its_result_without_a_request(tmp_path: Path) -> None:
    j = journal(tmp_path)
    program = imp.chain_of_thought("question -> answer: int", lm=imp.ScriptedLM([{"reasoning": "2+2", "answer": 4}]))
    first = await imp.call(program, question="2+2?", run_id="c1", journal=j)
    silent = imp.chain_of_thought("question -> answer: int", lm=imp.ScriptedLM([]))
    second = await imp.call(silent, question="2+2?", run_id="c1", journal=j)
    assert second == first and second.answer == 4 and second.metadata.replayed == 1
    assert [r.status for r in j.runs()] == ["finished"]


@both_backends
async def test_a_composite_program_keys_its_nested_calls_and_items_by_position(tmp_path: Path) -> None:
    j = journal(tmp_path)

    def by_angle(messages: Sequence[Message], options: Any) -> dict[str, str]:
        text = str(messages[-1]["content"])
        return {"verdict": "ok-" + text.split("## angle ## ]]\n")[1][0]}

    class Verdicts(imp.StaticLM):
        def __init__(self, crash_at: int | None = None) -> None:
            super().__init__(by_angle)
            self.sent, self.crash_at = 0, crash_at

        async def request(self, messages: Sequence[Message], **options: Any) -> LMResponse:
            self.sent += 1
            if self.sent == self.crash_at:
                raise Crash
            return await super().request(messages, **options)

    class Pipeline(imp.Program):
        def __init__(self, draft_lm: imp.LM, check_lm: imp.LM) -> None:
            self.signature = imp.signature("question -> answer")
            self.draft = imp.predict("question -> draft", lm=draft_lm)
            self.check = imp.predict("draft, angle -> verdict", lm=check_lm)

        async def acall(self, inputs: dict[str, Any], **options: Any) -> imp.Prediction:
            draft = (await imp.call(self.draft, question=inputs["question"])).draft
            checks = await imp.parallel(self.check, [{"draft": draft, "angle": a} for a in ("x", "y", "z")])
            return imp.Prediction({"answer": draft + ": " + ", ".join(c.verdict for c in checks)})

    with pytest.raises(BaseException):  # noqa: B017
        await imp.call(
            Pipeline(CrashingLM([{"draft": "D"}]), Verdicts(crash_at=3)), question="q", run_id="p1", journal=j
        )

    later_draft, later_check = CrashingLM([]), Verdicts()
    prediction = await imp.call(Pipeline(later_draft, later_check), question="q", run_id="p1", journal=j)
    assert prediction.answer == "D: ok-x, ok-y, ok-z"
    assert later_draft.requests == []  # the nested call's step came from the journal
    assert later_check.sent == 1  # two of the three items were recorded
    steps = [s.key for s in j.steps("p1")]
    assert steps[0] == "1/1" and {"2/i0/1/1", "2/i1/1/1", "2/i2/1/1"} <= set(steps)


@both_backends
async def test_an_evaluation_resumed_does_not_rerun_finished_rows(tmp_path: Path) -> None:
    j = journal(tmp_path)
    rows = [imp.Example(question=f"q{i}", answer=str(i)).with_inputs("question") for i in range(30)]

    def answer(messages: Sequence[Message], options: Any) -> dict[str, str]:
        return {"answer": re.search(r"\bq(\d+)", str(messages[-1]["content"])).group(1)}  # type: ignore[union-attr]

    class Flaky(imp.StaticLM):
        def __init__(self, crash_at: int | None) -> None:
            super().__init__(answer)
            self.sent, self.crash_at = 0, crash_at

        async def request(self, messages: Sequence[Message], **options: Any) -> LMResponse:
            self.sent += 1
            if self.sent == self.crash_at:
                raise Crash
            return await super().request(messages, **options)

    def metric(example: imp.Example, prediction: imp.Prediction) -> bool:
        return bool(example.answer == prediction.answer)

    with pytest.raises(BaseException):  # noqa: B017
        await imp.evaluate(
            imp.predict("question -> answer", lm=Flaky(20)),
            rows,
            metric,
            concurrency=4,
            progress=False,
            run_id="e1",
            journal=j,
        )
    recorded = len(j.steps("e1"))
    assert 15 <= recorded < 30
    lm = Flaky(None)
    report = await imp.evaluate(
        imp.predict("question -> answer", lm=lm), rows, metric, concurrency=4, progress=False, run_id="e1", journal=j
    )
    reference = await imp.evaluate(
        imp.predict("question -> answer", lm=Flaky(None)), rows, metric, concurrency=4, progress=False
    )
    assert lm.sent == 30 - recorded
    assert report.score == reference.score == 1.0
    assert [r.prediction for r in report.rows] == [r.prediction for r in reference.rows]


@both_backends
async def test_function_programs_and_streams_are_journaled(tmp_path: Path) -> None:
    j = journal(tmp_path)

    def summarizer(lm: imp.LM) -> Any:
        @imp.fn(lm=lm)
        def summarize(text: str) -> str:
            """Summarize the text."""
            ...

        return summarize

    first = await imp.call(summarizer(imp.ScriptedLM([{"result": "Short."}])), text="long text", run_id="f1", journal=j)
    second = await imp.call(summarizer(imp.ScriptedLM([])), text="long text", run_id="f1", journal=j)
    assert second == first

    program = imp.predict(
        "question -> answer", lm=imp.ScriptedLM(["[[ ## answer ## ]]\nStreamed.\n\n[[ ## completed ## ]]"])
    )
    parts = [p async for p in imp.stream(program, question="q", run_id="s1", journal=j)]
    again = imp.predict("question -> answer", lm=imp.ScriptedLM([]))
    replayed = [p async for p in imp.stream(again, question="q", run_id="s1", journal=j)]
    fields = lambda ps: "".join(p.delta for p in ps if p.kind == "field")  # noqa: E731
    assert fields(replayed) == fields(parts) == "Streamed."
    assert replayed[-1].prediction == parts[-1].prediction


@both_backends
async def test_a_changed_program_is_refused_naming_the_step_and_can_be_forked(tmp_path: Path) -> None:
    j = journal(tmp_path)
    counter = Counter()
    agent = imp.react("question -> answer", tools=[counter.tool()], lm=CrashingLM(REACT_SCRIPT, crash_at=3))
    with pytest.raises(Crash):
        await imp.call(agent, question="where?", run_id="m1", journal=j)
    changed = imp.react(
        imp.signature("question -> answer", instructions="Answer in French."),
        tools=[counter.tool()],
        lm=imp.ScriptedLM([]),
    )
    with pytest.raises(imp.JournalMismatch) as caught:
        await imp.call(changed, question="where?", run_id="m1", journal=j)
    error = caught.value
    assert error.step == "1" and error.seq == 1 and "message 0 (system)" in str(error)
    assert "journal.fork('m1'" in str(error)

    with pytest.raises(imp.JournalMismatch, match="inputs"):
        await imp.call(agent, question="elsewhere?", run_id="m1", journal=j)

    # Fork: keep the first step's exchange and its tool calls, go on live with the changed program.
    seq = next(s.seq for s in j.steps("m1") if s.key == "2")
    j.fork("m1", "m1-french", before=seq)
    counter.runs.clear()
    french = imp.react(
        imp.signature("question -> answer", instructions="Answer in French."),
        tools=[counter.tool()],
        lm=imp.ScriptedLM([calls("D"), "Tout est parti."]),
    )
    prediction = await imp.call(french, question="where?", run_id="m1-french", journal=j)
    assert prediction.answer == "Tout est parti."
    assert [o for o, _ in counter.runs] == ["D"]


async def test_run_id_and_journal_go_together(tmp_path: Path) -> None:
    program = imp.predict("q -> a", lm=imp.ScriptedLM([{"a": "x"}]))
    with pytest.raises(TypeError, match="run_id without a journal"):
        await imp.call(program, q="?", run_id="x")
    with pytest.raises(TypeError, match="without run_id"):
        await imp.call(program, q="?", journal=journal(tmp_path))
    with pytest.raises(ValueError, match="run_id is a non-empty string"):
        await imp.call(program, q="?", run_id="", journal=journal(tmp_path))
    with imp.context(journal=journal(tmp_path)):
        assert (await imp.call(program, q="?", run_id="configured")).a == "x"
    assert [r.run_id for r in journal(tmp_path).runs()] == ["configured"]
    assert imp.idempotency_key() is None


async def test_the_journal_file_is_private_and_holds_no_secret(tmp_path: Path) -> None:
    secret = "sk-proj-" + "a1B2c3D4" * 6
    counter = Counter()

    @imp.tool
    def login(user: str, password: str) -> str:
        """Log in."""
        return f"token {secret}"

    script = [
        {"tool_calls": [{"name": "login", "arguments": {"user": "u", "password": secret}}]},
        f"Done with {secret}.",
    ]
    agent = imp.react("question -> answer", tools=[login, counter.tool()], lm=imp.ScriptedLM(script))
    j = journal(tmp_path)
    await imp.call(agent, question="go", run_id="s", journal=j)
    for name in ("runs.db", "runs.db-wal", "runs.db-shm"):
        path = tmp_path / name
        if path.exists():
            assert stat.S_IMODE(path.stat().st_mode) == 0o600, name
            assert secret.encode() not in path.read_bytes()
    j.close()
    assert secret.encode() not in (tmp_path / "runs.db").read_bytes()


def test_a_journal_of_format_1_reads_and_a_newer_one_is_refused(tmp_path: Path) -> None:
    """tests/durable/fixtures/journal-v1.db was written by this format; every later imp reads it."""
    copy = tmp_path / "v1.db"
    copy.write_bytes((FIXTURES / "journal-v1.db").read_bytes())

    async def replay() -> imp.Prediction:
        agent = imp.react("question -> answer", tools=[Counter().tool()], lm=imp.ScriptedLM([]))
        return await imp.call(agent, question="where?", run_id="fixture", journal=imp.SQLiteJournal(copy))

    import anyio

    prediction = anyio.run(replay)
    assert prediction.answer == "All shipped." and prediction.metadata.replayed == 7

    db = sqlite3.connect(copy)
    db.execute("UPDATE imp_meta SET value = '99' WHERE key = 'format'")
    db.commit()
    db.close()
    with pytest.raises(imp.JournalError, match="format '99'"):
        imp.SQLiteJournal(copy).runs()


@pytest.mark.parametrize(
    "body",
    [
        "not json",
        json.dumps({"text": 3}),
        json.dumps({"text": "x", "usage": {"input_tokens": -1}}),
        json.dumps({"text": "x", "tool_calls": "rm -rf"}),
        json.dumps({"__reduce__": "os.system"}),
    ],
)
async def test_a_hostile_record_is_refused_never_run(tmp_path: Path, body: str) -> None:
    j = journal(tmp_path)
    program = imp.predict("q -> a", lm=imp.ScriptedLM([{"a": "x"}]))
    await imp.call(program, q="?", run_id="h", journal=j)
    j.close()
    db = sqlite3.connect(tmp_path / "runs.db")
    db.execute("UPDATE imp_steps SET body = ?", (body,))
    db.commit()
    db.close()
    with pytest.raises(imp.JournalError):
        await imp.call(program, q="?", run_id="h", journal=journal(tmp_path))


def test_the_format_1_fixture_is_what_this_imp_writes(tmp_path: Path) -> None:
    """Regenerate with `python tests/durable/test_journal.py` only when the format's version changes."""
    made = tmp_path / "made.db"
    _write_fixture(made)
    read = lambda p: sqlite3.connect(p).execute("SELECT key, kind, body FROM imp_steps ORDER BY seq").fetchall()  # noqa: E731
    assert read(made) == read(FIXTURES / "journal-v1.db")


def _write_fixture(path: Path) -> None:
    import anyio

    async def write() -> None:
        agent = imp.react("question -> answer", tools=[Counter().tool()], lm=imp.ScriptedLM(REACT_SCRIPT))
        j = imp.SQLiteJournal(path)
        await imp.call(agent, question="where?", run_id="fixture", journal=j)
        j.close()

    anyio.run(write)


if __name__ == "__main__":
    FIXTURES.mkdir(exist_ok=True)
    target = FIXTURES / "journal-v1.db"
    if target.exists():
        os.remove(target)
    _write_fixture(target)


@both_backends
async def test_a_run_whose_steps_held_a_secret_resumes(tmp_path: Path) -> None:
    """Replies and results are kept redacted; the requests after them are digested the same way, so
    a resumed run that replays a redacted step still matches what the live run sent."""
    secret = "sk-proj-" + "Pq7Rs8Tu" * 6

    @imp.tool
    def login(user: str, password: str) -> str:
        """Log in."""
        return f"session for {user}: {secret}"

    script = [
        {"tool_calls": [{"name": "login", "arguments": {"user": "ada", "password": secret}}]},
        {"tool_calls": [{"name": "login", "arguments": {"user": "bob", "password": secret}}]},
        "Both logged in.",
    ]
    j = journal(tmp_path)
    crashing = CrashingLM(script, crash_at=3)
    with pytest.raises(Crash):
        await imp.call(
            imp.react("question -> answer", tools=[login], lm=crashing), question="go", run_id="s", journal=j
        )
    lm = CrashingLM(script[2:])
    prediction = await imp.call(
        imp.react("question -> answer", tools=[login], lm=lm), question="go", run_id="s", journal=j
    )
    assert prediction.answer == "Both logged in." and len(lm.requests) == 1
