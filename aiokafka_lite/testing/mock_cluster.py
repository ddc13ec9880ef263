"""librdkafka's in-process mock Kafka cluster, driven through ctypes, for fault-injection tests.

The shared library comes from the confluent-kafka wheel (``pip install '.[testing]'`` in the aiokafka-lite clone).
The mock brokers run on librdkafka threads inside this Python process and listen on 127.0.0.1::

    with MockCluster(num_brokers=3) as cluster:
        cluster.create_topic("t", partitions=3)
        cluster.push_request_errors(ApiKey.JOIN_GROUP, [ErrorCode.REBALANCE_IN_PROGRESS])
        cluster.broker_set_down(2)
        ... Consumer("t", bootstrap_servers=cluster.bootstrap_servers) ...

It supports produce, fetch, consumer groups, offsets and transactions, but not the admin APIs
(CreateTopics): create topics with ``create_topic``. It cannot be restarted.
"""

from __future__ import annotations

import ctypes
import glob
import os
import threading
from collections.abc import Sequence
from enum import IntEnum
from types import TracebackType
from typing import Any

from aiokafka_lite.testing._process import BrokerUnavailable

_RD_KAFKA_PRODUCER = 0
_RD_KAFKA_CONF_OK = 0
_ERRSTR_SIZE = 512

# rd_kafka_mock_cluster_t and rd_kafka_t are opaque pointers.
_P = ctypes.c_void_p
_I16, _I32, _I64, _INT, _SIZE, _STR = (ctypes.c_int16, ctypes.c_int32, ctypes.c_int64, ctypes.c_int,
                                       ctypes.c_size_t, ctypes.c_char_p)

# name -> (restype, argtypes); variadic functions are declared without argtypes (see below).
_SIGNATURES: dict[str, tuple[Any, list[Any] | None]] = {
    "rd_kafka_conf_new": (_P, []),
    "rd_kafka_conf_set": (_INT, [_P, _STR, _STR, _STR, _SIZE]),
    "rd_kafka_conf_destroy": (None, [_P]),
    "rd_kafka_new": (_P, [_INT, _P, _STR, _SIZE]),
    "rd_kafka_destroy": (None, [_P]),
    "rd_kafka_err2name": (_STR, [_INT]),
    "rd_kafka_mock_cluster_new": (_P, [_P, _INT]),
    "rd_kafka_mock_cluster_destroy": (None, [_P]),
    "rd_kafka_mock_cluster_bootstraps": (_STR, [_P]),
    "rd_kafka_mock_topic_create": (_INT, [_P, _STR, _INT, _INT]),
    "rd_kafka_mock_topic_set_error": (None, [_P, _STR, _INT]),
    "rd_kafka_mock_push_request_errors_array": (None, [_P, _I16, _SIZE, ctypes.POINTER(_INT)]),
    "rd_kafka_mock_clear_request_errors": (None, [_P, _I16]),
    "rd_kafka_mock_broker_push_request_error_rtts": (_INT, None),
    "rd_kafka_mock_broker_set_down": (_INT, [_P, _I32]),
    "rd_kafka_mock_broker_set_up": (_INT, [_P, _I32]),
    "rd_kafka_mock_broker_set_rtt": (_INT, [_P, _I32, _INT]),
    "rd_kafka_mock_coordinator_set": (_INT, [_P, _STR, _STR, _I32]),
    "rd_kafka_mock_partition_set_leader": (_INT, [_P, _STR, _I32, _I32]),
    "rd_kafka_mock_set_apiversion": (_INT, [_P, _I16, _I16, _I16]),
    "rd_kafka_mock_group_initial_rebalance_delay_ms": (None, [_P, _I32]),
}


class ApiKey(IntEnum):
    """Kafka request types most often used with error injection."""

    PRODUCE = 0
    FETCH = 1
    LIST_OFFSETS = 2
    METADATA = 3
    OFFSET_COMMIT = 8
    OFFSET_FETCH = 9
    FIND_COORDINATOR = 10
    JOIN_GROUP = 11
    HEARTBEAT = 12
    LEAVE_GROUP = 13
    SYNC_GROUP = 14
    API_VERSIONS = 18


TRANSPORT_ERROR = -195  # RD_KAFKA_RESP_ERR__TRANSPORT: the mock broker drops the connection


MOCK_PARSEABLE_MAX = {11: 5, 14: 3, 13: 2}  # JoinGroup, SyncGroup, LeaveGroup (its v3+ responses are malformed)


class MockClusterError(RuntimeError):
    """A mock-cluster call returned a librdkafka error code."""


def find_librdkafka() -> str:
    """Path of the librdkafka shared library bundled with the confluent-kafka wheel."""
    try:
        import confluent_kafka
    except ImportError as exc:
        raise BrokerUnavailable(
            "the mock cluster needs confluent-kafka: pip install '.[testing]' in the aiokafka-lite clone") from exc
    site = os.path.dirname(os.path.dirname(os.path.abspath(confluent_kafka.__file__)))
    candidates = sorted(glob.glob(os.path.join(site, "confluent_kafka.libs", "librdkafka*.so*")))
    candidates += sorted(glob.glob(os.path.join(site, "confluent_kafka", ".dylibs", "librdkafka*.dylib")))
    if not candidates:
        raise BrokerUnavailable(f"no bundled librdkafka found next to {confluent_kafka.__file__}")
    return candidates[0]


_lib: ctypes.CDLL | None = None
_lib_lock = threading.Lock()


def _library() -> ctypes.CDLL:
    global _lib
    with _lib_lock:
        if _lib is None:
            lib = ctypes.CDLL(find_librdkafka())
            for name, (restype, argtypes) in _SIGNATURES.items():
                func = getattr(lib, name)
                func.restype = restype
                if argtypes is not None:
                    func.argtypes = argtypes
            _lib = lib
        return _lib


# bootstrap string -> live cluster, so helpers given only an address can reach the cluster's API.
_LIVE: dict[str, MockCluster] = {}


def live_cluster(bootstrap_servers: str) -> MockCluster | None:
    """The running MockCluster serving ``bootstrap_servers``, if it lives in this process."""
    return _LIVE.get(bootstrap_servers)


class MockCluster:
    """An in-process mock Kafka cluster with ``num_brokers`` brokers (ids 1..num_brokers)."""

    name = "mock"

    def __init__(self, num_brokers: int = 3, *, initial_rebalance_delay_ms: int = 0) -> None:
        self.num_brokers = num_brokers
        self.initial_rebalance_delay_ms = initial_rebalance_delay_ms
        self._lib: ctypes.CDLL | None = None
        self._rk: int | None = None
        self._mcluster: int | None = None
        self._bootstraps = ""

    @property
    def bootstrap_servers(self) -> str:
        if self._mcluster is None:
            raise RuntimeError("MockCluster is not running; call start() first")
        return self._bootstraps

    bootstraps = bootstrap_servers

    def start(self) -> MockCluster:
        if self._mcluster is not None:
            return self
        lib = _library()
        self._lib = lib
        self._rk = self._new_handle(lib)
        mcluster = lib.rd_kafka_mock_cluster_new(self._rk, self.num_brokers)
        if not mcluster:
            self.close()
            raise MockClusterError("rd_kafka_mock_cluster_new failed")
        self._mcluster = mcluster
        self._bootstraps = lib.rd_kafka_mock_cluster_bootstraps(mcluster).decode()
        lib.rd_kafka_mock_group_initial_rebalance_delay_ms(mcluster, self.initial_rebalance_delay_ms)
        # The mock advertises flexible versions of JoinGroup (v6) and SyncGroup (v4) but fails to
        # parse them (it drops the connection; "read buffer underflow for SyncGroup v4"), while
        # Apache Kafka accepts the same requests. Advertise what the mock really parses.
        for api_key, max_version in MOCK_PARSEABLE_MAX.items():
            self.set_api_version(api_key, 0, max_version)
        _LIVE[self._bootstraps] = self
        return self

    @staticmethod
    def _new_handle(lib: ctypes.CDLL) -> int:
        errstr = ctypes.create_string_buffer(_ERRSTR_SIZE)
        conf = lib.rd_kafka_conf_new()
        # The owning handle never talks to anyone; keep it quiet and off the network.
        for key, value in ((b"log_level", b"3"), (b"bootstrap.servers", b"")):
            if lib.rd_kafka_conf_set(conf, key, value, errstr, _ERRSTR_SIZE) != _RD_KAFKA_CONF_OK:
                lib.rd_kafka_conf_destroy(conf)
                raise MockClusterError(errstr.value.decode(errors="replace"))
        rk = lib.rd_kafka_new(_RD_KAFKA_PRODUCER, conf, errstr, _ERRSTR_SIZE)  # takes ownership of conf
        if not rk:
            raise MockClusterError(f"rd_kafka_new failed: {errstr.value.decode(errors='replace')}")
        return int(rk)

    def close(self) -> None:
        """Destroy the cluster (closing its listeners) and the handle that owns it; idempotent."""
        lib = self._lib
        if lib is None:
            return
        if self._mcluster is not None:
            _LIVE.pop(self._bootstraps, None)
            lib.rd_kafka_mock_cluster_destroy(self._mcluster)
            self._mcluster = None
        if self._rk is not None:
            lib.rd_kafka_destroy(self._rk)
            self._rk = None

    stop = close

    def __enter__(self) -> MockCluster:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    # -- operations ----------------------------------------------------------------------------

    def _cluster(self) -> tuple[ctypes.CDLL, int]:
        if self._lib is None or self._mcluster is None:
            raise RuntimeError("MockCluster is not running")
        return self._lib, self._mcluster

    def _check(self, err: int, what: str) -> None:
        if err != 0:
            lib, _ = self._cluster()
            name = lib.rd_kafka_err2name(err).decode()
            raise MockClusterError(f"{what}: {name} ({err})")

    def create_topic(self, topic: str, partitions: int = 1, replication_factor: int = 1) -> None:
        lib, mc = self._cluster()
        rf = min(replication_factor, self.num_brokers)
        self._check(lib.rd_kafka_mock_topic_create(mc, topic.encode(), partitions, rf),
                    f"create topic {topic!r}")

    def topic_set_error(self, topic: str, error_code: int) -> None:
        """Make Metadata (and AddPartitionsToTxn) report ``error_code`` for ``topic``; 0 clears it."""
        lib, mc = self._cluster()
        lib.rd_kafka_mock_topic_set_error(mc, topic.encode(), error_code)

    def push_request_errors(self, api_key: int, errors: Sequence[int]) -> None:
        """The next ``len(errors)`` requests of ``api_key`` (to any broker) fail with these codes in order."""
        lib, mc = self._cluster()
        array = (_INT * len(errors))(*errors)
        lib.rd_kafka_mock_push_request_errors_array(mc, api_key, len(errors), array)

    def clear_request_errors(self, api_key: int) -> None:
        lib, mc = self._cluster()
        lib.rd_kafka_mock_clear_request_errors(mc, api_key)

    def broker_push_request_error_rtts(self, broker_id: int, api_key: int,
                                       errors_and_rtts: Sequence[tuple[int, int]]) -> None:
        """Broker-level errors with a response delay: [(error_code, rtt_ms), ...] for ``api_key``."""
        lib, mc = self._cluster()
        varargs: list[Any] = []
        for error_code, rtt_ms in errors_and_rtts:
            varargs += [_INT(error_code), _INT(rtt_ms)]
        func = lib.rd_kafka_mock_broker_push_request_error_rtts
        err = func(_P(mc), _I32(broker_id), _I16(api_key), _SIZE(len(errors_and_rtts)), *varargs)
        self._check(err, f"push error rtts on broker {broker_id}")

    def broker_set_down(self, broker_id: int) -> None:
        """Disconnect the broker's clients and refuse new connections (-1: all brokers)."""
        lib, mc = self._cluster()
        self._check(lib.rd_kafka_mock_broker_set_down(mc, broker_id), f"set broker {broker_id} down")

    def broker_set_up(self, broker_id: int) -> None:
        lib, mc = self._cluster()
        self._check(lib.rd_kafka_mock_broker_set_up(mc, broker_id), f"set broker {broker_id} up")

    def broker_set_rtt(self, broker_id: int, rtt_ms: int) -> None:
        """Delay every response of the broker by ``rtt_ms`` (-1: all brokers)."""
        lib, mc = self._cluster()
        self._check(lib.rd_kafka_mock_broker_set_rtt(mc, broker_id, rtt_ms), f"set rtt of {broker_id}")

    def coordinator_set(self, key_type: str, key: str, broker_id: int) -> None:
        """Pin the coordinator of a group (``key_type="group"``) or transactional id ("transaction")."""
        lib, mc = self._cluster()
        self._check(lib.rd_kafka_mock_coordinator_set(mc, key_type.encode(), key.encode(), broker_id),
                    f"set {key_type} coordinator of {key!r}")

    def partition_set_leader(self, topic: str, partition: int, broker_id: int) -> None:
        """Move a partition's leadership (-1: leaderless); creates the topic if needed."""
        lib, mc = self._cluster()
        self._check(lib.rd_kafka_mock_partition_set_leader(mc, topic.encode(), partition, broker_id),
                    f"set leader of {topic}[{partition}]")

    def set_api_version(self, api_key: int, min_version: int, max_version: int) -> None:
        """Narrow the version range the brokers advertise for ``api_key`` (-1, -1 disables it)."""
        lib, mc = self._cluster()
        self._check(lib.rd_kafka_mock_set_apiversion(mc, api_key, min_version, max_version),
                    f"set api version of key {api_key}")
