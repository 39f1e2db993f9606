"""Placeholder: the probe use cases are being built (their issue owns this module)."""

from __future__ import annotations

from commands.service_base import ServiceBase


class ProbeService(ServiceBase):
    pass
