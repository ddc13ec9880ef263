"""Security settings as users bring them: what replaces Java's truststore, keystore and JAAS
properties, and which ssl_* / sasl_* settings a security_protocol leaves unused.

Java configures TLS with keystores and SASL with a JAAS line; aiokafka-lite takes PEM files and a
user name and password. A refused Java name says what to set instead and how to convert, in one
line, and nothing is read from it silently. Settings given for a protocol that does not use them
are said once (as Java logs "supplied but not used" settings), not ignored in silence.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

__all__ = ["SASL_SETTINGS", "TLS_SETTINGS", "java_only_hint", "unused_security_settings"]

TLS_SETTINGS = ("ssl_context", "ssl_cafile", "ssl_certfile", "ssl_keyfile", "ssl_password",
                "ssl_check_hostname")
SASL_SETTINGS = ("sasl_mechanism", "sasl_plain_username", "sasl_plain_password", "sasl_oauth_token_provider",
                 "sasl_oauthbearer_token_endpoint_url", "sasl_oauthbearer_client_credentials_client_id",
                 "sasl_oauthbearer_client_credentials_client_secret", "sasl_oauthbearer_scope",
                 "sasl_oauthbearer_extensions", "sasl_oauthbearer_grant_type", "sasl_oauthbearer_assertion_file",
                 "sasl_oauthbearer_assertion_private_key_file", "sasl_oauthbearer_assertion_private_key_passphrase",
                 "sasl_oauthbearer_assertion_algorithm", "sasl_oauthbearer_assertion_claim_iss",
                 "sasl_oauthbearer_assertion_claim_sub", "sasl_oauthbearer_assertion_claim_aud",
                 "sasl_oauthbearer_assertion_claim_exp_seconds", "sasl_oauthbearer_assertion_claim_nbf_seconds",
                 "sasl_oauthbearer_assertion_claim_jti_include")

# The protocol that uses every setting given, by (uses TLS, uses SASL).
_PROTOCOL_FOR = {(True, True): "SASL_SSL", (True, False): "SSL", (False, True): "SASL_PLAINTEXT",
                 (False, False): "PLAINTEXT"}

Spell = Callable[[str], str]  # a setting's name as the caller writes it


def java_only_hint(key: str, spell: Spell, dotted: bool) -> str | None:
    """What to set instead of Java's truststore, keystore or JAAS property ``key`` (dotted), or None.

    ``dotted``: the caller writes property names (from_properties, the CLI's -X), so the names Java
    and librdkafka users know (``ssl.key.password``, ``sasl.username``, ``sasl.password``) are shown.
    """
    if key.startswith("ssl.truststore."):
        return (f"aiokafka-lite trusts CA certificates from a PEM file, not a Java truststore: set "
                f"{spell('ssl_cafile')} to one (a truststore of type PEM as it is; from JKS or PKCS12: "
                "keytool -exportcert -rfc -keystore truststore.jks -alias <alias> -file ca.pem)")
    if key.startswith("ssl.keystore."):
        key_password = "ssl.key.password" if dotted else spell("ssl_password")
        return (f"aiokafka-lite reads the client certificate and its key from PEM files, not a Java "
                f"keystore: set {spell('ssl_certfile')} and {spell('ssl_keyfile')} (and {key_password} "
                "for an encrypted key; a keystore of type PEM, key and chain in one file, is "
                f"{spell('ssl_certfile')} alone); from PKCS12: openssl pkcs12 -in keystore.p12 "
                "-clcerts -nokeys -out client.pem, and -nocerts -nodes -out client.key (JKS first: keytool "
                "-importkeystore -srckeystore keystore.jks -destkeystore keystore.p12 -deststoretype PKCS12)")
    if key == "sasl.jaas.config":
        user, password = (("sasl.username", "sasl.password") if dotted
                          else (spell("sasl_plain_username"), spell("sasl_plain_password")))
        return (f"aiokafka-lite reads nothing from a JAAS line: set {user} and {password} to its username "
                f"and password, and {spell('sasl_mechanism')} to PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 "
                "(PlainLoginModule is PLAIN, ScramLoginModule is SCRAM-SHA-*); OAuthBearerLoginModule's "
                "clientId, clientSecret, scope and extension_<name> options are "
                f"{spell('sasl_oauthbearer_client_credentials_client_id')}, "
                f"{spell('sasl_oauthbearer_client_credentials_client_secret')}, "
                f"{spell('sasl_oauthbearer_scope')} and {spell('sasl_oauthbearer_extensions')}")
    return None


def unused_security_settings(protocol: str, given: Iterable[str], spell: Spell) -> str | None:
    """A one-line warning naming the settings in ``given`` that ``protocol`` does not use, or None."""
    uses_tls, uses_sasl = protocol in ("SSL", "SASL_SSL"), protocol.startswith("SASL_")
    unused = [name for name in given
              if (name in TLS_SETTINGS and not uses_tls) or (name in SASL_SETTINGS and not uses_sasl)]
    if not unused:
        return None
    wants_tls = uses_tls or any(name in TLS_SETTINGS for name in unused)
    wants_sasl = uses_sasl or any(name in SASL_SETTINGS for name in unused)
    lacks = " nor ".join(what for what, used in (("TLS", uses_tls), ("SASL", uses_sasl)) if not used)
    lacks = ("neither " if " nor " in lacks else "no ") + lacks
    names, setting = ", ".join(map(spell, unused)), spell("security_protocol")
    verb, them = ("is", "it") if len(unused) == 1 else ("are", "them")
    return (f"{names} {verb} set but unused: {setting}={protocol!r} uses {lacks}; "
            f"{setting}={_PROTOCOL_FOR[wants_tls, wants_sasl]!r} would use {them}")
