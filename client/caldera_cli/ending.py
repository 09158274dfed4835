"""How a job's end is told: its exit code, and its record and sentence with the last reason
when it did not succeed. ``submit --wait``, ``logs --follow`` and ``events --follow`` all end
with them."""

from __future__ import annotations

from typing import Any

from caldera_cli.api import Client
from caldera_cli.exit_codes import Exit
from caldera_cli.output import Out

ENDED = {"succeeded": Exit.SUCCEEDED, "failed": Exit.FAILED, "cancelled": Exit.CANCELLED}
# Several jobs: the worst ending is the exit code.
WORST_FIRST = [Exit.FAILED, Exit.CANCELLED, Exit.SUCCEEDED]


def ending(client: Client, out: Out, job: dict[str, Any]) -> tuple[Exit, dict[str, Any], str]:
    """A finished job's exit code, its record and its sentence: with its last reason when
    it did not succeed."""
    code = ENDED[job["state"]]
    record: dict[str, Any] = {
        "event": "ended",
        "id": job["id"],
        "name": job.get("name"),
        "state": job["state"],
    }
    text = f"job {job['id']} {job.get('name', '')}: {out.state(job['state'])}"
    if code is not Exit.SUCCEEDED:
        record["reason"] = _last_reason(client, job["id"])
        text += f" ({record['reason']})"
    return code, record, text


def _last_reason(client: Client, job_id: int) -> str:
    events = client.pages(f"jobs/{job_id}/events/")
    if not events:
        return "no reason recorded"
    last = events[-1]
    return f"{last['reason']}: {last['message']}"
