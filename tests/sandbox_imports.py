"""A workflow module that imports every module of the sandbox side when the sandbox loads it.

Used by ``tests/test_architecture.py`` with a sandbox that passes nothing of orga through: each
module's import-time code then runs under the sandbox's restrictions.
"""

from __future__ import annotations

import importlib
import pkgutil

from temporalio import workflow

__all__ = ["MODULES", "ImportEverything"]

PACKAGES = ("orga.contracts", "orga.core", "orga.workflows")


def _walk(package: str) -> list[str]:
    # Listing the package's files is this probe's own business, not the code under test.
    with workflow.unsafe.sandbox_unrestricted():
        path = importlib.import_module(package).__path__
        return [package, *(i.name for i in pkgutil.walk_packages(path, f"{package}."))]


MODULES = [name for package in PACKAGES for name in _walk(package)]
for _name in MODULES:
    importlib.import_module(_name)


@workflow.defn(name="ImportEverything")
class ImportEverything:
    @workflow.run
    async def run(self) -> list[str]:
        return list(MODULES)
