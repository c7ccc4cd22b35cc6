"""The service kit: settings, bus, HTTP, logging, lifecycle and migrations for every service."""
