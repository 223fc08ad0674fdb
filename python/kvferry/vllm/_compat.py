# SPDX-License-Identifier: Apache-2.0
"""vLLM's connector base classes, imported from the installed vLLM.

kvferry.vllm is a plugin of vLLM's v1 connector API and needs vLLM (the
release it is tested with: docs/vllm.md); without vLLM this module raises
ImportError saying so. There are no stand-ins: what kvferry subclasses is
vLLM's own KVConnectorBase_V1."""
from __future__ import annotations

from typing import Any

try:
    from vllm.distributed.kv_transfer.kv_connector.v1.base import (
        KVConnectorBase_V1,
        KVConnectorHandshakeMetadata,
        KVConnectorMetadata,
        KVConnectorRole,
    )
except ImportError as e:  # pragma: no cover - a host without vLLM
    raise ImportError(f"kvferry.vllm is a vLLM KV connector and needs vLLM installed "
                      f"(docs/vllm.md names the tested release): {e}") from e

HAVE_VLLM = True

__all__ = ["HAVE_VLLM", "KVConnectorBase_V1", "KVConnectorHandshakeMetadata",
           "KVConnectorMetadata", "KVConnectorRole", "status_name"]


def status_name(status: Any) -> str:
    """A vLLM RequestStatus by name ("FINISHED_LENGTH_CAPPED")."""
    return str(getattr(status, "name", status))
