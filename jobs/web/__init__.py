"""The HTML pages and the REST API of jobs and queues, and their URLs."""
