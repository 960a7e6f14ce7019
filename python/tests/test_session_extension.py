"""configure() adds lineagestore's session extension (transformWithState on lineagestore) to
``spark.sql.extensions``, after the user's own, without duplicating it."""

from __future__ import annotations

from pyspark.sql import SparkSession

import lineagestore
from lineagestore._session import SESSION_EXTENSION


def test_configure_adds_the_session_extension():
    opts = lineagestore.configure(SparkSession.Builder(), use_bundled_jar=False)._options
    assert (
        opts["spark.sql.extensions"] == "io.lineagestore.spark.LineageSessionExtensions" == SESSION_EXTENSION
    )


def test_configure_appends_to_the_users_extensions_and_never_twice():
    users = "org.example.A, org.example.B"
    builder = SparkSession.Builder().config("spark.sql.extensions", users)
    once = lineagestore.configure(builder, use_bundled_jar=False)._options["spark.sql.extensions"]
    assert once == f"org.example.A,org.example.B,{SESSION_EXTENSION}"
    twice = lineagestore.configure(builder, use_bundled_jar=False)._options["spark.sql.extensions"]
    assert twice == once


def test_a_later_setting_turns_the_extension_off():
    builder = lineagestore.configure(SparkSession.Builder(), use_bundled_jar=False)
    off = builder.config("spark.sql.extensions", "org.example.A")._options["spark.sql.extensions"]
    assert off == "org.example.A"


def test_configure_adds_the_standby_plugin_after_the_users_own():
    from lineagestore._session import STANDBY_PLUGIN

    builder = SparkSession.Builder().config("spark.plugins", "org.example.P")
    once = lineagestore.configure(builder, use_bundled_jar=False)._options["spark.plugins"]
    assert once == f"org.example.P,{STANDBY_PLUGIN}"
    assert lineagestore.configure(builder, use_bundled_jar=False)._options["spark.plugins"] == once
