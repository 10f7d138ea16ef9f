"""pylog."""
