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
