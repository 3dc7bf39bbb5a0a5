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


merge = pytest.importorskip("gepa.proposer.merge")


def _lineage(rng: random.Random, n: int) -> tuple[list[dict[str, str]], list[list[int]], list[float]]:
    """A random tree of candidates over two predictors, each child changing one instruction of its parent."""
    candidates = [{"a": "a0", "b": "b0"}]
    parents: list[list[int]] = [[]]
    for k in range(1, n):
        parent = rng.randrange(k)
        child = dict(candidates[parent])
        child[rng.choice("ab")] = f"{k}"
        candidates.append(child)
        parents.append([parent])
    scores = [0.1] + [rng.choice([0.2, 0.5, 0.5, 0.8]) for _ in range(1, n)]
    return candidates, parents, scores


@pytest.mark.parametrize("case", range(60))
def test_merge_decisions_match_gepa(case: int) -> None:
    from imp.optimize._merge import MergeLog, dominators, merge_subsample, propose_merge

    rng = random.Random(case)
    candidates, parents, scores = _lineage(rng, rng.randint(3, 9))
    pool = list(range(len(candidates)))
    ours_rng, theirs_rng = random.Random(case), random.Random(case)
    log, performed = MergeLog(), ([], [])
    for _ in range(3):
        ours = propose_merge(ours_rng, scores, pool, log, candidates, parents)
        theirs = merge.sample_and_attempt_merge_programs_by_common_predictors(
            scores, theirs_rng, pool, performed, candidates, [[*p] or [None] for p in parents]
        )
        assert ours == theirs
        if ours is None:
            break
        log.triplets.append(ours[1:])
        performed[0].append(theirs[1:])
    per_example = [[rng.choice([0.0, 1.0]) for _ in range(7)] for _ in range(2)]
    assert merge_subsample(random.Random(case), *per_example) == _gepa_subsample(case, per_example)
    fronts = {0: {0, 1}, 1: {1}, 2: {2, 0}}
    assert sorted(dominators(fronts, [0.1, 0.5, 0.3])) == sorted(
        gepa_utils.find_dominator_programs(fronts, [0.1, 0.5, 0.3])
    )


def _gepa_subsample(seed: int, per_example: list[list[float]]) -> list[int]:
    proposer = object.__new__(merge.MergeProposer)
    proposer.rng = random.Random(seed)
    return proposer.select_eval_subsample_for_merged_program(*(dict(enumerate(s)) for s in per_example))
