"""``submit --wait``: poll each job (``GET /api/v1/jobs/{id}/``) until it ends or the timeout
passes. A preempted job goes back to its queue, so the wait goes on.

With ``--follow``, at each poll of each job, in this order: its change of state or position
and its new sentence of why it waits; the cluster's new events about its pods (those with an
``involved`` object: GangFailedScheduling while its gang cannot be placed; the portal's own
events are the state changes already said), read as ``events --follow`` reads them; then,
once it has started, its log's new lines, read as ``logs --follow`` reads them. A log
that cannot be read yet (pods not placed) is passed over in silence: the state changes say
why. Once a job has succeeded or failed, its log is the end the server kept as it ended,
before its pods were removed: the lines written after the last poll that found it running
are printed then. With several jobs, each log line begins with its job's id."""

from __future__ import annotations

import re
import time
from typing import Any

from caldera_cli.api import Client
from caldera_cli.ending import ENDED, WORST_FIRST, ending
from caldera_cli.exit_codes import Exit
from caldera_cli.history import NewEvents
from caldera_cli.output import Out, event_words, position
from caldera_cli.tail import LogTail, gap_sentence, kept_sentence

UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
Snapshot = tuple[str, int | None, str | None, int]  # state, position, why it waits, attempt
# No pod runs yet: no log to ask for. The first read after it is of the log from its start.
NOT_STARTED = {"queued", "backoff", "admitted"}


def duration(text: str) -> float:
    """Seconds in ``90``, ``30s``, ``15m``, ``2h``, ``1h30m`` or ``1d``."""
    text = text.strip().lower()
    if re.fullmatch(r"\d+(\.\d+)?", text):
        return float(text)
    parts = re.findall(r"(\d+(?:\.\d+)?)([smhd])", text)
    if not parts or "".join(n + u for n, u in parts) != text:
        raise ValueError(f"{text!r} is not a duration (examples: 90s, 15m, 2h, 1h30m)")
    return sum(float(number) * UNITS[unit] for number, unit in parts)


def _snapshot(job: dict[str, Any]) -> Snapshot:
    waiting = job.get("waiting") or {}
    return job["state"], job.get("position"), waiting.get("summary"), job.get("attempt", 1)


def _say_change(out: Out, job: dict[str, Any], before: Snapshot | None) -> None:
    state, place, summary, attempt = _snapshot(job)
    old_state, old_place, old_summary, old_attempt = before or (None, None, None, attempt)
    label = _label(job)
    lines = []
    if attempt > old_attempt:  # a failed attempt with retries left: the wait goes on
        failed = (job.get("attempts") or [{}])[-1].get("reason", "")
        lines.append(
            f"{label}: attempt {attempt} of {job.get('retries', 0) + 1}, "
            f"after attempt {attempt - 1} failed: {failed}"
        )
    if state != old_state:
        where = f", {position(job)}" if place else ""
        if state == "preempted":
            where += ": it goes back to its queue, the wait goes on"
        arrow = f"{old_state} -> " if old_state else ""
        lines.append(f"{label}: {arrow}{out.state(state)}{where}")
    elif place != old_place and place:
        lines.append(f"{label}: {position(job)}")
    if summary and summary != old_summary:
        lines.append(f"  {summary}" if lines else f"{label}: {summary}")
    if lines:
        record = {
            "event": "changed",
            "id": job["id"],
            "state": state,
            "position": place,
            "waiting": summary,
            "attempt": attempt,
        }
        out.emit(record, "\n".join(lines))


def _label(job: dict[str, Any]) -> str:
    return f"job {job['id']} {job.get('name', '')}".rstrip()


def _say_cluster_events(out: Out, job: dict[str, Any], history: NewEvents) -> None:
    for event in history.read():
        if event.get("involved"):
            out.emit(
                {"event": "cluster_event", "id": job["id"]} | event,
                f"{_label(job)}: {event_words(event)}",
            )


def _say_log(out: Out, job: dict[str, Any], log: LogTail, *, several: bool) -> None:
    if job["state"] in NOT_STARTED:
        return
    read = log.read()
    if read.kept is not None:
        out.note(kept_sentence(job["id"], read.kept))
    if read.gap:
        out.note(gap_sentence(job["id"]))
        out.emit({"event": "log_gap", "id": job["id"]})
    for line in read.lines:
        out.emit(
            {"event": "log", "id": job["id"], "line": line},
            f"[{job['id']}] {line}" if several else line,
        )


def wait(
    client: Client,
    out: Out,
    ids: list[int],
    *,
    timeout: float | None,
    follow: bool,
    cancel_on_timeout: bool,
    poll_seconds: float,
) -> Exit:
    deadline = None if timeout is None else time.monotonic() + timeout
    seen: dict[int, Snapshot | None] = dict.fromkeys(ids)
    ended: dict[int, dict[str, Any]] = {}
    latest: dict[int, dict[str, Any]] = {}
    histories = {job_id: NewEvents(client, job_id) for job_id in ids}
    logs = {job_id: LogTail(client, job_id) for job_id in ids}
    while True:
        for job_id in ids:
            if job_id in ended:
                continue
            job = client.get(f"jobs/{job_id}/")
            latest[job_id] = job
            if follow:  # the events and the log read after the job: they hold its end
                _say_change(out, job, seen[job_id])
                _say_cluster_events(out, job, histories[job_id])
                _say_log(out, job, logs[job_id], several=len(ids) > 1)
            seen[job_id] = _snapshot(job)
            if job["state"] in ENDED:
                ended[job_id] = job
        if len(ended) == len(ids):
            break
        remaining = None if deadline is None else deadline - time.monotonic()
        if remaining is not None and remaining <= 0:
            return _timed_out(
                client, out, [latest[i] for i in ids if i not in ended], cancel_on_timeout
            )
        time.sleep(poll_seconds if remaining is None else min(poll_seconds, remaining))

    codes = set()
    for job_id in ids:
        code, record, text = ending(client, out, ended[job_id])
        codes.add(code)
        out.emit(record, text)
    return next(code for code in WORST_FIRST if code in codes)


def _timed_out(client: Client, out: Out, jobs: list[dict[str, Any]], cancel: bool) -> Exit:
    for job in jobs:
        record = {
            "event": "timed_out",
            "id": job["id"],
            "state": job["state"],
            "position": job.get("position"),
            "cancelled": cancel,
        }
        where = f", {position(job)}" if job.get("position") else ""
        if cancel:
            after = client.post(f"jobs/{job['id']}/cancel/")
            record["state"] = after["state"]
            text = (
                f"job {job['id']}: timed out ({job['state']}{where}); cancelled: {after['state']}"
            )
        else:
            text = f"job {job['id']}: timed out, still {job['state']}{where}; it keeps its place"
        out.emit(record, text)
    return Exit.TIMED_OUT
