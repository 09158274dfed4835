"""``manage.py export_volcano_queues [--output FILE]``: a Volcano Queue per leaf, as YAML."""

from __future__ import annotations

from pathlib import Path

from django.core.management.base import BaseCommand

from queues import exchange


class Command(BaseCommand):
    help = (
        "Write a scheduling.volcano.sh/v1beta1 Queue per leaf (capability = max, guarantee = "
        "min, reclaimable) as multi-document YAML to stdout or FILE."
    )

    def add_arguments(self, parser):
        parser.add_argument("--output", "-o", type=Path, help="write to this file, not stdout")

    def handle(self, *args, output: Path | None = None, **options) -> None:
        text = exchange.volcano_queues_yaml()
        if output is None:
            self.stdout.write(text, ending="")
        else:
            output.write_text(text, encoding="utf-8")
