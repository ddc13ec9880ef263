"""``is_tansu`` against every real broker: true on Tansu only."""

from __future__ import annotations

from typing import Any

import pytest

from aiokafka_lite._net.broker_identity import config_is_tansu, is_tansu
from aiokafka_lite._net.cluster import Cluster
from aiokafka_lite._net.options import ConnectionOptions
from aiokafka_lite.config import ConsumerConfig

pytestmark = pytest.mark.asyncio


async def test_is_tansu_recognises_tansu_and_nothing_else(any_broker: Any) -> None:
    config = ConsumerConfig.from_kwargs(bootstrap_servers=any_broker.bootstrap_servers)
    cluster = Cluster(ConnectionOptions.from_settings(config), config.bootstrap_servers)
    try:
        await cluster.bootstrap()
        assert await is_tansu(cluster) == (any_broker.kind == "tansu")
    finally:
        await cluster.close()


async def test_config_is_tansu_needs_only_the_settings(any_broker: Any) -> None:
    config = ConsumerConfig.from_kwargs(bootstrap_servers=any_broker.bootstrap_servers)
    assert await config_is_tansu(config) == (any_broker.kind == "tansu")
