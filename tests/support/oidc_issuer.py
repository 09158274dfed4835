"""A CI platform's OIDC issuer of the tests' own, as GitHub Actions'
``https://token.actions.githubusercontent.com`` is one: run as a process of its own and
reached over HTTP, so the workload identity checks (access/oidc.py) meet discovery, a key
set and key rotation as they would in production.

The process (``python -m tests.support.oidc_issuer --keys-dir DIR [--port 0]``, which
prints ``listening on <port>``) is any number of issuers, one per file: ``DIR/<name>.json``
makes ``http://127.0.0.1:<port>/<name>`` an issuer serving

- ``GET /<name>/.well-known/openid-configuration``: its discovery document;
- ``GET /<name>/jwks``: the public keys the file lists.

The file is read again at each request, so writing it is how a test publishes and rotates
keys. It holds ``{"keys": [public JWKs], "discovery": {fields that override the
document's}, "delay_seconds": 0}``. A name with no file answers 404. The process counts
the requests each issuer receives; ``GET /_hits/<name>`` reports them
(``{"discovery": 1, "jwks": 2}``).

The tests' side is ``Issuers`` (the process) and ``Issuer`` (one issuer: its private keys,
what it publishes, tokens it signs). The fixtures ``oidc_issuers`` (the process, once per
run) and ``oidc_issuer`` (a new issuer for each test) are in tests/conftest.py.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import hmac
import json
import os
import re
import sys
import threading
import time
import uuid
from collections import Counter
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import jwt
import requests
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from jwt.algorithms import ECAlgorithm, RSAAlgorithm

AUDIENCE = "caldera"  # what a pipeline asks its platform to put in ``aud``
NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")

# ---- The process -------------------------------------------------------------------------


class IssuerServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, port: int, keys_dir: Path) -> None:
        super().__init__(("127.0.0.1", port), IssuerHandler)
        self.keys_dir = keys_dir
        self.hits: Counter[tuple[str, str]] = Counter()
        self.hits_lock = threading.Lock()

    def handle_error(self, request, client_address) -> None:
        # A client that gave up (a test's timeout) leaves a broken pipe: not news.
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class IssuerHandler(BaseHTTPRequestHandler):
    server: IssuerServer

    def do_GET(self) -> None:  # noqa: N802 (the base class's name)
        parts = self.path.split("?")[0].strip("/").split("/")
        if len(parts) == 2 and parts[0] == "_hits" and NAME.fullmatch(parts[1]):
            with self.server.hits_lock:
                hits = {
                    "discovery": self.server.hits[(parts[1], "discovery")],
                    "jwks": self.server.hits[(parts[1], "jwks")],
                }
            return self._answer(HTTPStatus.OK, hits)
        name, endpoint = parts[0], "/".join(parts[1:])
        endpoints = {".well-known/openid-configuration": "discovery", "jwks": "jwks"}
        if not NAME.fullmatch(name) or endpoint not in endpoints:
            return self._answer(HTTPStatus.NOT_FOUND, {"error": "not found"})
        with self.server.hits_lock:
            self.server.hits[(name, endpoints[endpoint])] += 1
        try:
            issuer = json.loads((self.server.keys_dir / f"{name}.json").read_text())
        except FileNotFoundError:
            return self._answer(HTTPStatus.NOT_FOUND, {"error": f"no issuer {name}"})
        time.sleep(issuer.get("delay_seconds", 0))
        if endpoints[endpoint] == "jwks":
            return self._answer(HTTPStatus.OK, {"keys": issuer["keys"]})
        url = f"http://127.0.0.1:{self.server.server_port}/{name}"
        return self._answer(HTTPStatus.OK, {**discovery_document(url), **issuer["discovery"]})

    def _answer(self, status: HTTPStatus, body: dict) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format, *args) -> None:  # noqa: A002 (the base class's name)
        pass


def discovery_document(url: str) -> dict[str, Any]:
    """As GitHub Actions' issuer publishes it."""
    return {
        "issuer": url,
        "jwks_uri": f"{url}/jwks",
        "subject_types_supported": ["public", "pairwise"],
        "response_types_supported": ["id_token"],
        "claims_supported": ["sub", "aud", "exp", "iat", "iss", "jti", "nbf", "ref", "repository"],
        "id_token_signing_alg_values_supported": ["RS256"],
        "scopes_supported": ["openid"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--keys-dir", type=Path, required=True)
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()
    server = IssuerServer(args.port, args.keys_dir)
    print(f"listening on {server.server_port}", flush=True)
    sys.stdout.close()
    server.serve_forever()


# ---- The tests' side ---------------------------------------------------------------------

PrivateKey = rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey


class Issuers:
    """The issuer process, at ``url``, serving an issuer for each file in ``keys_dir``."""

    def __init__(self, url: str, keys_dir: Path) -> None:
        self.url = url
        self.keys_dir = keys_dir

    def issuer(self) -> Issuer:
        """A new issuer, with a URL of its own and one published RS256 key."""
        return Issuer(self, f"ci-{uuid.uuid4().hex[:12]}")


class Issuer:
    """One issuer: its private keys by key id, the ids it publishes, and the one it signs
    with (``kid``)."""

    def __init__(self, issuers: Issuers, name: str) -> None:
        self.url = f"{issuers.url}/{name}"
        self._file = issuers.keys_dir / f"{name}.json"
        self._hits_url = f"{issuers.url}/_hits/{name}"
        self.private_keys: dict[str, PrivateKey] = {}
        self.kid = self.new_key()
        self.publish(self.kid)

    def new_key(self, algorithm: str = "RS256") -> str:
        """A new private key (RS256 or ES256), not published; its key id."""
        kid = f"key-{uuid.uuid4().hex[:8]}"
        if algorithm == "RS256":
            self.private_keys[kid] = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        elif algorithm == "ES256":
            self.private_keys[kid] = ec.generate_private_key(ec.SECP256R1())
        else:
            raise ValueError(f"no keys for {algorithm}")
        return kid

    def publish(
        self,
        *kids: str,
        extra_keys: tuple[Any, ...] = (),
        discovery: dict | None = None,
        delay_seconds: float = 0,
    ) -> None:
        """The issuer's file written whole (renamed into place, so the process never reads
        half of it): the public keys of ``kids`` and ``extra_keys`` as they are, discovery
        fields to override, a delay before each answer."""
        document = {
            "keys": [*extra_keys, *(self.public_jwk(kid) for kid in kids)],
            "discovery": discovery or {},
            "delay_seconds": delay_seconds,
        }
        partial = self._file.with_suffix(".partial")
        partial.write_text(json.dumps(document))
        os.replace(partial, self._file)

    def rotate(self) -> str:
        """A new key, published alone and signed with from now on, as an issuer that
        retires its old key does; the new key id."""
        self.kid = self.new_key()
        self.publish(self.kid)
        return self.kid

    def public_jwk(self, kid: str) -> dict[str, Any]:
        key = self.private_keys[kid]
        if isinstance(key, rsa.RSAPrivateKey):
            jwk = RSAAlgorithm.to_jwk(key.public_key(), as_dict=True)
            algorithm = "RS256"
        else:
            jwk = ECAlgorithm.to_jwk(key.public_key(), as_dict=True)
            algorithm = "ES256"
        return {**jwk, "kid": kid, "alg": algorithm, "use": "sig"}

    def public_pem(self, kid: str) -> bytes:
        return (
            self.private_keys[kid]
            .public_key()
            .public_bytes(
                serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
            )
        )

    def sign(
        self,
        claims: dict[str, Any],
        *,
        kid: str | None = None,
        key: PrivateKey | None = None,
        headers: dict[str, Any] | None = None,
    ) -> str:
        """An ID token of ``claims``, naming key ``kid`` (the current one by default) and
        signed with ``key`` (by default that key's own); ``headers`` add to the header or,
        set to None, leave a field out."""
        kid = kid or self.kid
        key = key or self.private_keys[kid]
        algorithm = "RS256" if isinstance(key, rsa.RSAPrivateKey) else "ES256"
        header = {"kid": kid, "typ": "JWT", **(headers or {})}
        return jwt.encode(
            claims,
            key,
            algorithm=algorithm,
            headers={name: value for name, value in header.items() if value is not None},
        )

    def ci_claims(self, **overrides: Any) -> dict[str, Any]:
        """The claims of a GitHub Actions job's ID token, for a push to org/repo's main,
        valid for five minutes from now; ``overrides`` replace or add claims."""
        now = int(time.time())
        return {
            "jti": str(uuid.uuid4()),
            "iss": self.url,
            "aud": AUDIENCE,
            "sub": "repo:org/repo:ref:refs/heads/main",
            "repository": "org/repo",
            "repository_owner": "org",
            "repository_id": "74",
            "repository_visibility": "private",
            "ref": "refs/heads/main",
            "ref_type": "branch",
            "sha": "e0b3c6f1a2d4c8b9e7f6a5d4c3b2a1f0e9d8c7b6",
            "actor": "octocat",
            "actor_id": "12",
            "workflow": "train",
            "job_workflow_ref": "org/repo/.github/workflows/train.yml@refs/heads/main",
            "event_name": "push",
            "run_id": "6242",
            "run_number": "10",
            "run_attempt": "1",
            "runner_environment": "github-hosted",
            "iat": now,
            "nbf": now - 5,
            "exp": now + 300,
            **overrides,
        }

    def hits(self) -> dict[str, int]:
        """How many times each endpoint of this issuer was asked, by anyone."""
        response = requests.get(self._hits_url, timeout=10)
        response.raise_for_status()
        return response.json()


def forged(claims: dict[str, Any], *, algorithm: str, secret: bytes, kid: str) -> str:
    """A token PyJWT would refuse to make: ``none`` (no signature) or an HMAC keyed with
    ``secret`` (an issuer's public key, in the algorithm confusion attack)."""
    segments = [
        _b64({"alg": algorithm, "kid": kid, "typ": "JWT"}),
        _b64(claims),
    ]
    signing_input = ".".join(segments).encode()
    if algorithm == "none":
        signature = b""
    else:
        digest = {"HS256": hashlib.sha256, "HS384": hashlib.sha384}[algorithm]
        signature = hmac.new(secret, signing_input, digest).digest()
    return f"{signing_input.decode()}.{base64.urlsafe_b64encode(signature).decode().rstrip('=')}"


def _b64(value: dict[str, Any]) -> str:
    return base64.urlsafe_b64encode(json.dumps(value).encode()).decode().rstrip("=")


if __name__ == "__main__":
    main()
