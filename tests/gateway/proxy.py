"""nginx from ``examples/deploy/nginx.conf`` in front of a gateway, on loopback (tests/gateway/test_proxy.py).

The example file runs as shipped but for its two addresses (the upstream ``jev serve``, the port nginx
listens on) and the directives a test sets smaller; pid and error log go to a folder of the test's own.
"""

from __future__ import annotations

import re
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from jev_shared.local import free_port

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "deploy" / "nginx.conf"
NGINX = shutil.which("nginx") or next((p for p in ("/usr/sbin/nginx",) if Path(p).exists()), None)
needs_nginx = pytest.mark.skipif(NGINX is None, reason="nginx is not installed (apt-get install nginx; .ci/run "
                                                       "installs it): the reverse-proxy bounds are not tested")


def config_text(upstreams: list[str], port: int, **directives: str) -> str:
    """The example with ``upstreams`` ("host:port" each) behind nginx on ``port``, and ``directives`` replaced."""
    text = EXAMPLE.read_text()
    text = text.replace("server 127.0.0.1:8000;", " ".join(f"server {u};" for u in upstreams))
    text = text.replace("listen 127.0.0.1:8080;", f"listen 127.0.0.1:{port};")
    for name, value in directives.items():
        text, n = re.subn(rf"^(\s*){name} [^;]+;", rf"\g<1>{name} {value};", text, flags=re.M)
        assert n == 1, f"{name} is not set once in {EXAMPLE}"
    return text


@contextmanager
def nginx(*upstream_urls: str, **directives: str) -> Iterator[str]:
    """nginx in front of ``upstream_urls`` ("http://127.0.0.1:PORT", balanced); yields nginx's own base URL."""
    assert NGINX is not None
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="jev-nginx-") as tmp:
        (Path(tmp) / "logs").mkdir()
        conf = Path(tmp) / "nginx.conf"
        conf.write_text(config_text([u.removeprefix("http://") for u in upstream_urls], port, **directives))
        proc = subprocess.Popen([NGINX, "-p", tmp, "-c", str(conf), "-e", f"{tmp}/logs/error.log",
                                 "-g", f"daemon off; pid {tmp}/nginx.pid;"], stderr=subprocess.PIPE, text=True)
        try:
            deadline = time.monotonic() + 15
            while True:
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=1).close()
                    break
                except OSError as exc:
                    if proc.poll() is not None or time.monotonic() > deadline:
                        raise RuntimeError(f"nginx did not start: {proc.stderr.read() if proc.stderr else ''}") from exc
                    time.sleep(0.05)
            yield f"http://127.0.0.1:{port}"
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
