"""Keep child processes running: restart one that exits, with backoff, and say so.

Why: ``make demo`` runs the web server, a Celery worker and beat as children. A worker can
exit on its own (a broker outage, a crash, the OOM killer); before, the demo then stopped
everything. Now a child that exits is started again after 1 s, 2 s, 4 s ... (capped), and
the delay starts over once a child has run for a while, so a child that keeps failing
at once is not restarted in a tight loop, while one that fails once a day comes back at
once. Stopping (Ctrl-C, SIGTERM) ends every child: SIGTERM, then SIGKILL after a grace
period.

Plain processes only, no Django: production has its own supervisors (the restart policies
in docker-compose.yml and the Deployments in deploy/kubernetes).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import FrameType

FIRST_DELAY_SECONDS = 1.0
MAX_DELAY_SECONDS = 30.0
# A child that ran this long before it exited was healthy: its next restart waits the
# first delay again.
STABLE_AFTER_SECONDS = 30.0
STOP_TIMEOUT_SECONDS = 15.0
POLL_SECONDS = 0.1


def restart_delay(failures: int, *, first: float, cap: float) -> float:
    """The wait before restarting a child after its ``failures``-th quick exit in a row."""
    return min(first * 2 ** max(failures - 1, 0), cap)


def describe_exit(returncode: int) -> str:
    """``code 1``, or ``code -9 (SIGKILL)`` for a child ended by a signal."""
    if returncode < 0:
        try:
            return f"code {returncode} ({signal.Signals(-returncode).name})"
        except ValueError:
            pass
    return f"code {returncode}"


def _say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


@dataclass
class Child:
    name: str
    command: Sequence[str]
    process: subprocess.Popen | None = None
    started_at: float = 0.0
    quick_exits: int = 0
    restart_at: float | None = None
    restarts: int = 0


class Supervisor:
    """Starts the children, restarts those that exit, stops them all on request.

    ``run()`` loops until ``request_stop()`` (safe from a signal handler or another
    thread), then stops the children. ``poll()`` is one step of that loop.
    """

    def __init__(
        self,
        commands: Mapping[str, Sequence[str]],
        *,
        say: Callable[[str], None] = _say,
        first_delay: float = FIRST_DELAY_SECONDS,
        max_delay: float = MAX_DELAY_SECONDS,
        stable_after: float = STABLE_AFTER_SECONDS,
        stop_timeout: float = STOP_TIMEOUT_SECONDS,
        env: Mapping[str, str] | None = None,
        cwd: str | os.PathLike | None = None,
    ) -> None:
        self.children = [Child(name, list(command)) for name, command in commands.items()]
        self.say = say
        self.first_delay = first_delay
        self.max_delay = max_delay
        self.stable_after = stable_after
        self.stop_timeout = stop_timeout
        self.env = dict(env) if env is not None else None
        self.cwd = cwd
        self._stop = threading.Event()

    def child(self, name: str) -> Child:
        return next(child for child in self.children if child.name == name)

    def start(self) -> None:
        for child in self.children:
            self._spawn(child)

    def _spawn(self, child: Child) -> subprocess.Popen[bytes]:
        child.process = subprocess.Popen(child.command, env=self.env, cwd=self.cwd)
        child.started_at = time.monotonic()
        child.restart_at = None
        return child.process

    def poll(self) -> None:
        """Notice children that exited and start those whose restart is due."""
        now = time.monotonic()
        for child in self.children:
            if self._stop.is_set():
                return
            if child.restart_at is not None:
                if now >= child.restart_at:
                    child.restarts += 1
                    process = self._spawn(child)
                    self.say(f"{child.name} restarted (pid {process.pid})")
                continue
            returncode = child.process.poll() if child.process is not None else None
            if returncode is None:
                continue
            lived = now - child.started_at
            child.quick_exits = 1 if lived >= self.stable_after else child.quick_exits + 1
            delay = restart_delay(child.quick_exits, first=self.first_delay, cap=self.max_delay)
            child.restart_at = now + delay
            self.say(
                f"{child.name} exited with {describe_exit(returncode)}; restarting in {delay:g} s"
            )

    def request_stop(self, signum: int | None = None, frame: FrameType | None = None) -> None:
        """Stop restarting and end ``run()``; usable as a signal handler."""
        self._stop.set()

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    def run(self, *, tick: Callable[[], None] | None = None, tick_seconds: float = 4.0) -> None:
        """Start the children and keep them running until asked to stop, then stop them.

        ``tick`` runs every ``tick_seconds`` in this thread (the demo's traffic).
        """
        try:
            self.start()
            next_tick = time.monotonic()
            while not self._stop.is_set():
                self.poll()
                if tick is not None and time.monotonic() >= next_tick:
                    tick()
                    next_tick = time.monotonic() + tick_seconds
                self._stop.wait(POLL_SECONDS)
        finally:
            self.shutdown()

    def shutdown(self) -> None:
        """SIGTERM to every running child, SIGKILL to those still there after the grace."""
        self._stop.set()
        running = [
            c.process for c in self.children if c.process is not None and c.process.poll() is None
        ]
        for process in running:
            process.terminate()
        deadline = time.monotonic() + self.stop_timeout
        for process in running:
            try:
                process.wait(timeout=max(deadline - time.monotonic(), 0))
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def install_signal_handlers(supervisor: Supervisor) -> None:
    """Ctrl-C and SIGTERM stop the supervisor (and so every child) cleanly."""
    signal.signal(signal.SIGINT, supervisor.request_stop)
    signal.signal(signal.SIGTERM, supervisor.request_stop)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m portal.supervise NAME=COMMAND ...``: supervise shell-free commands.

    A small entry point for trying the supervisor by hand and for its tests, e.g.
    ``python -m portal.supervise "sleeper=sleep 60"``.
    """
    pairs = [item.split("=", 1) for item in (sys.argv[1:] if argv is None else argv)]
    if not pairs or any(len(pair) != 2 for pair in pairs):
        print("usage: python -m portal.supervise NAME=COMMAND [NAME=COMMAND ...]", file=sys.stderr)
        return 2
    supervisor = Supervisor({name: command.split() for name, command in pairs})
    install_signal_handlers(supervisor)
    supervisor.run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
