"""The name ``lineagestore.repartition`` of earlier releases (docs/repartition.md imported ``repartition``
from it): the code lives in :mod:`lineagestore.checkpoint.repartitioning`, also reachable as
``lineagestore.checkpoint.repartition``. Kept so that code written against it keeps working."""

from lineagestore.checkpoint.repartitioning import (  # noqa: F401
    STEP_AFTER_COMMIT,
    STEP_AFTER_OFFSETS,
    STEP_AFTER_STORES,
    STEP_TASK_AFTER_WRITE,
    STEPS,
    InjectedCrash,
    Plan,
    StorePlan,
    plan,
    repartition,
    repartitioned_offsets,
    undo,
)
from lineagestore.checkpoint.spark_files import (  # noqa: F401
    TWS_ENCODING_KEY,
    TwsInfo,
    is_repartition_entry,
    offset_conf,
    tws_info,
    unfinished_repartition,
)
