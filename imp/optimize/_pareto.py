"""GEPA's choices, decided as the `gepa` package decides them: the per-example Pareto front, parent
sampling, the training minibatches, and acceptance."""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Mapping, Sequence

__all__ = ["Front", "MinibatchSampler", "accepts", "remove_dominated", "select_parent"]


class Front:
    """For each validation example, the best score so far and the candidates that reach it."""

    def __init__(self, size: int) -> None:
        self.best: list[float] = [float("-inf")] * size
        self.members: dict[int, set[int]] = {i: set() for i in range(size)}

    def add(self, candidate: int, scores: Sequence[float]) -> None:
        """Put a candidate on the fronts of the examples it is best on (tied with others, or alone)."""
        for i, score in enumerate(scores):
            if score > self.best[i]:
                self.best[i] = score
                self.members[i] = {candidate}
            elif score == self.best[i]:
                self.members[i].add(candidate)


def _dominated(y: int, others: set[int], fronts: Mapping[int, set[int]]) -> bool:
    """Whether every front that holds `y` also holds one of `others`."""
    return all(any(o in others for o in front) for front in fronts.values() if y in front)


def remove_dominated(fronts: Mapping[int, set[int]], scores: Sequence[float]) -> dict[int, set[int]]:
    """The fronts without candidates another candidate covers everywhere, the weakest (by mean) tried first."""
    freq: dict[int, int] = {}
    for front in fronts.values():
        for p in front:
            freq[p] = freq.get(p, 0) + 1
    programs = sorted(freq, key=lambda p: scores[p])
    dominated: set[int] = set()
    changed = True
    while changed:
        changed = False
        for y in programs:
            if y in dominated:
                continue
            if _dominated(y, set(programs) - {y} - dominated, fronts):
                dominated.add(y)
                changed = True
                break
    keep = [p for p in programs if p not in dominated]
    return {k: {p for p in front if p in keep} for k, front in fronts.items()}


def select_parent(fronts: Mapping[int, set[int]], scores: Sequence[float], rng: random.Random) -> int:
    """A parent drawn from the non-dominated candidates, each as often as the examples it is best on."""
    kept = remove_dominated(fronts, scores)
    freq: dict[int, int] = {}
    for front in kept.values():
        for p in front:
            freq[p] = freq.get(p, 0) + 1
    pool = [p for p, n in freq.items() for _ in range(n)]
    return rng.choice(pool)


class MinibatchSampler:
    """Training minibatches: the ids shuffled each epoch, padded with the least-used ids to a whole batch."""

    def __init__(self, size: int, rng: random.Random) -> None:
        self.size = size
        self.rng = rng
        self.order: list[int] = []
        self.epoch = -1

    def _shuffle(self, n: int) -> None:
        self.order = list(range(n))
        self.rng.shuffle(self.order)
        counts = Counter(self.order)
        pad = (self.size - n % self.size) % self.size
        for _ in range(pad):
            least = counts.most_common()[::-1][0][0]
            self.order.append(least)
            counts[least] += 1

    def batch(self, iteration: int, n: int) -> list[int]:
        """The minibatch of training ids for an iteration (counted from 0)."""
        start = iteration * self.size
        epoch = 0 if self.epoch == -1 else start // max(len(self.order), 1)
        if not self.order or epoch > self.epoch:
            self.epoch = epoch
            self._shuffle(n)
        at = start % len(self.order)
        return self.order[at : at + self.size]


def accepts(before: Sequence[float], after: Sequence[float]) -> bool:
    """A child is kept only if its minibatch scores sum strictly higher than its parent's."""
    return sum(after) > sum(before)
