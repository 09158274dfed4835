"""The researcher's pages in Simplified Chinese when the browser asks for it (Accept-Language
zh-CN), in the words people who run GPU clusters use (作业, 队列, 配额, 最小保障, 上限), and
unchanged in English."""

from __future__ import annotations

import html
import re
from pathlib import Path

import pytest
from django.conf import settings
from django.core.management import call_command
from django.urls import reverse
from django.utils import translation
from django.utils.translation import trans_real

from ..support.jobs import PYTORCH_JOB, RAY_JOB, submit, submit_document
from ..support.pages import RAY_FORM, confirmed, login

pytestmark = pytest.mark.django_db

CHINESE = {"HTTP_ACCEPT_LANGUAGE": "zh-CN,zh;q=0.9"}
ENGLISH = {"HTTP_ACCEPT_LANGUAGE": "en-GB,en;q=0.9"}


@pytest.fixture(scope="module", autouse=True)
def _compiled_catalogue():
    """The catalogue compiled as ``make`` compiles it, when the compiled file is missing or
    older than the messages; the translations read afresh, as a new process reads them."""
    source = Path(settings.LOCALE_PATHS[0]) / "zh_Hans" / "LC_MESSAGES" / "django.po"
    compiled = source.with_suffix(".mo")
    if not compiled.exists() or compiled.stat().st_mtime < source.stat().st_mtime:
        call_command("compilemessages", locale=["zh_Hans"], verbosity=0)
    trans_real._translations = {}
    trans_real._default = None


@pytest.fixture(autouse=True)
def _default_language_after():
    """A page asked for in Chinese leaves the language active in this thread; the tests that
    run next here read words outside a request, in the default language."""
    yield
    translation.deactivate()


def text(response) -> str:
    """The page's own part (the layout around it is translated with the layout) as a person
    reads it: entities resolved, tags and extra spaces dropped."""
    page = response.content.decode()
    main = re.search(r"<main\b.*</main>", page, re.S)
    body = re.sub(r"<[^>]+>", " ", main[0] if main else page)
    return " ".join(html.unescape(body).split())


def chinese(client, url: str, status: int = 200):
    response = client.get(url, **CHINESE)
    assert response.status_code == status, response.content[:500]
    assert '<html lang="zh-hans"' in response.content.decode()
    return response


def test_the_dashboard_speaks_chinese(client, member):
    submit(member, name="my-training")
    page = text(chinese(login(client, member), reverse("dashboard")))

    for words in ("仪表板", "我的作业", "我的队列", "提交作业", "排队中", "入队时间", "配额节点"):
        assert words in page
    for words in ("Dashboard", "My jobs", "My queues", "Submit a job", "Enqueued", "queued"):
        assert words not in page
    assert "my-training" in page  # names are the person's own


def test_the_job_list_its_filters_and_bulk_form_speak_chinese(client, member):
    submit(member, name="sweep-0")
    response = chinese(login(client, member), reverse("job-list"))
    page = text(response)

    for words in ("名称包含", "所有者", "筛选", "清除", "应用到选中的作业", "1 个作业", "排队中"):
        assert words in page
    for words in ("Name contains", "Filter", "Apply to the selected jobs", "1 job", "Queued"):
        assert words not in page
    assert "应用到全部 1 个匹配的作业" in page
    actions = re.search(r'<select name="action".*?</select>', response.content.decode(), re.S)[0]
    for action in ("取消", "设置优先级", "移到队首", "重新提交（已结束的作业）"):
        assert f">{action}</option>" in actions
    grouped = chinese(client, reverse("job-list") + "?group=state")
    assert 'aria-label="按状态统计的作业"' in grouped.content.decode()
    assert "排队中 1" in text(grouped)  # a group is named by its state's label
    # Job kinds and runtimes are names from the cluster, not words to translate.
    assert "KubeRay RayJob" in page


def test_a_job_page_speaks_chinese(client, member):
    job = submit(member, name="my-training")
    page = text(chinese(login(client, member), reverse("job-detail", args=[job.pk])))

    for words in ("状态", "排位", "命名空间", "资源请求", "取消作业", "提交副本", "事件", "清单"):
        assert words in page
    for words in ("Cancel job", "Submit a copy", "Namespace", "Events", "Manifest"):
        assert words not in page
    assert "暂无估计" in page  # how its start is estimated
    log = client.get(reverse("job-log", args=[job.pk]), **CHINESE).content.decode()
    assert "作业尚未开始：它在队列中等待，准入后才会创建其 head Pod。" in log


def test_the_submit_form_speaks_chinese_with_examples_that_read_as_examples(client, member):
    response = chinese(login(client, member), reverse("job-submit"))
    page = text(response)

    for words in ("提交作业", "名称", "镜像", "优先级", "添加 Worker 组", "调度", "预览"):
        assert words in page
    for words in ("Submit job", "Add a worker group", "Scheduling", "Preview", "e.g."):
        assert words not in page
    assert 'placeholder="例如 rayjob-video"' in response.content.decode()
    assert 'title="必填"' in response.content.decode()


def test_the_submit_forms_errors_are_in_chinese_beside_their_fields(client, member):
    empty = {name: "" for name in RAY_FORM} | {"kind": "ray", "worker_replicas": "1"}
    response = login(client, member).post(reverse("job-submit"), empty, **CHINESE)

    assert response.status_code == 400
    errors = response.context["errors"]
    assert errors["head"] == ["请填写该 Pod 的 CPU 和内存"]
    assert errors["name"] == ["必填"]
    page = text(response)
    assert "作业未提交。请修改下面标出的字段。" in page
    assert "is required" not in page and "The job was not submitted" not in page


def test_the_queue_list_and_a_queue_page_speak_chinese(client, member):
    job = submit(member)
    login(client, member)

    queues = text(chinese(client, reverse("queue-list")))
    assert "配额节点" in queues and "已用 / 上限" in queues
    assert "Quota node" not in queues and "Used / max" not in queues

    page = text(chinese(client, reverse("queue-detail", args=[job.queue.name])))
    for words in ("配额", "最小保障", "上限", "等待中", "在集群中", "等待原因", "预计开始"):
        assert words in page
    for words in ("Quota", "Min", "In the cluster", "Waiting because", "Expected start"):
        assert words not in page


def test_the_quota_tree_speaks_chinese(client, member):
    page = text(chinese(login(client, member), reverse("quota-tree")))

    for words in ("配额树", "最小保障", "上限", "借用", "借出", "空闲", "等待需求"):
        assert words in page
    for words in ("Quota tree", "Borrowed", "Lent", "Pending demand", "How the figures"):
        assert words not in page


def test_the_bulk_question_is_asked_in_chinese_with_the_right_counts(
    client, member, other_member, manager
):
    submit_document(member, RAY_JOB, name="sweep-0")
    submit_document(member, RAY_JOB, name="sweep-1")
    submit_document(other_member, RAY_JOB, name="sweep-2")
    submit_document(manager, PYTORCH_JOB, name="sweep-3")

    answer = login(client, manager).post(
        reverse("job-bulk"),
        {"filter": "q=sweep", "action": "cancel", "scope": "filter", "back": "/jobs/?q=sweep"},
        **CHINESE,
    )

    assert answer.status_code == 200
    page = text(answer)
    assert "取消 2 个队列中 3 人的 4 个作业？" in page
    assert "alice（2）、carol（1）、你（1）" in page
    assert "其中 3 个是其他人的作业。" in page
    assert "Cancel" not in page and "Go back" not in page
    assert "取消 4 个作业" in page  # the confirming button, short


def test_what_an_action_did_is_said_in_chinese(client, member):
    job = submit(member, name="my-training")
    login(client, member)

    answer = confirmed(client, reverse("job-cancel", args=[job.pk]), {}, follow=True, **CHINESE)

    assert "作业已取消。" in text(answer)
    assert "Job cancelled." not in text(answer)


def test_the_pages_stay_in_english_for_an_english_browser(client, member):
    job = submit(member, name="my-training")
    login(client, member)

    dashboard = text(client.get(reverse("dashboard"), **ENGLISH))
    assert "My jobs" in dashboard and "Submit a job" in dashboard and "queued" in dashboard
    assert "我的作业" not in dashboard
    detail = text(client.get(reverse("job-detail", args=[job.pk]), **ENGLISH))
    assert "Cancel job" in detail and "取消作业" not in detail
    form = client.get(reverse("job-submit"), **ENGLISH).content.decode()
    assert 'placeholder="e.g. rayjob-video"' in form and "提交作业" not in form
