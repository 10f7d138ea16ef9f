"""The REST shell: Confluent's Schema Registry API on aiohttp, on the broker's event loop.

Handlers translate HTTP to `RegistryState` queries and `SchemaRegistry.write` commands; errors are
`RegistryError` bodies (``{"error_code": ..., "message": ...}``). Writes that reach an instance
which is not the writer are forwarded to the writer unchanged.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import urlsplit

from aiohttp import ClientError, ClientSession, ClientTimeout, web

from pylog.schema_registry import errors as e
from pylog.schema_registry.core import Plan, RegistryState, parse_version, schema_from_request
from pylog.schema_registry.errors import RegistryError
from pylog.schema_registry.formats import SCHEMA_TYPES
from pylog.schema_registry.service import SchemaRegistry

log = logging.getLogger(__name__)

CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def _json(body: Any, status: int = 200) -> web.Response:
    return web.Response(body=json.dumps(body).encode(), status=status, headers={"Content-Type": CONTENT_TYPE})


def _flag(request: web.Request, name: str) -> bool:
    return request.query.get(name, "false").lower() == "true"


async def _body(request: web.Request) -> Any:
    raw = await request.read()
    try:
        return json.loads(raw) if raw else {}
    except ValueError:
        raise RegistryError(400, 400, "the request body is not JSON") from None


def _schema_id(request: web.Request) -> int:
    try:
        return int(request.match_info["id"])
    except ValueError:
        raise e.not_found(e.SCHEMA_NOT_FOUND, f"Schema {request.match_info['id']} not found") from None


def _version_arg(request: web.Request) -> str | int:
    v = request.match_info["version"]
    if v != "latest":
        parse_version(v)
    return v


class RegistryApp:
    def __init__(self, registry: SchemaRegistry) -> None:
        self.registry = registry
        self._forward_session: ClientSession | None = None

    def app(self) -> web.Application:
        app = web.Application(middlewares=[self._errors], client_max_size=16 << 20)
        r = app.router
        r.add_get("/", self.root)
        r.add_get("/schemas/types", self.types)
        r.add_get("/schemas", self.schemas)
        r.add_get("/schemas/ids/{id}", self.schema_by_id)
        r.add_get("/schemas/ids/{id}/schema", self.schema_text_by_id)
        r.add_get("/schemas/ids/{id}/subjects", self.id_subjects)
        r.add_get("/schemas/ids/{id}/versions", self.id_versions)
        r.add_get("/subjects", self.subjects)
        r.add_get("/subjects/{subject}/versions", self.subject_versions)
        r.add_post("/subjects/{subject}/versions", self.register)
        r.add_get("/subjects/{subject}/versions/{version}", self.get_version)
        r.add_get("/subjects/{subject}/versions/{version}/schema", self.get_version_schema)
        r.add_get("/subjects/{subject}/versions/{version}/referencedby", self.referenced_by)
        r.add_delete("/subjects/{subject}/versions/{version}", self.delete_version)
        r.add_post("/subjects/{subject}", self.lookup)
        r.add_delete("/subjects/{subject}", self.delete_subject)
        r.add_post("/compatibility/subjects/{subject}/versions/{version}", self.compatibility)
        r.add_post("/compatibility/subjects/{subject}/versions", self.compatibility)
        r.add_get("/config", self.get_config)
        r.add_put("/config", self.put_config)
        r.add_delete("/config", self.delete_config)
        r.add_get("/config/{subject}", self.get_config)
        r.add_put("/config/{subject}", self.put_config)
        r.add_delete("/config/{subject}", self.delete_config)
        r.add_get("/mode", self.get_mode)
        r.add_put("/mode", self.put_mode)
        r.add_get("/mode/{subject}", self.get_mode)
        r.add_put("/mode/{subject}", self.put_mode)
        r.add_delete("/mode/{subject}", self.delete_mode)
        r.add_get("/contexts", self.contexts)
        app.on_cleanup.append(self._close)
        return app

    async def _close(self, _app: web.Application) -> None:
        if self._forward_session is not None:
            await self._forward_session.close()

    @web.middleware
    async def _errors(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        try:
            return await handler(request)
        except RegistryError as exc:
            return _json(exc.body(), exc.status)
        except web.HTTPException as exc:
            if exc.status >= 400:
                return _json({"error_code": exc.status, "message": exc.reason}, exc.status)
            raise
        except Exception as exc:
            log.exception("schema registry: %s %s failed", request.method, request.path)
            return _json({"error_code": 50001, "message": f"Error in the backend data store: {exc}"}, 500)

    async def _state(self) -> RegistryState:
        return await self.registry.ready()

    async def _write(self, request: web.Request, plan: Callable[[RegistryState], Plan]) -> web.Response:
        target = await self.registry.writer_url()
        if target is not None:
            return await self._forward(request, target)
        return _json(await self.registry.write(plan))

    async def _forward(self, request: web.Request, target: str) -> web.Response:
        if self._forward_session is None:
            self._forward_session = ClientSession(timeout=ClientTimeout(total=30))
        base = urlsplit(target)
        url = f"{base.scheme}://{base.netloc}{request.rel_url}"
        try:
            async with self._forward_session.request(
                request.method,
                url,
                data=await request.read(),
                headers={"Content-Type": request.headers.get("Content-Type", CONTENT_TYPE)},
            ) as resp:
                return web.Response(
                    body=await resp.read(), status=resp.status, headers={"Content-Type": CONTENT_TYPE}
                )
        except ClientError as exc:
            raise RegistryError(
                500, e.FORWARDING_ERROR, f"forwarding to the writer at {target} failed: {exc}"
            ) from None

    # --- schemas ---------------------------------------------------------------------------

    async def root(self, request: web.Request) -> web.Response:
        return _json({})

    async def types(self, request: web.Request) -> web.Response:
        return _json(list(SCHEMA_TYPES))

    async def contexts(self, request: web.Request) -> web.Response:
        return _json(["."])

    async def schemas(self, request: web.Request) -> web.Response:
        st = await self._state()
        prefix = request.query.get("subjectPrefix", "")
        deleted = _flag(request, "deleted")
        out = [
            v.to_json()
            for s in st.subject_names(deleted=deleted, prefix=prefix)
            for v in st.versions(s, deleted=deleted)
        ]
        if _flag(request, "latestOnly"):
            latest: dict[str, Any] = {}
            for v in out:
                latest[v["subject"]] = v
            out = list(latest.values())
        return _json(out)

    async def schema_by_id(self, request: web.Request) -> web.Response:
        st = await self._state()
        return _json(st.schema(_schema_id(request)).to_json())

    async def schema_text_by_id(self, request: web.Request) -> web.Response:
        st = await self._state()
        return web.Response(text=st.schema(_schema_id(request)).text, content_type="application/json")

    async def id_subjects(self, request: web.Request) -> web.Response:
        st = await self._state()
        usages = st.id_usages(_schema_id(request), deleted=_flag(request, "deleted"))
        return _json(sorted({v.subject for v in usages}))

    async def id_versions(self, request: web.Request) -> web.Response:
        st = await self._state()
        usages = st.id_usages(_schema_id(request), deleted=_flag(request, "deleted"))
        return _json([{"subject": v.subject, "version": v.version} for v in usages])

    # --- subjects --------------------------------------------------------------------------

    async def subjects(self, request: web.Request) -> web.Response:
        st = await self._state()
        return _json(
            st.subject_names(deleted=_flag(request, "deleted"), prefix=request.query.get("subjectPrefix", ""))
        )

    async def subject_versions(self, request: web.Request) -> web.Response:
        st = await self._state()
        vs = st.versions(request.match_info["subject"], deleted=_flag(request, "deleted"))
        return _json([v.version for v in vs])

    async def get_version(self, request: web.Request) -> web.Response:
        st = await self._state()
        v = st.version(
            request.match_info["subject"], _version_arg(request), deleted=_flag(request, "deleted")
        )
        return _json(v.to_json())

    async def get_version_schema(self, request: web.Request) -> web.Response:
        st = await self._state()
        v = st.version(
            request.match_info["subject"], _version_arg(request), deleted=_flag(request, "deleted")
        )
        return web.Response(text=v.schema.text, content_type="application/json")

    async def referenced_by(self, request: web.Request) -> web.Response:
        st = await self._state()
        return _json(st.referenced_by(request.match_info["subject"], _version_arg(request)))

    async def register(self, request: web.Request) -> web.Response:
        body = await _body(request)
        schema = schema_from_request(body)
        subject = request.match_info["subject"]
        sid = body.get("id") if isinstance(body.get("id"), int) else None
        ver = body.get("version") if isinstance(body.get("version"), int) else None
        return await self._write(request, lambda st: st.register(subject, schema, schema_id=sid, version=ver))

    async def lookup(self, request: web.Request) -> web.Response:
        st = await self._state()
        schema = schema_from_request(await _body(request))
        v = st.lookup(request.match_info["subject"], schema, deleted=_flag(request, "deleted"))
        return _json(v.to_json())

    async def delete_subject(self, request: web.Request) -> web.Response:
        subject, permanent = request.match_info["subject"], _flag(request, "permanent")
        return await self._write(request, lambda st: st.delete_subject(subject, permanent=permanent))

    async def delete_version(self, request: web.Request) -> web.Response:
        subject, permanent = request.match_info["subject"], _flag(request, "permanent")
        version = _version_arg(request)
        return await self._write(request, lambda st: st.delete_version(subject, version, permanent=permanent))

    async def compatibility(self, request: web.Request) -> web.Response:
        st = await self._state()
        subject = request.match_info["subject"]
        schema = schema_from_request(await _body(request))
        version = request.match_info.get("version")
        if version is None:
            against = None
        else:
            if version != "latest":
                parse_version(version)
            try:
                against = [st.version(subject, version)]
            except RegistryError as exc:
                if version == "latest" and exc.error_code == e.SUBJECT_NOT_FOUND:
                    return _json({"is_compatible": True})
                raise
        problems = st.incompatibilities(subject, schema, against)
        out: dict[str, Any] = {"is_compatible": not problems}
        if _flag(request, "verbose"):
            out["messages"] = problems
        return _json(out)

    # --- config and mode -------------------------------------------------------------------

    async def get_config(self, request: web.Request) -> web.Response:
        st = await self._state()
        subject = request.match_info.get("subject")
        if subject is not None and subject not in st.configs and not _flag(request, "defaultToGlobal"):
            raise e.not_found(
                e.SUBJECT_LEVEL_COMPATIBILITY_NOT_CONFIGURED,
                f"Subject '{subject}' does not have subject-level compatibility configured",
            )
        return _json({"compatibilityLevel": st.compatibility(subject)})

    async def put_config(self, request: web.Request) -> web.Response:
        body = await _body(request)
        subject = request.match_info.get("subject")
        level = body.get("compatibility", body.get("compatibilityLevel")) if isinstance(body, dict) else None
        return await self._write(request, lambda st: st.set_compatibility(subject, level))

    async def delete_config(self, request: web.Request) -> web.Response:
        subject = request.match_info.get("subject")
        return await self._write(request, lambda st: st.delete_compatibility(subject))

    async def get_mode(self, request: web.Request) -> web.Response:
        st = await self._state()
        subject = request.match_info.get("subject")
        if subject is not None and subject not in st.modes and not _flag(request, "defaultToGlobal"):
            raise e.not_found(
                e.SUBJECT_LEVEL_MODE_NOT_CONFIGURED,
                f"Subject '{subject}' does not have subject-level mode configured",
            )
        return _json({"mode": st.mode(subject)})

    async def put_mode(self, request: web.Request) -> web.Response:
        body = await _body(request)
        subject = request.match_info.get("subject")
        mode = body.get("mode") if isinstance(body, dict) else None
        force = _flag(request, "force")
        return await self._write(request, lambda st: st.set_mode(subject, mode, force=force))

    async def delete_mode(self, request: web.Request) -> web.Response:
        subject = request.match_info["subject"]
        return await self._write(request, lambda st: st.delete_mode(subject))


class RegistryServer:
    """The HTTP listener of one broker's registry (``schema.registry.listeners=http://HOST:PORT``)."""

    def __init__(self, listener: str, bootstrap_servers: str, *, node_id: int, security: Any = None) -> None:
        self.host, self.port = parse_listener(listener)
        self.bootstrap_servers = bootstrap_servers
        self.security = security  # how this node reaches its own (possibly secured) listener
        self.node_id = node_id
        self.registry: SchemaRegistry | None = None
        self._runner: web.AppRunner | None = None

    @property
    def url(self) -> str:
        host = "127.0.0.1" if self.host in ("0.0.0.0", "", "::") else self.host
        return f"http://{host}:{self.port}"

    async def start(self) -> str:
        self.registry = SchemaRegistry(self.bootstrap_servers, node_id=self.node_id, security=self.security)
        self._runner = web.AppRunner(RegistryApp(self.registry).app(), access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port, reuse_address=True)
        await site.start()
        server = getattr(site, "_server", None)
        if server is not None and server.sockets:
            self.port = server.sockets[0].getsockname()[1]
        self.registry.url = self.url  # known once bound (port 0 = any free port)
        await self.registry.start()
        log.info("schema registry listening on %s", self.url)
        return self.url

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
        if self.registry is not None:
            await self.registry.stop()


def parse_listener(listener: str) -> tuple[str, int]:
    """``http://HOST:PORT`` (the first of a comma-separated list) -> (host, port)."""
    first = listener.split(",")[0].strip()
    parts = urlsplit(first)
    if parts.scheme != "http" or parts.port is None or not parts.hostname:
        raise ValueError(f"schema.registry.listeners must be http://HOST:PORT, got {listener!r}")
    return parts.hostname, parts.port
