"""Example tools for the walkthroughs of the README and the docs: reserve → charge → notify,
and refunds.

``ORGA_TOOL_MODULES=examples.shop uv run worker.py``. The shop keeps its state in memory (one
worker process); ``notify`` fails for addresses at ``.invalid``, so the example task can show
compensation: the charge is refunded and the reservation released, newest first.
``issue_refund`` needs a person's approval under the default gate: the operator's walkthrough.
"""

from __future__ import annotations

from orga import ToolContext, tool

_reservations: dict[str, str] = {}
_charges: dict[str, int] = {}


@tool
def reserve(item: str, ctx: ToolContext) -> dict[str, str]:
    """Reserve an item in stock.

    Args:
        item: what to reserve.
    """
    reservation = f"R-{ctx.idempotency_key.rsplit('/', 1)[0][-6:]}-{item}"
    _reservations[reservation] = item
    return {"reservation": reservation, "item": item}


@tool
def charge(amount: int, ctx: ToolContext) -> str:
    """Charge the customer.

    Args:
        amount: the amount in cents.
    """
    charge_id = f"CH-{ctx.idempotency_key.rsplit('/', 1)[0][-6:]}"
    _charges[charge_id] = amount
    return charge_id


@tool
def notify(email: str, message: str) -> str:
    """Email the customer.

    Args:
        email: where to send it.
        message: what to say.
    """
    if email.endswith(".invalid"):
        raise ConnectionError(f"the mail server refused {email}")
    return f"sent to {email}"


@tool
def release(reservation: str) -> str:
    """Undo a reservation.

    Args:
        reservation: the reservation id.
    """
    item = _reservations.pop(reservation, None)
    return f"released {reservation} ({item or 'already released'})"


@tool
def refund(charge_id: str) -> str:
    """Undo a charge.

    Args:
        charge_id: the charge to refund.
    """
    amount = _charges.pop(charge_id, None)
    return f"refunded {charge_id} ({amount if amount is not None else 'already refunded'})"


@tool(requires_approval=True, serial=True)
def issue_refund(amount: int, email: str) -> str:
    """Send a customer money back. A person approves every refund.

    Args:
        amount: the amount in cents.
        email: the customer's email address.
    """
    return f"refunded {amount} cents to {email}"
