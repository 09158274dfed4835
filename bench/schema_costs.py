"""What the declared job schema costs per job: ``python -m bench.schema_costs [N]``.

Run inside ``python -m portal.embedded run --`` (or with DATABASE_URL and REDIS_URL set);
nothing is read from or written to the database. It times, in-process and in the mean
over N rounds (default 2,000): binding a serializer's fields (what ``jobs.document.schema.bound``
saves), reading one of the Kueue baseline's job documents through ``JobIn``, writing a
job through ``JobOut``, writing a batch's 1,000 entries through ``JobBatchOut`` (DRF's
loop, and ``batch_out`` as the endpoint does), and one
quantity parsed (``kube.quantity.parse_quantity``), so docs/benchmarks.md can say where a
submission's Python time goes.
"""

from __future__ import annotations

import os
import sys
import timeit
from datetime import UTC, datetime

from .kueue import job_body, load
from .services import bench_environment


def main(argv: list[str]) -> int:
    rounds = int(argv[0]) if argv else 2000
    os.environ.update(bench_environment(dict(os.environ)))
    import django

    django.setup()
    from django.contrib.auth.models import User

    from jobs.document.schema import JobIn, bound
    from jobs.models import Job
    from jobs.web.answers.jobs import JobBatchOut, JobOut, batch_out, jobs_out
    from kube.quantity import parse_quantity
    from queues.models import Queue, QuotaNode

    body = job_body(load("baseline").workloads[0])
    draft = bound(JobIn).check(body)
    node = QuotaNode(path=draft.queue, min={}, max={}, namespaces=["bench"])
    job = Job(
        **draft.columns,
        pk=1,
        queue=Queue(name=draft.queue.replace("/", "-"), node=node),
        owner=User(username="bench"),
        namespace="bench",
        state="queued",
        enqueued_at=datetime.now(UTC),
    )
    batch = {"count": 1000, "jobs": [job] * 1000}

    def mean_us(step, number: int = rounds) -> float:
        return timeit.timeit(step, number=number) / number * 1e6

    costs = {
        "bind JobIn's fields": mean_us(lambda: JobIn().fields, rounds // 10),
        "bind JobOut's fields": mean_us(lambda: JobOut().fields, rounds // 10),
        "read a job (bound JobIn)": mean_us(lambda: bound(JobIn).check(body)),
        "write a job (bound JobOut)": mean_us(lambda: bound(JobOut).to_representation(job)),
        "the same, as the API does": mean_us(lambda: jobs_out([job], {})),
        "write a batch's 1,000 entries": mean_us(lambda: JobBatchOut(batch).data, 20),
        "the same, as the batch endpoint does": mean_us(lambda: batch_out(batch["jobs"]), 20),
        "parse one quantity (4Gi)": mean_us(lambda: parse_quantity("memory", "4Gi")),
    }
    print(f"mean cost (µs), {rounds} rounds:")
    for label, micros in costs.items():
        print(f"  {label:<32} {micros:10.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
