"""Where the time of one submission goes: ``python -m bench.profile_submit [N] [--http]``.

Run inside ``python -m portal.embedded run --`` (or with DATABASE_URL and REDIS_URL set).
It loads the baseline scenario's tree into a fresh bench database, submits N jobs through
``job_submit`` one after another, and prints the mean cost of each step and cProfile's
heaviest functions, so an optimisation starts from a measurement.

With ``--http`` it goes through every middleware and the API instead, in-process with
Django's test client and a token: ``POST /api/v1/jobs/`` one job at a time and
``POST /api/v1/jobs/batch/`` 1,000 at a time, the best and the median of five rounds of
each, then cProfile of the batches (no server, no network: the cost of Caldera's own code
and its queries).
"""

from __future__ import annotations

import cProfile
import json
import pstats
import statistics
import sys
import time
from collections.abc import Callable

from .services import baseline_in_process


def main(argv: list[str]) -> int:
    http = "--http" in argv
    argv = [arg for arg in argv if arg != "--http"]
    count = int(argv[0]) if argv else 1000
    scenario, user, _queued = baseline_in_process()
    from django.db import connection

    from jobs.document.schema import job_parse
    from jobs.services import job_submit
    from queues import selectors

    from .kueue import job_body

    bodies = [job_body(w) for w in scenario.workloads[:count]]
    if http:
        return _through_http(user, bodies)

    def mean_ms(step: Callable[[dict], object]) -> float:
        start = time.perf_counter()
        for body in bodies:
            step(body)
        return (time.perf_counter() - start) / len(bodies) * 1000

    def round_trip(_body: dict) -> None:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")

    steps = {
        "database round trip (SELECT 1)": round_trip,
        "job_parse": job_parse,
        "queue and its path (two queries)": lambda b: selectors.queue_for_submit(b["queue"]),
        "job_submit, whole": lambda b: job_submit(user=user, draft=job_parse(b)),
    }
    print(f"mean cost per submission over {len(bodies)} jobs (ms):")
    for label, step in steps.items():
        print(f"  {label:<32} {mean_ms(step):7.3f}")

    profile = cProfile.Profile()
    profile.enable()
    for body in bodies:
        job_submit(user=user, draft=job_parse(body))
    profile.disable()
    pstats.Stats(profile).sort_stats("tottime").print_stats(12)
    return 0


ROUNDS = 5
BATCH = 1000


def _through_http(user, bodies: list[dict]) -> int:
    from django.test import Client

    from access.services import full_token

    token = full_token(user, name="profile")
    client = Client(HTTP_AUTHORIZATION=f"Bearer {token}", SERVER_NAME="127.0.0.1")

    def post(path: str, body: dict) -> None:
        answer = client.post(path, json.dumps(body), content_type="application/json")
        if answer.status_code >= 300:
            raise SystemExit(f"{path} answered {answer.status_code}: {answer.content[:300]!r}")

    def singles() -> None:
        for body in bodies:
            post("/api/v1/jobs/", body)

    def batches() -> None:
        for start in range(0, len(bodies), BATCH):
            post("/api/v1/jobs/batch/", {"jobs": bodies[start : start + BATCH]})

    for label, run, per in (
        ("POST /api/v1/jobs/, one job (ms)", singles, len(bodies)),
        (f"POST /api/v1/jobs/batch/, {BATCH} jobs (ms)", batches, -(-len(bodies) // BATCH)),
    ):
        run()  # warm: caches, prepared statements, the first connection
        costs = []
        for _ in range(ROUNDS):
            start = time.perf_counter()
            run()
            costs.append((time.perf_counter() - start) / per * 1000)
        print(f"{label:<40} best {min(costs):8.3f}  median {statistics.median(costs):8.3f}")
    profile = cProfile.Profile()
    profile.enable()
    batches()
    profile.disable()
    pstats.Stats(profile).sort_stats("tottime").print_stats(12)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
