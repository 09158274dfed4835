"""The raw SQL of jobs, by table: one module per table, each holding the statements on
that table as named, documented functions. Everything else uses the ORM, or calls these.

Each statement is in the module of the table it is about (a read that joins the queues
to the jobs is the job table's): ``jobs`` the job table, ``tickets`` the queue tickets,
``blocks`` the pending blocks, ``events`` the job events, ``usage`` the usage samples,
``cluster_health`` the cluster's single health row. So a column's statements are found in
one place, and a change to a column shows every statement it touches.

Table names come from the models (``Job._meta.db_table`` and the constants at the bottom
of ``jobs.models``, ``queues.selectors`` for the queues' tables) and states are passed as
parameters, so a rename cannot leave a query behind. These modules import the models and
those table names, nothing above them.

Not here, on purpose:

- ``JobEvent.objects.record`` (``jobs.models``), the events' INSERT over arrays: it is
  already the named function of its table, and ``jobs.models`` cannot import from here.
- The statements that change a job's ``state`` (``jobs.engine.transitions``), each beside
  the check of its move against the state machine.
- The advisory locks and the job row locks in order (``jobs.engine.locks``), which are
  about sessions and locks rather than a table; the simulated cluster's pods
  (``jobs.cluster.simulated``), a detail of that backend.
- The queues' and quota nodes' reads (``queues.selectors``): ``queues`` knows nothing of
  ``jobs``.
"""
