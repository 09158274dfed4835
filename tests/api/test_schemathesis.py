"""Schemathesis over /api/schema/, as a member and as staff, with every check it has: no
5xx, every answer as the schema declares it (status code, content type, headers, body),
every request the schema refuses refused (negative data rejection), and every request it
allows accepted (positive data acceptance), save the refusals an operation declares beyond
its schema (``queues.api_base.refusals``: a queue that does not exist, a name already taken,
an entrypoint or a script), which no schema can rule out. A 400 of a valid request that
names any other field fails the run: the schema and the server disagree.

A bounded run: for each operation, MAX_EXAMPLES requests built from the schema (positive)
and as many that break it (negative: wrong types, missing fields, out-of-range values),
derandomized so every run sends the same requests. Operations on a job, a queue or a
department are run once with generated path parameters (mostly 404s) and once with a real
one, so the handlers behind the 404 are exercised too. The requests go straight to the
WSGI application in this process, against this test's database. No operation and no check
is excluded.
"""

from __future__ import annotations

import copy
import re

import pytest
import schemathesis
from django.core.wsgi import get_wsgi_application
from hypothesis import HealthCheck, Phase, given, settings
from schemathesis import GenerationMode
from schemathesis.specs.openapi.checks import positive_data_acceptance

from access.services import full_token
from hooks.services import webhook_create
from jobs.models import Job
from queues.api_base import REFUSALS

from ..support.jobs import RAY_JOB

MAX_EXAMPLES = 15
_INDEX = re.compile(r"\[\d+\]")


def declared(field: str, refusals: dict[str, str]) -> bool:
    """Whether the operation declares refusing ``field``: ``jobs[3].queue`` is declared by
    ``jobs[].queue``, ``spec.root.children[0].name`` by ``spec.root.*``; ``*`` declares
    any field (a body whose keys the schema leaves open, refused for what they hold)."""
    field = _INDEX.sub("[]", field)
    return field in refusals or any(
        name == "*" or (name.endswith(".*") and (field + ".").startswith(name[:-1]))
        for name in refusals
    )


def positive_data_acceptance_unless_declared(ctx, response, case):
    """Schemathesis' ``positive_data_acceptance``, except for a 400 that names only fields
    whose refusal the operation declares."""
    refusals = case.operation.definition.raw.get(REFUSALS)
    if response.status_code == 400 and refusals:
        if all(declared(field, refusals) for field in response.json()):
            return None
    return positive_data_acceptance(ctx, response, case)


def breakable(operation, fixed: dict | None) -> bool:
    """Whether a request can break the schema: it has a body, a query parameter or a path
    parameter that is neither fixed nor a plain string (any text is a valid string)."""
    unfixed = [
        parameter
        for parameter in operation.path_parameters
        if parameter.name not in (fixed or {})
        and parameter.definition.get("schema", {}).get("type") != "string"
    ]
    return bool(len(operation.body) or len(operation.query) or unfixed)


def run_operation(operation, *, mode: GenerationMode, headers: dict, path_parameters=None):
    strategy = operation.as_strategy(generation_mode=mode, path_parameters=path_parameters)

    @given(case=strategy)
    @settings(
        max_examples=MAX_EXAMPLES,
        derandomize=True,
        database=None,
        deadline=None,
        phases=[Phase.explicit, Phase.generate, Phase.shrink],
        suppress_health_check=list(HealthCheck),
    )
    def check(case):
        # Every check schemathesis has (its defaults are all of them), the one above in
        # place of positive_data_acceptance.
        case.call_and_validate(
            headers=headers,
            excluded_checks=[positive_data_acceptance],
            additional_checks=[positive_data_acceptance_unless_declared],
        )

    check()


@pytest.mark.parametrize("persona", ["member", "staff"])
def test_it_answers_as_its_schema_says(
    persona, request, api, member, departments, settings, transactional_db
):
    """transactional_db: each request commits, as in production, so one refused statement
    cannot poison the requests after it."""
    user = request.getfixturevalue(persona)
    job = api(member).post("/api/v1/jobs/", copy.deepcopy(RAY_JOB), format="json").json()
    token = full_token(user, name="tests")
    headers = {"Authorization": f"Token {token}"}
    real = {"id": job["id"], "name": "root-algorithm-video"}
    # A webhook of the job's, whose owner (the member) and staff may read and change it;
    # its URL is never sent to (no worker runs here).
    settings.WEBHOOK_ALLOW_HTTP, settings.WEBHOOK_ALLOWED_NETWORKS = True, ["127.0.0.1/32"]
    hook, _ = webhook_create(
        job=Job.objects.get(pk=job["id"]), url="http://127.0.0.1:9/hook", actor=member
    )
    real_by_path = {
        "/api/v1/departments/{name}/members/": {"name": "algorithm"},
        "/api/v1/departments/{name}/members/{username}/": {"name": "algorithm"},
        "/api/v1/departments/{name}/webhooks/": {"name": "algorithm"},
        "/api/v1/webhooks/{id}/": {"id": hook.pk},
        "/api/v1/webhooks/{id}/deliveries/": {"id": hook.pk},
        "/api/v1/webhooks/{id}/test/": {"id": hook.pk},
    }
    schema = schemathesis.openapi.from_wsgi("/api/schema/", get_wsgi_application())

    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 17
    failures = []
    for operation in operations:
        names = {parameter.name for parameter in operation.path_parameters}
        runs = [None]
        if names:
            runs.append(real_by_path.get(operation.path) or {name: real[name] for name in names})
        for fixed in runs:
            for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
                if mode == GenerationMode.NEGATIVE and not breakable(operation, fixed):
                    continue  # nothing left to send wrong
                try:
                    run_operation(operation, mode=mode, headers=headers, path_parameters=fixed)
                except (Exception, BaseExceptionGroup) as failure:  # every one, not the first
                    failures.append(f"{operation.label}, {mode.value}, {fixed}:\n{failure}")

    assert not failures, "\n\n".join(failures)
