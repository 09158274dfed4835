"""Django's makemessages, finding the plural wordings of queues.phrases too.

A wording whose English changes with a number is declared with ``ngettext_noop`` (marked,
not translated, since it is rendered long after it is declared); xgettext is told that
name as it is told ``gettext_noop``."""

from django.core.management.commands import makemessages


class Command(makemessages.Command):
    xgettext_options = [*makemessages.Command.xgettext_options, "--keyword=ngettext_noop:1,2"]
