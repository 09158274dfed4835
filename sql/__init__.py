"""The SQL every app shares: statements whose parameters do not grow with their rows.

PostgreSQL takes at most 65,535 parameters in one statement, and a statement with a
placeholder per row costs more to plan than to run. So a filter on many values is one
array (``field__any=values``, ``sql.lookups``), and an update of many rows sends each
column as one array (``sql.rows.rows_update``). ``sql.rows.chunks`` bounds what must still
go row by row (Django's cascading delete).
"""
