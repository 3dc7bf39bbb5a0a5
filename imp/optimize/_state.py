"""GEPA's run state between rounds: the random draws, the front, the counters; to and from its checkpoint."""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from imp.optimize._checkpoint import Checkpoint, SavedUsage
from imp.optimize._merge import MergeLog
from imp.optimize._pareto import Front, MinibatchSampler
from imp.optimize._result import OptimizationResult
from imp.records import Usage

__all__ = ["Merges", "State"]


@dataclass
class Merges:
    """Merge bookkeeping: merges due, tried, and whether the last iteration found a new program."""

    log: MergeLog
    due: int = 0
    tested: int = 0
    found_new: bool = False


@dataclass
class State:
    """What GEPA's loop carries from one round to the next (all of it decided in plan order, none by timing)."""

    rng: random.Random
    front: Front
    merges: Merges = field(default_factory=lambda: Merges(MergeLog()))
    sampler: MinibatchSampler = field(init=False)
    next_predictor: dict[int, int] = field(default_factory=dict)
    """Each parent's next predictor turn (round robin)."""
    stale: int = 0
    iteration: int = 0
    """The number the next proposal takes (gepa's iteration counter)."""
    reflections: int = 0
    reflection_tokens: int = 0
    reflection_cost: float = 0.0
    largest_tokens: int = 0
    largest_cost: float = 0.0
    """The folded reflections: how many, their tokens and cost, the largest one (to plan under a ceiling)."""

    def start(self, minibatch: int) -> State:
        """The state with its minibatch sampler drawing from its random generator."""
        self.sampler = MinibatchSampler(minibatch, self.rng)
        return self

    def count_reflection(self, usage: Usage) -> None:
        """Add one folded reflection's usage."""
        tokens = usage.input_tokens + usage.output_tokens
        self.reflections += 1
        self.reflection_tokens += tokens
        self.reflection_cost += usage.cost or 0.0
        self.largest_tokens = max(self.largest_tokens, tokens)
        self.largest_cost = max(self.largest_cost, usage.cost or 0.0)

    def checkpoint(
        self, seed: int, sizes: tuple[int, int], result: OptimizationResult, metric_calls: int, usage: Usage
    ) -> Checkpoint:
        """The state with the run's candidates, as written to the log directory."""
        return Checkpoint(
            seed,
            sizes,
            self.iteration,
            [
                {
                    "components": dict(c.instructions),
                    "parents": list(c.parents),
                    "val_scores": list(c.val_scores),
                    "metric_calls": c.metric_calls_at_discovery,
                    "origin": c.origin,
                }
                for c in result.candidates
            ],
            result.best_index,
            metric_calls,
            SavedUsage(
                input_tokens=usage.input_tokens,
                output_tokens=usage.output_tokens,
                cached_tokens=usage.cached_tokens,
                reasoning_tokens=usage.reasoning_tokens,
                cache_write_tokens=usage.cache_write_tokens,
                cost=usage.cost,
                requests=usage.requests,
            ),
            self.rng.getstate(),
            {"order": self.sampler.order, "epoch": self.sampler.epoch},
            {
                "due": self.merges.due,
                "tested": self.merges.tested,
                "found_new": self.merges.found_new,
                "triplets": self.merges.log.triplets,
                "descriptions": self.merges.log.descriptions,
            },
            self.next_predictor,
            self.stale,
            list(result.log),
            {
                "iterations": result.iterations,
                "reflections": self.reflections,
                "reflection_tokens": self.reflection_tokens,
                "reflection_cost": self.reflection_cost,
                "largest_tokens": self.largest_tokens,
                "largest_cost": self.largest_cost,
            },
        )

    @classmethod
    def resumed(cls, saved: Checkpoint, minibatch: int, n_val: int) -> State:
        """The state a checkpoint holds (the candidates are put back by the optimizer)."""
        merges = Merges(MergeLog(), saved.merges["due"], saved.merges["tested"], saved.merges["found_new"])
        merges.log.triplets = [(a, b, c) for a, b, c in saved.merges["triplets"]]
        merges.log.descriptions = [(a, b, tuple(d)) for a, b, d in saved.merges["descriptions"]]
        counters = saved.counters
        state = cls(
            saved.random(),
            Front(n_val),
            merges,
            next_predictor=dict(saved.next_predictor),
            stale=saved.stale,
            iteration=saved.iteration,
            reflections=int(counters.get("reflections", 0)),
            reflection_tokens=int(counters.get("reflection_tokens", 0)),
            reflection_cost=float(counters.get("reflection_cost", 0.0)),
            largest_tokens=int(counters.get("largest_tokens", 0)),
            largest_cost=float(counters.get("largest_cost", 0.0)),
        ).start(minibatch)
        state.sampler.order, state.sampler.epoch = list(saved.sampler["order"]), int(saved.sampler["epoch"])
        return state
