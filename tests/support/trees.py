"""Quota trees for the tests: the seed's tree document (queues/data/seed-tree.yaml), and
plain trees and rule inputs for the tests of the pure quota and admission rules: a node, a
request, a tree shaped like the seed's, and a queue head (no database)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import yaml

from kube.quantity import parse_resources
from queues.admission import Candidate
from queues.quota import Node

from .paths import REPO

SEED_TREE = REPO / "queues" / "data" / "seed-tree.yaml"


def seed_tree_document() -> dict:
    return yaml.safe_load(SEED_TREE.read_text())


GPU = "nvidia.com/gpu"
H100 = "NVIDIA-H100-80GB-HBM3"
A100 = "NVIDIA-A100-SXM4-80GB"
TOLERATION = {"key": GPU, "operator": "Exists", "effect": "NoSchedule"}


def pooled_tree_document() -> dict:
    """The seed's tree with an H100 and an A100 pool: algorithm's share of the H100s is 4
    (2 of them video's), of the A100s up to 8; video may hold 8 GPUs in all."""
    document = seed_tree_document()
    document["spec"]["nodePools"] = [
        {"name": "h100", "nodeLabels": {f"{GPU}.product": H100}, "tolerations": [TOLERATION]},
        {"name": "a100", "nodeLabels": {f"{GPU}.product": A100}, "tolerations": [TOLERATION]},
    ]
    root = document["spec"]["root"]
    root["pools"] = {
        "h100": {"min": {GPU: 8}, "max": {GPU: 8}},
        "a100": {"min": {GPU: 8}, "max": {GPU: 8}},
    }
    algorithm = next(kid for kid in root["children"] if kid["name"] == "algorithm")
    algorithm["pools"] = {
        "h100": {"min": {GPU: 4}, "max": {GPU: 4}},
        "a100": {"min": {GPU: 4}, "max": {GPU: 8}},
    }
    video = next(kid for kid in algorithm["children"] if kid["name"] == "video")
    video["max"][GPU] = 8
    video["pools"] = {"h100": {"min": {GPU: 2}, "max": {GPU: 4}}}
    return document


def node(path, min=None, max=None, namespaces=()):
    return Node(
        path=path,
        min=parse_resources("min", min or {}),
        max=parse_resources("max", max or {}),
        namespaces=tuple(namespaces),
    )


def seed_like():
    nodes = [
        node("root", {"cpu": 64, "memory": "256Gi"}, {"cpu": 64, "memory": "256Gi"}),
        node("root/algorithm", {"cpu": 32, "memory": "64Gi"}, {"cpu": 48, "memory": "128Gi"}),
        node(
            "root/algorithm/video",
            {"cpu": 12, "memory": "12Gi"},
            {"cpu": 14, "memory": "14Gi"},
            ["video"],
        ),
        node("root/algorithm/text", {"cpu": 12}, {"cpu": 24}, ["text"]),
        node("root/interns", {"cpu": 0}, {"cpu": 64}),
        node("root/interns/intern-video", {"cpu": 0}, {"cpu": 64}, ["intern-video"]),
    ]
    return {n.path: n for n in nodes}


def request(**resources):
    return parse_resources("request", {k.replace("_", "."): v for k, v in resources.items()})


T0 = datetime(2025, 1, 10, 1, 36, 24, tzinfo=UTC)


def job(key, cpu, priority=0, seconds=0, due=True):
    return Candidate(
        key=key,
        request=request(cpu=cpu),
        rank=(-priority, T0 + timedelta(seconds=seconds), key),
        due=due,
        priority=priority,
    )
