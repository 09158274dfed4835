"""The benchmark's reading of Kueue's scenarios and its report (no benchmark runs here)."""

from bench import report
from bench.kueue import POOL_LABEL, load, pool_nodes
from jobs.cluster.simulated import parse_nodes
from queues.services import tree_parse


def test_the_baseline_has_kueues_shape_and_its_physical_bound_is_66_seconds():
    scenario = load("baseline")
    assert len(scenario.queues) == 30
    assert len(scenario.workloads) == 30 * (350 + 100 + 50)
    assert scenario.total_cpu == 600
    assert round(scenario.work_cpu_seconds) == 39_600
    assert round(scenario.physical_bound_seconds) == 66


def test_each_queue_receives_its_sets_at_their_intervals_starting_together():
    scenario = load("baseline")
    queue = scenario.queues[0].path
    large = [w for w in scenario.workloads if w.queue == queue and w.workload_class.name == "large"]
    assert [w.at for w in large[:3]] == [0.0, 1.2, 2.4]
    assert large[0].workload_class.cpu == 20 and large[0].workload_class.runtime_seconds == 1.0
    assert [w.at for w in scenario.workloads] == sorted(w.at for w in scenario.workloads)


def test_the_scenario_becomes_a_valid_tree_with_min_nominal_and_max_nominal_plus_borrowing():
    scenario = load("baseline")
    parsed = tree_parse(scenario.tree_document())
    nodes = {node.path: node for node in parsed.nodes}
    leaf = nodes[scenario.queues[0].path]
    assert (leaf.min["cpu"], leaf.max["cpu"]) == (20_000, 120_000)
    assert nodes["root/cohort-0"].min["cpu"] == nodes["root/cohort-0"].max["cpu"] == 120_000
    assert len(parsed.leaves) == 30


def test_with_pools_the_scenario_s_tree_is_valid_and_its_nodes_carry_the_pools_labels():
    scenario = load("baseline")
    parsed = tree_parse(scenario.tree_document(4))
    assert [pool.name for pool in parsed.node_pools] == ["p0", "p1", "p2", "p3"]
    nodes = {node.path: node for node in parsed.nodes}
    assert nodes["root"].min["cpu@p0"] == 150_000 and nodes["root"].max["cpu@p3"] == 600_000
    assert nodes["root/cohort-0"].min["cpu@p1"] == 30_000
    cluster = parse_nodes(pool_nodes(cpu=600, pools=4, pods=10))
    assert [(n.allocatable["cpu"], n.labels[POOL_LABEL]) for n in cluster] == [
        (600_000, f"p{k}") for k in range(4)
    ]
    assert all(pool.selects(node) == (i == k) for i, pool in enumerate(parsed.node_pools)
               for k, node in enumerate(cluster))  # fmt: skip


def test_the_large_scale_scenario_has_2000_queues_and_60000_jobs():
    scenario = load("large-scale")
    assert (len(scenario.queues), len(scenario.workloads)) == (2000, 60_000)


def test_a_scaled_down_run_keeps_every_set_but_fewer_of_each():
    assert len(load("baseline", scale=0.1).workloads) == 30 * (35 + 10 + 5)


KUEUE_RESULT = {
    "scenario": "baseline",
    "variant": "service",
    "jobs": 15000,
    "wall_seconds": 80.0,
    "physical_bound_seconds": 66.0,
    "mean_admission_seconds": {"small": 1.0, "medium": 2.0, "large": 3.0},
    "p99_admission_seconds": {},
    "queue_usage_percent": {"min": 50.0, "mean": 60.0, "max": 70.0},
    "preemptions": 5,
    "submit_lag_p99_seconds": 0.01,
    "reaction": {
        "rounds": 40,
        "finish": {"p50_ms": 90.0, "p99_ms": 400.0, "max_ms": 410.0},
        "cancel": {"p50_ms": 80.0, "p99_ms": 300.0, "max_ms": 310.0},
    },
}
STAMP = {
    "command": "make bench",
    "argv": "python -m bench",
    "date": "2026-11-23 12:00 UTC",
    "machine": "2 cores",
}


def test_the_report_replaces_only_the_figures_of_the_parts_that_ran(tmp_path):
    path = tmp_path / "benchmarks.md"
    path.write_text(
        f"# Benchmarks\n\nhand-written\n\n{report.start('kueue')}\nold\n{report.end('kueue')}\n"
        f"\nmiddle\n\n{report.start('reads')}\nkept\n{report.end('reads')}\n\ntail\n"
    )

    report.write(path, {**STAMP, "kueue": [KUEUE_RESULT]})

    text = path.read_text()
    assert "hand-written" in text and "middle" in text and "tail" in text
    assert "old" not in text and "kept" in text  # reads did not run: its figures stay
    assert "| baseline | service | 15,000 | 80.0 s | 66 s | 351 s |" in text
    # The probe that ran beside the replay fills its own section, added at the end.
    assert text.endswith(report.end("reaction-under-load") + "\n")
    assert "| running the baseline replay | a finish | 40 | 90.0 ms | 400.0 ms |" in text


def test_the_report_shows_throughput_beside_pgbench_and_reads_by_depth(tmp_path):
    path = tmp_path / "benchmarks.md"
    row = {"clients": 32, "items_per_second": 500.0, "requests_per_second": 500.0,
           "p50_ms": 60.0, "p99_ms": 90.0, "errors": 0}  # fmt: skip
    throughput = {
        "single": [row],
        "batch": [row | {"items_per_second": 10000.0, "requests_per_second": 10.0}],
        "pgbench": {"clients": 8, "inserts_per_second": 20000.0},
    }
    reads = {
        "queues": 1000,
        "reads": [
            {"read": "job detail", "pending": 1000, "p50_ms": 4.0, "p99_ms": 8.0},
            {"read": "job detail", "pending": 100000, "p50_ms": 5.0, "p99_ms": 9.0},
        ],
    }

    report.write(path, {**STAMP, "throughput": throughput, "reads": reads})

    text = path.read_text()
    assert "single-job endpoint 0.03, batch endpoint 0.50" in text
    assert "| job detail | 4.0 ms / 8.0 ms | 5.0 ms / 9.0 ms | 1.25 x |" in text


def test_the_report_shows_the_mixed_load_reads_and_submissions_apart(tmp_path):
    path = tmp_path / "benchmarks.md"
    path.write_text(f"# Benchmarks\n\n{report.start('mixed')}\nold\n{report.end('mixed')}\n")
    side = {"clients": 16, "requests_per_second": 100.0, "items_per_second": 100.0,
            "p50_ms": 120.0, "p99_ms": 300.0, "max_ms": 310.0, "errors": 0}  # fmt: skip
    mixed = {
        "clients": 32,
        "seconds": 5,
        "reads": side,
        "submissions": side | {"requests_per_second": 80.0, "p99_ms": 400.0},
        "requests_per_second": 180.0,
        "jobs_per_second": 80.0,
    }

    report.write(path, {**STAMP, "mixed": mixed})

    text = path.read_text()
    assert "old" not in text
    reads = "| queue reads, `GET /api/v1/queues/<queue>/` | 16 | 100.0 | 120.0 ms | 300.0 ms |"
    assert reads in text
    assert "| submissions, `POST /api/v1/jobs/` | 16 | 80.0 | 120.0 ms | 400.0 ms |" in text
    assert "Together: 32 clients, 180.0 requests/s, of which 80.0 jobs accepted/s" in text


def test_the_report_shows_the_cluster_backend_by_live_jobs(tmp_path):
    path = tmp_path / "benchmarks.md"
    size = {"live_jobs": 10000, "created": 9000, "create_jobs_per_second": 1200.0,
            "sync_all_changed_seconds": 1.5, "sync_quiet_seconds": 0.65,
            "server_list_seconds": 0.18, "sync_quiet_watched_seconds": 0.2}  # fmt: skip
    held = {"rss_mb": 900.0, "threads": 4, "sockets": 14, "watches": 2}
    scale = {"namespaces": 2000, "live_jobs": 60000, "rss_before_mb": 200.0, "created": 60000,
             "create_jobs_per_second": 700.0, "sync_all_changed_seconds": 15.0,
             "sync_quiet_seconds": 9.5, "listed": held | {"watches": 0},
             "sync_quiet_watched_cluster_seconds": 1.1, "in_step_cluster_seconds": 14.0,
             "watched_cluster": held, "sync_quiet_watched_namespace_seconds": 0.9,
             "in_step_namespace_seconds": 24.0,
             "watched_namespace": held | {"watches": 4000, "threads": 4002}}  # fmt: skip
    cluster = {"namespaces": 20, "concurrency": 8, "sizes": [size],
               "server_creates_per_second": 1500.0, "scale": scale}  # fmt: skip

    report.write(path, {**STAMP, "cluster": cluster})

    text = path.read_text()
    assert "| 10,000 | 1,200 | 0.80 | 1,500.0 ms | 650.0 ms | 180.0 ms | 200.0 ms |" in text
    assert "alone takes 1,500 bare creates/s of the same manifests" in text
    assert "At 60,000 live jobs in 2,000 namespaces" in text
    assert "| a watch per kind (KUBERNETES_WATCH_SCOPE=cluster) | 1,100.0 ms | 2 | 4 |" in text
    assert "| a watch per kind and namespace (the default) | 900.0 ms | 4,000 | 4,002 |" in text
