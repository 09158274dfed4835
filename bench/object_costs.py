"""What a job sent as a Kubernetes object costs: ``python -m bench.object_costs [N]``.

Run inside ``python -m portal.embedded run --`` (or with DATABASE_URL and REDIS_URL set).
For every job of the operators' samples (k8s/samples) and of the seed documents
(tests/support/manifests), it times in-process, in the mean over N rounds (default 200):
reading the body as a submission does (``jobs.document.native.read_body``: the CRD
schema, the pods' requests, the fence), placing it in a queue (``native_placed``: the
replacements, the Pod Security Standards), and making the objects Caldera creates at
admission (``with_additions``); and it asks PostgreSQL how many bytes the stored object
takes in the job's row (``pg_column_size`` of the ``manifest`` column's JSON), against a
job written as Caldera's document, which stores none. docs/benchmarks.md quotes it.
"""

from __future__ import annotations

import json
import os
import sys
import timeit
from pathlib import Path

from .services import bench_environment

REPO = Path(__file__).resolve().parent.parent
FILES = sorted((REPO / "k8s" / "samples").glob("*.yaml")) + sorted(
    (REPO / "tests" / "support" / "manifests").glob("seed-*.yaml")
)


def main(argv: list[str]) -> int:
    rounds = int(argv[0]) if argv else 200
    os.environ.update(bench_environment(dict(os.environ)))
    import django

    django.setup()
    from django.db import connection

    from jobs.cluster.manifests import build_manifests
    from jobs.cluster.spec import JobSpec, PodGroup
    from jobs.document.native import native_placed, read_body
    from jobs.document.validation import JobInvalid
    from kube.yaml_text import load_file

    def mean_us(step) -> float:
        return timeit.timeit(step, number=rounds) / rounds * 1e6

    print(f"mean cost (µs), {rounds} rounds; bytes stored in the job's row:")
    print(f"  {'file':<48} {'read':>8} {'place':>8} {'create':>8} {'bytes':>7}")
    totals = []
    read_body(load_file((REPO / "k8s" / "samples" / "volcano-ray-plugin.yaml").read_text()))
    for path in FILES:
        body = load_file(path.read_text())
        try:
            native = read_body(body)
        except JobInvalid:
            continue  # not a job (a Queue, a RayCluster, a quota tree)
        placed = native_placed(
            native, namespace="bench", queue_name="root-bench", priority_class="", replace=True
        )
        spec = JobSpec(
            id=1, name=native.name, object_name=native.name or "job-1", namespace="bench",
            kind=native.kind.kind, runtime=native.kind.runtime, image=native.image,
            head=PodGroup("head", 1, {}), workers=(), queue_name="root-bench",
            queue_path="root/bench", department="bench", owner="bench",
            objects=tuple(placed["objects"]),
        )  # fmt: skip
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_column_size(%s::jsonb)", [json.dumps(placed)])
            (stored,) = cursor.fetchone()
        costs = (
            mean_us(lambda body=body: read_body(body)),
            mean_us(
                lambda native=native: native_placed(
                    native,
                    namespace="bench",
                    queue_name="root-bench",
                    priority_class="",
                    replace=True,
                )
            ),  # fmt: skip
            mean_us(lambda spec=spec: build_manifests(spec)),
        )
        totals.append((*costs, stored))
        print(f"  {path.name:<48} {costs[0]:8.0f} {costs[1]:8.0f} {costs[2]:8.0f} {stored:7d}")
    count = len(totals)
    means = [sum(row[i] for row in totals) / count for i in range(4)]
    print(f"  {'mean of ' + str(count) + ' jobs':<48} {means[0]:8.0f} {means[1]:8.0f} "
          f"{means[2]:8.0f} {means[3]:7.0f}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
