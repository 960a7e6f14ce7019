"""Test helpers for lineagestore users and its own suites.

* ``lineagestore.testing.plugin``: the pytest plugin (fixtures ``spark``, ``stream``, ``oracle``,
  ``s3_server``, ``s3_bucket``, ``s3_stream``), registered on install;
* ``lineagestore.testing.harness``: ``StreamHarness``, feed rows and run one trigger at a time;
* ``lineagestore.testing.oracle``: plain-Python models of stateful operators, ``assert_batches``;
* ``lineagestore.testing.faults``: damage checkpoint files, re-run batch attempts, fail a commit or upload;
* ``lineagestore.testing.s3``: a real S3 server (MinIO on 127.0.0.1) and the s3a jars;
* ``lineagestore.testing.cli``: ``run_cli``, the command line in this process with its output captured;
* ``lineagestore.testing.session``: ``local_builder`` / ``local_session``, a local SparkSession on lineagestore.

See docs/testing.md.
"""
