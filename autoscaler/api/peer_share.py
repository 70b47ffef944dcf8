"""One peer address's share of a bounded resource, so that one pod cannot take all of it.

Kube's priority-and-fairness gives each flow a share of its priority level's limit; here the flow is the peer
address, and the share a quarter of the bound (`peer_share`). Two bounds use it: TokenReviews of tokens not known
under way (`authn.TokenAuthenticator`, of `--max-in-flight-reviews`) and connections holding a place
(`connection_room.ConnectionGuard`, of `--max-connections`). Both derive the share from their bound rather than a
flag of its own, as kube derives a flow's share from its level's limit: raising the bound raises both.
"""

from __future__ import annotations

PEER_SHARE_DIVISOR = 4
"""A peer address's share is a quarter of the bound (`peer_share`)."""


def peer_share(bound: int) -> int:
    """What one peer address may hold of `bound`: `bound // 4`, at least 1. A quarter, not less: several clients
    can share an address (pods on the host network, clients behind SNAT, the aggregator's proxy for every
    client of the API), and the share must leave them room. Not more: one pod holding its share leaves three
    quarters of the bound to everyone else; it takes four addresses to fill it. With a bound under 8 the share
    is 1."""
    return max(1, bound // PEER_SHARE_DIVISOR)


class PeerCounts:
    """How much of a bound each peer address holds now, and its share (`peer_share`). A peer holding nothing has
    no entry, so the counts hold only the peers present."""

    def __init__(self, bound: int) -> None:
        self.share = peer_share(bound)
        self._held: dict[str, int] = {}

    def held(self, peer: str) -> int:
        return self._held.get(peer, 0)

    def take(self, peer: str) -> None:
        self._held[peer] = self._held.get(peer, 0) + 1

    def give_back(self, peer: str) -> None:
        left = self._held.pop(peer, 1) - 1
        if left:
            self._held[peer] = left
