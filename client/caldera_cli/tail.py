"""``logs --follow``: print a job's log as it grows, until the job ends.

The API answers the last lines of a log (``GET /api/v1/jobs/{id}/log/?tail_lines=N``), not
what came after a given line, so each poll reads the last WINDOW lines and prints only those
after the longest run of them that ends the previous read (``new_lines``). Two limits
follow from it. A log that grows by more than WINDOW lines between two polls loses the
lines in between: the gap is said on stderr (and as ``"gap": true`` in JSON). And a log
whose new lines repeat its last ones exactly (the same line printed again and again,
without a time in it) is matched against the repetition, so some repeats may not be
printed; a log whose lines carry their time, as most do, cannot be mistaken.

While the job has no log (queued, its pod not created, or preempted and back in its
queue) the command says why once on stderr and waits; a new pod's log (after a preemption)
is printed from its start. It ends when the job does, after a last read, with the exit
code of ``submit --wait`` (0 succeeded, 1 failed, 3 cancelled). That last read gets the
end of the log the server kept as the job ended (``kept_at``), even once its pods are
gone, so the lines written after the previous poll are printed too, up to the
JOB_LOG_TAIL_LINES the server keeps. Network failures are retried by the client as every
command's are.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from caldera_cli.api import Client, Refused
from caldera_cli.ending import ENDED, ending
from caldera_cli.exit_codes import Exit
from caldera_cli.output import Out

WINDOW = 1000  # lines read at each poll after the first


def new_lines(before: Sequence[str], now: Sequence[str]) -> tuple[list[str], bool]:
    """The lines of ``now`` (the log's end at this poll) after those of ``before`` (its end
    at the last one, of any length), and whether the two do not meet (a gap: more than the
    window was written in between, or the log began anew). Where ``before`` ends in
    ``now`` is the last place whose lines up to it are the end of ``before``: of two places
    (repeated lines), the one that prints fewer lines, so no line is printed twice."""
    if not before:
        return list(now), False
    last = before[-1]
    for end in range(len(now), 0, -1):
        if now[end - 1] != last:
            continue
        length = min(end, len(before))
        if list(now[end - length : end]) == list(before[len(before) - length :]):
            return list(now[end:]), False
    return list(now), bool(now)


@dataclass(frozen=True)
class Reading:
    """One read of a job's log: the lines new since the last read, whether some were missed
    in between (``gap``) and the pod; or, when there is no log to read, why (``missing``, the
    server's sentence)."""

    lines: list[str]
    gap: bool = False
    pod: str | None = None
    missing: str | None = None
    kept: dict[str, Any] | None = None  # the server's answer, when it is the kept end


class LogTail:
    """One job's log as it grows, read by ``new_lines`` (see the module's doc): what
    ``logs --follow`` prints and what ``submit --follow`` prints once a job has started.
    ``tail``: the first read's last lines (None: the log from its start)."""

    def __init__(self, client: Client, job_id: int, *, tail: int | None = None) -> None:
        self.client = client
        self.job_id = job_id
        self.tail = tail
        self.seen: list[str] | None = None  # the log's end as last read; None: none read yet

    def read(self) -> Reading:
        lines = self.tail if self.seen is None else WINDOW
        try:
            answer = self.client.get(f"jobs/{self.job_id}/log/", tail_lines=lines)
        except Refused as refused:
            if refused.status != 409:
                raise
            if self.seen is not None:  # its pod is gone: the next one's log is read from its start
                self.seen, self.tail = None, None
            return Reading([], missing=_detail(refused))
        new, gap = new_lines(self.seen or [], answer["lines"])
        self.seen = answer["lines"][-WINDOW:]
        return Reading(new, gap, answer["pod"], kept=answer if answer.get("kept_at") else None)


def kept_sentence(job_id: int, answer: dict[str, Any]) -> str:
    """What stderr says of an answer that is the end of the log the server kept."""
    count = len(answer["lines"])
    lines = f"its last {count} lines" if answer.get("truncated") else "its whole log"
    return (
        f"job {job_id}: the pods are gone; {lines} of pod {answer['pod']}, kept when the job "
        f"ended at {answer['kept_at']}"
    )


def gap_sentence(job_id: int) -> str:
    return (
        f"job {job_id}: its log grew by more than {WINDOW} lines between two reads, or began "
        "anew; lines may be missing here"
    )


def follow(client: Client, out: Out, job_id: int, *, tail: int | None, poll_seconds: float) -> Exit:
    """Print the job's log as it grows (see the module's doc); the exit code of its end."""
    log = LogTail(client, job_id, tail=tail)
    said = None  # the last reason there was no log, said once
    while True:
        job = client.get(f"jobs/{job_id}/")
        read = log.read()
        if read.missing is not None:
            if read.missing != said:
                out.note(f"job {job_id}: no log to read: {read.missing}")
                out.emit({"event": "no_log", "id": job_id, "detail": read.missing})
                said = read.missing
        else:
            if read.gap:
                out.note(gap_sentence(job_id))
            if read.lines or read.gap:
                record = {"event": "log", "id": job_id, "pod": read.pod, "lines": read.lines}
                out.emit(record | {"gap": read.gap}, "\n".join(read.lines) if read.lines else None)
            said = None
        if job["state"] in ENDED:  # read before the log: the log read after holds its end
            if read.kept is not None:
                out.note(kept_sentence(job_id, read.kept))
            code, record, text = ending(client, out, job)
            out.emit(record)
            out.note(text)
            return code
        time.sleep(poll_seconds)


def _detail(refused: Refused) -> str:
    body = refused.body
    return str(body.get("detail")) if isinstance(body, dict) else str(refused)
