"""Test doubles for trying orga — and testing your own tools and policies — without a model.

* ``ScriptedModelServer`` — a model server on 127.0.0.1 speaking the OpenAI and Anthropic wire
  formats, answering from scripts (``Turn``, ``Raw``, or a function of the request), every
  request recorded (``RecordedRequest``)
* ``serve_offline_model`` — the offline scripted model (``worker.py --scripted``, ``orga demo``,
  ``OrgaPlugin`` with ``ORGA_PROVIDER=scripted``), model name ``OFFLINE_MODEL``

To test a tool or a Cedar policy offline, point a worker's provider at a
``ScriptedModelServer`` and script the model's turns:

    from orga.testing import ScriptedModelServer, Turn

    with ScriptedModelServer() as model:
        model.script("m", [Turn(tool_calls=[("my_tool", {"x": 1})]), Turn(text="done")])
        ...  # a worker whose OPENAI_BASE_URL is model.openai_base_url, a loop with model "m"

The implementations are ``orga.scripted`` (internal); these names are the stable ones.
"""

from orga.scripted.offline import OFFLINE_MODEL, serve_offline_model
from orga.scripted.server import Raw, RecordedRequest, ScriptedModelServer, Turn

__all__ = [
    "OFFLINE_MODEL",
    "Raw",
    "RecordedRequest",
    "ScriptedModelServer",
    "Turn",
    "serve_offline_model",
]
