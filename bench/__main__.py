"""``make bench``: run the benchmarks and write their figures into docs/benchmarks.md.

    python -m bench [--full] [--part kueue --part throughput --part reads --part reaction
                     --part mixed --part cluster --part estimate --part broker
                     --part pages --part accounting --part retention --part fair-share
                     --part node-pools] [--pools N]
                    [--scenario baseline] [--variant service --variant api] [--seconds 5]
                    [--repeat 3]

Runs inside ``python -m portal.embedded run --`` (as ``make bench`` does), so it has a
PostgreSQL and a Redis; each part gets a fresh database of its own (see bench/services.py).
The parts:

- kueue: Kueue's scheduler scenarios replayed in real time (bench/replay.py), through
  the submit service (with the reaction probe running beside it) and through the API,
  one job a request for the baseline, in batches for the large-scale scenario;
- throughput: the submit endpoints under 1, 8 and 32 clients, and pgbench (throughput.py);
- reads: positions and queue pages at 1k, 10k and 100k pending (reads.py);
- reaction: from a finish or a cancel to the next dequeue, workers idle (reaction.py);
- mixed: 32 clients reading queues and submitting jobs at once, a worker admitting
  (mixed.py);
- cluster: the Kubernetes backend against the emulated API server: objects stored per
  second, and a sync pass at 1k and 10k live jobs (cluster.py);
- estimate: the estimated start of pending jobs against their actual start, over the
  baseline scenario replayed through the service (estimates.py);
- broker: submit latency and the probes with Redis answering and with it stopped by
  SIGSTOP (broker.py);
- pages: the bytes and requests a minute of a queue page, the dashboard and a job page left
  open in Chromium, idle, at 2,000 pending and busy (pages.py);
- accounting: GET /api/v1/accounting/ over a year of daily summary rows (365 days x 60
  leaves x 30 people x 2 runtimes), by department and month, and finer (accounting.py);
- retention: the jobs list and a job page with 1,000,000 finished jobs present, before and
  after retention archives them, and the archive's speed (retention.py);
- fair-share: beat's decayed usage and the admission cycle's read of it over 100,000 and
  1,000,000 spans of held quota (fair_share.py);
- node-pools: the admission rule at 2,000 queues with and without 4 node pools, in this
  process (node_pools.py). ``--pools N`` runs the kueue part's replay on a tree of N pools.

Runs of the same code on a 2-core machine differ by up to 15%, so one figure says little.
``--repeat N`` runs the chosen parts N times: the tables show each figure's median. Every
run ends by setting its figures against the last record, docs/benchmarks.json (the raw
results behind the figures in docs/benchmarks.md, bench/record.py): the record, this run
(with the min .. max of the repeats), the change in percent, and LOSS where the change goes
the wrong way by more than the repeats' spread, or by more than 15% after one run. The same
comparison goes under each part's figures in the markdown. ``--output`` elsewhere writes
its own record beside it (same stem, .json) and leaves docs/benchmarks.json as it is.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile
import threading
from datetime import UTC, datetime
from pathlib import Path

from . import record, report
from .replay import VARIANTS
from .services import (
    NODE_PODS,
    REPO,
    bench_environment,
    flush_redis,
    one_node,
    recreate_database,
    web,
    worker,
)

RESULTS = REPO / ".caldera" / "bench-results.json"
PORT = 8765
PARTS = [
    "kueue", "throughput", "reads", "reaction", "mixed", "cluster", "estimate", "broker", "pages",
    "accounting", "retention", "fair-share", "node-pools",
]  # fmt: skip
IDLE_REACTION_ROUNDS = 30
# 60,000 jobs due within 0.4 s cannot be submitted one request at a time on 2 cores: the
# large-scale scenario is submitted as a CI pipeline submits a sweep, in batches.
DEFAULT_VARIANTS = {"baseline": ["service", "api"], "large-scale": ["service-batch", "api-batch"]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("--full", action="store_true", help="every scenario at full size")
    parser.add_argument("--part", action="append", choices=PARTS, help="default: every part")
    parser.add_argument("--scenario", action="append", choices=["baseline", "large-scale"])
    parser.add_argument(
        "--variant",
        action="append",
        choices=VARIANTS,
        help="default: service and api for the baseline, the batch variants for large-scale",
    )
    parser.add_argument(
        "--no-probe", action="store_true", help="no reaction probe beside the baseline replay"
    )
    parser.add_argument(
        "--pools",
        type=int,
        default=0,
        metavar="N",
        help="kueue: the tree with N node pools, one node each (docs/benchmarks.md)",
    )
    parser.add_argument(
        "--seconds", type=float, help="each load generator run (default 5, 10 with --full)"
    )
    parser.add_argument(
        "--scale", type=float, default=1.0, help="share of each workload set (quick trials)"
    )
    parser.add_argument(
        "--repeat",
        type=int,
        default=1,
        metavar="N",
        help="run the parts N times; figures are the medians",
    )
    parser.add_argument("--output", type=Path, default=report.OUTPUT)
    args = parser.parse_args(argv)
    if args.repeat < 1:
        parser.error("--repeat takes a count of 1 or more")
    parts = args.part or PARTS
    seconds = args.seconds or (10 if args.full else 5)

    env = bench_environment(dict(os.environ))
    os.environ.update(env)
    import django

    django.setup()

    run = {
        "command": "make bench" + (" FULL=1" if args.full else ""),
        "argv": shlex.join(
            [os.path.relpath(sys.executable, REPO), "-m", "bench", *(argv or sys.argv[1:])]
        ),
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": report.machine(),
        "repeat": args.repeat,
    }
    repeats = []
    for turn in range(1, args.repeat + 1):
        if args.repeat > 1:
            print(f"bench: run {turn} of {args.repeat}", flush=True)
        repeats.append(run_parts(env, parts, args, seconds))
    run |= record.median(repeats)
    if args.repeat > 1:
        run["repeats"] = repeats

    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(run, indent=2))
    comparisons = report.write(args.output, run)
    print(f"bench: figures written to {args.output}", flush=True)
    print(
        f"bench: against the last record ({os.path.relpath(report.RECORD, REPO)}); LOSS: worse"
        + (
            " by more than the spread of the repeats"
            if args.repeat > 1
            else f" by more than {record.NOISE_PERCENT:.0f}%"
        ),
        flush=True,
    )
    print(record.table(comparisons), flush=True)
    return 0


def run_parts(env: dict, parts: list[str], args: argparse.Namespace, seconds: float) -> dict:
    """Each chosen part once: its results by their key in a run."""
    results = {}
    if "kueue" in parts:
        scenarios = args.scenario or (["baseline", "large-scale"] if args.full else ["baseline"])
        results["kueue"] = [
            result
            for name in scenarios
            for result in kueue_part(
                env,
                name,
                args.variant or DEFAULT_VARIANTS[name],
                args.scale,
                not args.no_probe,
                args.pools,
            )
        ]
    if "throughput" in parts:
        results["throughput"] = throughput_part(env, seconds)
    if "reads" in parts:
        results["reads"] = reads_part(env, seconds / 2)
    if "reaction" in parts:
        results["reaction_idle"] = reaction_part(env)
    if "mixed" in parts:
        results["mixed"] = mixed_part(env, seconds)
    if "cluster" in parts:
        results["cluster"] = cluster_part(env)
    if "estimate" in parts:
        results["estimate"] = estimate_part(env, args.scale)
    if "broker" in parts:
        results["broker"] = broker_part(env, seconds)
    if "pages" in parts:
        results["pages"] = pages_part(env)
    if "accounting" in parts:
        results["accounting"] = accounting_part(env)
    if "retention" in parts:
        results["retention"] = in_process_part(env, "retention", args.scale)
    if "fair-share" in parts:
        results["fair_share"] = in_process_part(env, "fair-share", args.scale)
    if "node-pools" in parts:
        results["node_pools"] = node_pools_part()
    return results


def fresh(env: dict) -> None:
    from django.db import connections

    connections.close_all()
    recreate_database(env)
    flush_redis(env)


def kueue_part(
    env: dict, name: str, variants: list[str], scale: float, probe: bool = True, pools: int = 0
) -> list[dict]:
    from django.conf import settings

    from jobs.cluster import get_backend

    from .kueue import load, pool_nodes
    from .reaction import with_probe
    from .replay import prepare, replay

    scenario = load(name, scale=scale)
    results = []
    for variant in variants:
        print(f"bench: {name} through the {variant}: {len(scenario.workloads)} jobs", flush=True)
        fresh(env)
        # Through the service, the reaction probe runs beside the replay on a queue of its
        # own (1 cpu more in the cluster), so one run gives both figures.
        probing = probe and name == "baseline" and variant == "service" and not pools
        cpu = scenario.total_cpu + (1 if probing else 0)
        nodes = pool_nodes(cpu=cpu, pools=pools, pods=NODE_PODS) if pools else one_node(cpu=cpu)
        run_env = {**env, "SIMULATED_CLUSTER_NODES": nodes}
        # This process submits too: it checks each job against the same nodes.
        settings.SIMULATED_CLUSTER_NODES = nodes
        get_backend.cache_clear()
        document = with_probe(scenario.tree_document()) if probing else None
        user = prepare(scenario, document or scenario.tree_document(pools))
        with worker(run_env):
            if variant.startswith("api"):
                with web(run_env, port=PORT) as url:
                    result = replay(scenario, variant=variant, user=user, base_url=url).as_dict()
            elif probing:
                stop, reaction = threading.Event(), {}
                prober = threading.Thread(
                    target=_probe_into, args=(reaction, user, stop), daemon=True
                )
                prober.start()
                result = replay(scenario, variant=variant, user=user).as_dict()
                stop.set()
                prober.join(timeout=120)
                result["reaction"] = reaction
            else:
                result = replay(scenario, variant=variant, user=user).as_dict()
        if pools:
            result["variant"] = f"{variant}, {pools} node pools"
        print(f"bench: {json.dumps(result)}", flush=True)
        results.append(result)
    return results


def _probe_into(reaction: dict, user, stop: threading.Event) -> None:
    from .reaction import probe

    reaction.update(probe(user, until=stop))


def throughput_part(env: dict, seconds: float) -> dict:
    from .kueue import load
    from .replay import prepare
    from .throughput import measure

    print("bench: submission throughput", flush=True)
    scenario = load("baseline")
    fresh(env)
    user = prepare(scenario)
    # No Celery worker: the figures are the web tier's and PostgreSQL's alone.
    with web(env, port=PORT) as url:
        return measure(scenario, user=user, base_url=url, env=env, seconds=seconds)


def reads_part(env: dict, seconds: float) -> dict:
    from .reads import measure

    print("bench: reads at depth", flush=True)
    fresh(env)
    with web(env, port=PORT) as url:
        return measure(base_url=url, env=env, seconds=seconds)


def cluster_part(env: dict) -> dict:
    from .cluster import measure, measure_scale

    print("bench: the Kubernetes backend at 1k and 10k live jobs", flush=True)
    fresh(env)
    results = measure()
    print("bench: the Kubernetes backend at 60k live jobs in 2,000 namespaces", flush=True)
    fresh(env)
    results["scale"] = measure_scale()
    return results


def mixed_part(env: dict, seconds: float) -> dict:
    from .kueue import load
    from .mixed import measure
    from .replay import prepare

    print("bench: mixed load, queue reads and submissions together", flush=True)
    scenario = load("baseline")
    fresh(env)
    user = prepare(scenario)
    # A cluster as large as the scenario's quota, as in its replay: the worker admits and
    # runs what arrives while the clients read and submit.
    run_env = {**env, "SIMULATED_CLUSTER_NODES": one_node(cpu=scenario.total_cpu)}
    with worker(run_env), web(run_env, port=PORT) as url:
        result = measure(scenario, user=user, base_url=url, env=run_env, seconds=seconds)
    print(f"bench: mixed {json.dumps(result)}", flush=True)
    return result


def broker_part(env: dict, seconds: float) -> dict:
    from .broker import measure
    from .kueue import load
    from .replay import prepare

    print("bench: a hung broker, submissions and probes", flush=True)
    scenario = load("baseline")
    fresh(env)
    user = prepare(scenario)
    result = measure(scenario, user=user, env=env, port=PORT, seconds=seconds)
    print(f"bench: broker {json.dumps(result)}", flush=True)
    return result


def accounting_part(env: dict) -> dict:
    from .accounting import measure

    print("bench: the accounting's answer over a year of summary rows", flush=True)
    fresh(env)
    result = measure()
    print(f"bench: {json.dumps(result)}", flush=True)
    return result


def node_pools_part() -> dict:
    from . import node_pools

    print("bench: the admission rule at 2,000 queues, with and without node pools", flush=True)
    result = node_pools.measure()
    print(f"bench: node-pools {json.dumps(result)}", flush=True)
    return result


def in_process_part(env: dict, part: str, scale: float) -> dict:
    """A part measured in this process on a fresh database: retention or fair-share."""
    from . import fair_share, retention

    fresh(env)
    if part == "retention":
        finished = int(retention.FINISHED * scale)
        print(f"bench: {finished:,} finished jobs, before and after retention", flush=True)
        result = retention.measure(finished=finished)
    else:
        print("bench: fair sharing over spans of held quota", flush=True)
        result = fair_share.measure(scale=scale)
    print(f"bench: {part} {json.dumps(result)}", flush=True)
    return result


def pages_part(env: dict) -> dict:
    from .pages import DEMO_NODES, measure

    print("bench: open pages, bytes and requests a minute (a few minutes, in Chromium)", flush=True)
    fresh(env)
    # As the demo runs, with DEBUG off: gunicorn with the image's configuration, the worker
    # and beat on the demo's simulated cluster; the static files collected (and compressed)
    # as in the image, into a folder of the run's own.
    with tempfile.TemporaryDirectory(prefix="bench-static-") as static:
        run_env = {
            **env,
            "DEBUG": "0",
            "SIMULATED_CLUSTER_NODES": DEMO_NODES,
            "STATIC_ROOT": static,
        }
        subprocess.run(
            [sys.executable, "manage.py", "collectstatic", "--noinput", "--verbosity", "0"],
            cwd=REPO,
            env=run_env,
            check=True,
        )
        with worker(run_env), web(run_env, port=PORT, workers=2, threads=4, config=True) as url:
            result = measure(base_url=url)
    print(f"bench: pages {json.dumps(result)}", flush=True)
    return result


def estimate_part(env: dict, scale: float) -> dict:
    from django.conf import settings

    from .estimates import SAMPLES, call_times, errors, sample
    from .kueue import load
    from .replay import prepare, replay

    scenario = load("baseline", scale=scale)
    print(f"bench: estimates over the baseline replay: {len(scenario.workloads)} jobs", flush=True)
    fresh(env)
    user = prepare(scenario)
    # The sampler makes the estimates at beat's pace itself, to time each refresh.
    run_env = {
        **env,
        "SIMULATED_CLUSTER_NODES": one_node(cpu=scenario.total_cpu),
        "ESTIMATE_SECONDS": "86400",
    }
    stop, samples, took = threading.Event(), [], []
    paths = [queue.path for queue in scenario.queues]
    every = max(scenario.physical_bound_seconds / SAMPLES, 0.5)
    sampler = threading.Thread(
        target=lambda: samples.extend(sample(paths, every=every, until=stop, took=took)),
        daemon=True,
    )
    with worker(run_env):
        sampler.start()
        replayed = replay(scenario, variant="service", user=user)
        stop.set()
        sampler.join(timeout=120)
    result = {
        "scenario": scenario.name,
        "jobs": replayed.jobs,
        "classes": errors(samples),
        "calls": call_times(took),
        "depth": settings.ESTIMATE_DEPTH,
        "every": settings.ESTIMATE_SECONDS,
    }
    print(f"bench: estimate {json.dumps(result)}", flush=True)
    return result


def reaction_part(env: dict) -> dict:
    from django.contrib.auth import get_user_model

    from queues.services import tree_apply

    from .kueue import quota_tree
    from .reaction import probe, with_probe

    print("bench: reaction time, workers idle", flush=True)
    fresh(env)
    tree_apply(document=with_probe(quota_tree(min_cpu=0, max_cpu=0, children=[])))
    user = get_user_model().objects.create_superuser("probe", "probe@example.com", "probe-pw")
    with worker({**env, "SIMULATED_CLUSTER_NODES": "1xcpu=1"}):
        result = probe(user, rounds=IDLE_REACTION_ROUNDS)
    print(f"bench: reaction {json.dumps(result)}", flush=True)
    return result


if __name__ == "__main__":
    sys.exit(main())
