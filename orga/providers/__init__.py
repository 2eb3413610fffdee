"""Model providers: one model call over HTTP, in each provider's wire format.

Modules:

* ``client`` — one call: build the provider's request, send it, normalise the answer
* ``wire`` — the seam: what differs between the two wire formats, behind one protocol
* ``openai`` — OpenAI-compatible chat completions (OpenAI, OpenRouter, vLLM, Ollama, …)
* ``anthropic`` — the Anthropic Messages API
* ``streaming`` — streamed answers (server-sent events), assembled into the whole body
* ``usage`` — token usage as reported, checked: negative or absurd counts are refused
* ``prices`` — what a call cost in USD: the genai-prices table, or ``ORGA_MODEL_PRICES``
* ``http_errors`` — what a provider's HTTP error means, retryable or not
* ``embeddings`` — vectors for hybrid knowledge search, from ``/embeddings``

Used by the inference, critic and summary activities; never imported by workflow code.
"""

__all__: list[str] = []
