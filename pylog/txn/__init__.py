"""Sans-IO transaction coordinator (InitProducerId with transactional ids, AddPartitionsToTxn,
AddOffsetsToTxn, EndTxn, timeouts, `__transaction_state` records). See `coordinator` for the
theory of operation."""

from pylog.txn.coordinator import TransactionCoordinator
from pylog.txn.records import partition_for
from pylog.txn.state import TransactionMetadata, TxnState
from pylog.txn.types import (
    OFFSETS_TOPIC,
    TRANSACTION_STATE_TOPIC,
    DescribedTransaction,
    InitProducerIdResult,
    ListedTransaction,
    Output,
    TxnConfig,
    TxnMarkers,
)

__all__ = [
    "OFFSETS_TOPIC",
    "TRANSACTION_STATE_TOPIC",
    "DescribedTransaction",
    "InitProducerIdResult",
    "ListedTransaction",
    "Output",
    "TransactionCoordinator",
    "TransactionMetadata",
    "TxnConfig",
    "TxnMarkers",
    "TxnState",
    "partition_for",
]
