"""Consumer settings: one validated, frozen :class:`ConsumerConfig`, its Kafka names and defaults.

The names other code imports from ``aiokafka_lite.config``; the modules beside this one own the parts.
"""

from aiokafka_lite.config.consumer_config import (
    INT32_MAX,
    INT64_MAX,
    KNOWN_ASSIGNORS,
    SETTINGS_TABLE,
    ConsumerConfig,
    Deserializer,
    SettingRow,
    settings_table,
)

__all__ = ["INT32_MAX", "INT64_MAX", "KNOWN_ASSIGNORS", "SETTINGS_TABLE", "ConsumerConfig", "Deserializer",
           "SettingRow", "settings_table"]
