"""Husqvarna's Automower Connect API: its messages and a stand-in of its cloud.

The gateway's ``automower`` adapter reads the messages through ``protocol``; tests run
``standin`` (token endpoint, REST API, WebSocket) in place of the vendor's cloud.
"""
