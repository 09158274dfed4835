"""The logs of the simulated cluster's pods: real lines, written from each pod's timeline.

A simulated pod runs no program, so its log is written from what the cluster knows of it:
a line when it starts (its node and what it asked for), a progress line every
PROGRESS_SECONDS of its run time, and, once its run time is over, a line with its exit
code (0, or what the job asked for with SIMULATED_EXIT_CODE). Each line is a function of the
pod's start, its run time and the clock alone, so nothing is stored and every process
reads the same log at the same moment: the demo, the tests and the pages show the same
lines, and a running pod's log grows as time passes, as a real one does. Lines begin with
their time, as ``kubectl logs --timestamps`` shows them.

Only the lines asked for are written (the last ``tail_lines``, or from the start until
``limit_bytes``), so reading the end of a week-long job's log costs no more than a
minute-long one's.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from kube.quantity import PODS, ResourceList, human

from .base import PodLog

PROGRESS_SECONDS = 5.0


@dataclass(frozen=True)
class Timeline:
    """What a simulated pod's log is written from."""

    pod: str
    node: str
    requests: ResourceList
    started_at: datetime
    run_seconds: float
    exit_code: int = 0


def simulated_log(
    timeline: Timeline,
    *,
    finished: bool,
    now: datetime,
    tail_lines: int | None,
    limit_bytes: int,
) -> PodLog:
    """The pod's log at ``now``: its last ``tail_lines`` lines (None: all of them), cut at
    ``limit_bytes`` as the API server cuts them. ``finished``: the cluster has seen the
    pod end (its exit line is then there whatever the clock says), and the log carries the
    exit code."""
    elapsed = (now - timeline.started_at).total_seconds()
    done = finished or elapsed >= timeline.run_seconds
    # Progress lines fall strictly before the end, where the exit line is.
    last_progress = max(math.ceil(timeline.run_seconds / PROGRESS_SECONDS) - 1, 0)
    shown = min(last_progress, max(math.floor(elapsed / PROGRESS_SECONDS), 0))
    if done:
        shown = last_progress
    count = 1 + shown + (1 if done else 0)
    first = 0 if tail_lines is None else max(count - tail_lines, 0)
    text = bytearray()
    for line in _lines(timeline, first=first, count=count, shown=shown):
        text += line.encode()
        if len(text) > limit_bytes:
            break
    truncated = first > 0 or len(text) > limit_bytes
    return PodLog(
        pod=timeline.pod,
        text=bytes(text[:limit_bytes]).decode("utf-8", errors="replace"),
        truncated=truncated,
        exit_code=timeline.exit_code if done else None,
    )


def _lines(timeline: Timeline, *, first: int, count: int, shown: int) -> Iterator[str]:
    """Lines ``first`` to ``count - 1``: the start (0), progress (1 to ``shown``), the exit."""
    run = timeline.run_seconds
    for index in range(first, count):
        if index == 0:
            asked = ", ".join(
                f"{name} {human(name, units)}"
                for name, units in sorted(timeline.requests.items())
                if name != PODS  # what the scheduler counts, not what the pod asked for
            )
            yield _line(timeline, 0, f"Started {timeline.pod} on {timeline.node} ({asked})")
        elif index <= shown:
            at = index * PROGRESS_SECONDS
            yield _line(
                timeline, at, f"step {index}: {at:g} s of {run:g} s, {math.floor(100 * at / run)}%"
            )
        else:
            yield _line(timeline, run, f"Exited with code {timeline.exit_code} after {run:g} s")


def _line(timeline: Timeline, seconds: float, message: str) -> str:
    moment = (timeline.started_at + timedelta(seconds=seconds)).astimezone(UTC)
    return f"{moment.isoformat(timespec='milliseconds').replace('+00:00', 'Z')} {message}\n"
