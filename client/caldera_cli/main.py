"""``caldera``: the command line. The parser is declared here; what each command does is in
commands.py; every failure ends as one of the exit codes of exit_codes.py."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from caldera_cli import __version__, commands, config, documents, exit_codes
from caldera_cli.api import ApiError, Refused
from caldera_cli.exit_codes import Exit
from caldera_cli.output import Out, field_errors
from caldera_cli.tail import WINDOW

DESCRIPTION = """\
Submit, follow and cancel Caldera jobs through its REST API (docs/ci.md).

The server and the token come from `caldera login` (saved in
$XDG_CONFIG_HOME/caldera/config.json, ~/.config by default, mode 0600), or from
CALDERA_URL and CALDERA_TOKEN, which override the file. Connection failures and
429/502/503/504 answers are retried with backoff for up to CALDERA_RETRY_SECONDS
(default 60)."""

EPILOG = f"Exit codes:\n{exit_codes.table()}"

SUBMIT = """\
Submit jobs: Caldera job documents or the Kubernetes objects you already have (a KubeRay
RayJob, a Kubeflow PyTorchJob, a Volcano Job with the ray or pytorch plugin), JSON or YAML,
as POST /api/v1/jobs/ takes them (docs/api.md); `-` reads one from stdin, and a YAML file
may hold several, separated by `---`. A file of one job object and the ConfigMap holding
its script is one job. Several jobs are submitted as one batch: all are queued, or none.
What Caldera cannot represent in an object is refused with its path, never dropped.

--wait polls each job every 2 s (CALDERA_POLL_SECONDS) until it ends; a preempted job goes
back to its queue and the wait goes on. --follow waits too, and prints as they come each
job's changes of state and position, the sentence of why it waits when it changes, the
cluster's events about its pods (GangFailedScheduling while its gang cannot be placed;
printed again, with its count, when the cluster reports it again), and once the job runs its
log as it grows, from its start (each line after `[ID] ` when there are several jobs; with
--output json, {"event": "log", "id": ID, "line": ...} a line)."""


def parser() -> argparse.ArgumentParser:
    raw = argparse.RawDescriptionHelpFormatter
    top = argparse.ArgumentParser(
        prog="caldera", description=DESCRIPTION, epilog=EPILOG, formatter_class=raw
    )
    top.add_argument("--version", action="version", version=f"caldera {__version__}")
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--output",
        "-o",
        choices=["text", "json"],
        default="text",
        help="json: one JSON object per line, for scripts",
    )
    commands_ = top.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(name: str, summary: str, description: str | None = None) -> argparse.ArgumentParser:
        return commands_.add_parser(
            name,
            help=summary,
            description=description or summary,
            epilog=EPILOG,
            formatter_class=raw,
            parents=[common],
        )

    login = command(
        "login",
        "check a token and save it with the server's address",
        "Check a token against the server and save both. The token is read from "
        "CALDERA_TOKEN, else from stdin (typed, or piped: `caldera login --url URL < file`). "
        "With --exchange, a CI job's OIDC ID token is exchanged for a short-lived token "
        "instead (docs/ci.md).",
    )
    login.add_argument(
        "--url",
        help="the server, e.g. https://caldera.example.com (else CALDERA_URL, the saved one)",
    )
    login.add_argument("--exchange", action="store_true", help="exchange the CI's OIDC ID token")
    login.add_argument("--audience", default="caldera", help="the ID token's audience (GitHub)")
    login.add_argument("--id-token-env", metavar="VAR", help="the variable holding an ID token")
    login.set_defaults(run=commands.login)

    command("whoami", "the server, the user and the token in use").set_defaults(run=commands.whoami)

    submit = command("submit", "submit job documents, and optionally wait for them", SUBMIT)
    submit.add_argument("files", nargs="+", metavar="FILE", help="a job document; - for stdin")
    submit.add_argument("--queue", "-q", help="the queue, overriding the documents'")
    submit.add_argument(
        "--priority", "-p", type=int, help="the priority, overriding the documents'"
    )
    submit.add_argument(
        "--pool",
        action="append",
        metavar="POOL",
        help="a node pool of the quota tree the jobs accept, overriding the documents'; "
        "given several times, in the order preferred (--pool h100 --pool a100)",
    )
    submit.add_argument(
        "--hold",
        action="store_true",
        help="queue the jobs held: they keep their places and are not admitted until "
        "`caldera release`",
    )
    submit.add_argument("--wait", "-w", action="store_true", help="wait until the jobs end")
    submit.add_argument(
        "--follow",
        "-f",
        action="store_true",
        help="wait, saying each change of state or position, why it waits, the cluster's "
        "events and then the log as it grows",
    )
    submit.add_argument("--timeout", metavar="DURATION", help="stop waiting after 90s, 15m, 2h...")
    submit.add_argument(
        "--cancel-on-timeout", action="store_true", help="cancel the jobs when the timeout passes"
    )
    submit.add_argument(
        "--dry-run",
        action="store_true",
        help="submit nothing: say whether each job would be admitted now, its place, why it "
        "would wait and about when it would start; several jobs as the batch they would be, "
        "each behind those before it (exit 0; 2 when a document is refused)",
    )
    submit.add_argument(
        "--webhook",
        action="append",
        metavar="URL",
        help="a URL the server POSTs each job's state changes to, signed (docs/api.md, "
        "Webhooks); its secret is printed once; may be given several times",
    )
    submit.add_argument(
        "--idempotency-key",
        metavar="KEY",
        help="a retried submit with the same key (and documents) answers the jobs the first "
        "queued, for 24 hours; default in GitHub Actions and GitLab CI: the run, its attempt, "
        "the step and the documents",
    )
    submit.set_defaults(run=commands.submit)

    status = command("status", "one job: its state, position and why it waits")
    status.add_argument("ids", nargs="+", type=int, metavar="ID")
    status.set_defaults(run=commands.status)

    ls = command("ls", "the jobs of your departments, newest first")
    ls.add_argument("--state", help="states, comma-separated: queued,backoff")
    ls.add_argument("--queue", help="a queue's name or path")
    ls.add_argument("--mine", action="store_true", help="your own jobs only")
    ls.add_argument("--limit", type=int, default=20, help="at most this many (default 20)")
    ls.set_defaults(run=commands.ls)

    events = command(
        "events",
        "a job's history, oldest first",
        "A job's history, oldest first: the portal's transitions and the cluster's events. "
        "With --follow, its new events every 2 s (CALDERA_POLL_SECONDS) until the job ends, "
        "then the exit code of submit --wait (0 succeeded, 1 failed, 3 cancelled); a cluster "
        "event the cluster reports again (GangFailedScheduling) is printed again with its "
        "count.",
    )
    events.add_argument("id", type=int, metavar="ID")
    events.add_argument(
        "--follow", "-f", action="store_true", help="print new events until the job ends"
    )
    events.set_defaults(run=commands.events)

    logs = command(
        "logs",
        "the log of a job's head or master pod",
        "The log of a job's head (Ray) or master (PyTorch) pod. With --follow, its new lines "
        "as it grows, every 2 s (CALDERA_POLL_SECONDS), until the job ends, then the exit "
        "code of submit --wait (0 succeeded, 1 failed, 3 cancelled); while the job has no log "
        "(queued, starting, preempted) it says why on stderr and waits. Each poll reads the "
        f"last {WINDOW} lines: a log that grows by more in one poll loses lines, said on "
        "stderr.",
    )
    logs.add_argument("id", type=int, metavar="ID")
    logs.add_argument("--tail", type=int, metavar="N", help="the last N lines only")
    logs.add_argument(
        "--follow", "-f", action="store_true", help="print new lines until the job ends"
    )
    logs.set_defaults(run=commands.logs)

    cancel = command("cancel", "cancel jobs")
    cancel.add_argument("ids", nargs="+", type=int, metavar="ID")
    cancel.set_defaults(run=commands.cancel)

    hold = command(
        "hold",
        "hold pending jobs: they keep their places and are not admitted until released",
    )
    hold.add_argument("ids", nargs="+", type=int, metavar="ID")
    hold.set_defaults(run=commands.hold)

    release = command("release", "release held jobs: the next admission cycle tries them")
    release.add_argument("ids", nargs="+", type=int, metavar="ID")
    release.set_defaults(run=commands.release)

    command("queues", "the queues you may use").set_defaults(run=commands.queues)
    queue = command("queue", "one queue: its waiting jobs in order, its quota")
    queue.add_argument("name", metavar="NAME", help="its name or path")
    queue.set_defaults(run=commands.queue)
    return top


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)  # bad usage: argparse exits 2
    out = Out(as_json=args.output == "json")
    try:
        return int(args.run(args, out))
    except Refused as refused:
        if (
            refused.status == 400
            and isinstance(refused.body, dict)
            and "detail" not in refused.body
        ):
            out.error("\n  ".join(["refused:", *field_errors(refused.body)]), fields=refused.body)
        else:
            out.error(f"{refused} ({refused.status})", status=refused.status)
        return Exit.USAGE
    except ApiError as error:
        out.error(str(error), status=error.status)
        return error.exit
    except (config.NotConfigured, documents.BadDocument) as error:
        out.error(str(error))
        return Exit.USAGE
    except KeyboardInterrupt:
        out.error("interrupted; the jobs keep running")
        return 130


if __name__ == "__main__":
    sys.exit(main())
