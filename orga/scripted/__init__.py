"""Scripted models: a model server on 127.0.0.1 that answers from scripts, and the offline model.

Modules:

* ``server`` — ``ScriptedModelServer``: the OpenAI and Anthropic wire formats, answering from
  scripts (``Turn``, ``Raw``, or a function of the request), every request recorded
* ``stream`` — its streamed (server-sent events) answers
* ``offline`` — the offline scripted model (``worker.py --scripted``, ``orga demo``,
  ``OrgaPlugin`` with ``ORGA_PROVIDER=scripted``)
* ``arguments``, ``clues`` — how the offline model fills a tool's arguments from the task
* ``reading`` — what the offline model reads in a request: the turn it answers, what a
  follow-up refers back to, the answer's schema
* ``answers`` — its typed answer: a JSON value built from the answer's schema
* ``embeddings`` — vectors without a model, for the scripted server's ``/embeddings``

What tests of one's own tools and policies use is re-exported by ``orga.testing``.
"""

__all__: list[str] = []
