"""Leaving the ``orga`` process: its output flushed, without the interpreter's finalisation.

Light on purpose: ``orga --help`` imports it (``orga.cli.app``), as every verb's end does
(``orga.cli.common.execute``).
"""

from __future__ import annotations

import os
import sys
from typing import NoReturn

__all__ = ["exit_process"]


def exit_process(code: int) -> NoReturn:
    """Leave the process with ``code`` once stdout and stderr are flushed, without the
    interpreter's finalisation: temporalio can crash the interpreter at exit (sdk-python#300),
    which would print ``Fatal Python error`` after a verb that succeeded."""
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except BrokenPipeError:
        pass  # the reader is gone: there is nobody to flush to
    os._exit(code)  # temporalio can crash the interpreter at exit (sdk-python#300)
