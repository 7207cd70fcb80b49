"""Tests of the endpoint kit (mq_bridge.endpoints.kit)."""
