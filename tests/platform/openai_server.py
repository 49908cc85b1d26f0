"""A small server speaking the OpenAI chat-completions protocol on loopback, for LiteLLMModel tests."""

from __future__ import annotations

import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

_ERRORS: dict[int, dict[str, str]] = {
    400: {"message": "Invalid value for 'temperature'", "type": "invalid_request_error"},
    401: {"message": "Incorrect API key provided: wrong-key", "type": "invalid_request_error"},
    404: {"message": "The model `no-such-model` does not exist", "type": "invalid_request_error"},
    429: {"message": "rate limited", "type": "rate_limit_error"},
    500: {"message": "the server had an error", "type": "server_error"},
    503: {"message": "the engine is overloaded", "type": "server_error"},
}


class ChatServer:
    """Answers each request with the next scripted reply; the first `fail_first` requests get the
    error `fail_status` (429 by default), as a provider sends it."""

    def __init__(self, replies: list[str], fail_first: int = 0, fail_status: int = 429) -> None:
        self.replies = list(replies)
        self.fail_first = fail_first
        self.fail_status = fail_status
        self.requests: list[dict[str, Any]] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                server.requests.append(body)
                if len(server.requests) <= server.fail_first:
                    self._send(server.fail_status, {"error": _ERRORS[server.fail_status]})
                    return
                text = server.replies.pop(0)
                for stop in body.get("stop") or []:
                    text = text.split(stop)[0]
                usage = {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18}
                if body.get("stream"):
                    self._stream(text, usage, body["model"])
                else:
                    self._send(
                        200,
                        {
                            "id": "c1",
                            "object": "chat.completion",
                            "created": 0,
                            "model": body["model"],
                            "choices": [
                                {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": text}}
                            ],
                            "usage": usage,
                        },
                    )

            def _send(self, status: int, payload: dict[str, Any]) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _stream(self, text: str, usage: dict[str, int], model: str) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.end_headers()
                words = text.split(" ")
                chunks = [
                    {
                        "choices": [
                            {
                                "index": 0,
                                "delta": {"role": "assistant", "content": w + (" " if i < len(words) - 1 else "")},
                            }
                        ]
                    }
                    for i, w in enumerate(words)
                ]
                chunks.append({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
                chunks.append({"choices": [], "usage": usage})
                for chunk in chunks:
                    chunk.update({"id": "c1", "object": "chat.completion.chunk", "created": 0, "model": model})
                    self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
                self.wfile.write(b"data: [DONE]\n\n")

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> ChatServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def closed_port() -> int:
    """A loopback port nothing listens on: bound, then closed, so a connection to it is refused at once."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])
