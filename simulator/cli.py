"""``mowdeck sim``: run N virtual mowers and publish their registrations."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import math
import signal
import sys
import uuid
from pathlib import Path

import aiohttp
import msgspec
import structlog
import yarl

from contracts.v1 import MowerRegistration
from mowdeck.errors import MowdeckError
from mowdeck.kit.garbage_collector import freeze_long_lived, set_young_threshold
from mowdeck.kit.logging import configure_logging
from simulator.automower.bridge import AutomowerBridges
from simulator.fleet import FleetConfig
from simulator.openmower.bridge import OpenMowerBridges
from simulator.server import SimulatorServer

__all__ = ["SimulatorStartError", "configure", "register", "run"]

log = structlog.get_logger("simulator")
_REGISTER_CONCURRENCY = 16
_GC_YOUNG_THRESHOLD = 20_000
_MAX_PORT = 65535


class SimulatorStartError(MowdeckError):
    """The simulator could not start: the address cannot be listened on, a file not written."""


def _listen(value: str) -> tuple[str, int]:
    host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit():
        raise argparse.ArgumentTypeError(f"expected HOST:PORT, got {value!r}")
    if int(port) > _MAX_PORT:
        raise argparse.ArgumentTypeError(f"port must be 0 to {_MAX_PORT}, got {port}")
    return host.strip("[]") or "127.0.0.1", int(port)


def _positive(value: str) -> float:
    """A finite number above zero (not ``0``, ``-1``, ``nan`` or ``inf``)."""
    try:
        number = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {value!r}") from None
    if not math.isfinite(number) or number <= 0.0:
        raise argparse.ArgumentTypeError(f"expected a positive finite number, got {value!r}")
    return number


def _output_file(value: str) -> Path:
    """A file path whose folder exists (the file itself is written later)."""
    path = Path(value)
    if not path.parent.is_dir():
        raise argparse.ArgumentTypeError(f"folder {str(path.parent)!r} does not exist")
    return path


def configure(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``mowdeck sim``."""
    parser.add_argument("--mowers", type=int, default=10, help="number of virtual mowers")
    parser.add_argument(
        "--listen",
        type=_listen,
        default=("127.0.0.1", 8090),
        metavar="HOST:PORT",
        help="device and /sim API address (port 0: any)",
    )
    parser.add_argument("--public-host", help="host put into the mowers' URLs (default: listen)")
    parser.add_argument("--account", type=uuid.UUID, help="account id of every mower")
    parser.add_argument("--speed", type=_positive, default=1.0, help="simulated seconds per second")
    parser.add_argument("--seed", type=int, help="make ids and behaviour reproducible")
    parser.add_argument(
        "--report-interval",
        type=_positive,
        default=1.0,
        help="simulated seconds between periodic states",
    )
    parser.add_argument("--autostart", action="store_true", help="start mowing at once")
    parser.add_argument(
        "--bootstrap-file",
        type=_output_file,
        help="write the registrations as JSON (MOWDECK_BOOTSTRAP_MOWERS format)",
    )
    parser.add_argument(
        "--register",
        metavar="URL",
        help="register the mowers with Fleet at URL (POST URL/v1/mowers)",
    )
    parser.add_argument("--token", help="bearer token for --register")
    parser.add_argument(
        "--protocol",
        choices=("mowdeck", "openmower", "automower"),
        default="mowdeck",
        help="what the mowers speak: Mowdeck's device protocol, OpenMower's MQTT "
        "interface through --broker, or Automower Connect through a stand-in of its cloud "
        "on --cloud-listen (docs/adapters.md)",
    )
    parser.add_argument(
        "--cloud-listen",
        type=_listen,
        default=("127.0.0.1", 0),
        metavar="HOST:PORT",
        help="where --protocol automower serves its stand-in cloud (port 0: any)",
    )
    parser.add_argument(
        "--credentials",
        type=int,
        default=1,
        metavar="N",
        help="--protocol automower: application keys the mowers are spread over",
    )
    parser.add_argument(
        "--credentials-dir",
        type=Path,
        metavar="DIR",
        help="--protocol automower: write each key as DIR/<name>.json "
        "(the gateway's MOWDECK_GATEWAY_CREDENTIALS_DIR)",
    )
    parser.add_argument(
        "--broker",
        default="mqtt://127.0.0.1:1883",
        metavar="mqtt://HOST:PORT",
        help="the MQTT broker of --protocol openmower",
    )
    parser.add_argument("--log-level", default="info")


async def run(args: argparse.Namespace) -> int:
    """Serve the mowers until SIGINT or SIGTERM.

    Raises ``SimulatorStartError`` (a ``MowdeckError``) when the address cannot be
    listened on, the broker (``--protocol openmower``) not reached, or the bootstrap file
    cannot be written.
    """
    configure_logging(args.log_level)
    protocol = getattr(args, "protocol", "mowdeck")
    broker = _broker(args.broker) if protocol == "openmower" else None
    stop = _stop_on_signals()
    server = await _serve(args)
    bridges: OpenMowerBridges | None = None
    cloud: AutomowerBridges | None = None
    # The mowers live as long as the process: keep full collections from walking them,
    # and let the frames and commands in flight die young (see mowdeck.kit.garbage_collector).
    freeze_long_lived("mowers built")
    set_young_threshold(_GC_YOUNG_THRESHOLD)
    try:
        regs = server.registrations()
        if broker is not None:
            bridges = OpenMowerBridges(server.fleet, broker.host or "", broker.port or 1883)
            try:
                await bridges.start()
            except (TimeoutError, OSError) as err:
                why = str(err) or "no connection within 10 s"
                raise SimulatorStartError(f"cannot reach the broker {broker}: {why}") from None
            regs = bridges.registrations(str(broker))
        if protocol == "automower":
            cloud = await _cloud(args, server)
            regs = cloud.registrations()
        await _publish(args, regs)
        log.info(
            "simulator running",
            url=server.url,
            mowers=len(regs),
            speed=args.speed,
            account_id=str(server.fleet.account_id),
            protocol=protocol,
        )
        if broker is not None:
            print(f"{len(regs)} mowers speak OpenMower on {broker}; /sim on {server.url}")
        if cloud is not None:
            _announce(cloud, args.credentials_dir)
        print(f"simulator listening on {server.url} with {len(regs)} mowers", flush=True)
        await stop.wait()
    finally:
        if bridges is not None:
            await bridges.stop()
        if cloud is not None:
            await cloud.stop()
        await server.stop()
    return 0


async def _cloud(args: argparse.Namespace, server: SimulatorServer) -> AutomowerBridges:
    """The mowers in a stand-in Automower Connect cloud, its keys written out."""
    host, port = args.cloud_listen
    cloud = AutomowerBridges(server.fleet, credentials=args.credentials, host=host, port=port)
    try:
        await cloud.start()
    except OSError as err:
        await cloud.stop()
        raise SimulatorStartError(f"cannot listen on {host}:{port}: {_why(err)}") from err
    if args.credentials_dir is not None:
        try:
            cloud.write_credentials(args.credentials_dir)
        except OSError as err:
            await cloud.stop()
            raise SimulatorStartError(
                f"cannot write the credentials to {str(args.credentials_dir)!r}: {_why(err)}"
            ) from err
    return cloud


def _announce(cloud: AutomowerBridges, folder: Path | None) -> None:
    """What a gateway needs to reach the stand-in cloud."""
    print(f"{len(cloud.bridges)} mowers speak Automower Connect on {cloud.cloud.base}")
    for name, value in cloud.endpoints.items():
        print(f"  {name}={value}")
    netloc = cloud.cloud.base.removeprefix("http://")
    print(f"  MOWDECK_GATEWAY_DEVICE_HOSTS must list {netloc}")
    if folder is not None:
        print(f"  MOWDECK_GATEWAY_CREDENTIALS_DIR={folder} ({len(cloud.logins)} keys)")
    else:
        print("  (no --credentials-dir: the keys were not written, the gateway cannot log in)")


def _broker(value: str) -> yarl.URL:
    url = yarl.URL(value)
    if (
        url.scheme != "mqtt"
        or not url.host
        or url.explicit_port is None
        or url.path not in ("", "/")
    ):
        raise SimulatorStartError(f"--broker: expected mqtt://HOST:PORT, got {value!r}")
    return url.with_path("")


async def _serve(args: argparse.Namespace) -> SimulatorServer:
    """The simulator's server, started (its mowers, physics, faults and /sim API)."""
    host, port = args.listen
    config = FleetConfig(
        mowers=args.mowers,
        account_id=args.account,
        seed=args.seed,
        speed=args.speed,
        report_interval=args.report_interval,
        autostart=args.autostart,
    )
    server = SimulatorServer(config, host=host, port=port, public_host=args.public_host)
    try:
        await server.start()
    except OSError as err:  # unknown host, port in use, no permission
        await server.stop()
        raise SimulatorStartError(f"cannot listen on {host}:{port}: {_why(err)}") from err
    return server


async def _publish(args: argparse.Namespace, regs: list[MowerRegistration]) -> None:
    """Write the bootstrap file and register with Fleet, as the arguments ask."""
    if args.bootstrap_file is not None:
        try:
            args.bootstrap_file.write_bytes(msgspec.json.encode(regs))
        except OSError as err:
            raise SimulatorStartError(
                f"cannot write {str(args.bootstrap_file)!r}: {_why(err)}"
            ) from err
    if args.register:
        failed = await register(args.register, regs, token=args.token)
        if failed:
            log.warning("some mowers were not registered", failed=failed, total=len(regs))


def _why(err: OSError) -> str:
    return err.strerror or str(err)


def _stop_on_signals() -> asyncio.Event:
    # Installed before anything is announced, so a signal right after start stops cleanly.
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError):  # no signal handlers on Windows
            loop.add_signal_handler(sig, stop.set)
    return stop


async def register(base_url: str, regs: list[MowerRegistration], *, token: str | None) -> int:
    """POST every mower to Fleet's ``/v1/mowers``; returns how many failed."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    url = base_url.rstrip("/") + "/v1/mowers"
    gate = asyncio.Semaphore(_REGISTER_CONCURRENCY)
    async with aiohttp.ClientSession(headers=headers) as http:

        async def one(reg: MowerRegistration) -> bool:
            body = {
                "mower_id": str(reg.mower_id),
                "account_id": str(reg.account_id),
                "name": reg.name,
                "connection": {"kind": reg.connection.kind, "options": reg.connection.options},
            }
            async with gate:
                try:
                    async with http.post(url, json=body) as resp:
                        # 409: registered by an earlier run with the same seed.
                        if resp.status < 300 or resp.status == 409:
                            return True
                        text = (await resp.text())[:300]
                        log.warning(
                            "registration refused",
                            mower_id=str(reg.mower_id),
                            status=resp.status,
                            body=text,
                        )
                except aiohttp.ClientError as err:
                    log.warning("registration failed", mower_id=str(reg.mower_id), error=str(err))
            return False

        results = await asyncio.gather(*(one(r) for r in regs))
    return sum(1 for ok in results if not ok)


if __name__ == "__main__":  # python -m simulator.cli ...
    _parser = argparse.ArgumentParser(prog="python -m simulator.cli")
    configure(_parser)
    try:
        sys.exit(asyncio.run(run(_parser.parse_args())))
    except MowdeckError as _err:
        print(f"{_parser.prog}: {_err}", file=sys.stderr)
        sys.exit(2)
    except KeyboardInterrupt:
        pass
