"""Caldera's own refusals in the client's language: a client sending ``Accept-Language:
zh-Hans`` (or zh-CN) reads why a submission, its dry run, a batch, a Kubernetes object or a
quota tree was refused in Simplified Chinese. The keys are the API's paths and stay as
they are; without the header every reason is the English the CLI and docs/api.md show."""

from __future__ import annotations

import copy
import re
from pathlib import Path

import pytest
import yaml
from django.urls import reverse

from jobs.document.schema import _OTHER_KIND, other_kind
from jobs.models import KINDS, Job
from queues.models import QuotaNode

from ..pages.test_translated_pages import (  # noqa: F401  (autouse: compiled, reset after)
    _compiled_catalogue,
    _default_language_after,
)
from ..support.jobs import RAY_JOB
from ..support.pages import RAY_FORM, login
from ..support.trees import seed_tree_document

MANIFESTS = Path(__file__).parent.parent / "support" / "manifests"

pytestmark = pytest.mark.django_db

JOBS = "/api/v1/jobs/"
CHINESE = {"HTTP_ACCEPT_LANGUAGE": "zh-Hans"}
CHINA = {"HTTP_ACCEPT_LANGUAGE": "zh-CN,zh;q=0.9"}
# A reason still in English: three English words in a row (names such as "RayJob" or
# "caldera.io/*" and quoted values stand alone in the Chinese).
ENGLISH_WORDS = re.compile(r"[A-Za-z]+ [A-Za-z]+ [A-Za-z]+")

# Several problems at once: no image, a quantity that is none, replicas out of range, a
# field Caldera does not know.
BROKEN = {
    **copy.deepcopy(RAY_JOB),
    "image": "",
    "head": {"resources": {"cpu": "4 cores", "memory": "4G"}},
    "workers": [{"name": "small-group", "replicas": -1, "resources": {"cpu": "4"}}],
    "colour": "blue",
    "command": ["python", "train.py"],
}
BROKEN_IN_ENGLISH = {
    "image": ["is required"],
    "head.resources.cpu": [
        "'4 cores' is not a Kubernetes quantity (examples: 500m, 2, 1.5, 4Gi, 4G)"
    ],
    "workers[0].replicas": ["must be between 0 and 1000, got -1"],
    "colour": ["unknown field"],
    "command": ["Ray jobs take an entrypoint, not a command"],
}


def reasons(answer: dict) -> list[str]:
    return [reason for key in sorted(answer) for reason in answer[key]]


def in_chinese(answer: dict) -> None:
    """Every reason has Chinese in it and no English sentence left."""
    for reason in reasons(answer):
        assert re.search(r"[\u4e00-\u9fff]", reason), reason
        assert not ENGLISH_WORDS.search(reason), reason


def test_a_refused_document_answers_its_reasons_in_chinese_under_the_same_paths(api, member):
    english = api(member).post(JOBS, BROKEN, format="json")
    chinese = api(member).post(JOBS, BROKEN, format="json", **CHINESE)

    assert english.status_code == chinese.status_code == 400
    assert english.json() == BROKEN_IN_ENGLISH
    answer = chinese.json()
    assert set(answer) == set(BROKEN_IN_ENGLISH)
    assert answer["image"] == ["必填"]
    assert answer["head.resources.cpu"] == [
        "'4 cores' 不是合法的 Kubernetes 数量（例如：500m、2、1.5、4Gi、4G）"
    ]
    assert answer["workers[0].replicas"] == ["必须在 0 到 1000 之间，实际为 -1"]
    assert answer["colour"] == ["未知字段"]
    assert answer["command"] == ["Ray 作业使用入口命令（entrypoint），而不是 command"]
    in_chinese(answer)
    assert not Job.objects.exists()


def test_the_dry_run_and_the_batch_refuse_in_chinese_too(api, member):
    dry_run = api(member).post(f"{JOBS}dry-run/", BROKEN, format="json", **CHINA)
    batch = api(member).post(
        f"{JOBS}batch/", {"jobs": [copy.deepcopy(RAY_JOB), BROKEN]}, format="json", **CHINA
    )

    assert dry_run.status_code == batch.status_code == 400
    assert set(dry_run.json()) == set(BROKEN_IN_ENGLISH)
    assert set(batch.json()) == {f"jobs[1].{key}" for key in BROKEN_IN_ENGLISH}
    assert batch.json()["jobs[1].image"] == ["必填"]
    in_chinese(dry_run.json())
    in_chinese(batch.json())


def test_the_services_refusals_are_in_chinese(api, member):
    unknown = api(member).post(JOBS, {**RAY_JOB, "queue": "nowhere"}, format="json", **CHINESE)
    too_big = {**RAY_JOB, "head": {"resources": {"cpu": "5000", "memory": "4G"}}}
    never = api(member).post(JOBS, too_big, format="json", **CHINESE)
    elsewhere = seed_rayjob()["items"][1]
    elsewhere["metadata"]["namespace"] = "text"  # and its queue by its label
    elsewhere["metadata"]["labels"] = {"volcano.sh/queue-name": "root-algorithm-video"}
    namespace = api(member).post(JOBS, elsewhere, format="json", **CHINESE)

    assert unknown.json() == {"queue": ["'nowhere' 不是你可以提交作业的队列"]}
    assert set(never.json()) == {"request", "head.resources"}  # every problem at once
    assert never.json()["request"][0].startswith("永远无法准入：")
    assert namespace.json() == {
        "metadata.namespace": [
            "该队列在命名空间 video 中运行其作业；请省略命名空间、填写该命名空间，"
            "或发送 ?queue= 让作业在那里运行"
        ]
    }
    english = api(member).post(JOBS, {**RAY_JOB, "queue": "nowhere"}, format="json")
    assert english.json() == {"queue": ["'nowhere' is not a queue you can submit to"]}


def seed_rayjob() -> dict:
    """Seed 003's RayJob with its script's ConfigMap, as one List."""
    config_map, rayjob = yaml.safe_load_all((MANIFESTS / "seed-003-rayjob.yaml").read_text())
    return {"apiVersion": "v1", "kind": "List", "items": [config_map, rayjob]}


def test_a_kubernetes_object_is_refused_in_chinese_by_its_paths(api, member):
    body = seed_rayjob()
    rayjob = body["items"][1]
    rayjob["metadata"]["labels"]["caldera.io/owner"] = "mallory"
    head = rayjob["spec"]["rayClusterSpec"]["headGroupSpec"]["template"]["spec"]
    head["volumes"].append({"name": "host", "hostPath": {"path": "/"}})
    head["containers"][0]["resources"]["requests"]["cpu"] = "lots"

    english = api(member).post(JOBS, body, format="json")
    chinese = api(member).post(JOBS, body, format="json", **CHINESE)

    own = "items[1].metadata.labels['caldera.io/owner']"
    pod = "items[1].spec.rayClusterSpec.headGroupSpec.template.spec"
    cpu = f"{pod}.containers[0].resources.requests.cpu"
    assert english.json() == {
        cpu: ["'lots' is not a Kubernetes quantity (examples: 500m, 2, 1.5, 4Gi, 4G)"]
    }
    assert chinese.json() == {
        cpu: ["'lots' 不是合法的 Kubernetes 数量（例如：500m、2、1.5、4Gi、4G）"]
    }
    head["containers"][0]["resources"]["requests"]["cpu"] = "4"
    host = f"{pod}.volumes[1].hostPath"
    english = api(member).post(JOBS, body, format="json")
    chinese = api(member).post(JOBS, body, format="json", **CHINESE)
    assert english.json() == {
        own: ["Caldera's own key: it writes it on the objects it creates; leave it out"],
        host: [
            "not allowed by the Pod Security Standards' baseline profile (HostPath Volumes): a "
            "pod may not mount the node's files"
        ],
    }
    assert chinese.json() == {
        own: ["这是 Caldera 自己的键：它在自己创建的对象上写入；请省略"],
        host: ["Pod 安全标准的 baseline 配置不允许（HostPath Volumes）：Pod 不得挂载节点上的文件"],
    }
    unknown_kind = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "x"}}
    answer = api(member).post(JOBS, unknown_kind, format="json", **CHINESE).json()
    assert list(answer) == ["kind"] and answer["kind"][0].startswith("Caldera 运行 RayJob")
    assert answer["kind"][0].endswith("不运行 apps/v1 Deployment")


def test_a_quota_tree_breaking_an_invariant_is_refused_in_chinese(api, staff, tree):
    before = list(QuotaNode.objects.values_list("path", "min", "max").order_by("path"))
    document = copy.deepcopy(seed_tree_document())
    algorithm = document["spec"]["root"]["children"][0]
    algorithm["min"] = {**algorithm.get("min", {}), "cpu": "1000"}
    algorithm["max"] = {**algorithm.get("max", {}), "cpu": "10"}

    english = api(staff).put("/api/v1/quota-tree/", document, format="json")
    chinese = api(staff).put("/api/v1/quota-tree/", document, format="json", **CHINESE)

    assert english.status_code == chinese.status_code == 400
    assert list(chinese.json()) == list(english.json()) == ["spec.root"]
    assert "root/algorithm: min cpu 1000 is above max 10" in english.json()["spec.root"]
    assert "root/algorithm：cpu 的最小保障 1000 高于上限 10" in chinese.json()["spec.root"]
    assert (
        "root/algorithm/text：cpu 的上限 24 高于其父节点 root/algorithm 的上限 10"
        in chinese.json()["spec.root"]
    )
    in_chinese(chinese.json())
    bad_quantity = copy.deepcopy(seed_tree_document())
    bad_quantity["spec"]["root"]["min"] = {"cpu": "-2"}
    answer = api(staff).put("/api/v1/quota-tree/", bad_quantity, format="json", **CHINESE)
    assert answer.json() == {"spec.root.min.cpu": ["'-2' 是负数"]}
    assert list(QuotaNode.objects.values_list("path", "min", "max").order_by("path")) == before


def test_the_submit_form_still_says_what_to_fill_in_and_in_chinese(client, member):
    """The form shows the API's reasons, now worded in the reader's language, and still
    says a pod's missing resources as what to fill in."""
    empty = {name: "" for name in RAY_FORM} | {"kind": "ray", "worker_replicas": "1"}

    response = login(client, member).post(reverse("job-submit"), empty, **CHINA)

    assert response.status_code == 400
    errors = response.context["errors"]
    assert errors["head"] == ["请填写该 Pod 的 CPU 和内存"]
    assert errors["name"] == ["必填"]


def test_every_sentence_refusing_the_other_kind_s_field_is_declared_for_translation():
    """Those sentences are made of each kind's words; a kind added later needs its own."""
    for shape in KINDS.values():
        for other in shape.others():
            assert set(other_kind(shape, other)) <= set(_OTHER_KIND)
