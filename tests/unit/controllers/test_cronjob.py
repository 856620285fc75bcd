"""The CronJob controller's schedule math and decisions as tables: which time is due
(the most recent only), time zones across a DST change, @every, startingDeadlineSeconds,
suspend, the three concurrency policies, and the history limits."""

from __future__ import annotations

import datetime
import zoneinfo
from typing import Any

import pytest

from controlplane.controllers.cronjob import (
    TOO_MANY_MISSED,
    history_to_delete,
    job_name,
    next_time,
    plan,
    times_due,
)

UTC = datetime.UTC
NY = zoneinfo.ZoneInfo("America/New_York")


def t(text: str) -> datetime.datetime:
    return datetime.datetime.fromisoformat(text).replace(tzinfo=UTC)


@pytest.mark.parametrize(
    ("schedule", "tz", "after", "now", "latest", "count"),
    [
        ("*/5 * * * *", UTC, "2026-01-01T10:00:00", "2026-01-01T10:04:59", None, 0),
        (
            "*/5 * * * *",
            UTC,
            "2026-01-01T10:00:00",
            "2026-01-01T10:05:00",
            "2026-01-01T10:05:00",
            1,
        ),
        (
            "*/5 * * * *",
            UTC,
            "2026-01-01T10:00:00",
            "2026-01-01T10:17:00",
            "2026-01-01T10:15:00",
            3,
        ),
        ("@hourly", UTC, "2026-01-01T10:30:00", "2026-01-01T13:10:00", "2026-01-01T13:00:00", 3),
        # 09:00 in New York is 14:00 UTC in winter, 13:00 UTC after 8 March 2026.
        ("0 9 * * *", NY, "2026-03-07T00:00:00", "2026-03-07T14:00:00", "2026-03-07T14:00:00", 1),
        ("0 9 * * *", NY, "2026-03-08T00:00:00", "2026-03-09T13:30:00", "2026-03-09T13:00:00", 2),
        ("@every 90s", UTC, "2026-01-01T10:00:00", "2026-01-01T10:04:00", "2026-01-01T10:03:00", 2),
    ],
)
def test_times_due(
    schedule: str,
    tz: datetime.tzinfo,
    after: str,
    now: str,
    latest: str | None,
    count: int,
) -> None:
    found, n = times_due(schedule, tz, t(after), t(now))
    assert (found, n) == ((t(latest) if latest else None), count)


def test_too_many_missed_times_still_give_the_most_recent() -> None:
    found, n = times_due("* * * * *", UTC, t("2026-01-01T00:00:00"), t("2026-01-02T00:00:30"))
    assert n > TOO_MANY_MISSED
    assert found == t("2026-01-02T00:00:00")


def test_next_time() -> None:
    assert next_time("*/5 * * * *", UTC, t("2026-01-01T00:00:00"), t("2026-01-01T10:01:00")) == t(
        "2026-01-01T10:05:00"
    )
    assert next_time("@every 1h", UTC, t("2026-01-01T00:20:00"), t("2026-01-01T10:01:00")) == t(
        "2026-01-01T10:20:00"
    )


LAST = t("2026-01-01T10:00:00")
NOW = t("2026-01-01T10:05:30")


@pytest.mark.parametrize(
    ("spec", "active", "run_at", "replace", "forbidden", "missed"),
    [
        ({}, [], "2026-01-01T10:05:00", [], False, None),
        ({"suspend": True}, [], None, [], False, None),
        ({"concurrencyPolicy": "Allow"}, ["a"], "2026-01-01T10:05:00", [], False, None),
        ({"concurrencyPolicy": "Forbid"}, ["a"], None, [], True, None),
        ({"concurrencyPolicy": "Replace"}, ["a"], "2026-01-01T10:05:00", ["a"], False, None),
        ({"startingDeadlineSeconds": 60}, [], "2026-01-01T10:05:00", [], False, None),
        # The 10:05 time is 30 s old, beyond a 10 s deadline: missed.
        ({"startingDeadlineSeconds": 10}, [], None, [], False, "2026-01-01T10:05:00"),
    ],
)
def test_plan(
    spec: dict[str, Any],
    active: list[str],
    run_at: str | None,
    replace: list[str],
    forbidden: bool,
    missed: str | None,
) -> None:
    decision = plan({"schedule": "*/5 * * * *", **spec}, LAST, active, NOW)
    assert decision.run_at == (t(run_at) if run_at else None)
    assert decision.replace == replace
    assert decision.forbidden is forbidden
    assert decision.missed == (t(missed) if missed else None)


def job(name: str, kind: str, start: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "status": {"startTime": start, "conditions": [{"type": kind, "status": "True"}]},
    }


def test_history_limits_delete_the_oldest_beyond_them() -> None:
    finished = [
        job("ok-3", "Complete", "2026-01-01T03:00:00Z"),
        job("ok-1", "Complete", "2026-01-01T01:00:00Z"),
        job("ok-2", "Complete", "2026-01-01T02:00:00Z"),
        job("bad-1", "Failed", "2026-01-01T01:30:00Z"),
        job("bad-2", "Failed", "2026-01-01T02:30:00Z"),
    ]
    doomed = history_to_delete(finished, 2, 1)
    assert [j["metadata"]["name"] for j in doomed] == ["ok-1", "bad-1"]
    assert [j["metadata"]["name"] for j in history_to_delete(finished, 0, None)] == [
        "ok-1",
        "ok-2",
        "ok-3",
    ]


def test_job_names_are_the_scheduled_minute() -> None:
    assert job_name("backup", t("2026-01-01T00:05:00")) == "backup-29453765"
