"""A real PgBouncer (Debian's ``pgbouncer``) in transaction pooling mode in front of the
tests' PostgreSQL: each transaction of a client may run on another server connection,
as behind a platform's pooler. Its pool is small, so that two clients' transactions
really do share server connections."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from django.conf import settings

SERVER_CONNECTIONS = 2  # per (database, user): fewer than the clients the tests run


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@contextmanager
def pgbouncer(*, pool_mode: str = "transaction") -> Iterator[int]:
    """PgBouncer in front of the default database's server; yields the port it listens on."""
    binary = shutil.which("pgbouncer") or "/usr/sbin/pgbouncer"
    if not os.path.exists(binary):
        raise RuntimeError("pgbouncer is not installed (Debian's package pgbouncer: .ci/run)")
    db = settings.DATABASES["default"]
    port = free_port()
    folder = Path(tempfile.mkdtemp(prefix="caldera-pgbouncer-"))
    user = db["USER"] or "postgres"
    (folder / "users.txt").write_text(f'"{user}" ""\n')
    (folder / "pgbouncer.ini").write_text(
        "\n".join(
            [
                "[databases]",
                f"* = host={db['HOST'] or '127.0.0.1'} port={db['PORT'] or 5432}",
                "[pgbouncer]",
                "listen_addr = 127.0.0.1",
                f"listen_port = {port}",
                "unix_socket_dir =",
                "auth_type = trust",
                f"auth_file = {folder / 'users.txt'}",
                f"pool_mode = {pool_mode}",
                f"default_pool_size = {SERVER_CONNECTIONS}",
                "max_client_conn = 200",
                # psycopg and Django send these at connect; PgBouncer need not track them.
                "ignore_startup_parameters = extra_float_digits,options",
                f"logfile = {folder / 'pgbouncer.log'}",
                "",
            ]
        )
    )
    command = [binary, str(folder / "pgbouncer.ini")]
    if os.geteuid() == 0:  # it refuses to run as root
        os.chmod(folder, 0o777)
        command[1:1] = ["-u", "nobody"]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    logged = folder / "pgbouncer.log"
                    said = logged.read_text() if logged.exists() else ""
                    raise RuntimeError(f"pgbouncer did not start: {said}") from None
                time.sleep(0.05)
        yield port
    finally:
        process.terminate()
        process.wait(10)
        shutil.rmtree(folder, ignore_errors=True)


@contextmanager
def through(port: int) -> Iterator[None]:
    """Every new connection of this process's default database goes through the pooler
    at ``port``, with parameters bound client-side (PgBouncer before 1.21 keeps no
    prepared statements); the connections open now are closed before and after."""
    from django.db import connections

    db = settings.DATABASES["default"]
    before = {"HOST": db["HOST"], "PORT": db["PORT"], "OPTIONS": dict(db["OPTIONS"])}
    connections.close_all()
    db.update(HOST="127.0.0.1", PORT=str(port))
    db["OPTIONS"]["server_side_binding"] = False
    try:
        yield
    finally:
        connections.close_all()
        db.update(before)
