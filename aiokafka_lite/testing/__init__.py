"""Real Kafka brokers for tests: Tansu, Apache Kafka (KRaft; one node, or a 3-broker ``KafkaCluster``)
and librdkafka's mock cluster.

Each broker listens on 127.0.0.1 on free ports, is a context manager, and exposes
``bootstrap_servers`` and ``name``. The pytest plugin (``aiokafka_lite.testing.plugin``) wraps them
as fixtures; ``helpers`` creates topics and produces test data with a reference client, and
``java_clients.VerifiableConsumer`` runs Kafka's own Java test consumer as a group peer, and
``java_share.VerifiableShareConsumer`` its share consumer (KIP-932).
Importing this package needs only the standard library; each broker checks its own prerequisites
when started and raises ``BrokerUnavailable`` if one is missing.
"""

from __future__ import annotations

from aiokafka_lite.testing._process import BrokerStartError, BrokerUnavailable
from aiokafka_lite.testing.apache_kafka import ApacheKafkaBroker
from aiokafka_lite.testing.helpers import ProduceError, create_topic, produce, produce_transactional
from aiokafka_lite.testing.java_clients import JavaClientError, VerifiableConsumer
from aiokafka_lite.testing.kafka_cluster import KafkaCluster
from aiokafka_lite.testing.mock_cluster import ApiKey, MockCluster, MockClusterError
from aiokafka_lite.testing.tansu import TansuBroker

__all__ = [
    "ApacheKafkaBroker",
    "ApiKey",
    "BrokerStartError",
    "BrokerUnavailable",
    "JavaClientError",
    "KafkaCluster",
    "MockCluster",
    "MockClusterError",
    "ProduceError",
    "TansuBroker",
    "VerifiableConsumer",
    "create_topic",
    "produce",
    "produce_transactional",
]
