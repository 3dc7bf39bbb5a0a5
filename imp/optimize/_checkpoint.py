"""GEPA's checkpoint: the run's state written to its log directory after every round, read to resume."""

from __future__ import annotations

import json
import os
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypedDict

from imp.optimize._result import Origin
from imp.records import Usage

__all__ = [
    "STATE_FILE",
    "Checkpoint",
    "SavedCandidate",
    "SavedCounters",
    "SavedMerges",
    "SavedSampler",
    "SavedUsage",
    "read_checkpoint",
    "write_checkpoint",
]

STATE_FILE = "gepa_state.json"


class SavedCandidate(TypedDict):
    """One candidate as the checkpoint keeps it: its texts, parents, valset scores, when and how it was found."""

    components: dict[str, str]
    parents: list[int]
    val_scores: list[float]
    metric_calls: int
    origin: Origin


class SavedUsage(TypedDict):
    """The reflection LM's usage so far, as `Usage.dump()` writes it."""

    input_tokens: int
    output_tokens: int
    cached_tokens: int
    reasoning_tokens: int
    cache_write_tokens: int
    cost: float | None
    requests: int


class SavedSampler(TypedDict):
    """The minibatch sampler: the shuffled order of the trainset and how many epochs it has dealt."""

    order: list[int]
    epoch: int


class SavedMerges(TypedDict):
    """The merge bookkeeping: merges due and tested, whether a new program came since, what was tried."""

    due: int
    tested: int
    found_new: bool
    triplets: list[tuple[int, int, int]]
    descriptions: list[tuple[int, int, tuple[int, ...]]]


class SavedCounters(TypedDict, total=False):
    """The finished iterations and the folded reflections' counts (to plan under a ceiling after a resume)."""

    iterations: int
    reflections: int
    reflection_tokens: int
    reflection_cost: float
    largest_tokens: int
    largest_cost: float


@dataclass
class Checkpoint:
    """Everything a run needs to go on where it stopped: candidates, random state, counters."""

    seed: int
    sizes: tuple[int, int]
    iteration: int
    candidates: list[SavedCandidate]
    best_index: int
    metric_calls: int
    reflection_usage: SavedUsage
    rng_state: tuple[int, tuple[int, ...] | list[int], float | None]
    """`random.Random.getstate()` (its tuple a list once read back from JSON)."""
    sampler: SavedSampler
    merges: SavedMerges
    next_predictor: dict[int, int]
    stale: int
    log: list[str] = field(default_factory=list)
    counters: SavedCounters = field(default_factory=lambda: SavedCounters())

    def random(self) -> random.Random:
        """The run's random generator, in the state it was saved in."""
        rng = random.Random()
        version, internal, gauss = self.rng_state
        rng.setstate((version, tuple(internal), gauss))
        return rng

    def usage(self) -> Usage:
        """The reflection LM's usage so far."""
        return Usage(**self.reflection_usage)


def write_checkpoint(directory: str | os.PathLike[str], checkpoint: Checkpoint) -> None:
    """Write the state atomically (a crash mid-write leaves the previous one)."""
    target = Path(directory)
    target.mkdir(parents=True, exist_ok=True)
    data = {**checkpoint.__dict__, "next_predictor": {str(k): v for k, v in checkpoint.next_predictor.items()}}
    temp = target / f".{STATE_FILE}.tmp"
    temp.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    os.replace(temp, target / STATE_FILE)


def read_checkpoint(directory: str | os.PathLike[str]) -> Checkpoint | None:
    """The saved state, or None when the directory holds none."""
    path = Path(directory) / STATE_FILE
    if not path.exists():
        return None
    data = json.loads(path.read_text(encoding="utf-8"))
    data["next_predictor"] = {int(k): v for k, v in data["next_predictor"].items()}
    data["sizes"] = tuple(data["sizes"])
    return Checkpoint(**data)
