"""Schemathesis over /api/schema/, as a member and as staff: no 5xx, and every answer as
the schema declares it (its status code, content type and body).

A bounded run: for each operation, MAX_EXAMPLES requests built from the schema (positive:
valid by the schema) and as many that break it (negative: wrong types, missing fields,
out-of-range values), derandomized so every run sends the same requests. Operations on a
job, a queue or a department are run once with generated path parameters (mostly 404s) and
once with a real one, so the handlers behind the 404 are exercised too. The requests go
straight to the WSGI application in this process, against this test's database.

Checks: ``not_a_server_error``, ``status_code_conformance``, ``content_type_conformance``
and ``response_schema_conformance``. Not run, on purpose: ``negative_data_rejection`` and
``positive_data_acceptance`` (the API is more lenient than its documented schema, e.g. it
takes ``"4"`` for an integer, and a valid-by-schema job can still be refused by the quota
rules), and the stateful and authorization checks (tenancy has its own tests). No operation
is excluded.
"""

from __future__ import annotations

import copy

import pytest
import schemathesis
from django.core.wsgi import get_wsgi_application
from hypothesis import HealthCheck, Phase, given, settings
from rest_framework.authtoken.models import Token
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from .conftest import RAY_JOB

MAX_EXAMPLES = 15
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
]


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
        case.call_and_validate(headers=headers, checks=CHECKS)

    check()


@pytest.mark.parametrize("persona", ["member", "staff"])
def test_the_api_answers_as_its_schema_says(persona, request, api, member, transactional_db):
    """transactional_db: each request commits, as in production, so one refused statement
    cannot poison the requests after it."""
    user = request.getfixturevalue(persona)
    job = api(member).post("/api/v1/jobs/", copy.deepcopy(RAY_JOB), format="json").json()
    token, _ = Token.objects.get_or_create(user=user)
    headers = {"Authorization": f"Token {token.key}"}
    real = {"id": job["id"], "name": "root-algorithm-video"}
    real_by_path = {
        "/api/v1/departments/{name}/members/": {"name": "algorithm"},
        "/api/v1/departments/{name}/members/{username}/": {"name": "algorithm"},
    }
    schema = schemathesis.openapi.from_wsgi("/api/schema/", get_wsgi_application())

    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 17
    for operation in operations:
        names = {parameter.name for parameter in operation.path_parameters}
        runs = [None]
        if names:
            runs.append(real_by_path.get(operation.path) or {name: real[name] for name in names})
        for fixed in runs:
            for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
                if mode == GenerationMode.NEGATIVE and not breakable(operation, fixed):
                    continue  # nothing left to send wrong
                run_operation(operation, mode=mode, headers=headers, path_parameters=fixed)
