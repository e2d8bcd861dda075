"""The dashboard's web server: one page, its vendored scripts, and a server-sent event stream.

Standard library only (``http.server`` with a thread per request). Every route but the
static scripts wants the run's random token (``?token=...``, compared in constant time); it
binds to localhost unless told otherwise. Routes: ``/`` the page, ``/static/NAME`` the
vendored scripts and styles, ``/events`` the stream (the whole state, then every delta:
:class:`~cosim.dashboard.board.Board`), ``/state.json`` the state now, ``POST /select``
(``{"signals": [...]}``) the signals to record. A request the server cannot use is answered
4xx and changes nothing.
"""

from __future__ import annotations

import hmac
import json
import queue
import secrets
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

from cosim.errors import ModelError

__all__ = ["DashboardServer", "STATIC", "parse_address"]

STATIC = Path(__file__).with_name("static")
_TYPES = {".js": "text/javascript; charset=utf-8", ".css": "text/css; charset=utf-8",
          ".txt": "text/plain; charset=utf-8"}
#: Largest request body read (a signal selection).
MAX_BODY = 64 * 1024
#: Seconds between keep-alive comments on an idle event stream.
KEEPALIVE = 10.0


def parse_address(text: str | None) -> tuple[str, int]:
    """``"HOST:PORT"``, ``":PORT"``, ``"PORT"`` or None (``127.0.0.1``, a free port)."""
    if text is None or text in ("", True):
        return "127.0.0.1", 0
    host, sep, port = str(text).rpartition(":")
    if not sep:
        host, port = "", port
    host = host.strip("[]") or "127.0.0.1"
    try:
        number = int(port)
    except ValueError:
        number = -1
    if not 0 <= number <= 65535:
        raise ModelError(f"dashboard address {text!r}: write HOST:PORT (e.g. 127.0.0.1:8050; "
                         "port 0 picks a free one)")
    return host, number


class DashboardServer:
    """Serve ``page`` and ``board`` on ``address`` from a daemon thread.

    Parameters
    ----------
    board : Board
    page : callable
        ``page(token) -> str``: the HTML of the page.
    address : str, optional
        ``HOST:PORT`` (default ``127.0.0.1`` and a free port).
    on_select : callable, optional
        ``on_select(labels) -> unknown labels``: the page chose signals to record.

    Attributes
    ----------
    url : str
        The page's address with its token: what to open.
    """

    def __init__(self, board, page, address: str | None = None, on_select=None):
        self.board = board
        self.page = page
        self.on_select = on_select
        self.token = secrets.token_urlsafe(16)
        host, port = parse_address(address)
        try:
            self.httpd = ThreadingHTTPServer((host, port), _handler(self))
        except OSError as err:
            raise ModelError(f"dashboard: cannot serve on {host}:{port} "
                             f"({err.strerror or err}); choose another address, or port 0 "
                             "for a free one") from err
        self.httpd.daemon_threads = True
        shown = self.httpd.server_address[0]
        shown = f"[{shown}]" if ":" in shown else shown
        self.url = f"http://{shown}:{self.httpd.server_address[1]}/?token={self.token}"
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self.httpd.serve_forever, name="cosim-dashboard"
                                        "-http", daemon=True)
        self._thread.start()

    def authorized(self, query: dict) -> bool:
        given = query.get("token", [""])[0]
        return hmac.compare_digest(given.encode(), self.token.encode())

    @property
    def closed(self) -> bool:
        return self._closed.is_set()

    def close(self) -> None:
        """End the event streams and stop serving."""
        if self._closed.is_set():
            return
        self._closed.set()
        self.board.close()
        self.httpd.shutdown()
        self.httpd.server_close()
        self._thread.join(timeout=5)


def _handler(server: DashboardServer):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        server_version = "cosim-dashboard"

        def log_message(self, format, *args):     # noqa: A002 - quiet: no access log
            pass

        def _send(self, status: int, body: bytes, ctype: str, cache: bool = False) -> None:
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Cache-Control", "max-age=3600" if cache else "no-store")
            self.send_header("X-Content-Type-Options", "nosniff")
            self.end_headers()
            self.wfile.write(body)

        def _error(self, status: int, message: str) -> None:
            self._send(status, (message + "\n").encode(), "text/plain; charset=utf-8")

        def do_GET(self):                      # noqa: N802 - http.server's name
            url = urlsplit(self.path)
            query = parse_qs(url.query)
            if url.path == "/favicon.ico":
                return self._send(204, b"", "image/x-icon", cache=True)
            if url.path.startswith("/static/"):
                name = url.path[len("/static/"):]
                path = STATIC / name
                if "/" in name or name.startswith(".") or not path.is_file() \
                        or path.suffix not in _TYPES:
                    return self._error(404, "no such file")
                return self._send(200, path.read_bytes(), _TYPES[path.suffix], cache=True)
            if url.path not in ("/", "/index.html", "/events", "/state.json"):
                return self._error(404, "no such page")
            if not server.authorized(query):
                return self._error(403, "this dashboard wants the token printed with its "
                                   "address (?token=...)")
            if url.path == "/events":
                return self._stream()
            if url.path == "/state.json":
                return self._send(200, server.board.snapshot().encode(), "application/json")
            return self._send(200, server.page(server.token).encode(),
                              "text/html; charset=utf-8")

        def do_POST(self):                     # noqa: N802
            url = urlsplit(self.path)
            if url.path != "/select":
                return self._error(404, "no such page")
            if not server.authorized(parse_qs(url.query)):
                return self._error(403, "wrong or missing token")
            try:
                length = int(self.headers.get("Content-Length", ""))
            except ValueError:
                return self._error(411, "Content-Length required")
            if not 0 <= length <= MAX_BODY:
                return self._error(413, f"a selection is at most {MAX_BODY} bytes")
            try:
                body = json.loads(self.rfile.read(length) or b"null")
                labels = body["signals"]
                if not (isinstance(labels, list) and all(isinstance(x, str) for x in labels)):
                    raise TypeError
            except (ValueError, TypeError, KeyError):
                return self._error(400, 'send {"signals": ["unit.port", ...]}')
            if server.on_select is None:
                return self._error(409, "nothing to select here (not a live run)")
            unknown = server.on_select(labels[:64])
            return self._send(200, json.dumps({"unknown": unknown}).encode(),
                              "application/json")

        def _stream(self) -> None:
            first, q = server.board.subscribe()
            try:
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Cache-Control", "no-store")
                self.send_header("Connection", "close")
                self.end_headers()
                self.wfile.write(f"event: state\ndata: {first}\n\n".encode())
                self.wfile.flush()
                while not server.closed:
                    try:
                        text = q.get(timeout=KEEPALIVE)
                    except queue.Empty:
                        self.wfile.write(b": keep-alive\n\n")
                        self.wfile.flush()
                        continue
                    if text is None:
                        break
                    self.wfile.write(f"event: delta\ndata: {text}\n\n".encode())
                    self.wfile.flush()
            except (BrokenPipeError, ConnectionResetError, TimeoutError):
                pass                            # the page went away
            finally:
                server.board.unsubscribe(q)
                self.close_connection = True

    return Handler
