"""Who may act and with what credential: a CI platform's ID token checked against an
issuer of the tests' own, over HTTP, and a trust policy's claim conditions."""
