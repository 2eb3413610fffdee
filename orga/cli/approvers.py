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
from orga.contracts.errors import InvalidConfig
from orga.core.signatures import fingerprint
from orga.desk.approvals import who_decides
from orga.runtime.approver_keys import ApproverKeyError, generate_key, load_key, public_key_of
from orga.runtime.files import private_directory
from orga.worker.agent_registry import load_approvers

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
    out: Annotated[
        Path | None,
        typer.Option(
            help="Where to write the private key (never overwritten); default: the data "
            "directory's approver.pem, which orga signs with when ORGA_APPROVER_KEY is unset."
        ),
    ] = None,
    name: Name = None,
    enroll: Annotated[
        bool,
        typer.Option(
            "--enroll/--no-enroll",
            help="Add the public key to the approvers file workers read (ORGA_APPROVERS, else "
            "the data directory's approvers.toml): on this machine, you are the operator too.",
        ),
    ] = True,
    as_json: Json = False,
) -> None:
    """Write a new Ed25519 private key, enroll its public key (or print the table that does)."""

    async def body() -> int:
        who = who_decides(name)
        config = settings()
        path = (out or config.data_dir / "approver.pem").expanduser()
        roll = config.approvers_path()
        if enroll and roll.is_file():
            try:
                enrolled = {a.name for a in load_approvers(roll)}
            except InvalidConfig as error:
                raise CliError(f"{error.message}: fix it before enrolling anyone", 2) from error
            if who in enrolled:
                raise CliError(
                    f"{who} is enrolled in {roll} already: remove that table first to enroll a "
                    "new key (a person has one key)",
                    2,
                )
        if out is None:
            private_directory(config.data_dir, "ORGA_DATA_DIR")
        try:
            key = generate_key(path)
        except ApproverKeyError as error:
            raise CliError(str(error), 1) from error
        public = public_key_of(key)
        if enroll:
            roll.parent.mkdir(parents=True, exist_ok=True)
            with roll.open("a", encoding="utf-8") as written:
                written.write(("\n" if roll.stat().st_size else "") + _enrollment(who, public))
        return _said(who, public, path, as_json, wrote=True, enrolled=roll if enroll else None)

    execute(body, as_json=as_json)


def show(name: Name = None, as_json: Json = False) -> None:
    """Print the enrollment table of the key ``ORGA_APPROVER_KEY`` names."""

    async def body() -> int:
        who = who_decides(name)
        path = settings().approver_key_path()
        if path is None:
            raise CliError("ORGA_APPROVER_KEY names no key (`orga approver keygen` writes one)", 2)
        try:
            key = load_key(path.expanduser())
        except ApproverKeyError as error:
            raise CliError(str(error), 2) from error
        return _said(who, public_key_of(key), path, as_json, wrote=False)

    execute(body, as_json=as_json)


def _said(
    who: str, public: str, path: Path, as_json: bool, *, wrote: bool, enrolled: Path | None = None
) -> int:
    if as_json:
        print_json(
            {
                "name": who,
                "public_key": public,
                "fingerprint": fingerprint(public),
                "key": str(path),
                "enrolled_in": str(enrolled) if enrolled else None,
            }
        )
        return 0
    out = console()
    if wrote:
        out.print(
            f"wrote {who}'s private key to {path} (readable by you only: keep it there). "
            f"orga signs {who}'s decisions with it (elsewhere: ORGA_APPROVER_KEY={path})",
            markup=False,
        )
    if enrolled is not None:
        out.print(
            f"enrolled {who} ({fingerprint(public)}) in {enrolled}: loops that start from now "
            "on a worker reading it record only decisions its approvers sign",
            markup=False,
        )
        return 0
    out.print(
        f"Key {fingerprint(public)}. The worker's operator enrolls it (ORGA_APPROVERS file or "
        "the agents file):\n",
        markup=False,
    )
    out.print(_enrollment(who, public), markup=False)
    return 0
