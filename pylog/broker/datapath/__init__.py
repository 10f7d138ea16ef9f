"""The data path: partitions and their logs, appends, fetches, delayed operations, followers fetching."""
