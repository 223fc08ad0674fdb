# SPDX-License-Identifier: Apache-2.0
"""A vLLM instance in one process, built from the installed vLLM's own parts
(tests/requirements.txt: vllm 0.31.0), with kvferry.vllm as its connector.

What is vLLM's, unchanged:
  - VllmConfig from ModelConfig (a local model dir with a config.json this
    module writes: no download, HF_HUB_OFFLINE=1), SchedulerConfig,
    CacheConfig, ParallelConfig, DeviceConfig("cpu"), KVTransferConfig
    (kv_connector "KVFerryConnector", kv_connector_module_path "kvferry.vllm");
    vLLM's own checks in them run (the hybrid KV cache manager rule too),
    with vLLM's model classes registered in this process (register_models);
  - the scheduler vllm_config.scheduler_config.get_scheduler_cls() names
    (Scheduler, or AsyncScheduler with ASYNC_SCHEDULING[0] = True, vLLM's
    default, stepped one batch at a time), which creates the
    scheduler-side connector through KVConnectorFactory; its KVCacheManager,
    prefix cache, block hashes (get_request_block_hasher, as EngineCore);
  - each worker's connector made by KVConnectorFactory.create_connector
    (role WORKER), as ensure_kv_transfer_initialized does, and installed
    where vLLM keeps it (kv_transfer_state._KV_CONNECTOR_AGENT) while that
    worker runs; its register_kv_caches call as GPUModelRunner makes it;
  - a worker's step through KVConnectorModelRunnerMixin:
    kv_connector_no_forward when nothing is scheduled, else
    set_forward_context + maybe_get_kv_connector_output around the forward;
  - the workers' outputs aggregated by KVOutputAggregator.from_connector,
    and Scheduler.update_from_output; the handshake as EngineCore collects
    it (get_handshake_metadata per (pp, tp) -> set_xfer_handshake_metadata_pp_aware);
    aborts through Scheduler.finish_requests(FINISHED_ABORTED).

What is the test's: the model. Its "forward" writes each scheduled token's
KV into the request's blocks (the block table kept from the SchedulerOutput
as a model runner keeps it) as a pattern of (token, position, layer, K/V,
global head, element), so a block that landed can be checked byte by byte;
it samples a token from the last one. The KV cache is torch CPU tensors in
FlashAttention's layout (2, blocks, block_size, heads, head_size) or MLA's
(blocks, block_size, latent). All TP ranks of an instance run in this
process, stepped in lockstep as vLLM's executor does (collective_rpc)."""
from __future__ import annotations

import copy
import dataclasses
import json
import os
import tempfile
from typing import Any, Callable, Dict, List, Optional, Set, Tuple

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402
from vllm.config import (  # noqa: E402
    CacheConfig,
    DeviceConfig,
    KVTransferConfig,
    ModelConfig,
    ParallelConfig,
    SchedulerConfig,
    VllmConfig,
)
from vllm.distributed.kv_transfer import kv_transfer_state  # noqa: E402
from vllm.distributed.kv_transfer.kv_connector.factory import KVConnectorFactory  # noqa: E402
from vllm.distributed.kv_transfer.kv_connector.utils import KVOutputAggregator  # noqa: E402
from vllm.distributed.kv_transfer.kv_connector.v1 import KVConnectorRole  # noqa: E402
from vllm.forward_context import set_forward_context  # noqa: E402
from vllm.sampling_params import SamplingParams  # noqa: E402
from vllm.utils.hashing import get_hash_fn_by_name  # noqa: E402
from vllm.v1.core.kv_cache_utils import get_request_block_hasher, init_none_hash  # noqa: E402
from vllm.v1.kv_cache_interface import (  # noqa: E402
    FullAttentionSpec,
    KVCacheConfig,
    KVCacheGroupSpec,
    MLAAttentionSpec,
)
from vllm.v1.outputs import ModelRunnerOutput  # noqa: E402
from vllm.v1.request import Request, RequestStatus  # noqa: E402
from vllm.v1.structured_output import StructuredOutputManager  # noqa: E402
from vllm.v1.worker.kv_connector_model_runner_mixin import (  # noqa: E402
    KVConnectorModelRunnerMixin as Mixin,
)

VOCAB = 1000
# the configs' async_scheduling: False gives vLLM's Scheduler, True its
# AsyncScheduler (vLLM's default); the tests run both
ASYNC_SCHEDULING = [False]


def vllm_version() -> str:
    import vllm
    return str(vllm.__version__)
MAX_LEN = 4096


@dataclasses.dataclass(frozen=True)
class Model:
    """A tiny model: llama-shaped (layers, KV heads, head size, float16) or,
    with mla, DeepSeek-V3-shaped (latent = kv_lora_rank + rope dims, bf16)."""

    layers: int = 2
    kv_heads: int = 4
    head_size: int = 16
    mla: bool = False
    kv_lora_rank: int = 32
    rope_dim: int = 16

    @property
    def latent(self) -> int:
        return self.kv_lora_rank + self.rope_dim

    def config_json(self) -> Dict[str, Any]:
        common = {"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": self.layers,
                  "vocab_size": VOCAB, "max_position_embeddings": MAX_LEN,
                  "rms_norm_eps": 1e-5, "num_attention_heads": max(4, self.kv_heads)}
        if self.mla:
            return dict(common, architectures=["DeepseekV3ForCausalLM"], model_type="deepseek_v3",
                        num_key_value_heads=4, kv_lora_rank=self.kv_lora_rank, q_lora_rank=None,
                        qk_rope_head_dim=self.rope_dim, qk_nope_head_dim=16, v_head_dim=16,
                        moe_intermediate_size=32, n_routed_experts=4, num_experts_per_tok=2,
                        n_shared_experts=1, first_k_dense_replace=self.layers,
                        torch_dtype="bfloat16")
        return dict(common, architectures=["LlamaForCausalLM"], model_type="llama",
                    num_key_value_heads=self.kv_heads, head_dim=self.head_size,
                    torch_dtype="float16")

    def layer_names(self) -> List[str]:
        return [f"model.layers.{i}.self_attn.attn" for i in range(self.layers)]


_REGISTERED: List[str] = []


def register_models() -> None:
    """vLLM's own model classes for the tests' architectures, registered in
    this process through ModelRegistry.register_model (vLLM's plugin API).
    Otherwise ModelConfig inspects a lazily registered architecture in a
    subprocess that imports vLLM again (unless VLLM_CACHE_ROOT/modelinfos
    has it): seconds on a host, many minutes in a TCG guest."""
    if _REGISTERED:
        return
    from vllm import ModelRegistry
    from vllm.model_executor.models.deepseek_v2 import DeepseekV3ForCausalLM
    from vllm.model_executor.models.llama import LlamaForCausalLM

    for cls in (LlamaForCausalLM, DeepseekV3ForCausalLM):
        ModelRegistry.register_model(cls.__name__, cls)
        _REGISTERED.append(cls.__name__)


def model_dir(model: Model) -> str:
    """A local model directory vLLM's ModelConfig reads (config.json only)."""
    d = os.path.join(tempfile.gettempdir(), f"kvferry-vllm-model-{os.getuid()}",
                     "mla" if model.mla else f"llama-{model.layers}-{model.kv_heads}-"
                     f"{model.head_size}")
    os.makedirs(d, exist_ok=True)
    path = os.path.join(d, "config.json")
    text = json.dumps(model.config_json(), indent=1, sort_keys=True)
    if not os.path.exists(path) or open(path).read() != text:
        with open(path + ".tmp", "w") as f:
            f.write(text)
        os.replace(path + ".tmp", path)
    return d


def vllm_config(model: Model, role: str, engine_id: str, tp: int, block_size: int,
                num_blocks: int, extra: Dict[str, Any], policy: str = "recompute",
                hybrid: Optional[bool] = None) -> VllmConfig:
    register_models()
    mc = ModelConfig(model=model_dir(model), skip_tokenizer_init=True, max_model_len=MAX_LEN,
                     seed=0)
    sc = SchedulerConfig(max_num_seqs=32, max_num_batched_tokens=MAX_LEN,
                         max_model_len=MAX_LEN, is_encoder_decoder=False, async_scheduling=ASYNC_SCHEDULING[0],
                         enable_chunked_prefill=True, disable_hybrid_kv_cache_manager=hybrid)
    kt = KVTransferConfig(kv_connector="KVFerryConnector", kv_connector_module_path="kvferry.vllm",
                          kv_role=role, engine_id=engine_id, kv_load_failure_policy=policy,
                          kv_connector_extra_config=dict(extra))
    vc = VllmConfig(model_config=mc, scheduler_config=sc, kv_transfer_config=kt,
                    cache_config=CacheConfig(block_size=block_size, enable_prefix_caching=True),
                    parallel_config=ParallelConfig(tensor_parallel_size=tp),
                    device_config=DeviceConfig(device="cpu"))
    vc.cache_config.num_gpu_blocks = num_blocks
    return vc


def kv_cache_config(vc: VllmConfig, model: Model, num_blocks: int) -> KVCacheConfig:
    mc, bs = vc.model_config, vc.cache_config.block_size
    if model.mla:
        spec = MLAAttentionSpec(block_size=bs, num_kv_heads=1, head_size=model.latent,
                                dtype=mc.dtype)
    else:
        spec = FullAttentionSpec(block_size=bs, num_kv_heads=mc.get_num_kv_heads(
            vc.parallel_config), head_size=model.head_size, dtype=mc.dtype)
    return KVCacheConfig(num_blocks=num_blocks, kv_cache_tensors=[],
                         kv_cache_groups=[KVCacheGroupSpec(model.layer_names(), spec)])


# ---------------------------------------------------------------- the KV pattern
def pattern(tokens: np.ndarray, pos: np.ndarray, layer: int, kind: int, heads: np.ndarray,
            width: int) -> np.ndarray:
    """The int16 bit pattern of a token's KV: [n, heads, width] (every byte
    depends on the token, its position, the layer, K or V, the global head
    and the element)."""
    t = tokens.astype(np.int64)[:, None, None]
    p = pos.astype(np.int64)[:, None, None]
    h = heads.astype(np.int64)[None, :, None]
    e = np.arange(width, dtype=np.int64)[None, None, :]
    v = (t * 7919 + p * 104729 + layer * 31 + kind * 17 + h * 1031 + e * 3) % 65521
    return (v - 32768).astype(np.int16)


def sample(prev: int, pos: int) -> int:
    return (prev * 31 + pos * 17 + 11) % VOCAB


def prompt_of(seed: int, n: int) -> List[int]:
    rng = np.random.default_rng(seed)
    return [int(x) for x in rng.integers(1, VOCAB, size=n)]


class Worker:
    """One TP rank: its connector (vLLM's factory), its KV cache tensors, its
    block tables, and a model-runner step through vLLM's connector mixin."""

    def __init__(self, vc: VllmConfig, kcc: KVCacheConfig, model: Model, rank: int,
                 per_rank: Dict[str, Any]):
        self.rank, self.model = rank, model
        self.vc = copy.copy(vc)
        kt = copy.deepcopy(vc.kv_transfer_config)
        kt.kv_connector_extra_config = dict(kt.kv_connector_extra_config, kvferry_tp_rank=rank,
                                            **per_rank)
        self.vc.kv_transfer_config = kt
        self.connector = KVConnectorFactory.create_connector(
            config=self.vc, role=KVConnectorRole.WORKER, kv_cache_config=kcc)
        tp = vc.parallel_config.tensor_parallel_size
        total = model.kv_heads
        self.local_heads = 1 if model.mla else max(1, total // tp)
        self.head0 = 0 if model.mla else (rank * total // tp if tp >= total
                                          else rank * self.local_heads)
        self.caches = self._caches(vc, kcc.num_blocks)
        self.bits = {n: t.view(torch.int16).numpy() for n, t in self.caches.items()}
        self.tables: Dict[str, List[int]] = {}
        self.tokens: Dict[str, List[int]] = {}
        with self.active():
            self.connector.register_kv_caches(self.caches)

    def _caches(self, vc: VllmConfig, nblocks: int) -> Dict[str, torch.Tensor]:
        bs, m, dt = vc.cache_config.block_size, self.model, vc.model_config.dtype
        shape = (nblocks, bs, m.latent) if m.mla else (2, nblocks, bs, self.local_heads,
                                                      m.head_size)
        return {name: torch.zeros(shape, dtype=dt) for name in m.layer_names()}

    def active(self) -> "_Active":
        return _Active(self.connector)

    # ---- the model runner's books (what GPUModelRunner._update_states keeps)
    def update_states(self, so: Any) -> None:
        for rid in so.finished_req_ids:
            self.tables.pop(rid, None)
            self.tokens.pop(rid, None)
        for nr in so.scheduled_new_reqs:
            self.tables[nr.req_id] = list(nr.block_ids[0])
            self.tokens[nr.req_id] = list(nr.prompt_token_ids)
        c = so.scheduled_cached_reqs
        for i, rid in enumerate(c.req_ids):
            new = c.new_block_ids[i]
            if rid in c.resumed_req_ids:
                self.tables[rid] = list(new[0]) if new else []
            elif new:
                self.tables[rid].extend(new[0])

    def execute(self, so: Any) -> ModelRunnerOutput:
        with self.active():
            self.connector.handle_preemptions(so.kv_connector_metadata)
            self.update_states(so)
            if not so.total_num_scheduled_tokens:
                return Mixin.kv_connector_no_forward(so, self.vc)
            with set_forward_context(None, self.vc), \
                    Mixin.maybe_get_kv_connector_output(so) as kvo:
                ids, sampled = self.forward(so)
            return ModelRunnerOutput(req_ids=ids, req_id_to_index={r: i for i, r in
                                                                   enumerate(ids)},
                                     sampled_token_ids=sampled, kv_connector_output=kvo)

    def forward(self, so: Any) -> Tuple[List[str], List[List[int]]]:
        """Writes the KV of each scheduled token; samples a token for each
        request whose known tokens are all computed."""
        ids, sampled = [], []
        computed = {nr.req_id: nr.num_computed_tokens for nr in so.scheduled_new_reqs}
        c = so.scheduled_cached_reqs
        computed.update(zip(c.req_ids, c.num_computed_tokens))
        for rid, n in so.num_scheduled_tokens.items():
            start, toks = computed[rid], self.tokens[rid]
            self.write(rid, start, start + n)
            ids.append(rid)
            if start + n >= len(toks):
                t = sample(toks[-1], len(toks))
                toks.append(t)
                sampled.append([t])
            else:
                sampled.append([])
        return ids, sampled

    def slots(self, table: List[int], start: int, end: int, bs: int
              ) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
        pos = np.arange(start, end)
        return pos, np.asarray(table, dtype=np.int64)[pos // bs], pos % bs

    def write(self, rid: str, start: int, end: int) -> None:
        bs = self.vc.cache_config.block_size
        pos, blk, off = self.slots(self.tables[rid], start, end, bs)
        toks = np.asarray(self.tokens[rid][start:end])
        for layer, name in enumerate(self.model.layer_names()):
            for kind, arr in self._views(name):
                arr[blk, off] = self._expected(toks, pos, layer, kind)

    def _views(self, name: str) -> List[Tuple[int, np.ndarray]]:
        b = self.bits[name]
        return [(0, b)] if self.model.mla else [(0, b[0]), (1, b[1])]

    def _expected(self, toks: np.ndarray, pos: np.ndarray, layer: int, kind: int) -> np.ndarray:
        if self.model.mla:
            return pattern(toks, pos, layer, 0, np.zeros(1, np.int64), self.model.latent)[:, 0]
        heads = np.arange(self.head0, self.head0 + self.local_heads)
        return pattern(toks, pos, layer, kind, heads, self.model.head_size)

    def check(self, blocks: List[int], tokens: List[int], start: int, end: int) -> Tuple[int, int]:
        """(bytes checked, bytes wrong) of tokens [start, end) in blocks."""
        bs = self.vc.cache_config.block_size
        pos, blk, off = self.slots(blocks, start, end, bs)
        toks = np.asarray(tokens[start:end])
        checked = wrong = 0
        for layer, name in enumerate(self.model.layer_names()):
            for kind, arr in self._views(name):
                got, want = arr[blk, off], self._expected(toks, pos, layer, kind)
                checked += got.nbytes
                wrong += int(np.count_nonzero(got.view(np.uint8) != want.view(np.uint8)))
        return checked, wrong

    def fill(self, blocks: List[int], value: int) -> None:
        for name in self.model.layer_names():
            for _, arr in self._views(name):
                arr[np.asarray(blocks)] = value

    def count_not(self, blocks: List[int], value: int) -> int:
        n = 0
        for name in self.model.layer_names():
            for _, arr in self._views(name):
                n += int(np.count_nonzero(arr[np.asarray(blocks)] != value))
        return n


class _Active:
    """This worker's connector is the process's KV transfer group while it
    runs (vLLM keeps one per worker process in kv_transfer_state)."""

    def __init__(self, connector: Any):
        self.connector = connector

    def __enter__(self) -> Any:
        kv_transfer_state._KV_CONNECTOR_AGENT = self.connector
        return self.connector

    def __exit__(self, *exc: Any) -> None:
        kv_transfer_state._KV_CONNECTOR_AGENT = None


class Instance:
    """A vLLM instance: its scheduler (with the scheduler-side connector),
    its workers, and the engine core's step."""

    def __init__(self, role: str, engine_id: str, model: Model, tp: int = 1, num_blocks: int = 64,
                 block_size: int = 16, extra: Optional[Dict[str, Any]] = None,
                 per_rank: Optional[Callable[[int], Dict[str, Any]]] = None,
                 policy: str = "recompute"):
        self.model, self.block_size = model, block_size
        self.vc = vllm_config(model, role, engine_id, tp, block_size, num_blocks, extra or {},
                              policy)
        self.kcc = kv_cache_config(self.vc, model, num_blocks)
        cls = self.vc.scheduler_config.get_scheduler_cls()
        self.scheduler = cls(vllm_config=self.vc, kv_cache_config=self.kcc, log_stats=True,
                             structured_output_manager=StructuredOutputManager(self.vc),
                             block_size=block_size)
        self.connector = self.scheduler.get_kv_connector()
        hash_fn = get_hash_fn_by_name(self.vc.cache_config.prefix_caching_hash_algo)
        init_none_hash(hash_fn)
        self.hasher = get_request_block_hasher(block_size, hash_fn)
        self.workers = [Worker(self.vc, self.kcc, model, r, (per_rank or (lambda r: {}))(r))
                        for r in range(tp)]
        self.handshake()
        self.aggregator = KVOutputAggregator.from_connector(self.connector, tp)
        self.params: Dict[str, Dict[str, Any]] = {}   # finished request -> kv_transfer_params
        self.finished: Dict[str, str] = {}            # request -> finish reason
        self.stats: List[Dict[str, Any]] = []         # SchedulerStats.kv_connector_stats
        self.loaded: List[str] = []                   # finished_recving, in order
        self.invalid: Set[int] = set()                # invalid_block_ids reported
        self.on_loaded: Optional[Callable[[str], None]] = None

    def handshake(self) -> None:
        content = {}
        for w in self.workers:
            m = w.connector.get_handshake_metadata()
            if m is not None:
                content[(0, w.rank)] = m
        if content:
            self.connector.set_xfer_handshake_metadata_pp_aware(content)

    def request(self, rid: str, prompt: List[int], max_tokens: int,
                params: Optional[Dict[str, Any]] = None, **sp_kw: Any) -> Request:
        """A Request as EngineCore makes it (from_engine_core_request): the
        block hasher, kv_transfer_params in the sampling params' extra_args."""
        sp = SamplingParams(max_tokens=max_tokens, extra_args=(
            {"kv_transfer_params": params} if params is not None else None), **sp_kw)
        return Request(rid, list(prompt), sp, None, block_hasher=self.hasher)

    def add(self, rid: str, prompt: List[int], max_tokens: int,
            params: Optional[Dict[str, Any]] = None, **sp_kw: Any) -> Request:
        req = self.request(rid, prompt, max_tokens, params, **sp_kw)
        self.scheduler.add_request(req)
        return req

    def abort(self, rid: str) -> None:
        self.scheduler.finish_requests(rid, RequestStatus.FINISHED_ABORTED)

    def step(self, before: Optional[Callable[[Any], None]] = None) -> Any:
        so = self.scheduler.schedule()
        if before is not None:
            before(so)
        # each worker's output as the executor's RPC hands it over: a copy
        # (the aggregator sets kv_connector_output on the one it returns)
        outs = [copy.copy(w.execute(so)) for w in self.workers]
        mro = self.aggregator.aggregate(outs, 0)
        kvo = mro.kv_connector_output if mro is not None else None
        if kvo is not None:
            self.invalid |= set(kvo.invalid_block_ids or ())
            for rid in sorted(kvo.finished_recving or ()):
                self.loaded.append(rid)
                if self.on_loaded is not None:
                    self.on_loaded(rid)
        eco = self.scheduler.update_from_output(so, mro)
        self._collect(eco)
        return so

    def _collect(self, eco: Dict[int, Any]) -> None:
        for outs in eco.values():
            for o in outs.outputs:
                if o.finish_reason is not None:
                    self.finished[o.request_id] = str(o.finish_reason)
                    if o.kv_transfer_params is not None:
                        self.params[o.request_id] = o.kv_transfer_params
            st = outs.scheduler_stats
            if st is not None and st.kv_connector_stats:
                self.stats.append(st.kv_connector_stats)

    def blocks(self, rid: str) -> List[int]:
        return list(self.scheduler.kv_cache_manager.get_block_ids(rid)[0])

    def free_blocks(self) -> int:
        return self.scheduler.kv_cache_manager.block_pool.get_num_free_blocks()

    def outcomes(self) -> Dict[str, int]:
        out: Dict[str, int] = {}
        for w in self.workers:
            for k, n in w.connector.kvferry_outcomes().items():
                out[k] = out.get(k, 0) + n
        return out

    def shutdown(self) -> None:
        for w in self.workers:
            with w.active():
                w.connector.shutdown()
        self.scheduler.shutdown()
