"""A workflow registered as ``ReasoningLoop`` whose state has another shape: it stands for a
worker running other code, whose waiting loops the desk cannot read."""

from __future__ import annotations

from temporalio import workflow

from orga.contracts import search_attributes as sa

__all__ = ["OtherVersionLoop"]


@workflow.defn(name="ReasoningLoop")
class OtherVersionLoop:
    @workflow.run
    async def run(self) -> None:
        workflow.upsert_search_attributes([sa.STATUS.value_set("awaiting_approval")])
        await workflow.wait_condition(lambda: False)

    @workflow.query(name="state")
    def state(self) -> dict[str, str]:
        return {"status": "something else entirely"}
