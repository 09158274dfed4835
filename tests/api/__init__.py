"""The REST API and the tree's exchange: jobs, batch and bulk, the job schema and its
limits, bad input, Schemathesis, token auth, the quota tree and its audit history."""
