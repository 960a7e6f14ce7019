"""The options that give the ``lineagestore`` command's own JVM extra jars and packages (``--jars``,
``--packages``, ``--repositories`` and their environment variables): checked before a JVM starts, turned into
one class loader's configuration, and the advice given when s3a's classes or an Ivy resolution are missing.
No JVM is started here; test_cli.py runs the command on a real checkpoint, integration-tests/test_s3_cli.py on
a real S3 server.
"""

from __future__ import annotations

import pytest

from lineagestore.cli import EXIT_ENVIRONMENT, EXIT_USAGE, main


def test_jars_and_packages_options_are_checked_before_a_jvm_starts(capsys, tmp_path, monkeypatch):
    from lineagestore.jvm.jars import check_packages, expand_jars, split_list

    (tmp_path / "a.jar").write_bytes(b"")
    (tmp_path / "b.jar").write_bytes(b"")
    (tmp_path / "empty").mkdir()
    a, b = str(tmp_path / "a.jar"), str(tmp_path / "b.jar")
    assert split_list(" x, ,y", None, "z") == ["x", "y", "z"]
    assert expand_jars([str(tmp_path)]) == [a, b]  # a directory: its jars
    assert expand_jars([str(tmp_path / "*.jar"), a]) == [a, b]  # a glob; no duplicates
    assert expand_jars([f"file://{a}"]) == [a]
    for bad, why in (
        (str(tmp_path / "nope.jar"), "does not exist"),
        (str(tmp_path / "empty"), "directory without any .jar"),
        (str(tmp_path / "*.zip"), "matches no file"),
    ):
        with pytest.raises(ValueError, match=why):
            expand_jars([bad])
    assert check_packages(["g:a:1", "g:a:1"]) == ["g:a:1"]
    with pytest.raises(ValueError, match="group:artifact:version"):
        check_packages(["g:a"])

    monkeypatch.delenv("LINEAGESTORE_JARS", raising=False)
    monkeypatch.delenv("LINEAGESTORE_PACKAGES", raising=False)
    for argv, message in (
        (["--jars", str(tmp_path / "nope.jar"), "inspect", "x"], "--jars: "),
        (["--packages", "hadoop-aws", "inspect", "x"], "--packages: 'hadoop-aws' is not a Maven coordinate"),
    ):
        with pytest.raises(SystemExit) as e:
            main(argv)
        assert e.value.code == EXIT_USAGE and message in capsys.readouterr().err
    monkeypatch.setenv("LINEAGESTORE_JARS", str(tmp_path / "nope.jar"))
    assert main(["inspect", "x"]) == EXIT_ENVIRONMENT
    assert f"LINEAGESTORE_JARS: {tmp_path / 'nope.jar'} does not exist" in capsys.readouterr().err


def test_gateway_conf_puts_every_jar_into_one_class_loader():
    from lineagestore.jvm.jars import gateway_conf

    assert gateway_conf("/ls.jar", [], [], []) == {"spark.ui.enabled": "false", "spark.jars": "/ls.jar"}
    conf = gateway_conf("/ls.jar", ["/a.jar", "/ls.jar"], ["g:a:1", "g:b:2"], ["file:///repo"])
    assert conf["spark.jars"] == "/ls.jar,/a.jar"
    assert conf["spark.jars.packages"] == "g:a:1,g:b:2"
    assert conf["spark.jars.repositories"] == "file:///repo"
    assert "spark.driver.extraClassPath" not in conf


def test_s3a_advice_names_the_missing_classes_and_the_option():
    from lineagestore.jvm.jars import AWS_SDK_S3_CLASS, S3A_FILESYSTEM_CLASS, s3a_advice

    both = [(S3A_FILESYSTEM_CLASS, "hadoop-aws"), (AWS_SDK_S3_CLASS, "the AWS SDK v2 bundle")]
    text = s3a_advice("s3a://b/c", both, "3.5.0", launched=True)
    assert text.startswith("s3a://b/c needs hadoop-aws and the AWS SDK v2 bundle, but the JVM the command")
    assert f"lacks {S3A_FILESYSTEM_CLASS} (from hadoop-aws) and {AWS_SDK_S3_CLASS}" in text
    assert "--packages org.apache.hadoop:hadoop-aws:3.5.0" in text
    assert "--jars /path/to/hadoop-aws-3.5.0.jar,/path/to/bundle-2.35.4.jar" in text
    only_sdk = s3a_advice("s3a://b/c", both[1:], "3.5.0", launched=True)
    assert S3A_FILESYSTEM_CLASS not in only_sdk and "Add --jars /path/to/bundle-2.35.4.jar" in only_sdk
    only_aws = s3a_advice("s3a://b/c", both[:1], "3.5.0", launched=True)
    assert "Add --jars /path/to/hadoop-aws-3.5.0.jar or --packages" in only_aws
    # in a process whose SparkSession the tools use, the session has to change, not the command line
    session = s3a_advice("s3a://b/c", both, "3.5.0", launched=False)
    assert "spark.jars.packages=org.apache.hadoop:hadoop-aws:3.5.0" in session and "--jars" not in session


def test_ivy_failures_are_named_with_what_to_do(tmp_path, monkeypatch):
    from lineagestore.jvm.jars import ivy_failure

    monkeypatch.setenv("HOME", str(tmp_path))
    pom_only = tmp_path / ".m2" / "repository" / "org" / "wildfly" / "openssl" / "wildfly-openssl" / "2.2.5"
    pom_only.mkdir(parents=True)
    (pom_only / "wildfly-openssl-2.2.5.pom").write_text("<project/>")
    log = tmp_path / "jvm.log"
    log.write_text(
        'Exception in thread "main" java.lang.RuntimeException: '
        "[download failed: org.wildfly.openssl#wildfly-openssl;2.2.5!wildfly-openssl.jar]\n"
    )
    text = ivy_failure(str(log), ["org.apache.hadoop:hadoop-aws:3.5.0"], [])
    assert text.startswith("could not resolve --packages org.apache.hadoop:hadoop-aws:3.5.0: Spark's Ivy")
    assert "could not download org.wildfly.openssl#wildfly-openssl;2.2.5!wildfly-openssl.jar" in text
    assert f"{pom_only} holds its POM without the jar" in text and "delete that directory" in text
    log.write_text("java.lang.RuntimeException: [unresolved dependency: g#a;1: not found]\n")
    text = ivy_failure(str(log), ["g:a:1"], ["https://mirror/maven2"])
    assert "found no g#a;1: not found" in text and "Maven Central and https://mirror/maven2" in text
    log.write_text("something else\n")
    assert ivy_failure(str(log), ["g:a:1"], []) is None
