"""The REST shell: Confluent's Schema Registry API on aiohttp, on the broker's event loop.

Handlers translate HTTP to `RegistryState` queries and `SchemaRegistry.write` commands; errors are
`RegistryError` bodies (``{"error_code": ..., "message": ...}``). Writes that reach an instance
which is not the writer are forwarded to the writer unchanged (with the caller's credentials).

Behind a secured broker (`pylog.schema_registry.auth`) every request is authenticated first (401
with ``WWW-Authenticate`` without valid credentials) and each handler asks the caller's
`SubjectAccess` for what it touches (403, error code 40301, when the ACLs refuse).
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import urlsplit

from aiohttp import ClientError, ClientSession, ClientTimeout, web

from pylog.clock import SYSTEM_CLOCK, Clock
from pylog.metrics.counters import TimeHistogram
from pylog.schema_registry import errors as e
from pylog.schema_registry.auth import (
    ALLOW_ALL,
    FORBIDDEN,
    OPEN,
    Forbidden,
    RegistrySecurity,
    SubjectAccess,
    Unauthenticated,
)
from pylog.schema_registry.core import Plan, RegistryState, parse_version, schema_from_request
from pylog.schema_registry.errors import RegistryError
from pylog.schema_registry.formats import SCHEMA_TYPES
from pylog.schema_registry.service import SchemaRegistry
from pylog.security.acl_operations import AclOperation

log = logging.getLogger(__name__)

CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
_READ, _WRITE, _ALTER = AclOperation.READ, AclOperation.WRITE, AclOperation.ALTER


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


AUDIT_LISTENER = "schema-registry"  # the listener the audit trail names for registry requests


def _route(request: web.Request) -> str:
    """``METHOD /path/{pattern}`` of the matched route (the path itself when none matched)."""
    info = request.match_info.route.resource
    return f"{request.method} {info.canonical if info is not None else request.path}"


UNMATCHED = "unmatched"  # the route label of a path no route serves (the path itself is the caller's)
_METHODS = frozenset({"GET", "POST", "PUT", "DELETE", "HEAD", "OPTIONS", "PATCH"})


class RegistryRequests:
    """Requests answered, by route pattern, method and status, and their time by route and method
    (read by pylog.metrics). Label values are bounded: a route is a pattern of the app's, a path
    no route serves counts as `UNMATCHED`, an unknown method as ``OTHER``."""

    __slots__ = ("answered", "times")

    def __init__(self) -> None:
        self.answered: dict[tuple[str, str, int], int] = {}
        self.times: dict[tuple[str, str], TimeHistogram] = {}

    def observe(self, request: web.Request, status: int, ns: int) -> None:
        resource = request.match_info.route.resource
        route = resource.canonical if resource is not None else UNMATCHED
        method = request.method if request.method in _METHODS else "OTHER"
        key = (route, method, status)
        self.answered[key] = self.answered.get(key, 0) + 1
        hist = self.times.get((route, method))
        if hist is None:
            hist = self.times[(route, method)] = TimeHistogram()
        hist.observe(ns)


def _access(request: web.Request) -> SubjectAccess:
    access: SubjectAccess = request.get("access", ALLOW_ALL)
    return access


def _subject(request: web.Request, operation: int) -> str:
    """The path's subject, once the caller may ``operation`` on it."""
    subject = request.match_info["subject"]
    _access(request).require(operation, subject)
    return subject


def _version_arg(request: web.Request) -> str | int:
    v = request.match_info["version"]
    if v != "latest":
        parse_version(v)
    return v


class RegistryApp:
    def __init__(
        self, registry: SchemaRegistry, security: RegistrySecurity = OPEN,
        requests: RegistryRequests | None = None,
    ) -> None:
        self.registry = registry
        self.security = security
        self.requests = requests if requests is not None else RegistryRequests()
        self._forward_session: ClientSession | None = None

    def app(self) -> web.Application:
        middlewares = [self._count, self._errors]
        if self.security.authenticator is not None:
            middlewares.append(self._authenticate)
        app = web.Application(middlewares=middlewares, client_max_size=16 << 20)
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
    async def _count(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        """Every answer, as `RegistryRequests` counts them (outermost: refusals and errors too)."""
        began = self.registry.clock.monotonic_ns()
        status = 500
        try:
            response = await handler(request)
            status = response.status
            return response
        except web.HTTPException as exc:
            status = exc.status
            raise
        finally:
            self.requests.observe(request, status, self.registry.clock.monotonic_ns() - began)

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

    @web.middleware
    async def _authenticate(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        authenticator = self.security.authenticator
        assert authenticator is not None
        transport = request.transport
        peercert = transport.get_extra_info("peercert") if transport is not None else None
        header = request.headers.get("Authorization")
        audit, address, route = self.security.audit, request.remote or "", _route(request)
        try:
            wait = authenticator.wait_before(header)
            if wait is not None:  # a bearer token signed by a key not fetched yet
                with contextlib.suppress(Exception):  # a failed refresh leaves the key unknown: 401
                    await wait
            principal = authenticator.authenticate(header, peercert)
        except Unauthenticated as exc:
            log.info("schema registry: %s %s from %s refused: %s", request.method, request.path,
                     request.remote, exc)
            if audit is not None:
                audit.authenticated(False, "", address, AUDIT_LISTENER, route, str(exc))
            response = _json({"error_code": 401, "message": f"Unauthorized: {exc}"}, 401)
            response.headers["WWW-Authenticate"] = authenticator.challenge
            return response
        if audit is not None:
            scheme = header.strip().partition(" ")[0] if header else "certificate"
            audit.authenticated(True, str(principal), address, AUDIT_LISTENER, route, scheme)
        request["access"] = self.security.access(principal, address)
        try:
            return await handler(request)
        except Forbidden as exc:
            if audit is not None:
                audit.denied(
                    str(principal), address, AUDIT_LISTENER, route, exc.resource, exc.operation, str(exc)
                )
            return _json({"error_code": FORBIDDEN, "message": str(exc)}, 403)

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
        headers = {"Content-Type": request.headers.get("Content-Type", CONTENT_TYPE)}
        if "Authorization" in request.headers:  # the writer authenticates and authorizes the caller again
            headers["Authorization"] = request.headers["Authorization"]
        ctx = self.security.client_ssl_context
        try:
            async with self._forward_session.request(
                request.method,
                url,
                data=await request.read(),
                headers=headers,
                ssl=ctx if ctx is not None and base.scheme == "https" else True,
            ) as resp:
                out = web.Response(
                    body=await resp.read(), status=resp.status, headers={"Content-Type": CONTENT_TYPE}
                )
                if "WWW-Authenticate" in resp.headers:
                    out.headers["WWW-Authenticate"] = resp.headers["WWW-Authenticate"]
                return out
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
            for s in _access(request).readable(st.subject_names(deleted=deleted, prefix=prefix))
            for v in st.versions(s, deleted=deleted)
        ]
        if _flag(request, "latestOnly"):
            latest: dict[str, Any] = {}
            for v in out:
                latest[v["subject"]] = v
            out = list(latest.values())
        return _json(out)

    @staticmethod
    def _readable_id(request: web.Request, st: RegistryState) -> int:
        """The path's schema id, once the caller may READ some subject that holds it (soft-deleted
        versions included); an unknown id is left to the handler's 404."""
        sid = _schema_id(request)
        access = _access(request)
        if access is not ALLOW_ALL and sid in st.by_id:
            subjects = {v.subject for v in st.id_usages(sid, deleted=True)}
            if not access.readable(sorted(subjects)):
                raise Forbidden(
                    f"User {access.principal} is not authorized to READ any subject of schema {sid}",
                    f"SCHEMA:{sid}", "READ",
                )
        return sid

    async def schema_by_id(self, request: web.Request) -> web.Response:
        st = await self._state()
        return _json(st.schema(self._readable_id(request, st)).to_json())

    async def schema_text_by_id(self, request: web.Request) -> web.Response:
        st = await self._state()
        text = st.schema(self._readable_id(request, st)).text
        return web.Response(text=text, content_type="application/json")

    async def id_subjects(self, request: web.Request) -> web.Response:
        st = await self._state()
        usages = st.id_usages(self._readable_id(request, st), deleted=_flag(request, "deleted"))
        return _json(_access(request).readable(sorted({v.subject for v in usages})))

    async def id_versions(self, request: web.Request) -> web.Response:
        st = await self._state()
        usages = st.id_usages(self._readable_id(request, st), deleted=_flag(request, "deleted"))
        may = _access(request).may
        return _json([{"subject": v.subject, "version": v.version} for v in usages if may(_READ, v.subject)])

    # --- subjects --------------------------------------------------------------------------

    async def subjects(self, request: web.Request) -> web.Response:
        st = await self._state()
        prefix = request.query.get("subjectPrefix", "")
        names = st.subject_names(deleted=_flag(request, "deleted"), prefix=prefix)
        return _json(_access(request).readable(names))

    async def subject_versions(self, request: web.Request) -> web.Response:
        st = await self._state()
        vs = st.versions(_subject(request, _READ), deleted=_flag(request, "deleted"))
        return _json([v.version for v in vs])

    async def get_version(self, request: web.Request) -> web.Response:
        st = await self._state()
        v = st.version(_subject(request, _READ), _version_arg(request), deleted=_flag(request, "deleted"))
        return _json(v.to_json())

    async def get_version_schema(self, request: web.Request) -> web.Response:
        st = await self._state()
        v = st.version(_subject(request, _READ), _version_arg(request), deleted=_flag(request, "deleted"))
        return web.Response(text=v.schema.text, content_type="application/json")

    async def referenced_by(self, request: web.Request) -> web.Response:
        st = await self._state()
        return _json(st.referenced_by(_subject(request, _READ), _version_arg(request)))

    async def register(self, request: web.Request) -> web.Response:
        subject = _subject(request, _WRITE)
        body = await _body(request)
        schema = schema_from_request(body)
        sid = body.get("id") if isinstance(body.get("id"), int) else None
        ver = body.get("version") if isinstance(body.get("version"), int) else None
        return await self._write(request, lambda st: st.register(subject, schema, schema_id=sid, version=ver))

    async def lookup(self, request: web.Request) -> web.Response:
        subject = _subject(request, _READ)
        st = await self._state()
        schema = schema_from_request(await _body(request))
        v = st.lookup(subject, schema, deleted=_flag(request, "deleted"))
        return _json(v.to_json())

    async def delete_subject(self, request: web.Request) -> web.Response:
        subject, permanent = _subject(request, _ALTER), _flag(request, "permanent")
        return await self._write(request, lambda st: st.delete_subject(subject, permanent=permanent))

    async def delete_version(self, request: web.Request) -> web.Response:
        subject, permanent = _subject(request, _ALTER), _flag(request, "permanent")
        version = _version_arg(request)
        return await self._write(request, lambda st: st.delete_version(subject, version, permanent=permanent))

    async def compatibility(self, request: web.Request) -> web.Response:
        subject = _subject(request, _READ)
        st = await self._state()
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

    @staticmethod
    def _config_target(request: web.Request, operation: int) -> str | None:
        """The path's subject (None: the global level) once the caller may change / read it:
        a subject's level needs ``operation`` on it, changing the global one CLUSTER ALTER."""
        subject = request.match_info.get("subject")
        if subject is not None:
            _access(request).require(operation, subject)
        elif operation == _ALTER:
            _access(request).require_cluster_alter()
        return subject

    async def get_config(self, request: web.Request) -> web.Response:
        subject = self._config_target(request, _READ)
        st = await self._state()
        if subject is not None and subject not in st.configs and not _flag(request, "defaultToGlobal"):
            raise e.not_found(
                e.SUBJECT_LEVEL_COMPATIBILITY_NOT_CONFIGURED,
                f"Subject '{subject}' does not have subject-level compatibility configured",
            )
        return _json({"compatibilityLevel": st.compatibility(subject)})

    async def put_config(self, request: web.Request) -> web.Response:
        subject = self._config_target(request, _ALTER)
        body = await _body(request)
        level = body.get("compatibility", body.get("compatibilityLevel")) if isinstance(body, dict) else None
        return await self._write(request, lambda st: st.set_compatibility(subject, level))

    async def delete_config(self, request: web.Request) -> web.Response:
        subject = self._config_target(request, _ALTER)
        return await self._write(request, lambda st: st.delete_compatibility(subject))

    async def get_mode(self, request: web.Request) -> web.Response:
        subject = self._config_target(request, _READ)
        st = await self._state()
        if subject is not None and subject not in st.modes and not _flag(request, "defaultToGlobal"):
            raise e.not_found(
                e.SUBJECT_LEVEL_MODE_NOT_CONFIGURED,
                f"Subject '{subject}' does not have subject-level mode configured",
            )
        return _json({"mode": st.mode(subject)})

    async def put_mode(self, request: web.Request) -> web.Response:
        subject = self._config_target(request, _ALTER)
        body = await _body(request)
        mode = body.get("mode") if isinstance(body, dict) else None
        force = _flag(request, "force")
        return await self._write(request, lambda st: st.set_mode(subject, mode, force=force))

    async def delete_mode(self, request: web.Request) -> web.Response:
        subject = self._config_target(request, _ALTER)
        assert subject is not None
        return await self._write(request, lambda st: st.delete_mode(subject))


class RegistryServer:
    """The HTTP listener of one broker's registry (``schema.registry.listeners=http://HOST:PORT``)."""

    def __init__(
        self,
        listener: str,
        bootstrap_servers: str,
        *,
        node_id: int,
        security: Any = None,
        access: RegistrySecurity = OPEN,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        self.clock = clock
        self.host, self.port = parse_listener(listener)
        self.bootstrap_servers = bootstrap_servers
        self.security = security  # how this node reaches its own (possibly secured) listener
        self.access = access  # how callers of the registry are authenticated and authorized
        self.node_id = node_id
        self.registry: SchemaRegistry | None = None
        self.requests = RegistryRequests()  # what the HTTP API answered (pylog.metrics)
        self._runner: web.AppRunner | None = None

    @property
    def url(self) -> str:
        host = "127.0.0.1" if self.host in ("0.0.0.0", "", "::") else self.host
        return f"{self.access.scheme}://{host}:{self.port}"

    async def start(self) -> str:
        self.registry = SchemaRegistry(self.bootstrap_servers, node_id=self.node_id, security=self.security,
                                       clock=self.clock)
        app = RegistryApp(self.registry, self.access, self.requests).app()
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(
            self._runner, self.host, self.port, reuse_address=True, ssl_context=self.access.ssl_context
        )
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
    """``http://HOST:PORT`` (the first of a comma-separated list) -> (host, port). ``https://`` is
    accepted too: whether TLS is served follows the broker's listeners, not the scheme written."""
    first = listener.split(",")[0].strip()
    parts = urlsplit(first)
    if parts.scheme not in ("http", "https") or parts.port is None or not parts.hostname:
        raise ValueError(f"schema.registry.listeners must be http://HOST:PORT, got {listener!r}")
    return parts.hostname, parts.port
