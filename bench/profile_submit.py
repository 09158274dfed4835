"""Where the time of one submission goes: ``python -m bench.profile_submit [N]``.

Run inside ``python -m portal.embedded run --`` (or with DATABASE_URL and REDIS_URL set).
It loads the baseline scenario's tree into a fresh bench database, submits N jobs through
``job_submit`` one after another, and prints the mean cost of each step and cProfile's
heaviest functions, so an optimisation starts from a measurement.
"""

from __future__ import annotations

import cProfile
import os
import pstats
import sys
import time
from collections.abc import Callable

from .services import bench_environment, flush_redis, recreate_database


def main(argv: list[str]) -> int:
    count = int(argv[0]) if argv else 1000
    env = bench_environment(dict(os.environ))
    os.environ.update(env)
    recreate_database(env)
    flush_redis(env)
    import django

    django.setup()
    from django.db import connection

    from jobs.document.schema import job_parse
    from jobs.services import job_submit
    from queues import selectors

    from .kueue import job_body, load
    from .replay import prepare

    scenario = load("baseline")
    user = prepare(scenario)
    bodies = [job_body(w) for w in scenario.workloads[:count]]

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


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
