"""Suite-wide test configuration.

The Kafka broker fixtures (``kafka_broker``, ``tansu_broker``, ``apache_kafka_broker``,
``kafka39_broker``, ``mock_cluster``, ``unique_topic``, ``unique_group``) come from the pytest plugin
``aiokafka_lite.testing.plugin``, which the package registers as a ``pytest11`` entry point; choose
the default broker with ``--kafka-broker=tansu|kafka|kafka39|mock``.
"""

from __future__ import annotations

import pytest


def pytest_configure(config: pytest.Config) -> None:
    # Without the plugin every broker fixture would be "not found"; say how to fix that instead.
    if not config.pluginmanager.has_plugin("aiokafka_lite"):
        raise pytest.UsageError(
            "the aiokafka_lite pytest plugin is not loaded: install the package "
            "(pip install -e '.[test]') or pass -p aiokafka_lite.testing.plugin")
