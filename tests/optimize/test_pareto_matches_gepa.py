"""imp's Pareto selection, minibatches and acceptance decide as the `gepa` package does, on the same scores and seed."""

from __future__ import annotations

import random
from types import SimpleNamespace

import pytest

from imp.optimize._pareto import Front, MinibatchSampler, accepts, remove_dominated, select_parent

gepa_utils = pytest.importorskip("gepa.gepa_utils")
batch_sampler = pytest.importorskip("gepa.strategies.batch_sampler")
acceptance = pytest.importorskip("gepa.strategies.acceptance")


def _random_scores(rng: random.Random, candidates: int, examples: int) -> list[list[float]]:
    return [[rng.choice([0.0, 0.5, 1.0]) for _ in range(examples)] for _ in range(candidates)]


def _gepa_fronts(scores: list[list[float]]) -> dict[int, set[int]]:
    """The fronts as gepa's state keeps them: per example, the candidates with the best score."""
    fronts: dict[int, set[int]] = {}
    for i in range(len(scores[0])):
        best = max(s[i] for s in scores)
        fronts[i] = {c for c, s in enumerate(scores) if s[i] == best}
    return fronts


@pytest.mark.parametrize("case", range(40))
def test_selection_matches_gepa(case: int) -> None:
    rng = random.Random(case)
    scores = _random_scores(rng, rng.randint(1, 8), rng.randint(1, 10))
    front = Front(len(scores[0]))
    for c, s in enumerate(scores):
        front.add(c, s)
    fronts = _gepa_fronts(scores)
    assert front.members == fronts
    means = [sum(s) / len(s) for s in scores]
    assert remove_dominated(front.members, means) == gepa_utils.remove_dominated_programs(fronts, scores=means)
    ours, theirs = random.Random(case), random.Random(case)
    for _ in range(20):
        assert select_parent(front.members, means, ours) == gepa_utils.select_program_candidate_from_pareto_front(
            fronts, means, theirs
        )


class _Loader:
    def __init__(self, n: int) -> None:
        self.n = n

    def all_ids(self) -> list[int]:
        return list(range(self.n))

    def __len__(self) -> int:
        return self.n


@pytest.mark.parametrize(("n", "size", "seed"), [(10, 3, 0), (7, 3, 1), (4, 4, 2), (5, 2, 3), (2, 3, 4)])
def test_minibatches_match_gepa(n: int, size: int, seed: int) -> None:
    ours = MinibatchSampler(size, random.Random(seed))
    theirs = batch_sampler.EpochShuffledBatchSampler(size, rng=random.Random(seed))
    loader = _Loader(n)
    for i in range(25):
        assert ours.batch(i, n) == theirs.next_minibatch_ids(loader, SimpleNamespace(i=i))


@pytest.mark.parametrize(
    ("before", "after"), [([0, 0, 1], [0, 1, 1]), ([1, 1, 0], [1, 0, 1]), ([0.5, 0.5], [0.4, 0.5]), ([], [])]
)
def test_acceptance_matches_gepa(before: list[float], after: list[float]) -> None:
    proposal = SimpleNamespace(subsample_scores_before=before, subsample_scores_after=after)
    assert accepts(before, after) == acceptance.StrictImprovementAcceptance().should_accept(proposal, None)  # type: ignore[arg-type]
