"""The bridge's private runtime: building endpoints from config, running routes, delivery.

Nothing here is public API; the package root (`mq_bridge`) shows what users call.

    factory        endpoint config -> endpoint wrapped in its middleware (one registry each)
    constructors   from_file / from_str / from_config shared by Route, Publisher, Consumer
    connect        connect a route's endpoints within its startup timeout
    route_runner   the loop of a route: receive -> handle -> deliver -> ack, in source order
    delivery       sending a handled batch with retries while the route runs
    handler        calling the user's handler(s) and turning results into messages
    knobs          environment tuning read once when a route starts (MQ_BRIDGE_PY_*)
    gc_policy      when a route lets the garbage collector run
    log_setup      `init_logging`
"""
