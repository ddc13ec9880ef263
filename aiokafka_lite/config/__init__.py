"""Consumer settings: one validated, frozen :class:`ConsumerConfig`, its Kafka names and defaults.

This package re-exports the names other code imports from ``aiokafka_lite.config``. Its modules:
settings.py (the settings table: names, types, defaults, descriptions), checks.py (one value's check),
validation.py (rules across settings, unknown names), properties.py (Java/librdkafka names),
security.py (Java-only TLS/SASL names, unused security settings), spelling.py (how errors name a
setting) and consumer_config.py (the frozen ConsumerConfig and its constructors).
"""

from aiokafka_lite.config.checks import INT32_MAX, INT64_MAX, KNOWN_ASSIGNORS
from aiokafka_lite.config.consumer_config import ConsumerConfig
from aiokafka_lite.config.settings import SETTINGS_TABLE, Deserializer, SettingRow, settings_table

__all__ = ["INT32_MAX", "INT64_MAX", "KNOWN_ASSIGNORS", "SETTINGS_TABLE", "ConsumerConfig", "Deserializer",
           "SettingRow", "settings_table"]
