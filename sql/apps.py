from django.apps import AppConfig
from django.db.models import Field, ForeignObject

from .lookups import AnyOf


class SqlConfig(AppConfig):
    name = "sql"
    verbose_name = "Shared SQL"

    def ready(self) -> None:
        # A relation's lookups are its own, not its Field's: ``queue_id__any`` needs both.
        Field.register_lookup(AnyOf)
        ForeignObject.register_lookup(AnyOf)
