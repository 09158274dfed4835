"""Helpers shared by the test modules (each module imports from here, not from another).

- axe: axe-core (axe.min.js, README.md) on the main pages, in a theme and a viewport
- cluster: the simulated cluster resized for a block
- database: a URL of the test database's server
- identity: the tests' OpenID provider as the tests reach it (identity_provider/ is the
  provider itself, run as a process of its own)
- jobs: job documents, a submit at a given time, a job already running
- k8s_schema: objects checked against the operators' CRDs in k8s/
- kube_emulator: the Kubernetes API server emulator
- kubernetes: a backend, the portal and the operators on the emulator; deploy/'s roles
- oidc_issuer: a CI platform's OIDC issuer (discovery, keys, signed ID tokens), run as a
  process of its own, and how the tests sign tokens with it
- outages: the database or the broker taken away for a block
- pages: a signed-in test client, htmx's header, the submit form's fields
- paths: where the repository's files are
- personas: users, a department's members and managers, API clients with a token
- polling: ``wait_for``, the one bounded wait
- specs: job specs for the backends and manifests
- trees: the seed's tree document, plain trees and rule inputs
"""
