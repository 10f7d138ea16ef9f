"""The network side of a broker: listening sockets, connections, request routing to handler tables, quotas."""
