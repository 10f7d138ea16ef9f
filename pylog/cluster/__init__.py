"""Cluster metadata: a Raft-replicated ``__cluster_metadata`` log (KRaft style).

``raft`` is the sans-IO consensus core, ``metadata`` the record types and the
in-memory ``MetadataImage``, ``controller`` turns admin commands into records and
``quorum`` is the asyncio shell that persists and drives it all.
"""
