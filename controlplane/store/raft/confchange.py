"""Membership changes as pure functions: a configuration in, a new one out.

kubelab changes one voter at a time (no joint consensus): adding or removing a single
voter moves between configurations whose majorities always intersect, so no two leaders
can be elected in one term across the change. A new member joins as a learner (it
receives the log but does not vote or count toward commit), and is promoted with
ADD_NODE once it has caught up, which keeps a slow new member from stalling commits.
"""

from __future__ import annotations

from controlplane.store.raft.errors import ConfChangeError
from controlplane.store.raft.types import ConfChange, ConfChangeType, ConfState


def apply_change(conf: ConfState, cc: ConfChange) -> ConfState:
    """The configuration after `cc`; raises ConfChangeError for an invalid change."""
    if cc.node_id <= 0:
        raise ConfChangeError(f"invalid member id {cc.node_id}: ids are positive integers")
    voters = set(conf.voters)
    learners = set(conf.learners)
    nid = cc.node_id
    if cc.type is ConfChangeType.ADD_NODE:
        learners.discard(nid)  # promotion, or a plain add
        voters.add(nid)
    elif cc.type is ConfChangeType.ADD_LEARNER_NODE:
        if nid in voters:
            raise ConfChangeError(
                f"member {nid:x} is a voter; demoting a voter to learner is not supported: "
                "remove it, then add it back as a learner"
            )
        learners.add(nid)
    elif cc.type is ConfChangeType.REMOVE_NODE:
        if nid in voters and len(voters) == 1:
            raise ConfChangeError(
                f"removing member {nid:x} would leave no voters; add another voter first"
            )
        voters.discard(nid)
        learners.discard(nid)
    return ConfState(tuple(sorted(voters)), tuple(sorted(learners)))


def describe(conf: ConfState) -> str:
    """`voters=(1 2 3) learners=(4)` as in the transcript logs."""
    s = "voters=(" + " ".join(f"{v:x}" for v in conf.voters) + ")"
    if conf.learners:
        s += " learners=(" + " ".join(f"{v:x}" for v in conf.learners) + ")"
    return s
