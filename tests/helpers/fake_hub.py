"""A Hugging Face Hub on loopback, for HF_ENDPOINT: the two routes ``hf_hub_download`` uses for one file.

``HEAD /{repo}/resolve/{revision}/{filename}`` answers the file's metadata as the Hub does (``X-Repo-Commit``,
``X-Linked-Etag``: the LFS SHA-256, ``X-Linked-Size``) and ``GET`` on the same path sends the bytes (a ``Range``
resumes). Anything else is a 404 with the Hub's error code. Every request is logged as ``(method, path)``.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

COMMIT = "0123456789abcdef0123456789abcdef01234567"


@dataclass
class Served:
    """One file the fake Hub serves; ``stated`` is the SHA-256 it claims (the real one unless a test lies)."""

    path: Path
    stated: str = ""

    def __post_init__(self) -> None:
        self.stated = self.stated or sha256_of(self.path)


@dataclass
class FakeHub:
    url: str
    files: dict[tuple[str, str, str], Served]
    requests: list[tuple[str, str]] = field(default_factory=list)

    def serve(self, repo: str, filename: str, path: Path, *, revision: str = COMMIT, stated: str = "") -> Served:
        self.files[(repo, revision, filename)] = served = Served(path, stated)
        return served

    def count(self, method: str) -> int:
        return sum(1 for m, _ in self.requests if m == method)


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def _handler(hub: FakeHub) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:  # quiet: the test reads hub.requests
            pass

        def _find(self) -> Served | None:
            parts = self.path.split("?")[0].strip("/").split("/")
            if len(parts) < 5 or parts[2] != "resolve":
                return None
            return hub.files.get((f"{parts[0]}/{parts[1]}", parts[3], "/".join(parts[4:])))

        def _answer(self, body: bool) -> None:
            hub.requests.append((self.command, self.path))
            served = self._find()
            if served is None:
                self.send_response(404)
                self.send_header("X-Error-Code", "EntryNotFound")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            size = served.path.stat().st_size
            start = 0
            ranged = self.headers.get("Range", "")
            if body and ranged.startswith("bytes="):
                start = int(ranged[6:].split("-")[0] or 0)
            self.send_response(206 if start else 200)
            self.send_header("X-Repo-Commit", COMMIT)
            self.send_header("X-Linked-Etag", f'"{served.stated}"')
            self.send_header("X-Linked-Size", str(size))
            self.send_header("ETag", f'"{served.stated}"')
            self.send_header("Accept-Ranges", "bytes")
            self.send_header("Content-Length", str(size - start))
            if start:
                self.send_header("Content-Range", f"bytes {start}-{size - 1}/{size}")
            self.end_headers()
            if body:
                with open(served.path, "rb") as f:
                    f.seek(start)
                    while chunk := f.read(1 << 20):
                        self.wfile.write(chunk)

        def do_HEAD(self) -> None:  # noqa: N802 (http.server's names)
            self._answer(body=False)

        def do_GET(self) -> None:  # noqa: N802
            self._answer(body=True)

    return Handler


@contextmanager
def fake_hub() -> Iterator[FakeHub]:
    """A started fake Hub on a free loopback port; stopped on exit."""
    hub = FakeHub("", {})
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(hub))
    server.daemon_threads = True
    hub.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield hub
    finally:
        server.shutdown()
        server.server_close()
