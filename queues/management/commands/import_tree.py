"""``manage.py import_tree FILE``: apply an ElasticQuotaTree YAML like ``kubectl apply``.

Prints each node that changed. A refused tree writes nothing, prints every error with the
field it concerns, and exits non-zero.
"""

from __future__ import annotations

import sys
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from audit.models import AuditEntry
from queues import exchange, services


class Command(BaseCommand):
    help = "Apply an ElasticQuotaTree YAML file ('-' for stdin) to the quota tree."

    def add_arguments(self, parser):
        parser.add_argument("file", help="the YAML file, or - to read stdin")

    def handle(self, *args, file: str, **options) -> None:
        try:
            text = sys.stdin.read() if file == "-" else Path(file).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as error:
            raise CommandError(f"cannot read {file}: {error}") from None
        try:
            changes = services.tree_import(
                document=exchange.tree_load(text), source=AuditEntry.Source.COMMAND
            )
        except services.TreeError as error:
            lines = [f"{field}: {reason}" for field, rs in error.errors.items() for reason in rs]
            raise CommandError(
                "the tree was not applied, nothing changed:\n  " + "\n  ".join(lines)
            ) from None
        for change in changes:
            self.stdout.write(change.describe())
        if not changes:
            self.stdout.write("The tree already matched: nothing changed.")
        else:
            self.stdout.write(self.style.SUCCESS(f"Applied: {services.count_nodes(changes)}."))
