"""``events --follow``: print a job's history as it grows, until the job ends.

The API's events carry no id, and a cluster event that repeats (GangFailedScheduling, say,
reported again in the same scheduling cycle) is one row updated in place: its ``count``
goes up, its time (``at``, its last) and message move on, and with its time its place in
the history. So each poll reads the history whole (``GET /api/v1/jobs/{id}/events/``, every
page) and prints each event as it now reads, if it was not printed so before
(``NewEvents``): a new event once, and a repeat again, with its higher count (``(x3)``)
and last time, so a gang that still cannot be placed keeps saying so. An event that
changed twice between two polls is printed once, as it reads at the second.

It ends when the job does, after a last read, with the exit code of ``submit --wait`` (0
succeeded, 1 failed, 3 cancelled), its ending said as ``logs --follow`` says it: on stderr,
and as an ``"event": "ended"`` record in JSON.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable
from typing import Any

from caldera_cli.api import Client
from caldera_cli.ending import ENDED, ending
from caldera_cli.exit_codes import Exit
from caldera_cli.output import Out, event_line

Event = dict[str, Any]


class NewEvents:
    """A job's events not printed yet, poll after poll (see the module's doc)."""

    def __init__(self, client: Client, job_id: int) -> None:
        self.client = client
        self.job_id = job_id
        self.printed: set[str] = set()  # each event as it read when printed

    def read(self) -> list[Event]:
        return self.unseen(self.client.pages(f"jobs/{self.job_id}/events/"))

    def unseen(self, events: Iterable[Event]) -> list[Event]:
        """Those of ``events`` that read as none printed before, now counted as printed."""
        new = []
        for event in events:
            version = json.dumps(event, sort_keys=True)
            if version not in self.printed:
                self.printed.add(version)
                new.append(event)
        return new


def follow(client: Client, out: Out, job_id: int, *, poll_seconds: float) -> Exit:
    """Print the job's events as they come (see the module's doc); the exit code of its end."""
    history = NewEvents(client, job_id)
    while True:
        job = client.get(f"jobs/{job_id}/")
        for event in history.read():
            out.emit(event, event_line(event))
        if job["state"] in ENDED:  # read before the events: those read after hold its end
            code, record, text = ending(client, out, job)
            out.emit(record)
            out.note(text)
            return code
        time.sleep(poll_seconds)
