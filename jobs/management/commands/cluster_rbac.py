"""``manage.py cluster_rbac``: the Roles and bindings that let Caldera work on the tree's
namespaces, as YAML for ``kubectl apply -f -``. Run again when the tree binds other
namespaces; ``--prune`` lets kubectl remove those of namespaces the tree no longer binds."""

from __future__ import annotations

import yaml
from django.conf import settings
from django.core.management.base import BaseCommand

from jobs.cluster.access import rbac_documents
from queues.selectors import tree_namespaces


class Command(BaseCommand):
    help = (
        "Print the ClusterRole, Roles and bindings Caldera needs for the quota tree's "
        "namespaces (with deploy/kubernetes/rbac.yaml: exactly what it uses), for kubectl apply."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("--service-account", default="caldera")
        parser.add_argument("--namespace", default="caldera-system", help="the account's")

    def handle(self, *args, **options) -> None:
        documents = rbac_documents(
            namespaces=tree_namespaces(),
            runtimes=settings.CLUSTER_RUNTIMES,
            publish=settings.CLUSTER_PUBLISH_QUOTA,
            watch_scope=settings.KUBERNETES_WATCH_SCOPE if settings.KUBERNETES_WATCH else "",
            account=options["service_account"],
            account_namespace=options["namespace"],
        )
        self.stdout.write(yaml.safe_dump_all(documents, sort_keys=False), ending="")
