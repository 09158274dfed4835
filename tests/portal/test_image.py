"""The container image, checked without a container engine: the file tree the Dockerfile's
COPY lines lay out is built in a temporary directory, and the image's own steps run there
with the project's pinned packages: its collectstatic step, ``check --deploy`` with
production settings, ``migrate`` on a fresh database, and its command serving requests.
A module the Dockerfile forgets to copy fails here, as it would fail the image."""

from __future__ import annotations

import json
import os
import re
import secrets
import shlex
import shutil
import socket
import subprocess
import sys
import tomllib
import urllib.request
from pathlib import Path

import dj_database_url
import psycopg
import pytest

from ..support.paths import REPO
from ..support.polling import wait_for

DOCKERFILE = REPO / "Dockerfile"


def instructions(stage: str | None = None) -> list[tuple[str, str]]:
    """The instructions of one of the Dockerfile's stages (``FROM ... AS stage``; by default
    the last, the image itself), continuation lines joined: (keyword, argument)."""
    stages: dict[str | None, list[tuple[str, str]]] = {}
    joined: list[tuple[str, str]] = []
    current = ""
    for line in DOCKERFILE.read_text().splitlines():
        if line.lstrip().startswith("#") or not line.strip():
            continue
        current += line.rstrip("\\").strip() + " "
        if not line.rstrip().endswith("\\"):
            keyword, _, argument = current.strip().partition(" ")
            if keyword.upper() == "FROM":
                joined = stages[argument.partition(" AS ")[2] or None] = []
            joined.append((keyword.upper(), argument))
            current = ""
    return stages[stage] if stage is not None else joined


def image_tree(root: Path, stage: str | None = None) -> Path:
    """The application's files where the image (or an earlier ``stage``) has them: WORKDIR,
    then each COPY; a COPY from an earlier stage builds that stage first, in its own
    directory, running its steps but those installing system packages (the tests' machine
    has them: .ci/run)."""
    workdir = Path("/")
    for keyword, argument in instructions(stage):
        if keyword == "WORKDIR":
            workdir = Path(argument)
        elif keyword == "RUN" and stage is not None and not argument.startswith("apt-get"):
            built = run_step(argument, root / workdir.relative_to("/"), {"HOME": str(root)})
            assert built.returncode == 0, built.stdout + built.stderr[-2000:]
        elif keyword == "COPY":
            *sources, target = shlex.split(argument)
            origin = REPO
            if sources[0].startswith("--from="):
                earlier = sources.pop(0).removeprefix("--from=")
                image_tree(root.parent / f"stage-{earlier}", earlier)
                origin = root.parent / f"stage-{earlier}"
                sources = [str(Path(source).relative_to("/")) for source in sources]
            assert not any(s.startswith("--") for s in sources), argument
            destination = root / (workdir / target).relative_to("/")
            for source in sources:
                path = origin / source
                if path.is_dir():
                    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
                    shutil.copytree(path, destination, ignore=ignore, dirs_exist_ok=True)
                elif target.endswith("/") or len(sources) > 1:  # into a directory
                    destination.mkdir(parents=True, exist_ok=True)
                    shutil.copy2(path, destination / path.name)
                else:  # to a file of that name
                    destination.parent.mkdir(parents=True, exist_ok=True)
                    shutil.copy2(path, destination)
    return root / workdir.relative_to("/")


# ``python`` and ``gunicorn`` in the image's steps are the project's own.
PATH = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"


def run_step(command: str, app: Path, env: dict) -> subprocess.CompletedProcess:
    """A shell step as the image runs it."""
    return subprocess.run(
        ["sh", "-c", command], cwd=app, env={**env, "PATH": PATH},
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip


@pytest.fixture
def fresh_database():
    """An empty database on the tests' PostgreSQL server, dropped afterwards."""
    url = dj_database_url.parse(os.environ["DATABASE_URL"])
    name = f"caldera_image_{secrets.token_hex(4)}"
    server = dict(host=url["HOST"], port=url["PORT"] or 5432, user=url["USER"],
                  password=url["PASSWORD"] or None, dbname="postgres", autocommit=True)  # fmt: skip
    with psycopg.connect(**server) as connection:
        connection.execute(f'CREATE DATABASE "{name}"')
    try:
        yield f"postgres://{url['USER']}@{url['HOST']}:{url['PORT'] or 5432}/{name}"
    finally:
        with psycopg.connect(**server) as connection:
            connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_the_image_tree_builds_passes_its_deploy_checks_migrates_and_serves(
    tmp_path, fresh_database
):
    app = image_tree(tmp_path / "image")
    base = {"HOME": str(tmp_path), "PYTHONDONTWRITEBYTECODE": "1", "PYTHONUNBUFFERED": "1"}
    steps = [argument for keyword, argument in instructions() if keyword == "RUN"]
    [collectstatic] = [step for step in steps if "collectstatic" in step]
    built = run_step(collectstatic, app, base)
    assert built.returncode == 0, built.stderr[-2000:]
    assert (app / "staticfiles").is_dir()

    production = {
        **base,
        "DEBUG": "0",
        "HTTPS": "true",
        "SECRET_KEY": secrets.token_urlsafe(50),
        "ALLOWED_HOSTS": "caldera.example.com,localhost",
        "CSRF_TRUSTED_ORIGINS": "https://caldera.example.com",
        "DATABASE_URL": fresh_database,
        "REDIS_URL": os.environ["REDIS_URL"],
    }
    checked = run_step("python manage.py check --deploy --fail-level WARNING", app, production)
    assert checked.returncode == 0, checked.stdout + checked.stderr[-2000:]
    migrated = run_step("python manage.py migrate --noinput", app, production)
    assert migrated.returncode == 0, migrated.stderr[-2000:]

    [command] = [json.loads(argument) for keyword, argument in instructions() if keyword == "CMD"]
    port = free_port()
    server = subprocess.Popen(
        command, cwd=app, env={**production, "PORT": str(port), "PATH": PATH},
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        answers = {path: wait_for_answer(port, path)[:2] for path in ("/livez", "/readyz")}
        login = wait_for_answer(port, "/accounts/login/", proto="https")
        # The catalogues compiled in the image's first stage: the page in the asker's language.
        chinese = wait_for_answer(port, "/accounts/login/", proto="https", language="zh-CN")
    finally:
        server.terminate()
        server.wait(timeout=20)
    assert answers == {
        "/livez": (200, {"web": "ok"}),
        "/readyz": (200, {"database": "ok", "broker": "ok"}),
    }
    assert login[0] == 200 and "Strict-Transport-Security" in login[2]
    assert '<html lang="zh-hans"' in chinese[1].decode() and "登录" in chinese[1].decode()


def wait_for_answer(
    port: int, path: str, proto: str = "http", seconds: float = 60.0, language: str = "en"
):
    """(status, body, headers) of one request, once the server listens."""
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}{path}",
        headers={"Host": "localhost", "X-Forwarded-Proto": proto, "Accept-Language": language},
    )

    def ask():
        try:
            with urllib.request.urlopen(request, timeout=10) as answer:
                body = answer.read()
                if answer.headers.get_content_type() == "application/json":
                    body = json.loads(body)
                return answer.status, body, dict(answer.headers)
        except urllib.error.HTTPError:
            raise
        except urllib.error.URLError:
            return None  # not listening yet

    return wait_for(ask, seconds, f"an answer to {path} on port {port}", every=0.2)


def pins(requirements: list[str]) -> dict[str, str]:
    """{name: version} of ``name[extra]==version`` requirements, names normalized."""
    return {
        re.split(r"[\[=]", requirement)[0].lower().replace("_", "-"): requirement.split("==")[1]
        for requirement in requirements
    }


def locked(path: Path) -> dict[str, str]:
    found = {}
    for line in path.read_text().splitlines():
        if "==" in line and not line.startswith((" ", "#")):
            name, version = line.split(" ")[0].split("==")
            found[name.lower().replace("_", "-")] = version
    return found


def test_the_image_installs_the_runtime_lock_and_it_holds_the_declared_pins():
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    runtime, extras = pins(project["dependencies"]), project["optional-dependencies"]
    image = locked(REPO / "requirements" / "runtime.txt")
    everything = locked(REPO / "requirements" / "dev.txt")
    assert {name: image.get(name) for name in runtime} == runtime
    wanted = runtime | pins(extras["demo"]) | pins(extras["dev"])
    assert {name: everything.get(name) for name in wanted} == wanted
    # What only the demo and the tests need stays out of the image.
    assert not set(pins(extras["demo"])) & set(image)
    assert not {"pytest", "playwright", "kmock", "hypothesis"} & set(image)
    copied = [a for keyword, a in instructions() if keyword == "COPY"]
    assert copied[0] == "requirements/runtime.txt ./requirements.txt"
    steps = [a for keyword, a in instructions() if keyword == "RUN"]
    assert steps[0] == "pip install --require-hashes -r requirements.txt"
