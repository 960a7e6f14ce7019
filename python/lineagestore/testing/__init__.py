"""Test helpers for lineagestore users and its own suites (``lineagestore.testing.s3``: a real S3 server)."""
