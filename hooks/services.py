"""Webhooks' writes: making, resuming and deleting hooks, a test event, and the delivery of
what the outbox holds (claim, send outside any transaction, record the answer).

A delivery is claimed by moving its ``next_attempt_at`` past the send's longest time
(FOR UPDATE SKIP LOCKED, so two workers never take the same one); a worker that dies
mid-send leaves it to be claimed again when the claim lapses. Its answer is recorded in
one transaction: the attempt, the delivery's status or next try (exponential backoff,
WEBHOOK_RETRY_BASE_SECONDS doubling up to WEBHOOK_RETRY_MAX_SECONDS, WEBHOOK_MAX_ATTEMPTS
in all), and the hook's run of failures, which pauses it at WEBHOOK_PAUSE_AFTER_FAILURES.
"""

from __future__ import annotations

import json
import time
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import F, Q, QuerySet
from django.urls import reverse
from django.utils import timezone
from django.utils.translation import gettext as _

from jobs.engine.locks import WEBHOOK_PASS, leased
from jobs.engine.triggers import SENDER, BrokerRequest
from jobs.models import Job, JobEvent, State
from queues.models import Department
from sql.rows import chunks

from . import transport
from .addresses import UrlRefused, destination
from .models import JOB_EVENT_PREFIX, TEST_EVENT, Attempt, Delivery, Webhook
from .signing import secret_new, signature
from .task_names import DELIVER_TASK

Status = Delivery.Status


class WebhookInvalid(ValueError):
    """{field: why} for a hook that cannot be made."""

    def __init__(self, errors: dict[str, str]):
        super().__init__("; ".join(f"{field}: {why}" for field, why in errors.items()))
        self.errors = errors


def url_check(url: str) -> None:
    """WebhookInvalid naming ``url`` when Caldera would not send to it now."""
    try:
        destination(url)
    except UrlRefused as refused:
        raise WebhookInvalid({"url": str(refused)}) from None


def webhook_create(
    *,
    url: str,
    department: Department | None = None,
    job: Job | None = None,
    description: str = "",
    actor,
    now: datetime | None = None,
) -> tuple[Webhook, str]:
    """A hook of ``department`` or of ``job`` and its secret, which is shown this once.

    A job's hook is owed the state the job is in as it is added, as its first event (the
    job is locked, so no change slips between the two): a hook added right after the job
    was submitted (``caldera submit --webhook``) is told ``job.queued``, and one added later
    learns where the job stands without asking."""
    url_check(url)
    now = now or timezone.now()
    with transaction.atomic():
        if department is not None:
            # Locked, so that two requests at once cannot both take the last place.
            Department.objects.select_for_update().filter(pk=department.pk).first()
            limit, held = settings.WEBHOOKS_PER_DEPARTMENT, department.webhooks.count()
            owner = _("department %(name)s") % {"name": department.name}
        else:
            assert job is not None
            job = Job.objects.select_for_update(no_key=True).get(pk=job.pk)
            limit, held = settings.WEBHOOKS_PER_JOB, job.webhooks.count()
            owner = _("job #%(id)d") % {"id": job.pk}
        if held >= limit:
            raise WebhookInvalid(
                {
                    "url": _("%(owner)s has %(count)d webhooks, the most it may have")
                    % {"owner": owner, "count": held}
                }
            )
        hook = Webhook.objects.create(
            department=department,
            job=job,
            url=url,
            secret=secret_new(),
            description=description,
            created_by=actor,
            created_at=now,
        )
        if job is not None:
            Delivery.objects.create(
                hook=hook,
                job=job,
                event=f"{JOB_EVENT_PREFIX}{job.state}",
                job_state=job.state,
                reason=job.backoff_reason if job.state == State.BACKOFF else "",
                created_at=now,
                next_attempt_at=now,
            )
            transaction.on_commit(request_delivery)
    return hook, hook.secret


def webhook_delete(*, hook: Webhook) -> None:
    """Delete a hook, its deliveries and their attempts."""
    hook.delete()


def webhook_resume(*, hook: Webhook) -> Webhook:
    """A paused hook is sent its events again, its pending deliveries first; its run of
    failures starts from nothing."""
    with transaction.atomic():
        Webhook.objects.filter(pk=hook.pk).update(paused_at=None, pause_reason="", failures=0)
        # Its waiting deliveries are due now, not at the retry time they had when paused.
        Delivery.objects.filter(hook=hook, status=Status.PENDING).update(
            next_attempt_at=timezone.now()
        )
        transaction.on_commit(request_delivery)
    hook.refresh_from_db()
    return hook


def webhook_pause(*, hook: Webhook, reason: str, now: datetime | None = None) -> Webhook:
    """Stop sending the hook its events until it is resumed (by hand, or when its attempts
    keep failing); events meanwhile are not recorded for it."""
    Webhook.objects.filter(pk=hook.pk, paused_at=None).update(
        paused_at=now or timezone.now(), pause_reason=reason
    )
    hook.refresh_from_db()
    return hook


def webhook_test(*, hook: Webhook, now: datetime | None = None) -> Delivery:
    """A test event for the hook, sent once at once, even to a paused hook (to see that its
    receiver is back before resuming it); it does not count towards pausing."""
    now = now or timezone.now()
    delivery = Delivery.objects.create(
        hook=hook, event=TEST_EVENT, created_at=now, next_attempt_at=now
    )
    transaction.on_commit(request_delivery)
    return delivery


# ---- Sending ---------------------------------------------------------------------------

# One pass at a time across every worker (the WEBHOOK_PASS lease), so webhooks hold at most
# one worker process however slow their receivers; a pass gives its worker back after
# PASS_SECONDS and asks for the next.
PASS_SECONDS = 10.0


def request_delivery() -> None:
    """Ask for a delivery pass soon (beat asks every WEBHOOK_BEAT_SECONDS anyway)."""
    SENDER.submit(
        BrokerRequest(
            "deliver webhooks",
            lambda client, app: app.send_task(DELIVER_TASK, retry=False),
            key=DELIVER_TASK,
        )
    )


WAKE_KEY = "caldera:hooks:wake"


def request_delivery_at(moment: datetime) -> None:
    """Ask for a pass at ``moment``, a retry's time; only the earliest is kept scheduled,
    and beat covers a lost one."""

    def wake(client, app) -> None:
        at = moment.timestamp()
        scheduled = client.get(WAKE_KEY)
        if scheduled is not None and time.time() < float(scheduled) <= at:
            return
        client.set(WAKE_KEY, at, ex=max(int(at - time.time()) + 60, 60))
        app.send_task(DELIVER_TASK, eta=moment, retry=False)

    SENDER.submit(BrokerRequest(f"deliver webhooks at {moment.isoformat()}", wake))


def _due(now: datetime) -> QuerySet[Delivery]:
    """Deliveries due at ``now``: of active hooks, and test events whatever their hook."""
    return Delivery.objects.filter(status=Status.PENDING, next_attempt_at__lte=now).filter(
        Q(hook__paused_at__isnull=True) | Q(event=TEST_EVENT)
    )


def _claim(now: datetime, limit: int) -> list[int]:
    """Due deliveries, claimed for longer than the pass that sends them can take (its last
    attempt may start just before PASS_SECONDS)."""
    longest = PASS_SECONDS + (transport.ATTEMPT_TIMEOUTS + 1) * settings.WEBHOOK_TIMEOUT_SECONDS
    lapse = now + timedelta(seconds=longest + 30)
    with transaction.atomic():
        due = list(
            _due(now)
            .select_for_update(of=("self",), skip_locked=True)
            .order_by("next_attempt_at", "pk")
            .values_list("pk", flat=True)[:limit]
        )
        if due:
            Delivery.objects.filter(pk__in=due).update(next_attempt_at=lapse)
    return due


def retry_delay(attempts: int) -> timedelta:
    """After the ``attempts``-th failure: base, 2 x base, 4 x base ... up to the maximum."""
    exponent = min(max(attempts - 1, 0), 60)
    base, cap = settings.WEBHOOK_RETRY_BASE_SECONDS, settings.WEBHOOK_RETRY_MAX_SECONDS
    return timedelta(seconds=min(base * 2**exponent, cap))


def job_url(job_id: int) -> str:
    return settings.PUBLIC_URL.rstrip("/") + reverse("job-detail", args=[job_id])


def delivery_body(delivery: Delivery) -> str:
    """The event's JSON, as sent at every attempt of it."""
    hook = delivery.hook
    event: dict = {
        "id": str(delivery.uuid),
        "type": delivery.event,
        "created_at": delivery.created_at.isoformat(),
        "hook": {"id": hook.pk, "department": hook.department.name if hook.department else None},
        "job": None,
    }
    job = (
        Job.objects.select_related("queue__node", "owner").filter(pk=delivery.job_id).first()
        if delivery.job_id is not None
        else None
    )
    if job is not None:
        last = JobEvent.objects.filter(job_id=job.pk).order_by("-created_at", "-id").first()
        event["job"] = {
            "id": job.pk,
            "name": job.name,
            "queue": job.queue.node.path,
            "owner": job.owner.get_username(),
            "state": delivery.job_state,
            "previous_state": delivery.job_state_before or None,
            "reason": delivery.reason,
            "last_event": None
            if last is None
            else {
                "reason": last.reason,
                "message": last.message,
                "at": last.created_at.isoformat(),
            },
            "url": job_url(job.pk),
        }
    return json.dumps(event, separators=(",", ":"))


def _send(delivery_id: int) -> None:
    """One attempt of a claimed delivery: its body made once, signed anew with this
    attempt's time, its URL checked again (what its host resolves to may have changed)."""
    delivery = Delivery.objects.select_related("hook__department").filter(pk=delivery_id).first()
    if delivery is None:
        return  # its hook was deleted meanwhile
    if not delivery.body:
        delivery.body = delivery_body(delivery)
        Delivery.objects.filter(pk=delivery.pk).update(body=delivery.body)
    body = delivery.body.encode()
    now = int(time.time())
    headers = {
        "Content-Type": "application/json",
        "User-Agent": "Caldera-Webhooks/1",
        "Caldera-Event": delivery.event,
        "Caldera-Delivery": str(delivery.uuid),
        "Caldera-Timestamp": str(now),
        "Caldera-Signature": signature(delivery.hook.secret, now, body),
    }
    try:
        where = destination(delivery.hook.url)
    except UrlRefused as refused:
        answer = transport.Answer(None, "", f"refused: {refused}", 0)
    else:
        answer = transport.post(where, body, headers)
    _record(delivery, answer)


def _record(delivery: Delivery, answer: transport.Answer) -> None:
    """The attempt, and what follows from it for the delivery and its hook, at once."""
    now = timezone.now()
    test = delivery.event == TEST_EVENT
    with transaction.atomic():
        locked = Delivery.objects.select_for_update().filter(pk=delivery.pk).first()
        if locked is None or locked.status != Status.PENDING:
            return
        Attempt.objects.create(
            delivery=locked,
            at=now,
            status_code=answer.status,
            answer=answer.body,
            error=answer.error,
            duration_ms=answer.duration_ms,
            ok=answer.ok,
        )
        locked.attempts += 1
        if answer.ok:
            locked.status, locked.finished_at = Status.DELIVERED, now
        elif test or locked.attempts >= settings.WEBHOOK_MAX_ATTEMPTS:
            locked.status, locked.finished_at = Status.FAILED, now
        else:
            locked.next_attempt_at = now + retry_delay(locked.attempts)
        locked.save(update_fields=["attempts", "status", "finished_at", "next_attempt_at"])
        if not test:
            _hook_answered(locked.hook_id, answer, now=now)
        if locked.status == Status.PENDING:
            retry_at = locked.next_attempt_at
            transaction.on_commit(lambda: request_delivery_at(retry_at))


def _hook_answered(hook_id: int, answer: transport.Answer, *, now: datetime) -> None:
    """Count the hook's run of failures; pause it at WEBHOOK_PAUSE_AFTER_FAILURES."""
    hooks = Webhook.objects.filter(pk=hook_id)
    if answer.ok:
        hooks.exclude(failures=0).update(failures=0)
        return
    hooks.update(failures=F("failures") + 1)
    limit = settings.WEBHOOK_PAUSE_AFTER_FAILURES
    reason = f"{limit} attempts in a row failed; the last: {answer.error}"
    hooks.filter(failures__gte=limit, paused_at=None).update(paused_at=now, pause_reason=reason)


def deliveries_send(*, limit: int | None = None) -> int:
    """One pass: claim what is due and send it; how many were sent. A pass that finds
    another running leaves the work to it; one that leaves work due asks for the next."""
    limit = limit or settings.WEBHOOK_BATCH
    with leased(WEBHOOK_PASS) as lease:
        if lease is None:
            return 0
        claimed = _claim(timezone.now(), limit)
        started, sent = time.monotonic(), 0
        for delivery_id in claimed:
            if time.monotonic() - started > PASS_SECONDS:
                # The rest are given back at once rather than when their claim lapses.
                Delivery.objects.filter(pk__in=claimed[sent:]).update(
                    next_attempt_at=timezone.now()
                )
                break
            _send(delivery_id)
            sent += 1
    if _due(timezone.now()).exists():
        request_delivery()
    return sent


def deliveries_prune(*, now: datetime | None = None) -> int:
    """Delete delivered and failed deliveries (and their attempts) made more than
    WEBHOOK_DELIVERIES_DAYS ago; pending ones stay, however old. How many went."""
    before = (now or timezone.now()) - timedelta(days=settings.WEBHOOK_DELIVERIES_DAYS)
    old = Delivery.objects.filter(created_at__lt=before).exclude(status=Status.PENDING)
    deleted = 0
    # Django deletes each delivery's attempts by its id: a chunk at a time, bounded.
    for part in chunks(list(old.values_list("pk", flat=True))):
        deleted += Delivery.objects.filter(pk__any=part).delete()[0]
    return deleted
