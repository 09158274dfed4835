"""One function per command: each takes the parsed arguments and the output, asks the API
and returns an exit code. Errors are raised (api.ApiError, config.NotConfigured,
documents.BadDocument) and turned into exit codes by main."""

from __future__ import annotations

import argparse
import getpass
import os
import re
import sys
from typing import Any

import requests

from caldera_cli import config, documents, history
from caldera_cli.api import Client, Refused, Unreachable
from caldera_cli.exit_codes import Exit
from caldera_cli.output import (
    JOB_HEADERS,
    Out,
    event_line,
    field_errors,
    job_detail,
    job_line,
    position,
    when,
)
from caldera_cli.tail import follow, kept_sentence
from caldera_cli.wait import duration, wait

POLL_SECONDS = 2.0


def _retry_seconds() -> float:
    return float(os.environ.get("CALDERA_RETRY_SECONDS", "60"))


def client() -> Client:
    found = config.settings()
    return Client(found.url, found.token, retry_seconds=_retry_seconds())


def _own_token(tokens: list[dict[str, Any]], key: str) -> dict[str, Any] | None:
    """The entry of the token list that is ``key`` (each is named by its first characters)."""
    return next((t for t in tokens if key.startswith(t["prefix"])), None)


def _token_words(token: dict[str, Any] | None) -> str:
    if token is None:
        return "token not listed"
    departments = ", ".join(token["departments"]) if token["departments"] else "all departments"
    expires = when(token["expires_at"]) if token["expires_at"] else "never"
    named = f"token {token['prefix']}… {token['name']!r}"
    return f"{named}: {token['right']}, {departments}, expires {expires}"


# ---- login, whoami -----------------------------------------------------------------------


def login(args: argparse.Namespace, out: Out) -> Exit:
    url = args.url or os.environ.get("CALDERA_URL") or config.read_file().get("url")
    if not url:
        raise config.NotConfigured("login needs the server: --url URL (or CALDERA_URL)")
    url = config.normalise_url(url)
    if args.exchange:
        answer = _exchange(url, args.audience, args.id_token_env)
        key = answer["token"]
    else:
        key = _token_from_user()
    tokens = Client(url, key, retry_seconds=_retry_seconds()).get("tokens/")
    own = _own_token(tokens, key)
    user = tokens[0]["user"] if tokens else None
    path = config.save({"url": url, "token": key})
    out.emit(
        {"url": url, "user": user, "token": own and own["prefix"], "config": str(path)},
        f"Signed in to {url} as {user} ({_token_words(own)}); saved in {path}",
    )
    return Exit.SUCCEEDED


def _token_from_user() -> str:
    key = os.environ.get("CALDERA_TOKEN", "").strip()
    if not key:
        key = getpass.getpass("Token: ") if sys.stdin.isatty() else sys.stdin.readline()
    key = key.strip()
    if not key:
        raise config.NotConfigured("no token given: pipe it on stdin or set CALDERA_TOKEN")
    return key


def _exchange(url: str, audience: str, variable: str | None) -> dict[str, Any]:
    """A Caldera token for the CI job's OIDC ID token (POST /api/v1/auth/exchange/)."""
    identity = _id_token(audience, variable)
    answer: dict[str, Any] = Client(url, None, retry_seconds=_retry_seconds()).post(
        "auth/exchange/", {"token": identity}
    )
    return answer


def _id_token(audience: str, variable: str | None) -> str:
    """The pipeline's ID token: from ``variable``, else asked of GitHub Actions (the job
    needs ``permissions: id-token: write``), else GitLab's ``CALDERA_ID_TOKEN`` (the job
    declares ``id_tokens: {CALDERA_ID_TOKEN: {aud: caldera}}``)."""
    if variable:
        if not os.environ.get(variable):
            raise config.NotConfigured(f"{variable} is not set")
        return os.environ[variable]
    request_url = os.environ.get("ACTIONS_ID_TOKEN_REQUEST_URL")
    request_token = os.environ.get("ACTIONS_ID_TOKEN_REQUEST_TOKEN")
    if request_url and request_token:
        try:
            answer = requests.get(
                request_url,
                params={"audience": audience},
                headers={"Authorization": f"bearer {request_token}"},
                timeout=(5, 30),
            )
            answer.raise_for_status()
            return str(answer.json()["value"])
        except (requests.RequestException, ValueError, KeyError) as error:
            raise Unreachable(f"GitHub Actions gave no ID token: {error}") from error
    if os.environ.get("CALDERA_ID_TOKEN"):
        return os.environ["CALDERA_ID_TOKEN"]
    raise config.NotConfigured(
        "no ID token: on GitHub Actions give the job `permissions: id-token: write`; on GitLab "
        "declare `id_tokens: {CALDERA_ID_TOKEN: {aud: caldera}}`; or name the variable that "
        "holds one with --id-token-env"
    )


def whoami(args: argparse.Namespace, out: Out) -> Exit:
    found = config.settings()
    tokens = Client(found.url, found.token, retry_seconds=_retry_seconds()).get("tokens/")
    own = _own_token(tokens, found.token)
    user = tokens[0]["user"] if tokens else None
    out.emit(
        {"url": found.url, "user": user, "token": own},
        f"{user} at {found.url}\n{_token_words(own)}",
    )
    return Exit.SUCCEEDED


# ---- submit ------------------------------------------------------------------------------


def submit(args: argparse.Namespace, out: Out) -> Exit:
    try:
        timeout = duration(args.timeout) if args.timeout else None
    except ValueError as error:
        raise config.NotConfigured(f"--timeout: {error}") from error
    read = documents.read(args.files)
    # A Kubernetes object has no queue or priority of Caldera's: they go as the query's,
    # which the server applies over the object's labels (and over a Caldera document's too).
    query = {"queue": args.queue, "priority": args.priority}
    if args.pool:
        query["pools"] = ",".join(args.pool)
    if not any(document.native for document in read):
        for document in read:
            document.body.update({k: v for k, v in query.items() if v is not None})
            if args.pool:
                document.body["pools"] = list(args.pool)
        query = {}
    if args.hold:
        query["held"] = "true"  # no document field: a submission's choice, as --queue's
    api = client()
    if args.dry_run:
        return _dry_run(api, out, read, query)
    sent = [d.body for d in read] + ([query] if query else [])
    key = args.idempotency_key or documents.ci_key(sent, os.environ)
    try:
        if len(read) == 1:
            jobs = [api.post("jobs/", read[0].body, key=key, params=query)]
        else:
            jobs = api.post("jobs/batch/", {"jobs": [d.body for d in read]}, key=key, params=query)[
                "jobs"
            ]
    except Refused as refused:
        if refused.status == 400 and isinstance(refused.body, dict):
            _say_field_errors(out, refused.body, read)
            return Exit.USAGE
        raise
    for document, job in zip(read, jobs, strict=True):
        where = f", {position(job)}" if job.get("position") else ""
        out.emit(
            {
                "event": "submitted",
                "id": job["id"],
                "name": job["name"],
                "queue": job["queue"],
                "state": job["state"],
                "position": job.get("position"),
                "file": document.source,
            },
            f"submitted job {job['id']} {job['name']} ({document.source}) to {job['queue']}: "
            f"{out.state(job['state'])}{where}",
        )
    for url in args.webhook or ():
        for job in jobs:
            if not _webhook(api, out, job["id"], url):
                return Exit.USAGE
    if not (args.wait or args.follow or timeout is not None or args.cancel_on_timeout):
        return Exit.SUCCEEDED
    return wait(
        api,
        out,
        [job["id"] for job in jobs],
        timeout=timeout,
        follow=args.follow,
        cancel_on_timeout=args.cancel_on_timeout,
        poll_seconds=_poll_seconds(),
    )


def _poll_seconds() -> float:
    return float(os.environ.get("CALDERA_POLL_SECONDS", POLL_SECONDS))


def _webhook(api: Client, out: Out, job: int, url: str) -> bool:
    """Name ``url`` a webhook of the job (``POST /jobs/{id}/webhooks/``): the server sends it
    the job's state as it is now, then each change, signed with the secret printed here,
    once. A submit retried with its key finds the hook already there and adds no second.
    False when the server refuses the address (the job stays queued)."""
    if any(hook["url"] == url for hook in api.get(f"jobs/{job}/webhooks/")):
        out.emit(
            {"event": "webhook", "id": job, "url": url, "secret": None},
            f"job {job} has its webhook {url} already; its secret was shown when it was added",
        )
        return True
    try:
        hook = api.post(f"jobs/{job}/webhooks/", {"url": url})
    except Refused as refused:
        if refused.status == 400 and isinstance(refused.body, dict):
            lines = field_errors(refused.body, None)
            out.error(
                f"job {job} is queued, but the server refused its webhook:\n  "
                + "\n  ".join(lines),
                status=400,
                fields=refused.body,
            )
            return False
        raise
    out.emit(
        {
            "event": "webhook",
            "id": job,
            "url": url,
            "webhook": hook["id"],
            "secret": hook["secret"],
        },
        f"job {job}: webhook {url} added; its signing secret, shown this once: {hook['secret']}",
    )
    return True


def _dry_run(api: Client, out: Out, read: list[documents.Document], query: dict[str, Any]) -> Exit:
    """The documents as the server would take them now, storing nothing: whether each would
    be admitted at once, its place, why it would wait, about when it would start. Several
    are asked as the batch they would be submitted as (``POST /jobs/batch/dry-run/``), so
    each stands behind the batch's jobs before it. Exits 0 when every document is valid,
    whether or not it would wait; 2 otherwise, as a submit would, saying nothing else."""
    try:
        if len(read) == 1:
            answers = [api.post("jobs/dry-run/", read[0].body, params=query)]
        else:
            answers = api.post(
                "jobs/batch/dry-run/", {"jobs": [d.body for d in read]}, params=query
            )
    except Refused as refused:
        if refused.status == 400 and isinstance(refused.body, dict):
            _say_field_errors(out, refused.body, read)
            return Exit.USAGE
        raise
    for document, answer in zip(read, answers, strict=True):
        waiting = (answer.get("waiting") or {}).get("summary") or ""
        verdict = "fits now" if answer["fits_now"] else f"would wait: {waiting}"
        out.emit(
            {"event": "dry_run", "file": document.source} | answer,
            f"{document.source}: {verdict} (position {answer['position']} in "
            f"{answer['queue']}); start: {answer['estimate_basis']}",
        )
    return Exit.SUCCEEDED


def _say_field_errors(out: Out, body: dict[str, Any], read: list[documents.Document]) -> None:
    """The API's field errors as it wrote them; a batch's ``jobs[i].field`` with its file."""
    lines = []
    for field, reasons in body.items():
        found = re.match(r"jobs\[(\d+)\]\.?(.*)", field)
        if found and int(found.group(1)) < len(read):
            source = read[int(found.group(1))].source
            lines += field_errors({found.group(2) or field: reasons}, source)
        else:
            lines += field_errors({field: reasons}, read[0].source if len(read) == 1 else None)
    out.error("the server refused the job:\n  " + "\n  ".join(lines), status=400, fields=body)


# ---- reading jobs and queues -------------------------------------------------------------


def status(args: argparse.Namespace, out: Out) -> Exit:
    api = client()
    for number, job_id in enumerate(args.ids):
        job = api.get(f"jobs/{job_id}/")
        out.emit(job, ("\n" if number else "") + job_detail(out, job))
    return Exit.SUCCEEDED


def ls(args: argparse.Namespace, out: Out) -> Exit:
    page = client().get(
        "jobs/",
        state=args.state,
        queue=args.queue,
        mine="1" if args.mine else None,
        limit=args.limit,
    )
    jobs = page["results"]
    for job in jobs:
        out.emit(job)
    if not out.as_json:
        out.say(out.table(JOB_HEADERS, [job_line(out, job) for job in jobs]))
        if page.get("next"):
            out.say(out.paint(f"{len(jobs)} shown of {page['count']}: --limit for more", "dim"))
    return Exit.SUCCEEDED


def events(args: argparse.Namespace, out: Out) -> Exit:
    if args.follow:
        return history.follow(client(), out, args.id, poll_seconds=_poll_seconds())
    for event in client().pages(f"jobs/{args.id}/events/"):
        out.emit(event, event_line(event))
    return Exit.SUCCEEDED


def logs(args: argparse.Namespace, out: Out) -> Exit:
    if args.follow:
        return follow(client(), out, args.id, tail=args.tail, poll_seconds=_poll_seconds())
    answer = client().get(f"jobs/{args.id}/log/", tail_lines=args.tail)
    if answer.get("kept_at"):
        out.note(kept_sentence(args.id, answer))
    out.emit(answer, "\n".join(answer["lines"]))
    return Exit.SUCCEEDED


def cancel(args: argparse.Namespace, out: Out) -> Exit:
    return _act_on(args.ids, "cancel", out)


def hold(args: argparse.Namespace, out: Out) -> Exit:
    return _act_on(args.ids, "hold", out)


def release(args: argparse.Namespace, out: Out) -> Exit:
    return _act_on(args.ids, "release", out)


def _act_on(ids: list[int], action: str, out: Out) -> Exit:
    """POST jobs/{id}/{action}/ for each job, saying where each now stands; exit 2 when
    any was refused (the others are acted on)."""
    api, code = client(), Exit.SUCCEEDED
    for job_id in ids:
        try:
            job = api.post(f"jobs/{job_id}/{action}/")
        except Refused as refused:
            out.error(f"job {job_id}: {refused}", id=job_id, status=refused.status)
            code = Exit.USAGE
            continue
        note = ""
        if job["state"] == "stopping":
            note = " (its pods are being removed)"
        elif job.get("held"):
            note = f", held by {job['held_by']}, {position(job)}"
        elif job.get("position"):
            note = f", {position(job)}"
        out.emit(
            {"id": job["id"], "state": job["state"], "held": job.get("held", False)},
            f"job {job['id']} {job['name']}: {out.state(job['state'])}{note}",
        )
    return code


def _resources(values: dict[str, str] | None) -> str:
    return ", ".join(f"{k} {v}" for k, v in (values or {}).items()) or "-"


def queues(args: argparse.Namespace, out: Out) -> Exit:
    found = client().get("queues/")
    for queue in found:
        out.emit(queue)
    if not out.as_json:
        rows = [
            [
                q["name"],
                q["path"],
                q["policy"],
                q["pending"],
                _resources(q["used"]),
                _resources(q["max"]),
            ]
            for q in found
        ]
        out.say(out.table(["NAME", "PATH", "POLICY", "PENDING", "USED", "MAX"], rows))
    return Exit.SUCCEEDED


def queue(args: argparse.Namespace, out: Out) -> Exit:
    found = client().get(f"queues/{args.name}/")
    lines = [
        f"queue {found['name']} ({found['path']}, {found['policy']})",
        f"  used: {_resources(found['used'])}; max: {_resources(found['max'])}",
        "  " + ", ".join(f"{state} {count}" for state, count in found["counts"].items()),
    ]
    rows = [
        [j["position"], j["job"], "queued", j["priority"], j["owner"], j["name"], ""]
        for j in found["active"]
    ]
    rows += [
        [j["position"], j["job"], "backoff", j["priority"], j["owner"], j["name"], j["reason"]]
        for j in found["backoff"]
    ]
    if rows:
        rows.sort(key=lambda row: row[0] or 0)
        lines.append(out.table(["POS", "ID", "STATE", "PRIORITY", "OWNER", "NAME", "REASON"], rows))
    if found["admitted"]:
        lines.append(
            "in the cluster: "
            + ", ".join(f"{j['job']} {j['name']} ({j['state']})" for j in found["admitted"])
        )
    out.emit(found, "\n".join(lines))
    return Exit.SUCCEEDED
