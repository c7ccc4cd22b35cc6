"""Notifications: rules, recipients, inbox and delivery (ADR 0022)."""
