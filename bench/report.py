"""Write the figures of a benchmark run into docs/benchmarks.md.

The generated part sits between two markers; the analysis around it is written by hand,
so a new run replaces the numbers and keeps the explanations.
"""

from __future__ import annotations

import os
import platform
from pathlib import Path

from .kueue import KUEUE_BASELINE, KUEUE_LARGE_SCALE_LIMIT_SECONDS

START = "<!-- figures:start (written by `make bench`) -->"
END = "<!-- figures:end -->"


def machine() -> str:
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return f"{os.cpu_count()} cores, {memory:.0f} GiB, {platform.system()} {platform.machine()}"


def render(run: dict) -> str:
    lines = [
        START,
        "",
        f"Last run: `{run['command']}` on {run['date']}, {run['machine']}.",
        "",
        "### Kueue's scheduler scenarios",
        "",
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
            f"| {result['wall_seconds']:.1f} s | {result['physical_bound_seconds']:.0f} s "
            f"| {kueue_wall} "
            f"| {' / '.join(f'{means.get(c, 0):.2f} s' for c in ('small', 'medium', 'large'))} "
            f"| {kueue_means} | {usage['min']:.0f}% / {usage['mean']:.0f}% "
            f"| {result['preemptions']:,} | {result['submit_lag_p99_seconds']:.3f} s |"
        )
    notes = [note for result in run["kueue"] for note in result.get("notes", [])]
    if notes:
        lines += ["", *[f"- {note}" for note in notes]]
    lines += ["", f"Command line: `{run['argv']}`", "", END]
    return "\n".join(lines)


def write(path: Path, run: dict) -> None:
    """Replace the figures between the markers, or start the file with them."""
    figures = render(run)
    text = path.read_text() if path.exists() else f"# Benchmarks\n\n{START}\n{END}\n"
    if START not in text or END not in text:
        text = text.rstrip() + f"\n\n{START}\n{END}\n"
    before, rest = text.split(START, 1)
    _, after = rest.split(END, 1)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(before + figures + after)
