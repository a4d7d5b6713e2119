"""`earmark view`: a dataset version in the browser, served on loopback — listen to each clip, read its expert
facts, its items and their QC verdicts, and review them.

Routes (JSON unless said otherwise):
- `GET /`                        the page (page.html, package data)
- `GET /api/summary`             the version, its domains, item tables and counts, the dataset's versions
- `GET /api/clips?domain=&table=&status=all|kept|rejected&page=N`   one page of matching clips and items
- `GET /api/plots`               {name: SVG} — the card's plots (stages/publish/plots.py)
- `GET /audio/<clip_id>.wav`     the clip as 16-bit WAV
- `POST /api/decisions`          {reviewer, decisions: [{item_table, item_id, decision, new_text}]} → stored
                                 exactly as `earmark review import` stores a sheet's rows (flows/review.py)
- `POST /api/publish`            a new version with every stored decision applied (what `review import`
                                 publishes); the page then shows it

Writes take the dataset's lease only while they run (flows/review.py): an open page holds nothing. Only
loopback addresses are served; item text reaches the page as JSON and is inserted as text, never as HTML.

Loopback is not a boundary a browser respects: any page the reviewer has open can send requests to
127.0.0.1, and a DNS-rebinding page can even read the answers. So (`Guard`):
- every request, GETs included, must name this server in `Host` (127.0.0.1, localhost or [::1] at its port):
  a rebound name (`evil.example:PORT`) gets 403 and no data;
- a write must come from the page itself: `Origin` (when sent) is this server's origin, `Sec-Fetch-Site`
  (when sent) is `same-origin`, the header `X-Earmark-Token` holds the token made at this server's start (the
  page carries it in a meta tag; another origin cannot read the page, so it cannot know it), and the body is
  `application/json` (a cross-site form or `text/plain` fetch cannot send that without a preflight, which
  this server never grants). A forged write is refused with 403 before its body is read;
- `Content-Length` is required on a write (411), a number ≥ 0 (400) and at most `MAX_BODY` (413).

Each connection has a thread, so a connection that goes silent for `IDLE_TIMEOUT_S` (half a request, an
idle keep-alive) is closed, and at most `MAX_CONNECTIONS` are served at once: another is answered 503 and
closed, rather than a thread more per connection without end.
"""

from __future__ import annotations

import hmac
import json
import secrets
import socket
import threading
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib.resources import files
from typing import Any
from urllib.parse import parse_qs, unquote, urlparse

from earmark.core.config import Config
from earmark.queries.browse import VersionView
from earmark.stages.publish.plots import version_plots
from earmark.storage import Catalog

LOOPBACK = ("127.0.0.1", "::1", "localhost")
MAX_BODY = 2**20
TOKEN_HEADER = "X-Earmark-Token"
TOKEN_SLOT = b"__EARMARK_TOKEN__"  # page.html's placeholder for this start's token
IDLE_TIMEOUT_S = 30.0  # a connection that sends nothing this long is closed (a browser opens a new one)
MAX_CONNECTIONS = 64  # served at once (a page opens a few; its audio elements a few more)
BUSY = (
    b"HTTP/1.0 503 Service Unavailable\r\nContent-Type: text/plain\r\nContent-Length: 33\r\n"
    b"Retry-After: 1\r\nConnection: close\r\n\r\ntoo many connections; try again\r\n"
)


class Refused(Exception):
    """A request the view will not serve: its HTTP status and a message for the sender."""

    def __init__(self, status: HTTPStatus, message: str):
        super().__init__(message)
        self.status = status


class Guard:
    """Who may read and who may write: the names this server answers to, its origins and this start's token."""

    def __init__(self, port: int, token: str | None = None):
        self.port = port
        self.token = token or secrets.token_urlsafe(32)
        names = ("127.0.0.1", "localhost", "[::1]")
        self.hosts = {f"{n}:{port}" for n in names} | ({*names} if port == 80 else set())
        self.origins = {f"http://{n}:{port}" for n in names} | ({f"http://{n}" for n in names} if port == 80 else set())

    def check_host(self, headers: Any) -> None:
        host = (headers.get("Host") or "").strip().lower()
        if host not in self.hosts:
            raise Refused(
                HTTPStatus.FORBIDDEN,
                f"Host {host or '(none)'!r} is not this server; open http://127.0.0.1:{self.port}/ instead",
            )

    def check_write(self, headers: Any) -> int:
        """Refuse a write that is not the page's own, before its body is read; return the body's length."""
        origin = headers.get("Origin")
        if origin is not None and origin.strip().lower() not in self.origins:
            raise Refused(HTTPStatus.FORBIDDEN, f"writes are taken only from this page, not from {origin!r}")
        site = headers.get("Sec-Fetch-Site")
        if site is not None and site.strip().lower() != "same-origin":
            raise Refused(HTTPStatus.FORBIDDEN, f"writes are taken only from this page (Sec-Fetch-Site: {site})")
        if not hmac.compare_digest((headers.get(TOKEN_HEADER) or "").encode(), self.token.encode()):
            raise Refused(
                HTTPStatus.FORBIDDEN, f"missing or wrong {TOKEN_HEADER}: reload the page (each start makes a new one)"
            )
        kind = (headers.get("Content-Type") or "").split(";")[0].strip().lower()
        if kind != "application/json":
            raise Refused(HTTPStatus.UNSUPPORTED_MEDIA_TYPE, f"send the body as application/json, not {kind or 'none'}")
        raw = headers.get("Content-Length")
        if raw is None:
            raise Refused(HTTPStatus.LENGTH_REQUIRED, "a write needs a Content-Length header")
        try:
            length = int(raw.strip())
        except ValueError:
            raise Refused(HTTPStatus.BAD_REQUEST, f"Content-Length {raw!r} is not a number") from None
        if length < 0:
            raise Refused(HTTPStatus.BAD_REQUEST, f"Content-Length {length} is negative")
        if length > MAX_BODY:
            raise Refused(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, f"request body over {MAX_BODY} bytes")
        return length


class ViewApp:
    """The view's state: the dataset, the version shown (`version` None: always the latest published)."""

    def __init__(self, cfg: Config, cat: Catalog, version: str | None = None):
        self.cfg, self.cat, self.pinned = cfg, cat, version
        self._views: dict[str, VersionView] = {}
        self._write = threading.Lock()  # one write at a time from this process (the lease guards others)

    def version(self) -> str:
        version = self.pinned or self.cat.latest_version()
        if version is None:
            raise LookupError(f"dataset {self.cat.dataset!r} has no published version yet; run build first")
        return version

    def view(self) -> VersionView:
        version = self.version()
        if version not in self._views:
            self._views[version] = VersionView(self.cat, version)
        return self._views[version]

    def summary(self) -> dict:
        return {"dataset": self.cat.dataset, "versions": self.cat.versions(), **self.view().summary()}

    def decide(self, body: dict) -> dict:
        from earmark.flows.review import review_store_flow

        reviewer = str(body.get("reviewer") or "").strip() or "reviewer"
        rows = body.get("decisions")
        if not isinstance(rows, list) or not rows or not all(isinstance(r, dict) for r in rows):
            raise ValueError("send {reviewer, decisions: [{item_table, item_id, decision, new_text}, …]}")
        rows = [{k: "" if v is None else str(v) for k, v in r.items()} for r in rows]
        with self._write:
            out = review_store_flow(self.cfg, rows, reviewer=reviewer, version=self.version())
        return {"stored": out["decisions"], "version": out["version"]}

    def publish(self) -> dict:
        from earmark.flows.review import review_publish_flow

        with self._write:
            out = review_publish_flow(self.cfg, version=self.version())
        if self.pinned is not None:  # a pinned view follows its own review to the version it made
            self.pinned = out["version"]
        return {"version": out["version"], "created": out["created"]}


class BoundedServer(ThreadingHTTPServer):
    """A thread per connection, at most `max_connections` at once: one more is answered 503 and closed by the
    accepting thread, without a thread of its own (so silent clients cannot pile up threads)."""

    def __init__(self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler], max_connections: int):
        super().__init__(address, handler)
        self.slots = threading.BoundedSemaphore(max_connections)

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self.slots.acquire(blocking=False):
            self._refuse_busy(request)
            return
        try:
            super().process_request(request, client_address)  # starts the connection's thread
        except BaseException:
            self.slots.release()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self.slots.release()

    def _refuse_busy(self, request: socket.socket) -> None:
        try:
            request.settimeout(1.0)  # never hold up the accepting thread for a client that does not read
            request.sendall(BUSY)
        except OSError:
            pass
        self.shutdown_request(request)


def make_server(
    app: ViewApp,
    host: str = "127.0.0.1",
    port: int = 0,
    *,
    idle_timeout_s: float = IDLE_TIMEOUT_S,
    max_connections: int = MAX_CONNECTIONS,
) -> ThreadingHTTPServer:
    """A threading HTTP server for `app` (port 0: a free one); call `serve_forever()`. Its `guard` holds the
    token the page sends with every write. A connection silent for `idle_timeout_s` is closed; at most
    `max_connections` are served at once."""
    if host not in LOOPBACK:
        raise ValueError(f"earmark view serves loopback only (127.0.0.1 or ::1), not {host!r}")
    server = BoundedServer((host, port), _handler(app, idle_timeout_s), max_connections)
    server.guard = Guard(server.server_address[1])  # type: ignore[attr-defined]
    return server


class _Handler(BaseHTTPRequestHandler):
    """The view's HTTP handler: `_handler` makes one per server, bound to its app and page."""

    app: ViewApp
    template: bytes
    server_version = "earmark-view"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (the base class's name)
        pass

    @property
    def guard(self) -> Guard:
        return self.server.guard  # type: ignore[attr-defined]

    def _refuse(self, exc: Refused) -> None:
        self.close_connection = True  # an unread body must not be taken for the next request
        self._json({"error": str(exc)}, exc.status)

    def do_GET(self) -> None:  # noqa: N802
        try:
            self.guard.check_host(self.headers)
        except Refused as exc:
            return self._refuse(exc)
        url = urlparse(self.path)
        query = {k: v[-1] for k, v in parse_qs(url.query).items()}
        try:
            if url.path == "/":
                page = self.template.replace(TOKEN_SLOT, self.guard.token.encode())
                self._send(HTTPStatus.OK, page, "text/html; charset=utf-8")
            elif url.path == "/api/summary":
                self._json(self.app.summary())
            elif url.path == "/api/clips":
                self._json(
                    self.app.view().page(
                        domain=query.get("domain", ""),
                        table=query.get("table", ""),
                        status=query.get("status", "all"),
                        page=int(query.get("page", "0") or 0),
                        per_page=int(query.get("per_page", "25") or 25),
                    )
                )
            elif url.path == "/api/plots":
                self._json(version_plots(self.app.cat, self.app.version()))
            elif url.path.startswith("/audio/") and url.path.endswith(".wav"):
                clip_id = unquote(url.path[len("/audio/") : -len(".wav")])
                self._send(HTTPStatus.OK, self.app.view().wav(clip_id), "audio/wav")
            else:
                self._json({"error": f"no such page: {url.path}"}, HTTPStatus.NOT_FOUND)
        except KeyError as exc:
            self._json({"error": f"unknown clip {exc}"}, HTTPStatus.NOT_FOUND)
        except (ValueError, LookupError) as exc:
            self._json({"error": str(exc)}, HTTPStatus.BAD_REQUEST)

    def do_POST(self) -> None:  # noqa: N802
        try:
            self.guard.check_host(self.headers)
            length = self.guard.check_write(self.headers)
        except Refused as exc:
            return self._refuse(exc)
        url = urlparse(self.path)
        raw = self.rfile.read(length) if length else b"{}"  # a body that stops coming times out: closed
        try:
            try:
                body = json.loads(raw or b"{}")
            except json.JSONDecodeError as exc:
                raise ValueError(f"the request body is not JSON: {exc}") from None
            if not isinstance(body, dict):
                raise ValueError("the request body must be a JSON object")
            if url.path == "/api/decisions":
                self._json(self.app.decide(body))
            elif url.path == "/api/publish":
                self._json(self.app.publish())
            else:
                self._json({"error": f"no such action: {url.path}"}, HTTPStatus.NOT_FOUND)
        except (ValueError, LookupError) as exc:
            self._json({"error": str(exc)}, HTTPStatus.BAD_REQUEST)
        except Exception as exc:  # a busy dataset (lease), a catalog error: the page shows the message
            self._json({"error": f"{type(exc).__name__}: {exc}"}, HTTPStatus.CONFLICT)

    def _json(self, obj: Any, status: HTTPStatus = HTTPStatus.OK) -> None:
        self._send(status, json.dumps(obj, default=str).encode(), "application/json")

    def _send(self, status: HTTPStatus, body: bytes, kind: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("X-Frame-Options", "DENY")  # no clickjacking of the review buttons
        self.send_header(
            "Content-Security-Policy",
            "default-src 'self'; style-src 'self' 'unsafe-inline'; "
            "script-src 'self' 'unsafe-inline'; img-src 'self' data:; media-src 'self'; frame-ancestors 'none'",
        )
        self.end_headers()
        try:
            self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):  # the browser dropped it (e.g. a media re-request)
            pass


def _handler(app: ViewApp, idle_timeout_s: float = IDLE_TIMEOUT_S) -> type[BaseHTTPRequestHandler]:
    template = files("earmark.cli.view").joinpath("page.html").read_bytes()
    assert TOKEN_SLOT in template, "page.html lost its token slot"
    # `timeout`: StreamRequestHandler sets it on the connection's socket; a read that waits longer raises
    # TimeoutError, on which BaseHTTPRequestHandler closes the connection
    return type("Handler", (_Handler,), {"app": app, "template": template, "timeout": idle_timeout_s})
