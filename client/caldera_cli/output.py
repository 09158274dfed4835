"""What the commands print: sentences and tables for a person, one JSON object per line
with ``--output json`` for a script. Colours only on a terminal, never with ``NO_COLOR``
(https://no-color.org) or ``TERM=dumb``; errors go to stderr (and, in JSON, to stdout too as
``{"error": ...}``, so a script reading stdout sees why)."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, TextIO

COLOURS = {"green": 32, "red": 31, "yellow": 33, "blue": 34, "magenta": 35, "dim": 2, "bold": 1}
STATE_COLOURS = {
    "succeeded": "green",
    "failed": "red",
    "cancelled": "yellow",
    "stopping": "yellow",
    "running": "blue",
    "admitted": "blue",
    "preempted": "magenta",
    "backoff": "dim",
}


def wants_colour(stream: TextIO) -> bool:
    return stream.isatty() and not os.environ.get("NO_COLOR") and os.environ.get("TERM") != "dumb"


class Out:
    def __init__(
        self, *, as_json: bool, stream: TextIO | None = None, errors: TextIO | None = None
    ):
        self.as_json = as_json
        self.stream = stream or sys.stdout
        self.errors = errors or sys.stderr
        self.colour = not as_json and wants_colour(self.stream)

    def emit(self, record: Any, text: str | None = None) -> None:
        """One record: its JSON line, or ``text`` for a person (nothing when None)."""
        if self.as_json:
            print(json.dumps(record, ensure_ascii=False), file=self.stream, flush=True)
        elif text is not None:
            print(text, file=self.stream, flush=True)

    def say(self, text: str) -> None:
        """A sentence for a person only (progress, hints); JSON output leaves it out."""
        if not self.as_json:
            print(text, file=self.stream, flush=True)

    def note(self, message: str) -> None:
        """A sentence for a person on stderr, beside what stdout carries (a log); JSON
        output leaves it out: its records say the same."""
        if not self.as_json:
            print(message, file=self.errors, flush=True)

    def error(self, message: str, **fields: Any) -> None:
        colour = wants_colour(self.errors)
        print(f"{_paint('error:', 'red', colour)} {message}", file=self.errors, flush=True)
        if self.as_json:
            self.emit({"error": message, **fields})

    def paint(self, text: str, colour: str) -> str:
        return _paint(text, colour, self.colour)

    def state(self, state: str) -> str:
        return self.paint(state, STATE_COLOURS.get(state, "bold"))

    def table(self, headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
        cells = [[str(h) for h in headers]] + [
            ["" if v is None else str(v) for v in r] for r in rows
        ]
        widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
        lines = [
            "  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)).rstrip()
            for row in cells
        ]
        lines[0] = self.paint(lines[0], "bold")
        return "\n".join(lines)


def _paint(text: str, colour: str, enabled: bool) -> str:
    return f"\033[{COLOURS[colour]}m{text}\033[0m" if enabled else text


def when(value: str | None) -> str:
    """An API time (ISO 8601) for a person: to the second, in UTC."""
    if not value:
        return ""
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        return value
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def field_errors(body: Any, source: str | None = None) -> list[str]:
    """The API's errors as it wrote them, one ``field: reason`` a line."""
    if not isinstance(body, dict):
        return [str(body)]
    lines = []
    for field, reasons in body.items():
        for reason in reasons if isinstance(reasons, list) else [reasons]:
            where = f"{source}: " if source else ""
            lines.append(f"{where}{field}: {reason}")
    return lines


def position(job: dict[str, Any]) -> str:
    return f"position {job['position']}" if job.get("position") else ""


def job_line(out: Out, job: dict[str, Any]) -> list[Any]:
    return [
        job["id"],
        out.state(job["state"]) + (" (held)" if job.get("held") else ""),
        job.get("position") or "",
        job.get("queue"),
        job.get("name"),
        job.get("owner"),
        when(job.get("enqueued_at")),
    ]


JOB_HEADERS = ["ID", "STATE", "POS", "QUEUE", "NAME", "OWNER", "SUBMITTED"]


def job_detail(out: Out, job: dict[str, Any]) -> str:
    """A job for a person: what it is, where it stands, why it waits."""
    lines = [
        f"job {job['id']} {job.get('name', '')} ({job.get('kind')}, {job.get('runtime')}) "
        f"in {job.get('queue_path') or job.get('queue')}",
        f"  state:     {out.state(job['state'])}"
        + (f", {position(job)}" if job.get("position") else ""),
    ]
    waiting = job.get("waiting")
    if waiting and waiting.get("summary"):
        lines.append(f"  waiting:   {waiting['summary']}")
    if job.get("estimate_basis"):
        lines.append(f"  estimate:  {job['estimate_basis']}")
    if job.get("backoff_reason") and job["state"] == "backoff":
        lines.append(f"  backoff:   {job['backoff_reason']}")
    for label, key in [
        ("owner", "owner"),
        ("priority", "priority"),
        ("submitted", "enqueued_at"),
        ("started", "started_at"),
        ("finished", "finished_at"),
    ]:
        if job.get(key) is not None:
            value = when(job[key]) if key.endswith("_at") else job[key]
            lines.append(f"  {label + ':':<10} {value}")
    if job.get("time_limit"):
        lines.append(f"  {'limit:':<10} {seconds_said(job['time_limit'])}")
    if job.get("retries"):
        lines.append(f"  {'attempt:':<10} {job.get('attempt', 1)} of {job['retries'] + 1}")
        for attempt in job.get("attempts") or []:
            lines.append(f"    attempt {attempt['attempt']} failed: {attempt['reason']}")
    return "\n".join(lines)


def seconds_said(seconds: int) -> str:
    """``7200`` -> ``2h``, ``5400`` -> ``1h30m``: a time limit as it was written."""
    parts = []
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        if seconds >= size:
            parts.append(f"{seconds // size}{unit}")
            seconds %= size
    return "".join(parts) or "0s"


def event_words(event: dict[str, Any]) -> str:
    """An event's reason and message, with its count when the cluster reported it again."""
    count = f" (x{event['count']})" if event.get("count", 1) > 1 else ""
    return f"{event['reason']}: {event['message']}{count}"


def event_line(event: dict[str, Any]) -> str:
    return f"{when(event['at'])}  {event_words(event)}"
