"""Tools that use what their module defines, as users write them: shipped inline, they must carry it along.

`quote` reads a module constant and the modules and names imported at the top;
the others use what cannot go into a sandbox, and must be refused when sent.
"""

from __future__ import annotations

import math
import threading
from decimal import Decimal

from codeward import tool

PRICES = {"apple": "0.35", "pear": "0.50"}
VAT = 0.25
LOCK = threading.Lock()


def round_to_cents(amount: Decimal) -> Decimal:
    return amount.quantize(Decimal("0.01"))


@tool
def quote(item: str, quantity: int) -> str:
    """The price of some items with VAT, and how many boxes of ten they fill.

    Args:
        item: what to buy
        quantity: how many
    """
    total = Decimal(PRICES[item]) * quantity * Decimal(str(1 + VAT))
    return f"{total:.2f} in {math.ceil(quantity / 10)} boxes"


@tool
def rounded_quote(item: str) -> str:
    """The price of one item, rounded by a helper defined beside the tool.

    Args:
        item: what to buy
    """
    return str(round_to_cents(Decimal(PRICES[item])))


@tool
def locked_count(n: int) -> int:
    """Counts under a lock made when the module loaded.

    Args:
        n: the count
    """
    with LOCK:
        return n


@tool
def quote_one(item: str) -> str:
    """The price of one item, asked of the other tool.

    Args:
        item: what to buy
    """
    return quote(item, 1)
