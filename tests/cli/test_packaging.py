"""The ``caldera`` command is a distribution of its own (client/, caldera-cli): a CI image
installs it without Django. Here: what it imports, that the portal's locks hold what it
needs, that make and the image install it, and that its help and docs/ci.md give the same
exit codes."""

from __future__ import annotations

import ast
import re
import sys
import tomllib

from ..support.cli import Cli
from ..support.paths import REPO

CLIENT = REPO / "client"
# requests' own urllib3 names the connection errors a submission may be retried after.
ALLOWED = {"caldera_cli", "requests", "urllib3", "yaml"}


def imported(path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


def test_it_imports_the_standard_library_requests_and_pyyaml_only():
    modules = sorted((CLIENT / "caldera_cli").glob("*.py"))
    assert modules
    used = set().union(*(imported(module) for module in modules))
    assert used - sys.stdlib_module_names - ALLOWED == set()


def locked(name: str) -> set[str]:
    text = (REPO / "requirements" / name).read_text()
    return {line.split("==")[0].lower() for line in text.splitlines() if "==" in line}


def test_its_dependencies_are_in_the_portals_locks_and_make_and_the_image_install_it():
    project = tomllib.loads((CLIENT / "pyproject.toml").read_text())["project"]
    needs = {
        re.split(r"[<>=\[ ]", requirement)[0].lower() for requirement in project["dependencies"]
    }
    assert needs == {"requests", "pyyaml"}
    assert needs <= locked("runtime.txt") and needs <= locked("dev.txt")
    assert project["scripts"] == {"caldera": "caldera_cli.main:main"}
    assert "--no-deps -e . -e ./client" in (REPO / "Makefile").read_text()
    dockerfile = (REPO / "Dockerfile").read_text()
    assert "COPY client ./client" in dockerfile
    assert "RUN pip install --no-deps ./client" in dockerfile


def test_its_help_and_docs_ci_give_the_same_exit_codes(tmp_path):
    shown = Cli(tmp_path).run("--help")
    assert shown.returncode == 0
    codes = re.findall(r"^  (\d)  (.+)$", shown.stdout.split("Exit codes:")[1], re.MULTILINE)
    assert [int(code) for code, _ in codes] == [0, 1, 2, 3, 4, 5]
    documented = re.findall(r"^\| (\d) \|", (REPO / "docs" / "ci.md").read_text(), re.MULTILINE)
    assert [int(code) for code in documented] == [0, 1, 2, 3, 4, 5]
