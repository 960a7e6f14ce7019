"""Configure a SparkSession builder to use lineagestore."""

from __future__ import annotations

from typing import Any

from lineagestore._jar import jar_path

PROVIDER_CLASS = "io.lineagestore.spark.LineageStateStoreProvider"


def configure(builder: Any, **settings: Any) -> Any:
    """Return ``builder`` set up to use lineagestore as the state store of every streaming query.

    Adds the bundled jar to ``spark.jars``, sets the state store provider class and checkpoint format
    version 2. Each keyword argument ``name=value`` is set as ``spark.sql.streaming.stateStore.lineagestore.<name>``.
    Must be applied before the session's JVM starts (i.e. before the first ``getOrCreate()``).
    """
    jars = jar_path()
    existing = getattr(builder, "_options", {}).get("spark.jars")
    if existing and jars not in existing.split(","):
        jars = f"{existing},{jars}"
    builder = (
        builder.config("spark.jars", jars)
        .config("spark.sql.streaming.stateStore.providerClass", PROVIDER_CLASS)
        .config("spark.sql.streaming.stateStore.checkpointFormatVersion", "2")
    )
    for name, value in settings.items():
        builder = builder.config(f"spark.sql.streaming.stateStore.lineagestore.{name}", str(value))
    return builder
