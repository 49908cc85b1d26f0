"""A docker sandbox's egress: what it may reach through a proxy of its own on the host, and what the host adds.

`DockerExecutor(egress=[...], egress_headers={...})` uses it; `PYPI` is the list pip needs.
"""

from codeward.egress.policy import PYPI, EgressPolicy, parse_policy
from codeward.egress.proxy import EgressBudget, EgressUnavailable

__all__ = ["PYPI", "EgressBudget", "EgressPolicy", "EgressUnavailable", "parse_policy"]
