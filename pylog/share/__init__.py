"""Share groups (KIP-932): the share-partition state machine, share sessions and durable state."""
