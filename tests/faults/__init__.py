"""Fault tests: brokers restarted, routes killed, disks filled, under running routes."""
