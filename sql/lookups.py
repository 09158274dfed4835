"""``field__any=values``: ``field = ANY(%s)`` with the values as one array parameter.

Django's ``__in`` writes a placeholder per value, which PostgreSQL refuses past 65,535 and
plans anew for every count; ``__any`` sends one typed array, however many values.
"""

from __future__ import annotations

from django.db.models import Lookup


def array_type(field, connection) -> str:
    """The PostgreSQL array type of ``field``'s values (``bigint[]``, ``varchar[]``): the
    base type, as ``varchar(63)[]`` would only add a cast."""
    target = field.target_field if field.is_relation else field
    return target.cast_db_type(connection).split("(")[0] + "[]"


class AnyOf(Lookup):
    lookup_name = "any"
    prepare_rhs = False

    def get_prep_lookup(self):
        field = self.lhs.output_field
        target = field.target_field if field.is_relation else field
        return [target.get_prep_value(value) for value in self.rhs]

    def as_sql(self, compiler, connection):
        lhs, lhs_params = self.process_lhs(compiler, connection)
        field = self.lhs.output_field
        target = field.target_field if field.is_relation else field
        values = [target.get_db_prep_value(v, connection, prepared=True) for v in self.rhs]
        return f"{lhs} = ANY(%s::{array_type(field, connection)})", (*lhs_params, values)
