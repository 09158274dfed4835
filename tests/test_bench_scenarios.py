"""The benchmark's reading of Kueue's scenarios and its report (no benchmark runs here)."""

from bench import report
from bench.kueue import load
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


def test_the_large_scale_scenario_has_2000_queues_and_60000_jobs():
    scenario = load("large-scale")
    assert (len(scenario.queues), len(scenario.workloads)) == (2000, 60_000)


def test_a_scaled_down_run_keeps_every_set_but_fewer_of_each():
    assert len(load("baseline", scale=0.1).workloads) == 30 * (35 + 10 + 5)


def test_the_report_replaces_only_the_figures_between_its_markers(tmp_path):
    path = tmp_path / "benchmarks.md"
    path.write_text(f"# Benchmarks\n\nhand-written\n\n{report.START}\nold\n{report.END}\n\ntail\n")
    run = {
        "command": "make bench",
        "argv": "python -m bench",
        "date": "2026-11-23 12:00 UTC",
        "machine": "2 cores",
        "kueue": [
            {
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
            }
        ],
    }
    report.write(path, run)
    text = path.read_text()
    assert "hand-written" in text and text.endswith("tail\n") and "old" not in text
    assert "| baseline | service | 15,000 | 80.0 s | 66 s | 351 s |" in text
