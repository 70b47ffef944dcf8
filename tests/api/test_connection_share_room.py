"""The guard's promises about client addresses' shares at `--max-connections`, on any sequence of arrivals from a
few addresses, requests, answers (any status, handed over at once or not), stalled readers and hang-ups:

- a connection with a request in flight is never closed (unless its client stopped reading its answers), nor
  one whose answer is still in the process's buffers (`Transport.abort` in `test_connection_room` records it);
- a new connection from an address under its share (holding, with its connections in line, fewer places than a
  quarter of the bound) is never refused while an address over its share (holding more) has an idle place,
  nor while the line of new connections holds one of an address over its share (the user-visible case: one
  client reconnecting at once kept the line full): only a line full of connections of addresses each within
  its share refuses it (with the few addresses here, that never happens);
- what the guard counts per address is what each address holds and has in line.

The guard's own connections run on a real event loop; the transport and aiohttp's handler are the stand-ins of
`test_connection_room`, the transport with the client's address.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from dataclasses import dataclass
from typing import Any

from hypothesis import example, given, settings
from hypothesis import strategies as st

from autoscaler.api.guarded_connection import GuardedConnection
from autoscaler.api.peer_share import peer_share
from tests.api.test_connection_room import Transport, act, guard_of

PLACES = 4
SHARE = peer_share(PLACES)
ADDRESSES = ("10.0.0.1", "10.0.0.2", "10.0.0.3", "fd00::4")


@dataclass
class PeerTransport(Transport):
    address: str = ""

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return (self.address, 40000) if name == "peername" else default


KINDS = ["arrive", "arrive", "arrive", "serve", "serve", "request", "answer", "flush", "stall", "hang-up"]
events = st.lists(st.tuples(st.sampled_from(KINDS), st.integers(0, 7), st.integers(0, len(ADDRESSES) - 1),
                            st.sampled_from([200, 200, 401]), st.sampled_from([0, 0, 5])), max_size=70)

GREEDY_THEN_OTHER = ([("arrive", 0, 0, 200, 0)] * PLACES + [("serve", i, 0, 200, 0) for i in range(PLACES)]
                     + [("arrive", 0, 0, 200, 0)] * PLACES + [("arrive", 0, 1, 200, 0)])
"""One address holds every place, idle after an answer, and fills the line; then another address arrives."""


@settings(max_examples=400, deadline=None)
@given(events)
@example(GREEDY_THEN_OTHER)
@example([("arrive", 0, 0, 200, 0)] * PLACES + [("request", i, 0, 200, 0) for i in range(PLACES)]
         + [("arrive", 0, 0, 200, 0)] * PLACES + [("arrive", 0, 1, 200, 0), ("answer", 0, 0, 200, 0)])
def test_an_address_under_its_share_is_never_refused_for_one_over_it(
        steps: list[tuple[str, int, int, int, int]]) -> None:
    async def run() -> None:
        loop = asyncio.get_running_loop()
        guard = guard_of(PLACES)
        violations: list[str] = []
        transports: list[PeerTransport] = []

        def holding() -> Counter[str]:
            return Counter(t.address for t in transports if t.protocol._counted)

        def in_line() -> Counter[str]:
            return Counter(connection.peer for connection in guard.promised)

        def idle_over_share() -> bool:
            held = holding()
            return any(held[t.address] > SHARE and t.protocol in guard.waiting and not t.protocol.closing
                       and t.protocol.closable() and not t.closing for t in transports)

        try:
            for kind, index, address, status, unsent in steps:
                live = [t for t in transports if not t.closing and t.protocol._counted]
                chosen = live[index % len(live)] if live else None
                if kind == "arrive":
                    peer = ADDRESSES[address]
                    under = holding()[peer] + in_line()[peer] < SHARE
                    line_full = len(guard.promised) >= PLACES
                    line_within_shares = all(holding()[c.peer] + in_line()[c.peer] <= SHARE for c in guard.promised)
                    idle_over = idle_over_share()
                    protocol = guard()
                    assert isinstance(protocol, GuardedConnection)
                    transport = PeerTransport(loop, protocol, violations, peers=transports, address=peer)  # type: ignore[arg-type]
                    transports.append(transport)
                    protocol.connection_made(transport)  # type: ignore[arg-type]
                    refused = transport.closing and not protocol._counted and protocol not in guard.promised
                    if refused and under:  # only for a line full of addresses within their shares
                        assert line_full and line_within_shares, ("refused under its share", steps)
                        assert not idle_over, ("refused under its share while one over it idles", steps)
                elif chosen is not None:
                    act(chosen, kind, status, unsent)
                for _ in range(3):
                    await asyncio.sleep(0)
                assert not violations, (violations, steps)
                assert guard.open == sum(holding().values()) <= PLACES
                assert len(guard.promised) <= PLACES
                assert {p: guard.held.held(p) for p in ADDRESSES} == {p: holding()[p] for p in ADDRESSES}
                assert {p: guard.lined.held(p) for p in ADDRESSES} == {p: in_line()[p] for p in ADDRESSES}
        finally:
            for transport in transports:
                transport.protocol._release()

    asyncio.run(run())


def test_the_greedy_example_is_served_ahead() -> None:
    """The shape of the user-visible case (`test_connection_peer_share`), step by step: the other address's
    connection is neither refused nor left behind the greedy address's line."""
    async def run() -> None:
        loop = asyncio.get_running_loop()
        guard = guard_of(PLACES)
        violations: list[str] = []
        transports: list[PeerTransport] = []

        def arrive(peer: str) -> PeerTransport:
            protocol = guard()
            assert isinstance(protocol, GuardedConnection)
            transport = PeerTransport(loop, protocol, violations, peers=transports, address=peer)  # type: ignore[arg-type]
            transports.append(transport)
            protocol.connection_made(transport)  # type: ignore[arg-type]
            return transport

        try:
            greedy = [arrive(ADDRESSES[0]) for _ in range(PLACES)]
            for transport in greedy:
                act(transport, "request", 200, 0)  # every place busy
            waiting = [arrive(ADDRESSES[0]) for _ in range(PLACES)]  # the line full of the greedy address
            other = arrive(ADDRESSES[1])
            await asyncio.sleep(0)
            assert other.protocol in guard.promised and not other.closing
            assert sum(t.closing for t in waiting) == 1  # the newest of the greedy line gave its line place
            act(greedy[0], "answer", 200, 0)  # a place frees: the other address's
            for _ in range(3):
                await asyncio.sleep(0)
            assert other.protocol._counted
            assert not violations
        finally:
            for transport in transports:
                transport.protocol._release()

    asyncio.run(run())
