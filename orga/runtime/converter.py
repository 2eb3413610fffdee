"""Payloads out of history: Temporal's External Storage, backed by the worker's store.

Every payload of at least ``THRESHOLD`` bytes — a continue-as-new input carrying a long
conversation, a large tool result or answer, a query result — is written to the store
(``orga.runtime.store``) by whoever encodes it, and history keeps a small reference; whoever
decodes it (a worker, a replay, the CLI) reads it back. Payloads are keyed by their SHA-256, so
writing one twice (a retried activity) stores it once. All workers and clients of a deployment
must share the store (``ORGA_STORE_URL``): with the embedded SQLite default, that is one
machine. A workflow task never fails on Temporal's 2 MiB payload limit this way.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Callable, Sequence
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Final

import pydantic_core
from temporalio.api.common.v1 import Payload
from temporalio.api.sdk.v1 import ExternalStorageReference
from temporalio.contrib.pydantic import PydanticJSONPlainPayloadConverter, PydanticPayloadConverter
from temporalio.converter import (
    DataConverter,
    DefaultPayloadConverter,
    ExternalStorage,
    JSONPlainPayloadConverter,
    JSONProtoPayloadConverter,
    StorageDriver,
    StorageDriverClaim,
    StorageDriverRetrieveContext,
    StorageDriverStoreContext,
)

from orga.contracts.wire import Compact

if TYPE_CHECKING:  # opened when a payload is first stored or read, not by every client
    from orga.runtime.store import Store

__all__ = [
    "DRIVER_NAME",
    "THRESHOLD",
    "CompactJSONPayloadConverter",
    "OrgaPayloadConverter",
    "StoreDriver",
    "data_converter",
    "load",
    "payload_key",
    "resolve",
]

DRIVER_NAME: Final = "orga-store"
"""The driver's name, recorded in every reference: the same on every worker and client."""

THRESHOLD: Final = 128 * 1024
"""Payloads this large or larger go to the store (Temporal warns at 512 KiB per payload and
refuses 2 MiB; a continue-as-new input holds the whole conversation)."""


def payload_key(data: bytes) -> str:
    """The store key of a serialised payload."""
    return f"payload:sha256:{hashlib.sha256(data).hexdigest()}"


class StoreDriver(StorageDriver):
    """Keeps payloads in the store, opened on first use (a client that never meets a large
    payload never touches it)."""

    def __init__(self, store: Callable[[], Store]) -> None:
        self._open = store
        self._store: Store | None = None

    def name(self) -> str:
        return DRIVER_NAME

    def type(self) -> str:
        return "orga.StoreDriver"

    @property
    def backing(self) -> Store:
        """The store, opened on first use."""
        if self._store is None:
            self._store = self._open()
        return self._store

    async def store(
        self, context: StorageDriverStoreContext, payloads: Sequence[Payload]
    ) -> list[StorageDriverClaim]:
        return await asyncio.to_thread(self._put, list(payloads))

    def _put(self, payloads: list[Payload]) -> list[StorageDriverClaim]:
        claims: list[StorageDriverClaim] = []
        for payload in payloads:
            data = payload.SerializeToString(deterministic=True)
            key = payload_key(data)
            self.backing.put(key, data)
            claims.append(StorageDriverClaim(claim_data={"key": key}))
        return claims

    async def retrieve(
        self, context: StorageDriverRetrieveContext, claims: Sequence[StorageDriverClaim]
    ) -> list[Payload]:
        return await asyncio.to_thread(self._get, list(claims))

    def _get(self, claims: list[StorageDriverClaim]) -> list[Payload]:
        return [load(self.backing, claim.claim_data["key"]) for claim in claims]


def load(store: Store, key: str) -> Payload:
    """The payload stored under ``key``; a clear ``LookupError`` when the store lacks it, or
    holds under it something else than the payload the key names (its SHA-256): whoever can
    write the store could otherwise hand a loop a conversation, a result or a continued run's
    state of their own under a reference its history holds."""
    data = store.get(key)
    if data is None:
        raise LookupError(
            f"the stored payload {key} is not in the store at {store.safe_url}: "
            "every worker and client must use the same ORGA_STORE_URL (and its "
            "retention must outlast the histories that refer to it)"
        )
    if payload_key(data) != key:
        raise LookupError(
            f"the store at {store.safe_url} holds under {key[:120]!r} something else than the "
            "payload that key names (its SHA-256): it was written by someone other than a "
            "worker or client of orga, or changed since. Not read; restore the store's entry "
            "from a backup"
        )
    payload = Payload()
    payload.ParseFromString(data)
    return payload


_REFERENCE_TYPE: Final = ExternalStorageReference.DESCRIPTOR.full_name.encode()


def resolve(payload: Payload, store: Store) -> Payload:
    """The payload an ``orga-store`` reference in history stands for; any other payload as
    it is. For readers that see raw history (the Web UI's codec endpoint, ``orga codec``)."""
    if payload.metadata.get("encoding") != b"json/protobuf":
        return payload
    if payload.metadata.get("messageType") != _REFERENCE_TYPE:
        return payload
    reference = JSONProtoPayloadConverter().from_payload(payload, ExternalStorageReference)
    if not isinstance(reference, ExternalStorageReference):
        return payload
    if reference.driver_name != DRIVER_NAME:
        return payload
    return load(store, reference.claim_data["key"])


class CompactJSONPayloadConverter(PydanticJSONPlainPayloadConverter):
    """Temporal's pydantic JSON converter, writing a ``Compact`` model without the fields at
    their default (``orga.contracts.wire``): an activity's input or result in history carries
    what the loop set, not the whole contract. Reading is unchanged: the reader fills in the
    defaults."""

    def to_payload(self, value: Any) -> Payload | None:
        if isinstance(value, Compact):
            data = value.__pydantic_serializer__.to_json(value, exclude_defaults=True)
        elif type(value) is str:
            data = pydantic_core.to_json(value)  # as the stock converter writes it
        else:
            return super().to_payload(value)
        payload = Payload(data=data)
        payload.metadata["encoding"] = _JSON_PLAIN  # (the keyword builds the map slowly)
        return payload


_JSON_PLAIN: Final = b"json/plain"

_SHARED_JSON: Final = CompactJSONPayloadConverter()
"""One pydantic JSON converter, and one cache of type adapters, for every payload converter."""


def _to_json(value: Any) -> Payload:
    payload = _SHARED_JSON.to_payload(value)
    assert payload is not None  # the JSON converter takes any value
    return payload


_CONVERTERS: Final = MappingProxyType(
    {
        c.encoding.encode(): c
        for c in (
            _SHARED_JSON if isinstance(c, JSONPlainPayloadConverter) else c
            for c in DefaultPayloadConverter.default_encoding_payload_converters
        )
    }
)
"""The encoding converters every ``OrgaPayloadConverter`` delegates to, by encoding (read-only:
every instance shares it)."""


class OrgaPayloadConverter(PydanticPayloadConverter):
    """Temporal's pydantic payload converter, whose instances share one JSON converter, which
    leaves out fields at their default (``CompactJSONPayloadConverter``).

    Temporal makes a payload converter for every workflow run, and another each time it
    copies a data converter (a few per workflow task); the stock one builds its own cache of
    pydantic type adapters each time, which a run waiting for a person then holds (~7 KiB
    each), and its own table of encodings. The converters are stateless but for that cache,
    which is thread-safe: every instance shares one table of them."""

    def __init__(self) -> None:
        self.converters = _CONVERTERS

    def to_payloads(self, values: Sequence[Any]) -> list[Payload]:
        """As the stock converter, but a string or a ``Compact`` model (an activity's input,
        its summary) goes to the JSON converter at once: the converters tried before it take
        only ``None``, bytes and protobuf messages, so the payload is the same."""
        if all(type(v) is str or isinstance(v, Compact) for v in values):
            return [_to_json(v) for v in values]
        return super().to_payloads(values)


def data_converter(store: Callable[[], Store]) -> DataConverter:
    """orga's data converter: pydantic (``OrgaPayloadConverter``), with large payloads kept in
    ``store``."""
    storage = ExternalStorage(drivers=[StoreDriver(store)], payload_size_threshold=THRESHOLD)
    return DataConverter(payload_converter_class=OrgaPayloadConverter, external_storage=storage)
