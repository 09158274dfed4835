"""Many rows in a bounded number of parameters."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TypeVar

from django.db import connection
from django.db.models import Field, Model
from django.db.models.options import Options

from .lookups import array_type

T = TypeVar("T")

# What Django still sends a placeholder each for (the ids of a cascading delete) goes at
# most this many at a time: far below PostgreSQL's 65,535 parameters of a statement.
CHUNK = 5_000


def chunks(items: Sequence[T], size: int = CHUNK) -> Iterator[Sequence[T]]:
    """``items`` in slices of at most ``size``."""
    for start in range(0, len(items), size):
        yield items[start : start + size]


def rows_update(objects: Sequence[Model], fields: Sequence[str]) -> int:
    """Write ``fields`` of these instances of one model in one UPDATE, matched by primary
    key: each column goes as one array (``unnest``), so the statement has a parameter per
    column however many rows (``bulk_update`` writes a CASE with a placeholder per row and
    field). The number of rows updated."""
    if not objects:
        return 0
    meta = type(objects[0])._meta
    written = _columns(meta, ["pk", *fields])
    quote = connection.ops.quote_name
    names = [quote(column) for _field, column in written]
    arrays = [
        [field.get_db_prep_save(getattr(row, field.attname), connection) for row in objects]
        for field, _column in written
    ]
    types = [array_type(field, connection) for field, _column in written]
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            UPDATE {quote(meta.db_table)} t
            SET {", ".join(f"{name} = v.{name}" for name in names[1:])}
            FROM unnest({", ".join(f"%s::{t}" for t in types)}) AS v({", ".join(names)})
            WHERE t.{names[0]} = v.{names[0]}
            """,
            arrays,
        )
        return cursor.rowcount


def _columns(meta: Options, names: Sequence[str]) -> list[tuple[Field, str]]:
    """Each named field with its column ("pk": the primary key)."""
    found: list[tuple[Field, str]] = []
    for name in names:
        field = meta.pk if name == "pk" else meta.get_field(name)
        if not isinstance(field, Field) or not field.column:
            raise ValueError(f"rows_update writes a model's own columns; {name!r} is not one")
        found.append((field, field.column))
    return found
