# SPDX-License-Identifier: Apache-2.0
"""A vLLM instance reduced to what calls a KV connector, calling it in
exactly the order of vLLM commit 00f4240ee6458263d76cf51ca7901ce1350bb4d1
(docs/vllm.md names the files read). vLLM's code is not here: this is a
written-down call order with the least state that makes it run (requests,
a block pool, a scheduler loop, workers that "compute" a KV pattern), used
by tests/vllm/test_connector.py (no RDMA) and tests/vllm/vllm_rxe.py (two
processes on soft-RoCE).

The call order, file:function of that commit for each step:

 Start-up
  1. vllm/v1/worker/gpu_worker.py (init_device -> ensure_kv_transfer_initialized)
     -> vllm/distributed/kv_transfer/kv_connector/factory.py:
        KVConnectorFactory.create_connector(config, KVConnectorRole.WORKER,
        kv_cache_config): import kv_connector_module_path, getattr
        kv_connector, cls(config, role, kv_cache_config)       [Instance.__init__]
  2. vllm/v1/worker/gpu/kv_connector.py: ActiveKVConnector.__init__:
        register_kv_caches(kv_caches), set_host_xfer_buffer_ops(copy_kv_blocks)
                                                                 [Worker.__init__]
  3. vllm/v1/core/sched/scheduler.py: Scheduler.__init__:
        KVConnectorFactory.create_connector(..., KVConnectorRole.SCHEDULER, ...),
        connector.requires_kv_delivery, bind_kv_cache_manager(kv_cache_manager)
                                                              [Scheduler.__init__]
  4. vllm/v1/engine/core.py: EngineCore.__init__: each worker's
        get_handshake_metadata() keyed (pp_rank, tp_rank), merged, then the
        scheduler connector's set_xfer_handshake_metadata_pp_aware(content)
                                                                 [Instance.__init__]
 Per request
  5. scheduler.py: Scheduler.add_request -> connector.on_new_request(request)
                                                             [Scheduler.add_request]
 Per engine step (vllm/v1/engine/core.py: EngineCore.step: schedule,
 execute_model on every worker, update_from_output)            [Instance.step]
  6. scheduler.py: Scheduler.schedule: running requests first; then the
     waiting ones (kv_holding_waiting first): _handle_blocked_waiting_request
     (WAITING_FOR_REMOTE_KVS: promoted only when in finished_recving_kv_req_ids,
     through _update_waiting_for_remote_kv); for num_computed_tokens == 0: the
     local prefix hit, connector.get_num_new_matched_tokens(request,
     block_aligned_local) (None: skipped), allocate_slots,
     connector.update_state_after_alloc(request, get_blocks(id),
     num_external_computed_tokens); load_kv_async: WAITING_FOR_REMOTE_KVS and
     skipped; then SchedulerOutput(finished_req_ids=...),
     connector.build_connector_meta(scheduler_output) (_build_kv_connector_meta),
     _update_after_schedule (finished_req_ids cleared)       [Scheduler.schedule]
  7. vllm/v1/worker/kv_connector_model_runner_mixin.py:
     KVConnectorModelRunnerMixin._get_kv_connector_output (and no_forward when
     nothing is scheduled): bind_connector_metadata(meta); forward, where
     vllm/model_executor/layers/attention/kv_transfer_utils.py:
     maybe_transfer_kv_layer calls wait_for_layer_load(layer) before and
     save_kv_layer(layer, kv_cache, attn_metadata) after each attention layer;
     then start_load_kv(forward_context) (after the forward: no sync loads),
     wait_for_save(), get_transfer_results(finished_req_ids) (base: wraps
     get_finished), get_block_ids_with_load_errors(), get_kv_connector_stats(),
     get_kv_connector_kv_cache_events(), build_connector_worker_meta(),
     clear_connector_metadata()                           [Worker.execute_model]
     vllm/distributed/kv_transfer/kv_connector/utils.py: KVOutputAggregator:
     a request is finished once every worker reported it [Aggregator.aggregate]
  8. scheduler.py: Scheduler.update_from_output: failed_recving
     (_handle_failed_recving), invalid_block_ids (_handle_invalid_blocks: async
     loads truncated at their first invalid block; policy "recompute":
     failed_recving_kv_req_ids, "fail": finished as errors); per scheduled
     request its tokens, a stopped one _free_request -> _connector_finished
     (get_block_ids_for_computed_tokens) -> connector.request_finished(request,
     block_ids[0]) (or request_finished_all_groups with SupportsHMA) ->
     delay_free or _free_blocks; finish_requests(errors, FINISHED_ERROR);
     _update_from_kv_xfer_finished: connector.update_connector_output(output),
     finished_recving (WAITING_FOR_REMOTE_KVS: finished_recving_kv_req_ids;
     finished: _free_blocks), finished_sending (_free_blocks);
     connector.get_kv_connector_stats(), connector.take_events()
                                                    [Scheduler.update_from_output]
  9. scheduler.py: Scheduler.finish_requests(ids, FINISHED_ABORTED) (an abort):
     WAITING_FOR_REMOTE_KVS: delay_free_blocks unless in
     finished_recving_kv_req_ids; _free_request -> request_finished
                                                         [Scheduler.finish_requests]
 10. scheduler.py: Scheduler.has_requests: unfinished, finished waiting on
     the connector, or connector.has_pending_push_work()  [Scheduler.has_requests]
"""
from __future__ import annotations

import enum
import importlib
from typing import Any, Callable, Dict, List, Optional, Set, Tuple

import numpy as np


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


# ---------------------------------------------------------------- configs
class KVTransferConfig:
    """The fields of vLLM's KVTransferConfig a connector reads."""

    def __init__(self, kv_role: str, engine_id: str, extra: Optional[dict] = None,
                 kv_load_failure_policy: str = "recompute"):
        self.kv_connector = "KVFerryConnector"
        self.kv_connector_module_path = "kvferry.vllm"
        self.kv_role = kv_role
        self.engine_id = engine_id
        self.kv_connector_extra_config = dict(extra or {})
        self.kv_load_failure_policy = kv_load_failure_policy
        self.kv_buffer_device = "cuda"

    @property
    def is_kv_producer(self) -> bool:
        return self.kv_role in ("kv_producer", "kv_both")

    @property
    def is_kv_consumer(self) -> bool:
        return self.kv_role in ("kv_consumer", "kv_both")

    def get_from_extra_config(self, key: str, default: Any) -> Any:
        return self.kv_connector_extra_config.get(key, default)


class _NS:
    def __init__(self, **kw: Any):
        self.__dict__.update(kw)


class ModelShape:
    """The model as the KV cache sees it."""

    def __init__(self, layers: int = 4, kv_heads: int = 4, head_size: int = 16,
                 use_mla: bool = False, latent: int = 64, dtype: Any = np.float16):
        self.layers, self.kv_heads, self.head_size = layers, kv_heads, head_size
        self.use_mla, self.latent, self.dtype = use_mla, latent, np.dtype(dtype)

    def get_total_num_kv_heads(self) -> int:
        return self.kv_heads


def vllm_config(kv_role: str, engine_id: str, tp_size: int, model: ModelShape,
                block_size: int, extra: Optional[dict] = None,
                policy: str = "recompute") -> Any:
    mc = _NS(use_mla=model.use_mla, get_total_num_kv_heads=model.get_total_num_kv_heads)
    return _NS(kv_transfer_config=KVTransferConfig(kv_role, engine_id, extra, policy),
               cache_config=_NS(block_size=block_size),
               parallel_config=_NS(tensor_parallel_size=tp_size, pipeline_parallel_size=1),
               model_config=mc, max_concurrent_batches=1)


class KVConnectorRole(enum.Enum):
    SCHEDULER = 0
    WORKER = 1


def create_connector(config: Any, role_name: str, kv_cache_config: Any) -> Any:
    """factory.py: KVConnectorFactory.create_connector, for a connector that
    is not in vLLM's registry: import kv_connector_module_path, take the
    class named kv_connector, build it with (config, role, kv_cache_config)."""
    ktc = config.kv_transfer_config
    module = importlib.import_module(ktc.kv_connector_module_path)
    cls = getattr(module, ktc.kv_connector)
    role = getattr(module.KVConnectorRole, role_name)
    return cls(config, role, kv_cache_config)


# ---------------------------------------------------------------- requests
class RequestStatus(enum.IntEnum):
    WAITING = 0
    WAITING_FOR_REMOTE_KVS = 1
    RUNNING = 2
    PREEMPTED = 3
    FINISHED_STOPPED = 10
    FINISHED_LENGTH_CAPPED = 11
    FINISHED_ABORTED = 12
    FINISHED_ERROR = 13

    @property
    def finished(self) -> bool:
        return self >= RequestStatus.FINISHED_STOPPED


class Request:
    def __init__(self, request_id: str, prompt: List[int], max_tokens: int,
                 kv_transfer_params: Optional[dict] = None):
        self.request_id = request_id
        self.prompt_token_ids = list(prompt)
        self.max_tokens = max_tokens
        self.kv_transfer_params = kv_transfer_params
        self.status = RequestStatus.WAITING
        self.num_computed_tokens = 0
        self.output_token_ids: List[int] = []
        self.num_preemptions = 0

    @property
    def num_prompt_tokens(self) -> int:
        return len(self.prompt_token_ids)

    @property
    def num_tokens(self) -> int:
        return len(self.prompt_token_ids) + len(self.output_token_ids)

    def is_finished(self) -> bool:
        return self.status.finished


class KVCacheBlocks:
    def __init__(self, ids: List[int]):
        self._ids = list(ids)

    def get_block_ids(self, allow_none: bool = False) -> Tuple[List[int], ...]:
        return (list(self._ids),)


# ---------------------------------------------------------------- the KV pattern
def kv_pattern(tokens: np.ndarray, positions: np.ndarray, layer: int, kind: int,
               heads: np.ndarray, nbytes: int) -> np.ndarray:
    """The bytes of the KV of tokens (at their positions) for one layer and
    K/V, for the given global heads, nbytes per head: what a prefill's
    forward writes and a decode checks. [tokens, heads, nbytes] uint8."""
    t = tokens.astype(np.int64)[:, None, None]
    p = positions.astype(np.int64)[:, None, None]
    h = heads.astype(np.int64)[None, :, None]
    b = np.arange(nbytes, dtype=np.int64)[None, None, :]
    return ((t * 7 + p * 3 + layer * 13 + kind * 5 + h * 11 + b) % 251 + 1).astype(np.uint8)


class Cache:
    """One rank's KV cache: per layer a (2, blocks, block_size, heads,
    head_size) array (vLLM's FlashAttention layout, NHD) or an MLA (blocks,
    block_size, latent) array, in numpy host memory standing in for the GPU."""

    def __init__(self, model: ModelShape, tp_rank: int, tp_size: int, num_blocks: int,
                 block_size: int):
        self.model, self.block_size, self.num_blocks = model, block_size, num_blocks
        if model.use_mla:
            self.heads, self.head0 = 1, 0
            shape = (num_blocks, block_size, model.latent)
        else:
            total = model.kv_heads
            self.heads = max(1, total // tp_size)
            self.head0 = tp_rank * total // tp_size if tp_size >= total else tp_rank * self.heads
            shape = (2, num_blocks, block_size, self.heads, model.head_size)
        self.layers = {f"model.layers.{i}.self_attn.attn": np.zeros(shape, model.dtype)
                       for i in range(model.layers)}

    def kinds(self):
        """(layer, kind, a [blocks, tokens, heads, bytes] uint8 view)."""
        for i, a in enumerate(self.layers.values()):
            u = a.view(np.uint8)
            if self.model.use_mla:
                yield i, 0, u.reshape(self.num_blocks, self.block_size, 1, -1)
            else:
                for kind in (0, 1):
                    yield i, kind, u[kind]

    def write(self, blocks: List[int], tokens: List[int], start: int, end: int) -> None:
        """The forward's KV of positions [start, end) of a request into its blocks."""
        if end <= start:
            return
        tok = np.asarray(tokens[start:end])
        pos = np.arange(start, end)
        heads = np.arange(self.head0, self.head0 + self.heads)
        for layer, kind, v in self.kinds():
            pat = kv_pattern(tok, pos, layer, kind, heads, v.shape[-1])
            for j, p in enumerate(pos):
                v[blocks[p // self.block_size], p % self.block_size] = pat[j]

    def check(self, blocks: List[int], tokens: List[int], end: int) -> Tuple[int, int]:
        """(bytes checked, bytes wrong) of positions [0, end) of a request."""
        tok = np.asarray(tokens[:end])
        pos = np.arange(end)
        heads = np.arange(self.head0, self.head0 + self.heads)
        checked = wrong = 0
        for layer, kind, v in self.kinds():
            pat = kv_pattern(tok, pos, layer, kind, heads, v.shape[-1])
            got = np.stack([v[blocks[p // self.block_size], p % self.block_size] for p in pos])
            checked += got.size
            wrong += int(np.count_nonzero(got != pat))
        return checked, wrong

    def fill(self, blocks: List[int], value: int) -> None:
        for _, _, v in self.kinds():
            v[blocks] = value

    def count_not(self, blocks: List[int], value: int) -> int:
        return sum(int(np.count_nonzero(v[blocks] != value)) for _, _, v in self.kinds())


# ---------------------------------------------------------------- blocks
class BlockPool:
    """vLLM's free block queue, reduced: the last freed block is the next
    given out, so a block freed too early is reused (and written) at once."""

    def __init__(self, num_blocks: int):
        self.free_ids = list(range(num_blocks))[::-1]
        self.num_blocks = num_blocks
        self.on_free: Optional[Callable[[List[int]], None]] = None

    def alloc(self, n: int) -> Optional[List[int]]:
        if n > len(self.free_ids):
            return None
        return [self.free_ids.pop() for _ in range(n)]

    def free(self, ids: List[int]) -> None:
        assert not set(ids) & set(self.free_ids), f"blocks freed twice: {set(ids) & set(self.free_ids)}"
        self.free_ids += list(ids)[::-1]
        if self.on_free:
            self.on_free(list(ids))


class KVCacheManager:
    """kv_cache_manager.py reduced: a request's blocks, a prefix cache of
    whole blocks keyed by the tokens up to them (what a decode may hold
    already), allocate_slots, free."""

    def __init__(self, pool: BlockPool, block_size: int):
        self.pool, self.block_size, self.block_pool = pool, block_size, pool
        self.req_blocks: Dict[str, List[int]] = {}
        self.prefix: Dict[Tuple[int, ...], int] = {}   # tokens of blocks 0..k -> block k
        self.pinned: Dict[int, int] = {}               # cached block -> users

    def get_computed_blocks(self, request: Request) -> Tuple[List[int], int]:
        """The longest run of cached whole blocks of the prompt (a full hit
        leaves the last token to compute, as vLLM's does)."""
        bs, toks, out = self.block_size, request.prompt_token_ids, []
        for k in range((len(toks) - 1) // bs):
            b = self.prefix.get(tuple(toks[:(k + 1) * bs]))
            if b is None:
                break
            out.append(b)
        return out, len(out) * bs

    def allocate_slots(self, request: Request, num_new_tokens: int, num_new_computed_tokens: int = 0,
                       new_computed_blocks: Optional[List[int]] = None,
                       num_external_computed_tokens: int = 0) -> Optional[KVCacheBlocks]:
        have = self.req_blocks.get(request.request_id)
        if have is None:
            have = list(new_computed_blocks or [])
        total = request.num_computed_tokens + num_new_computed_tokens + \
            num_external_computed_tokens + num_new_tokens
        need = cdiv(total, self.block_size) - len(have)
        new = self.pool.alloc(max(0, need))
        if new is None:
            return None
        if request.request_id not in self.req_blocks:
            for b in have:
                self.pinned[b] = self.pinned.get(b, 0) + 1
        self.req_blocks[request.request_id] = have + new
        return KVCacheBlocks(new)

    def get_blocks(self, request_id: str) -> KVCacheBlocks:
        return KVCacheBlocks(self.req_blocks.get(request_id, []))

    def get_block_ids(self, request_id: str) -> Tuple[List[int], ...]:
        return (list(self.req_blocks.get(request_id, [])),)

    def get_block_ids_for_computed_tokens(self, request_id: str,
                                          num_computed_tokens: int) -> Tuple[List[int], ...]:
        return (self.req_blocks.get(request_id, [])[:cdiv(num_computed_tokens, self.block_size)],)

    def free(self, request: Request) -> None:
        blocks = self.req_blocks.pop(request.request_id, [])
        mine = []
        for b in blocks:
            if b in self.pinned:  # a prefix-cache block: stays cached
                self.pinned[b] -= 1
            else:
                mine.append(b)
        if mine:
            self.pool.free(mine)

    def cache_prefix(self, tokens: List[int], blocks: List[int]) -> None:
        """Make blocks the cached prefix of tokens (whole blocks only)."""
        for k, b in enumerate(blocks):
            self.prefix[tuple(tokens[:(k + 1) * self.block_size])] = b
            self.pinned.setdefault(b, 0)


# ---------------------------------------------------------------- scheduler
class SchedulerOutput:
    def __init__(self, num_scheduled_tokens: Dict[str, int], finished_req_ids: Set[str],
                 scheduled_new_reqs: List[str]):
        self.num_scheduled_tokens = num_scheduled_tokens
        self.total_num_scheduled_tokens = sum(num_scheduled_tokens.values())
        self.finished_req_ids = finished_req_ids
        self.scheduled_new_reqs = scheduled_new_reqs
        self.preempted_req_ids: Set[str] = set()
        self.has_sync_kv_loads = False
        self.kv_connector_metadata: Any = None


class KVConnectorOutput:
    def __init__(self) -> None:
        self.finished_sending: Optional[Set[str]] = None
        self.finished_recving: Optional[Set[str]] = None
        self.failed_recving: Set[str] = set()
        self.invalid_block_ids: Set[int] = set()
        self.kv_connector_stats: Any = None
        self.kv_cache_events: Any = None
        self.kv_connector_worker_meta: Any = None


class Scheduler:
    """scheduler.py's Scheduler, the parts that touch the connector (steps 3,
    5, 6, 8, 9, 10 of the module docstring), with an unbounded token budget."""

    def __init__(self, config: Any, pool: BlockPool, block_size: int):
        self.config = config
        self.block_size = block_size
        self.kv_cache_manager = KVCacheManager(pool, block_size)
        # step 3: Scheduler.__init__
        self.connector = create_connector(config, "SCHEDULER", None)
        self.recompute_kv_load_failures = \
            config.kv_transfer_config.kv_load_failure_policy == "recompute"
        self.requires_kv_delivery = self.connector.requires_kv_delivery
        self.connector.bind_kv_cache_manager(self.kv_cache_manager)
        self.requests: Dict[str, Request] = {}
        self.waiting: List[Request] = []
        self.running: List[Request] = []
        self.finished_req_ids: Set[str] = set()
        self.finished_recving_kv_req_ids: Set[str] = set()
        self.failed_recving_kv_req_ids: Set[str] = set()
        self.outputs: Dict[str, dict] = {}      # request id -> kv_transfer_params returned
        self.promoted: List[Request] = []       # async loads done this step (for the checks)
        self.recomputed: Set[str] = set()       # async loads that fell back to local compute
        self.errors: Set[str] = set()

    # step 5
    def add_request(self, request: Request) -> None:
        self.waiting.append(request)
        self.requests[request.request_id] = request
        self.connector.on_new_request(request)

    # step 6
    def _handle_blocked_waiting_request(self, request: Request) -> bool:
        if request.status == RequestStatus.WAITING_FOR_REMOTE_KVS:
            if request.request_id not in self.finished_recving_kv_req_ids:
                return False
            self._update_waiting_for_remote_kv(request)
            request.status = RequestStatus.PREEMPTED if request.num_preemptions else \
                RequestStatus.WAITING
        return True

    def _update_waiting_for_remote_kv(self, request: Request) -> None:
        rid = request.request_id
        if rid in self.failed_recving_kv_req_ids:
            if not request.num_computed_tokens:
                self.kv_cache_manager.free(request)
            self.failed_recving_kv_req_ids.remove(rid)
            self.recomputed.add(rid)
        else:
            self.promoted.append(request)
            if request.num_computed_tokens == request.num_tokens:
                request.num_computed_tokens = request.num_tokens - 1
        self.finished_recving_kv_req_ids.remove(rid)

    def schedule(self) -> SchedulerOutput:
        num_scheduled: Dict[str, int] = {}
        new_reqs: List[str] = []
        self.promoted = []
        for request in self.running:  # decodes: one token each
            if request.num_tokens > request.num_computed_tokens:
                n = request.num_tokens - request.num_computed_tokens
                if self.kv_cache_manager.allocate_slots(request, n) is not None:
                    num_scheduled[request.request_id] = n
        queue, remaining = list(self.waiting), []
        for i, request in enumerate(queue):
            if not self._handle_blocked_waiting_request(request):
                remaining.append(request)
                continue
            ext, load_kv_async = 0, False
            local_blocks: List[int] = []
            if request.num_computed_tokens == 0:
                local_blocks, n_local = self.kv_cache_manager.get_computed_blocks(request)
                got = self.connector.get_num_new_matched_tokens(request, n_local)
                if got[0] is None:
                    remaining.append(request)
                    continue
                ext, load_kv_async = got
                num_computed = n_local + ext
            else:
                n_local, num_computed = 0, request.num_computed_tokens
            num_new = 0 if load_kv_async else request.num_tokens - num_computed
            blocks = self.kv_cache_manager.allocate_slots(
                request, num_new, num_new_computed_tokens=n_local,
                new_computed_blocks=local_blocks, num_external_computed_tokens=ext)
            if blocks is None:
                remaining += queue[i:]
                break
            self.connector.update_state_after_alloc(
                request, self.kv_cache_manager.get_blocks(request.request_id), ext)
            if load_kv_async:
                request.status = RequestStatus.WAITING_FOR_REMOTE_KVS
                request.num_computed_tokens = num_computed
                remaining.append(request)
                continue
            self.running.append(request)
            request.status = RequestStatus.RUNNING
            request.num_computed_tokens = num_computed
            num_scheduled[request.request_id] = num_new
            new_reqs.append(request.request_id)
        self.waiting = remaining
        out = SchedulerOutput(num_scheduled, self.finished_req_ids, new_reqs)
        out.kv_connector_metadata = self.connector.build_connector_meta(out)
        # _update_after_schedule
        for rid, n in num_scheduled.items():
            self.requests[rid].num_computed_tokens += n
        self.finished_req_ids = set()
        return out

    # step 8
    def update_from_output(self, out: SchedulerOutput, kv_out: Optional[KVConnectorOutput]) -> None:
        failed: Set[str] = set()
        if kv_out and kv_out.invalid_block_ids:
            failed |= self._handle_invalid_blocks(kv_out.invalid_block_ids, out.num_scheduled_tokens)
        for rid, n in out.num_scheduled_tokens.items():
            request = self.requests.get(rid)
            if request is None or request.is_finished() or rid in failed:
                continue
            if request.num_computed_tokens >= request.num_tokens:  # the step sampled a token
                request.output_token_ids.append(1000 + len(request.output_token_ids))
                if len(request.output_token_ids) >= request.max_tokens:
                    request.status = RequestStatus.FINISHED_LENGTH_CAPPED
                    self.running.remove(request)
                    params = self._free_request(request)
                    if params is not None:
                        self.outputs[rid] = params
        if failed and not self.recompute_kv_load_failures:
            self.errors |= failed
            self.finish_requests(failed, RequestStatus.FINISHED_ERROR)
        if kv_out:
            self._update_from_kv_xfer_finished(kv_out)
        self.connector.get_kv_connector_stats()
        self.connector.take_events()

    def _handle_invalid_blocks(self, invalid: Set[int], num_scheduled: Dict[str, int]) -> Set[str]:
        affected: Set[str] = set()
        for request in self.waiting:
            if request.status != RequestStatus.WAITING_FOR_REMOTE_KVS:
                continue
            (ids,) = self.kv_cache_manager.get_block_ids(request.request_id)
            computed = request.num_computed_tokens - num_scheduled.get(request.request_id, 0)
            for idx, b in zip(range(cdiv(computed, self.block_size)), ids):
                if b in invalid:
                    request.num_computed_tokens = idx * self.block_size
                    affected.add(request.request_id)
                    break
        if not affected:
            return set()
        if not self.recompute_kv_load_failures:
            return affected
        self.failed_recving_kv_req_ids |= affected
        return set()  # async loads are not in this step's batch

    def _free_request(self, request: Request, delay_free_blocks: bool = False) -> Optional[dict]:
        # _connector_finished
        (ids,) = self.kv_cache_manager.get_block_ids_for_computed_tokens(
            request.request_id, request.num_computed_tokens)
        if hasattr(self.connector, "request_finished_all_groups"):
            delay, params = self.connector.request_finished_all_groups(request, (ids,))
        else:
            delay, params = self.connector.request_finished(request, ids)
        self.finished_req_ids.add(request.request_id)
        if not (delay_free_blocks or delay):
            self._free_blocks(request)
        return params

    def _free_blocks(self, request: Request) -> None:
        assert request.is_finished()
        self.kv_cache_manager.free(request)
        del self.requests[request.request_id]

    # step 9
    def finish_requests(self, request_ids: Set[str], status: RequestStatus) -> List[Request]:
        valid = []
        for rid in request_ids:
            request = self.requests.get(rid)
            if request is None or request.is_finished():
                continue
            valid.append(request)
            if request in self.running:
                self.running.remove(request)
            if request in self.waiting:
                self.waiting.remove(request)
        for request in valid:
            delay = False
            if request.status == RequestStatus.WAITING_FOR_REMOTE_KVS:
                delay = request.request_id not in self.finished_recving_kv_req_ids
                self.finished_recving_kv_req_ids.discard(request.request_id)
                self.failed_recving_kv_req_ids.discard(request.request_id)
            request.status = status
            self._free_request(request, delay_free_blocks=delay)
        return valid

    def _update_from_kv_xfer_finished(self, kv_out: KVConnectorOutput) -> None:
        self.connector.update_connector_output(kv_out)
        for rid in kv_out.finished_recving or ():
            assert rid in self.requests, f"finished_recving of unknown request {rid}"
            req = self.requests[rid]
            if req.status == RequestStatus.WAITING_FOR_REMOTE_KVS:
                self.finished_recving_kv_req_ids.add(rid)
            else:
                assert req.is_finished(), f"finished_recving of {rid} in {req.status.name}"
                self._free_blocks(req)
        for rid in kv_out.finished_sending or ():
            assert rid in self.requests, f"finished_sending of unknown request {rid}"
            self._free_blocks(self.requests[rid])

    # step 10
    def has_requests(self) -> bool:
        unfinished = bool(self.waiting or self.running)
        finished_waiting = len(self.requests) > len(self.waiting) + len(self.running)
        return unfinished or finished_waiting or self.connector.has_pending_push_work()


# ---------------------------------------------------------------- workers
class Aggregator:
    """utils.py: KVOutputAggregator, reduced: a request id is finished once
    expected workers reported it; invalid blocks are the union."""

    def __init__(self, expected: int):
        self.expected = expected
        self.recv: Dict[str, int] = {}
        self.send: Dict[str, int] = {}

    def aggregate(self, outs: List[KVConnectorOutput]) -> KVConnectorOutput:
        agg = KVConnectorOutput()
        for attr, counts in (("finished_recving", self.recv), ("finished_sending", self.send)):
            done = set()
            for o in outs:
                for rid in getattr(o, attr) or ():
                    counts[rid] = counts.get(rid, self.expected) - 1
                    if counts[rid] == 0:
                        del counts[rid]
                        done.add(rid)
            setattr(agg, attr, done or None)
        for o in outs:
            agg.invalid_block_ids |= set(o.invalid_block_ids or ())
            agg.failed_recving |= set(o.failed_recving or ())
        return agg


class Worker:
    """A worker's model runner, as far as the connector sees it (steps 1, 2
    and 7): its KV cache, the forward that writes the KV of the scheduled
    tokens, and the connector calls around it."""

    def __init__(self, config: Any, cache: Cache, num_blocks: int):
        self.cache = cache
        kv_cache_config = _NS(num_blocks=num_blocks, kv_cache_groups=[_NS()])
        self.connector = create_connector(config, "WORKER", kv_cache_config)   # step 1
        self.connector.register_kv_caches(dict(cache.layers))                   # step 2
        self.connector.set_host_xfer_buffer_ops(None)

    def execute_model(self, out: SchedulerOutput, sched: Scheduler) -> KVConnectorOutput:
        c = self.connector
        c.bind_connector_metadata(out.kv_connector_metadata)
        if out.total_num_scheduled_tokens:  # the forward (else no_forward)
            for name in self.cache.layers:   # maybe_transfer_kv_layer, per attention layer
                if c.has_connector_metadata():
                    c.wait_for_layer_load(name)
                    c.save_kv_layer(name, self.cache.layers[name], object())
            for rid, n in out.num_scheduled_tokens.items():
                r = sched.requests[rid]
                (ids,) = sched.kv_cache_manager.get_block_ids(rid)
                toks = r.prompt_token_ids + r.output_token_ids
                self.cache.write(ids, toks, r.num_computed_tokens - n,
                                 min(r.num_computed_tokens, len(toks)))
        c.start_load_kv(None)
        c.wait_for_save()
        res = c.get_transfer_results(out.finished_req_ids)
        kv = KVConnectorOutput()
        kv.finished_sending = set(res.finished_sending) or None
        kv.finished_recving = set(res.finished_recving) or None
        kv.failed_recving = set(res.failed_recving)
        kv.invalid_block_ids = c.get_block_ids_with_load_errors()
        kv.kv_connector_stats = c.get_kv_connector_stats()
        kv.kv_cache_events = c.get_kv_connector_kv_cache_events()
        kv.kv_connector_worker_meta = c.build_connector_worker_meta()
        c.clear_connector_metadata()
        return kv


class Instance:
    """An engine core (scheduler) and its TP workers in one process, stepped
    as EngineCore.step does (step 4 at start-up)."""

    def __init__(self, kv_role: str, engine_id: str, tp_size: int, model: ModelShape,
                 num_blocks: int, block_size: int, rank_extra: Callable[[int], dict],
                 policy: str = "recompute"):
        self.block_size = block_size
        self.pool = BlockPool(num_blocks)
        self.workers: List[Worker] = []
        for r in range(tp_size):
            cfg = vllm_config(kv_role, engine_id, tp_size, model, block_size,
                              dict(rank_extra(r), kvferry_tp_rank=r), policy)
            self.workers.append(Worker(cfg, Cache(model, r, tp_size, num_blocks, block_size),
                                       num_blocks))
        sched_cfg = vllm_config(kv_role, engine_id, tp_size, model, block_size,
                                rank_extra(0), policy)
        self.scheduler = Scheduler(sched_cfg, self.pool, block_size)
        # step 4: EngineCore.__init__
        content: Dict[Tuple[int, int], Any] = {}
        for r, w in enumerate(self.workers):
            m = w.connector.get_handshake_metadata()
            if m is not None:
                content[(0, r)] = m
        if content:
            self.scheduler.connector.set_xfer_handshake_metadata_pp_aware(content)
        self.aggregator = Aggregator(len(self.workers))
        self.steps = 0

    def step(self, before_execute: Optional[Callable[[SchedulerOutput], None]] = None
             ) -> SchedulerOutput:
        """EngineCore.step: schedule, execute on every worker (their outputs
        aggregated), update_from_output. before_execute sees the step between
        schedule and the forward (the promoted async loads are
        scheduler.promoted: their blocks hold what landed, nothing computed)."""
        out = self.scheduler.schedule()
        if before_execute is not None:
            before_execute(out)
        kv = self.aggregator.aggregate([w.execute_model(out, self.scheduler)
                                        for w in self.workers])
        self.scheduler.update_from_output(out, kv)
        self.steps += 1
        return out

    def abort(self, request_id: str) -> None:
        self.scheduler.finish_requests({request_id}, RequestStatus.FINISHED_ABORTED)

    def check(self, request: Request, blocks: List[int], end: int) -> Tuple[int, int]:
        checked = wrong = 0
        for w in self.workers:
            c, x = w.cache.check(blocks, request.prompt_token_ids, end)
            checked, wrong = checked + c, wrong + x
        return checked, wrong

    def shutdown(self) -> None:
        self.scheduler.connector.shutdown()
        for w in self.workers:
            w.connector.shutdown()


def rng_prompt(seed: int, n: int) -> List[int]:
    return [int(x) for x in np.random.default_rng(seed).integers(1, 30000, n)]

