"""Redis endpoints: `redis_streams` (streams and consumer groups) and `redis` (pub/sub).

Two registered endpoints (named in `REGISTRATIONS`) share this package, its options, its
connection code and its driver (redis-py with hiredis, the sync client:
``pip install 'twainmq[redis]'``):

    redis_streams   mq_bridge.endpoints.redis.streams   at least once: XADD, XREADGROUP, XACK
    redis           mq_bridge.endpoints.redis.pubsub    at most once: PUBLISH, SUBSCRIBE

Each registration module opens with the endpoint's docstring (features, URL, options).
Modules: `options` (both declarations), `client` (shared connections, errors), `commands`
(raw pipelined I/O on a held connection: the hot path), `codec` (the stream entry format,
encoded and decoded as RESP), `readers` (group member and tail reader), `input` / `output`
(redis_streams), `channels` (redis pub/sub). Nothing here imports redis-py until an endpoint
connects.
"""

from __future__ import annotations

#: The endpoints registered from this package: config name -> the module that builds it
#: (the entries of `mq_bridge.endpoints.registry.ENDPOINT_MODULES` that point here).
REGISTRATIONS: dict[str, str] = {
    "redis_streams": "mq_bridge.endpoints.redis.streams",
    "redis": "mq_bridge.endpoints.redis.pubsub",
}
