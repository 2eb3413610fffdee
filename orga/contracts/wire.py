"""The wire form of orga's payloads: what orga writes for itself leaves out defaults.

orga's payload converter (``orga.runtime.converter``) writes a ``Compact`` model with
``exclude_defaults``: a loop's start input, an inference request, a tool's result — the
payloads orga's own code writes into history and reads back, typed — carry only what differs
from the contract's defaults, and the reader fills in the rest. What people read (a loop's
result, the ``state`` query, a task's report) is written whole. Two things make leaving
defaults out safe:

* the defaults are part of the contract: ``tests/wire_defaults.json`` pins every default of
  every contract model, so a default changed later — which would change what an old payload
  means — fails a test instead of an old loop;
* a member of a tagged union keeps its tag: ``Tagged`` writes its ``Literal`` fields (a
  journal entry's ``kind``, a recovery strategy's ``strategy``) even when they are at their
  default, since a reader needs the tag to know which member it reads.
"""

from __future__ import annotations

import typing
from typing import Any, ClassVar, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    SerializationInfo,
    SerializerFunctionWrapHandler,
    model_serializer,
)

__all__ = ["Compact", "Contract", "Tagged", "build_contracts"]


class Contract(BaseModel):
    """Every contract model. Its validator and serialiser are built when it is first used, not
    when its module is imported: a command that reads one loop's state builds the models that
    state holds, not all of orga's (``orga state`` started ~0.1 s sooner, 2026-12-06). A worker
    builds them all when it starts (``build_contracts``), so no workflow task pays for it."""

    model_config = ConfigDict(defer_build=True)


def build_contracts() -> int:
    """Build every contract model not built yet (a worker calls this as it starts); returns how
    many were built."""
    built = 0
    waiting: list[type[BaseModel]] = [Contract]
    while waiting:
        model = waiting.pop()
        waiting.extend(model.__subclasses__())
        if not model.__pydantic_complete__:
            model.model_rebuild()
            built += 1
    return built


class Compact(Contract):
    """A payload orga writes and reads back itself (an activity's input or result, a
    workflow's input): written without the fields at their default."""


class Tagged(Contract):
    """A member of a tagged union: its tag fields (those typed as one ``Literal`` value) are
    written also when defaults are left out."""

    __wire_tags__: ClassVar[tuple[str, ...]] = ()

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        super().__pydantic_init_subclass__(**kwargs)
        cls.__wire_tags__ = tuple(
            name
            for name, field in cls.model_fields.items()
            if typing.get_origin(field.annotation) is Literal
            and len(typing.get_args(field.annotation)) == 1
        )

    @model_serializer(mode="wrap")
    def _keep_tags(
        self, handler: SerializerFunctionWrapHandler, info: SerializationInfo
    ) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        if info.exclude_defaults:
            missing = {t: getattr(self, t) for t in self.__wire_tags__ if t not in data}
            if missing:
                data = {**missing, **data}
        return data
