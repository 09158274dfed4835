"""The HTML pages: dashboard, forms, job list, job page and log, the quota tree page, the
admin site, and the pages in a real browser."""
