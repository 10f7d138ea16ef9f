"""AlterReplicaLogDirs' mover on a real partition: appends interleaved with the copy passes are all
in the moved log, a newer request replaces a move, a deleted partition calls it off, and a
restarted replica manager finds the partition in its new directory."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

from records_util import make_batch

from pylog.broker.datapath.partition import Partition
from pylog.broker.datapath.replica_manager import ReplicaManager
from pylog.config import BrokerConfig

NOW = 1_700_000_000_000


def _manager(tmp_path: Path) -> ReplicaManager:
    dirs = [tmp_path / "a", tmp_path / "b", tmp_path / "c"]
    m = ReplicaManager(BrokerConfig({}), dirs[0], lambda: NOW, log_dirs=dirs)
    m.open_log_dirs()
    return m


def _lead(m: ReplicaManager, topic: str, topic_id: uuid.UUID) -> Partition:
    part = m.ensure_partition(topic, 0, topic_id, {"segment.bytes": "65536"})
    part.become_leader(1, 0, 0, (1,), (1,), now_ms=0)
    return part


def _append(part: Partition, n: int) -> None:
    result = part.append_as_leader(make_batch([b"v%06d" % n + b"x" * 500]), NOW)
    assert result.error == 0, result


def _values(part: Partition) -> list[bytes]:
    return [bytes(v)[:7] for v in part.log.read_table().column("value").to_pylist()]


async def _until_moved(m: ReplicaManager, part: Partition, appending: int, start: int) -> int:
    """Append one batch per loop turn until the move is done; the next record number."""
    n = start
    while m.mover.moves:
        if appending:
            _append(part, n)
            n += 1
        await asyncio.sleep(0)
    return n


def test_a_move_keeps_every_append_made_while_it_copies(tmp_path: Path) -> None:
    m = _manager(tmp_path)
    topic_id = uuid.uuid4()
    part = _lead(m, "t", topic_id)
    assert part.path.parent == tmp_path / "a"
    for n in range(2000):  # about 1 MB, some 16 segments
        _append(part, n)

    async def run() -> int:
        assert m.mover.start(part, tmp_path / "b") == 0
        return await _until_moved(m, part, 1, 2000)

    end = asyncio.run(run())
    assert end > 2000  # appends happened while the copy ran
    assert part.path == tmp_path / "b" / "t-0" and not (tmp_path / "a" / "t-0").exists()
    assert _values(part) == [b"v%06d" % n for n in range(end)]
    _append(part, end)  # the moved log takes appends
    m.close()
    again = _manager(tmp_path)  # a restart finds it there, whole
    reopened = _lead(again, "t", topic_id)
    assert reopened.path == tmp_path / "b" / "t-0" and reopened.log_end_offset == end + 1
    again.close()


def test_a_newer_request_replaces_a_move_and_the_current_dir_cancels_it(tmp_path: Path) -> None:
    m = _manager(tmp_path)
    part = _lead(m, "t", uuid.uuid4())
    for n in range(500):
        _append(part, n)

    async def run() -> None:
        m.mover.start(part, tmp_path / "b")
        assert m.mover.start(part, tmp_path / "c") == 0  # replaces the move to b
        await _until_moved(m, part, 0, 0)
        m.mover.start(part, tmp_path / "a")
        m.mover.start(part, tmp_path / "c")  # back to where it is: the move to a is called off
        await _until_moved(m, part, 0, 0)

    asyncio.run(run())
    assert part.path == tmp_path / "c" / "t-0"
    assert _values(part) == [b"v%06d" % n for n in range(500)]
    for d in ("a", "b", "c"):
        assert not [p.name for p in (tmp_path / d).iterdir() if p.name.endswith(("-future", "-delete"))]
    m.close()


def test_a_deleted_partition_calls_its_move_off(tmp_path: Path) -> None:
    m = _manager(tmp_path)
    part = _lead(m, "t", uuid.uuid4())
    for n in range(200):
        _append(part, n)

    async def run() -> None:
        m.mover.start(part, tmp_path / "b")
        m.remove_partition("t", 0)
        await _until_moved(m, part, 0, 0)

    asyncio.run(run())
    assert not list((tmp_path / "b").glob("t-0*"))  # the unfinished copy is gone
    assert not (tmp_path / "a" / "t-0").exists()
    m.close()


def test_new_partitions_go_to_the_least_loaded_dir_and_a_preferred_one_wins(tmp_path: Path) -> None:
    m = _manager(tmp_path)
    parents = [m.ensure_partition("p", i, uuid.uuid4(), {}).path.parent.name for i in range(5)]
    assert parents == ["a", "b", "c", "a", "b"]
    m.log_dirs.preferred[("q", 0)] = tmp_path / "a"
    assert m.ensure_partition("q", 0, uuid.uuid4(), {}).path.parent.name == "a"
    m.close()


class _Allow:
    def cluster(self, ctx: object, op: int) -> bool:
        return True


def _listed(m: ReplicaManager) -> dict[tuple[str, bool], int]:
    """{(log dir name, is future): partition_size} of t-0, as DescribeLogDirs v4 answers."""
    from types import SimpleNamespace

    from pylog.broker.handlers.describe_log_dirs import describe_log_dirs

    req = SimpleNamespace(topics=[SimpleNamespace(topic="t", partitions=[0])])
    body = describe_log_dirs(None, req, replicas=m, authz=_Allow())  # type: ignore[arg-type]
    assert body.error_code == 0
    assert all(r.error_code == 0 and r.total_bytes > 0 for r in body.results)
    return {
        (Path(r.log_dir).name, p.is_future_key): p.partition_size
        for r in body.results for t in r.topics for p in t.partitions
    }


def test_describe_log_dirs_shows_the_future_replica_until_the_swap(tmp_path: Path) -> None:
    m = _manager(tmp_path)
    part = _lead(m, "t", uuid.uuid4())
    for n in range(300):
        _append(part, n)
    size = part.log.size_bytes

    async def run() -> dict[tuple[str, bool], int]:
        m.mover.start(part, tmp_path / "c")
        during = _listed(m)
        await _until_moved(m, part, 0, 0)
        return during

    during = asyncio.run(run())
    assert during == {("a", False): size, ("c", True): 0}  # nothing copied yet
    assert _listed(m) == {("c", False): part.log.size_bytes}  # sealed on the way: smaller
    m.close()


class _Deny:
    def cluster(self, ctx: object, op: int) -> bool:
        return False


def _alter(m: ReplicaManager, path: Path | str, topic: str, authz: object = None) -> int:
    from types import SimpleNamespace

    from pylog.broker.handlers.alter_replica_log_dirs import alter_replica_log_dirs

    topics = [SimpleNamespace(name=topic, partitions=[0])]
    req = SimpleNamespace(dirs=[SimpleNamespace(path=str(path), topics=topics)])
    body = alter_replica_log_dirs(None, req, replicas=m, authz=authz or _Allow())  # type: ignore[arg-type]
    [[result]] = [t.partitions for t in body.results]
    return int(result.error_code)


def test_alter_replica_log_dirs_answers_kafkas_errors(tmp_path: Path) -> None:
    from pylog.protocol.errors import ErrorCode

    m = _manager(tmp_path)
    part = _lead(m, "t", uuid.uuid4())
    assert _alter(m, tmp_path / "elsewhere", "t") == ErrorCode.LOG_DIR_NOT_FOUND
    assert _alter(m, tmp_path / "b", "t", _Deny()) == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    assert _alter(m, tmp_path / "a", "t") == ErrorCode.NONE  # already there: nothing to do
    assert not m.mover.moves
    # a partition not hosted here: unknown, or hosted elsewhere; either way its dir is remembered
    assert _alter(m, tmp_path / "c", "u") == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    m.partition_exists = lambda topic, index: True
    assert _alter(m, tmp_path / "b", "v") == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert m.log_dirs.preferred == {("u", 0): tmp_path / "c", ("v", 0): tmp_path / "b"}
    assert m.ensure_partition("u", 0, uuid.uuid4(), {}).path.parent == tmp_path / "c"
    # a log dir gone from under the broker
    (tmp_path / "c" / "u-0").rename(tmp_path / "u-0-elsewhere")
    (tmp_path / "c").rmdir()
    assert _alter(m, tmp_path / "c", "t") == ErrorCode.KAFKA_STORAGE_ERROR
    assert part.path.parent == tmp_path / "a"
    m.close()
