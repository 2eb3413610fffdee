"""Test doubles for trying orga — and testing your own tools and policies — without a model.

Modules:

* ``scripted_model`` — a model server on 127.0.0.1 speaking the OpenAI and Anthropic wire
  formats, answering from scripts (``Turn``, ``Raw``, or a function of the request)
* ``scripted_stream`` — its streamed (server-sent events) answers
* ``offline`` — the offline scripted model (``worker.py --scripted``, ``orga demo``)
* ``offline_arguments``, ``offline_clues`` — how it fills a tool's arguments from the task
* ``hashed_embeddings`` — vectors without a model, for the scripted server's ``/embeddings``

To test a tool or a Cedar policy offline, point a worker's provider at a
``ScriptedModelServer`` and script the model's turns::

    from orga.scripted.server import ScriptedModelServer, Turn

    with ScriptedModelServer() as model:
        model.script("m", [Turn(tool_calls=[("my_tool", {"x": 1})]), Turn(text="done")])
        ...  # a worker whose OPENAI_BASE_URL is model.openai_base_url, a loop with model "m"
"""

__all__: list[str] = []
