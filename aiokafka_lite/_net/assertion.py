"""JWT assertions (RFC 7523) for the token endpoint: signed here, or read from a file.

Two uses, as Java 4.1+ has them: the jwt-bearer grant (KIP-1139, ``grant_type=urn:ietf:params:
oauth:grant-type:jwt-bearer`` with ``assertion=<jwt>``) and client authentication by assertion in the
client-credentials grant (KIP-1258, ``client_assertion=<jwt>`` instead of a secret). An
``AssertionSource`` gives a fresh assertion per token request: the file's content, read each time
(a sidecar may rotate it), or a JWT signed with the private key (RS256 or ES256) carrying the
configured ``iss``, ``sub`` and ``aud``, ``iat``, ``nbf`` and ``exp``, and a ``jti`` when asked.

Signing needs the ``cryptography`` package (extra ``oauth-assertion``); it is imported here only, and
only when a private key is configured, so the core installs and imports without it.
"""

from __future__ import annotations

import base64
import json
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import AuthenticationError, ConfigError

ALGORITHMS = ("RS256", "ES256")
_ES256_HALF = 32  # bytes of r and of s in a JWS ES256 signature (RFC 7518 3.4)


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _segment(value: dict[str, Any]) -> str:
    return _b64url(json.dumps(value, separators=(",", ":")).encode())


@dataclass(frozen=True)
class AssertionClaims:
    """The claims of an assertion signed here (Java's sasl.oauthbearer.assertion.claim.*)."""

    iss: str | None = None
    sub: str | None = None
    aud: str | None = None
    exp_seconds: int = 300
    nbf_seconds: int = 60
    jti_include: bool = False

    def payload(self, now: float) -> dict[str, Any]:
        issued = int(now)
        claims: dict[str, Any] = {name: value for name, value in
                                  (("iss", self.iss), ("sub", self.sub), ("aud", self.aud)) if value}
        claims |= {"iat": issued, "nbf": issued - self.nbf_seconds, "exp": issued + self.exp_seconds}
        if self.jti_include:
            claims["jti"] = str(uuid.uuid4())
        return claims


class AssertionSource:
    """One assertion per call: the file's content, else a JWT signed with the private key."""

    def __init__(self, *, assertion_file: str | None = None, private_key_file: str | None = None,
                 passphrase: str | None = None, algorithm: str = "RS256",
                 claims: AssertionClaims | None = None) -> None:
        if assertion_file is None and private_key_file is None:
            raise ConfigError("an assertion needs sasl_oauthbearer_assertion_file or "
                              "sasl_oauthbearer_assertion_private_key_file")
        if algorithm not in ALGORITHMS:
            raise ConfigError(f"sasl_oauthbearer_assertion_algorithm={algorithm!r}: expected RS256 or ES256")
        self._file = Path(assertion_file) if assertion_file is not None else None
        self.algorithm = algorithm
        self.claims = claims or AssertionClaims()
        self._key = None if self._file is not None or private_key_file is None else (
            _load_key(private_key_file, passphrase, algorithm))

    def __repr__(self) -> str:
        what = f"file={str(self._file)!r}" if self._file is not None else f"signed {self.algorithm}"
        return f"AssertionSource({what})"

    def __call__(self) -> str:
        if self._file is not None:
            try:
                text = self._file.read_text().strip()
            except OSError as exc:
                raise AuthenticationError(f"cannot read the assertion file {str(self._file)!r}: "
                                          f"{exc.strerror or exc}") from None
            if text.count(".") != 2:
                raise AuthenticationError(f"the assertion file {str(self._file)!r} does not hold a JWT "
                                          "(three dot-separated parts)")
            return text
        return self.sign(self.claims.payload(time.time()))

    def sign(self, payload: dict[str, Any]) -> str:
        signed = f"{_segment({'alg': self.algorithm, 'typ': 'JWT'})}.{_segment(payload)}"
        return f"{signed}.{_b64url(_signature(self._key, self.algorithm, signed.encode()))}"


def _load_key(path: str, passphrase: str | None, algorithm: str) -> Any:
    try:
        from cryptography.hazmat.primitives.asymmetric import ec, rsa
        from cryptography.hazmat.primitives.serialization import load_pem_private_key
    except ImportError:
        raise ConfigError("signing an OAuth assertion needs the 'cryptography' package: "
                          "pip install '.[oauth-assertion]' in the aiokafka-lite clone") from None
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise ConfigError(f"sasl_oauthbearer_assertion_private_key_file={path!r}: "
                          f"{exc.strerror or exc}") from None
    try:
        key = load_pem_private_key(data, passphrase.encode() if passphrase is not None else None)
    except (ValueError, TypeError) as exc:
        raise ConfigError(f"sasl_oauthbearer_assertion_private_key_file={path!r} is not a PEM private key "
                          f"this passphrase opens: {exc}") from None
    if algorithm == "RS256":
        fits = isinstance(key, rsa.RSAPrivateKey)
    else:
        fits = isinstance(key, ec.EllipticCurvePrivateKey) and key.curve.name == "secp256r1"
    if not fits:
        raise ConfigError(f"sasl_oauthbearer_assertion_private_key_file={path!r}: {algorithm} needs "
                          + ("an RSA key" if algorithm == "RS256" else "an EC key on P-256"))
    return key


def _signature(key: Any, algorithm: str, data: bytes) -> bytes:
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec, padding
    from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature

    if algorithm == "RS256":
        return bytes(key.sign(data, padding.PKCS1v15(), hashes.SHA256()))
    r, s = decode_dss_signature(key.sign(data, ec.ECDSA(hashes.SHA256())))  # DER -> JWS's r || s
    return r.to_bytes(_ES256_HALF, "big") + s.to_bytes(_ES256_HALF, "big")
