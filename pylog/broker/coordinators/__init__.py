"""The coordinators' asyncio shells: groups, share groups, transactions and client telemetry."""
