"""Every operator family of ``test_operators.py`` once on the cluster (issue 18, scenario 4): aggregation,
windowed aggregation with eviction, dropDuplicates, dropDuplicatesWithinWatermark, stream-stream inner and
left outer joins, applyInPandasWithState with event-time timeouts; each over 4 restarts of its query, with
4 partitions on 3 executors, against the same plain-Python oracles."""

from test_operators import (  # noqa: F401  (collected here, run on the cluster session)
    test_aggregation_update_mode,
    test_apply_in_pandas_with_state_event_time_timeout,
    test_drop_duplicates,
    test_drop_duplicates_within_watermark,
    test_stream_stream_join,
    test_windowed_aggregation_append_mode_evicts,
)
