"""The demo's supervisor (portal/supervise.py): a child that exits comes back, with backoff.

Real processes, killed for real; every wait is bounded.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from portal.supervise import Supervisor, describe_exit, restart_delay

from ..support.paths import REPO
from ..support.polling import wait_for

SLEEPER = [sys.executable, "-c", "import time; time.sleep(120)"]


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie, exited but not yet reaped, does not count)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def children_of(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid and fields[0] != "Z":
            found.append(int(entry.name))
    return found


@pytest.fixture
def supervised():
    """``supervised(**options)`` -> (supervisor, messages), running in a thread until the end."""
    started: list[tuple[Supervisor, threading.Thread]] = []

    def start(**options) -> tuple[Supervisor, list[str]]:
        messages: list[str] = []
        supervisor = Supervisor({"sleeper": SLEEPER}, say=messages.append, **options)
        thread = threading.Thread(target=supervisor.run, daemon=True)
        thread.start()
        started.append((supervisor, thread))
        wait_for(lambda: supervisor.child("sleeper").process is not None)
        return supervisor, messages

    yield start
    for supervisor, thread in started:
        supervisor.request_stop()
        thread.join(timeout=20)


def test_the_delay_doubles_from_the_first_up_to_the_cap():
    assert [restart_delay(n, first=1, cap=30) for n in range(1, 8)] == [1, 2, 4, 8, 16, 30, 30]


def test_an_exit_by_signal_is_named():
    assert describe_exit(-9) == "code -9 (SIGKILL)"
    assert describe_exit(1) == "code 1"


def test_it_restarts_a_killed_child_with_growing_delays_and_says_so(supervised):
    supervisor, messages = supervised(first_delay=0.2, stable_after=60)
    first = supervisor.child("sleeper").process.pid

    os.kill(first, signal.SIGKILL)
    second = wait_for(
        lambda: (pid := supervisor.child("sleeper").process.pid) != first and alive(pid) and pid
    )
    os.kill(second, signal.SIGKILL)
    third = wait_for(
        lambda: (pid := supervisor.child("sleeper").process.pid) != second and alive(pid) and pid
    )

    assert not alive(first) and not alive(second) and alive(third)
    assert messages == [
        "sleeper exited with code -9 (SIGKILL); restarting in 0.2 s",
        f"sleeper restarted (pid {second})",
        "sleeper exited with code -9 (SIGKILL); restarting in 0.4 s",
        f"sleeper restarted (pid {third})",
    ]
    assert supervisor.child("sleeper").restarts == 2


def test_a_child_that_ran_a_while_is_restarted_after_the_first_delay_again(supervised):
    supervisor, messages = supervised(first_delay=0.2, stable_after=0.5)
    child = supervisor.child("sleeper")
    os.kill(child.process.pid, signal.SIGKILL)  # at once: a quick exit
    wait_for(lambda: child.restarts == 1)
    time.sleep(0.6)  # longer than stable_after: this run was healthy
    os.kill(child.process.pid, signal.SIGKILL)
    wait_for(lambda: child.restarts == 2)
    delays = [m.rsplit("in ", 1)[1] for m in messages if "exited" in m]
    assert delays == ["0.2 s", "0.2 s"]


def test_stopping_ends_every_child_and_restarts_none(supervised):
    supervisor, messages = supervised(first_delay=0.2)
    pid = supervisor.child("sleeper").process.pid
    supervisor.request_stop()
    wait_for(lambda: not alive(pid))
    time.sleep(0.4)  # past the first delay: nothing comes back
    assert supervisor.child("sleeper").process.pid == pid
    assert messages == []


def test_sigterm_stops_the_supervisor_process_and_its_children():
    process = subprocess.Popen(
        [sys.executable, "-m", "portal.supervise", "one=sleep 120", "two=sleep 120"], cwd=REPO
    )
    try:
        children = wait_for(lambda: len(found := children_of(process.pid)) == 2 and found)
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=20) == 0
        assert not any(alive(pid) for pid in children)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
