"""The last recorded figures of each part, and a run set against them.

docs/benchmarks.md shows each part's figures in tables among prose; docs/benchmarks.json
beside it holds the raw results of the run that wrote them, so the next run can be set
against them figure by figure instead of by eye. Runs of the same code on the same 2-core
machine differ by up to 15%, so a figure alone says little: with ``--repeat`` the figure
is the median of the repeats and their spread shows how far it can be trusted. A change
counts as a loss when it goes the wrong way by more than that spread, or by more than
NOISE_PERCENT after a single run.
"""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

NOISE_PERCENT = 15.0
# Repeats run back to back agree more closely than runs on different days: a loss must
# exceed at least this much even when the repeats' spread is narrower.
SPREAD_FLOOR_PERCENT = 5.0
# Each part, and the key of its results in a run.
PARTS = {
    "kueue": "kueue",
    "throughput": "throughput",
    "reads": "reads",
    "reaction": "reaction_idle",
    "mixed": "mixed",
    "cluster": "cluster",
    "estimate": "estimate",
    "broker": "broker",
    "pages": "pages",
    "accounting": "accounting",
    "retention": "retention",
    "fair-share": "fair_share",
    "node-pools": "node_pools",
}
STAMP = ("command", "argv", "date", "machine")
# Counts of failures: one repeat that failed must show, so repeats keep their worst.
WORST_OF_REPEATS = {"errors"}


@dataclass(frozen=True)
class Figure:
    """One figure worth comparing; ``higher`` when the larger value is the better one."""

    name: str
    value: float | None
    unit: str  # "/s", "ms", "s", "x" (a ratio), " KB/min" or " /min"
    higher: bool


@dataclass(frozen=True)
class Comparison:
    """One figure of this run (a value a repeat) beside the same figure in the record."""

    section: str
    name: str
    unit: str
    higher: bool
    values: tuple[float, ...]
    recorded: float | None  # None: the record holds no such figure
    recorded_on: str | None

    @property
    def value(self) -> float:
        return statistics.median(self.values)

    @property
    def spread(self) -> float | None:
        """The repeats' range as a percentage of their median; None after one run."""
        if len(self.values) < 2:
            return None
        width = max(self.values) - min(self.values)
        if self.value == 0:
            return 0.0 if width == 0 else math.inf
        return width / abs(self.value) * 100

    @property
    def change(self) -> float | None:
        """Percent from the recorded figure to this run's; None without a record."""
        if self.recorded is None or self.recorded == 0:
            return None
        return (self.value - self.recorded) / abs(self.recorded) * 100

    @property
    def loss(self) -> bool:
        """Worse than the record by more than the noise: the repeats' spread (at least
        SPREAD_FLOOR_PERCENT), or NOISE_PERCENT when a single run cannot show its own."""
        if self.change is None:
            return False
        worse = -self.change if self.higher else self.change
        spread = self.spread
        return worse > (NOISE_PERCENT if spread is None else max(spread, SPREAD_FLOOR_PERCENT))


def _clients(count: int) -> str:
    return f"{count} client" + ("" if count == 1 else "s")


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else seconds * 1000


def kueue_figures(results: list[dict]) -> Iterator[Figure]:
    for result in results:
        row = f"{result['scenario']} through the {result['variant']}"
        yield Figure(f"{row}: wall", result.get("wall_seconds"), "s", False)
        means = result.get("mean_admission_seconds", {})
        for group in ("small", "medium", "large"):
            yield Figure(f"{row}: mean admission, {group}", means.get(group), "s", False)


def throughput_figures(results: dict) -> Iterator[Figure]:
    for endpoint in ("single", "batch"):
        for row in results.get(endpoint, []):
            label = f"{endpoint}, {_clients(row['clients'])}"
            yield Figure(f"{label}: jobs accepted", row.get("items_per_second"), "/s", True)
            yield Figure(f"{label}: p50", row.get("p50_ms"), "ms", False)
            yield Figure(f"{label}: p99", row.get("p99_ms"), "ms", False)
    rate = results.get("pgbench", {}).get("inserts_per_second")
    yield Figure("pgbench: inserts", rate, "/s", True)
    batch = [row["items_per_second"] for row in results.get("batch", [])]
    if rate and batch:
        yield Figure("batch endpoint to pgbench, best", max(batch) / rate, "x", True)


def reads_figures(results: dict) -> Iterator[Figure]:
    """At the deepest queue only: what the reads cost at depth is what they are for."""
    rows = results.get("reads", [])
    deepest = max((row["pending"] for row in rows), default=None)
    for row in rows:
        if row["pending"] == deepest:
            label = f"{row['read']}, {deepest:,} pending"
            yield Figure(f"{label}: p50", row.get("p50_ms"), "ms", False)
            yield Figure(f"{label}: p99", row.get("p99_ms"), "ms", False)


def reaction_figures(reaction: dict, during: str = "") -> Iterator[Figure]:
    for kind in ("finish", "cancel"):
        figures = reaction.get(kind, {})
        for key in ("p50_ms", "p99_ms"):
            name = f"{during}a {kind}: {key.removesuffix('_ms')}"
            yield Figure(name, figures.get(key), "ms", False)


def reaction_under_load_figures(results: list[dict]) -> Iterator[Figure]:
    for result in results:
        if result.get("reaction"):
            during = f"running the {result['scenario']} replay, "
            yield from reaction_figures(result["reaction"], during)


def mixed_figures(results: dict) -> Iterator[Figure]:
    yield Figure("together: requests", results.get("requests_per_second"), "/s", True)
    yield Figure("together: jobs accepted", results.get("jobs_per_second"), "/s", True)
    for kind, label in (("reads", "queue reads"), ("submissions", "submissions")):
        row = results.get(kind, {})
        yield Figure(f"{label}: p50", row.get("p50_ms"), "ms", False)
        yield Figure(f"{label}: p99", row.get("p99_ms"), "ms", False)


def cluster_figures(results: dict) -> Iterator[Figure]:
    for row in results.get("sizes", []):
        size = f"{row['live_jobs']:,} live jobs"
        yield Figure(f"{size}: objects stored", row.get("create_jobs_per_second"), "/s", True)
        yield Figure(f"{size}: of the server's own rate", row.get("of_server_rate"), "x", True)
        for key, label in (
            ("sync_all_changed_seconds", "sync, every job changed"),
            ("sync_quiet_seconds", "sync, nothing changed, listed"),
            ("sync_quiet_watched_seconds", "sync, nothing changed, watched"),
        ):
            yield Figure(f"{size}: {label}", _ms(row.get(key)), "ms", False)
    scale = results.get("scale") or {}
    if scale:
        where = f"{scale['live_jobs']:,} live jobs in {scale['namespaces']:,} namespaces"
        yield Figure(f"{where}: objects stored", scale.get("create_jobs_per_second"), "/s", True)
        yield Figure(f"{where}: of the server's own rate", scale.get("of_server_rate"), "x", True)
        for key, label in (
            ("sync_all_changed_seconds", "sync, every job changed"),
            ("sync_quiet_seconds", "sync, nothing changed, listed"),
            (
                "sync_quiet_watched_namespace_seconds",
                "sync, nothing changed, watched per namespace",
            ),
            ("sync_quiet_watched_cluster_seconds", "sync, nothing changed, watched per kind"),
        ):
            yield Figure(f"{where}: {label}", _ms(scale.get(key)), "ms", False)
        for held, label in (("watched_namespace", "namespace"), ("watched_cluster", "kind")):
            memory = (scale.get(held) or {}).get("rss_mb")
            yield Figure(f"{where}: memory, watched per {label}", memory, " MiB", False)


def estimate_figures(results: dict) -> Iterator[Figure]:
    every = results.get("classes", {}).get("all", {})
    yield Figure("every class: mean absolute error", every.get("mae_seconds"), "s", False)
    yield Figure("every class: p90 absolute error", every.get("p90_seconds"), "s", False)
    yield Figure("a refresh: p50", results.get("calls", {}).get("p50_ms"), "ms", False)


def broker_figures(results: dict) -> Iterator[Figure]:
    for row in results.get("submit", []):
        label = f"Redis {row['broker']}, {_clients(row['clients'])}"
        yield Figure(f"{label}: submits", row.get("requests_per_second"), "/s", True)
        yield Figure(f"{label}: submit p99", row.get("p99_ms"), "ms", False)
    for row in results.get("livez_under_load", []):
        name = f"Redis {row['broker']}, /livez on the {row['where']}: p99"
        yield Figure(name, row.get("p99_ms"), "ms", False)


def pages_figures(results: dict) -> Iterator[Figure]:
    """What a minute of each open page costs: fewer bytes and fewer requests are better."""
    for row in results.get("pages", []):
        minute = row.get("open", {})
        yield Figure(
            f"{row['page']}: bytes a minute", minute.get("kb_per_minute"), " KB/min", False
        )
        name = f"{row['page']}: requests a minute"
        yield Figure(name, minute.get("requests_per_minute"), " /min", False)


def accounting_figures(results: dict) -> Iterator[Figure]:
    for answer in results.get("answers", []):
        yield Figure(f"accounting, {answer['label']}: p50", answer.get("p50_ms"), "ms", False)


def retention_figures(results: dict) -> Iterator[Figure]:
    for when in ("before", "after"):
        for page, times in results.get(when, {}).items():
            name = f"{page}, {'with the finished jobs' if when == 'before' else 'archived'}"
            yield Figure(f"{name}: median", times.get("median_ms"), "ms", False)
    archived = results.get("archived", {})
    yield Figure("archiving", archived.get("jobs_per_second"), "/s", True)


def fair_share_figures(results: dict) -> Iterator[Figure]:
    for size in results.get("sizes", []):
        spans = f"{size['spans']:,} spans"
        yield Figure(f"beat's record, {spans}: median", size["record"]["median_ms"], "ms", False)
        on = size["cycle_on"]["median_ms"]
        yield Figure(f"the cycle's read, half-life on, {spans}: median", on, "ms", False)


def node_pools_figures(results: dict) -> Iterator[Figure]:
    for key, label in (("without", "no pools"), ("with_pools", f"{results.get('pools')} pools")):
        figures = results.get(key, {})
        yield Figure(
            f"the rule at 2,000 queues, {label}: median", figures.get("median_ms"), "ms", False
        )
    yield Figure("the rule with pools over without", results.get("ratio"), "x", False)


# Each section of docs/benchmarks.md: the part whose results hold its figures, and them.
FIGURES: dict[str, tuple[str, Callable[[Any], Iterable[Figure]]]] = {
    "kueue": ("kueue", kueue_figures),
    "throughput": ("throughput", throughput_figures),
    "reads": ("reads", reads_figures),
    "reaction": ("reaction", reaction_figures),
    "reaction-under-load": ("kueue", reaction_under_load_figures),
    "mixed": ("mixed", mixed_figures),
    "cluster": ("cluster", cluster_figures),
    "estimate": ("estimate", estimate_figures),
    "broker": ("broker", broker_figures),
    "pages": ("pages", pages_figures),
    "accounting": ("accounting", accounting_figures),
    "retention": ("retention", retention_figures),
    "fair-share": ("fair-share", fair_share_figures),
    "node-pools": ("node-pools", node_pools_figures),
}


def figures(section: str, results: Any) -> dict[str, Figure]:
    """The section's figures in a part's results, by name; those it lacks left out."""
    _, extract = FIGURES[section]
    return {f.name: f for f in extract(results) if f.value is not None}


def median(repeats: list[Any], key: str | None = None) -> Any:
    """One result standing for repeated runs of the same parts, shaped as each of them.

    Numbers become their median (an int one of the ints, so counts stay whole), failure
    counts their maximum; rows of a list are taken one by one when every repeat has as
    many, notes are gathered; anything else is the first repeat's.
    """
    present = [value for value in repeats if value is not None]
    if not present:
        return None
    first = present[0]
    if isinstance(first, dict):
        dicts = [value for value in present if isinstance(value, dict)]
        keys = dict.fromkeys(k for value in dicts for k in value)
        return {k: median([value.get(k) for value in dicts], k) for k in keys}
    if isinstance(first, list):
        return _median_rows(present, key)
    if all(_number(value) for value in present):
        if key in WORST_OF_REPEATS:
            return max(present)
        if all(isinstance(value, int) for value in present):
            return statistics.median_low(present)
        return statistics.median(present)
    return first


def _median_rows(present: list[list], key: str | None) -> list:
    first = present[0]
    if not all(isinstance(item, dict) for item in first):
        gathered: list = []
        for value in present:
            gathered += [item for item in value if item not in gathered]
        return gathered
    if all(isinstance(value, list) and len(value) == len(first) for value in present):
        return [median(list(rows), key) for rows in zip(*present, strict=True)]
    return first


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def compare(last: dict, run: dict) -> list[Comparison]:
    """Every figure of the parts the run holds beside the same figure in ``last`` (the
    record, as ``read`` returns it); each repeat in ``run["repeats"]`` gives one value."""
    repeats = run.get("repeats") or [run]
    comparisons = []
    for section, (part, _) in FIGURES.items():
        key = PARTS[part]
        if not run.get(key):
            continue
        entry = last.get(part) or {}
        recorded = figures(section, entry["results"]) if entry.get("results") else {}
        values: dict[str, list[Figure]] = {}
        for repeat in repeats:
            if repeat.get(key):
                for name, figure in figures(section, repeat[key]).items():
                    values.setdefault(name, []).append(figure)
        for name, series in values.items():
            was = recorded.get(name)
            comparisons.append(
                Comparison(
                    section=section,
                    name=name,
                    unit=series[0].unit,
                    higher=series[0].higher,
                    values=tuple(figure.value for figure in series),
                    recorded=None if was is None else was.value,
                    recorded_on=entry.get("date"),
                )
            )
    return comparisons


def read(path: Path) -> dict:
    """The record at ``path`` by part; empty when there is none yet."""
    return json.loads(path.read_text()) if path.exists() else {}


def save(path: Path, run: dict) -> None:
    """Replace the record of every part the run holds; keep the others'."""
    record = read(path)
    for part, key in PARTS.items():
        if run.get(key):
            stamp = {field: run.get(field) for field in STAMP}
            record[part] = {**stamp, "repeat": run.get("repeat", 1), "results": run[key]}
    ordered = {part: record[part] for part in PARTS if part in record}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(ordered, indent=2) + "\n")


def show(value: float, unit: str) -> str:
    if unit == "x":
        return f"{value:.2f} x"
    if unit == "ms":
        return f"{value:,.1f} ms"
    if unit == "s":
        return f"{value:,.1f} s" if abs(value) >= 10 else f"{value:.2f} s"
    return f"{value:,.0f}{unit}" if abs(value) >= 100 else f"{value:,.1f}{unit}"


def _recorded(comparison: Comparison) -> str:
    if comparison.recorded is None:
        return "no record"
    return show(comparison.recorded, comparison.unit)


def _spread(comparison: Comparison) -> str:
    if comparison.spread is None:
        return ""
    low, high = min(comparison.values), max(comparison.values)
    return (
        f"{show(low, comparison.unit)} .. {show(high, comparison.unit)}, {comparison.spread:.1f}%"
    )


def _change(comparison: Comparison) -> str:
    return "-" if comparison.change is None else f"{comparison.change:+.1f}%"


def table(comparisons: list[Comparison]) -> str:
    """The comparison in columns for the terminal; LOSS marks a loss beyond the noise,
    so ``make bench | grep LOSS`` lists them."""
    rows = [("part", "figure", "last record", "recorded", "this run", "spread", "change", "")]
    rows += [
        (
            c.section,
            c.name,
            _recorded(c),
            c.recorded_on or "-",
            show(c.value, c.unit),
            _spread(c) or "-",
            _change(c),
            "LOSS" if c.loss else "",
        )
        for c in comparisons
    ]
    widths = [max(len(row[column]) for row in rows) for column in range(len(rows[0]))]
    right = {2, 4, 6}
    return "\n".join(
        "  ".join(
            cell.rjust(width) if column in right else cell.ljust(width)
            for column, (cell, width) in enumerate(zip(row, widths, strict=True))
        ).rstrip()
        for row in rows
    )


def markdown(last: dict, comparisons: list[Comparison], section: str) -> list[str]:
    """The section's figures against the record before this run, for docs/benchmarks.md."""
    mine = [c for c in comparisons if c.section == section]
    if not mine:
        return []
    entry = last.get(FIGURES[section][0])
    if not entry:
        return ["No earlier record of these figures to compare with."]
    repeats = max(len(c.values) for c in mine)
    this_run = "this run" if repeats == 1 else f"this run (median of {repeats}; min .. max)"
    noise = (
        f"{NOISE_PERCENT:.0f}%, the noise of a single run"
        if repeats == 1
        else "the spread of the repeats"
    )
    lines = [
        f"Against the previous record (`{entry.get('command')}` on {entry.get('date')});"
        f" a loss is a change the wrong way by more than {noise}:",
        "",
        f"| figure | previous record | {this_run} | change |",
        "| --- | ---: | ---: | ---: |",
    ]
    for c in mine:
        value = show(c.value, c.unit) + (f" ({_spread(c)})" if c.spread is not None else "")
        change = _change(c) + (", **a loss**" if c.loss else "")
        lines.append(f"| {c.name} | {_recorded(c)} | {value} | {change} |")
    return lines
