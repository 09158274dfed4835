"""The ``caldera`` command: Caldera's REST API from a shell or a CI pipeline (docs/ci.md).

It imports the standard library, requests and PyYAML only, never the portal's code.
"""

__version__ = "0.1.0"
