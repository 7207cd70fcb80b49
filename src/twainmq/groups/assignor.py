"""The partition assignor: a pure function, balanced and sticky.

It decides which group member reads which partition. It does no I/O and keeps
no state, so every member (and every test) computes the same answer from the
same inputs.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping


def assign_partitions(
    partitions: Iterable[int],
    members: Iterable[str],
    previous: Mapping[str, Collection[int]] | None = None,
) -> dict[str, list[int]]:
    """Assign every partition to exactly one member.

    Balanced: the members' partition counts differ by at most one.
    Sticky: a member keeps every partition it had in ``previous`` unless it
    had more than its new fair share; only the surplus and the partitions of
    members that left move. When there is a choice, members that already
    hold more partitions get the larger shares, so fewer partitions move.

    Worked example: six partitions, ``a`` had 0-2 and ``b`` had 3-5, and
    ``c`` joins. Every member's share is two, so ``a`` keeps 0 and 1,
    ``b`` keeps 3 and 4, and only 2 and 5 move, to ``c``::

        >>> assign_partitions(range(6), ["a", "b", "c"],
        ...                   {"a": [0, 1, 2], "b": [3, 4, 5]})
        {'a': [0, 1], 'b': [3, 4], 'c': [2, 5]}

    If ``b`` then leaves, its partitions go to whoever is below the new
    share (three each), and nothing else moves::

        >>> assign_partitions(range(6), ["a", "c"],
        ...                   {"a": [0, 1], "b": [3, 4], "c": [2, 5]})
        {'a': [0, 1, 3], 'c': [2, 4, 5]}

    Partitions or members in ``previous`` that no longer exist are ignored,
    and a partition claimed twice in ``previous`` is kept by the first
    member (in sorted order) that claims it.
    """
    wanted = sorted(set(partitions))
    names = sorted(set(members))
    if not names:
        return {}
    kept = _valid_previous(wanted, names, previous or {})
    shares = _shares(len(wanted), names, kept)
    result = {name: kept[name][: shares[name]] for name in names}
    taken = {p for owned in result.values() for p in owned}
    free = iter(p for p in wanted if p not in taken)
    for name in names:
        while len(result[name]) < shares[name]:
            result[name].append(next(free))
        result[name].sort()
    return result


def _valid_previous(
    wanted: list[int], names: list[str], previous: Mapping[str, Collection[int]]
) -> dict[str, list[int]]:
    """Each member's previous partitions that still exist and nobody else claimed first."""
    existing = set(wanted)
    claimed: set[int] = set()
    kept: dict[str, list[int]] = {}
    for name in names:
        mine = sorted(p for p in set(previous.get(name, ())) if p in existing and p not in claimed)
        claimed.update(mine)
        kept[name] = mine
    return kept


def _shares(count: int, names: list[str], kept: Mapping[str, list[int]]) -> dict[str, int]:
    """How many partitions each member gets: the larger shares go to the biggest holders."""
    base, extra = divmod(count, len(names))
    by_holding = sorted(names, key=lambda name: (-len(kept[name]), name))
    return {name: base + (1 if rank < extra else 0) for rank, name in enumerate(by_holding)}
