"""The fetch path: what to fetch from which broker, fetch sessions, the bounded buffer of
fetched records, positions and offset look-ups, truncation checks (KIP-320)."""
