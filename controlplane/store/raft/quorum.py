"""Majority quorums: the committed index of a configuration and the outcome of a vote.

kubelab changes membership one voter at a time (see `confchange`), so a configuration
is a single majority set: any two majorities of the old and new sets overlap, which is
what makes single-step changes safe without joint consensus.
"""

from __future__ import annotations

import enum
from collections.abc import Collection, Mapping


class VoteResult(enum.Enum):
    PENDING = "pending"
    WON = "won"
    LOST = "lost"


def majority(voters: Collection[int]) -> int:
    """How many voters make a quorum."""
    return len(voters) // 2 + 1


def committed_index(voters: Collection[int], match: Mapping[int, int]) -> int:
    """The highest index replicated on a majority of `voters`.

    An empty configuration commits everything (there is nobody to wait for); callers
    never run with one, but the convention keeps the arithmetic total.
    """
    if not voters:
        return 2**63 - 1
    acked = sorted((match.get(v, 0) for v in voters), reverse=True)
    return acked[majority(voters) - 1]


def vote_result(voters: Collection[int], votes: Mapping[int, bool]) -> VoteResult:
    """WON once a majority granted, LOST once a majority can no longer grant."""
    if not voters:
        return VoteResult.WON
    granted = sum(1 for v in voters if votes.get(v) is True)
    missing = sum(1 for v in voters if v not in votes)
    q = majority(voters)
    if granted >= q:
        return VoteResult.WON
    if granted + missing >= q:
        return VoteResult.PENDING
    return VoteResult.LOST
