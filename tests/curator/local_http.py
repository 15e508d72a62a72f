"""A real HTTP server in the test process (127.0.0.1, a free port, a daemon thread) for tests that
talk to a caption endpoint: subclasses build their handler and call :meth:`serve`;
:class:`ChatServer` is the OpenAI chat-completions one (vLLM, SGLang, Ollama)."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class LocalServer:
    url: str

    def serve(self, handler: type[BaseHTTPRequestHandler]) -> None:
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


class ChatServer(LocalServer):
    """``POST /v1/chat/completions`` in a thread. ``behave(n, body) -> (status, caption or error
    text, delay_s)`` decides each answer (``n``: 0-based request number); every request body and
    header set is kept, and the most requests ever in flight at once is counted."""

    def __init__(self, behave):
        self.behave, self.bodies, self.headers = behave, [], []
        self.lock, self.inflight, self.peak = threading.Lock(), 0, 0
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # quiet
                pass

            def do_POST(self):  # noqa: N802 - http.server's name
                with server.lock:
                    server.inflight += 1
                    server.peak = max(server.peak, server.inflight)
                    n = len(server.bodies)
                    body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                    server.bodies.append(body)
                    server.headers.append(dict(self.headers))
                counted = True
                try:
                    if self.path != "/v1/chat/completions":
                        status, text, delay = 404, f"no route {self.path}", 0.0
                    else:
                        status, text, delay = server.behave(n, body)
                    time.sleep(delay)
                    if status == 200:
                        payload = {"id": f"c{n}", "object": "chat.completion", "model": body["model"],
                                   "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                                                "finish_reason": "stop"}]}
                    else:
                        payload = {"error": {"message": text, "code": status}}
                    data = json.dumps(payload).encode()
                    with server.lock:  # done before the answer leaves: the client may send its next request
                        server.inflight -= 1  # the moment it reads this one, before a finally here would run
                    counted = False
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):  # the client gave up (timeout)
                    pass
                finally:
                    if counted:
                        with server.lock:
                            server.inflight -= 1

        self.serve(Handler)
