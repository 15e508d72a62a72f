"""A captioner that asks an OpenAI-compatible chat-completions server (vLLM, SGLang, Ollama, ...).

Each clip is one ``POST {url}/v1/chat/completions`` whose user message holds the prompt and the
clip's sampled frames as ``image_url`` parts (``data:image/jpeg;base64,...``). Up to
``max_concurrency`` requests are in flight at once (per captioner, so per caption worker); a request
that times out, cannot connect or gets a 5xx / 408 / 429 answer is tried again after an exponential
backoff, up to ``retries`` more times. What still fails comes back as a :class:`CaptionEndpointError`
carrying the failure's cause and kind (see :mod:`vfm_curator.failures`) instead of raising, so one
bad clip never stops the others. Only the standard library is used (``http.client``), and only the
configured host is contacted (no proxy from the environment is applied).

The API key is read from the environment variable named by ``api_key_env``; the key itself is never
an option, so it cannot end up in a config file, a failure record or a log line.
"""

from __future__ import annotations

import base64
import http.client
import io
import json
import os
import random
import socket
import threading
import time
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import Any, Iterable
from urllib.parse import urlsplit

import numpy as np
from vfm_plugins.spacing import evenly_spaced

from vfm_curator.errors import InputError

DEFAULT_PROMPT = (
    "These are frames from one short video clip, in order. Describe the clip in one or two sentences: "
    "the subjects, what happens, the setting and the camera motion. Answer with the description only."
)
#: HTTP statuses worth asking again (the server is busy, restarting or overloaded).
RETRY_STATUSES = frozenset({408, 429, 500, 502, 503, 504})


class CaptionEndpointError(InputError):
    """A clip's caption request failed for good. ``cause``: ``machine`` (the server did not answer,
    timed out or kept failing: a later run retries it) or ``config`` (the server refused the request:
    wrong URL, model name, key or an option it does not support)."""

    def __init__(self, message: str, *, cause: str = "machine", kind: str = "caption-endpoint", status: int | None = None) -> None:
        super().__init__(message)
        self.cause, self.kind, self.status = cause, kind, status


class _Retryable(Exception):
    """One attempt failed in a way another attempt may not."""

    def __init__(self, message: str, kind: str = "caption-endpoint", retry_after: float | None = None) -> None:
        super().__init__(message)
        self.kind, self.retry_after = kind, retry_after


def chat_completions_url(url: str) -> str:
    """``http://host:8000``, ``.../v1`` or ``.../v1/chat/completions`` -> the chat-completions URL."""
    parts = urlsplit(str(url or ""))
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"endpoint captioner: url {url!r} is not an http(s) URL; accepted: e.g. http://localhost:8000 "
                         "(the server's base URL; /v1/chat/completions is added)")
    if parts.query or parts.fragment:
        raise ValueError(f"endpoint captioner: url {url!r} has a query or fragment; accepted: a base URL such as http://localhost:8000")
    path = parts.path.rstrip("/")
    if not path.endswith("/chat/completions"):
        path += "/chat/completions" if path.endswith("/v1") else "/v1/chat/completions"
    return f"{parts.scheme}://{parts.netloc}{path}"


def jpeg_data_url(frame: np.ndarray, quality: int = 90) -> str:
    """An (H, W, 3) uint8 frame as a ``data:image/jpeg;base64,...`` URL."""
    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(np.ascontiguousarray(frame, dtype=np.uint8)).save(buf, format="JPEG", quality=int(quality))
    return "data:image/jpeg;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def pick_frames(frames: list[np.ndarray], n: int) -> list[np.ndarray]:
    """``n`` frames spread evenly over ``frames`` (all of them when ``n`` is 0 or >= their count);
    ``n = 1`` is the middle one."""
    if n <= 0 or n >= len(frames):
        return list(frames)
    if n == 1:
        return [frames[len(frames) // 2]]
    return [frames[i] for i in evenly_spaced(len(frames), n)]


class EndpointCaptioner:
    """``EndpointCaptioner(url, model, prompt=DEFAULT_PROMPT, api_key_env="", frames=3, ...)``.

    - ``url``: the server's base URL (``http://localhost:8000`` for vLLM / SGLang,
      ``http://localhost:11434`` for Ollama); ``/v1/chat/completions`` is added.
    - ``model``: the model name the server serves (vLLM's ``--served-model-name``, Ollama's tag).
    - ``frames``: how many of the clip's sampled frames to send (0: all; 1: the middle one).
    - ``max_tokens``, ``temperature``: of the answer; ``request_options``: more body fields
      (``top_p``, ...), which may not replace ``model`` or ``messages``.
    - ``timeout_s``: seconds to wait for the server (connect, and each read); ``retries``: more
      attempts after a failed one; ``backoff_s``: the first wait, doubled each time (at most 60 s).
    - ``max_concurrency``: requests in flight at once from this captioner.
    - ``api_key_env``: the environment variable that holds the key sent as ``Authorization: Bearer``.
    """

    def __init__(self, url: str = "", model: str = "", prompt: str = DEFAULT_PROMPT, api_key_env: str = "",
                 frames: int = 3, max_tokens: int = 160, temperature: float = 0.0, timeout_s: float = 120.0,
                 retries: int = 3, backoff_s: float = 1.0, max_concurrency: int = 8, jpeg_quality: int = 90,
                 system_prompt: str = "", request_options: dict[str, Any] | None = None,
                 api_key: Any = None) -> None:
        if api_key is not None:
            raise ValueError("endpoint captioner: do not put the API key in the config; put it in an environment "
                             "variable and name that variable with api_key_env (e.g. api_key_env = \"VLLM_API_KEY\")")
        self.url = chat_completions_url(url)
        if not isinstance(model, str) or not model.strip():
            raise ValueError("endpoint captioner: model is required: the name the server serves "
                             "(vLLM's --served-model-name, an Ollama tag such as qwen2.5vl:7b)")
        if not isinstance(prompt, str) or not prompt.strip():
            raise ValueError("endpoint captioner: prompt must be non-empty text")
        _check_int("frames", frames, 0)
        _check_int("max_tokens", max_tokens, 1)
        _check_int("retries", retries, 0)
        _check_int("max_concurrency", max_concurrency, 1)
        _check_int("jpeg_quality", jpeg_quality, 1, 100)
        for key, value in (("timeout_s", timeout_s), ("backoff_s", backoff_s), ("temperature", temperature)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0 or (key == "timeout_s" and value == 0):
                raise ValueError(f"endpoint captioner: {key} = {value!r}; accepted: a number {'> 0' if key == 'timeout_s' else '>= 0'}")
        request_options = dict(request_options or {})
        clash = sorted(set(request_options) & {"model", "messages", "stream"})
        if clash:
            raise ValueError(f"endpoint captioner: request_options may not set {', '.join(clash)}; use the options of the same name")
        self.key = ""
        if api_key_env:
            if not isinstance(api_key_env, str) or not api_key_env.replace("_", "").isalnum():
                raise ValueError(f"endpoint captioner: api_key_env = {api_key_env!r}; accepted: the NAME of an environment variable")
            self.key = os.environ.get(api_key_env, "")
            if not self.key:
                raise ValueError(f"endpoint captioner: the environment variable {api_key_env} (api_key_env) is not set or empty")
        self.model, self.prompt, self.system_prompt = model.strip(), prompt, str(system_prompt or "")
        self.frames, self.jpeg_quality = int(frames), int(jpeg_quality)
        self.max_tokens, self.temperature = int(max_tokens), float(temperature)
        self.timeout_s, self.retries, self.backoff_s = float(timeout_s), int(retries), float(backoff_s)
        self.max_concurrency, self.request_options = int(max_concurrency), request_options
        #: What the caption stage records with every caption this captioner makes.
        self.provenance = {"model": self.model, "prompt": self.prompt}
        self._pool: ThreadPoolExecutor | None = None
        self._pool_lock = threading.Lock()

    @classmethod
    def check_options(cls, **options: Any) -> None:
        """Raise ``ValueError`` naming a bad option (the caption stage calls this in the driver):
        building one contacts nothing and starts no thread."""
        cls(**options)

    # -- the captioner interface -------------------------------------------------------------

    def caption(self, frames: list[np.ndarray]) -> str:
        """One clip's caption; raises :class:`CaptionEndpointError` when it fails for good."""
        result = self.caption_many([frames])[0]
        if isinstance(result, BaseException):
            raise result
        return result

    def caption_many(self, clips: Iterable[list[np.ndarray]]) -> list[str | Exception]:
        """Captions of several clips, up to ``max_concurrency`` requests at a time; a clip that
        failed for good gets its exception in its place, a :class:`CaptionEndpointError` for a
        request that failed (nothing is raised).
        ``clips`` is read lazily, so no more than ``max_concurrency`` clips' frames are held at once."""
        pool = self._executor()
        results: dict[int, str | Exception] = {}
        pending: dict[Future, int] = {}

        def collect(done) -> None:
            for future in done:
                results[pending.pop(future)] = future.result()

        n = 0
        for n, frames in enumerate(clips, start=1):
            if len(pending) >= self.max_concurrency:
                collect(wait(pending, return_when=FIRST_COMPLETED).done)
            pending[pool.submit(self._caption_or_error, frames)] = n - 1
        collect(wait(pending).done)
        return [results[i] for i in range(n)]

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None

    # -- one request -------------------------------------------------------------------------

    def _executor(self) -> ThreadPoolExecutor:
        with self._pool_lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(max_workers=self.max_concurrency, thread_name_prefix="caption-endpoint")
            return self._pool

    def _caption_or_error(self, frames: list[np.ndarray]) -> str | Exception:
        try:
            return self._request_with_retries(self.body(frames))
        except Exception as exc:  # noqa: BLE001 - one clip's error (a frame PIL cannot encode...) stays that clip's
            return exc

    def body(self, frames: list[np.ndarray]) -> dict[str, Any]:
        """The JSON body of one clip's request."""
        if not frames:
            raise CaptionEndpointError("the clip has no sampled frames to send", cause="input", kind="caption-endpoint")
        content: list[dict[str, Any]] = [{"type": "text", "text": self.prompt}]
        content += [{"type": "image_url", "image_url": {"url": jpeg_data_url(f, self.jpeg_quality)}}
                    for f in pick_frames(frames, self.frames)]
        messages = ([{"role": "system", "content": self.system_prompt}] if self.system_prompt else []) + [
            {"role": "user", "content": content}]
        return {**self.request_options, "model": self.model, "messages": messages, "max_tokens": self.max_tokens,
                "temperature": self.temperature, "stream": False}

    def _request_with_retries(self, body: dict[str, Any]) -> str:
        payload = json.dumps(body).encode("utf-8")
        attempts = self.retries + 1
        last: _Retryable | None = None
        for attempt in range(attempts):
            if attempt:
                wait = min(self.backoff_s * 2 ** (attempt - 1), 60.0) * random.uniform(1.0, 1.25)
                if last is not None and last.retry_after is not None:
                    wait = max(wait, min(last.retry_after, 60.0))
                time.sleep(wait)
            try:
                return self._post(payload)
            except _Retryable as exc:
                last = exc
        assert last is not None
        tries = f"{attempts} attempt{'s' if attempts != 1 else ''}"
        raise CaptionEndpointError(f"caption endpoint {self.url} failed after {tries}: {last}", cause="machine", kind=last.kind)

    def _post(self, payload: bytes) -> str:
        parts = urlsplit(self.url)
        conn_cls = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
        conn = conn_cls(parts.hostname, parts.port, timeout=self.timeout_s)
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self.key:
            headers["Authorization"] = f"Bearer {self.key}"
        try:
            conn.request("POST", parts.path, body=payload, headers=headers)
            response = conn.getresponse()
            status, raw = response.status, response.read()
            retry_after = _seconds(response.getheader("Retry-After"))
        except (socket.timeout, TimeoutError) as exc:
            raise _Retryable(f"no answer within timeout_s = {self.timeout_s:g} s", kind="timeout") from exc
        except (OSError, http.client.HTTPException) as exc:  # refused, reset, closed early, bad status line
            raise _Retryable(f"{type(exc).__name__}: {exc}") from exc
        finally:
            conn.close()
        if status in RETRY_STATUSES:
            raise _Retryable(f"HTTP {status}: {_excerpt(raw)}", retry_after=retry_after)
        if status >= 400:
            cause_hint = {401: " (check the key in api_key_env)", 403: " (check the key in api_key_env)",
                          404: " (check url and model)"}.get(status, "")
            raise CaptionEndpointError(f"caption endpoint {self.url} refused the request: HTTP {status}{cause_hint}: {_excerpt(raw)}",
                                       cause="config", status=status)
        try:
            answer = json.loads(raw)
            message = answer["choices"][0]["message"]
        except (ValueError, KeyError, IndexError, TypeError) as exc:
            raise _Retryable(f"HTTP {status} without a chat completion in its body: {_excerpt(raw)}") from exc
        return _text(message.get("content") if isinstance(message, dict) else None)


def _text(content: Any) -> str:
    """A message's text: a string, or the text parts of a list of content parts."""
    if isinstance(content, list):
        content = " ".join(p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text")
    return content.strip() if isinstance(content, str) else ""


def _excerpt(raw: bytes, limit: int = 300) -> str:
    text = raw.decode("utf-8", "replace").strip().replace("\n", " ")
    return text if len(text) <= limit else text[:limit] + "..."


def _seconds(value: str | None) -> float | None:
    try:
        return max(0.0, float(value)) if value is not None else None
    except ValueError:
        return None  # an HTTP date: fall back to the backoff


def _check_int(key: str, value: Any, lo: int, hi: int | None = None) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < lo or (hi is not None and value > hi):
        accepted = f"an integer >= {lo}" if hi is None else f"an integer in [{lo}, {hi}]"
        raise ValueError(f"endpoint captioner: {key} = {value!r}; accepted: {accepted}")
