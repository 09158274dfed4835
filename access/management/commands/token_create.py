"""``manage.py token_create alice --name ci --right submit --department algorithm``: a token
for someone, made from a shell (an operator's, or a deployment's first one); the secret is
printed once."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from audit.models import AuditEntry
from queues.scope import RIGHTS

from ...services import Asked, TokenInvalid, token_create


class Command(BaseCommand):
    help = "Make an access token for a user and print its secret (shown this once)."

    def add_arguments(self, parser):
        parser.add_argument("username")
        parser.add_argument("--name", required=True, help="what it is for")
        parser.add_argument("--right", choices=RIGHTS, default="submit")
        parser.add_argument(
            "--department",
            action="append",
            dest="departments",
            help="a department it acts in (repeat for more); none: all of the user's",
        )
        parser.add_argument("--days", type=int, help="its lifetime; default from the settings")

    def handle(self, *args, username, name, right, departments, days, **options):
        user = get_user_model().objects.filter(username=username).first()
        if user is None:
            raise CommandError(f"no user is named {username!r}")
        asked = Asked(name=name, right=right, departments=departments, expires_in_days=days or -1)
        try:
            _, key = token_create(
                user=user, asked=asked, actor=None, source=AuditEntry.Source.COMMAND
            )
        except TokenInvalid as invalid:
            raise CommandError(
                "; ".join(f"{field}: {' '.join(why)}" for field, why in invalid.errors.items())
            ) from None
        self.stdout.write(key)
