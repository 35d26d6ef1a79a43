"""A Prometheus-compatible store that fails in every way a real one does, played by a test HTTP server
(``http.server``): each first path segment is one answer."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler

SECRET = "s3cr3t-token-do-not-print"  # the credential the store wants; nothing Headroom writes may hold it
HANG = threading.Event()  # set at a test module's end: a /hang request returns


class StoreHandler(BaseHTTPRequestHandler):
    """Answers by the first path segment: /ok, /hang, /401, /403, /500, /429, /html, /envelope."""

    calls: dict[str, int] = {}

    def log_message(self, *args: object) -> None:  # quiet
        pass

    def do_GET(self) -> None:
        mode = self.path.split("/")[1]
        StoreHandler.calls[mode] = StoreHandler.calls.get(mode, 0) + 1
        if mode == "hang":
            HANG.wait(30)
            return
        if mode == "429" and StoreHandler.calls[mode] == 1:
            self._send(429, b'{"status":"error","error":"slow down"}', {"Retry-After": "1"})
            return
        if mode in ("401", "403", "500"):
            self._send(int(mode), b'{"status":"error","errorType":"auth","error":"no"}')
            return
        if mode == "html":
            self._send(200, b"<html><body>Grafana login</body></html>", {"Content-Type": "text/html"})
            return
        if mode == "envelope":
            self._send(422, json.dumps({"status": "error", "errorType": "execution",
                                        "error": "query processing would load too many samples"}).encode())
            return
        assert self.headers.get("Authorization") == f"Bearer {SECRET}"
        if self.path.split("?")[0].endswith("/api/v1/label/__name__/values"):
            self._send(200, json.dumps({"status": "success", "data": ["vllm:num_requests_running", "up"]}).encode())
            return
        result = [{"metric": {"__name__": "vllm:num_requests_running", "model_name": "m", "engine": "0"},
                   "values": [[1795000000 + 15 * i, str(i % 4)] for i in range(4)]}]
        self._send(200, json.dumps({"status": "success", "data": {"resultType": "matrix", "result": result}}).encode())

    def _send(self, code: int, body: bytes, headers: dict[str, str] | None = None) -> None:
        self.send_response(code)
        for k, v in {"Content-Type": "application/json", **(headers or {})}.items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
