"""An ``s3a://`` checkpoint in a session without hadoop-aws: lineagestore's helpers say what the command line
says (the classes and ``spark.jars.packages=...``) where Spark's own error is the generic
``[CANNOT_LOAD_CHECKPOINT_FILE_MANAGER.UNCATEGORIZED]``.

This process's session is a real one without the s3a jars (no test of python/tests uses an S3 fixture, so the
plugin adds none; test_cli.py relies on the same).
"""

from __future__ import annotations

import pytest

import lineagestore
from lineagestore import adjunct
from lineagestore.jvm import MissingFilesystem
from lineagestore.jvm.jars import AWS_SDK_S3_CLASS, HADOOP_AWS_VERSION, S3A_FILESYSTEM_CLASS, s3a_advice

CHECKPOINT = "s3a://bucket/checkpoints/clicks"
WHAT_THE_CLI_SAYS = s3a_advice(
    CHECKPOINT,
    [(S3A_FILESYSTEM_CLASS, "hadoop-aws"), (AWS_SDK_S3_CLASS, "the AWS SDK v2 bundle")],
    HADOOP_AWS_VERSION,
    launched=False,
)


def test_the_check_says_what_the_command_line_says(spark, tmp_path):
    with pytest.raises(MissingFilesystem) as raised:
        lineagestore.check_checkpoint_location(spark, CHECKPOINT)
    assert str(raised.value) == WHAT_THE_CLI_SAYS
    assert f"spark.jars.packages=org.apache.hadoop:hadoop-aws:{HADOOP_AWS_VERSION}" in str(raised.value)
    lineagestore.check_checkpoint_location(spark, str(tmp_path))  # a local checkpoint needs nothing more


def test_the_adjunct_writer_refuses_before_any_query_starts(spark, tmp_path):
    changes = (
        spark.readStream.format("rate").load().selectExpr("value AS id", "'upsert' AS op", "value AS seq")
    )
    with pytest.raises(MissingFilesystem) as raised:
        adjunct.maintain(changes, str(tmp_path / "table"), ["id"], "seq", checkpoint=CHECKPOINT)
    assert str(raised.value) == WHAT_THE_CLI_SAYS
    assert not spark.streams.active
