"""What Caldera says of a job, stored as a code with its arguments: each declared wording
renders in English exactly as the text stored beside it, and in Simplified Chinese with
the same numbers; rows without a code keep their text."""

from __future__ import annotations

import re
from datetime import UTC, datetime

import pytest
from django.utils import timezone, translation

from jobs.models import Job, JobEvent
from kube.scheduling import ClusterNode
from queues import phrases
from queues.admission import OVER_QUOTA, QUEUE_PRIORITY, RECLAIM, Admitted, Preemption, Releasing
from queues.phrases import WORDINGS, Phrase, said
from queues.placement import unplaceable
from queues.quota import Node, Shortfall

from ..support.catalogues import compile_catalogues

GI = 1024**3
AT = datetime(2026, 11, 27, 11, 18, 48, tzinfo=UTC)


@pytest.fixture(autouse=True, scope="module")
def _catalogues():
    compile_catalogues()


def _in_chinese(phrase: Phrase) -> str:
    with translation.override("zh-hans"), timezone.override("Asia/Shanghai"):
        return phrase.text()


def _numbers(text: str) -> list[str]:
    return re.findall(r"\d+(?:\.\d+)?(?:Gi|G|Mi)?", text)


SHORT = Shortfall("root/algorithm/video", "cpu", 12000, 12000, 14000)
CLUSTER = Shortfall("cluster", "memory", 8 * GI, 60 * GI, 64 * GI)
VICTIM = Admitted(41, "root/intern/video", {"cpu": 4000, "memory": 8 * GI}, 0, AT)


def test_a_quota_shortfall_says_in_english_what_it_stores_and_in_chinese_the_same_numbers():
    phrase = SHORT.phrase()
    assert SHORT.message() == phrase.english()
    assert phrase.english() == (
        "Insufficient quota in root/algorithm/video: cpu requested 12, free 2 (used 12 of max 14)"
    )
    chinese = _in_chinese(phrase)
    assert chinese == ("root/algorithm/video 的配额不足：cpu 请求 12，空闲 2（已用 12，上限 14）")
    assert CLUSTER.message() == (
        "Insufficient cluster capacity: memory requested 8Gi, free 4Gi (used 60Gi of "
        "allocatable 64Gi)"
    )
    assert _in_chinese(CLUSTER.phrase()) == (
        "集群容量不足：memory 请求 8Gi，空闲 4Gi（已用 60Gi，可分配 64Gi）"
    )


@pytest.mark.parametrize(
    ("preemption", "english"),
    [
        (
            Preemption(VICTIM, RECLAIM, "root/algorithm", by=58, borrower="root/intern"),
            "Preempted: root/algorithm reclaimed its guaranteed quota (min) from root/intern, "
            "which used more than its min, for job #58; released cpu 4, memory 8Gi",
        ),
        (
            Preemption(VICTIM, QUEUE_PRIORITY, "root/intern/video", by=58),
            "Preempted: job #58 of higher priority in the same queue needed the quota of "
            "root/intern/video; released cpu 4, memory 8Gi",
        ),
        (
            Preemption(VICTIM, OVER_QUOTA, "root/intern"),
            "Preempted: the quota of root/intern was lowered below its usage; released cpu 4, "
            "memory 8Gi",
        ),
    ],
)
def test_a_preemption_reads_the_same_in_both_languages_but_for_the_words(preemption, english):
    assert preemption.message() == english
    chinese = _in_chinese(preemption.phrase())
    assert chinese.startswith("被抢占：") and "cpu 4、memory 8Gi" in chinese
    assert _numbers(chinese) == _numbers(english)


def test_waiting_for_leaving_jobs_counts_them_in_each_language():
    one, two = Releasing((41,), SHORT), Releasing((41, 42), SHORT)
    assert one.message().startswith("Waiting for 1 job leaving the cluster (#41) to release")
    assert two.message().startswith("Waiting for 2 jobs leaving the cluster (#41, #42) to")
    assert _in_chinese(two.phrase()).startswith(
        "正在等待 2 个离开集群的作业（#41、#42）释放其配额；"
        "在此之前：root/algorithm/video 的配额不足"
    )


def test_a_pod_no_node_can_hold_is_said_in_chinese_with_its_sizes():
    tree = [Node(path="root", max={"nvidia.com/gpu": 8})]
    nowhere = unplaceable(
        pods={"head": {"cpu": 20000}, "workers[0]": {"nvidia.com/gpu": 1}},
        nodes=[ClusterNode("node-1", {"cpu": 16000})],
        path_nodes=tree,
    )
    assert nowhere is not None
    assert nowhere.reason == "head asks for cpu 20; the largest node has 16"
    assert _in_chinese(nowhere.phrase) == "head 请求 cpu 20；最大的节点只有 16"


def test_times_are_stored_in_utc_and_shown_in_the_readers_zone():
    phrase = Phrase(
        phrases.NEXT_TRY, {"reason": SHORT.phrase().as_json(), "next_at": phrases.at(AT)}
    )
    with timezone.override("Asia/Shanghai"):
        assert phrase.english().endswith("; next try at 11:18:48")
        assert phrase.in_english().endswith("; next try at 19:18:48")
    assert _in_chinese(phrase).endswith("；下次尝试于 19:18:48")


def test_the_stored_english_ignores_the_readers_language_and_zone():
    """The writer renders English without activating a language or a zone: what a row
    stores is the same whoever's request or task wrote it."""
    phrase = Phrase(
        phrases.NEXT_TRY,
        {"reason": Releasing((41, 42), SHORT).phrase().as_json(), "next_at": phrases.at(AT)},
    )
    stored = phrase.english()
    with translation.override("zh-hans"), timezone.override("Asia/Shanghai"):
        assert phrase.english() == stored
        assert phrase.in_english().endswith("; next try at 19:18:48")
        assert "#41, #42" in phrase.in_english()
        assert translation.get_language() == "zh-hans"
    assert stored.startswith("Waiting for 2 jobs leaving the cluster (#41, #42)")
    assert stored.endswith("; next try at 11:18:48")


def test_counts_are_grouped_and_plural_where_english_needs_it():
    ahead = Phrase(phrases.WAITING_AHEAD, {"count": phrases.number(2007)})
    assert ahead.english() == "2,007 jobs ahead"
    assert Phrase(phrases.WAITING_AHEAD, {"count": phrases.number(1)}).english() == "1 job ahead"
    assert _in_chinese(ahead) == "前面有 2,007 个作业"


def _example(value: str) -> object:
    if value in {
        "count",
        "nodes",
        "attempt",
        "attempts",
        "by",
        "copy",
        "old",
        "new",
        "cycle",
        "holding",
        "next",
    }:
        return 3
    if value in {"next_at", "until", "deadline"}:
        return phrases.at(AT)
    if value == "since":
        return phrases.moment(AT)
    return f"<{value}>"


@pytest.mark.parametrize("code", sorted(WORDINGS))
def test_every_wording_has_a_chinese_translation_with_the_same_placeholders(code):
    wording = WORDINGS[code]
    names = set(re.findall(r"%\((\w+)\)s", wording.singular)) | ({wording.count} - {""})
    phrase = Phrase(code, {name: _example(name) for name in names})
    english, chinese = phrase.english(), _in_chinese(phrase)
    assert chinese != english
    words = re.sub(r"%\(\w+\)s", "", wording.singular)
    if re.search(r"[a-z]{3}", words):
        assert re.search(r"[\u4e00-\u9fff]", chinese)
    shown = set(re.findall(r"%\((\w+)\)s", wording.singular))
    for name in shown - {"next_at", "until", "deadline", "since"}:
        assert f"<{name}>" in chinese or str(_example(name)) in chinese


def test_a_row_without_a_code_says_its_stored_text_in_any_language():
    event = JobEvent(reason="Backoff", message="Insufficient quota in root/a (written in 2025)")
    job = Job(backoff_reason="its namespace is gone")
    with translation.override("zh-hans"):
        assert event.said == "Insufficient quota in root/a (written in 2025)"
        assert job.backoff_said == "its namespace is gone"
        assert said("a.code.from.a.later.version", {}, "stored words") == "stored words"
        # Arguments that do not fill the wording: the stored text is still true.
        assert said(phrases.QUOTA_SHORT, {"where": "root"}, "stored words") == "stored words"


def test_a_cleared_reason_says_nothing_whatever_code_was_left():
    job = Job(backoff_reason="", backoff_code=phrases.QUOTA_SHORT, backoff_args={})
    assert job.backoff_said == ""
