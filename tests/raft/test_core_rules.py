"""Unit tests of single rules of the Raft paper, each named after the sentence it checks.

The transcripts show whole interactions; these pin down rules a random simulation can
miss because the situation is rare (the Figure 8 commit rule needs a specific sequence
of leader changes).
"""

from __future__ import annotations

import random

import pytest

from controlplane.store.raft import (
    ConfChange,
    ConfChangeError,
    ConfChangeType,
    Config,
    ConfState,
    Entry,
    HardState,
    MemoryStorage,
    Message,
    MessageType,
    Raft,
    Snapshot,
    SnapshotMetadata,
    StateType,
)
from controlplane.store.raft.confchange import apply_change
from controlplane.store.raft.quorum import VoteResult, committed_index, vote_result


def _raft(nid: int, entries: list[Entry], term: int, voters: tuple[int, ...] = (1, 2, 3)) -> Raft:
    storage = MemoryStorage()
    storage.apply_snapshot(Snapshot(SnapshotMetadata(1, 1, ConfState(voters))))
    storage.append(entries)
    storage.set_hard_state(HardState(term=term, vote=0, commit=1))
    return Raft(Config(id=nid, storage=storage, rand=random.Random(nid)))


def _leader_at(term: int, entries: list[Entry]) -> Raft:
    r = _raft(1, entries, term - 1)
    r.become_candidate()
    while r.term < term:  # reach the wanted term
        r.become_follower(r.term, 0)
        r.become_candidate()
    r.become_leader()
    r.msgs = []
    return r


def test_a_leader_never_commits_entries_from_previous_terms_by_counting_replicas() -> None:
    """§5.4.2 (Figure 8): "Raft never commits log entries from previous terms by counting
    replicas. Only log entries from the leader's current term are committed by counting
    replicas." An old-term entry on a majority stays uncommitted until an entry of the
    leader's term is on a majority too."""
    r = _leader_at(3, [Entry(2, 2, data=b"from term 2")])
    assert r.raft_log.last_index() == 3 and r.raft_log.term(3) == 3  # the leader's empty entry
    # A majority (1 and 2) now holds index 2, an entry of term 2: not committed.
    r.step(Message(MessageType.APP_RESP, frm=2, to=1, term=3, index=2))
    assert r.raft_log.committed == 1
    # Once index 3 (term 3) is on a majority, both commit.
    r.step(Message(MessageType.APP_RESP, frm=2, to=1, term=3, index=3))
    assert r.raft_log.committed == 3


def test_a_voter_denies_its_vote_if_its_own_log_is_more_up_to_date() -> None:
    """§5.4.1: "the voter denies its vote if its own log is more up-to-date than that of
    the candidate" (compare last terms, then lengths)."""
    r = _raft(2, [Entry(2, 2)], term=2)
    r.step(Message(MessageType.VOTE, frm=3, to=2, term=3, index=5, log_term=1))
    assert r.msgs[-1].type is MessageType.VOTE_RESP and r.msgs[-1].reject
    r.step(Message(MessageType.VOTE, frm=1, to=2, term=3, index=2, log_term=2))
    assert r.msgs[-1].type is MessageType.VOTE_RESP and not r.msgs[-1].reject
    assert r.vote == 1


def test_each_server_votes_for_at_most_one_candidate_in_a_term() -> None:
    """§5.2: "each server will vote for at most one candidate in a given term"."""
    r = _raft(2, [], term=1)
    r.step(Message(MessageType.VOTE, frm=1, to=2, term=2, index=1, log_term=1))
    r.step(Message(MessageType.VOTE, frm=3, to=2, term=2, index=1, log_term=1))
    granted = [m.to for m in r.msgs if m.type is MessageType.VOTE_RESP and not m.reject]
    assert granted == [1]


def test_a_pre_vote_does_not_change_the_voters_term_or_vote() -> None:
    """Thesis §9.6: pre-vote asks "could you vote for me?" without disrupting anyone."""
    r = _raft(2, [], term=1)
    r.step(Message(MessageType.PRE_VOTE, frm=3, to=2, term=2, index=1, log_term=1))
    assert (r.term, r.vote) == (1, 0)
    assert not r.msgs[-1].reject and r.msgs[-1].term == 2


def test_a_follower_rejects_an_append_whose_previous_entry_does_not_match() -> None:
    """§5.3: "If the follower does not find an entry in its log with the same index and
    term, then it refuses the new entries"; the hint lets the leader skip a term."""
    r = _raft(2, [Entry(1, 2), Entry(1, 3)], term=2)
    r.step(Message(MessageType.APP, frm=1, to=2, term=2, index=3, log_term=2, commit=1))
    resp = r.msgs[-1]
    assert resp.reject and resp.reject_hint == 3 and resp.log_term == 1
    assert r.raft_log.last_index() == 3


def test_an_append_deletes_a_conflicting_suffix_and_follows_the_leader() -> None:
    """§5.3: "If an existing entry conflicts with a new one (same index but different
    terms), delete the existing entry and all that follow it"."""
    r = _raft(2, [Entry(1, 2), Entry(1, 3), Entry(1, 4)], term=2)
    r.step(
        Message(
            MessageType.APP,
            frm=1,
            to=2,
            term=2,
            index=2,
            log_term=1,
            entries=(Entry(2, 3, data=b"new"),),
            commit=1,
        )
    )
    assert r.raft_log.last_index() == 3
    assert r.raft_log.term(3) == 2


def test_check_quorum_leader_steps_down_without_a_quorum() -> None:
    r = _leader_at(2, [])
    for _ in range(2 * r.election_timeout):
        r.tick()
    assert r.state is StateType.FOLLOWER


def test_quorum_arithmetic() -> None:
    assert committed_index({1, 2, 3}, {1: 5, 2: 3, 3: 1}) == 3
    assert committed_index({1, 2, 3, 4, 5}, {1: 9, 2: 9, 3: 1, 4: 1, 5: 1}) == 1
    assert vote_result({1, 2, 3}, {1: True, 2: False}) is VoteResult.PENDING
    assert vote_result({1, 2, 3}, {1: True, 2: False, 3: False}) is VoteResult.LOST
    assert vote_result({1, 2, 3}, {1: True, 3: True}) is VoteResult.WON


def test_conf_change_rules() -> None:
    cs = ConfState((1, 2, 3))
    assert apply_change(cs, ConfChange(ConfChangeType.ADD_LEARNER_NODE, 4)).learners == (4,)
    promoted = apply_change(ConfState((1, 2, 3), (4,)), ConfChange(ConfChangeType.ADD_NODE, 4))
    assert promoted == ConfState((1, 2, 3, 4))
    with pytest.raises(ConfChangeError, match="demoting"):
        apply_change(cs, ConfChange(ConfChangeType.ADD_LEARNER_NODE, 2))
    with pytest.raises(ConfChangeError, match="no voters"):
        apply_change(ConfState((1,)), ConfChange(ConfChangeType.REMOVE_NODE, 1))


def _settle(nodes: dict[int, Raft]) -> None:
    """Deliver every message between `nodes` until none is left (no losses)."""
    for _ in range(100):
        pending = [m for r in nodes.values() for m in r.msgs]
        if not pending:
            return
        for r in nodes.values():
            r.msgs = []
        for m in pending:
            if m.to in nodes:
                nodes[m.to].step(m)
    raise AssertionError("messages kept flowing")


def _cluster_led_by_1() -> dict[int, Raft]:
    nodes = {nid: _raft(nid, [], 1) for nid in (1, 2, 3)}
    nodes[1].step(Message(MessageType.HUP, frm=1))
    _settle(nodes)
    assert nodes[1].state is StateType.LEADER and nodes[2].lead == nodes[3].lead == 1
    return nodes


def test_followers_that_lose_their_leaders_connection_campaign_at_once_one_by_one() -> None:
    """Not in the paper: etcd waits a whole (randomized) election timeout for heartbeats
    from a leader whose process is gone. Told that the connection to their leader
    closed, followers forget it (ending its lease, so pre-votes are granted) and the
    first survivor by id campaigns at its next tick, the next a third of a timeout
    later, so that they do not split the vote."""
    nodes = _cluster_led_by_1()
    term = nodes[1].term
    del nodes[1]  # kill -9: both followers' connections to it close
    for nid in (2, 3):
        nodes[nid].step(Message(MessageType.UNREACHABLE, frm=1))
        assert nodes[nid].lead == 0
    for r in nodes.values():
        r.tick()
    assert nodes[2].state is StateType.PRE_CANDIDATE
    assert nodes[3].state is StateType.FOLLOWER
    _settle(nodes)
    assert nodes[2].state is StateType.LEADER and nodes[2].term == term + 1
    assert nodes[3].lead == 2


def test_the_next_survivor_stands_in_when_the_first_cannot_win() -> None:
    """The first survivor is gone too (or cut off): the second campaigns a third of an
    election timeout later, not a whole timeout."""
    nodes = {nid: _raft(nid, [], 1, voters=(1, 2, 3, 4, 5)) for nid in (1, 2, 3, 4, 5)}
    nodes[1].step(Message(MessageType.HUP, frm=1))
    _settle(nodes)
    assert nodes[1].state is StateType.LEADER
    del nodes[1], nodes[2]
    for nid in (3, 4, 5):
        nodes[nid].step(Message(MessageType.UNREACHABLE, frm=1))
    ticks = 0
    while nodes[3].state is StateType.FOLLOWER:
        ticks += 1
        for r in nodes.values():
            r.tick()
    assert ticks == 1 + nodes[3].election_timeout // 3
    _settle(nodes)
    assert nodes[3].state is StateType.LEADER


def test_a_false_alarm_about_a_live_leader_changes_nothing() -> None:
    """The connection to a live leader broke: the follower's early pre-vote is refused
    by the leader and the follower that still hears it; no term is bumped, and the next
    heartbeat makes the leader its leader again."""
    nodes = _cluster_led_by_1()
    term = nodes[1].term
    nodes[2].step(Message(MessageType.UNREACHABLE, frm=1))
    while nodes[2].state is StateType.FOLLOWER:
        nodes[2].tick()
    assert nodes[2].state is StateType.PRE_CANDIDATE
    _settle(nodes)
    assert nodes[1].state is StateType.LEADER and all(r.term == term for r in nodes.values())
    nodes[1].step(Message(MessageType.BEAT, frm=1))
    _settle(nodes)
    assert nodes[2].state is StateType.FOLLOWER and nodes[2].lead == 1


def test_an_unreachable_report_about_another_follower_is_ignored() -> None:
    nodes = _cluster_led_by_1()
    nodes[2].step(Message(MessageType.UNREACHABLE, frm=3))
    assert nodes[2].lead == 1 and nodes[2].election_elapsed == 0


def _ticks_until_something_happens(r: Raft) -> int:
    """Tick `r` until a tick sends a message or changes its role; return how many."""
    state, ticks = r.state, 0
    while True:
        ticks += 1
        r.tick()
        if r.msgs or r.state is not state:
            return ticks


@pytest.mark.parametrize(
    "situation", ["leader", "follower", "follower that lost its leader", "candidate"]
)
def test_a_driver_may_sleep_as_many_ticks_as_ticks_until_action_says(situation: str) -> None:
    """The member wakes only for the tick that acts (an idle follower otherwise woke
    ten times a second to count): in every role, the ticks before it change nothing
    that a sleeping driver would have had to send or apply."""
    nodes = _cluster_led_by_1()
    for _ in range(3):  # some ticks, heartbeats and answers already counted
        for r in nodes.values():
            r.tick()
        _settle(nodes)
    r = nodes[1] if situation == "leader" else nodes[2]
    if situation == "follower that lost its leader":
        r.step(Message(MessageType.UNREACHABLE, frm=1))
    elif situation == "candidate":
        r.step(Message(MessageType.HUP, frm=2))
        r.msgs = []
    expected = r.ticks_until_action()
    assert _ticks_until_something_happens(r) == expected
    if situation == "follower":  # the last heartbeat started the count again
        assert expected == r.randomized_election_timeout
