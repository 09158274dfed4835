"""The background engine: the admission cycle, reconciling jobs into the cluster, the sync
that follows them there, start timeouts, the health of namespaces and of the cluster,
the ordered job locks, and the triggers that wake it.
"""
