"""The names Caldera writes on Kubernetes objects that more than one layer writes or reads.

The quota tree's Volcano queues (``queues.exchange``) and the jobs' objects
(``jobs.cluster.manifests``) carry the same queue-path annotation; the Kubernetes backend finds
the quota objects it owns by the managed-by label and applies them as its field manager.
The labels only jobs carry live with the manifests (``jobs.cluster.manifests.common``).
"""

from __future__ import annotations

ANNOTATION_QUEUE_PATH = "caldera.io/queue-path"
# On a team's job object: the node pools of the quota tree it accepts, in order
# ("h100,a100"), as a job document's ``pools`` says them.
POOLS_ANNOTATION = "caldera.io/pools"
# On every object Caldera writes for the tree, so that it can find (and remove) its own.
LABEL_MANAGED_BY = "app.kubernetes.io/managed-by"
MANAGER = "caldera"  # the label's value, and the field manager of server-side applies
