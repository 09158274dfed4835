"""The API's answers, one module per resource: what ``jobs.web.api`` writes, and what its
OpenAPI schema is generated from. The bodies it reads are the job document's
(``jobs.document.schema``).
"""
