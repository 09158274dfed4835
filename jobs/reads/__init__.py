"""What the pages and the API read: a user's jobs, listings and filters, why a job waits,
its estimated start, and its pod logs.
"""
