"""TLS and SASL against Apache Kafka 4.3.1 (and SCRAM against Tansu): records flow over every
secured listener, wrong identities and wrong passwords fail fast with a typed error, and secrets
never reach a log line, a repr or an error message.

One broker for the module, with four extra listeners:

* ``SSL``: a certificate for ``localhost`` and ``127.0.0.1`` signed by a CA the tests generate;
* ``WRONGNAME``: TLS with a certificate for ``wrong.example`` only (same CA);
* ``SASL_PLAINTEXT``: PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512 (SCRAM users are created when the
  storage is formatted, ``kafka-storage format --add-scram``);
* ``SASL_SSL``: SCRAM-SHA-512 over TLS;
* ``SASL_SSL_ALL``: PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512 over TLS;
* ``MTLS``: TLS requiring a client certificate, signed by a CA made with ``keytool`` as a Java shop
  would (``java_stores``), so that docs/security.md's conversion commands and Python blocks are run
  here as written, with only the address replaced.
"""

from __future__ import annotations

import asyncio
import logging
import re
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from aiokafka_lite import Consumer
from aiokafka_lite.errors import AuthenticationError, KafkaError
from aiokafka_lite.testing.apache_kafka import ApacheKafkaBroker
from aiokafka_lite.testing.certs import IssuedCertificate, TestCA, kafka_ssl_listener_properties
from aiokafka_lite.testing.helpers import create_topic, produce

from ._consumers import poll_until

PLAIN_USER, PLAIN_PASSWORD = "alice", "plain-pw-Zq8#unique"
SCRAM_USER, SCRAM_PASSWORD = "bob", "scram-pw-Xk3!unique"
WRONG_PASSWORD = "wrong-pw-Mv5$unique"
SECRETS = (PLAIN_PASSWORD, SCRAM_PASSWORD, WRONG_PASSWORD)
RECORDS = 25
STOREPASS = "changeit"  # the password docs/security.md's conversion commands use
DOC = Path(__file__).resolve().parents[2] / "docs" / "security.md"
DOC_ADDRESS = "kafka.example.com:9093"

_PLAIN_JAAS = ("org.apache.kafka.common.security.plain.PlainLoginModule required "
               f'user_{PLAIN_USER}="{PLAIN_PASSWORD}";')
_SCRAM_JAAS = "org.apache.kafka.common.security.scram.ScramLoginModule required;"


def _sasl_properties(listener: str, mechanisms: list[str]) -> dict[str, str]:
    prefix = f"listener.name.{listener.lower()}."
    props = {prefix + "sasl.enabled.mechanisms": ",".join(mechanisms)}
    for mechanism in mechanisms:
        jaas = _PLAIN_JAAS if mechanism == "PLAIN" else _SCRAM_JAAS
        props[f"{prefix}{mechanism.lower()}.sasl.jaas.config"] = jaas
    return props


def _keytool(directory: Path, *args: str) -> None:
    # A keytool run is a JVM start: these flags make each about a third quicker.
    quick = ("-J-XX:TieredStopAtLevel=1", "-J-XX:+UseSerialGC")
    done = subprocess.run(["keytool", *quick, *args], cwd=directory, capture_output=True, text=True, timeout=120,
                          check=False)
    assert done.returncode == 0, f"keytool {' '.join(args)}: {done.stdout}{done.stderr}"


def _java_stores(directory: Path, broker_ca: Path) -> Path:
    """What a Java client brings: truststore.jks trusting the brokers' CA (alias caroot) and
    keystore.jks holding a client key signed by a CA of its own. Returns that CA's certificate (PEM),
    for the broker's MTLS listener to trust."""
    directory.mkdir(parents=True, exist_ok=True)
    pw = ("-storepass", STOREPASS)
    ec = ("-keyalg", "EC", "-groupname", "secp256r1", "-validity", "2")
    _keytool(directory, "-genkeypair", "-alias", "clientca", *ec, "-dname", "CN=client CA", "-ext", "bc:c",
             "-keystore", "clientca.p12", *pw)
    _keytool(directory, "-exportcert", "-rfc", "-alias", "clientca", "-keystore", "clientca.p12", *pw,
             "-file", "clientca.pem")
    _keytool(directory, "-importcert", "-noprompt", "-alias", "caroot", "-file", str(broker_ca),
             "-keystore", "truststore.jks", "-storetype", "JKS", *pw)
    _keytool(directory, "-genkeypair", "-alias", "client", *ec, "-dname", "CN=client", "-keystore",
             "keystore.jks", "-storetype", "JKS", *pw, "-keypass", STOREPASS)
    _keytool(directory, "-certreq", "-alias", "client", "-keystore", "keystore.jks", *pw, "-file", "client.csr")
    _keytool(directory, "-gencert", "-alias", "clientca", "-keystore", "clientca.p12", *pw, "-infile",
             "client.csr", "-outfile", "client.cer", "-rfc", "-ext", "eku=clientAuth", "-validity", "2")
    _keytool(directory, "-importcert", "-noprompt", "-alias", "clientca", "-file", "clientca.pem",
             "-keystore", "keystore.jks", *pw)
    _keytool(directory, "-importcert", "-alias", "client", "-file", "client.cer", "-keystore", "keystore.jks", *pw)
    return directory / "clientca.pem"


class SecureKafka:
    def __init__(self, broker: ApacheKafkaBroker, ca: TestCA, other_ca: TestCA, java_stores: Path) -> None:
        self.broker = broker
        self.ca = ca
        self.other_ca = other_ca
        self.java_stores = java_stores  # truststore.jks, keystore.jks (password STOREPASS)

    def address(self, listener: str) -> str:
        return f"127.0.0.1:{self.broker.listener_port(listener)}"


@pytest.fixture(scope="module")
def secure_kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureKafka]:
    directory: Path = tmp_path_factory.mktemp("certs")
    ca = TestCA.create(directory / "ca")
    other_ca = TestCA.create(directory / "other", name="some other CA")
    good: IssuedCertificate = ca.issue("broker", ["localhost", "127.0.0.1"])
    wrong: IssuedCertificate = ca.issue("wrong", ["wrong.example"])
    if shutil.which("keytool") is None:
        pytest.skip("keytool (it comes with Java) is not on PATH")
    client_ca = _java_stores(directory / "java", ca.cert_path)
    # bob for the SCRAM tests; alice (PLAIN's user, same password) for docs/security.md's blocks.
    scram_users = [arg for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512")
                   for user, password in ((SCRAM_USER, SCRAM_PASSWORD), (PLAIN_USER, PLAIN_PASSWORD))
                   for arg in ("--add-scram", f"{mechanism}=[name={user},password={password}]")]
    mtls = "listener.name.mtls."
    broker = ApacheKafkaBroker(
        extra_listeners={"SSL": "SSL", "WRONGNAME": "SSL", "SASL_PLAINTEXT": "SASL_PLAINTEXT",
                         "SASL_SSL": "SASL_SSL", "SASL_SSL_ALL": "SASL_SSL", "MTLS": "SSL"},
        extra_properties={
            **kafka_ssl_listener_properties("SSL", good),
            **kafka_ssl_listener_properties("WRONGNAME", wrong),
            **kafka_ssl_listener_properties("SASL_SSL", good),
            **kafka_ssl_listener_properties("SASL_SSL_ALL", good),
            **kafka_ssl_listener_properties("MTLS", good),
            mtls + "ssl.client.auth": "required",
            mtls + "ssl.truststore.type": "PEM",
            mtls + "ssl.truststore.location": str(client_ca),
            **_sasl_properties("SASL_PLAINTEXT", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]),
            **_sasl_properties("SASL_SSL", ["SCRAM-SHA-512"]),
            **_sasl_properties("SASL_SSL_ALL", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]),
        },
        storage_format_args=scram_users,
    )
    from aiokafka_lite.testing._process import BrokerUnavailable

    try:
        broker.start()
    except BrokerUnavailable as exc:
        pytest.skip(f"Apache Kafka unavailable: {exc}")
    try:
        yield SecureKafka(broker, ca, other_ca, directory / "java")
    finally:
        broker.stop()


@pytest.fixture
def topic_with_records(secure_kafka: SecureKafka, unique_topic: str) -> str:
    create_topic(secure_kafka.broker.bootstrap_servers, unique_topic, partitions=2)
    produce(secure_kafka.broker.bootstrap_servers, unique_topic,
            [(f"k{i}".encode(), f"v{i}".encode()) for i in range(RECORDS)])
    return unique_topic


def _no_secret_in(text: str) -> None:
    for secret in SECRETS:
        assert secret not in text, f"a password leaked: ...{text[max(0, text.find(secret) - 80):][:200]}"


def _error_texts(exc: BaseException | None) -> str:
    """The message, repr and args of an exception and of everything it chains to."""
    parts = []
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        parts += [str(exc), repr(exc), repr(exc.args)]
        exc = exc.__cause__ or exc.__context__
    return "\n".join(parts)


async def _consume_all(topic: str, **settings: Any) -> None:
    async with Consumer(topic, group_id=f"g-{topic}", auto_offset_reset="earliest",
                        session_timeout_ms=6000, heartbeat_interval_ms=500, **settings) as consumer:
        got = await poll_until(consumer, lambda records: len(records) >= RECORDS, timeout=60)
        assert sorted(r.value for r in got) == sorted(f"v{i}".encode() for i in range(RECORDS))
        await consumer.commit()
        _no_secret_in(repr(consumer.config))
        _no_secret_in(repr(consumer))
        _no_secret_in(str(consumer.metrics()))


async def _start_and_poll(consumer: Consumer, polls: int = 1) -> None:
    async with consumer:
        for _ in range(polls):
            await consumer.poll(timeout=5.0 if polls == 1 else 1.0)


async def _start_and_list_topics(consumer: Consumer) -> None:
    async with consumer:
        await consumer.list_topics(timeout=5.0)


# ---------------------------------------------------------------- TLS

@pytest.mark.asyncio
async def test_tls_consumes_records_verifying_the_broker(secure_kafka: SecureKafka,
                                                         topic_with_records: str) -> None:
    await _consume_all(topic_with_records, bootstrap_servers=secure_kafka.address("SSL"),
                       security_protocol="SSL", ssl_cafile=str(secure_kafka.ca.cert_path))


@pytest.mark.asyncio
async def test_tls_rejects_a_certificate_for_another_name(secure_kafka: SecureKafka,
                                                          topic_with_records: str) -> None:
    """Hostname verification is on by default: 127.0.0.1 is not wrong.example."""
    began = time.monotonic()
    consumer = Consumer(topic_with_records, bootstrap_servers=secure_kafka.address("WRONGNAME"),
                        group_id="g-wrong-name", security_protocol="SSL",
                        ssl_cafile=str(secure_kafka.ca.cert_path))
    with pytest.raises(AuthenticationError, match="certificate verification failed") as caught:
        await _start_and_poll(consumer)
    assert "127.0.0.1" in str(caught.value)
    assert time.monotonic() - began < 5.0


@pytest.mark.asyncio
async def test_tls_wrong_name_is_accepted_without_hostname_check(secure_kafka: SecureKafka,
                                                                 topic_with_records: str) -> None:
    await _consume_all(topic_with_records, bootstrap_servers=secure_kafka.address("WRONGNAME"),
                       security_protocol="SSL", ssl_cafile=str(secure_kafka.ca.cert_path),
                       ssl_check_hostname=False)


@pytest.mark.asyncio
async def test_tls_rejects_a_certificate_from_an_untrusted_ca(secure_kafka: SecureKafka,
                                                              topic_with_records: str) -> None:
    began = time.monotonic()
    consumer = Consumer(topic_with_records, bootstrap_servers=secure_kafka.address("SSL"),
                        group_id="g-untrusted", security_protocol="SSL",
                        ssl_cafile=str(secure_kafka.other_ca.cert_path), ssl_check_hostname=False)
    with pytest.raises(AuthenticationError, match="certificate verification failed"):
        await _start_and_poll(consumer)
    assert time.monotonic() - began < 5.0


# ---------------------------------------------------------------- SASL

SASL_CASES = [
    pytest.param("PLAIN", PLAIN_USER, PLAIN_PASSWORD, id="PLAIN"),
    pytest.param("SCRAM-SHA-256", SCRAM_USER, SCRAM_PASSWORD, id="SCRAM-SHA-256"),
    pytest.param("SCRAM-SHA-512", SCRAM_USER, SCRAM_PASSWORD, id="SCRAM-SHA-512"),
]


@pytest.mark.parametrize(("mechanism", "user", "password"), SASL_CASES)
@pytest.mark.asyncio
async def test_sasl_consumes_records_and_never_logs_the_password(
        secure_kafka: SecureKafka, topic_with_records: str, caplog: pytest.LogCaptureFixture,
        mechanism: str, user: str, password: str) -> None:
    caplog.set_level(logging.DEBUG)
    await _consume_all(topic_with_records, bootstrap_servers=secure_kafka.address("SASL_PLAINTEXT"),
                       security_protocol="SASL_PLAINTEXT", sasl_mechanism=mechanism,
                       sasl_plain_username=user, sasl_plain_password=password)
    assert caplog.records, "DEBUG logging was captured"
    _no_secret_in(caplog.text)
    _no_secret_in("\n".join(repr(r.args) for r in caplog.records))


@pytest.mark.asyncio
async def test_sasl_ssl_scram_consumes_records(secure_kafka: SecureKafka, topic_with_records: str) -> None:
    await _consume_all(topic_with_records, bootstrap_servers=secure_kafka.address("SASL_SSL"),
                       security_protocol="SASL_SSL", ssl_cafile=str(secure_kafka.ca.cert_path),
                       sasl_mechanism="SCRAM-SHA-512", sasl_plain_username=SCRAM_USER,
                       sasl_plain_password=SCRAM_PASSWORD)


@pytest.mark.parametrize(("mechanism", "user"), [("PLAIN", PLAIN_USER), ("SCRAM-SHA-256", SCRAM_USER),
                                                 ("SCRAM-SHA-512", SCRAM_USER), ("SCRAM-SHA-256", "nobody")])
@pytest.mark.asyncio
async def test_wrong_password_fails_fast_with_authentication_error(
        secure_kafka: SecureKafka, topic_with_records: str, caplog: pytest.LogCaptureFixture,
        mechanism: str, user: str) -> None:
    caplog.set_level(logging.DEBUG)
    consumer = Consumer(topic_with_records, bootstrap_servers=secure_kafka.address("SASL_PLAINTEXT"),
                        group_id="g-wrong-password", security_protocol="SASL_PLAINTEXT",
                        sasl_mechanism=mechanism, sasl_plain_username=user,
                        sasl_plain_password=WRONG_PASSWORD, default_api_timeout_ms=30000)
    began = time.monotonic()
    with pytest.raises(AuthenticationError) as caught:
        await _start_and_poll(consumer, polls=20)
    elapsed = time.monotonic() - began
    assert elapsed < 5.0, f"{elapsed:.1f} s: a retry loop, not a fast failure"
    message = str(caught.value)
    assert mechanism in message, message
    assert user in message, message
    _no_secret_in(_error_texts(caught.value))
    _no_secret_in(caplog.text)
    _no_secret_in(repr(consumer.config))


@pytest.mark.asyncio
async def test_sasl_mechanism_not_enabled_names_the_offered_ones(secure_kafka: SecureKafka,
                                                                 topic_with_records: str) -> None:
    consumer = Consumer(topic_with_records, bootstrap_servers=secure_kafka.address("SASL_SSL"),
                        group_id="g-mechanism", security_protocol="SASL_SSL",
                        ssl_cafile=str(secure_kafka.ca.cert_path), sasl_mechanism="PLAIN",
                        sasl_plain_username=PLAIN_USER, sasl_plain_password=PLAIN_PASSWORD)
    with pytest.raises(AuthenticationError) as caught:
        await _start_and_poll(consumer)
    assert str(caught.value).endswith("does not enable SASL mechanism PLAIN; it offers: SCRAM-SHA-512")
    _no_secret_in(_error_texts(caught.value))


@pytest.mark.parametrize(("protocol", "listener"), [("SASL_PLAINTEXT", "PLAINTEXT"), ("SASL_SSL", "SSL")])
@pytest.mark.asyncio
async def test_sasl_against_a_listener_without_sasl_says_so_at_once(secure_kafka: SecureKafka,
                                                                    topic_with_records: str, protocol: str,
                                                                    listener: str) -> None:
    began = time.monotonic()
    consumer = Consumer(topic_with_records, bootstrap_servers=secure_kafka.address(listener),
                        group_id="g-no-sasl", security_protocol=protocol,
                        ssl_cafile=str(secure_kafka.ca.cert_path) if protocol == "SASL_SSL" else None,
                        sasl_plain_username=PLAIN_USER, sasl_plain_password=PLAIN_PASSWORD)
    with pytest.raises(AuthenticationError, match="takes no SASL on this listener") as caught:
        await _start_and_poll(consumer)
    assert time.monotonic() - began < 5.0
    assert "security_protocol to PLAINTEXT or SSL" in str(caught.value)
    _no_secret_in(_error_texts(caught.value))


# A security_protocol the listener does not speak: told beyond doubt by the first try (a TLS alert, a
# handshake closed by a listener that then answers Kafka without TLS, a connection closed after
# ApiVersions by a listener that then offers SASL mechanisms), so start() fails at once, not after
# default_api_timeout_ms of retries.
MISMATCHES = [
    pytest.param("PLAINTEXT", "SSL", "speaks TLS: it answered our ApiVersions request with a TLS alert; set "
                 "security_protocol to SSL (or SASL_SSL if the listener takes SASL), not PLAINTEXT",
                 id="PLAINTEXT-SSL"),
    pytest.param("SSL", "PLAINTEXT", "answers Kafka requests without TLS (a PLAINTEXT listener): set "
                 "security_protocol to PLAINTEXT, not SSL", id="SSL-PLAINTEXT"),
    pytest.param("SASL_SSL", "SASL_PLAINTEXT", "answers Kafka requests without TLS (a SASL_PLAINTEXT listener; its "
                 "SASL mechanisms: |PLAIN|SCRAM-SHA-256|SCRAM-SHA-512|): set security_protocol to "
                 "SASL_PLAINTEXT, not SASL_SSL", id="SASL_SSL-SASL_PLAINTEXT"),
    pytest.param("PLAINTEXT", "SASL_PLAINTEXT", "takes SASL authentication (a SASL_PLAINTEXT listener; its SASL "
                 "mechanisms: |PLAIN|SCRAM-SHA-256|SCRAM-SHA-512|) and closed the connection at our first "
                 "request after ApiVersions: set security_protocol to SASL_PLAINTEXT, not PLAINTEXT, and "
                 "sasl_mechanism",
                 id="PLAINTEXT-SASL_PLAINTEXT"),
    pytest.param("SSL", "SASL_SSL", "takes SASL authentication (a SASL_SSL listener; its SASL mechanisms: "
                 "SCRAM-SHA-512) and closed the connection at our first request after ApiVersions: set "
                 "security_protocol to SASL_SSL, not SSL, and sasl_mechanism", id="SSL-SASL_SSL"),
]


@pytest.mark.parametrize(("protocol", "listener", "said"), MISMATCHES)
@pytest.mark.asyncio
async def test_a_security_protocol_the_listener_does_not_speak_fails_at_once(
        secure_kafka: SecureKafka, protocol: str, listener: str, said: str) -> None:
    settings: dict[str, Any] = {"ssl_cafile": str(secure_kafka.ca.cert_path)} if "SSL" in protocol else {}
    if protocol.startswith("SASL"):
        settings.update(sasl_mechanism="PLAIN", sasl_plain_username=PLAIN_USER, sasl_plain_password=PLAIN_PASSWORD)
    consumer = Consumer(bootstrap_servers=secure_kafka.address(listener), security_protocol=protocol,
                        default_api_timeout_ms=60000, **settings)
    began = time.monotonic()
    try:
        with pytest.raises(AuthenticationError) as caught:
            await asyncio.wait_for(consumer.start(), 30.0)
    finally:
        await consumer.close()
    took = time.monotonic() - began
    assert took < 5.0, f"{took:.1f} s: retried what waiting cannot fix"
    assert str(caught.value).startswith(f"{secure_kafka.address(listener)} "), str(caught.value)
    # "|" separates parts that must all be in the message (Kafka lists SASL mechanisms in no set order).
    assert all(part in str(caught.value) for part in said.split("|")), str(caught.value)
    _no_secret_in(_error_texts(caught.value))


def test_config_repr_and_errors_mask_passwords() -> None:
    consumer = Consumer(bootstrap_servers="127.0.0.1:1", security_protocol="SASL_SSL",
                        sasl_mechanism="SCRAM-SHA-256", sasl_plain_username="u",
                        sasl_plain_password=SCRAM_PASSWORD)
    _no_secret_in(repr(consumer.config))
    _no_secret_in(str(consumer.config))
    _no_secret_in(repr(consumer))
    with pytest.raises(KafkaError) as caught:
        Consumer(bootstrap_servers="127.0.0.1:1", security_protocol="SASL_SSL", sasl_mechanism="SCRAM-SHA-1",
                 sasl_plain_username="u", sasl_plain_password=SCRAM_PASSWORD)
    _no_secret_in(_error_texts(caught.value))



# ---------------------------------------------------------------- docs/security.md, as written

def _doc_blocks(lang: str) -> list[str]:
    return [m.group(1) for m in re.finditer(rf"^```{lang}\n(.*?)^```", DOC.read_text(), re.S | re.M)]


@pytest.fixture(scope="module")
def doc_pem_files(secure_kafka: SecureKafka) -> Path:
    """The doc's shell blocks, run on the throw-away Java stores: ca.pem, client.pem, client.key;
    and the topic the doc's Python blocks subscribe to."""
    directory = secure_kafka.java_stores
    create_topic(secure_kafka.broker.bootstrap_servers, "orders", partitions=1)  # the blocks' topic
    for block in _doc_blocks("bash"):
        done = subprocess.run(["bash", "-euo", "pipefail", "-c", block], cwd=directory, capture_output=True,
                              text=True, timeout=120, check=False)
        assert done.returncode == 0, f"{block}\n{done.stdout}{done.stderr}"
    return directory


def test_the_docs_conversion_commands_turn_java_stores_into_pem_files(doc_pem_files: Path) -> None:
    import ssl

    context = ssl.create_default_context(cafile=str(doc_pem_files / "ca.pem"))
    context.load_cert_chain(str(doc_pem_files / "client.pem"), str(doc_pem_files / "client.key"))
    assert (doc_pem_files / "client.key").stat().st_mode & 0o077 == 0


def _doc_listener(block: str) -> str:
    """The listener a block of docs/security.md is written for."""
    if "ssl_certfile" in block:
        return "MTLS"
    if "ssl_check_hostname=False" in block:
        return "WRONGNAME"
    return "SASL_SSL_ALL" if "SASL_SSL" in block else "SSL"


DOC_PYTHON = _doc_blocks("python")


@pytest.mark.parametrize("block", DOC_PYTHON, ids=[_doc_listener(b) + f"-{i}" for i, b in enumerate(DOC_PYTHON)])
@pytest.mark.asyncio
async def test_the_docs_python_blocks_connect_and_join_as_written(
        secure_kafka: SecureKafka, doc_pem_files: Path, block: str, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.chdir(doc_pem_files)
    monkeypatch.setenv("KAFKA_PASSWORD", PLAIN_PASSWORD)
    assert DOC_ADDRESS in block
    namespace: dict[str, Any] = {}
    exec(block.replace(DOC_ADDRESS, secure_kafka.address(_doc_listener(block))), namespace)
    consumer: Consumer = namespace["consumer"]
    async with consumer:
        while not consumer.assignment():
            await consumer.poll(timeout=0.5)
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING], caplog.text


@pytest.mark.asyncio
async def test_the_mtls_listener_refuses_a_client_without_a_certificate(secure_kafka: SecureKafka) -> None:
    """So that the doc's mutual TLS block, connecting, proves its certificate was used."""
    consumer = Consumer(bootstrap_servers=secure_kafka.address("MTLS"), security_protocol="SSL",
                        ssl_cafile=str(secure_kafka.ca.cert_path), default_api_timeout_ms=5000)
    with pytest.raises(KafkaError):
        await _start_and_list_topics(consumer)


# ---------------------------------------------------------------- unused settings, on the CLI

@pytest.mark.asyncio
async def test_the_cli_says_an_unused_setting_once(tansu_broker: Any, unique_topic: str,
                                                   caplog: pytest.LogCaptureFixture) -> None:
    """`consume --from latest` also asks whether the broker is Tansu: from the same settings, so the
    WARNING about ssl.ca.location under PLAINTEXT comes once, not once per settings object built."""
    import io

    from aiokafka_lite.cli.consume import consume

    create_topic(tansu_broker, unique_topic, partitions=1)
    caplog.set_level(logging.WARNING)
    stop = asyncio.Event()
    asyncio.get_running_loop().call_later(3.0, stop.set)
    await consume(unique_topic, tansu_broker.bootstrap_servers, group=None, start="latest",
                  output_format="text", max_records=1, stop=stop, out=io.StringIO(),
                  properties={"ssl.ca.location": "ca.pem"})
    warned = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert warned == ["ssl.ca.location is set but unused: security.protocol='PLAINTEXT' uses neither TLS "
                      "nor SASL; security.protocol='SSL' would use it"]


# ---------------------------------------------------------------- Tansu

@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
@pytest.mark.asyncio
async def test_tansu_without_authentication_refuses_sasl_with_a_typed_error(tansu_broker: Any,
                                                                            mechanism: str) -> None:
    began = time.monotonic()
    consumer = Consumer(bootstrap_servers=tansu_broker.bootstrap_servers, security_protocol="SASL_PLAINTEXT",
                        sasl_mechanism=mechanism, sasl_plain_username=SCRAM_USER,
                        sasl_plain_password=SCRAM_PASSWORD)
    with pytest.raises(AuthenticationError) as caught:
        await _start_and_list_topics(consumer)
    assert time.monotonic() - began < 5.0
    # Tansu lists the refused mechanism as its enabled one (DEVIATIONS["sasl_handshake"]): the message
    # says that, not that the mechanism is offered.
    assert f"refused SASL mechanism {mechanism} (UNSUPPORTED_SASL_MECHANISM) though its answer lists " \
           f"{mechanism} as enabled" in str(caught.value)
    assert "it offers" not in str(caught.value)
    _no_secret_in(_error_texts(caught.value))


@pytest.mark.asyncio
async def test_scram_against_tansu_with_authentication(tmp_path: Path) -> None:
    """Tansu 0.6 requires SASL with ``--authentication``; users are created with ``tansu user
    create`` through the broker itself. Skips, saying why, when the user cannot be provisioned."""
    from aiokafka_lite.testing._process import (
        BrokerUnavailable,
        ManagedProcess,
        free_port,
        port_accepts,
        wait_until,
    )
    from aiokafka_lite.testing.tansu import tansu_binary

    try:
        binary = tansu_binary()
    except BrokerUnavailable as exc:
        pytest.skip(f"Tansu unavailable: {exc}")
    port = free_port()
    url = f"tcp://127.0.0.1:{port}"
    process = ManagedProcess([binary, "broker", "--listener-url", url, "--advertised-listener-url", url,
                              "--storage-engine", "memory://tansu/", "--authentication"],
                             tmp_path / "tansu.log", cwd=tmp_path)
    try:
        # Not kafka_ready(): its Metadata probe is refused before authentication.
        wait_until(lambda: port_accepts(port), timeout=30, what="tansu", process=process)
        argv = [binary, "user", "create", "--broker", url, "--mechanism", "scram256", SCRAM_USER, SCRAM_PASSWORD]
        created = await asyncio.to_thread(subprocess.run, argv, capture_output=True, text=True, timeout=30,
                                          check=False)
        if created.returncode != 0:
            pytest.skip("Tansu 0.6.0 cannot provision a SCRAM user: with --authentication, `tansu user "
                        "create` is itself refused (NotAuthenticated: it connects without SASL), and "
                        "without --authentication the broker answers every SaslHandshake with "
                        "UNSUPPORTED_SASL_MECHANISM; its only persistent storage engines (postgres, s3) "
                        "are not available here to create the user first and restart with "
                        f"authentication. Tool output: {created.stderr.strip()[-200:]}")
        async with Consumer(bootstrap_servers=f"127.0.0.1:{port}", security_protocol="SASL_PLAINTEXT",
                            sasl_mechanism="SCRAM-SHA-256", sasl_plain_username=SCRAM_USER,
                            sasl_plain_password=SCRAM_PASSWORD) as consumer:
            assert await consumer.list_topics(timeout=10.0) is not None
    finally:
        process.stop(grace=5.0)
