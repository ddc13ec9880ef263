"""The test identity provider's check of a JWT assertion (RFC 7523 3): signature, iss, sub, aud, exp, jti.

``check_assertion`` returns the claims, or raises ``AssertionRefused`` whose text is the
``error_description`` the endpoint answers with (naming which check failed).
"""

from __future__ import annotations

import base64
import json
import time
from typing import Any

from aiokafka_lite.testing._process import BrokerUnavailable

JWT_BEARER_GRANT = "urn:ietf:params:oauth:grant-type:jwt-bearer"
JWT_BEARER_CLIENT_ASSERTION = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"


class AssertionRefused(Exception):
    """The assertion failed a check; the message says which."""


def _unb64(part: str) -> bytes:
    return base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))


def _verify(public_key: Any, alg: str, signed: bytes, signature: bytes) -> bool:
    try:
        from cryptography.exceptions import InvalidSignature
        from cryptography.hazmat.primitives import hashes
        from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
        from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise BrokerUnavailable("checking assertions needs the 'cryptography' package") from exc
    try:
        if alg == "RS256" and isinstance(public_key, rsa.RSAPublicKey):
            public_key.verify(signature, signed, padding.PKCS1v15(), hashes.SHA256())
            return True
        if alg == "ES256" and isinstance(public_key, ec.EllipticCurvePublicKey) and len(signature) == 64:
            der = encode_dss_signature(int.from_bytes(signature[:32], "big"), int.from_bytes(signature[32:], "big"))
            public_key.verify(der, signed, ec.ECDSA(hashes.SHA256()))
            return True
    except InvalidSignature:
        return False
    return False


def check_assertion(assertion: str, keys: dict[str, Any], audience: str, seen_jti: set[str]) -> dict[str, Any]:
    """The assertion's claims once it verifies against ``keys[iss]`` and names ``audience``."""
    parts = assertion.split(".")
    if len(parts) != 3:
        raise AssertionRefused("assertion is not a JWS (three dot-separated parts)")
    try:
        header, claims = json.loads(_unb64(parts[0])), json.loads(_unb64(parts[1]))
        signature = _unb64(parts[2])
    except ValueError:
        raise AssertionRefused("assertion is not base64url JSON") from None
    if not isinstance(header, dict) or not isinstance(claims, dict):
        raise AssertionRefused("assertion header or claims are not JSON objects")
    issuer = claims.get("iss")
    if not isinstance(issuer, str) or issuer not in keys:
        raise AssertionRefused(f"assertion issuer (iss) {issuer!r} is not trusted")
    if not _verify(keys[issuer], str(header.get("alg")), f"{parts[0]}.{parts[1]}".encode(), signature):
        raise AssertionRefused(f"assertion signature ({header.get('alg')}) does not verify with {issuer!r}'s key")
    if not isinstance(claims.get("sub"), str) or not claims["sub"]:
        raise AssertionRefused("assertion has no subject (sub)")
    aud = claims.get("aud")
    if audience not in (aud if isinstance(aud, list) else [aud]):
        raise AssertionRefused(f"assertion audience (aud) {aud!r} is not {audience!r}")
    now = time.time()
    exp, nbf = claims.get("exp"), claims.get("nbf", 0)
    if not isinstance(exp, int | float) or exp <= now:
        raise AssertionRefused(f"assertion expired (exp {exp!r}, now {int(now)})")
    if isinstance(nbf, int | float) and nbf > now + 5:
        raise AssertionRefused(f"assertion not yet valid (nbf {nbf!r})")
    jti = claims.get("jti")
    if jti is not None:
        if jti in seen_jti:
            raise AssertionRefused(f"assertion replayed (jti {jti!r} already used)")
        seen_jti.add(str(jti))
    return claims
