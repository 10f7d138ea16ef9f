"""Iceberg tables kept up to date: which topics this broker materialises, and their worker threads.

A topic with ``pylog.iceberg.enable=true`` is materialised by the leader of its partition 0 (one
writer per table; leadership moves it, and the table's own offsets tell the new writer where to
resume). Every `RECONCILE_S` this reads the metadata image on the event loop, starts a
`pylog.iceberg.materializer.Materializer` thread for each topic it should run and is not running,
and stops those it should no longer run (leadership lost, config changed, topic deleted). The
workers read through the broker's own listener as clients do; pyiceberg is imported only when a
topic asks for a table.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from pylog.clock import SYSTEM_CLOCK, Clock
from pylog.cluster.image import MetadataImage
from pylog.config import BrokerConfig
from pylog.tasks import cancel_and_wait

log = logging.getLogger(__name__)

RECONCILE_S = 1.0
STOP_TIMEOUT_S = 30.0


def wanted_topics(image: MetadataImage, node_id: int,
                  topic_configs: Callable[[Mapping[str, str]], dict[str, str]]) -> dict[str, Any]:
    """{topic: TopicSpec} of the topics this node should materialise now (it leads partition 0)."""
    from pylog.iceberg.catalog import table_identifier
    from pylog.iceberg.materializer import TopicSpec

    out: dict[str, Any] = {}
    for name, topic in image.topics.items():
        overrides = image.topic_configs(name)
        if overrides.get("pylog.iceberg.enable", "").lower() != "true":
            continue
        p0 = image.partition(name, 0)
        if p0 is None or p0.leader != node_id:
            continue
        c = topic_configs(overrides)
        out[name] = TopicSpec(
            topic=name, topic_id=str(topic.topic_id),
            table=table_identifier(name, c.get("pylog.iceberg.table")),
            interval_ms=int(c.get("pylog.iceberg.commit.interval.ms", "60000")),
            mode=c.get("pylog.iceberg.mode", "append"), layout=c.get("pylog.iceberg.layout", "auto"),
            partition_by=c.get("pylog.iceberg.partition.by", "day"))
    return out


class _Worker:
    def __init__(self, spec: Any, materializer: Any) -> None:
        self.spec = spec
        self.materializer = materializer
        self.stop = threading.Event()
        self.thread = threading.Thread(target=materializer.run, args=(self.stop,), daemon=True,
                                       name=f"pylog-iceberg-{spec.topic}")


class IcebergMaterializers:
    """This broker's materialisers (see the module doc)."""

    def __init__(self, node_id: int, config: BrokerConfig, data_dir: Path, image: Callable[[], MetadataImage],
                 client: Callable[[], tuple[str, Any]], clock: Clock = SYSTEM_CLOCK) -> None:
        from pylog.iceberg.catalog import CatalogSettings

        self.node_id = node_id
        self.config = config
        self.catalog = CatalogSettings.from_config(config.raw, data_dir)  # bad settings stop the start
        self._image = image
        self._client = client  # (bootstrap servers of this broker's own listener, client security)
        self._clock = clock
        self._workers: dict[str, _Worker] = {}
        self._task: asyncio.Task[None] | None = None
        self._missing_reported = False
        self._preloading: threading.Thread | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._loop(), name=f"iceberg-materializers-{self.node_id}")

    def table_offsets(self) -> dict[str, dict[int, int]]:
        """Per topic materialised here: the next offset of each partition its table lacks, as the
        table's last commit says (a partition it holds nothing of: the log start offset reading
        started at). Safe from any thread (pylog.metrics reads it)."""
        out = {}
        for topic, worker in list(self._workers.items()):
            offsets = worker.materializer.table_offsets()
            if offsets:
                out[topic] = offsets
        return out

    async def _loop(self) -> None:
        while True:
            try:
                await self.reconcile()
            except Exception:
                log.exception("reconciling Iceberg materialisers failed")
            await asyncio.sleep(RECONCILE_S)

    async def reconcile(self) -> None:
        image = self._image()
        if not any(c.get("pylog.iceberg.enable", "").lower() == "true"
                   for c in (image.topic_configs(t) for t in image.topics)) and not self._workers:
            return
        self._preload()
        wanted = wanted_topics(image, self.node_id, self.config.topic_configs)
        for topic, worker in list(self._workers.items()):
            if wanted.get(topic) != worker.spec or not worker.thread.is_alive():
                await self._stop_worker(topic)
        for topic, spec in wanted.items():
            if topic not in self._workers:
                self._start_worker(spec)

    def _preload(self) -> None:
        """Import pyiceberg in the background as soon as any topic asks for a table, so a broker that
        becomes the writer on a leadership change starts at once (the import takes a second or two)."""
        if self._preloading is None:
            def load() -> None:
                try:
                    import pyiceberg.catalog.sql
                    import pyiceberg.io.pyarrow
                    import pyiceberg.table  # noqa: F401
                except ImportError:
                    pass

            self._preloading = threading.Thread(target=load, name="pylog-iceberg-import", daemon=True)
            self._preloading.start()

    def _start_worker(self, spec: Any) -> None:
        try:
            import pyiceberg  # noqa: F401
        except ImportError:
            if not self._missing_reported:
                log.error("topic %s has pylog.iceberg.enable=true but pyiceberg is not installed: "
                          "pip install 'pylog[iceberg]'", spec.topic)
                self._missing_reported = True
            return
        from pylog.iceberg.materializer import Materializer  # imports pyiceberg

        bootstrap, security = self._client()
        materializer = Materializer(
            spec, self.catalog, bootstrap, security=security, clock=self._clock
        )
        worker = self._workers[spec.topic] = _Worker(spec, materializer)
        worker.thread.start()
        log.info("materialising topic %s into Iceberg table %s (this broker leads partition 0)", spec.topic,
                 spec.table)

    async def _stop_worker(self, topic: str) -> None:
        worker = self._workers.pop(topic)
        worker.stop.set()
        await asyncio.get_running_loop().run_in_executor(None, worker.thread.join, STOP_TIMEOUT_S)
        if worker.thread.is_alive():
            log.warning("the materialiser of %s did not stop within %.0fs", topic, STOP_TIMEOUT_S)

    async def stop(self) -> None:
        if self._task is not None:
            await cancel_and_wait(self._task)
            self._task = None
        for topic in list(self._workers):
            with contextlib.suppress(Exception):
                await self._stop_worker(topic)
