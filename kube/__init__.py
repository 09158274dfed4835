"""The Kubernetes vocabulary every layer shares, in plain Python with no Django.

Quantities (``kube.quantity``: parsing, exact arithmetic, formatting) and the names
Caldera writes on the objects it owns (``kube.names``). The quota tree (``queues``), the
jobs and their manifests (``jobs``) and the cluster backends (``jobs.cluster``) all speak
it; it imports none of them.
"""
