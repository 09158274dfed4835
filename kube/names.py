"""The names Caldera writes on Kubernetes objects that more than one layer writes or reads.

The quota tree's Volcano queues (``queues.exchange``) and the jobs' objects
(``jobs.cluster.manifests``) carry the same queue-path annotation; the Kubernetes backend finds
the quota objects it owns by the managed-by label and applies them as its field manager.
The labels only jobs carry live with the manifests (``jobs.cluster.manifests.common``).
"""

from __future__ import annotations

ANNOTATION_QUEUE_PATH = "caldera.io/queue-path"
# On every object Caldera writes for the tree, so that it can find (and remove) its own.
LABEL_MANAGED_BY = "app.kubernetes.io/managed-by"
MANAGER = "caldera"  # the label's value, and the field manager of server-side applies
