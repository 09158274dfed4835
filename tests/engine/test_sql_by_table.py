"""Raw SQL lives in ``jobs/tables``, one module per table, so that a column's statements
are found in one place. These tests read the source of ``jobs/``, ``queues/``, ``access/``
and ``portal/`` (migrations aside) and fail when a statement is sent from anywhere else, or
when a table name is typed into SQL instead of taken from its model's ``_meta``.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator

from ..support.paths import REPO

PACKAGES = ("jobs", "queues", "access", "portal")
TABLES = "jobs/tables/"

# The modules outside jobs/tables that keep their statements, and why.
KEEP_THEIR_SQL = {
    "jobs/models.py": "JobEvent.objects.record, the events' INSERT over arrays, is already "
    "its table's named function, and the models cannot import jobs.tables",
    "jobs/engine/transitions.py": "the statements that change a job's state, each beside "
    "the check of its move against TRANSITIONS",
    "jobs/engine/locks.py": "advisory locks and the order of row locks: no table's statements",
    "jobs/cluster/simulated.py": "the simulated backend's own pods, a detail of that backend",
    "queues/selectors.py": "the queues' and quota nodes' reads: queues knows nothing of jobs",
    "access/tables.py": "the token check and the record of its use, the first statements "
    "of every API request, on the tokens' and Django's tables",
    "portal/embedded.py": "creates the embedded PostgreSQL's database",
    "portal/health.py": "the probes' statement timeout and SELECT 1",
}

# The calls that send a statement: a cursor's execute, executemany and copy (COPY), a
# manager's raw. Without an argument they are something else: a dict's copy, a Redis
# pipeline's execute.
SENDS_SQL = {"execute", "executemany", "copy", "raw"}

# A table name written out after the keyword that names a table.
TYPED_TABLE = re.compile(
    r"\b(?:FROM|JOIN|INTO|UPDATE|TABLE)\s+(?:jobs|queues|access|audit|auth|authtoken)_\w+", re.I
)


def sql_calls(source: str) -> list[int]:
    """The lines of ``source`` that send a statement."""
    return sorted(
        node.lineno
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in SENDS_SQL
        and (node.args or node.keywords)
    )


def typed_tables(source: str) -> list[int]:
    """The lines of ``source`` whose strings type a table name into SQL."""
    return sorted(
        node.lineno
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and TYPED_TABLE.search(node.value)
    )


def modules() -> Iterator[tuple[str, str]]:
    """(path from the repository, source) of every module of PACKAGES but migrations."""
    for package in PACKAGES:
        for path in sorted((REPO / package).rglob("*.py")):
            name = path.relative_to(REPO).as_posix()
            if "/migrations/" not in name:
                yield name, path.read_text()


def test_it_finds_a_statement_however_its_cursor_is_named():
    source = (
        "with connection.cursor() as c:\n"
        "    c.execute('SELECT 1')\n"
        "    with c.cursor.copy('COPY t FROM STDIN') as copy:\n"
        "        copy.write_row(row)\n"
        "users = User.objects.raw('SELECT * FROM u')\n"
        "later = query.copy()\n"
        "pipe.execute()\n"
        "cursor.execute('INSERT INTO jobs_queueticket AS t (queue_id, last) ...')\n"
    )
    assert sql_calls(source) == [2, 3, 5, 8]
    assert typed_tables(source) == [8]


def test_it_keeps_raw_sql_in_jobs_tables():
    found = {
        name: lines
        for name, source in modules()
        if not name.startswith(TABLES) and name not in KEEP_THEIR_SQL
        if (lines := sql_calls(source))
    }
    assert found == {}, "raw SQL outside jobs/tables: move it to the module of its table"


def test_it_lists_only_modules_that_still_send_sql():
    """A module that no longer sends a statement leaves KEEP_THEIR_SQL, so the list cannot
    make room for a new one."""
    sources = dict(modules())
    assert [name for name in KEEP_THEIR_SQL if not sql_calls(sources.get(name, ""))] == []


def test_it_takes_table_names_from_the_models():
    found = {name: lines for name, source in modules() if (lines := typed_tables(source))}
    assert found == {}, "take the table name from the model: Model._meta.db_table"
