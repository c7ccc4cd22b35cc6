"""The admin commands of `mowdeck`: migrations, streams, NATS configuration, grants, users."""
