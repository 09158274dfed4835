"""``make bench``: run the benchmarks and write their figures into docs/benchmarks.md.

    python -m bench [--full] [--scenario baseline] [--variant service --variant api]

Runs inside ``python -m portal.embedded run --`` (as ``make bench`` does), so it has a
PostgreSQL and a Redis; each run gets a fresh database of its own (see bench/services.py).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
from datetime import UTC, datetime
from pathlib import Path

from . import report
from .services import REPO, bench_environment, flush_redis, recreate_database, web, worker

RESULTS = REPO / ".caldera" / "bench-results.json"
PORT = 8765


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("--full", action="store_true", help="every scenario at full size")
    parser.add_argument("--scenario", action="append", choices=["baseline", "large-scale"])
    parser.add_argument("--variant", action="append", choices=["service", "api"])
    parser.add_argument(
        "--scale", type=float, default=1.0, help="share of each workload set (quick trials)"
    )
    parser.add_argument("--output", type=Path, default=REPO / "docs" / "benchmarks.md")
    args = parser.parse_args(argv)
    scenarios = args.scenario or (["baseline", "large-scale"] if args.full else ["baseline"])
    variants = args.variant or ["service", "api"]

    env = bench_environment(dict(os.environ))
    os.environ.update(env)
    import django

    django.setup()
    from django.db import connections

    from .kueue import load
    from .replay import prepare, replay

    results = []
    for name in scenarios:
        scenario = load(name, scale=args.scale)
        run_env = {**env, "SIMULATED_CLUSTER_NODES": f"1xcpu={scenario.total_cpu}"}
        for variant in variants:
            print(
                f"bench: {name} through the {variant}: {len(scenario.workloads)} jobs", flush=True
            )
            connections.close_all()
            recreate_database(run_env)
            flush_redis(run_env)
            user = prepare(scenario)
            with worker(run_env):
                if variant == "api":
                    with web(run_env, port=PORT) as url:
                        result = replay(scenario, variant=variant, user=user, base_url=url)
                else:
                    result = replay(scenario, variant=variant, user=user)
            print(f"bench: {json.dumps(result.as_dict())}", flush=True)
            results.append(result.as_dict())

    command = "make bench" + (" FULL=1" if args.full else "")
    run = {
        "command": command,
        "argv": shlex.join(
            [os.path.relpath(sys.executable, REPO), "-m", "bench", *(argv or sys.argv[1:])]
        ),
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": report.machine(),
        "kueue": results,
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(run, indent=2))
    report.write(args.output, run)
    print(f"bench: figures written to {args.output}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
