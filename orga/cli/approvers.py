"""``orga approver keygen`` and ``orga approver show``: an approver's signing key.

The private key stays with the person who decides (``ORGA_APPROVER_KEY`` names it); the
public key is what the worker's operator enrolls, as the ``[approvers.<name>]`` table these
verbs print, in the ``ORGA_APPROVERS`` file or the agents file.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from orga.cli.common import CliError, Json, console, execute, print_json, settings
from orga.core.signatures import fingerprint
from orga.desk.inbox import who_decides
from orga.runtime.approver_keys import ApproverKeyError, generate_key, load_key, public_key_of

__all__ = ["register"]


def register(app: typer.Typer) -> None:
    """Add ``orga approver …`` to ``app``."""
    group = typer.Typer(
        help="An approver's signing key: write one, or show the public key to enroll.",
        no_args_is_help=True,
    )
    group.command("keygen", epilog="Example: orga approver keygen --out ~/.orga/alice.pem")(keygen)
    group.command("show", epilog="Example: ORGA_APPROVER_KEY=~/.orga/alice.pem orga approver show")(
        show
    )
    app.add_typer(group, name="approver")


Name = Annotated[
    str | None,
    typer.Option(
        help="The name to enroll; default: ORGA_APPROVER, else the operating-system user."
    ),
]


def _enrollment(name: str, public_key: str) -> str:
    return f'[approvers.{_toml_key(name)}]\nkey = "{public_key}"\n'


def _toml_key(name: str) -> str:
    plain = name.replace("-", "").replace("_", "").isalnum() and name.isascii()
    return name if plain else '"' + name.replace("\\", "\\\\").replace('"', '\\"') + '"'


def keygen(
    out: Annotated[Path, typer.Option(help="Where to write the private key (never overwritten).")],
    name: Name = None,
    as_json: Json = False,
) -> None:
    """Write a new Ed25519 private key, and print the table that enrolls its public key."""

    async def body() -> int:
        who = who_decides(name)
        try:
            key = generate_key(out.expanduser())
        except ApproverKeyError as error:
            raise CliError(str(error), 1) from error
        public = public_key_of(key)
        return _said(who, public, out, as_json, wrote=True)

    execute(body, as_json=as_json)


def show(name: Name = None, as_json: Json = False) -> None:
    """Print the enrollment table of the key ``ORGA_APPROVER_KEY`` names."""

    async def body() -> int:
        who = who_decides(name)
        path = settings().approver_key
        if path is None:
            raise CliError("ORGA_APPROVER_KEY names no key (`orga approver keygen` writes one)", 2)
        try:
            key = load_key(path.expanduser())
        except ApproverKeyError as error:
            raise CliError(str(error), 2) from error
        return _said(who, public_key_of(key), path, as_json, wrote=False)

    execute(body, as_json=as_json)


def _said(who: str, public: str, path: Path, as_json: bool, *, wrote: bool) -> int:
    if as_json:
        print_json(
            {
                "name": who,
                "public_key": public,
                "fingerprint": fingerprint(public),
                "key": str(path),
            }
        )
        return 0
    out = console()
    if wrote:
        out.print(
            f"wrote {who}'s private key to {path} (readable by you only: keep it there). "
            f"Sign with it: export ORGA_APPROVER_KEY={path}",
            markup=False,
        )
    out.print(
        f"Key {fingerprint(public)}. The worker's operator enrolls it (ORGA_APPROVERS file or "
        "the agents file):\n",
        markup=False,
    )
    out.print(_enrollment(who, public), markup=False)
    return 0
