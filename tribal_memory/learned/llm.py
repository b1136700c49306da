"""A bounded client of an OpenAI-compatible ``/chat/completions`` endpoint.

Shared by the LLM query variants (:class:`~tribal_memory.learned.expander.LlmVariants`)
and the LLM section summaries (:mod:`tribal_memory.documents.summaries`). Every
call is bounded in wall time as a whole (httpx bounds each read, not the call),
and every failure is one :class:`LlmUnavailable` that callers fall back from.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout

import httpx


class LlmUnavailable(Exception):
    """The LLM call failed, timed out or returned no text."""


class ChatClient:
    """One system + user message in, the first choice's text out.

    Args:
        url: Base URL, e.g. ``http://127.0.0.1:11434/v1`` (``/chat/completions`` is appended).
        model: Model name sent with the request.
        api_key: Bearer token, if the endpoint needs one.
        timeout_s: Longest wait for one whole call, in seconds.
        max_tokens: ``max_tokens`` sent with each request (None: not sent).
    """

    def __init__(
        self,
        url: str,
        model: str,
        *,
        api_key: str | None = None,
        timeout_s: float = 2.0,
        max_tokens: int | None = None,
    ) -> None:
        self.endpoint = url.rstrip("/") + "/chat/completions"
        self.model = model
        self.timeout_s = timeout_s
        self.max_tokens = max_tokens
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._client = httpx.Client(timeout=timeout_s, headers=headers)
        self._pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="tribal-llm")

    def complete(self, system: str, user: str) -> str:
        """The model's answer to ``user`` under ``system`` (temperature 0).

        Raises:
            LlmUnavailable: the call failed, took over ``timeout_s`` seconds
                or returned no text.
        """
        body: dict[str, object] = {
            "model": self.model,
            "temperature": 0,
            "messages": [
                {"role": "system", "content": system},
                {"role": "user", "content": user},
            ],
        }
        if self.max_tokens is not None:
            body["max_tokens"] = self.max_tokens
        future = self._pool.submit(self._ask, body)
        try:
            text = future.result(timeout=self.timeout_s)
        except FutureTimeout as exc:
            future.cancel()
            raise LlmUnavailable(f"took over {self.timeout_s} s") from exc
        except (httpx.HTTPError, ValueError, KeyError, IndexError, TypeError) as exc:
            raise LlmUnavailable(f"failed: {exc}") from exc
        if not isinstance(text, str) or not text.strip():
            raise LlmUnavailable("returned no text")
        return text

    def _ask(self, body: dict[str, object]) -> object:
        response = self._client.post(self.endpoint, json=body)
        response.raise_for_status()
        return response.json()["choices"][0]["message"]["content"]

    def close(self) -> None:
        """Close the HTTP connection pool (a call still running is abandoned)."""
        self._pool.shutdown(wait=False, cancel_futures=True)
        self._client.close()
