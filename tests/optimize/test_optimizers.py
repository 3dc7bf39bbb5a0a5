"""LabeledFewShot, BootstrapFewShot and GEPA on scripted LMs whose answers depend on the instruction."""

from __future__ import annotations

import inspect
import io
import logging
import random
import re
from pathlib import Path
from typing import Any

import anyio
import pytest
from helpers import RULE, examples, metric, reflection, student, word_of

import imp
from imp.optimize import GEPA, BootstrapFewShot, LabeledFewShot


async def test_labeled_few_shot_samples_k_demos_without_a_model_call() -> None:
    program = imp.predict("word -> answer", lm=student())
    made = await LabeledFewShot(k=3, seed=1).compile(program, trainset=examples())
    assert len(made.demos) == 3
    assert all(set(d) == {"word", "answer"} for d in made.demos)
    again = await LabeledFewShot(k=3, seed=1).compile(program, trainset=examples())
    assert [dict(d) for d in again.demos] == [dict(d) for d in made.demos]
    first = await LabeledFewShot(k=3, sample=False).compile(program, trainset=examples())
    assert [d["word"] for d in first.demos] == ["apple", "river", "stone"]
    assert program.lm.requests == [] if hasattr(program.lm, "requests") else True
    assert made.optimized is not None and made.optimized.optimizer == "LabeledFewShot"
    assert program.demos == ()


async def test_bootstrap_keeps_only_passing_traces_with_intermediate_fields() -> None:
    def handler(messages: list[Any], options: dict[str, Any]) -> dict[str, Any]:
        word = word_of(messages)
        good = word in ("apple", "stone")
        return {"reasoning": f"thinking about {word}", "answer": word.upper() if good else word}

    program = imp.chain_of_thought("word -> answer", lm=imp.StaticLM(handler))
    optimizer = BootstrapFewShot(metric, max_bootstrapped_demos=4, max_labeled_demos=3)
    made = await optimizer.compile(program, trainset=examples(["apple", "river", "stone", "cloud"]))
    boot = [d for d in made.demos if "reasoning" in d]
    assert [d["word"] for d in boot] == ["apple", "stone"]
    assert boot[0]["reasoning"] == "thinking about apple" and boot[0]["answer"] == "APPLE"
    labeled = [d for d in made.demos if "reasoning" not in d]
    assert len(labeled) == 1 and labeled[0]["word"] in ("river", "cloud")  # 3 in all: 2 bootstrapped, 1 labelled
    assert labeled[0]["answer"] == labeled[0]["word"].upper()  # the label, not the failed run
    assert optimizer.result is not None and optimizer.result.metric_calls == 4


async def test_bootstrap_later_rounds_ask_again_at_temperature_one_past_the_cache() -> None:
    seen: list[dict[str, Any]] = []

    def handler(messages: list[Any], options: dict[str, Any]) -> dict[str, Any]:
        seen.append(options)
        word = word_of(messages)
        return {"answer": word.upper() if options.get("temperature") == 1.0 else word}

    program = imp.predict("word -> answer", lm=imp.StaticLM(handler))
    made = await BootstrapFewShot(metric, max_rounds=2, max_labeled_demos=0).compile(
        program, trainset=examples(["apple", "river"])
    )
    assert [d["word"] for d in made.demos] == ["apple", "river"]
    later = [o for o in seen if o.get("temperature") == 1.0]
    assert len(later) == 2 and all(o["rollout_id"] == 1 for o in later)


async def test_bootstrap_runs_the_trainset_concurrently() -> None:
    in_flight = peak = 0

    async def handler(messages: list[Any], options: dict[str, Any]) -> dict[str, Any]:
        nonlocal in_flight, peak
        in_flight += 1
        peak = max(peak, in_flight)
        await anyio.sleep(0.01)
        in_flight -= 1
        return {"answer": "x"}

    program = imp.predict("word -> answer", lm=imp.StaticLM(handler))
    await BootstrapFewShot(metric, concurrency=5).compile(program, trainset=examples())
    assert peak == 5


async def test_bootstrap_stops_at_max_errors_with_an_imp_error_naming_the_last() -> None:
    def handler(messages: list[Any], options: dict[str, Any]) -> dict[str, Any]:
        raise imp.RateLimited("slow down", status=429)

    program = imp.predict("word -> answer", lm=imp.StaticLM(handler))
    with pytest.raises(imp.OptimizationError, match="max_errors=2 reached; last error: RateLimited") as caught:
        await BootstrapFewShot(metric, max_errors=2, concurrency=1).compile(program, trainset=examples())
    assert isinstance(caught.value, imp.ImpError) and isinstance(caught.value, RuntimeError)
    assert caught.value.max_errors == 2 and isinstance(caught.value.__cause__, imp.RateLimited)


def test_options_are_checked_when_built() -> None:
    with pytest.raises(ValueError, match="exactly one budget"):
        GEPA(metric, reflection_lm=reflection())
    with pytest.raises(ValueError, match="exactly one budget"):
        GEPA(metric, reflection_lm=reflection(), auto="light", max_metric_calls=10)
    with pytest.raises(ValueError, match="auto is"):
        GEPA(metric, reflection_lm=reflection(), auto="huge")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="reflection_lm"):
        GEPA(metric, reflection_lm="openai:gpt-5", auto="light")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="k is"):
        LabeledFewShot(k=0)
    with pytest.raises(ValueError, match="max_rounds"):
        BootstrapFewShot(metric, max_rounds=0)


async def test_gepa_finds_the_rule_within_its_budget() -> None:
    program = imp.predict("word -> answer", lm=student())
    optimizer = GEPA(metric, reflection_lm=reflection(), max_metric_calls=60, seed=3)
    made = await optimizer.compile(program, trainset=examples()[:6], valset=examples()[6:])
    assert made.signature.instructions == RULE
    result = optimizer.result
    assert result is not None
    assert result.best_score == 1.0 and result.candidates[0].score == 0.0
    assert result.best.parents == (0,) and result.best.origin == "reflection"
    assert result.metric_calls <= 60
    assert result.reflection_usage.input_tokens == 100 * result.reflection_usage.requests
    assert made.optimized is not None and made.optimized.optimizer == "GEPA" and made.optimized.score == 1.0
    assert program.signature.instructions != RULE


@pytest.mark.parametrize("budget", [4, 7, 13, 25])
async def test_gepa_never_spends_more_metric_calls_than_its_budget(budget: int) -> None:
    optimizer = GEPA(metric, reflection_lm=reflection(), max_metric_calls=budget)
    program = imp.predict("word -> answer", lm=student())
    await optimizer.compile(program, trainset=examples()[:6], valset=examples()[6:])
    assert optimizer.result is not None and optimizer.result.metric_calls <= budget


async def test_the_same_seed_gives_the_same_run() -> None:
    def noisy_reflection() -> imp.StaticLM:
        counter = iter(range(1000))
        return imp.StaticLM(lambda m, o: f"```\nRule {next(counter)}: UPPERCASE\n```")

    runs = []
    for _ in range(2):
        optimizer = GEPA(metric, reflection_lm=noisy_reflection(), max_metric_calls=40, seed=7)
        await optimizer.compile(
            imp.predict("word -> answer", lm=student()), trainset=examples()[:6], valset=examples()[6:]
        )
        assert optimizer.result is not None
        runs.append(
            [(c.instructions, c.parents, c.val_scores) for c in optimizer.result.candidates] + optimizer.result.log
        )
    assert runs[0] == runs[1]


async def test_a_deadline_stopped_run_returns_its_best_program() -> None:
    async def slow(messages: list[Any], options: dict[str, Any]) -> dict[str, Any]:
        await anyio.sleep(0.05)
        return {"answer": "x"}

    program = imp.predict("word -> answer", lm=imp.StaticLM(slow))
    optimizer = GEPA(metric, reflection_lm=reflection(), max_metric_calls=10_000, timeout=1.0)
    made = await optimizer.compile(program, trainset=examples()[:6], valset=examples()[6:])
    assert optimizer.result is not None and optimizer.result.stop_reason == "timeout"
    assert made.signature.instructions == optimizer.result.best_program.signature.instructions

    with imp.deadline(1.0):
        made = await GEPA(metric, reflection_lm=reflection(), max_metric_calls=10_000).compile(
            program, trainset=examples()[:6], valset=examples()[6:]
        )
    assert isinstance(made, imp.Predict)


async def test_gepa_on_an_agent_rewrites_the_step_and_shows_the_history_and_tools() -> None:
    def look(where: str) -> str:
        """Look somewhere."""
        return "a key"

    asked: list[str] = []

    def reflect(messages: list[Any], options: dict[str, Any]) -> str:
        asked.append(messages[-1]["content"])
        return f"```\n{RULE}\n```"

    def step(messages: list[Any], options: dict[str, Any]) -> dict[str, Any]:
        word = first_word(messages)
        if not any(m.get("role") == "tool" for m in messages):
            return {"tool_calls": [{"name": "look", "arguments": {"where": word}}]}
        upper = "UPPERCASE" in system_text_of(messages)
        return {"answer": word.upper() if upper else word, "tool_calls": []}

    agent = imp.react("word -> answer", [look], lm=imp.StaticLM(step))
    optimizer = GEPA(metric, reflection_lm=imp.StaticLM(reflect), max_metric_calls=40)
    made = await optimizer.compile(agent, trainset=examples()[:3], valset=examples()[3:6])
    assert made.signature.instructions == RULE
    assert made.tools[0].description == "Look somewhere."
    assert "calls look(" in asked[0] and "result of look" in asked[0]
    assert "- look: Look somewhere." in asked[0]


def first_word(messages: list[Any]) -> str:
    import re

    first = next(str(m["content"]) for m in messages if m["role"] == "user")
    return re.findall(r"\[\[ ## word ## \]\]\n(\S+)", first)[0]


def system_text_of(messages: list[Any]) -> str:
    return "\n".join(str(m.get("content", "")) for m in messages if m.get("role") == "system")


async def test_an_optimized_program_saves_with_its_optimizer_and_score(tmp_path: Path) -> None:
    program = imp.predict("word -> answer", lm=student())
    made = await GEPA(metric, reflection_lm=reflection(), max_metric_calls=60, seed=3).compile(
        program, trainset=examples()[:6], valset=examples()[6:]
    )
    path = imp.save(made, tmp_path / "p.json", include_lm=False)
    import json

    saved = json.loads(path.read_text())
    assert saved["optimized"]["optimizer"] == "GEPA" and saved["optimized"]["score"] == 1.0
    loaded = imp.load(path, lm=student())
    assert loaded.signature.instructions == RULE
    assert loaded.optimized is not None and loaded.optimized.optimizer == "GEPA"
    plain = imp.load(imp.save(program, tmp_path / "q.json", include_lm=False), lm=student())
    assert plain.optimized is None and "optimized" not in json.loads((tmp_path / "q.json").read_text())


def test_compile_sync() -> None:
    made = LabeledFewShot(k=2).compile_sync(imp.predict("word -> answer"), trainset=examples())
    assert len(made.demos) == 2


class TwoSteps(imp.Program):
    """A program of two predictors: the first must uppercase, the second must add `!`."""

    def __init__(self, lm: imp.LM) -> None:
        self.first = imp.predict("word -> answer", lm=lm, demos=())
        self.second = imp.predict("word -> answer", lm=lm, demos=())
        self.signature = imp.signature("word, kind -> answer")

    async def acall(self, inputs: dict[str, Any], **call_options: Any) -> imp.Prediction:
        step = self.first if inputs["kind"] == "upper" else self.second
        return await step.acall({"word": inputs["word"]})


async def test_gepa_merges_two_descendants_that_each_fixed_one_predictor() -> None:
    from imp.optimize._merge import MergeLog
    from imp.optimize._pareto import Front
    from imp.optimize._result import Candidate, OptimizationResult
    from imp.optimize._round import Merge, run_round
    from imp.optimize._scoring import Runner
    from imp.optimize._state import Merges, State

    def handler(messages: list[Any], options: dict[str, Any]) -> dict[str, Any]:
        system, word = system_text_of(messages), word_of(messages)
        word = word.upper() if "UPPER" in system else word
        return {"answer": word + "!" if "BANG" in system else word}

    def score(example: imp.Example, prediction: imp.Prediction) -> float:
        return float(prediction.answer == example.answer)

    seed = TwoSteps(imp.StaticLM(handler)).with_parameters(
        instructions={"first.predict": "One.", "second.predict": "Two."}
    )
    val = [imp.Example(word=w, kind="upper", answer=w.upper()).with_inputs("word", "kind") for w in ("ab", "cd", "ef")]
    val += [imp.Example(word=w, kind="bang", answer=w + "!").with_inputs("word", "kind") for w in ("gh", "ij", "kl")]
    one = seed.with_parameters(instructions={"first.predict": "UPPER"})
    two = seed.with_parameters(instructions={"second.predict": "BANG"})
    result = OptimizationResult("GEPA")
    front = Front(len(val))
    optimizer = GEPA(score, reflection_lm=reflection(), max_metric_calls=100, proposals_at_once=1)
    for index, (program, parents, scores) in enumerate(
        [(seed, (), (0.0,) * 6), (one, (0,), (1.0,) * 3 + (0.0,) * 3), (two, (0,), (0.0,) * 3 + (1.0,) * 3)]
    ):
        optimizer._add(result, front, Candidate(index, program, program.parameters().instructions, parents, scores))
    runner = Runner(score, 4)
    state = State(random.Random(0), front, Merges(MergeLog(), due=1, found_new=True)).start(3)
    plans = optimizer._plan(state, result, ["first.predict", "second.predict"], 6)
    assert isinstance(plans, list) and len(plans) == 1 and isinstance(plans[0], Merge)  # the merge is the iteration
    (outcome,) = await run_round(optimizer._proposals(runner, val, val, result), plans, None, 3)
    assert outcome.ending == "accepted"
    assert optimizer._fold(state, result, [outcome], 0) is None
    merged = result.candidates[-1]
    assert merged.origin == "merge" and merged.parents == (1, 2)
    assert dict(merged.instructions) == {"first.predict": "UPPER", "second.predict": "BANG"}
    assert merged.val_scores == (1.0,) * 6 and result.best_index == 3
    assert runner.budget.metric_calls == 5 + 6  # the merge's subsample, then the whole valset


async def test_gepa_rewrites_tool_descriptions_only_when_asked() -> None:
    def look(where: str) -> str:
        """Look."""
        return "a key"

    def step(messages: list[Any], options: dict[str, Any]) -> dict[str, Any]:
        word = first_word(messages)
        described = options["tools"][0]["function"]["description"]
        return {"answer": word.upper() if "uppercase" in described else word, "tool_calls": []}

    def reflect(messages: list[Any], options: dict[str, Any]) -> str:
        text = messages[-1]["content"]
        if "offered the tool `look`" in text:
            return "```\nLook; the answer is then the word in uppercase.\n```"
        return "```\nAnswer.\n```"

    agent = imp.react("word -> answer", [look], lm=imp.StaticLM(step))
    plain = GEPA(metric, reflection_lm=imp.StaticLM(reflect), max_metric_calls=30)
    kept = await plain.compile(agent, trainset=examples()[:3], valset=examples()[3:6])
    assert kept.tools[0].description == "Look." and plain.result is not None and plain.result.best_score == 0.0
    asked = GEPA(metric, reflection_lm=imp.StaticLM(reflect), max_metric_calls=60, optimize_tool_descriptions=True)
    made = await asked.compile(agent, trainset=examples()[:3], valset=examples()[3:6])
    assert made.tools[0].description == "Look; the answer is then the word in uppercase."
    assert made.tools[0].runner is agent.tools[0].runner
    assert asked.result is not None and asked.result.best_score == 1.0


async def test_gepa_progress_is_logged_with_the_best_score_and_the_budget_spent(
    caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    program = imp.predict("word -> answer", lm=student())
    caplog.set_level(logging.INFO, logger="imp")
    await GEPA(metric, reflection_lm=reflection(), max_metric_calls=60, seed=3).compile(
        program, trainset=examples()[:6], valset=examples()[6:]
    )
    lines = [r.msg for r in caplog.records if isinstance(r.msg, dict) and r.msg.get("event") == "gepa_candidate"]
    assert {k: lines[0][k] for k in ("candidate", "origin", "score", "best", "metric_calls", "budget")} == {
        "candidate": 0,
        "origin": "seed",
        "score": 0.0,
        "best": 0.0,
        "metric_calls": 4,
        "budget": 60,
    }
    assert (lines[1]["candidate"], lines[1]["origin"], lines[1]["score"], lines[1]["best"]) == (
        1,
        "reflection",
        1.0,
        1.0,
    )
    assert all(r.levelno == logging.INFO for r in caplog.records if r.msg in lines)
    assert capsys.readouterr().err == ""  # nothing printed: the host's logging decides what is shown
    caplog.clear()
    await GEPA(metric, reflection_lm=reflection(), max_metric_calls=60, progress=False).compile(
        program, trainset=examples()[:6], valset=examples()[6:]
    )
    assert [r for r in caplog.records if isinstance(r.msg, dict) and r.msg.get("event") == "gepa_candidate"] == []


def test_gepa_progress_reads_as_a_line_on_imp_s_configured_log() -> None:
    stream = io.StringIO()
    imp.configure_logging(stream=stream)
    try:
        anyio.run(
            lambda: GEPA(metric, reflection_lm=reflection(), max_metric_calls=60, seed=3).compile(
                imp.predict("word -> answer", lm=student()), trainset=examples()[:6], valset=examples()[6:]
            )
        )
    finally:
        imp.reset_logging()
    first = next(line for line in stream.getvalue().splitlines() if "gepa_candidate" in line)
    assert "candidate=0" in first and "origin=seed" in first and "budget=60" in first and "metric_calls=4" in first


def test_gepa_options_are_one_documented_record() -> None:
    from imp.optimize import GEPAOptions
    from imp.optimize._gepa_options import DEFAULTS

    assert set(GEPAOptions.__annotations__) == set(DEFAULTS)
    doc = imp.GEPA.__doc__ or ""
    assert "GEPAOptions" in doc and "Args:" in doc
    source = Path(inspect.getsourcefile(GEPAOptions) or "").read_text()
    for name in DEFAULTS:  # each option has a docstring saying its default
        after = source.split(f"    {name}: ", 1)[1]
        assert after.split("\n", 1)[1].lstrip().startswith('"""'), name
        assert "Default" in after.split('"""')[1], name
    optimizer = GEPA(metric, reflection_lm=reflection(), auto="light", concurrency=8)
    assert optimizer.options["concurrency"] == 8 and optimizer.options["use_merge"] is True
    assert optimizer.options["proposals_at_once"] == optimizer.proposals_at_once == 2 * 8 // 3


def test_an_unknown_gepa_option_is_refused_with_the_close_name_or_dspy_s_equivalent() -> None:
    with pytest.raises(
        TypeError, match=r"GEPA has no option 'reflection_minibatch': did you mean 'reflection_minibatch_size'"
    ):
        GEPA(metric, reflection_lm=reflection(), auto="light", reflection_minibatch=2)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match=r"no option 'num_threads' \(DSPy's\); give concurrency="):
        GEPA(metric, reflection_lm=reflection(), auto="light", num_threads=4)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="progress is True or False"):
        GEPA(metric, reflection_lm=reflection(), auto="light", progress="yes")  # type: ignore[typeddict-item]
    with pytest.raises(ValueError, match="timeout is a positive number"):
        GEPA(metric, reflection_lm=reflection(), auto="light", timeout=0)


async def test_gepa_checkpoints_to_its_log_directory_and_resumes(tmp_path: Path) -> None:
    counter = iter(range(10_000))

    def reflect_counting(messages: list[Any], options: dict[str, Any]) -> str:
        n = next(counter)
        return f"```\nTry {n}{' in UPPERCASE' if n % 3 == 2 else ''}.\n```"

    def run(budget: int, log_dir: Path | None) -> GEPA:
        return GEPA(
            metric,
            reflection_lm=imp.StaticLM(reflect_counting),
            max_metric_calls=budget,
            seed=5,
            log_dir=log_dir,
            progress=False,
        )

    data = examples()
    whole = run(60, None)
    counter = iter(range(10_000))
    await whole.compile(imp.predict("word -> answer", lm=student()), trainset=data[:6], valset=data[6:])
    counter = iter(range(10_000))
    first = run(20, tmp_path)
    await first.compile(imp.predict("word -> answer", lm=student()), trainset=data[:6], valset=data[6:])
    assert (tmp_path / "gepa_state.json").exists()
    assert first.result is not None and first.result.metric_calls <= 20
    import json

    saved_log = json.loads((tmp_path / "gepa_state.json").read_text())["log"]
    # the resumed run repeats the iteration the budget cut short, its reflection included
    counter = iter(range(len([line for line in saved_log if "rewrote" in line]), 10_000))
    resumed = run(60, tmp_path)
    await resumed.compile(imp.predict("word -> answer", lm=student()), trainset=data[:6], valset=data[6:])
    assert whole.result is not None and resumed.result is not None
    assert [(c.instructions, c.parents, c.val_scores) for c in resumed.result.candidates] == [
        (c.instructions, c.parents, c.val_scores) for c in whole.result.candidates
    ]
    assert resumed.result.metric_calls == whole.result.metric_calls
    with pytest.raises(ValueError, match="another log_dir"):
        await run(60, tmp_path).compile(imp.predict("word -> answer", lm=student()), trainset=data[:5], valset=data[6:])


class Chain(imp.Program):
    """Two predictors called one after the other: shout the word, then add `!`."""

    def __init__(self, lm: imp.LM) -> None:
        self.shout = imp.predict("word -> loud", lm=lm)
        self.bang = imp.chain_of_thought("loud -> answer", lm=lm)
        self.signature = imp.signature("word -> answer")

    async def acall(self, inputs: dict[str, Any], **call_options: Any) -> imp.Prediction:
        loud = await self.shout.acall({"word": inputs["word"]})
        return await self.bang.acall({"loud": loud.loud})


async def test_bootstrap_gives_each_predictor_of_a_composite_program_its_own_demos() -> None:
    def handler(messages: list[Any], options: dict[str, Any]) -> dict[str, Any]:
        text = messages[-1]["content"]
        if "## word ##" in text:
            word = word_of(messages)
            return {"loud": word.upper() if word != "river" else word}
        loud = re.findall(r"\[\[ ## loud ## \]\]\n(\S+)", text)[-1]
        return {"reasoning": "add a bang", "answer": loud}

    def exact(example: imp.Example, prediction: imp.Prediction) -> bool:
        return bool(prediction.answer == example.answer)

    program = Chain(imp.StaticLM(handler))
    made = await BootstrapFewShot(exact, max_labeled_demos=0).compile(
        program, trainset=examples(["apple", "river", "stone"])
    )
    assert isinstance(made, Chain)
    assert [dict(d) for d in made.shout.demos] == [
        {"word": "apple", "loud": "APPLE"},
        {"word": "stone", "loud": "STONE"},
    ]
    assert [dict(d) for d in made.bang.demos] == [
        {"loud": "APPLE", "reasoning": "add a bang", "answer": "APPLE"},
        {"loud": "STONE", "reasoning": "add a bang", "answer": "STONE"},
    ]
    assert program.shout.demos == ()


async def test_bootstrap_on_an_agent_and_a_function_program() -> None:
    def look(where: str) -> str:
        """Look somewhere."""
        return "a key"

    def step(messages: list[Any], options: dict[str, Any]) -> dict[str, Any]:
        word = first_word(messages)
        if not any(m.get("role") == "tool" for m in messages):
            return {"tool_calls": [{"name": "look", "arguments": {"where": word}}]}
        return {"answer": word.upper() if word != "river" else word, "tool_calls": []}

    agent = imp.react("word -> answer", [look], lm=imp.StaticLM(step))
    made = await BootstrapFewShot(metric, max_labeled_demos=0).compile(agent, trainset=examples(["apple", "river"]))
    (demo,) = made.demos
    assert (demo["word"], demo["answer"]) == ("apple", "APPLE")
    steps = imp.History.load(demo["history"])  # the run's steps: its tool call and result, then the answer
    assert [c.name for s in steps for c in s.tool_calls or ()] == ["look"]
    assert [r.result for s in steps for r in s.results or ()] == ["a key"]
    sent: list[list[Any]] = []

    def later(messages: list[Any], options: dict[str, Any]) -> dict[str, Any]:
        sent.append(messages)
        return {"answer": "STONE", "tool_calls": []}

    await imp.call(made.with_lm(imp.StaticLM(later)), word="stone")
    shown = [m for m in sent[0] if m.get("role") in ("assistant", "tool")]
    assert shown[0]["tool_calls"][0].name == "look" and shown[1]["role"] == "tool"
    assert "a key" in str(shown[1]["content"]) and "APPLE" in str(shown[2]["content"])
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        saved = imp.save(made, Path(folder) / "agent.json", include_lm=False, registry={"look": look})
        again = imp.load(saved, lm=imp.StaticLM(later), registry={"look": look})
    assert [dict(d) for d in again.demos] == [dict(d) for d in made.demos]

    @imp.fn(lm=imp.StaticLM(lambda m, o: {"result": "APPLE"}))
    def shout(word: str) -> str:
        """Shout the word, in UPPERCASE."""

    shouted = await BootstrapFewShot(lambda e, p: p.result == e.answer.upper(), max_labeled_demos=0).compile(
        shout, trainset=examples(["apple"])
    )
    assert isinstance(shouted, imp.FunctionProgram)
    assert [dict(d) for d in shouted.demos] == [{"word": "apple", "result": "APPLE"}]


async def test_a_cancelled_run_leaves_its_best_program_on_the_result() -> None:
    async def slow(messages: list[Any], options: dict[str, Any]) -> dict[str, Any]:
        await anyio.sleep(0.02)
        return student_handler_of(messages)

    optimizer = GEPA(metric, reflection_lm=reflection(), max_metric_calls=10_000, progress=False)
    with anyio.move_on_after(0.5):
        await optimizer.compile(
            imp.predict("word -> answer", lm=imp.StaticLM(slow)), trainset=examples()[:6], valset=examples()[6:]
        )
    assert optimizer.result is not None and optimizer.result.candidates
    assert optimizer.result.best_program.signature.instructions == RULE


def student_handler_of(messages: list[Any]) -> dict[str, Any]:
    from helpers import student_handler

    return student_handler(messages, {})


@pytest.mark.parametrize(
    ("options", "limit"),
    [({"auto": "light"}, 4 + 6 * (2 * 3 + 4)), ({"max_full_evals": 2}, 2 * (6 + 4)), ({"max_metric_calls": 9}, 9)],
)
async def test_every_budget_form_is_a_ceiling_on_metric_calls(options: dict[str, Any], limit: int) -> None:
    never = imp.StaticLM(lambda m, o: "```\nAnswer carefully.\n```")  # never finds the rule: the budget ends the run
    optimizer = GEPA(metric, reflection_lm=never, progress=False, **options)
    assert optimizer.metric_budget(6, 4) == limit
    await optimizer.compile(imp.predict("word -> answer", lm=student()), trainset=examples()[:6], valset=examples()[6:])
    assert optimizer.result is not None and optimizer.result.stop_reason == "budget"
    assert limit - 3 <= optimizer.result.metric_calls <= limit


async def test_the_reflection_ceiling_and_no_improvement_stop_the_run() -> None:
    never = imp.StaticLM(lambda m, o: imp.LMResponse(text="```\nAnswer.\n```", usage=imp.Usage(input_tokens=5)))
    tokens = GEPA(metric, reflection_lm=never, max_metric_calls=10_000, max_reflection_tokens=12, progress=False)
    await tokens.compile(imp.predict("word -> answer", lm=student()), trainset=examples()[:6], valset=examples()[6:])
    assert tokens.result is not None and tokens.result.stop_reason == "reflection_budget"
    assert tokens.result.reflection_usage.input_tokens == 15  # the third request reached the ceiling
    stale = GEPA(metric, reflection_lm=never, max_metric_calls=10_000, no_improvement_iterations=4, progress=False)
    await stale.compile(imp.predict("word -> answer", lm=student()), trainset=examples()[:6], valset=examples()[6:])
    assert stale.result is not None and stale.result.stop_reason == "no_improvement" and stale.result.iterations == 4


async def test_the_program_given_is_never_marked_even_when_nothing_beats_it() -> None:
    never = imp.StaticLM(lambda m, o: "```\nAnswer.\n```")
    program = imp.predict("word -> answer", lm=student())
    made = await GEPA(metric, reflection_lm=never, max_metric_calls=20, progress=False).compile(
        program, trainset=examples()[:6], valset=examples()[6:]
    )
    assert made is not program and made.signature.instructions == program.signature.instructions
    assert made.optimized is not None and made.optimized.score == 0.0 and program.optimized is None
