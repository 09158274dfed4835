"""The quota tree in and out of the portal as YAML.

The ``ElasticQuotaTree`` document is the seed's format and round-trips exactly: exporting,
importing and exporting again yields the same text. Volcano ``Queue`` objects, one per leaf,
carry the same numbers for clusters that schedule with Volcano.
"""

from __future__ import annotations

import yaml
from django.utils.translation import gettext as _

from kube.names import ANNOTATION_QUEUE_PATH, LABEL_MANAGED_BY, MANAGER
from kube.quantity import format_resources, unpooled

from . import services
from .models import Queue

VOLCANO_API_VERSION = "scheduling.volcano.sh/v1beta1"


class _Dumper(yaml.SafeDumper):
    """Lists indented under their key, as in the seed and in kubectl's output."""

    def increase_indent(self, flow: bool = False, indentless: bool = False):
        return super().increase_indent(flow, False)


def to_yaml(document: object) -> str:
    """Block-style YAML in the document's own key order (name, min, max, children)."""
    return yaml.dump(
        document, Dumper=_Dumper, sort_keys=False, default_flow_style=False, allow_unicode=True
    )


def _seed_style(node: dict) -> dict:
    """Whole-number quantities as YAML numbers (``cpu: 64``), as the seed writes them; the
    others (``12Gi``, ``500m``) are strings either way. Names stay strings."""
    styled = dict(node)
    for key in ("min", "max"):
        styled[key] = {r: int(q) if q.isdigit() else q for r, q in node.get(key, {}).items()}
    if "pools" in node:
        styled["pools"] = {
            pool: {
                key: {r: int(q) if q.isdigit() else q for r, q in amounts.items()}
                for key, amounts in quota.items()
            }
            for pool, quota in node["pools"].items()
        }
    if "children" in node:
        styled["children"] = [_seed_style(kid) for kid in node["children"]]
    return styled


def tree_yaml() -> str:
    """The active tree as the seed's YAML; importing it changes nothing."""
    document = services.tree_export()
    if document["spec"]["root"]:
        document["spec"]["root"] = _seed_style(document["spec"]["root"])
    return to_yaml(document)


def tree_load(text: str) -> object:
    """Read an ElasticQuotaTree from YAML text; a syntax error is a TreeError on ``document``."""
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as error:
        raise services.TreeError(
            {"document": _("not valid YAML: %(error)s") % {"error": error}}
        ) from None


def volcano_queues() -> list[dict]:
    """A Volcano ``Queue`` per active leaf: ``capability`` is the leaf's max, ``guarantee``
    its min, and it is reclaimable, as the elastic tree lends idle capacity and takes it
    back."""
    queues = Queue.objects.filter(active=True).select_related("node").order_by("name")
    return [
        {
            "apiVersion": VOLCANO_API_VERSION,
            "kind": "Queue",
            "metadata": {
                "name": queue.name,
                "labels": {LABEL_MANAGED_BY: MANAGER},
                "annotations": {ANNOTATION_QUEUE_PATH: queue.node.path},
            },
            "spec": {
                "capability": format_resources(unpooled(queue.node.max)),
                "guarantee": {"resource": format_resources(unpooled(queue.node.min))},
                "reclaimable": True,
            },
        }
        for queue in queues
    ]


def volcano_queues_yaml() -> str:
    return yaml.safe_dump_all(volcano_queues(), sort_keys=False, default_flow_style=False)
