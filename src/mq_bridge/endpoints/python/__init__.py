"""Endpoints and middleware written in Python and registered at run time.

`mq_bridge.register_endpoint(name, factory)` makes `name` an endpoint of every config
(``{name: {...}}``, ``{"custom": {"name": name, "config": {...}}}`` or ``{"ref": name}``);
`mq_bridge.register_middleware(name, factory)` makes ``{"custom": {"name": name, "config":
{...}}}`` usable in any ``middlewares`` list. The objects the factories return follow
mq-bridge 1.2.0's Python plugin interface (see `adapters` and `registry`); the adapters
turn them into this package's `InputEndpoint`/`OutputEndpoint`, so routes, publishers,
consumers and middleware treat them like any built-in endpoint.
"""
