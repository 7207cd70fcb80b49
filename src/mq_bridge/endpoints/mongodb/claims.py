"""The work queue's claims: competing consumers take documents without ever sharing one.

A document is free when its `locked_until` is null or missing (mq-bridge writes null), or
lies in the past (its claimer died or gave up). A claim of up to `limit` documents:

    1. find    free documents matching the query, oldest `_id` first, `limit` of them
    2. update  those `_id`s that are STILL free: locked_until = now + lease,
               locked_by = a token new for this claim
    3. (only when step 2 modified fewer than it found: another consumer won some)
       find    which of them carry our token

Step 2 re-checks "free" per document atomically on the server, so a document another
consumer claimed after step 1 is not modified, and step 3 (or the full count) tells
exactly which documents are ours: two consumers never hold the same document while its
lease runs. (mq-bridge 0.3.2 does steps 1 and 2 without a token and then reads back *all*
the `_id`s of step 1, so a document another consumer won in between is delivered twice.)
Free-by-null and free-by-expiry are two plain filters (an equality and a range), each
claimed on its own: no `$or`, which the NX-27017 emulator mis-evaluates.

Ack deletes the documents; nack makes them free again (locked_until = null), only where
our token still holds (a lease that expired may belong to someone else by now).

Documents that are not messages are never claimed: mq-bridge 0.3.2's sequencer
(``seq_counter``) and cursor (``last_seq``) documents live in the message collection.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from pymongo import ASCENDING
from pymongo.collection import Collection

__all__ = ["Claim", "ClaimedDocuments", "Claims"]

#: mq-bridge 0.3.2 keeps these bookkeeping documents in the message collection.
_NOT_BOOKKEEPING = {"seq_counter": {"$exists": False}, "last_seq": {"$exists": False}}


class Claim:
    """One claim: its token and the `_id`s it holds, in claim order."""

    __slots__ = ("ids", "token")

    def __init__(self, token: str, ids: list[Any]) -> None:
        self.token = token
        self.ids = ids


ClaimedDocuments = tuple[Claim, list[Mapping[str, Any]]]


class Claims:
    """Claim, delete and release documents of one collection (see the module docstring)."""

    def __init__(
        self, collection: Collection[Any], query: Mapping[str, Any], lease_seconds: float
    ) -> None:
        self._collection = collection
        self._lease = lease_seconds
        self._query = dict(query)
        self._free = _all_of(query, {"locked_until": None, **_NOT_BOOKKEEPING})

    def ensure_index(self) -> None:
        """An index on `locked_until` (mq-bridge creates the same one)."""
        self._collection.create_index([("locked_until", ASCENDING)])

    def claim(self, limit: int) -> ClaimedDocuments:
        """Up to `limit` documents, now ours for the lease (oldest `_id` first)."""
        now = time.time()
        claim = Claim(uuid.uuid4().hex, [])
        lock = {"$set": {"locked_until": now + self._lease, "locked_by": claim.token}}
        documents = self._claim_where(self._free, None, limit, lock, claim)
        if len(documents) < limit:
            expired = {"$lt": now}
            free = _all_of(self._query, {"locked_until": expired, **_NOT_BOOKKEEPING})
            documents += self._claim_where(free, expired, limit - len(documents), lock, claim)
        return claim, documents

    def _claim_where(
        self,
        free: dict[str, Any],
        lease: Any,
        limit: int,
        lock: dict[str, Any],
        claim: Claim,
    ) -> list[Mapping[str, Any]]:
        """Claim up to `limit` documents matching `free` whose `locked_until` still
        matches `lease` (null: unlocked; a range: expired) when the update runs."""
        found = list(self._collection.find(free, sort=[("_id", ASCENDING)], limit=limit))
        if not found:
            return []
        ids = [document["_id"] for document in found]
        # The guard: only documents whose lease is still what the find saw. (The query and
        # the bookkeeping exclusion need no second look: they hold for these `_id`s.)
        still_free = {"_id": {"$in": ids}, "locked_until": lease}
        result = self._collection.update_many(still_free, lock)
        if result.modified_count < len(ids):  # another consumer won some of them
            ours = {
                _key(document["_id"])
                for document in self._collection.find(
                    {"_id": {"$in": ids}, "locked_by": claim.token}, {"_id": 1}
                )
            }
            found = [document for document in found if _key(document["_id"]) in ours]
        claim.ids.extend(document["_id"] for document in found)
        return found

    def delete(self, ids: Sequence[Any]) -> int:
        """Ack: the documents are done."""
        if not ids:
            return 0
        return self._collection.delete_many({"_id": {"$in": list(ids)}}).deleted_count

    def release(self, claim: Claim, ids: Sequence[Any] | None = None) -> int:
        """Nack: `claim`'s documents (or those of `ids`) are free again, oldest first."""
        ids = claim.ids if ids is None else ids
        if not ids:
            return 0
        update = {"$set": {"locked_until": None, "locked_by": None}}
        filter = {"_id": {"$in": list(ids)}, "locked_by": claim.token}
        return self._collection.update_many(filter, update).modified_count

    def pending(self) -> int:
        """Free documents (on NX-27017 `count_documents` miscounts null filters)."""
        return self._collection.count_documents(self._free)


def _all_of(first: Mapping[str, Any], second: Mapping[str, Any]) -> dict[str, Any]:
    """Both filters: merged when they share no field, else under `$and`."""
    if first.keys() & second.keys():
        return {"$and": [dict(first), dict(second)]}
    return {**first, **second}


def _key(value: Any) -> Any:
    """A hashable form of an `_id` (documents, lists and binaries included)."""
    if isinstance(value, (dict, list)):
        return repr(value)
    return value
