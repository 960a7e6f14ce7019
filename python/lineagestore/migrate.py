"""The name ``lineagestore.migrate`` of earlier releases (``from lineagestore.migrate import migrate``): the
code lives in :mod:`lineagestore.checkpoint.migration`, also reachable as ``lineagestore.checkpoint.migrate``.
Kept so that code written against it keeps working."""

from lineagestore.checkpoint.migration import SPARK_PROVIDERS, migrate  # noqa: F401
