# SPDX-License-Identifier: Apache-2.0
"""vLLM's connector base classes where vLLM imports; stand-ins with the same
names and method signatures where it does not, so kvferry.vllm imports and is
tested without vLLM.

The stand-ins follow vllm/distributed/kv_transfer/kv_connector/v1/base.py at
vLLM commit 00f4240ee6458263d76cf51ca7901ce1350bb4d1 (docs/vllm.md): the
methods a scheduler and a model runner of that commit call, with their
defaults. They are written here, not copied: only the interface is the same.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any, Dict, Iterable, Optional, Set, Tuple

try:  # the real classes, where vLLM is installed
    from vllm.distributed.kv_transfer.kv_connector.v1.base import (  # type: ignore
        KVConnectorBase_V1,
        KVConnectorHandshakeMetadata,
        KVConnectorMetadata,
        KVConnectorRole,
    )

    try:  # newer vLLM: the HMA marker (request_finished_all_groups)
        from vllm.distributed.kv_transfer.kv_connector.v1.base import SupportsHMA  # type: ignore
    except ImportError:  # pragma: no cover - older vLLM
        class SupportsHMA:  # type: ignore[no-redef]
            pass
    try:  # 00f4240: get_transfer_results returns this
        from vllm.distributed.kv_transfer.kv_connector.v1.base import (  # type: ignore
            KVConnectorTransferResults,
        )
    except ImportError:  # pragma: no cover - older vLLM: get_finished only
        KVConnectorTransferResults = None  # type: ignore
    HAVE_VLLM = True
except ImportError:
    HAVE_VLLM = False

    class KVConnectorRole(enum.Enum):  # type: ignore[no-redef]
        SCHEDULER = 0  # in the engine core's process, beside the scheduler
        WORKER = 1     # in each worker process, beside the model runner

    class KVConnectorMetadata:  # type: ignore[no-redef]
        """What the scheduler-side connector hands the worker-side one each
        step (build_connector_meta -> bind_connector_metadata)."""

    class KVConnectorHandshakeMetadata:  # type: ignore[no-redef]
        """What a worker tells its scheduler-side connector once, after its
        KV caches are registered (get_handshake_metadata ->
        set_xfer_handshake_metadata_pp_aware); must be picklable."""

    class SupportsHMA:  # type: ignore[no-redef]
        """Marker: the connector has request_finished_all_groups."""

    @dataclass
    class KVConnectorTransferResults:  # type: ignore[no-redef]
        """A worker's completions of one step (failed receives are also in
        finished_recving)."""

        finished_sending: Set[str] = field(default_factory=set)
        finished_recving: Set[str] = field(default_factory=set)
        failed_recving: Set[str] = field(default_factory=set)
        prefix_replay_checkpoints: Dict[str, Tuple[str, int, str]] = field(default_factory=dict)

    class KVConnectorBase_V1:  # type: ignore[no-redef]  # noqa: N801 - vLLM's name
        """The interface of vLLM's KVConnectorBase_V1 (scheduler and worker
        sides), with its defaults."""

        def __init__(self, vllm_config: Any, role: KVConnectorRole,
                     kv_cache_config: Any = None):
            if getattr(vllm_config, "kv_transfer_config", None) is None:
                raise ValueError("kv_transfer_config must be set for KVConnectorBase_V1")
            self._connector_metadata: Optional[KVConnectorMetadata] = None
            self._vllm_config = vllm_config
            self._kv_transfer_config = vllm_config.kv_transfer_config
            self._kv_cache_config = kv_cache_config
            self._kv_cache_manager = None
            self._role = role

        @property
        def role(self) -> KVConnectorRole:
            return self._role

        @property
        def requires_kv_delivery(self) -> bool:
            return bool(self._kv_transfer_config.is_kv_producer)

        @property
        def supports_divergent_local_hybrid_hits(self) -> bool:
            return False

        # ---- worker side
        def bind_connector_metadata(self, connector_metadata: KVConnectorMetadata) -> None:
            self._connector_metadata = connector_metadata

        def clear_connector_metadata(self) -> None:
            self._connector_metadata = None

        def _get_connector_metadata(self) -> KVConnectorMetadata:
            assert self._connector_metadata is not None
            return self._connector_metadata

        def has_connector_metadata(self) -> bool:
            return self._connector_metadata is not None

        def get_mem_pool_context(self) -> Any:
            return None

        def register_kv_caches(self, kv_caches: Dict[str, Any]) -> None:
            return None

        def set_host_xfer_buffer_ops(self, copy_operation: Any) -> None:
            return None

        def finish_forward(self) -> None:
            return None

        def reset_capture_state(self) -> None:
            return None

        def handle_preemptions(self, kv_connector_metadata: KVConnectorMetadata) -> None:
            return None

        def start_load_kv(self, forward_context: Any, **kwargs: Any) -> None:
            raise NotImplementedError

        def wait_for_layer_load(self, layer_name: str) -> None:
            raise NotImplementedError

        def save_kv_layer(self, layer_name: str, kv_layer: Any, attn_metadata: Any,
                          **kwargs: Any) -> None:
            raise NotImplementedError

        def wait_for_save(self) -> None:
            raise NotImplementedError

        def get_finished(self, finished_req_ids: Set[str]
                         ) -> Tuple[Optional[Set[str]], Optional[Set[str]]]:
            return None, None

        def get_transfer_results(self, finished_req_ids: Set[str]) -> KVConnectorTransferResults:
            sending, recving = self.get_finished(finished_req_ids)
            return KVConnectorTransferResults(finished_sending=set(sending or ()),
                                              finished_recving=set(recving or ()))

        def get_block_ids_with_load_errors(self) -> Set[int]:
            return set()

        def shutdown(self) -> None:
            return None

        def get_kv_connector_stats(self) -> Any:
            return None

        def get_kv_connector_kv_cache_events(self) -> Any:
            return None

        def get_handshake_metadata(self) -> Optional[KVConnectorHandshakeMetadata]:
            return None

        def build_connector_worker_meta(self) -> Any:
            return None

        # ---- scheduler side
        def bind_kv_cache_manager(self, kv_cache_manager: Any) -> None:
            self._kv_cache_manager = kv_cache_manager
            self.bind_gpu_block_pool(getattr(kv_cache_manager, "block_pool", None))

        def bind_gpu_block_pool(self, gpu_block_pool: Any) -> None:
            return None

        def get_num_new_matched_tokens(self, request: Any, num_computed_tokens: int
                                       ) -> Tuple[Optional[int], bool]:
            raise NotImplementedError

        def update_state_after_alloc(self, request: Any, blocks: Any,
                                     num_external_tokens: int) -> None:
            raise NotImplementedError

        def build_connector_meta(self, scheduler_output: Any) -> KVConnectorMetadata:
            raise NotImplementedError

        def on_new_request(self, request: Any) -> None:
            return None

        def update_connector_output(self, connector_output: Any) -> None:
            return None

        def can_load_prefix_replay_checkpoint(self, request: Any, num_local_tokens: int,
                                              num_external_tokens: int) -> bool:
            return False

        def consume_prefix_replay_checkpoint(self, request: Any, num_hit_tokens: int) -> bool:
            return False

        def request_finished(self, request: Any, block_ids: list
                             ) -> Tuple[bool, Optional[Dict[str, Any]]]:
            return False, None

        def register_finished_partial_tail(self, request: Any, block_ids: Any,
                                           partial_tail_offloads: Any) -> bool:
            return False

        def take_events(self) -> Iterable[Any]:
            return ()

        def has_pending_block_frees(self) -> bool:
            return False

        def has_pending_push_work(self) -> bool:
            return False

        @classmethod
        def get_required_kvcache_layout(cls, vllm_config: Any) -> Optional[str]:
            if cls is KVConnectorBase_V1:
                raise TypeError("get_required_kvcache_layout should not be called on the "
                                "abstract base class")
            return None

        @classmethod
        def requires_piecewise_for_cudagraph(cls, extra_config: Dict[str, Any]) -> bool:
            return False

        def get_finished_count(self) -> Optional[int]:
            return None

        @classmethod
        def build_kv_connector_stats(cls, data: Optional[Dict[str, Any]] = None) -> Any:
            return None

        def set_xfer_handshake_metadata(self, metadata: Dict[int, KVConnectorHandshakeMetadata]
                                        ) -> None:
            return None

        def set_xfer_handshake_metadata_pp_aware(
                self, metadata: Dict[Tuple[int, int], KVConnectorHandshakeMetadata]) -> None:
            if any(pp != 0 for pp, _ in metadata):
                raise ValueError(f"{type(self).__name__} received pp_rank > 0 handshake "
                                 "metadata but does not support PP-disaggregated KV transfer.")
            self.set_xfer_handshake_metadata({tp: m for (_, tp), m in metadata.items()})

        @classmethod
        def build_prom_metrics(cls, vllm_config: Any, metric_types: Any, labelnames: Any,
                               per_engine_labelvalues: Any) -> Any:
            return None

        def reset_cache(self) -> Optional[bool]:
            return None


def status_name(status: Any) -> str:
    """A vLLM RequestStatus by name ("FINISHED_LENGTH_CAPPED"), without
    importing vllm.v1.request."""
    return str(getattr(status, "name", status))
