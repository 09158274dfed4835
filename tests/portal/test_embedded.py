"""``python -m portal.embedded run -- CMD``: real servers from the wheels, a real command.

No Django database here: each test runs the module as a process, with DATABASE_URL and
REDIS_URL removed from its environment, and looks at what the command saw and at what is
left listening afterwards. The tests share one state directory, so PostgreSQL's initdb runs
once and the later runs exercise reusing an initialised data directory.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from portal.embedded import pg_account, pg_clear_stale, redis_clear_stale

from ..support.paths import REPO

TIMEOUT = 60

CONNECT = """
import os, psycopg, redis
from pathlib import Path
assert psycopg.connect(os.environ["DATABASE_URL"]).execute("select 1").fetchone() == (1,)
assert redis.Redis.from_url(os.environ["REDIS_URL"]).ping()
services = Path(os.environ["CALDERA_STATE_DIR"], "services.env").read_text().splitlines()
assert services == ["DATABASE_URL=" + os.environ["DATABASE_URL"],
                    "REDIS_URL=" + os.environ["REDIS_URL"]], services
print("OK", os.environ["DATABASE_URL"], os.environ["REDIS_URL"])
"""

# Says where the services are, then waits to be signalled (or killed).
WAIT = """
import os, sys, time
print("READY", os.getpid(), os.environ["DATABASE_URL"], os.environ["REDIS_URL"], flush=True)
time.sleep(60)
sys.exit(0)
"""


@pytest.fixture(scope="module")
def state_dir() -> Iterator[Path]:
    # Short, under /tmp: PostgreSQL's socket path must stay under ~100 characters.
    path = Path(tempfile.mkdtemp(prefix="cal", dir="/tmp"))
    yield path
    # Whatever a failed test left running is stopped before the directory goes.
    pg_clear_stale(path / "pg", pg_account())
    redis_clear_stale(path / "redis" / "redis.pid")
    shutil.rmtree(path, ignore_errors=True)


def embedded_env(state_dir: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "REDIS_URL"}}
    return {**env, "CALDERA_STATE_DIR": str(state_dir), **extra}


def embedded_command(script: str) -> list[str]:
    return [sys.executable, "-m", "portal.embedded", "run", "--", sys.executable, "-c", script]


def run_embedded(script: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        embedded_command(script),
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )


def start_embedded(script: str, env: dict[str, str]) -> tuple[subprocess.Popen[str], list[str]]:
    """Start a run in the background; returns it and the READY line's fields."""
    process = subprocess.Popen(
        embedded_command(script),
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    ready = process.stdout.readline().split()
    assert ready[:1] == ["READY"], process.communicate(timeout=TIMEOUT)
    return process, ready


def ports(*urls: str) -> list[int]:
    return [int(re.search(r":(\d+)/", url).group(1)) for url in urls]


def accepts(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.settimeout(1)
        return probe.connect_ex(("127.0.0.1", port)) == 0


def test_it_gives_the_command_a_database_and_redis(state_dir):
    done = run_embedded(CONNECT, embedded_env(state_dir))

    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("OK postgres://postgres@127.0.0.1:")
    assert "caldera: embedded PostgreSQL on 127.0.0.1:" in done.stderr
    assert "caldera: embedded Redis on 127.0.0.1:" in done.stderr
    assert not (state_dir / "services.env").exists()
    assert not (state_dir / "pg" / "postmaster.pid").exists()


def test_it_returns_the_command_exit_code_and_stops_the_services(state_dir):
    script = (
        "import os, sys; print(os.environ['DATABASE_URL'], os.environ['REDIS_URL']); sys.exit(3)"
    )

    done = run_embedded(script, embedded_env(state_dir))

    assert done.returncode == 3, done.stderr
    database_port, redis_port = ports(*done.stdout.split())
    assert not accepts(database_port)
    assert not accepts(redis_port)
    assert not (state_dir / "services.env").exists()


def test_it_forwards_sigterm_and_stops_the_services(state_dir):
    process, (_, _, database_url, redis_url) = start_embedded(WAIT, embedded_env(state_dir))
    assert (state_dir / "services.env").exists()

    process.send_signal(signal.SIGTERM)

    # The command died of SIGTERM: 128 + 15, as a shell reports it.
    assert process.wait(timeout=TIMEOUT) == 143
    assert not any(accepts(port) for port in ports(database_url, redis_url))
    assert not (state_dir / "services.env").exists()


def test_it_stops_what_a_killed_run_left_running(state_dir):
    killed, (_, child_pid, database_url, redis_url) = start_embedded(WAIT, embedded_env(state_dir))
    killed.kill()
    killed.wait(timeout=TIMEOUT)
    os.kill(int(child_pid), signal.SIGKILL)
    left_ports = ports(database_url, redis_url)
    assert all(accepts(port) for port in left_ports)

    done = run_embedded(CONNECT, embedded_env(state_dir))

    assert done.returncode == 0, done.stderr
    assert "stopping the PostgreSQL an earlier run left" in done.stderr
    assert "stopping the Redis an earlier run left behind" in done.stderr
    assert not any(accepts(port) for port in left_ports)


def test_it_starts_nothing_when_both_urls_are_set(tmp_path):
    state_dir = tmp_path / "state"
    env = embedded_env(
        state_dir, DATABASE_URL="postgres://db.invalid/x", REDIS_URL="redis://redis.invalid/0"
    )
    script = "import os; print(os.environ['DATABASE_URL'], os.environ['REDIS_URL'])"

    done = run_embedded(script, env)

    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["postgres://db.invalid/x", "redis://redis.invalid/0"]
    assert done.stderr == ""
    assert not state_dir.exists()
