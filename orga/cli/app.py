"""The ``orga`` command: demo, server, and the everyday verbs on loops.

Every verb talks to Temporal with the same settings as the worker (``TEMPORAL_ADDRESS`` …).
Input is validated before anything starts; an unreachable server, an unknown workflow or bad
input ends with a one-line explanation and a non-zero exit code, never a traceback.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections.abc import Sequence
from typing import NoReturn

from orga.cli import desk, loops, server, tasks
from orga.cli.common import CliError, Handler, data_dir
from orga.contracts.errors import InvalidConfig
from orga.runtime.settings import Settings

__all__ = ["main", "parser"]


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(
        prog="orga", description="Durable, governed agent reasoning loops on Temporal."
    )
    verbs = top.add_subparsers(dest="verb", required=True, metavar="VERB")
    # The order of registration is the order ``orga --help`` lists the verbs in.
    server.register(verbs)
    loops.register(verbs)
    desk.register(verbs)
    tasks.register(verbs)
    return top


def _fail(message: str, code: int) -> NoReturn:
    print(f"orga: {message}", file=sys.stderr)
    sys.stdout.flush()
    os._exit(code)  # temporalio can crash the interpreter at exit (sdk-python#300)


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if hasattr(args, "data_dir"):
        args.data_dir = data_dir(args.data_dir)
    handler: Handler = args.handler
    try:
        settings = Settings.from_env()
        code = asyncio.run(handler(args, settings))
    except CliError as error:
        _fail(str(error), error.code)
    except InvalidConfig as error:
        _fail(error.message, 2)
    except KeyboardInterrupt:
        _fail("interrupted", 130)
    except Exception as error:
        if os.environ.get("ORGA_DEBUG"):
            raise
        _fail(f"unexpected error: {type(error).__name__}: {error} (ORGA_DEBUG=1 shows more)", 1)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
