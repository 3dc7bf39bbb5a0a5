"""GEPA's checkpoint: the run's state written to its log directory after every round, read to resume."""

from __future__ import annotations

import json
import os
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from imp.records import Usage

__all__ = ["STATE_FILE", "Checkpoint", "read_checkpoint", "write_checkpoint"]

STATE_FILE = "gepa_state.json"


@dataclass
class Checkpoint:
    """Everything a run needs to go on where it stopped: candidates, random state, counters."""

    seed: int
    sizes: tuple[int, int]
    iteration: int
    candidates: list[dict[str, Any]]
    best_index: int
    metric_calls: int
    reflection_usage: dict[str, Any]
    rng_state: Any
    sampler: dict[str, Any]
    merges: dict[str, Any]
    next_predictor: dict[int, int]
    stale: int
    log: list[str] = field(default_factory=list)
    counters: dict[str, Any] = field(default_factory=dict)
    """The finished iterations and the folded reflections' counts (to plan under a ceiling after a resume)."""

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
