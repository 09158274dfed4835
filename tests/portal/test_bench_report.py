"""A benchmark run set against the last record (no benchmark runs here)."""

import json

import pytest

from bench import record, report

STAMP = {
    "command": "make bench",
    "argv": "python -m bench --part throughput",
    "date": "2026-11-26 09:00 UTC",
    "machine": "2 cores",
}


def _row(clients: int, jobs: float, p99: float, errors: int = 0) -> dict:
    return {"clients": clients, "items_per_second": jobs, "requests_per_second": jobs,
            "p50_ms": p99 / 2, "p99_ms": p99, "errors": errors}  # fmt: skip


def _throughput(jobs: float = 300.0, p99: float = 40.0, errors: int = 0) -> dict:
    return {
        "single": [_row(8, jobs, p99, errors)],
        "batch": [_row(8, jobs * 30, p99 * 20)],
        "pgbench": {"clients": 8, "inserts_per_second": 12000.0},
    }


def _record(throughput: dict, date: str = "2026-11-25 14:33 UTC") -> dict:
    return {"throughput": {**STAMP, "date": date, "repeat": 1, "results": throughput}}


def _by_name(comparisons: list[record.Comparison]) -> dict[str, record.Comparison]:
    return {c.name: c for c in comparisons}


def test_each_figure_is_set_against_the_recorded_one_in_percent():
    last = _record(_throughput(jobs=320.0, p99=40.0))

    figures = _by_name(record.compare(last, {**STAMP, "throughput": _throughput(400.0, 30.0)}))

    jobs = figures["single, 8 clients: jobs accepted"]
    assert (jobs.recorded, jobs.value, jobs.recorded_on) == (320.0, 400.0, "2026-11-25 14:33 UTC")
    assert jobs.change == pytest.approx(25.0)
    assert figures["single, 8 clients: p99"].change == pytest.approx(-25.0)
    # Derived from the same results: the best batch rate over pgbench's inserts.
    assert figures["batch endpoint to pgbench, best"].value == pytest.approx(1.0)
    assert figures["batch endpoint to pgbench, best"].recorded == pytest.approx(0.8)


def test_repeats_give_the_median_and_their_spread():
    repeats = [{"throughput": _throughput(jobs, errors=errors)}
               for jobs, errors in ((270.0, 0), (300.0, 0), (390.0, 2))]  # fmt: skip
    run = {**STAMP, **record.median(repeats), "repeats": repeats}

    jobs = _by_name(record.compare({}, run))["single, 8 clients: jobs accepted"]

    assert jobs.values == (270.0, 300.0, 390.0)
    assert jobs.value == 300.0
    assert jobs.spread == pytest.approx(40.0)  # (390 - 270) / 300
    median_row = run["throughput"]["single"][0]
    assert median_row["items_per_second"] == 300.0 and median_row["clients"] == 8
    assert median_row["errors"] == 2  # an error in any repeat shows
    assert "270/s .. 390/s, 40.0%" in record.table([jobs])


def test_one_run_counts_a_loss_beyond_15_percent_in_the_direction_that_matters():
    last = _record(_throughput(jobs=300.0, p99=40.0))

    def figures(jobs: float, p99: float) -> dict[str, record.Comparison]:
        return _by_name(record.compare(last, {**STAMP, "throughput": _throughput(jobs, p99)}))

    slower = figures(jobs=240.0, p99=48.0)  # -20% jobs/s, +20% latency
    assert slower["single, 8 clients: jobs accepted"].loss
    assert slower["single, 8 clients: p99"].loss
    faster = figures(jobs=360.0, p99=32.0)  # +20% jobs/s, -20% latency
    assert not faster["single, 8 clients: jobs accepted"].loss
    assert not faster["single, 8 clients: p99"].loss
    within = figures(jobs=270.0, p99=44.0)  # -10% and +10%: a single run's noise
    assert not within["single, 8 clients: jobs accepted"].loss
    assert not within["single, 8 clients: p99"].loss


def test_with_repeats_a_loss_is_one_beyond_their_spread():
    last = _record(_throughput(jobs=300.0, p99=40.0))

    def jobs(*values: float) -> record.Comparison:
        repeats = [{"throughput": _throughput(value)} for value in values]
        run = {**STAMP, **record.median(repeats), "repeats": repeats}
        return _by_name(record.compare(last, run))["single, 8 clients: jobs accepted"]

    tight = jobs(268.0, 270.0, 272.0)  # -10%, spread 1.5%
    assert tight.loss and "LOSS" in record.table([tight])
    loose = jobs(240.0, 270.0, 300.0)  # -10%, spread 22%
    assert not loose.loss and "LOSS" not in record.table([loose])
    assert not jobs(328.0, 330.0, 332.0).loss  # +10%: a gain
    assert not jobs(290.0, 291.0, 292.0).loss  # -3%, spread 0.7%: within the floor


def test_a_figure_the_record_lacks_says_no_record():
    recorded = _throughput()
    recorded["single"] = []  # the record holds no single-job row
    run = {**STAMP, "throughput": _throughput(jobs=100.0, p99=400.0)}

    for last in (_record(recorded), {}):
        figures = _by_name(record.compare(last, run))
        jobs = figures["single, 8 clients: jobs accepted"]
        assert jobs.recorded is None and jobs.change is None and not jobs.loss
        line = next(line for line in record.table([jobs]).splitlines() if "jobs" in line)
        assert "no record" in line and "%" not in line
    assert _by_name(record.compare(_record(recorded), run))["batch, 8 clients: p99"].recorded


def test_a_trial_output_writes_its_own_record_and_leaves_the_record_alone(tmp_path):
    kept = _record(_throughput(jobs=320.0))
    kept["reads"] = {**STAMP, "repeat": 1, "results": {"queues": 1, "reads": []}}
    against = tmp_path / "benchmarks.json"
    against.write_text(json.dumps(kept))
    before = against.read_bytes()

    comparisons = report.write(
        tmp_path / "trial.md", {**STAMP, "throughput": _throughput(400.0)}, against=against
    )

    assert against.read_bytes() == before
    assert _by_name(comparisons)["single, 8 clients: jobs accepted"].recorded == 320.0
    trial = json.loads((tmp_path / "trial.json").read_text())
    assert trial["throughput"]["results"]["single"][0]["items_per_second"] == 400.0
    text = (tmp_path / "trial.md").read_text()
    assert "Against the previous record (`make bench` on 2026-11-25 14:33 UTC)" in text
    assert "| single, 8 clients: jobs accepted | 320/s | 400/s | +25.0% |" in text


def test_writing_the_default_output_replaces_the_parts_that_ran_in_the_record(tmp_path):
    against = tmp_path / "benchmarks.json"
    last = _record(_throughput(jobs=320.0))
    last["reads"] = {**STAMP, "repeat": 1, "results": {"queues": 7, "reads": []}}
    against.write_text(json.dumps(last))

    report.write(
        tmp_path / "benchmarks.md", {**STAMP, "throughput": _throughput(400.0)}, against=against
    )

    saved = json.loads(against.read_text())
    assert saved["throughput"]["date"] == STAMP["date"]
    assert saved["throughput"]["results"]["single"][0]["items_per_second"] == 400.0
    assert saved["reads"]["results"]["queues"] == 7  # reads did not run: its record stays


def test_the_record_in_docs_holds_every_sections_figures():
    last = record.read(report.RECORD)

    for section, (part, _) in record.FIGURES.items():
        assert record.figures(section, last[part]["results"]), section
        assert last[part]["date"], part


def test_every_part_bench_runs_has_a_place_in_the_record():
    from bench.__main__ import PARTS

    assert list(record.PARTS) == PARTS


def _cluster_size(live: int, stored: float, server: float | None) -> dict:
    row = {"live_jobs": live, "created": live, "create_jobs_per_second": stored,
           "sync_all_changed_seconds": 0.1, "sync_quiet_seconds": 0.05,
           "sync_quiet_watched_seconds": 0.02, "server_list_seconds": 0.01}  # fmt: skip
    if server:
        row |= {"server_creates_per_second": server, "of_server_rate": stored / server}
    return row


def test_objects_stored_are_set_against_the_server_s_own_rate_at_the_same_size():
    sizes = [_cluster_size(1000, 1200.0, 1500.0), _cluster_size(10000, 1000.0, 1250.0)]
    cluster = {"namespaces": 20, "concurrency": 8, "sizes": sizes}

    lines = report.render_cluster({"cluster": cluster})
    figures = {f.name: f.value for f in record.cluster_figures(cluster)}

    assert lines[2].startswith("| 1,000 | 1,200 | 0.80 |")
    assert lines[3].startswith("| 10,000 | 1,000 | 0.80 |")
    assert "1,500 and 1,250 bare creates/s" in lines[5]
    assert figures["10,000 live jobs: of the server's own rate"] == pytest.approx(0.8)


def test_a_record_with_one_server_rate_for_every_size_is_read_as_it_was():
    cluster = {"namespaces": 20, "concurrency": 8, "server_creates_per_second": 2000.0,
               "sizes": [_cluster_size(1000, 1200.0, None)]}  # fmt: skip

    lines = report.render_cluster({"cluster": cluster})
    figures = {f.name: f.value for f in record.cluster_figures(cluster)}

    assert lines[2].startswith("| 1,000 | 1,200 | 0.60 |")
    assert "takes 2,000 bare creates/s" in lines[4]
    assert figures["1,000 live jobs: of the server's own rate"] is None
