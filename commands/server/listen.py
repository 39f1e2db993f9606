"""`--listen HOST:PORT | unix:PATH`, and the rule that only loopback (or a unix
socket) may go without a token (SPEC §11: `auth_required`, before anything binds)."""

import ipaddress
from typing import NamedTuple

from quotaledger.journal import InvalidInput
from quotaledger.services.metrics_http import parse_listen

DEFAULT_PORT = 8765
DEFAULT_LISTEN = f"127.0.0.1:{DEFAULT_PORT}"
AUTH_REQUIRED = "auth_required"


class Address(NamedTuple):
    host: str
    port: int
    unix_path: str | None

    def shown(self) -> str:
        return f"unix:{self.unix_path}" if self.unix_path else f"http://{self.host}:{self.port}"


def parse_address(text: str) -> Address:
    if text.startswith("unix:"):
        return Address("", 0, text.removeprefix("unix:"))
    host, port = parse_listen(text)
    return Address(host, port, None)


def is_loopback(address: Address) -> bool:
    if address.unix_path is not None or address.host == "localhost":
        return True
    try:
        return ipaddress.ip_address(address.host).is_loopback
    except ValueError:
        return False


def check_exposure(address: Address, has_token: bool) -> None:
    if not has_token and not is_loopback(address):
        raise InvalidInput(
            f"listening on {address.host} (not loopback) needs --token-file",
            code=AUTH_REQUIRED,
        )
