"""``manage.py demo``: a live portal on the seed's quota tree, in the foreground.

Migrates, loads the seed's ElasticQuotaTree, departments and demo users (once), then runs
the web server (gunicorn), a Celery worker and beat as child processes, and keeps a gentle
stream of demo jobs flowing (``DEMO_TRAFFIC=0`` turns it off). A child that exits is
restarted with backoff (portal/supervise.py), so a worker that dies with the broker comes
back with it. Ctrl-C or SIGTERM stops everything.
"""

from __future__ import annotations

import copy
import os
import random
import shutil
import sys
from pathlib import Path

import yaml
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import BaseCommand
from django.db import DatabaseError

from jobs.cluster.simulated import SIMULATED_EXIT_CODE
from jobs.document.schema import job_parse
from jobs.models import PENDING, Job
from jobs.services import job_submit
from portal.supervise import Supervisor, install_signal_handlers
from queues.departments import department_create, membership_set
from queues.models import Department, QuotaNode
from queues.services import tree_apply

# The seed's tree with two GPU node pools, H100 and A100 (its header says how they are shared),
# on the nodes below unless SIMULATED_CLUSTER_NODES names others.
DEMO_TREE = Path(settings.BASE_DIR) / "queues" / "data" / "demo-tree.yaml"
GPU_TAINT = "nvidia.com/gpu=present:NoSchedule"
DEMO_NODES = (
    "2xcpu=16,memory=64Gi,nvidia.com/gpu=4 labels:nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3 "
    f"taints:{GPU_TAINT};"
    "2xcpu=16,memory=64Gi,nvidia.com/gpu=4 labels:nvidia.com/gpu.product=NVIDIA-A100-SXM4-80GB "
    f"taints:{GPU_TAINT}"
)
DEPARTMENTS = [
    ("algorithm", "root/algorithm"),
    ("infrastructure", "root/infrastructure"),
    ("interns", "root/interns"),
]
# username, department, role; every demo password is the username twice ("alicealice").
PEOPLE = [
    ("alice", "algorithm", "member"),
    ("bob", "algorithm", "manager"),
    ("dora", "infrastructure", "member"),
    ("ian", "interns", "member"),
]
SEED_RAYJOB = {
    "queue": "root/algorithm/video",
    "kind": "ray",
    "runtime": "kuberay",
    "name": "rayjob-video",
    "image": "rayproject/ray:2.36.1",
    "entrypoint": "python /home/ray/samples/sample_code.py",
    "script": "import ray\nray.init()\nprint(ray.cluster_resources())\n",
    "script_filename": "sample_code.py",
    "head": {"resources": {"cpu": "4", "memory": "4G"}},
    "workers": [{"name": "small-group", "replicas": 2, "resources": {"cpu": "4", "memory": "4G"}}],
    "run_seconds": 90,
}
# username, queue, kind, head cpu, workers, worker cpu, GPUs per worker, the pools it accepts.
TRAFFIC = [
    ("alice", "root/algorithm/video", "ray", 2, 1, 2, 0, []),
    ("alice", "root/algorithm/video", "ray", 2, 2, 2, 1, ["h100", "a100"]),
    ("bob", "root/algorithm/text", "pytorch", 4, 2, 4, 0, []),
    ("bob", "root/algorithm/text", "pytorch", 4, 2, 4, 2, ["h100"]),
    ("dora", "root/infrastructure/devops", "ray", 2, 2, 2, 1, ["a100"]),
    ("ian", "root/interns/intern-video", "ray", 4, 3, 4, 0, []),
    ("ian", "root/interns/intern-text", "pytorch", 8, 1, 8, 2, []),
]
MAX_PENDING = 25


class Command(BaseCommand):
    help = "Run the demo portal (web, worker, beat, simulated cluster) in the foreground."

    def handle(self, *args, **options):
        if "SIMULATED_CLUSTER_NODES" not in os.environ:
            # The demo's GPU nodes, for the children (the environment) and this process.
            os.environ["SIMULATED_CLUSTER_NODES"] = settings.SIMULATED_CLUSTER_NODES = DEMO_NODES
        call_command("migrate", interactive=False, verbosity=0)
        self.load_seed()
        port = os.environ.get("PORT", "8000")
        host = os.environ.get("HOST", "127.0.0.1")
        python = sys.executable
        state = Path(settings.STATE_DIR)
        state.mkdir(parents=True, exist_ok=True)
        # Web and worker write their Prometheus figures to one folder, so the demo's
        # /metrics shows the worker's too (admission cycles); a new demo starts it empty.
        figures = state / "metrics"
        shutil.rmtree(figures, ignore_errors=True)
        figures.mkdir()
        os.environ["PROMETHEUS_MULTIPROC_DIR"] = str(figures)
        supervisor = Supervisor(
            {
                "web": [python, "-m", "gunicorn", "portal.wsgi:application",
                        "-c", "python:portal.gunicorn", "--bind", f"{host}:{port}",
                        "--workers", "2", "--threads", "4"],
                "worker": [python, "-m", "celery", "-A", "portal", "worker", "-l", "warning",
                           "--concurrency", "2", "-n", "demo@%h"],
                "beat": [python, "-m", "celery", "-A", "portal", "beat", "-l", "warning",
                         "--schedule", str(state / "celerybeat-schedule")],
            },
            say=lambda message: self.stderr.write(f"demo: {message}"),
        )  # fmt: skip
        self.stdout.write(
            self.style.SUCCESS(
                f"\nCaldera demo on http://{host}:{port}/  (admin/adminadmin, alice/alicealice, "
                "bob/bobbob, dora/doradora, ian/ianian)\n"
                f"API docs: http://{host}:{port}/api/docs/   A child that exits is restarted; "
                "Ctrl-C stops everything.\n"
            )
        )
        install_signal_handlers(supervisor)
        supervisor.run(tick=self.submit_traffic if settings.DEMO_TRAFFIC else None)

    def load_seed(self) -> None:
        if not QuotaNode.objects.exists():
            tree_apply(document=yaml.safe_load(DEMO_TREE.read_text()))
            self.stdout.write("loaded the seed's ElasticQuotaTree, with two GPU node pools")
        for name, path in DEPARTMENTS:
            if not Department.objects.filter(name=name).exists():
                department_create(name=name, quota_node=QuotaNode.objects.get(path=path))
        users = get_user_model().objects
        if not users.filter(username="admin").exists():
            users.create_superuser("admin", "admin@example.com", "adminadmin")
        for username, department, role in PEOPLE:
            membership = membership_set(
                department=Department.objects.get(name=department), username=username, role=role
            )
            if not membership.user.has_usable_password():
                membership.user.set_password(username * 2)
                membership.user.save()
        if not Job.objects.exists():
            self.submit("alice", SEED_RAYJOB)
            self.submit("alice", SEED_RAYJOB)
            # One held, as a researcher holds a sweep whose data is not ready: it keeps its
            # place until someone releases it (docs/jobs.md).
            self.submit("alice", {**SEED_RAYJOB, "name": "sweep-held"}, held=True)
            # One whose attempts fail, retried once: its page lists the failed attempt with
            # its exit code and last lines, then it fails (docs/jobs.md, "Retries").
            flaky = {"name": "sweep-flaky", "retries": 1, "run_seconds": 20}
            self.submit("alice", {**SEED_RAYJOB, **flaky, "env": {SIMULATED_EXIT_CODE: "1"}})

    def submit(self, username: str, body: dict, *, held: bool = False) -> None:
        user = get_user_model().objects.get(username=username)
        draft = job_parse(copy.deepcopy(body))
        draft.held = held
        job_submit(user=user, draft=draft)

    def submit_traffic_job(self) -> None:
        if Job.objects.filter(state__in=PENDING).count() >= MAX_PENDING:
            return
        username, queue, kind, head_cpu, replicas, worker_cpu, gpus, pools = random.choice(TRAFFIC)
        resources = lambda cpu: {"cpu": str(cpu), "memory": f"{cpu * 2}Gi"}  # noqa: E731
        worker = resources(worker_cpu) | ({"nvidia.com/gpu": str(gpus)} if gpus else {})
        body: dict[str, object] = {
            "queue": queue,
            "kind": kind,
            "name": f"demo-{kind}-{random.randint(100, 999)}",
            "image": "rayproject/ray:2.36.1" if kind == "ray" else "pytorch/pytorch:2.4.0",
            "workers": [{"name": "worker", "replicas": replicas, "resources": worker}],
            "run_seconds": random.randint(20, 90),
        }
        if pools:
            body["pools"] = pools
        if kind == "ray":
            body |= {
                "entrypoint": "python -c 'import ray; ray.init()'",
                "head": {"resources": resources(head_cpu)},
            }
        else:
            body |= {
                "command": ["torchrun", "train.py"],
                "master": {"resources": resources(head_cpu)},
            }
        try:
            self.submit(username, body)
        except ValueError as error:  # a traffic job that cannot fit the current tree
            self.stderr.write(f"demo traffic skipped a job: {error}")

    def submit_traffic(self) -> None:
        """One traffic job; the database being away pauses the traffic, not the demo."""
        try:
            self.submit_traffic_job()
        except DatabaseError as error:
            self.stderr.write(f"demo traffic paused, the database is unavailable: {error}")
