"""The node's control plane on the broker side: registration, heartbeats, the controller channel, metadata."""
