"""The remote tier (Kafka's tiered storage, KIP-405): sans-IO rules of which segments are copied,
which leave local disk and which expire, plus the broker settings that turn it on."""
