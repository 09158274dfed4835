"""Write the figures of a benchmark run into docs/benchmarks.md.

Each part's figures sit between markers of their own, with the command and date of the run
that produced them and how they compare with the record before it; the analysis around
them is written by hand. A run replaces the figures of the parts it ran and leaves the
others as they were, in the markdown and in its record (bench/record.py).
"""

from __future__ import annotations

import os
import platform
from pathlib import Path

from . import record
from .kueue import KUEUE_BASELINE, KUEUE_LARGE_SCALE_LIMIT_SECONDS
from .services import REPO

OUTPUT = REPO / "docs" / "benchmarks.md"
# The record every run is compared with: the raw results behind OUTPUT's figures.
RECORD = OUTPUT.with_suffix(".json")
SECTIONS = (
    "kueue", "throughput", "reads", "reaction", "mixed", "cluster", "estimate", "broker", "pages",
    "accounting", "retention", "fair-share", "node-pools",
)  # fmt: skip


def start(section: str) -> str:
    return f"<!-- figures:{section}:start (written by `make bench`) -->"


def end(section: str) -> str:
    return f"<!-- figures:{section}:end -->"


def machine() -> str:
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return f"{os.cpu_count()} cores, {memory:.0f} GiB, {platform.system()} {platform.machine()}"


def _stamp(run: dict) -> list[str]:
    repeat = run.get("repeat", 1)
    return [
        f"Last run: `{run['command']}` on {run['date']}, {run['machine']}"
        f" (command line: `{run['argv']}`)."
        + (f" Each figure is the median of {repeat} runs." if repeat > 1 else ""),
        "",
    ]


def _seconds(value: float) -> str:
    return f"{value:.0f} s" if abs(value) >= 10 else f"{value:.1f} s"


def _ms(value) -> str:
    return "-" if value is None else f"{value:,.1f} ms"


def render_kueue(run: dict) -> list[str]:
    lines = [
        "| scenario | submitted through | jobs | wall | bound | Kueue | mean time to admission"
        " (small / medium / large) | Kueue's means | queue usage of nominal (min / mean) |"
        " preemptions | submit lag p99 |",
        "| --- | --- | ---: | ---: | ---: | ---: | --- | --- | --- | ---: | ---: |",
    ]
    for result in run["kueue"]:
        means = result["mean_admission_seconds"]
        usage = result["queue_usage_percent"]
        baseline = result["scenario"] == "baseline"
        kueue_wall = (
            f"{KUEUE_BASELINE['wall_seconds']:.0f} s"
            if baseline
            else f"limit {KUEUE_LARGE_SCALE_LIMIT_SECONDS:.0f} s"
        )
        kueue_means = (
            " / ".join(
                f"{KUEUE_BASELINE['mean_admission_seconds'][c]:.1f} s"
                for c in ("small", "medium", "large")
            )
            if baseline
            else "-"
        )
        lines.append(
            f"| {result['scenario']} | {result['variant']} | {result['jobs']:,} "
            f"| {result['wall_seconds']:.1f} s | {_seconds(result['physical_bound_seconds'])} "
            f"| {kueue_wall} "
            f"| {' / '.join(f'{means.get(c, 0):.2f} s' for c in ('small', 'medium', 'large'))} "
            f"| {kueue_means} | {usage['min']:.0f}% / {usage['mean']:.0f}% "
            f"| {result['preemptions']:,} | {result['submit_lag_p99_seconds']:.3f} s |"
        )
    notes = [note for result in run["kueue"] for note in result.get("notes", [])]
    if notes:
        lines += ["", *[f"- {note}" for note in notes]]
    return lines


def render_throughput(run: dict) -> list[str]:
    figures = run["throughput"]
    lines = [
        "| endpoint | clients | jobs accepted / s | requests / s | p50 | p99 | errors |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for endpoint, label in (
        ("single", "`POST /api/v1/jobs/`"),
        ("batch", "`POST /api/v1/jobs/batch/` (1,000 jobs)"),
    ):
        for row in figures[endpoint]:
            lines.append(
                f"| {label} | {row['clients']} | {row['items_per_second']:,.0f} "
                f"| {row['requests_per_second']:,.1f} | {_ms(row['p50_ms'])} "
                f"| {_ms(row['p99_ms'])} | {row['errors']} |"
            )
    pgbench = figures["pgbench"]
    lines.append("")
    if "inserts_per_second" in pgbench:
        best = max(row["items_per_second"] for row in figures["batch"])
        single = max(row["items_per_second"] for row in figures["single"])
        rate = pgbench["inserts_per_second"]
        lines.append(
            f"pgbench, {pgbench['clients']} clients, one single-row INSERT per transaction on "
            f"the same server: {rate:,.0f} inserts/s. Ratio to it: single-job endpoint "
            f"{single / rate:.2f}, batch endpoint {best / rate:.2f} (best of the client counts)."
        )
    else:
        lines.append(f"pgbench: {pgbench['error']}")
    return lines


def render_reads(run: dict) -> list[str]:
    figures = run["reads"]
    by_read: dict[str, dict[int, dict]] = {}
    for row in figures["reads"]:
        by_read.setdefault(row["read"], {})[row["pending"]] = row
    depths = sorted({row["pending"] for row in figures["reads"]})
    header = " | ".join(f"{d:,} pending (p50 / p99)" for d in depths)
    lines = [
        f"{figures['queues']:,} queues; every depth is the pending jobs of one queue.",
        "",
        f"| read | {header} | p50 at the deepest / at the shallowest |",
        "| --- |" + " ---: |" * (len(depths) + 1),
    ]
    for read, rows in by_read.items():
        cells = " | ".join(
            f"{_ms(rows[d]['p50_ms'])} / {_ms(rows[d]['p99_ms'])}" for d in depths if d in rows
        )
        growth = rows[depths[-1]]["p50_ms"] / rows[depths[0]]["p50_ms"]
        lines.append(f"| {read} | {cells} | {growth:.2f} x |")
    return lines


def render_mixed(run: dict) -> list[str]:
    figures = run["mixed"]
    lines = [
        "| requests | clients | requests / s | p50 | p99 | max | errors |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for kind, label in (
        ("reads", "queue reads, `GET /api/v1/queues/<queue>/`"),
        ("submissions", "submissions, `POST /api/v1/jobs/`"),
    ):
        row = figures[kind]
        lines.append(
            f"| {label} | {row['clients']} | {row['requests_per_second']:,.1f} "
            f"| {_ms(row['p50_ms'])} | {_ms(row['p99_ms'])} | {_ms(row['max_ms'])} "
            f"| {row['errors']} |"
        )
    lines += [
        "",
        f"Together: {figures['clients']} clients, {figures['requests_per_second']:,.1f} "
        f"requests/s, of which {figures['jobs_per_second']:,.1f} jobs accepted/s, for "
        f"{figures['seconds']:g} s.",
    ]
    return lines


def render_cluster(run: dict) -> list[str]:
    figures = run["cluster"]
    lines = [
        "| live jobs | objects stored / s | of the server's own rate | sync, every job changed "
        "| sync, nothing changed, listed | the server's own listing "
        "| sync, nothing changed, watched |",
        "| ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    # Since issue 41: the server's own rate at each size; before, one rate for every size.
    bares = [
        row.get("server_creates_per_second") or figures["server_creates_per_second"]
        for row in figures["sizes"]
    ]
    for row, bare in zip(figures["sizes"], bares, strict=True):
        ratio = row.get("of_server_rate") or row["create_jobs_per_second"] / bare
        lines.append(
            f"| {row['live_jobs']:,} | {row['create_jobs_per_second']:,.0f} "
            f"| {ratio:.2f} "
            f"| {_ms(row['sync_all_changed_seconds'] * 1000)} "
            f"| {_ms(row['sync_quiet_seconds'] * 1000)} "
            f"| {_ms(row['server_list_seconds'] * 1000)} "
            f"| {_ms(row['sync_quiet_watched_seconds'] * 1000)} |"
        )
    lines += [
        "",
        f"RayJobs in {figures['namespaces']} namespaces, {figures['concurrency']} calls in "
        "flight; objects stored per second counts the jobs added to reach each size. The "
        "API server (bench/apiserver.py) alone takes "
        + " and ".join(f"{bare:,.0f}" for bare in dict.fromkeys(bares))
        + " bare creates/s of the same manifests at these sizes, from an 8-thread loop "
        "over kept-alive connections right after Caldera's creates.",
    ]
    scale = figures.get("scale")
    if scale:
        lines += ["", *render_cluster_scale(scale)]
    return lines


def _of_server(row: dict) -> str:
    """The objects stored against the server's own bare creates, where measured."""
    bare, ratio = row.get("server_creates_per_second"), row.get("of_server_rate")
    if not bare or not ratio:
        return ""
    return f", {ratio:.2f} of the server's own {bare:,.0f} creates/s"


def render_cluster_scale(row: dict) -> list[str]:
    """The sync at a platform's scale: listed, watched per namespace, watched per kind."""
    lines = [
        f"At {row['live_jobs']:,} live jobs in {row['namespaces']:,} namespaces (objects "
        f"stored: {row['create_jobs_per_second']:,.0f} jobs/s{_of_server(row)}; the sync "
        f"where every job changed: {_ms(row['sync_all_changed_seconds'] * 1000)}):",
        "",
        "| quiet sync | time | watches open | threads | sockets | memory (RSS) | in step after |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    ways = (
        ("listed (KUBERNETES_WATCH=0)", "sync_quiet_seconds", "listed", None),
        ("a watch per kind (KUBERNETES_WATCH_SCOPE=cluster)",
         "sync_quiet_watched_cluster_seconds", "watched_cluster", "in_step_cluster_seconds"),
        ("a watch per kind and namespace (the default)", "sync_quiet_watched_namespace_seconds",
         "watched_namespace", "in_step_namespace_seconds"),
    )  # fmt: skip
    for label, seconds, held, in_step in ways:
        process = row[held]
        after = _ms(row[in_step] * 1000) if in_step else "-"
        lines.append(
            f"| {label} | {_ms(row[seconds] * 1000)} | {process['watches']:,} "
            f"| {process['threads']:,} | {process['sockets']:,} "
            f"| {process['rss_mb']:,.0f} MiB | {after} |"
        )
    lines += [
        "",
        f"The process started at {row['rss_before_mb']:,.0f} MiB. Sockets count every one "
        "the process holds: to the API server, PostgreSQL and Redis.",
    ]
    return lines


def render_estimate(run: dict) -> list[str]:
    figures = run["estimate"]
    lines = [
        "| class | estimates | without one | mean absolute error | p90 absolute error "
        "| mean error (below 0: early) | mean actual wait after the estimate |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for group, row in figures["classes"].items():
        cells = [
            _seconds(row[key]) if row.get(key) is not None else "-"
            for key in ("mae_seconds", "p90_seconds", "bias_seconds", "mean_wait_seconds")
        ]
        lines.append(f"| {group} | {row['estimates']} | {row['without']} | {' | '.join(cells)} |")
    lines += [
        "",
        f"The {figures['scenario']} scenario ({figures['jobs']:,} jobs) replayed through the "
        "service; the error is between the estimate a job page showed and the job's dequeue.",
    ]
    calls = figures.get("calls")
    if calls and calls["calls"]:
        lines.append(
            f"Each of the {calls['calls']} refreshes (the first {figures.get('depth', 200)} "
            "pending jobs of every queue, one replay of the rule, every "
            f"{figures.get('every', 10):g} s) took {_ms(calls['p50_ms'])} at the median, "
            f"{_ms(calls['max_ms'])} at most; pages read the result in one query."
        )
    return lines


def render_broker(run: dict) -> list[str]:
    figures = run["broker"]
    lines = [
        "| Redis | request | clients | requests / s | p50 | p99 | max | errors |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for row in figures["submit"]:
        lines.append(
            f"| {row['broker']} | `POST /api/v1/jobs/` | {row['clients']} "
            f"| {row['requests_per_second']:,.1f} | {_ms(row['p50_ms'])} | {_ms(row['p99_ms'])} "
            f"| {_ms(row['max_ms'])} | {row['errors']} |"
        )
    for row in figures["livez_under_load"]:
        lines.append(
            f"| {row['broker']} | `GET /livez` on the {row['where']}, beside the submits "
            f"| {row['clients']} | - | {_ms(row['p50_ms'])} | {_ms(row['p99_ms'])} "
            f"| {_ms(row['max_ms'])} | - |"
        )
    for row in figures["probes"]:
        statuses = ", ".join(f"{n} x {s}" for s, n in sorted(row["statuses"].items()))
        lines.append(
            f"| {row['broker']} | `GET {row['path']}` ({statuses}) | 1 | - "
            f"| {_ms(row['p50_ms'])} | {_ms(row['p99_ms'])} | {_ms(row['max_ms'])} | - |"
        )
    lines += [
        "",
        "Redis stopped by SIGSTOP keeps its port open and answers nothing. gunicorn runs "
        "with the image's configuration file (`-c python:portal.gunicorn`, the arbiter's "
        "/livez on the probe port) and 4 sync workers; no Celery worker runs.",
    ]
    return lines


def _kb(value: float) -> str:
    return f"{value:,.1f} KB"


def render_pages(run: dict) -> list[str]:
    figures = run["pages"]
    lines = [
        "| page | a minute open: requests | of them with a body | headers | bodies | in all "
        "| target | first load: requests | first load |",
        "| --- | ---: | ---: | ---: | ---: | ---: | --- | ---: | ---: |",
    ]
    for row in figures["pages"]:
        minute, first = row["open"], row["first_load"]
        target = row.get("target_kb_per_minute")
        verdict = (
            "-"
            if target is None
            else f"under {target:g} KB: "
            + ("met" if minute["kb_per_minute"] < target else "**missed**")
        )
        lines.append(
            f"| {row['page']} (`{row['path']}`) | {minute['requests_per_minute']:,.0f} "
            f"| {minute['with_body']} | {_kb(minute['header_kb_per_minute'])} "
            f"| {_kb(minute['body_kb_per_minute'])} | {_kb(minute['kb_per_minute'])} "
            f"| {verdict} | {first['requests']} | {_kb(first['kb'])} |"
        )
    parts = []
    for row in figures["pages"]:
        minute = row["open"]
        if len(minute["by_path"]) > 1:
            each = [
                f"`{path}` {part['requests']} requests, {part['with_body']} with a body, "
                f"{_kb(part['bytes'] * 60 / minute['seconds'] / 1000)}"
                for path, part in minute["by_path"].items()
            ]
            parts.append(f"- {row['page']}: " + "; ".join(each))
    if parts:
        lines += ["", "A minute of a page that polls more than one part, part by part:", "", *parts]
    lines += [
        "",
        f"Each page open {figures['seconds']:g} s after it loaded, in Chromium, signed in as a"
        " member; bytes as received, the bodies compressed where they were sent compressed;"
        " headers are the answers' (the requests' own are not counted). KB is 1,000 bytes.",
    ]
    return lines


def render_accounting(run: dict) -> list[str]:
    figures = run["accounting"]
    lines = [
        "| question | query | rows answered | bytes | p50 | slowest |",
        "| --- | --- | ---: | ---: | ---: | ---: |",
    ]
    for answer in figures["answers"]:
        lines.append(
            f"| {answer['label']} | `{answer['query']}` | {answer['rows']:,} | {answer['bytes']:,} "
            f"| {_ms(answer['p50_ms'])} | {_ms(answer['max_ms'])} |"
        )
    lines += [
        "",
        f"Over {figures['summary_rows']:,} summary rows ({figures['days']} days x "
        f"{figures['leaves']} leaves x {figures['people_per_leaf']} people x "
        f"{figures['runtimes']} runtimes, written in {_seconds(figures['fill_seconds'])}), "
        "asked in-process through Django's test client as staff; each question 5 times after "
        "a warm-up.",
    ]
    return lines


def render_retention(run: dict) -> list[str]:
    figures = run["retention"]
    before, after, archived = figures["before"], figures["after"], figures["archived"]
    lines = [
        f"| best / median of {figures['rounds']} | with the finished jobs | after archiving |",
        "| --- | ---: | ---: |",
    ]
    for page in before:
        lines.append(
            f"| {page} | {_ms(before[page]['best_ms'])} / {_ms(before[page]['median_ms'])} "
            f"| {_ms(after[page]['best_ms'])} / {_ms(after[page]['median_ms'])} |"
        )
    lines += [
        "",
        f"{figures['finished']:,} jobs that finished a year ago (two events each) beside "
        f"{figures['recent']:,} queued, written in {_seconds(figures['write_seconds'])}. "
        f"Retention archived {archived['jobs']:,} in {_seconds(archived['seconds'])} "
        f"({archived['jobs_per_second']:,.0f} jobs a second), {archived['files']} gzipped "
        f"files, {archived['bytes'] / 1e6:,.1f} MB; {figures['remaining']:,} jobs remain.",
    ]
    return lines


def render_node_pools(run: dict) -> list[str]:
    figures = run["node_pools"]
    cells = [
        f"{_ms(figures[key]['best_ms'])} / {_ms(figures[key]['median_ms'])}"
        for key in ("without", "with_pools")
    ]
    return [
        f"| queues x heads | the rule, no pools | {figures['pools']} pools | with over without |",
        "| ---: | ---: | ---: | ---: |",
        f"| {figures['queues']:,} x {figures['heads']} | {' | '.join(cells)} "
        f"| {figures['ratio']:.2f} x |",
        "",
        "Best / median of `plan_admissions` (the pure rule) on the large-scale tree, every "
        "queue holding its nominal quota and offering its first heads; "
        f"{figures['with_pools']['preempted']:,} preemptions and "
        f"{figures['with_pools']['refused']:,} refusals with pools, "
        f"{figures['without']['preempted']:,} and {figures['without']['refused']:,} without.",
    ]


def render_fair_share(run: dict) -> list[str]:
    figures = run["fair_share"]
    lines = [
        "| spans of held quota | beat's `fair_share_record` | the cycle's `read_holding`, "
        "half-life on | off |",
        "| ---: | ---: | ---: | ---: |",
    ]
    for size in figures["sizes"]:
        cells = [
            f"{_ms(size[key]['best_ms'])} / {_ms(size[key]['median_ms'])}"
            for key in ("record", "cycle_on", "cycle_off")
        ]
        lines.append(f"| {size['spans']:,} | {' | '.join(cells)} |")
    lines += [
        "",
        f"Best / median. The Kueue baseline's tree ({figures['nodes']} nodes) with a "
        f"half-life of {figures['half_life']}, {figures['jobs']:,} queued jobs, spans over "
        "the last 140 days (20 half-lives), a thousand still held.",
    ]
    return lines


def render_reaction(rows: list[tuple[str, dict]]) -> list[str]:
    lines = [
        "| workers | reaction to | rounds | p50 | p99 | max |",
        "| --- | --- | ---: | ---: | ---: | ---: |",
    ]
    for label, reaction in rows:
        for kind in ("finish", "cancel"):
            figures = reaction[kind]
            lines.append(
                f"| {label} | a {kind} | {reaction['rounds']} | {_ms(figures['p50_ms'])} "
                f"| {_ms(figures['p99_ms'])} | {_ms(figures['max_ms'])} |"
            )
    return lines


def _reactions_under_load(run: dict) -> list[tuple[str, dict]]:
    return [
        (f"running the {result['scenario']} replay", result["reaction"])
        for result in run.get("kueue", [])
        if result.get("reaction")
    ]


RENDERERS = {
    "kueue": (lambda run: run.get("kueue"), render_kueue),
    "throughput": (lambda run: run.get("throughput"), render_throughput),
    "reads": (lambda run: run.get("reads"), render_reads),
    "reaction": (
        lambda run: run.get("reaction_idle"),
        lambda run: render_reaction([("idle", run["reaction_idle"])]),
    ),
    "mixed": (lambda run: run.get("mixed"), render_mixed),
    "cluster": (lambda run: run.get("cluster"), render_cluster),
    "estimate": (lambda run: run.get("estimate"), render_estimate),
    "broker": (lambda run: run.get("broker"), render_broker),
    "pages": (lambda run: run.get("pages"), render_pages),
    "accounting": (lambda run: run.get("accounting"), render_accounting),
    "retention": (lambda run: run.get("retention"), render_retention),
    "fair-share": (lambda run: run.get("fair_share"), render_fair_share),
    "node-pools": (lambda run: run.get("node_pools"), render_node_pools),
    # Measured by the probe beside the baseline replay, so written by the kueue part.
    "reaction-under-load": (
        _reactions_under_load,
        lambda run: render_reaction(_reactions_under_load(run)),
    ),
}


def record_path(path: Path) -> Path:
    """Where the raw results behind the figures at ``path`` go: beside it, same stem, so a
    trial written elsewhere never replaces the record in docs/."""
    return path.with_suffix(".json")


def write(path: Path, run: dict, against: Path = RECORD) -> list[record.Comparison]:
    """Replace the figures of every part the run holds; keep the others. Return the run's
    figures set against the record at ``against``, read before anything is written."""
    last = record.read(against)
    comparisons = record.compare(last, run)
    text = path.read_text() if path.exists() else "# Benchmarks\n"
    for section, (present, renderer) in RENDERERS.items():
        if not present(run):
            continue
        against_lines = record.markdown(last, comparisons, section)
        block = "\n".join(
            [
                start(section),
                "",
                *_stamp(run),
                *renderer(run),
                *(["", *against_lines] if against_lines else []),
                "",
                end(section),
            ]
        )
        if start(section) in text and end(section) in text:
            before, rest = text.split(start(section), 1)
            _, after = rest.split(end(section), 1)
            text = before + block + after
        else:
            text = text.rstrip() + f"\n\n{block}\n"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    record.save(record_path(path), run)
    return comparisons
