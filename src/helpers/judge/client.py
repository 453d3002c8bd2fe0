"""The remote LLM judge: a client of any OpenAI-compatible ``POST {base_url}/chat/completions`` endpoint (OpenAI,
vLLM, Ollama, llama.cpp server, ...) with the standard library only.  Prompts, reply parsing and the cache are
:mod:`helpers.judge.rubric`'s (``docs/methods.md#gpt-eval``).  Robustness:

* HTTP retries with exponential backoff on timeouts, connection errors, 408/429 (``Retry-After`` honoured) and 5xx,
  and on 200 replies that are not valid chat-completions JSON; 401/403/404 abort the run with a clear message.
* Grade replies are parsed from ``"Grammar: 8/10"`` style text, JSON objects or a bare number array; a reply with a
  missing or out-of-range value is *re-asked* (the re-ask counts against the same ``max_retries`` budget).
* Every request is bounded: ``timeout`` is a total deadline (connect, headers and every read of the body together,
  not per socket read: a server dripping a byte at a time is cut off at it), a server's ``Retry-After`` is honoured
  up to ``retry_after_max`` seconds, and a reply longer than ``max_reply_bytes`` is refused (:class:`JudgeError`).
  Notebook 05b sets them (``judge_timeout``, ``judge_retry_after_max``, ``judge_max_reply_bytes``).
* At most ``max_concurrency`` requests are in flight.
* Each graded item is cached on disk by the cache that :mod:`helpers.judge.rubric` gives every backend; failed items are
  not cached.

The API key is read from the environment variable named by ``api_key_env`` at request time.  It is never stored in
the config object, its repr, the cache, log records or error messages (anything echoed back by a server is scrubbed).
"""
from __future__ import annotations

import dataclasses
import email.utils
import http.client
import json
import logging
import os
import random
import re
import socket
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping

from helpers.core.secrets import redact, secret_name_problem, url_credential_problem
from helpers.judge.rubric import (
    GradeParseError,
    JudgeConfigError,
    JudgeError,
    JudgeUnreachable,
    Protocol,
    _CachedJudge,
    parse_grades,
    protocol_version,
)

log = logging.getLogger(__name__)


# ----------------------------------------------------------------------------- configuration
@dataclass(frozen=True)
class JudgeConfig:
    """Where and how to ask the judge.  Holds the *name* of the key's environment variable, never the key.

    ``base_url`` is the API root (``https://api.openai.com/v1``, ``http://localhost:11434/v1`` for Ollama,
    ``http://localhost:8000/v1`` for vLLM / llama.cpp); ``/chat/completions`` is appended unless already present.
    ``backoff_base``/``backoff_max`` (seconds) shape the exponential backoff ``base * 2**attempt`` (capped);
    ``retry_after_max`` caps how long a server-sent ``Retry-After`` is honoured (seconds); ``timeout`` is the total
    deadline of one request (seconds: connecting, sending and reading the whole reply); ``max_reply_bytes`` the
    longest reply body read.
    """

    base_url: str
    model: str
    api_key_env: str = "OPENAI_API_KEY"
    temperature: float = 0.0
    max_concurrency: int = 4
    max_retries: int = 5
    timeout: float = 60.0
    cache_dir: Path | None = None
    max_tokens: int | None = 512
    two_turn: bool = True
    backoff_base: float = 1.0
    backoff_max: float = 60.0
    retry_after_max: float = 30.0
    max_reply_bytes: int = 1_000_000
    max_connection_failures: int = 3

    def __post_init__(self) -> None:
        if not isinstance(self.base_url, str) or not re.match(r"^https?://[^/\s]+", self.base_url):
            raise ValueError(f"judge base_url must be an http(s) URL such as http://localhost:8000/v1, got "
                             f"{redact(self.base_url)!r}")
        if problem := url_credential_problem("base_url", self.base_url, "judge "):
            raise ValueError(problem)  # the credential is never repeated
        if not isinstance(self.model, str) or not self.model.strip():
            raise ValueError("judge model must be a non-empty string (the model name the endpoint serves)")
        if not isinstance(self.api_key_env, str) or secret_name_problem("api_key_env", self.api_key_env) \
                or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", self.api_key_env):
            n = len(self.api_key_env) if isinstance(self.api_key_env, str) else 0
            raise ValueError(  # the value is never repeated: it may be the key itself
                f"api_key_env must be the NAME of an environment variable (e.g. OPENAI_API_KEY), got a value of {n} "
                "characters (not shown); never put the key itself in parameters"
            )
        if int(self.max_concurrency) < 1:
            raise ValueError(f"max_concurrency must be >= 1, got {self.max_concurrency}")
        if int(self.max_retries) < 0:
            raise ValueError(f"max_retries must be >= 0, got {self.max_retries}")
        if int(self.max_connection_failures) < 1:
            raise ValueError(f"max_connection_failures must be >= 1, got {self.max_connection_failures}")
        if not float(self.timeout) > 0:
            raise ValueError(f"timeout must be > 0 seconds, got {self.timeout}")
        if not float(self.retry_after_max) >= 0:
            raise ValueError(f"retry_after_max must be >= 0 seconds, got {self.retry_after_max}")
        if int(self.max_reply_bytes) < 1:
            raise ValueError(f"max_reply_bytes must be >= 1, got {self.max_reply_bytes}")
        if not 0.0 <= float(self.temperature) <= 2.0:
            raise ValueError(f"temperature must be in [0, 2], got {self.temperature}")
        if self.cache_dir is not None:
            object.__setattr__(self, "cache_dir", Path(self.cache_dir))

    # -- constructors --------------------------------------------------------------------------------------------
    @classmethod
    def from_env(cls, cache_dir: str | os.PathLike | None = None, **overrides: Any) -> "JudgeConfig | None":
        """Config from ``STORYBENCH_JUDGE_BASE_URL`` (or ``OPENAI_BASE_URL``), ``STORYBENCH_JUDGE_MODEL`` and
        optionally ``STORYBENCH_JUDGE_API_KEY_ENV``; ``None`` (judge disabled) when no URL or model is set."""
        base_url = overrides.pop("base_url", None) or os.environ.get("STORYBENCH_JUDGE_BASE_URL") or os.environ.get("OPENAI_BASE_URL")
        model = overrides.pop("model", None) or os.environ.get("STORYBENCH_JUDGE_MODEL")
        if not base_url or not model:
            return None
        if "api_key_env" not in overrides and os.environ.get("STORYBENCH_JUDGE_API_KEY_ENV"):
            overrides["api_key_env"] = os.environ["STORYBENCH_JUDGE_API_KEY_ENV"]
        return cls(base_url=base_url, model=model, cache_dir=Path(cache_dir) if cache_dir else None, **overrides)

    @classmethod
    def from_params(cls, params: Mapping[str, Any] | None, cache_dir: str | os.PathLike | None = None) -> "JudgeConfig | None":
        """Config from a params mapping (either the notebook params holding a ``judge:`` block, or that block).

        Keys: ``base_url``, ``model``, ``api_key_env``, ``temperature``, ``max_concurrency``, ``max_retries``,
        ``timeout``, ``max_tokens``, ``two_turn``, ``backoff_base``, ``backoff_max``, ``retry_after_max``,
        ``max_reply_bytes``, ``enabled``.  A missing
        ``base_url``/``model`` falls back to the environment (:meth:`from_env`); ``None`` when neither gives both,
        or when ``enabled: false``.  A literal ``api_key`` entry is refused: keys live in the environment only.
        """
        p = dict(params or {})
        if isinstance(p.get("judge"), Mapping):  # notebook params holding a judge block
            p = dict(p["judge"])
        if "api_key" in p:
            raise ValueError(
                "params must not contain the judge API key; set it in the environment variable named by "
                "`api_key_env` (default OPENAI_API_KEY)"
            )
        if p.pop("enabled", True) is False:
            return None
        allowed = {f.name for f in dataclasses.fields(cls)} - {"cache_dir"}
        unknown = set(p) - allowed
        if unknown:
            raise ValueError(f"unknown judge parameter(s) {sorted(unknown)}; allowed: {sorted(allowed)}")
        p = {k: v for k, v in p.items() if v is not None}
        if p.get("base_url") and p.get("model"):
            return cls(cache_dir=Path(cache_dir) if cache_dir else None, **p)
        return cls.from_env(cache_dir=cache_dir, **p)

    # -- helpers -------------------------------------------------------------------------------------------------
    @property
    def endpoint(self) -> str:
        """The full chat-completions URL."""
        url = self.base_url.rstrip("/")
        return url if url.endswith("/chat/completions") else url + "/chat/completions"

    def has_key(self) -> bool:
        """Whether the key's environment variable is set (local servers often need none)."""
        return bool(os.environ.get(self.api_key_env))

    def describe(self) -> dict[str, Any]:
        """A report-safe summary: URL without credentials or query string, model, settings; never the key."""
        u = urllib.parse.urlsplit(self.base_url)
        host = u.hostname or ""
        if u.port:
            host += f":{u.port}"
        return {
            "base_url": urllib.parse.urlunsplit((u.scheme, host, u.path, "", "")),
            "model": self.model,
            "api_key_env": self.api_key_env,
            "api_key_set": self.has_key(),
            "temperature": self.temperature,
            "two_turn": self.two_turn,
            "max_concurrency": self.max_concurrency,
            "max_retries": self.max_retries,
            "protocol": protocol_version(self),
        }


# ----------------------------------------------------------------------------- HTTP client
class _Budget:
    """Retries left for one graded item (HTTP retries and re-asks share it)."""

    def __init__(self, n: int):
        self.left = n
        self.used = 0

    def spend(self) -> bool:
        if self.left <= 0:
            return False
        self.left -= 1
        self.used += 1
        return True


class _Retryable(Exception):
    def __init__(self, msg: str, retry_after: float | None = None, unreachable: bool = False):
        super().__init__(msg)
        self.retry_after = retry_after
        self.unreachable = unreachable  # a connection error or timeout (no reply at all)


def _retry_after(value: str | None) -> float | None:
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
        return max(0.0, when.timestamp() - time.time())
    except (TypeError, ValueError):
        return None


class _Deadline:
    """The total deadline of one request: when it passes, every socket the request opened is shut down, which wakes
    a read blocked on a server that sends nothing (or a byte at a time) more. ``expired`` says whether it fired."""

    def __init__(self, seconds: float):
        self.end = time.monotonic() + seconds
        self._fired = threading.Event()
        self._socks: list[socket.socket] = []
        self._lock = threading.Lock()
        self._timer = threading.Timer(max(0.0, seconds), self._fire)
        self._timer.daemon = True
        self._timer.start()

    @property
    def expired(self) -> bool:
        return self._fired.is_set() or time.monotonic() >= self.end

    def left(self) -> float:
        return max(0.001, self.end - time.monotonic())

    def watch(self, sock: socket.socket | None) -> None:
        with self._lock:
            if sock is not None:
                self._socks.append(sock)
            if self._fired.is_set():
                self._shut(sock)

    def _fire(self) -> None:
        with self._lock:
            self._fired.set()
            for sock in self._socks:
                self._shut(sock)

    @staticmethod
    def _shut(sock: socket.socket | None) -> None:
        try:
            if sock is not None:
                sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def cancel(self) -> None:
        self._timer.cancel()


def _opener(deadline: _Deadline) -> urllib.request.OpenerDirector:
    """A urllib opener (proxies from the environment as usual) whose HTTP(S) connections are watched by ``deadline``."""

    class Conn(http.client.HTTPConnection):
        def connect(self) -> None:
            super().connect()
            deadline.watch(self.sock)

    class SConn(http.client.HTTPSConnection):
        def connect(self) -> None:
            super().connect()
            deadline.watch(self.sock)

    class Handler(urllib.request.HTTPHandler):
        def http_open(self, req):
            return self.do_open(Conn, req)

    class SHandler(urllib.request.HTTPSHandler):
        def https_open(self, req):
            return self.do_open(SConn, req, context=self._context)

    return urllib.request.build_opener(Handler, SHandler)


class _TooLarge(Exception):
    pass


def _read_capped(resp, limit: int) -> bytes:
    """The body of ``resp``, at most ``limit`` bytes (a longer one, by its ``Content-Length`` or as read, raises
    :class:`_TooLarge` without reading the rest)."""
    length = resp.headers.get("Content-Length")
    if length and length.strip().isdigit() and int(length) > limit:
        raise _TooLarge(f"{int(length):,} bytes announced")
    chunks, n = [], 0
    while True:
        block = resp.read(min(1 << 16, limit + 1 - n))
        if not block:
            return b"".join(chunks)
        chunks.append(block)
        n += len(block)
        if n > limit:
            raise _TooLarge(f"more than {limit:,} bytes sent")


class JudgeClient(_CachedJudge):
    """Chat-completions client with retries, a concurrency cap, secret scrubbing and an on-disk cache.

    ``sleep`` is injectable so tests can record backoff delays instead of waiting.
    """

    def __init__(self, cfg: JudgeConfig, sleep: Callable[[float], None] = time.sleep, jitter: float = 0.1):
        if not isinstance(cfg, JudgeConfig):
            raise TypeError(f"expected a JudgeConfig, got {type(cfg).__name__} (is the judge configured?)")
        self.cfg = cfg
        self.sleep = sleep
        self.jitter = jitter
        self._slots = threading.BoundedSemaphore(int(cfg.max_concurrency))
        self._rng = random.Random(0)
        self.requests = 0  # HTTP requests sent by this client
        self._lock = threading.Lock()
        self._conn_failures = 0  # consecutive requests that got no reply at all
        self._unreachable: str | None = None

    def __repr__(self) -> str:
        return f"JudgeClient(model={self.cfg.model!r}, endpoint={self.cfg.describe()['base_url']!r})"

    # -- secrets -------------------------------------------------------------------------------------------------
    def _key(self) -> str | None:
        return os.environ.get(self.cfg.api_key_env) or None

    def scrub(self, text: str) -> str:
        """Remove the API key (and any bearer token, URL credential or key-shaped token:
        :func:`helpers.core.secrets.redact`) from text that might be logged, cached or raised."""
        text = re.sub(r"(?i)(bearer\s+)[^\s\"',;]+", r"\1***", str(text))
        key = self._key()
        if key and len(key) >= 4:
            text = text.replace(key, "***")
        return redact(text)  # URL credentials and other key-shaped tokens

    # -- one request ---------------------------------------------------------------------------------------------
    def _post(self, messages: list[dict[str, str]]) -> str:
        body = {"model": self.cfg.model, "messages": messages, "temperature": float(self.cfg.temperature)}
        if self.cfg.max_tokens:
            body["max_tokens"] = int(self.cfg.max_tokens)
        headers = {"Content-Type": "application/json", "Accept": "application/json", "User-Agent": "storybench-judge/1"}
        key = self._key()
        if key:
            headers["Authorization"] = f"Bearer {key}"
        req = urllib.request.Request(self.cfg.endpoint, data=json.dumps(body).encode(), headers=headers, method="POST")
        with self._slots:
            with self._lock:
                self.requests += 1
            deadline = _Deadline(float(self.cfg.timeout))  # connect + headers + every read, together
            try:
                with _opener(deadline).open(req, timeout=deadline.left()) as resp:
                    raw = _read_capped(resp, int(self.cfg.max_reply_bytes))
                if deadline.expired:  # the deadline cut the reply short: never parse a partial body
                    raise TimeoutError("deadline")
            except _TooLarge as e:
                raise JudgeError(
                    f"judge reply refused: {e}, over the cap of {int(self.cfg.max_reply_bytes):,} bytes "
                    f"(judge_max_reply_bytes in the params of notebook 05b); is judge_base_url a chat-completions "
                    f"endpoint?") from None
            except urllib.error.HTTPError as e:
                try:  # at most 300 bytes of the error body, within what is left of the deadline
                    detail = self.scrub(e.read(300).decode("utf-8", "replace")) if e.fp else ""
                except (OSError, http.client.HTTPException):
                    detail = ""
                if e.code == 429 or e.code == 408 or e.code >= 500:
                    raise _Retryable(f"HTTP {e.code} {detail}".strip(), _retry_after(e.headers.get("Retry-After"))) from None
                if e.code in (401, 403):
                    raise JudgeConfigError(
                        f"judge endpoint refused the credentials (HTTP {e.code}); check ${self.cfg.api_key_env}"
                    ) from None
                if e.code == 404:
                    raise JudgeConfigError(
                        f"judge endpoint {self.cfg.describe()['base_url']} returned 404: wrong base_url or unknown "
                        f"model {self.cfg.model!r} ({detail})"
                    ) from None
                raise JudgeError(f"judge request rejected (HTTP {e.code}): {detail}") from None
            except (socket.timeout, TimeoutError) as e:
                raise _Retryable(f"no whole reply within the deadline of {self.cfg.timeout}s ({type(e).__name__})",
                                 unreachable=True) from None
            except (urllib.error.URLError, http.client.HTTPException, ConnectionError, OSError) as e:
                if deadline.expired:  # the deadline shut the socket: a timeout, whatever the read raised
                    raise _Retryable(f"no whole reply within the deadline of {self.cfg.timeout}s (judge_timeout)",
                                     unreachable=True) from None
                reason = e.reason if isinstance(e, urllib.error.URLError) else e
                raise _Retryable(f"connection error: {self.scrub(str(reason))}", unreachable=True) from None
            finally:
                deadline.cancel()
        try:
            data = json.loads(raw.decode("utf-8"))
            content = data["choices"][0]["message"]["content"]
            if not isinstance(content, str):
                raise TypeError("content is not a string")
        except (ValueError, KeyError, IndexError, TypeError) as e:
            raise _Retryable(f"malformed chat-completions reply ({type(e).__name__}: {self.scrub(raw[:120].decode('utf-8', 'replace'))!r})") from None
        return content

    def _delay(self, attempt: int, retry_after: float | None) -> float:
        if retry_after is not None:  # the server's Retry-After, never longer than retry_after_max
            return min(retry_after, float(self.cfg.retry_after_max))
        d = min(self.cfg.backoff_max, self.cfg.backoff_base * (2 ** attempt))
        return d * (1.0 + self.jitter * self._rng.random())

    def chat(self, messages: list[dict[str, str]], budget: _Budget | None = None) -> str:
        """Send one chat request, retrying transient failures while ``budget`` (default ``max_retries``) lasts."""
        budget = budget or _Budget(self.cfg.max_retries)
        attempt = 0
        while True:
            if self._unreachable:
                raise JudgeUnreachable(self._unreachable)
            try:
                reply = self._post(messages)
                with self._lock:
                    self._conn_failures = 0
                return reply
            except _Retryable as e:
                with self._lock:
                    self._conn_failures = self._conn_failures + 1 if e.unreachable else 0
                    if self._conn_failures >= int(self.cfg.max_connection_failures) and not self._unreachable:
                        self._unreachable = (
                            f"judge endpoint {self.cfg.describe()['base_url']} cannot be reached: "
                            f"{self._conn_failures} requests in a row failed (last: {e}); is the server running and "
                            f"judge_base_url right? (timeout {self.cfg.timeout}s, set judge_timeout/judge_retries in "
                            f"the params); items graded so far stay cached"
                        )
                if self._unreachable:
                    raise JudgeUnreachable(self._unreachable) from None
                if not budget.spend():
                    raise JudgeError(f"judge request failed after {budget.used} retries: {e}") from None
                d = self._delay(attempt, e.retry_after)
                log.warning("judge: %s; retry %d/%d in %.2fs", e, budget.used, self.cfg.max_retries, d)
                attempt += 1
                self.sleep(d)

    # -- the protocol --------------------------------------------------------------------------------------------
    def _grade_new(self, prompt: str, completion: str, proto: Protocol) -> dict[str, Any]:
        """Ask the endpoint (two turns, re-asking on unusable replies); returns the reply that parsed."""
        budget = _Budget(self.cfg.max_retries)
        first = proto.assess.format(beginning=prompt.rstrip(), completion=completion.strip())
        if self.cfg.two_turn:
            messages = [{"role": "user", "content": first}]
            assessment = self.chat(messages, budget)
            messages += [{"role": "assistant", "content": assessment}, {"role": "user", "content": proto.grade}]
        else:
            assessment = None
            messages = [{"role": "user", "content": first + "\n\nFirst write your assessment, then:\n" + proto.grade}]
        while True:
            reply = self.chat(messages, budget)
            try:
                parse_grades(reply, categories=proto.categories)
                break
            except GradeParseError as e:
                if not budget.spend():
                    raise JudgeError(f"judge reply unusable after {budget.used} retries: {e}") from None
                log.warning("judge: unusable grade reply (%s); re-asking (%d/%d)", e, budget.used, self.cfg.max_retries)
                messages = messages + [{"role": "assistant", "content": reply},
                                       {"role": "user", "content": proto.reask.format(problem=e)}]
        return {"assessment": assessment if assessment is not None else reply, "reply": reply, "retries": budget.used}
