"""Mowdeck message contracts: versioned bus models, subjects and stream limits as data."""
