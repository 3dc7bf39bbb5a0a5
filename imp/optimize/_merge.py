"""GEPA's merge: two descendants of a common ancestor combined predictor by predictor, decided as the
`gepa` package decides it (which pair, which ancestor, which instruction each predictor takes)."""

from __future__ import annotations

import math
import random
from collections.abc import Mapping, Sequence

from imp.optimize._pareto import remove_dominated

__all__ = ["MergeLog", "dominators", "merge_subsample", "propose_merge"]

Instructions = Mapping[str, str]


class MergeLog:
    """The merges already tried: (i, j, ancestor) triplets and (i, j, sources) descriptions."""

    def __init__(self) -> None:
        self.triplets: list[tuple[int, int, int]] = []
        self.descriptions: list[tuple[int, int, tuple[int, ...]]] = []


def dominators(fronts: Mapping[int, set[int]], scores: Sequence[float]) -> list[int]:
    """The candidates left on some front once the dominated ones are removed."""
    kept = remove_dominated(fronts, scores)
    return list({p for front in kept.values() for p in front})


def _ancestors(node: int, parents: Sequence[Sequence[int]], found: set[int]) -> set[int]:
    for parent in parents[node]:
        if parent not in found:
            found.add(parent)
            _ancestors(parent, parents, found)
    return found


def _desirable(candidates: Sequence[Instructions], a: int, i: int, j: int) -> bool:
    """Whether some predictor is unchanged from the ancestor in one descendant and changed in the other."""
    for name in candidates[a]:
        anc, one, two = candidates[a][name], candidates[i][name], candidates[j][name]
        if anc in (one, two) and one != two:
            return True
    return False


def _pair(
    rng: random.Random,
    parents: Sequence[Sequence[int]],
    pool: Sequence[int],
    log: MergeLog,
    scores: Sequence[float],
    candidates: Sequence[Instructions],
    attempts: int,
) -> tuple[int, int, int] | None:
    for _ in range(attempts):
        if len(pool) < 2:
            return None
        i, j = rng.sample(list(pool), 2)
        if j < i:
            i, j = j, i
        above_i, above_j = _ancestors(i, parents, set()), _ancestors(j, parents, set())
        if j in above_i or i in above_j:
            continue
        common = [
            a
            for a in above_i & above_j
            if (i, j, a) not in log.triplets
            and not (scores[a] > scores[i] or scores[a] > scores[j])
            and _desirable(candidates, a, i, j)
        ]
        if common:
            weights = [scores[a] for a in common]
            if sum(weights) <= 0:  # every ancestor scored 0: gepa's weighted draw raises here; draw evenly
                return i, j, rng.choice(common)
            return i, j, rng.choices(common, k=1, weights=weights)[0]
    return None


def propose_merge(
    rng: random.Random,
    scores: Sequence[float],
    pool: Sequence[int],
    log: MergeLog,
    candidates: Sequence[Instructions],
    parents: Sequence[Sequence[int]],
    overlap: bool = True,
    attempts: int = 10,
) -> tuple[dict[str, str], int, int, int] | None:
    """A merged candidate's instructions and its two parents and ancestor, or None when no pair fits.

    Each predictor changed in only one descendant takes that one's instruction; changed in both, the
    better-scoring descendant's (a seeded coin on a tie).
    """
    if len(pool) < 2 or len(parents) < 3:
        return None
    for _ in range(attempts):
        found = _pair(rng, parents, pool, log, scores, candidates, attempts)
        if found is None:
            continue
        i, j, a = found
        if (i, j, a) in log.triplets:
            continue
        merged = dict(candidates[a])
        sources: tuple[int, ...] = ()
        for name in candidates[a]:  # program order: the same seed gives the same merge in every process
            anc, one, two = candidates[a][name], candidates[i][name], candidates[j][name]
            if anc in (one, two) and one != two:
                source = j if anc == one else i
            elif anc != one and anc != two:
                source = i if scores[i] > scores[j] else (j if scores[j] > scores[i] else rng.choice([i, j]))
            else:
                source = i
            merged[name] = candidates[source][name]
            sources = (*sources, source)
        if (i, j, sources) in log.descriptions:
            continue
        if not overlap:
            continue
        log.descriptions.append((i, j, sources))
        return merged, i, j, a
    return None


def merge_subsample(rng: random.Random, scores1: Sequence[float], scores2: Sequence[float], size: int = 5) -> list[int]:
    """Validation examples to try a merge on: some where each parent wins, some where they tie."""
    common = list(set(range(len(scores1))) & set(range(len(scores2))))
    p1 = [k for k in common if scores1[k] > scores2[k]]
    p2 = [k for k in common if scores2[k] > scores1[k]]
    p3 = [k for k in common if k not in p1 and k not in p2]
    each = max(1, math.ceil(size / 3))
    chosen: list[int] = []
    for bucket in (p1, p2, p3):
        if len(chosen) >= size:
            break
        free = [k for k in bucket if k not in chosen]
        take = min(len(free), each, size - len(chosen))
        if take > 0:
            chosen += rng.sample(free, k=take)
    left = size - len(chosen)
    if left > 0:
        unused = [k for k in common if k not in chosen]
        if len(unused) >= left:
            chosen += rng.sample(unused, k=left)
        elif common:
            chosen += rng.choices(common, k=left)
    return chosen[:size]
