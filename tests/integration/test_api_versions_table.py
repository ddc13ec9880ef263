"""KIP-896: Apache Kafka 4.0 removed old versions of many APIs. Against the ApiVersions of a 3.9.x and
a 4.x broker (the fixtures' 3.9.2 and 4.4.0), every API this client sends resolves to a version both
sides speak, never below what 4.x still serves; where nothing overlaps, the error names both ranges.
The table is printed (run with -s) for the record."""

from __future__ import annotations

import pytest

from aiokafka_lite._net.connection import Connection
from aiokafka_lite._net.options import ConnectionOptions
from aiokafka_lite.errors import UnsupportedVersionError
from aiokafka_lite.fetch.requests import MAX_FETCH_VERSION
from aiokafka_lite.group.classic.offsets import VERSION_CAPS
from aiokafka_lite.group.consumer_protocol.offsets import OFFSET_VERSION_CAP
from aiokafka_lite.protocol.api import pick_version
from aiokafka_lite.protocol.messages import APIS_BY_KEY

# Test-only requests (the testing helpers' producer and topic creation) are not the consumer's.
SENT = sorted((api for api in APIS_BY_KEY.values() if api.name not in ("Produce", "CreateTopics")),
              key=lambda api: api.key)
# Where the client sends less than its schema's newest version (OffsetCommit and OffsetFetch v10 name
# topics by id; this client commits by name; Fetch v17-v18 add only replicas' fields), the version
# it actually sends.
assert all(cap == OFFSET_VERSION_CAP for cap in VERSION_CAPS.values())  # both group protocols cap alike
CAPS = {**VERSION_CAPS, next(a for a in APIS_BY_KEY.values() if a.name == "Fetch").key: MAX_FETCH_VERSION}
# The KIP-848 APIs appear in a 3.9 broker's ApiVersions only with the new group coordinator enabled.
KIP848 = ("ConsumerGroupHeartbeat", "ConsumerGroupDescribe")
# The KIP-714 APIs appear only on a broker with a client telemetry plugin (metric.reporters): the
# consumer sends them only where they are advertised (tests/integration/test_metrics_push.py).
KIP714 = ("GetTelemetrySubscriptions", "PushTelemetry")
# The KIP-932 share-group APIs: a 3.9 broker lists none of them (early access came with 4.0, and
# 4.1 replaced those versions); 4.3 and 4.4 serve them (the share.version feature is on by default).
KIP932 = ("ShareGroupHeartbeat", "ShareGroupDescribe", "ShareFetch", "ShareAcknowledge", "DescribeShareGroupOffsets",
          "AlterShareGroupOffsets", "DeleteShareGroupOffsets")


async def _broker_versions(broker) -> dict[int, tuple[int, int]]:
    host, _, port = broker.bootstrap_servers.split(",")[0].rpartition(":")
    connection = await Connection.open(host, int(port), ConnectionOptions(), timeout=10.0)
    try:
        return dict(connection.broker_versions)
    finally:
        await connection.close()


@pytest.mark.asyncio
async def test_every_api_we_send_has_a_common_version_with_3_9_and_4_3(apache_kafka_broker, kafka39_broker):
    kafka4 = await _broker_versions(apache_kafka_broker)
    kafka39 = await _broker_versions(kafka39_broker)
    old, new = kafka39_broker.version, apache_kafka_broker.version
    rows = [f"{'API':24} {'ours':>7} {old:>7} {'sent':>5} {new:>7} {'sent':>5}"]
    for api in SENT:
        row = f"{api.name:24} {api.min_version:>3}-{api.max_version:<3}"
        for versions, name in ((kafka39, old), (kafka4, new)):
            if api.key not in versions:
                assert name == old or api.name in KIP714, f"{name} lacks {api.name}"
                assert api.name in KIP848 + KIP714 + KIP932, f"{name} lacks {api.name}"
                row += f" {'-':>7} {'-':>5}"
                continue
            low, high = versions[api.key]
            sent = pick_version(api, low, high, CAPS.get(api.key))
            assert max(low, api.min_version) <= sent <= min(high, api.max_version)
            row += f" {low:>3}-{high:<3} {sent:>5}"
        rows.append(row)
        # Never a version 4.x removed: our lowest is one the 4.x broker still serves.
        assert api.min_version >= kafka4.get(api.key, (0, 0))[0], f"{api.name} v{api.min_version} is gone from 4.x"
    print("\n" + "\n".join(rows))


def test_no_common_version_names_both_ranges():
    fetch = next(api for api in APIS_BY_KEY.values() if api.name == "Fetch")
    with pytest.raises(UnsupportedVersionError,
                       match=rf"Fetch: the broker supports v0-v3, this client v{fetch.min_version}-"
                             rf"v{fetch.max_version}; no common version"):
        pick_version(fetch, 0, 3)
