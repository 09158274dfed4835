"""A load generator: N clients that POST (or GET) as fast as the server answers.

    python -m bench.load --url http://127.0.0.1:8765/api/v1/jobs/ --token KEY \\
        --clients 32 --seconds 10 --bodies bodies.json

Runs in a process of its own, apart from the server it measures, so that its own work
does not count against the server's. Each client is a thread with its own connection
(reopened whenever the server closes it, as gunicorn's sync workers do after each
response). Requests in the first ``--warmup`` seconds are sent but not counted. Prints
one JSON object: requests and items accepted per second, p50/p99/max latency, errors.
"""

from __future__ import annotations

import argparse
import http.client
import json
import sys
import threading
import time
from urllib.parse import urlsplit


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.load", description=__doc__)
    parser.add_argument("--url", required=True)
    parser.add_argument("--token", required=True)
    parser.add_argument("--clients", type=int, default=1)
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--warmup", type=float, default=2)
    parser.add_argument("--bodies", help="JSON list of request bodies, sent in turn (POST)")
    parser.add_argument("--paths", help="JSON list of paths under --url, read in turn (GET)")
    parser.add_argument("--cookie", help="a Cookie header (a signed-in session, for pages)")
    parser.add_argument("--items", type=int, default=1, help="jobs per request (batch)")
    args = parser.parse_args(argv)
    bodies = [b.encode() for b in json.load(open(args.bodies))] if args.bodies else None
    paths = json.load(open(args.paths)) if args.paths else None
    figures = run(args.url, args.token, args.clients, args.seconds, args.warmup, bodies,
                  args.items, paths, args.cookie)  # fmt: skip
    print(json.dumps(figures))
    return 0


def run(url, token, clients, seconds, warmup, bodies, items, paths=None, cookie=None) -> dict:
    target = urlsplit(url)
    headers = {"Authorization": f"Token {token}", "Content-Type": "application/json"}
    if cookie:
        headers = {"Cookie": cookie}
    paths = [target.path.rstrip("/") + path for path in paths] if paths else [target.path]
    start = time.monotonic() + 0.2
    measure_from, stop = start + warmup, start + warmup + seconds
    latencies: list[list[float]] = [[] for _ in range(clients)]
    errors: list[str] = []
    counter = iter(range(10**12))  # next() on a range iterator is atomic under the GIL

    def client(index: int) -> None:
        connection = None
        while time.monotonic() < start:
            time.sleep(0.001)
        while (sent := time.monotonic()) < stop:
            if connection is None:
                connection = http.client.HTTPConnection(target.hostname, target.port, timeout=30)
            turn = next(counter)
            body = bodies[turn % len(bodies)] if bodies else None
            path = paths[turn % len(paths)]
            try:
                connection.request("POST" if body else "GET", path, body, headers)
                response = connection.getresponse()
                payload = response.read()
                if response.will_close:
                    connection.close()
                    connection = None
            except (OSError, http.client.HTTPException) as error:
                errors.append(repr(error))
                connection = None
                continue
            done = time.monotonic()
            if response.status >= 300:
                errors.append(f"{response.status} {payload[:200]!r}")
            elif sent >= measure_from:
                latencies[index].append(done - sent)

    threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    ordered = sorted(value for client_latencies in latencies for value in client_latencies)
    count = len(ordered)
    return {
        "clients": clients,
        "seconds": seconds,
        "requests": count,
        "requests_per_second": round(count / seconds, 1),
        "items_per_second": round(count * items / seconds, 1),
        "p50_ms": round(_percentile(ordered, 0.50) * 1000, 2),
        "p99_ms": round(_percentile(ordered, 0.99) * 1000, 2),
        "max_ms": round(ordered[-1] * 1000, 2) if ordered else None,
        "errors": len(errors),
        "first_error": errors[0] if errors else None,
    }


def _percentile(ordered: list[float], share: float) -> float:
    if not ordered:
        return float("nan")
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


if __name__ == "__main__":
    sys.exit(main())
