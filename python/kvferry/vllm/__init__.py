# SPDX-License-Identifier: Apache-2.0
"""kvferry as a KV connector of vLLM (v1 connector API).

vLLM loads it with
    --kv-transfer-config '{"kv_connector": "KVFerryConnector",
                           "kv_connector_module_path": "kvferry.vllm",
                           "kv_role": "kv_producer" | "kv_consumer" | "kv_both",
                           "kv_connector_extra_config": {"kvferry_overrides": {...}}}'
(docs/vllm.md: launch lines, config keys, what maps to what).

The connector subclasses vLLM's own KVConnectorBase_V1: the package needs
vLLM (docs/vllm.md names the tested release, vllm 0.31.0)."""
from ._compat import HAVE_VLLM, KVConnectorBase_V1, KVConnectorMetadata, KVConnectorRole
from .connector import KVFerryConnector
from .mapping import (
    PARAMS_KEY,
    CacheLayout,
    ParamsError,
    PrefillInfo,
    RankMap,
    cache_layout,
    layer_index,
    pack_user_data,
    prefill_info,
    rank_map,
    room_id_of,
)
from .metadata import KVFerryConnectorMetadata, KVFerryHandshake, RecvSpec, SendSpec
from .stats import KVFerryPromMetrics, KVFerryStats

__all__ = [
    "HAVE_VLLM", "KVConnectorBase_V1", "KVConnectorMetadata", "KVConnectorRole",
    "KVFerryConnector", "KVFerryConnectorMetadata", "KVFerryHandshake", "KVFerryPromMetrics",
    "KVFerryStats", "RecvSpec", "SendSpec",
    "PARAMS_KEY", "CacheLayout", "ParamsError", "PrefillInfo", "RankMap", "cache_layout",
    "layer_index", "pack_user_data", "prefill_info", "rank_map", "room_id_of",
]
