"""GEPA's options: every keyword `imp.GEPA` takes besides the metric and the reflection LM, each
documented once here with its default, and checked when the optimizer is built."""

from __future__ import annotations

import difflib
import os
from typing import Literal, TypedDict

from imp.optimize._base import check_positive

__all__ = ["AUTO_CANDIDATES", "DEFAULTS", "AutoBudget", "GEPAOptions", "checked_options"]

AutoBudget = Literal["light", "medium", "heavy"]
AUTO_CANDIDATES: dict[str, int] = {"light": 6, "medium": 12, "heavy": 18}
"""How many candidates' worth of metric calls each `auto` budget buys (as DSPy's `auto` does)."""


class GEPAOptions(TypedDict, total=False):
    """The options of `imp.GEPA(metric, reflection_lm=..., **options)`, with their defaults.

    Exactly one budget is given: `auto`, `max_metric_calls` or `max_full_evals`. Every other option
    has a default. Build a set once and reuse it: `opts: GEPAOptions = {"auto": "light", "seed": 1}`,
    then `imp.GEPA(metric, reflection_lm=lm, **opts)`; `optimizer.options` holds them all as used.
    """

    auto: AutoBudget | None
    """A budget by size, as DSPy's `auto`: `"light"`, `"medium"` or `"heavy"` buy the valset's
    evaluation plus 6, 12 or 18 candidates' worth of metric calls (each: two minibatches and a
    valset). Default None."""
    max_metric_calls: int | None
    """A budget in metric calls: the run never makes more (a step that would pass it is not started).
    Default None."""
    max_full_evals: int | None
    """A budget in full evaluations: that many times the trainset and valset together, in metric
    calls. Default None."""
    reflection_minibatch_size: int
    """How many training examples a proposal runs its parent on, shows the reflection LM, and runs
    the child on before accepting it. Default 3."""
    max_reflection_tokens: int | None
    """A ceiling on the reflection LM's tokens, in and out (DSPy has none): no proposal starts once
    it is reached. Default None."""
    max_reflection_cost: float | None
    """A ceiling on the reflection LM's cost, in the provider's currency, as its usage reports it.
    Default None."""
    timeout: float | None
    """Seconds the whole run may take; then it stops with the best program so far
    (`result.stop_reason == "timeout"`). An `imp.deadline` around the call does the same. Default None."""
    no_improvement_iterations: int | None
    """Stop after this many reflective proposals in a row that did not raise the best score.
    Default None."""
    skip_perfect_score: bool
    """Skip reflecting on a minibatch the parent already scores `perfect_score` on everywhere (as
    DSPy does). Default True."""
    perfect_score: float
    """The score that counts as perfect for `skip_perfect_score`. Default 1.0."""
    optimize_tool_descriptions: bool
    """Also rewrite each tool's description (`tool:<name>` components) of a tool loop, never its
    runner. Default False."""
    use_merge: bool
    """After a proposal that found a new program, try a merge of two candidates on the front that
    descend from a common ancestor (as DSPy's `use_merge`). Default True."""
    max_merge_invocations: int
    """How many merges the run may test in all. Default 5."""
    concurrency: int
    """How many evaluations (student calls and metric calls) run at once, for the whole optimization
    (DSPy's `num_threads`). Default 16."""
    proposals_at_once: int | None
    """How many proposals a round starts together; 1 runs one iteration at a time, as the `gepa`
    package's loop does. Default None: `2 * concurrency // reflection_minibatch_size` (10 with the
    defaults), since a proposal spends about a third of its time waiting on its reflection."""
    failure_score: float
    """The score of an example whose run or metric raised. Default 0.0."""
    seed: int
    """Every random choice (parents, minibatches, merges) is drawn from this seed: the same seed on
    the same LMs gives the same run. Default 0."""
    progress: bool
    """Log one line per new candidate (its score, the best so far, the metric calls spent) as the
    `gepa_candidate` event on imp's logger, at INFO: shown once `imp.configure_logging()` (or your
    own logging set-up) shows imp's lines. Default True."""
    log_dir: str | os.PathLike[str] | None
    """A directory the run's state is written to after every round; the same optimizer on the same
    data and log directory resumes where it stopped. Default None."""


DEFAULTS: GEPAOptions = {
    "auto": None,
    "max_metric_calls": None,
    "max_full_evals": None,
    "reflection_minibatch_size": 3,
    "max_reflection_tokens": None,
    "max_reflection_cost": None,
    "timeout": None,
    "no_improvement_iterations": None,
    "skip_perfect_score": True,
    "perfect_score": 1.0,
    "optimize_tool_descriptions": False,
    "use_merge": True,
    "max_merge_invocations": 5,
    "concurrency": 16,
    "proposals_at_once": None,
    "failure_score": 0.0,
    "seed": 0,
    "progress": True,
    "log_dir": None,
}
"""Every option's default (a budget has none: one must be given)."""

_DSPY_NAMES = {
    "num_threads": "concurrency=",
    "track_stats": "nothing: the run's candidates and scores are always kept in optimizer.result",
    "track_best_outputs": "nothing: each candidate's valset scores are kept in optimizer.result",
}
"""DSPy's GEPA keywords imp spells differently, and what to write instead."""


def checked_options(given: GEPAOptions) -> GEPAOptions:
    """Every option, the given ones checked (a wrong type, value or name is refused, naming the fix)."""
    known = set(DEFAULTS)
    for name in given:
        if name in known:
            continue
        if name in _DSPY_NAMES:
            raise TypeError(f"GEPA has no option {name!r} (DSPy's); give {_DSPY_NAMES[name]}")
        close = difflib.get_close_matches(name, known, n=1)
        hint = f": did you mean {close[0]!r}?" if close else f"; the options are {sorted(known)}"
        raise TypeError(f"GEPA has no option {name!r}{hint}")
    options: GEPAOptions = {**DEFAULTS, **given}
    budgets = [n for n in ("auto", "max_metric_calls", "max_full_evals") if given.get(n) is not None]
    if len(budgets) != 1:
        raise ValueError(
            "GEPA needs exactly one budget: auto='light'|'medium'|'heavy', max_metric_calls=N or "
            f"max_full_evals=N; got {budgets or 'none'}"
        )
    auto = options["auto"]
    if auto is not None and auto not in AUTO_CANDIDATES:
        raise ValueError(f"auto is 'light', 'medium' or 'heavy', got {auto!r}")
    for name in ("max_metric_calls", "max_full_evals", "max_reflection_tokens", "no_improvement_iterations"):
        check_positive(options.get(name), name, allow_none=True)
    check_positive(options["reflection_minibatch_size"], "reflection_minibatch_size")
    check_positive(options["concurrency"], "concurrency")
    check_positive(options["proposals_at_once"], "proposals_at_once", allow_none=True)
    check_positive(options["max_merge_invocations"], "max_merge_invocations", allow_zero=True)
    for flag in ("use_merge", "skip_perfect_score", "optimize_tool_descriptions", "progress"):
        if not isinstance(options.get(flag), bool):
            raise TypeError(f"{flag} is True or False, got {options.get(flag)!r}")
    for name in ("max_reflection_cost", "timeout"):
        value = options.get(name)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int | float) or value <= 0):
            raise ValueError(f"{name} is a positive number or None, got {value!r}")
    for name in ("perfect_score", "failure_score"):
        value = options.get(name)
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise TypeError(f"{name} is a number, got {value!r}")
    if isinstance(options["seed"], bool) or not isinstance(options["seed"], int):
        raise TypeError(f"seed is an integer, got {options['seed']!r}")
    if options["proposals_at_once"] is None:
        options["proposals_at_once"] = max(1, 2 * options["concurrency"] // options["reflection_minibatch_size"])
    return options
