"""The tree in and out as YAML: manage.py export_tree / import_tree / export_volcano_queues."""

from __future__ import annotations

import io
import os
import subprocess
import sys

import pytest
import yaml
from django.core.management import CommandError, call_command

from audit.models import AuditEntry
from kube.quantity import format_quantity, parse_quantity
from queues.models import Queue, QuotaNode

from ..support import k8s_schema
from ..support.paths import REPO
from ..support.trees import SEED_TREE, seed_tree_document

pytestmark = pytest.mark.django_db


def run(*args: str) -> str:
    out = io.StringIO()
    call_command(*args, stdout=out)
    return out.getvalue()


def spelled(node: dict) -> dict:
    """A seed node as the export writes it: each quantity in its shortest exact spelling
    (whole numbers as numbers, like the seed), children by name (the tree does not keep the
    order siblings were written in)."""
    result = {"name": node["name"]}
    for key in ("min", "max"):
        quantities = {r: format_quantity(r, parse_quantity(r, q)) for r, q in node[key].items()}
        result[key] = {r: int(q) if q.isdigit() else q for r, q in quantities.items()}
    if "children" in node:
        kids = sorted(node["children"], key=lambda kid: kid["name"])
        result["children"] = [spelled(kid) for kid in kids]
    else:
        result["namespaces"] = node["namespaces"]
    return result


def test_the_export_is_the_seeds_document_in_the_seeds_format(tree):
    exported = yaml.safe_load(run("export_tree"))
    seed = seed_tree_document()
    assert exported["apiVersion"] == "scheduling.sigs.k8s.io/v1beta1"
    assert exported["kind"] == "ElasticQuotaTree"
    assert exported["metadata"] == seed["metadata"]
    assert exported["spec"]["root"] == spelled(seed["spec"]["root"])
    assert k8s_schema.errors(exported) == []


def test_the_export_reads_like_the_seed(tree):
    video = """\
          - name: video
            min:
              cpu: 12
              memory: 12Gi
              nvidia.com/gpu: 2
            max:
              cpu: 14
              memory: 14Gi
              nvidia.com/gpu: 4
            namespaces:
              - video
"""
    assert video in SEED_TREE.read_text()
    assert video in run("export_tree")


def test_export_import_export_is_exact_and_changes_nothing(tree, tmp_path):
    first = tmp_path / "tree.yaml"
    run("export_tree", "--output", str(first))
    entries = AuditEntry.objects.count()
    assert run("import_tree", str(first)) == "The tree already matched: nothing changed.\n"
    assert run("export_tree") == first.read_text()
    assert AuditEntry.objects.count() == entries


def test_the_seed_file_itself_imports_into_an_empty_portal(db):
    output = run("import_tree", str(SEED_TREE))
    assert "created root/algorithm/video: " in output
    assert "max cpu: 14; max memory: 14Gi; max nvidia.com/gpu: 4" in output
    assert output.endswith("Applied: 9 nodes changed.\n")
    assert Queue.objects.filter(active=True).count() == 5
    assert set(AuditEntry.objects.values_list("source", flat=True)) == {"command"}


def test_import_prints_each_change(tree, tmp_path):
    document = seed_tree_document()
    algorithm, _, interns = document["spec"]["root"]["children"]
    algorithm["children"][0]["max"]["cpu"] = 20
    interns["children"].pop()
    path = tmp_path / "tree.yaml"
    path.write_text(yaml.safe_dump(document))
    assert run("import_tree", str(path)).splitlines() == [
        "updated root/algorithm/video: max cpu: 14 → 20",
        "retired root/interns/intern-video",
        "Applied: 2 nodes changed.",
    ]
    assert QuotaNode.objects.get(path="root/algorithm/video").max["cpu"] == 20_000


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "spec: {root: {name: root, max: {cpu: lots}}}",
            "spec.root.max.cpu: 'lots' is not a Kubernetes quantity",
        ),
        (
            "spec: {root: {name: root, min: {cpu: 2}, max: {cpu: 1}}}",
            "spec.root: root: min cpu 2 is above max 1",
        ),
        ("kind: Queue\nspec: {root: {name: root}}", "kind: must be ElasticQuotaTree"),
        ("spec: [unclosed", "document: not valid YAML"),
    ],
)
def test_a_refused_import_names_the_field_and_writes_nothing(tree, tmp_path, text, message):
    before = list(QuotaNode.objects.values_list("path", "min", "max", "active"))
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(CommandError) as refused:
        run("import_tree", str(path))
    assert "the tree was not applied, nothing changed" in str(refused.value)
    assert message in str(refused.value)
    assert list(QuotaNode.objects.values_list("path", "min", "max", "active")) == before


def test_a_missing_file_is_refused(db, tmp_path):
    with pytest.raises(CommandError, match="cannot read .*missing.yaml"):
        run("import_tree", str(tmp_path / "missing.yaml"))


def test_a_refused_import_exits_non_zero(tmp_path):
    # The tree is refused by its parser, before the command touches any database.
    path = tmp_path / "bad.yaml"
    path.write_text("spec: {root: {name: root, max: {cpu: '-1'}}}")
    result = subprocess.run(
        [sys.executable, "manage.py", "import_tree", str(path)],
        cwd=REPO,
        env={**os.environ, "DEBUG": os.environ.get("DEBUG", "0")},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 1
    assert "spec.root.max.cpu: '-1' is negative" in result.stderr


def test_volcano_queues_are_one_per_leaf_and_valid_against_the_crd(tree):
    queues = list(yaml.safe_load_all(run("export_volcano_queues")))
    assert [q["metadata"]["name"] for q in queues] == [
        "root-algorithm-text",
        "root-algorithm-video",
        "root-infrastructure-devops",
        "root-interns-intern-text",
        "root-interns-intern-video",
    ]
    for queue in queues:
        assert k8s_schema.errors(queue) == [], queue["metadata"]["name"]
    video = queues[1]
    assert video["apiVersion"] == "scheduling.volcano.sh/v1beta1" and video["kind"] == "Queue"
    assert video["metadata"]["annotations"] == {"caldera.io/queue-path": "root/algorithm/video"}
    assert video["spec"] == {
        "capability": {"cpu": "14", "memory": "14Gi", "nvidia.com/gpu": "4"},
        "guarantee": {"resource": {"cpu": "12", "memory": "12Gi", "nvidia.com/gpu": "2"}},
        "reclaimable": True,
    }


def test_a_volcano_queue_that_breaks_the_crd_is_caught(tree):
    # The schema check has teeth: a misspelt field or a bad quantity fails it.
    (queue, *_) = yaml.safe_load_all(run("export_volcano_queues"))
    queue["spec"]["guarantee"]["resources"] = queue["spec"]["guarantee"].pop("resource")
    queue["spec"]["capability"]["cpu"] = "14 cores"
    assert len(k8s_schema.errors(queue)) == 2


def test_export_volcano_queues_writes_a_file(tree, tmp_path):
    path = tmp_path / "queues.yaml"
    run("export_volcano_queues", "--output", str(path))
    assert len(list(yaml.safe_load_all(path.read_text()))) == 5
