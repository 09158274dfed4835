"""The admin site for quotas: the tree and its nodes, queues, departments and their people.

Every write goes through ``queues.services``, the same services as the REST API, so the
rules are checked the same way everywhere and every change lands in the audit history.
"""

from . import people, queue_settings, tree  # noqa: F401  (each module registers its admins)
