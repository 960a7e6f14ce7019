"""Real-time mode (Spark 4.3's ``trigger(realTime=...)``) on lineagestore: :func:`start`.

Spark refuses real-time mode when the session names a provider other than its own, but a query restarted from
a checkpoint keeps the provider its offset log recorded. :func:`start` calls the JVM's
``io.lineagestore.spark.RealTimeStart``: in a clone of the DataFrame's session (yours is never changed) it runs
a new checkpoint's first batch in micro-batch mode on lineagestore, refuses a checkpoint of another provider,
then starts the query in real-time mode and returns once its first batch is planned on lineagestore
(docs/operations.md, "Real-time mode").

    from lineagestore.realtime import start

    query = start(df, "/chk/q", "5 seconds", lambda w: w.outputMode("update").foreach(MyWriter()))

The session needs lineagestore's session extension (``lineagestore.configure`` adds it).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from lineagestore.jvm.errors import translated

_ROUTE_EXCEPTION = "io.lineagestore.spark.RealTimeRouteException"


class RealTimeRouteError(RuntimeError):
    """The query cannot run in real-time mode on lineagestore; the message names the checkpoint or setting."""


def _route_errors(body: Callable[[], Any]) -> Any:
    return translated(body, {_ROUTE_EXCEPTION: RealTimeRouteError})


def start(
    df: Any,
    checkpoint_location: str,
    batch_duration: str,
    configure: Callable[[Any], Any],
    first_batch_timeout: float = 600.0,
) -> Any:
    """Starts the streaming DataFrame ``df`` in real-time mode on lineagestore at ``checkpoint_location``.

    ``batch_duration`` is the real-time batch's length ("5 seconds"). ``configure`` receives a
    ``DataStreamWriter`` of the query's DataFrame (rebuilt in the helper's session) and returns it with the
    sink and output mode set; it is called once per run (the first batch, on a new checkpoint, runs in
    micro-batch mode) and must not set the checkpoint location or the trigger, which the helper sets. A new
    checkpoint waits up to ``first_batch_timeout`` seconds for input. The returned query belongs to the
    helper's session: ``query.sparkSession.streams`` (not your session's ``streams``) lists it.
    """
    from pyspark.sql import SparkSession
    from pyspark.sql.classic.dataframe import DataFrame
    from pyspark.sql.streaming.query import StreamingQuery

    spark = df.sparkSession
    jvm = spark._jvm
    steps = _route_errors(lambda: jvm.io.lineagestore.spark.RealTimeStart(df._jdf, checkpoint_location))
    session = SparkSession(spark.sparkContext, steps.session())
    rebuilt = DataFrame(steps.dataFrame(), session)

    def writer() -> Any:
        return configure(rebuilt.writeStream)._jwrite

    if _route_errors(steps.needsFirstBatch):
        _route_errors(lambda: steps.runFirstBatch(writer(), int(first_batch_timeout * 1000)))
    return StreamingQuery(_route_errors(lambda: steps.startRealTime(writer(), batch_duration)))
