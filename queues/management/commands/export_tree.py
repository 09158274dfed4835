"""``manage.py export_tree [--output FILE]``: the active quota tree as ElasticQuotaTree YAML."""

from __future__ import annotations

from pathlib import Path

from django.core.management.base import BaseCommand

from queues import exchange


class Command(BaseCommand):
    help = "Write the quota tree as ElasticQuotaTree YAML (the seed's format) to stdout or FILE."

    def add_arguments(self, parser):
        parser.add_argument("--output", "-o", type=Path, help="write to this file, not stdout")

    def handle(self, *args, output: Path | None = None, **options) -> None:
        text = exchange.tree_yaml()
        if output is None:
            self.stdout.write(text, ending="")
        else:
            output.write_text(text, encoding="utf-8")
