"""The cluster backends: simulated and Kubernetes (against the API server emulator), the
manifests against the CRDs, pod logs, and a namespace's trouble."""
