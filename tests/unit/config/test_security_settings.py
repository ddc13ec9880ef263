"""Security settings as users bring them from Java: a refused truststore, keystore or JAAS property
says in one line what to set instead (and reads nothing from it), and ssl_* / sasl_* settings that
the security_protocol does not use are said once, not ignored in silence."""

from __future__ import annotations

import logging
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from aiokafka_lite import Consumer
from aiokafka_lite.config import ConsumerConfig
from aiokafka_lite.errors import ConfigError

NOWHERE = "127.0.0.1:1"
ROOT = Path(__file__).resolve().parents[3]
JAAS = ('org.apache.kafka.common.security.scram.ScramLoginModule required username="alice" '
        'password="jaas-pw-Qr7!unique";')

# (Java property, what the error must name instead, the conversion it must show)
JAVA_ONLY = [
    ("ssl.truststore.location", ("ssl.cafile",), "keytool -exportcert -rfc"),
    ("ssl.truststore.password", ("ssl.cafile",), "keytool -exportcert -rfc"),
    ("ssl.truststore.type", ("ssl.cafile",), "keytool -exportcert -rfc"),
    ("ssl.truststore.certificates", ("ssl.cafile",), "keytool -exportcert -rfc"),
    ("ssl.keystore.location", ("ssl.certfile", "ssl.keyfile", "ssl.key.password"), "openssl pkcs12"),
    ("ssl.keystore.password", ("ssl.certfile", "ssl.keyfile"), "openssl pkcs12"),
    ("ssl.keystore.type", ("ssl.certfile", "ssl.keyfile"), "openssl pkcs12"),
    ("sasl.jaas.config", ("sasl.username", "sasl.password", "sasl.mechanism"), "reads nothing"),
]


@pytest.mark.parametrize(("key", "instead", "how"), JAVA_ONLY)
def test_a_java_only_property_names_what_to_set_instead(key: str, instead: tuple[str, ...], how: str) -> None:
    with pytest.raises(ConfigError) as info:
        Consumer.from_properties({"bootstrap.servers": NOWHERE, key: JAAS})
    message = str(info.value)
    assert message.startswith(f"unsupported setting {key!r}: "), message
    assert "\n" not in message
    for name in instead:
        assert name in message, (name, message)
    assert how in message, message
    # Nothing is read from the value, nor echoed: a JAAS line holds a password.
    assert "jaas-pw" not in message
    assert "alice" not in message


@pytest.mark.parametrize(("name", "instead"), [
    ("ssl_truststore_location", "ssl_cafile"), ("ssl_keystore_location", "ssl_certfile"),
    ("sasl_jaas_config", "sasl_plain_username"),
])
def test_the_same_names_in_snake_case_get_the_hint_in_snake_case(name: str, instead: str) -> None:
    with pytest.raises(ConfigError, match=f"unsupported setting {name!r}: .*{instead}"):
        Consumer(bootstrap_servers=NOWHERE, **{name: "x"})


def test_the_cli_says_the_hint_in_one_line_without_a_traceback() -> None:
    done = subprocess.run([sys.executable, "-m", "aiokafka_lite", "consume", "t", "-b", NOWHERE,
                           "-X", f"sasl.jaas.config={JAAS}"], capture_output=True, text=True, timeout=60,
                          cwd=ROOT, check=False)
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    assert "sasl.username and sasl.password" in lines[0]
    assert "jaas-pw" not in done.stderr + done.stdout
    assert done.returncode != 0


# ------------------------------------------------------------------ unused settings

def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]


@pytest.mark.parametrize(("settings", "names", "protocol", "would_use"), [
    ({"ssl_cafile": "/ca.pem"}, "ssl_cafile is", "PLAINTEXT", "SSL"),
    ({"ssl_cafile": "/ca.pem", "ssl_check_hostname": False}, "ssl_cafile, ssl_check_hostname are",
     "PLAINTEXT", "SSL"),
    ({"sasl_mechanism": "SCRAM-SHA-512", "sasl_plain_username": "u", "sasl_plain_password": "pw-Zk2"},
     "sasl_mechanism, sasl_plain_username, sasl_plain_password are", "PLAINTEXT", "SASL_PLAINTEXT"),
    ({"ssl_cafile": "/ca.pem", "sasl_plain_username": "u"}, "ssl_cafile, sasl_plain_username are",
     "PLAINTEXT", "SASL_SSL"),
    ({"security_protocol": "SSL", "ssl_cafile": "/ca.pem", "sasl_plain_username": "u"},
     "sasl_plain_username is", "SSL", "SASL_SSL"),
    ({"security_protocol": "SASL_PLAINTEXT", "sasl_plain_username": "u", "sasl_plain_password": "pw-Zk2",
      "ssl_cafile": "/ca.pem"}, "ssl_cafile is", "SASL_PLAINTEXT", "SASL_SSL"),
])
def test_unused_security_settings_are_said_once(caplog: pytest.LogCaptureFixture, settings: dict[str, Any],
                                                names: str, protocol: str, would_use: str) -> None:
    caplog.set_level(logging.DEBUG)
    Consumer(bootstrap_servers=NOWHERE, group_id="g", **settings)
    warned = _warnings(caplog)
    assert len(warned) == 1, warned
    assert warned[0].startswith(f"{names} set but unused: security_protocol={protocol!r} uses "), warned[0]
    assert warned[0].endswith(f"security_protocol={would_use!r} would use " + ("it" if " is" in names else "them"))
    assert "pw-Zk2" not in caplog.text


def test_unused_settings_are_named_as_the_caller_wrote_them(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    Consumer.from_properties({"bootstrap.servers": NOWHERE, "ssl.ca.location": "/ca.pem",
                              "ssl.endpoint.identification.algorithm": ""})
    assert _warnings(caplog) == [
        "ssl.ca.location, ssl.endpoint.identification.algorithm are set but unused: "
        "security.protocol='PLAINTEXT' uses neither TLS nor SASL; security.protocol='SSL' would use them"]


@pytest.mark.parametrize("settings", [
    {},
    {"group_id": "g", "session_timeout_ms": 10000, "heartbeat_interval_ms": 1000},
    {"security_protocol": "SSL", "ssl_cafile": "/ca.pem", "ssl_check_hostname": False},
    {"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "SCRAM-SHA-256", "sasl_plain_username": "u",
     "sasl_plain_password": "p"},
    {"security_protocol": "SASL_SSL", "ssl_cafile": "/ca.pem", "sasl_plain_username": "u",
     "sasl_plain_password": "p"},
    {"ssl_cafile": None, "sasl_plain_username": None},   # None is the default: nothing was supplied
], ids=repr)
def test_a_config_that_uses_what_it_sets_logs_nothing(caplog: pytest.LogCaptureFixture,
                                                      settings: dict[str, Any]) -> None:
    caplog.set_level(logging.DEBUG)
    Consumer(bootstrap_servers=NOWHERE, **settings)
    ConsumerConfig.from_properties({"bootstrap.servers": NOWHERE})
    assert _warnings(caplog) == []
