# SPDX-License-Identifier: Apache-2.0
"""KVFerryConnector: the class vLLM's KVConnectorFactory loads
(kv_connector "KVFerryConnector", kv_connector_module_path "kvferry.vllm").
vLLM builds it twice: role SCHEDULER in the engine core (scheduler.py's
half) and role WORKER in each worker (worker.py's half); each method
belongs to one of them, as in vLLM's own NixlConnector."""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Dict, Optional, Set, Tuple

from ._compat import KVConnectorBase_V1, KVConnectorRole
from .metadata import KVFerryConnectorMetadata, KVFerryHandshake
from .scheduler import SchedulerSide
from .stats import KVFerryPromMetrics, KVFerryStats
from .worker import WorkerSide

if TYPE_CHECKING:
    from vllm.config import VllmConfig
    from vllm.v1.kv_cache_interface import KVCacheConfig

log = logging.getLogger("kvferry.vllm")


def _role_flags(ktc: Any) -> Tuple[bool, bool]:
    role = str(getattr(ktc, "kv_role", "") or "")
    producer = bool(getattr(ktc, "is_kv_producer", role in ("kv_producer", "kv_both")))
    consumer = bool(getattr(ktc, "is_kv_consumer", role in ("kv_consumer", "kv_both")))
    if not (producer or consumer):
        raise ValueError(f"kv_role {role!r}: kvferry.vllm serves kv_producer, kv_consumer "
                         "or kv_both")
    return producer, consumer


def _one_group(kv_cache_config: Any) -> None:
    """kvferry moves one KV cache group; vLLM gives one once the hybrid
    manager is off, which it does itself for a connector that is not
    SupportsHMA. More than one here is a configuration vLLM should not
    make: said at start, not per request."""
    groups = getattr(kv_cache_config, "kv_cache_groups", None) or ()
    if len(groups) > 1:
        raise ValueError(f"kvferry.vllm moves one KV cache group, this model has "
                         f"{len(groups)} (the hybrid KV cache manager is on): run with "
                         "--disable-hybrid-kv-cache-manager")


class KVFerryConnector(KVConnectorBase_V1):
    """vLLM KV connector on kvferry: push transfers (the prefill writes into
    the decode's blocks), blocks freed at quiescence, failures through
    get_block_ids_with_load_errors, heterogeneous TP through kvferry's
    geometry. docs/vllm.md.

    Not SupportsHMA, on purpose: kvferry moves one KV cache group. With no
    preference given, vLLM then turns its hybrid KV cache manager off by
    itself (vllm/config/vllm.py: a sliding-window model runs with full
    attention blocks, one group), and refuses to start with it forced on
    (KVConnectorFactory.create_connector). docs/vllm.md, "Hybrid models"."""

    def __init__(self, vllm_config: "VllmConfig", role: KVConnectorRole,
                 kv_cache_config: "KVCacheConfig"):
        super().__init__(vllm_config, role, kv_cache_config)
        _one_group(kv_cache_config)
        ktc = vllm_config.kv_transfer_config
        self.engine_id = str(getattr(ktc, "engine_id", None) or "kvferry")
        producer, consumer = _role_flags(ktc)
        self.scheduler_side: Optional[SchedulerSide] = None
        self.worker_side: Optional[WorkerSide] = None
        if role == KVConnectorRole.SCHEDULER:
            self.scheduler_side = SchedulerSide(vllm_config, self.engine_id)
        elif role == KVConnectorRole.WORKER:
            self.worker_side = WorkerSide(vllm_config, self.engine_id, producer, consumer,
                                          kv_cache_config)
        else:
            raise ValueError(f"connector role {role!r}")

    # ---------------------------------------------------------------- class
    @classmethod
    def get_required_kvcache_layout(cls, vllm_config: Any) -> Optional[str]:
        """NHD (a block is [tokens, heads, head size]): kvferry slices heads
        token by token for ranks of different TP. MLA: any."""
        mc = getattr(vllm_config, "model_config", None)
        if mc is None or getattr(mc, "use_mla", False):
            return None
        return "NHD"

    # ---------------------------------------------------------------- scheduler side
    def _sched(self) -> SchedulerSide:
        assert self.scheduler_side is not None, "a scheduler-side method on a worker connector"
        return self.scheduler_side

    def get_num_new_matched_tokens(self, request: Any,
                                   num_computed_tokens: int) -> Tuple[Optional[int], bool]:
        return self._sched().get_num_new_matched_tokens(request, num_computed_tokens)

    def update_state_after_alloc(self, request: Any, blocks: Any,
                                 num_external_tokens: int) -> None:
        self._sched().update_state_after_alloc(request, blocks, num_external_tokens)

    def build_connector_meta(self, scheduler_output: Any) -> KVFerryConnectorMetadata:
        return self._sched().build_connector_meta(scheduler_output)

    def request_finished(self, request: Any, block_ids: list
                         ) -> Tuple[bool, Optional[Dict[str, Any]]]:
        return self._sched().request_finished(request, block_ids)

    def update_connector_output(self, connector_output: Any) -> None:
        self._sched().update_connector_output(connector_output)

    def has_pending_push_work(self) -> bool:
        """Prefill: blocks held for sends not yet reported finished keep the
        engine stepping (its workers' get_finished drives the sends)."""
        return bool(self.scheduler_side and self.scheduler_side.pending_sends)

    def set_xfer_handshake_metadata(self, metadata: Dict[int, Any]) -> None:
        self._sched().set_workers({(0, tp): m for tp, m in metadata.items()})

    def set_xfer_handshake_metadata_pp_aware(self, metadata: Dict[Tuple[int, int], Any]) -> None:
        self._sched().set_workers(metadata)

    # ---------------------------------------------------------------- worker side
    def _work(self) -> WorkerSide:
        assert self.worker_side is not None, "a worker-side method on a scheduler connector"
        return self.worker_side

    def register_kv_caches(self, kv_caches: Dict[str, Any]) -> None:
        self._work().register(kv_caches)

    def get_handshake_metadata(self) -> Optional[KVFerryHandshake]:
        return self._work().handshake() if self.worker_side is not None else None

    def start_load_kv(self, forward_context: Any, **kwargs: Any) -> None:
        """Decode: this step's receives start (ROOM_INFO to the prefill
        ranks); prefill: this step's sends are recorded. Nothing blocks."""
        if self.has_connector_metadata():
            self._work().take(self._metadata())

    def wait_for_layer_load(self, layer_name: str) -> None:
        """Nothing per layer: a request runs only once its whole KV landed."""

    def save_kv_layer(self, layer_name: str, kv_layer: Any, attn_metadata: Any,
                      **kwargs: Any) -> None:
        """Nothing per layer: the prefill's blocks are written to the decode
        after the request finished, from the blocks vLLM keeps for it."""

    def wait_for_save(self) -> None:
        """Nothing to wait for: no save runs during the forward."""

    def get_finished(self, finished_req_ids: Set[str]
                     ) -> Tuple[Optional[Set[str]], Optional[Set[str]]]:
        w = self._work()
        if self.has_connector_metadata():
            w.take(self._metadata())
        return w.finished(finished_req_ids)

    def _metadata(self) -> KVFerryConnectorMetadata:
        """This step's metadata: vLLM hands back what build_connector_meta made."""
        meta = self._get_connector_metadata()
        assert isinstance(meta, KVFerryConnectorMetadata), type(meta)
        return meta

    def get_block_ids_with_load_errors(self) -> Set[int]:
        return self._work().load_errors() if self.worker_side is not None else set()

    # ---------------------------------------------------------------- vLLM's metrics
    def get_kv_connector_stats(self) -> Optional[KVFerryStats]:
        """The rooms that ended since the last call (worker: by outcome, bytes,
        time) or the requests the scheduler side offered, asked for or refused;
        None when nothing happened."""
        side = self.worker_side or self.scheduler_side
        return side.take_stats() if side is not None else None

    @classmethod
    def build_kv_connector_stats(cls, data: Optional[Dict[str, Any]] = None
                                 ) -> Optional[KVFerryStats]:
        return KVFerryStats(data=dict(data or {}))

    @classmethod
    def build_prom_metrics(cls, vllm_config: "VllmConfig", metric_types: Any,
                           labelnames: Any, per_engine_labelvalues: Any
                           ) -> KVFerryPromMetrics:
        return KVFerryPromMetrics(vllm_config, metric_types, labelnames,
                                  per_engine_labelvalues)

    def shutdown(self) -> None:
        if self.worker_side is not None:
            self.worker_side.close()

    # ---------------------------------------------------------------- tests, logs
    def kvferry_outcomes(self) -> Dict[str, int]:
        """Rooms ended on this worker, by kind and reason ("recv ok", "send
        peer abort", ...)."""
        return dict(self.worker_side.outcomes) if self.worker_side is not None else {}
