"""The refusals of reading and acting on jobs in the client's language: a client sending
``Accept-Language: zh-Hans`` reads why the jobs list's parameters, a bulk action, a job's
own action (cancel, priority, move to the head), a token's scope or a rate limit refused it
in Simplified Chinese, under the same keys; without the header, the English the CLI and
docs/api.md show, as before."""

from __future__ import annotations

import pytest

from jobs.models import Job

from ..access.test_tokens import bearer, make
from ..support.jobs import RAY_JOB, submit_document
from ..support.personas import client_for
from .test_refusals_in_chinese import (  # noqa: F401  (autouse: compiled, reset after)
    CHINESE,
    _compiled_catalogue,
    _default_language_after,
    in_chinese,
)
from .test_throttling import (
    BATCH,
    limits,  # noqa: F401  (autouse: a Redis database of its own)
    sweep,
)

pytestmark = pytest.mark.django_db

JOBS = "/api/v1/jobs/"
BULK = "/api/v1/jobs/bulk/"
MEMBERS_CANCEL = "members cancel only their own jobs; managers cancel any job"


def test_the_jobs_lists_parameters_are_refused_in_chinese_under_their_names(api, member):
    query = (
        "?limit=0&state=queued,nope&after=not-a-cursor&sort=nowhere&priority_min=1&priority_min=2"
    )

    english = api(member).get(JOBS + query)
    chinese = api(member).get(JOBS + query, **CHINESE)

    assert english.status_code == chinese.status_code == 400
    assert (
        set(chinese.json())
        == set(english.json())
        == {
            "limit",
            "state",
            "after",
            "sort",
            "priority_min",
        }
    )
    assert english.json()["limit"] == ["must be at least 1, got '0'"]
    assert english.json()["after"] == ["not a cursor this list gave"]
    assert english.json()["priority_min"] == ["is given 2 times; give it once"]
    assert chinese.json()["limit"] == ["必须不小于 1，实际为 '0'"]
    assert chinese.json()["after"] == ["不是此列表给出的游标"]
    assert chinese.json()["priority_min"] == ["给出了 2 次；只能给出一次"]
    assert chinese.json()["state"][0].startswith("未知的 state 取值 'nope'；可选：queued, ")
    in_chinese(chinese.json())


def test_a_bulk_actions_refusals_and_outcomes_are_in_chinese(api, member, other_member):
    mine = submit_document(member, RAY_JOB, name="sweep-0")
    theirs = submit_document(other_member, RAY_JOB, name="sweep-1")
    body = {"ids": [mine.pk, theirs.pk, 999_999], "action": "cancel"}

    answer = api(member).post(BULK, body, format="json", **CHINESE).json()

    assert answer["done"] == [mine.pk]
    assert answer["refused"] == [
        {"reason": "没有这个作业", "ids": [999_999]},
        {"reason": "成员只能取消自己的作业；管理员可以取消任何作业", "ids": [theirs.pk]},
    ]
    assert not any(ch.isascii() and ch.isalpha() for ch in answer["summary"])
    in_chinese({"refused": [refused["reason"] for refused in answer["refused"]]})

    nothing = {"filter": {"q": "matches-nothing"}, "action": "cancel"}
    english = api(member).post(BULK, nothing, format="json")
    chinese = api(member).post(BULK, nothing, format="json", **CHINESE)
    assert english.json() == {"filter": ["names no job"]}
    assert chinese.json() == {"filter": ["没有指定任何作业"]}
    misspelt = {"filter": {"sate": "queued"}, "action": "cancel"}
    refused = api(member).post(BULK, misspelt, format="json", **CHINESE).json()
    assert list(refused) == ["filter.sate"]
    assert refused["filter.sate"][0].startswith("不是作业列表的筛选条件；可选：")
    unknown = api(member).post(BULK, {**body, "action": "explode"}, format="json", **CHINESE)
    assert unknown.status_code == 400 and list(unknown.json()) == ["action"]
    in_chinese(unknown.json())

    theirs_again = api(member).post(BULK, {**body, "ids": [theirs.pk]}, format="json").json()
    assert theirs_again["refused"] == [{"reason": MEMBERS_CANCEL, "ids": [theirs.pk]}]
    assert theirs_again["summary"] == f"0 cancelled; 1 refused: {MEMBERS_CANCEL}"


def test_a_jobs_own_actions_are_refused_in_chinese(api, member, other_member):
    job = submit_document(member, RAY_JOB, name="sweep-0")
    theirs = submit_document(other_member, RAY_JOB, name="sweep-1")
    Job.objects.filter(pk=job.pk).update(state="succeeded")
    priority = theirs.priority

    again = api(member).post(f"{JOBS}{job.pk}/cancel/", **CHINESE)
    raised = api(member).patch(f"{JOBS}{theirs.pk}/", {"priority": 5}, format="json", **CHINESE)
    moved = api(member).post(f"{JOBS}{theirs.pk}/move-to-head/", **CHINESE)

    assert again.status_code == 409
    assert again.json() == {"detail": "作业已处于 succeeded 状态"}
    assert raised.status_code == moved.status_code == 403
    assert raised.json() == {"detail": "成员只能更改自己的作业"}
    assert moved.json() == {"detail": "只有部门管理员和平台工作人员可以移动作业"}
    english = api(member).post(f"{JOBS}{job.pk}/cancel/")
    assert english.json() == {"detail": "the job has already succeeded"}
    assert Job.objects.get(pk=theirs.pk).priority == priority
    pending = submit_document(member, RAY_JOB, name="sweep-2")
    body = {"ids": [pending.pk], "action": "resubmit"}
    resubmitted = api(member).post(BULK, body, format="json", **CHINESE).json()
    assert resubmitted["refused"] == [
        {"reason": "只有已结束的作业才能重新提交；此作业处于 queued 状态", "ids": [pending.pk]}
    ]


def test_a_tokens_scope_is_refused_in_chinese(member):
    key = make(member, right="read")["token"]

    chinese = bearer(key).post(JOBS, RAY_JOB, format="json", **CHINESE)
    english = bearer(key).post(JOBS, RAY_JOB, format="json")

    assert chinese.status_code == english.status_code == 403
    assert chinese.json() == {"detail": "此令牌的权限范围是 read；此操作需要 submit"}
    assert english.json() == {"detail": "this token's scope is read; this needs submit"}


def test_a_rate_limit_is_said_in_chinese_with_the_same_keys(settings, member):
    settings.API_READ_RATE_PER_TOKEN = "1/day"
    client = client_for(member)
    assert client.get(JOBS).status_code == 200

    chinese = client.get(JOBS, **CHINESE)
    english = client.get(JOBS)

    assert chinese.status_code == english.status_code == 429
    assert set(chinese.json()) == set(english.json())
    assert chinese.json()["limit"] == english.json()["limit"] == "read per token"
    wait = chinese.json()["retry_after"]
    assert chinese.json()["detail"] == f"读取过多：此令牌的限额为每天 1 次；请在 {wait} 秒后重试"
    wait = english.json()["retry_after"]
    assert english.json()["detail"] == (
        f"Too many reads: this token's limit is 1 a day; retry in {wait} s"
    )

    settings.API_SUBMIT_RATE_PER_PERSON = "5/minute"
    too_large = client.post(BATCH, sweep(6), format="json", **CHINESE)
    assert too_large.status_code == 429
    assert too_large.json()["detail"] == (
        "此请求计为 6 次（批量提交按其中每个作业计数），超过了你的限额"
        "（你所有的令牌和会话合计，每分钟 5 次）：一次最多发送 5 个"
    )
    assert not Job.objects.exists()


def test_a_history_of_no_node_is_refused_in_chinese(api, staff, tree):
    url = "/api/v1/quota-tree/history/?node=root/nowhere"

    english = api(staff).get(url)
    chinese = api(staff).get(url, **CHINESE)

    assert english.status_code == chinese.status_code == 400
    assert english.json() == {"node": ["'root/nowhere' is no node of the quota tree"]}
    assert chinese.json() == {"node": ["'root/nowhere' 不是配额树中的节点"]}
