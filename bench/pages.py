"""What an open page costs: the bytes and requests a minute of a page left open in a browser.

A person keeps a queue page, the dashboard or a job page open all day; each asks every 2 s
for its refreshing part (templates/base.html, htmx), and an unchanged part is answered 304
with no body (portal/fragments.py). This part opens each page in Debian's Chromium, driven
by Playwright, signed in as a department's member, and counts every answer the page
receives in the WINDOW_SECONDS after it finished loading (no request in flight for half a
second): requests, and the bytes on the wire, headers and bodies apart, as Chromium
received them (the body's encoded size: compressed where the answer was compressed; a
304's body is none). The page's first load (everything before the window) is given beside,
for reference.

The portal runs as the demo runs it, with DEBUG off: gunicorn, a Celery worker and beat
admitting and running jobs on the simulated cluster. The pages:

- an idle queue: a few running jobs that run for hours, nothing waiting, nothing changing;
- the member's dashboard and the page of one of those running jobs, idle the same way;
- a queue with PENDING_DEEP pending jobs behind a full quota, nothing admitted;
- a busy queue (after the idle pages, alone): jobs of BUSY_RUN_SECONDS, two running at a
  time, one submitted every BUSY_EVERY_SECONDS so that a job is admitted and one finishes
  every few seconds while the admission cycle runs.

The idle pages are open at once, each in a browser context of its own (a tab each, as a
person with several open would have); nothing changes while they are open, so they cannot
disturb each other's figures. KB here is 1,000 bytes.

Imported by bench/__main__.py once Django is set up.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from .reads import _session_cookie
from .services import REPO

CHROMIUM = "/usr/bin/chromium"
DEMO_NODES = "4xcpu=16,memory=64Gi,nvidia.com/gpu=4"  # the demo's simulated cluster
WINDOW_SECONDS = 60.0
PENDING_DEEP = 2_000
BUSY_RUN_SECONDS = 6
BUSY_EVERY_SECONDS = 3.0
BUSY_PENDING = 3  # jobs kept waiting in the busy queue
SEED_TREE = REPO / "queues" / "data" / "seed-tree.yaml"
# Targets (issue "Pages a person can live in all day"): bytes a minute of an open page.
IDLE_TARGET_KB = 20.0
DEEP_TARGET_KB = 100.0
HOURS = 8 * 3600  # the running jobs outlast the measurement by far


@dataclass(frozen=True)
class Answer:
    """One answer a page received: when (monotonic seconds), its address, and the bytes of
    its headers and of its body as they came over the wire."""

    at: float
    url: str
    header_bytes: int
    body_bytes: int


def tally(answers: Iterable[Answer]) -> dict:
    """Requests and bytes of some answers, how many came with a body (a 304 comes without;
    Chromium shows a revalidated answer with the stored answer's status), and each
    address's share."""
    answers = list(answers)
    by_path: dict[str, dict] = {}
    for answer in answers:
        path = urlsplit(answer.url).path
        row = by_path.setdefault(path, {"requests": 0, "with_body": 0, "bytes": 0})
        row["requests"] += 1
        row["with_body"] += answer.body_bytes > 0
        row["bytes"] += answer.header_bytes + answer.body_bytes
    return {
        "requests": len(answers),
        "with_body": sum(a.body_bytes > 0 for a in answers),
        "header_bytes": sum(a.header_bytes for a in answers),
        "body_bytes": sum(a.body_bytes for a in answers),
        "by_path": by_path,
    }


def per_minute(answers: Iterable[Answer], *, start: float, seconds: float) -> dict:
    """The answers of the window [start, start + seconds), scaled to a minute: requests,
    KB of headers, KB of bodies and KB in all."""
    window = tally(a for a in answers if start <= a.at < start + seconds)
    scale = 60.0 / seconds
    headers = window["header_bytes"] * scale / 1000
    bodies = window["body_bytes"] * scale / 1000
    return {
        **window,
        "seconds": seconds,
        "requests_per_minute": round(window["requests"] * scale, 1),
        "header_kb_per_minute": round(headers, 2),
        "body_kb_per_minute": round(bodies, 2),
        "kb_per_minute": round(headers + bodies, 2),
    }


def page_figures(label: str, path: str, target_kb: float | None, answers: list[Answer],
                 loaded: float, seconds: float) -> dict:  # fmt: skip
    """One page's figures: its first load (what came before ``loaded``) and a minute open."""
    first = tally(a for a in answers if a.at < loaded)
    first["kb"] = round((first["header_bytes"] + first["body_bytes"]) / 1000, 1)
    return {
        "page": label,
        "path": path,
        "target_kb_per_minute": target_kb,
        "first_load": first,
        "open": per_minute(answers, start=loaded, seconds=seconds),
    }


def measure(*, base_url: str, seconds: float = WINDOW_SECONDS) -> dict:
    """Seed the pages' data, open the idle pages together, then the busy queue; returns the
    figures. The worker must be running (it admits the seeded jobs)."""
    from django.db import close_old_connections

    people = _seed()
    idle = _idle_jobs(people)
    cookie = _session_cookie(people["alice"])
    idle_pages = [
        ("idle queue", "/queues/root-algorithm-video/", IDLE_TARGET_KB),
        ("dashboard", "/", IDLE_TARGET_KB),
        ("job page, running", f"/jobs/{idle['job']}/", IDLE_TARGET_KB),
        (f"queue with {PENDING_DEEP:,} pending", "/queues/root-algorithm-text/", DEEP_TARGET_KB),
    ]
    pages = _watch(base_url, cookie, idle_pages, seconds)
    close_old_connections()
    stop = threading.Event()
    feeder = threading.Thread(target=_feed_busy, args=(people["dora"], stop), daemon=True)
    feeder.start()
    try:
        _wait_for_busy()
        busy_cookie = _session_cookie(people["dora"])
        busy = [("busy queue", "/queues/root-infrastructure-devops/", None)]
        pages += _watch(base_url, busy_cookie, busy, seconds)
    finally:
        stop.set()
        feeder.join(timeout=30)
    return {"seconds": seconds, "pending_deep": PENDING_DEEP, "pages": pages}


def _seed() -> dict:
    """The seed's quota tree, the algorithm and infrastructure departments, and alice (a
    member of algorithm, whose pages are watched), bob and dora."""
    import yaml
    from django.contrib.auth import get_user_model

    from queues.departments import department_create, membership_set
    from queues.models import Department, QuotaNode
    from queues.services import tree_apply

    tree_apply(document=yaml.safe_load(Path(SEED_TREE).read_text()))
    for name in ("algorithm", "infrastructure"):
        department_create(name=name, quota_node=QuotaNode.objects.get(path=f"root/{name}"))
    people = {}
    for username, department in (("alice", "algorithm"), ("bob", "algorithm"),
                                 ("dora", "infrastructure")):  # fmt: skip
        membership_set(
            department=Department.objects.get(name=department), username=username, role="member"
        )
        people[username] = get_user_model().objects.get(username=username)
    return people


def _ray(queue: str, name: str, cpu: int, run_seconds: float) -> dict:
    return {
        "queue": queue,
        "kind": "ray",
        "name": name,
        "image": "rayproject/ray:2.36.1",
        "entrypoint": "python train.py",
        "head": {"resources": {"cpu": str(cpu)}},
        "run_seconds": run_seconds,
    }


def _idle_jobs(people: dict) -> dict:
    """Three of alice's jobs running in video (its min, 12 cpu); in text, three of bob's
    fill its max (24 cpu) and PENDING_DEEP more of his wait behind them. Waits until the
    worker has them running."""
    from jobs.document.schema import job_parse
    from jobs.models import Job, State
    from jobs.services import BATCH_MAX, job_submit, job_submit_batch

    video = [
        job_submit(
            user=people["alice"],
            draft=job_parse(_ray("root/algorithm/video", f"train-{i}", 4, HOURS)),
        )
        for i in range(3)
    ]
    for i in range(3):
        job_submit(
            user=people["bob"], draft=job_parse(_ray("root/algorithm/text", f"big-{i}", 8, HOURS))
        )
    _wait_for(lambda: Job.objects.filter(state=State.RUNNING).count() == 6, "6 running jobs")
    sweep = [_ray("root/algorithm/text", f"sweep-{i}", 1, 600) for i in range(PENDING_DEEP)]
    for start in range(0, len(sweep), BATCH_MAX):
        job_submit_batch(user=people["bob"], documents=sweep[start : start + BATCH_MAX])
    return {"job": video[0].pk}


def _feed_busy(dora, stop: threading.Event) -> None:
    """Keeps BUSY_PENDING of dora's jobs waiting in devops, where two run at a time."""
    from django.db import connection

    from jobs.document.schema import job_parse
    from jobs.models import PENDING, Job
    from jobs.services import job_submit

    index = 0
    try:
        while not stop.is_set():
            waiting = Job.objects.filter(queue__node__path="root/infrastructure/devops",
                                         state__in=PENDING).count()  # fmt: skip
            if waiting < BUSY_PENDING:
                body = _ray("root/infrastructure/devops", f"step-{index}", 8, BUSY_RUN_SECONDS)
                job_submit(user=dora, draft=job_parse(body))
                index += 1
            stop.wait(BUSY_EVERY_SECONDS)
    finally:
        connection.close()


def _wait_for_busy() -> None:
    from jobs.models import Job, State

    _wait_for(
        lambda: Job.objects.filter(
            queue__node__path="root/infrastructure/devops", state=State.SUCCEEDED
        ).exists(),
        "a busy job to finish",
    )


def _wait_for(condition, what: str, timeout: float = 180) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise RuntimeError(f"bench: no {what} within {timeout:.0f} s")
        time.sleep(0.5)


def _watch(base_url: str, cookie: str, pages: list[tuple[str, str, float | None]],
           seconds: float) -> list[dict]:  # fmt: skip
    """Open every page at once, each in a context of its own, for ``seconds`` after it
    loaded; return each page's figures."""
    from playwright.sync_api import sync_playwright

    name, value = cookie.split("=", 1)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM,
            headless=True,
            args=["--no-sandbox", "--disable-gpu", "--disable-background-networking"],
        )
        try:
            opened = []
            for label, path, target in pages:
                context = browser.new_context(viewport={"width": 1366, "height": 900})
                context.add_cookies([{"name": name, "value": value, "url": base_url}])
                page = context.new_page()
                finished: list[tuple[float, object]] = []
                page.on(
                    "requestfinished",
                    lambda request, finished=finished: finished.append((time.monotonic(), request)),
                )  # fmt: skip
                page.goto(base_url + path, wait_until="networkidle")
                opened.append((label, path, target, page, finished, time.monotonic()))
            last = max(loaded for *_, loaded in opened)
            opened[-1][3].wait_for_timeout((last + seconds - time.monotonic()) * 1000 + 500)
            results = []
            for label, path, target, _, finished, loaded in opened:
                answers = [_answer(at, request) for at, request in finished]
                results.append(page_figures(label, path, target, answers, loaded, seconds))
            return results
        finally:
            browser.close()


def _answer(at: float, request) -> Answer:
    sizes = request.sizes()
    return Answer(
        at=at,
        url=request.url,
        header_bytes=sizes["responseHeadersSize"],
        body_bytes=sizes["responseBodySize"],
    )
