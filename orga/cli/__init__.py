"""The ``orga`` command: ``orga demo``, ``orga server`` and the everyday verbs."""

from orga.cli.app import main

__all__ = ["main"]
