"""Test certificates: a throw-away CA and server certificates it signs, as PEM files.

Needs the ``cryptography`` package (in the ``testing`` extra)::

    ca = TestCA.create(directory)
    broker = ca.issue("broker", names=["localhost", "127.0.0.1"])
    broker.keystore_pem   # key + chain in one PEM file: Kafka's ``ssl.keystore.type=PEM``
    ca.cert_path          # what a client passes as ``ssl_cafile``

Keys are EC P-256 (fast to generate); certificates are valid from an hour ago for a day.
Nothing here is fit for anything but tests.
"""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aiokafka_lite.testing._process import BrokerUnavailable


def _crypto() -> Any:
    try:
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise BrokerUnavailable("generating test certificates needs the 'cryptography' package "
                                "(pip install '.[testing]' in the aiokafka-lite clone)") from exc
    return x509, hashes, serialization, ec, ExtendedKeyUsageOID, NameOID


@dataclass(frozen=True)
class IssuedCertificate:
    """A server certificate: ``cert_path`` (the leaf then the CA), ``key_path`` (PKCS#8, no
    password) and ``keystore_pem`` (key then chain, for Kafka's PEM keystore)."""

    cert_path: Path
    key_path: Path
    keystore_pem: Path


@dataclass(frozen=True)
class TestCA:
    """A self-signed certificate authority living in ``directory``."""

    __test__ = False  # not a pytest test class, despite the name

    directory: Path
    cert_path: Path
    _key: Any
    _cert: Any

    @classmethod
    def create(cls, directory: Path, name: str = "aiokafka-lite test CA") -> TestCA:
        x509, hashes, serialization, ec, _, name_oid = _crypto()
        directory.mkdir(parents=True, exist_ok=True)
        key = ec.generate_private_key(ec.SECP256R1())
        subject = x509.Name([x509.NameAttribute(name_oid.COMMON_NAME, name)])
        now = datetime.datetime.now(datetime.UTC)
        cert = (x509.CertificateBuilder()
                .subject_name(subject).issuer_name(subject)
                .public_key(key.public_key()).serial_number(x509.random_serial_number())
                .not_valid_before(now - datetime.timedelta(hours=1))
                .not_valid_after(now + datetime.timedelta(days=1))
                .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
                .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                             content_commitment=False, key_encipherment=False,
                                             data_encipherment=False, key_agreement=False,
                                             encipher_only=False, decipher_only=False), critical=True)
                .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
                .sign(key, hashes.SHA256()))
        cert_path = directory / "ca.pem"
        cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        return cls(directory, cert_path, key, cert)

    def issue(self, stem: str, names: list[str]) -> IssuedCertificate:
        """A server certificate for DNS names and IP addresses in ``names`` (its SAN)."""
        x509, hashes, serialization, ec, eku, name_oid = _crypto()
        key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.UTC)
        cert = (x509.CertificateBuilder()
                .subject_name(x509.Name([x509.NameAttribute(name_oid.COMMON_NAME, names[0])]))
                .issuer_name(self._cert.subject)
                .public_key(key.public_key()).serial_number(x509.random_serial_number())
                .not_valid_before(now - datetime.timedelta(hours=1))
                .not_valid_after(now + datetime.timedelta(days=1))
                .add_extension(x509.SubjectAlternativeName([_general_name(x509, n) for n in names]),
                               critical=False)
                .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
                .add_extension(x509.ExtendedKeyUsage([eku.SERVER_AUTH]), critical=False)
                .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(self._key.public_key()),
                               critical=False)
                .sign(self._key, hashes.SHA256()))
        chain = cert.public_bytes(serialization.Encoding.PEM) + self.cert_path.read_bytes()
        key_pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                    serialization.NoEncryption())
        cert_path, key_path = self.directory / f"{stem}.pem", self.directory / f"{stem}.key"
        keystore = self.directory / f"{stem}-keystore.pem"
        cert_path.write_bytes(chain)
        key_path.write_bytes(key_pem)
        keystore.write_bytes(key_pem + chain)
        return IssuedCertificate(cert_path, key_path, keystore)


def _general_name(x509: Any, name: str) -> Any:
    try:
        return x509.IPAddress(ipaddress.ip_address(name))
    except ValueError:
        return x509.DNSName(name)


def kafka_ssl_listener_properties(listener: str, cert: IssuedCertificate) -> dict[str, str]:
    """Broker settings giving ``listener`` the certificate ``cert`` (PEM keystore, no client auth)."""
    prefix = f"listener.name.{listener.lower()}."
    return {
        prefix + "ssl.keystore.type": "PEM",
        prefix + "ssl.keystore.location": str(cert.keystore_pem),
        prefix + "ssl.client.auth": "none",
    }
