"""What ``caldera`` exits with, declared once: the help, docs/ci.md and the tests read it."""

from __future__ import annotations

from enum import IntEnum


class Exit(IntEnum):
    """The exit codes. ``submit --wait`` uses them all; ``logs --follow`` and
    ``events --follow`` all but 4; the other commands 0, 2 and 5."""

    SUCCEEDED = 0
    FAILED = 1
    USAGE = 2
    CANCELLED = 3
    TIMED_OUT = 4
    UNREACHABLE = 5


MEANINGS: dict[Exit, str] = {
    Exit.SUCCEEDED: "done; with --wait, every job succeeded",
    Exit.FAILED: "with --wait or a --follow, a job failed (its last reason is printed)",
    Exit.USAGE: "bad usage, or the server refused the request (its field errors are printed)",
    Exit.CANCELLED: "with --wait or a --follow, a job was cancelled",
    Exit.TIMED_OUT: "with --wait, --timeout passed first (the jobs keep running unless "
    "--cancel-on-timeout)",
    Exit.UNREACHABLE: "the server cannot be reached (after retrying for up to "
    "CALDERA_RETRY_SECONDS) or refused the token (401)",
}


def table() -> str:
    """The codes as the help prints them."""
    return "\n".join(f"  {code.value}  {MEANINGS[code]}" for code in Exit)
