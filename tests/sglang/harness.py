# SPDX-License-Identifier: Apache-2.0
"""SGLang's own disaggregation queues, built on CPU, driving a transfer backend.

Everything that decides what moves where is SGLang's code, from its release
installed in the tests' environment (SGLANG_RELEASE below; tests/requirements.txt):
its ServerArgs (the "dummy" model path, which stops
__post_init__ before any model or hardware is looked at), its runtime
context (runtime_context.publish), its KV pools (MHATokenToKVPool /
MLATokenToKVPool on device="cpu"), PagedTokenToKVPoolAllocator,
ReqToTokenPool, ChunkCache, MetadataBuffers, ReqToMetadataIdxAllocator, Req,
a gloo group of the rank's attention-TP group (FileStore), and the queue
classes and scheduler mixins of srt/disaggregation/{prefill,decode,utils}.py.

What the harness does itself (no GPU, no model): the "forward" (allocating a
chunk's KV slots with SGLang's allocator and writing a known pattern into
the pool, as the model's attention layers would), the choice of the next
chunk (SGLang's PrefillAdder and ScheduleBatch are GPU batch machinery), and
on the decode the end of a request once SGLang's transfer queue hands it
over (checking its bytes, then release_kv_cache as a finished request).

One loop turn, in the order of SGLang's event loops:

  prefill (prefill.py: SchedulerDisaggregationPrefillMixin.event_loop_normal_disagg_prefill)
    1. process_input_requests -> handle_generate_request: new requests go to
       prefill.py:PrefillBootstrapQueue.add (create_sender: get_kv_class(SENDER)(...))
    2. waiting_queue.extend(prefill.py:PrefillBootstrapQueue.pop_bootstrapped())
         (utils.py:poll_and_all_reduce_attn_cp_tp_group -> sender.poll(),
          finalize_bootstrap -> sender.pop_decode_prefix_len(), sender.init())
    3. get_next_disagg_prefill_batch_to_run:
         prefill.py:process_prefill_chunk (the chunk run last turn: send_kv_chunk)
         + the harness picks the next chunk (PrefillAdder's job)
    4. run_batch: the harness's forward (alloc + pattern)
    5. process_batch_result_disagg_prefill, for the last chunk: output_ids,
       disagg_prefill_inflight_queue.append, prefill.py:send_kv_chunk(last_chunk=True)
         (-> sender.send(page_indices, state_indices, num_kv_tokens=...))
    6. prefill.py:process_disagg_prefill_inflight_queue()
         (sender.poll(); Success: release_kv_cache + sender.clear(); Failed:
          handle_inflight_transfer_failure -> sender.failure_exception())
  decode (decode.py: SchedulerDisaggregationDecodeMixin.event_loop_normal_disagg_decode)
    1. process_input_requests -> decode.py:DecodePreallocQueue.add
         (get_kv_class(RECEIVER)(...), _resolve_prefill_dp_rank ->
          kv_manager.prefill_info_table, receiver.init(prefill_dp_rank))
    2. decode.py:process_decode_queue():
         DecodePreallocQueue.resume_retracted_reqs,
         DecodePreallocQueue.pop_preallocated (_resolve_pending_reqs ->
           kv_manager.try_ensure_parallel_info, receiver.init;
           _update_handshake_waiters -> utils.py:poll_and_all_reduce;
           _pre_alloc -> decode.py:alloc_for_decode_prealloc;
           receiver.send_metadata(page_indices, metadata_buffer_index,
           state_indices, decode_prefix_len=...)),
         DecodeTransferQueue.pop_transferred (utils.py:poll_and_all_reduce
           with the metadata gate; Success: _commit_transfer_to_req;
           Failed: release_kv_cache(is_insert=False), receiver.clear())
    3. get_next_disagg_decode_batch_to_run: the harness takes the requests
       SGLang put in waiting_queue, checks every page, the metadata SGLang
       committed (output_ids, cached_tokens, bootstrap_room) and state
       slots, then release_kv_cache as a finished request would.

The backend is SGLang's get_kv_class(TransferBackend.X): FAKE (SGLang's own
srt/disaggregation/fake), or KVFERRY, which use_kvferry() adds at run time
(the enum member and the lookup, as docs/sglang-backend.patch does in source).
"""
from __future__ import annotations

import dataclasses
import os
import sys
import threading
import time
from array import array
from pathlib import Path
from typing import Dict, List, Optional

REPO = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent


# The SGLang release the tests run (tests/requirements.txt pins it; docs/sglang.md).
SGLANG_RELEASE = "0.5.18"


def sglang_pkg() -> Optional[Path]:
    """The installed sglang package's directory, or None."""
    import importlib.util
    spec = importlib.util.find_spec("sglang")
    return Path(spec.origin).parent if spec and spec.origin else None


def missing_reason() -> Optional[str]:
    """None when SGLang's pinned release is installed in this Python, else why not."""
    pkg = sglang_pkg()
    if pkg is None or not (pkg / "srt" / "disaggregation" / "prefill.py").is_file():
        return (f"no sglang package in {sys.executable} (scripts/venv.sh installs "
                f"sglang=={SGLANG_RELEASE} from tests/requirements.txt)")
    from importlib.metadata import version
    if version("sglang") != SGLANG_RELEASE:
        return f"sglang {version('sglang')} is installed; the tests pin {SGLANG_RELEASE}"
    return None


class S:
    """The SGLang names the harness uses, filled by load()."""
    loaded = False
    patched = None   # the patch applied (KVF_SGLANG_PATCH), else None


def _apply_patch(patch: str) -> Dict[str, str]:
    """docs/sglang-backend.patch (or another) applied with git apply to a
    scratch copy of the installed release's files it touches (the patch's
    paths are SGLang's source tree's, python/sglang/...); returns {module:
    file} for _Overlay. The installed package itself is never written."""
    import re
    import subprocess
    import tempfile

    text = Path(patch).read_text()
    files = sorted(set(re.findall(r"^\+\+\+ b/(\S+)", text, re.M)))
    import atexit
    import shutil

    scratch = Path(tempfile.mkdtemp(prefix="kvf-sglang-patched."))
    owner = os.getpid()
    atexit.register(lambda: os.getpid() == owner and shutil.rmtree(scratch, ignore_errors=True))
    site = sglang_pkg().parent  # the directory holding the sglang package
    for f in files:
        dst = scratch / f
        dst.parent.mkdir(parents=True, exist_ok=True)
        dst.write_bytes((site / Path(f).relative_to("python")).read_bytes())
    subprocess.run(["git", "apply", "--check", str(Path(patch).resolve())], cwd=scratch, check=True)
    subprocess.run(["git", "apply", str(Path(patch).resolve())], cwd=scratch, check=True)
    mods = {}
    for f in files:
        rel = Path(f).relative_to("python")
        mods[".".join(rel.with_suffix("").parts)] = str(scratch / f)
    return mods


class _Overlay:
    """A meta path finder serving the patched copies of a few SGLang modules."""

    def __init__(self, mods: Dict[str, str]):
        self.mods = mods

    def find_spec(self, name, path, target=None):
        import importlib.util
        if name in self.mods:
            return importlib.util.spec_from_file_location(name, self.mods[name])
        return None

    def invalidate_caches(self):
        pass


def load():
    """Import SGLang's disaggregation code from the installed release."""
    if S.loaded:
        return S
    why = missing_reason()
    if why:
        raise RuntimeError(why)
    t0 = time.monotonic()
    import torch  # noqa: F401 (timed apart)
    S.import_torch_s = time.monotonic() - t0
    patch = os.environ.get("KVF_SGLANG_PATCH")
    if patch:
        sys.meta_path.insert(0, _Overlay(_apply_patch(patch)))
        S.patched = patch
    t1 = time.monotonic()
    import sglang.srt.disaggregation.decode as decode
    import sglang.srt.disaggregation.prefill as prefill
    import sglang.srt.disaggregation.utils as dutils
    from sglang.srt import runtime_context
    from sglang.srt.disaggregation.base import conn as base_conn
    from sglang.srt.managers import schedule_batch
    from sglang.srt.mem_cache import allocator, chunk_cache, memory_pool, radix_cache
    from sglang.srt.mem_cache.allocator import paged
    from sglang.srt.mem_cache.cache_init_params import CacheInitParams
    from sglang.srt.sampling.sampling_params import SamplingParams
    from sglang.srt.server_args import ServerArgs
    from sglang.srt.speculative.spec_info import SpeculativeAlgorithm
    S.import_sglang_s = time.monotonic() - t1
    S.torch = torch
    S.prefill, S.decode, S.utils, S.rc, S.base = prefill, decode, dutils, runtime_context, base_conn
    S.sb, S.mp, S.alloc, S.paged, S.chunk_cache = schedule_batch, memory_pool, allocator, paged, chunk_cache
    S.radix_cache = radix_cache
    S.CacheInitParams, S.SamplingParams, S.ServerArgs = CacheInitParams, SamplingParams, ServerArgs
    S.SpeculativeAlgorithm = SpeculativeAlgorithm
    S.loaded = True
    return S


_EXTRA_BACKENDS: Dict[str, object] = {}


def register_backend(name: str, classes) -> object:
    """Add TransferBackend.<NAME> and its get_kv_class entry, as
    docs/sglang-backend.patch adds KVFERRY to utils.py in source. classes:
    a function returning {KVClassType: class} (imported lazily, as SGLang's
    own entries are). prefill.py and decode.py imported both names from
    utils, so their module globals are pointed at the extended ones too."""
    load()
    u = S.utils
    key = name.upper()
    if hasattr(u.TransferBackend, key) and key not in _EXTRA_BACKENDS and \
            not hasattr(u.get_kv_class, "_kvf_real"):
        return u.TransferBackend[key]  # SGLang has it (the patch applied): its own lookup
    if not hasattr(u.TransferBackend, key):
        import enum

        members = {m.name: m.value for m in u.TransferBackend}
        members[key] = name.lower()
        TB = enum.Enum("TransferBackend", members, module=u.__name__)
        TB.__qualname__ = "TransferBackend"
        real = getattr(u.get_kv_class, "_kvf_real", u.get_kv_class)

        def get_kv_class(transfer_backend, class_type):
            if transfer_backend.name in _EXTRA_BACKENDS:
                return _EXTRA_BACKENDS[transfer_backend.name]().get(class_type)
            return real(transfer_backend, class_type)  # utils' globals: TB now

        get_kv_class._kvf_real = real
        for mod in (u, S.prefill, S.decode):
            mod.TransferBackend = TB
            mod.get_kv_class = get_kv_class
    _EXTRA_BACKENDS[key] = classes
    return u.TransferBackend[key]


_rank_shape = threading.local()  # the Shape of the rank being built on this thread


def workarounds() -> set:
    """KVF_SGR_WORKAROUNDS: test-side stand-ins for kvferry.sglang gaps the
    harness found, for debugging runs only (the suite sets none): each one is
    NOT what SGLang or kvferry does.
      decode_heads        fill the decode's KVArgs.kv_head_num/total_kv_head_num
                          from its pool (decode.py's _init_kv_manager sets neither)
      metric_after_clear  sender.get_transfer_metric() after clear() answers an
                          empty metric (SGLang calls it after clear())"""
    return {w for w in os.environ.get("KVF_SGR_WORKAROUNDS", "").split(",") if w}


def _kvferry_classes():
    from sglang.srt.disaggregation.base import KVArgs

    import kvferry
    import kvferry.sglang as ks
    K = S.utils.KVClassType
    manager, sender = ks.KVFerryKVManager, ks.KVFerryKVSender
    w = workarounds()
    if "decode_heads" in w:
        class manager(ks.KVFerryKVManager):  # noqa: N801
            def __init__(self, args, mode, server_args, is_mla_backend=False, **kw):
                sh = getattr(_rank_shape, "shape", None)
                if sh is not None and not is_mla_backend and not getattr(args, "kv_head_num", 0):
                    args.kv_head_num, args.total_kv_head_num = sh.heads, sh.total_kv_heads
                super().__init__(args, mode, server_args, is_mla_backend, **kw)
    if "metric_after_clear" in w:
        class sender(ks.KVFerryKVSender):  # noqa: N801
            def get_transfer_metric(self):
                try:
                    return super().get_transfer_metric()
                except kvferry.KVFerryError:
                    return S.base.KVTransferMetric()
    return {K.KVARGS: KVArgs, K.MANAGER: manager, K.SENDER: sender,
            K.RECEIVER: ks.KVReceiver, K.BOOTSTRAP_SERVER: ks.KVBootstrapServer}


def use_kvferry():
    """TransferBackend.KVFERRY -> kvferry.sglang's classes."""
    if workarounds():
        # the patched get_kv_class imports kvferry.sglang's names itself
        import kvferry.sglang as ks
        K = S.utils.KVClassType
        c = _kvferry_classes()
        ks.KVManager, ks.KVSender = c[K.MANAGER], c[K.SENDER]
    return register_backend("kvferry", _kvferry_classes)


def plugin_dist_info(where: Path) -> Path:
    """kvferry's entry point as an installed distribution carries it: the group
    and target pyproject.toml declares, in a .dist-info under where (put on
    sys.path); the wheel's own is checked by scripts/test.sh's pip install."""
    import tomllib
    eps = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["entry-points"]
    info = where / "kvferry-0.0.dist-info"
    info.mkdir(parents=True, exist_ok=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: kvferry\nVersion: 0.0\n")
    (info / "entry_points.txt").write_text(
        f"[sglang.srt.plugins]\nkvferry = {eps['sglang.srt.plugins']['kvferry']}\n")
    return where


def use_plugin():
    """TransferBackend.KVFERRY as an unpatched SGLang gets it
    (KVF_SGLANG_ROUTE=plugin, no KVF_SGLANG_PATCH): SGLang's own
    load_plugins() finds kvferry's entry point and runs it."""
    import importlib
    import tempfile
    if S.patched:
        raise RuntimeError("KVF_SGLANG_ROUTE=plugin with KVF_SGLANG_PATCH: the patch lists kvferry already")
    if not hasattr(S.utils.TransferBackend, "KVFERRY"):
        where = plugin_dist_info(Path(tempfile.mkdtemp(prefix="kvf-plugin.")))
        sys.path.insert(0, str(where))
        importlib.invalidate_caches()
        from sglang.srt.plugins import load_plugins
        load_plugins()
    return S.utils.TransferBackend.KVFERRY


def backend(name: str):
    load()
    if name == "kvferry":
        return use_plugin() if os.environ.get("KVF_SGLANG_ROUTE") == "plugin" else use_kvferry()
    return S.utils.TransferBackend[name.upper()]


def run_pair(prefill, decode, max_turns: int, check_bytes: bool = True, until=None):
    """Both sides in one process, one loop turn each in turn, until both are idle."""
    for _ in range(max_turns):
        prefill.turn()
        decode.turn(check_bytes=check_bytes)
        if (until() if until else (prefill.idle() and decode.idle())):
            return True
    return False


# ---- what a deployment looks like ------------------------------------------------

@dataclasses.dataclass
class Shape:
    """One side's model and parallel layout (the two sides of a shape agree
    on the model: layers, total heads, head_dim, page_size, mla)."""
    page_size: int = 16
    layers: int = 4              # the model's layers (this rank holds a PP stage of them)
    total_kv_heads: int = 4
    head_dim: int = 16
    mla: bool = False
    kv_lora_rank: int = 32       # MLA: the latent row is kv_lora_rank + qk_rope_head_dim
    qk_rope_head_dim: int = 16
    tp_size: int = 1
    tp_rank: int = 0
    pp_size: int = 1
    pp_rank: int = 0
    pool_tokens: int = 2048      # the KV pool's tokens (a multiple of page_size)
    max_reqs: int = 16           # ReqToTokenPool rows
    max_context: int = 1024
    chunk_tokens: int = 64       # chunked prefill: tokens per chunk (a multiple of page_size)
    hybrid: bool = False         # a hybrid (Mamba2) model: the odd layers are linear
                                 # attention with a per-request state slot, the even
                                 # ones full attention with KV pages

    @property
    def attn_layers(self) -> List[int]:   # this rank's layers that hold KV pages
        return [x for x in self.stage_layers if not (self.hybrid and x % 2)]

    @property
    def mamba_layers(self) -> List[int]:
        return [x for x in self.stage_layers if self.hybrid and x % 2]

    @property
    def heads(self) -> int:      # this rank's KV heads (MLA: one latent "head")
        return 1 if self.mla else self.total_kv_heads // self.tp_size

    @property
    def head0(self) -> int:
        return 0 if self.mla else self.tp_rank * self.heads

    @property
    def stage_layers(self) -> range:
        per = self.layers // self.pp_size
        return range(self.pp_rank * per, (self.pp_rank + 1) * per)


def pattern(tokens, positions, layer: int, head: int, kv: int):
    """What the forward writes in a KV slot, every element of it: a function
    of the token id and its position (so a decode's cached prefix holds what
    the prefill would have sent), the layer, the global head and K/V; small
    integers, exact in float16."""
    return (tokens * 131 + positions * 7 + layer * 31 + head * 17 + kv * 5) % 1021


def input_ids(room: int, n: int, prefix_of: Optional[int] = None, prefix_len: int = 0):
    """A request's token ids; with prefix_of, its first prefix_len tokens are
    that room's (a shared prompt prefix)."""
    ids = [(room * 7 + i) % 32000 for i in range(n)]
    if prefix_of is not None:
        ids[:prefix_len] = [(prefix_of * 7 + i) % 32000 for i in range(prefix_len)]
    return ids


def first_token(room: int) -> int:
    return 1 + room % 30011


# ---- the scheduler parts SGLang's queues read ---------------------------------------

class _Recorder:
    """scheduler.output_streamer: records what SGLang streams to the client."""

    def __init__(self):
        self.streamed: List = []

    def stream_output(self, reqs, return_logprob=False, *args, **kwargs):
        self.streamed.extend(reqs)


class _Metrics:
    enable_metrics = False
    kv_transfer_latency_ms = 0.0
    kv_transfer_speed_gb_s = 0.0


def _server_args(mode: str, shape: Shape, backend_name: str, bootstrap_port: int,
                 host: str, ib_device: Optional[str], extra: Dict):
    kw = dict(model_path="dummy", device="cpu", page_size=shape.page_size,
              tp_size=shape.tp_size, pp_size=shape.pp_size, dp_size=1,
              disaggregation_mode=mode, disaggregation_transfer_backend=backend_name,
              disaggregation_bootstrap_port=bootstrap_port, host=host,
              disaggregation_ib_device=ib_device, chunked_prefill_size=shape.chunk_tokens,
              disable_radix_cache=True)
    kw.update(extra)
    return S.ServerArgs(**kw)


def _gloo_group(path: str, rank: int, world: int):
    """The rank's attention-TP CPU group (scheduler.attn_tp_cpu_group): a
    gloo group of the side's TP ranks over a FileStore. The ranks of one side
    are threads of one process (each with its own scheduler and backend
    manager); torch.distributed.all_reduce takes such a group as SGLang's
    poll_and_all_reduce passes it, no default group needed."""
    import torch.distributed as dist
    return dist.ProcessGroupGloo(dist.FileStore(path, world), rank, world)


def _allocator(size, page_size, dtype, kvcache):
    """SGLang's PagedTokenToKVPoolAllocator, its alloc_extend running SGLang's
    own torch reference alloc_extend_naive (as its NPU allocator does) instead
    of the triton kernel (no triton here)."""
    torch = S.torch
    base = S.paged.PagedTokenToKVPoolAllocator
    naive = S.paged.alloc_extend_naive
    get_num_new_pages = S.paged.get_num_new_pages

    class CPUPagedTokenToKVPoolAllocator(base):
        def alloc_extend(self, prefix_lens, prefix_lens_cpu, seq_lens, seq_lens_cpu,
                         last_loc, extend_num_tokens, num_new_pages=None):
            if num_new_pages is None:
                num_new_pages = get_num_new_pages(seq_lens=seq_lens_cpu, page_size=self.page_size,
                                                  prefix_lens=prefix_lens_cpu)
            if num_new_pages > len(self.free_pages):
                return None
            out = torch.empty((extend_num_tokens,), dtype=torch.int64, device=self.device)
            naive(prefix_lens, seq_lens, last_loc, self.free_pages, out, self.page_size, self.device)
            self.free_pages = self.free_pages[num_new_pages:]
            return out

    return CPUPagedTokenToKVPoolAllocator(size, page_size, dtype, "cpu", kvcache, need_sort=False)


def _watched_cache(base, params, watch):
    """SGLang's ChunkCache or RadixCache; watch(req) sees every request whose
    KV it is handed back."""
    class Watched(base):
        def cache_finished_req(self, req, is_insert=True, *, kv_len_to_handle):
            watch(req)
            return super().cache_finished_req(req, is_insert, kv_len_to_handle=kv_len_to_handle)
    Watched.__name__ = "Watched" + base.__name__
    return Watched(params)


class _Side:
    """What both sides build: the pools, the allocator, the tree cache."""

    def __init__(self, shape: Shape, gloo_path: str, watch=None, radix: bool = False,
                 decode: bool = False):
        torch = S.torch
        self.shape = shape
        sh = shape
        self.mamba_pool = None
        if sh.hybrid:
            self._hybrid_pools(decode)
        elif sh.mla:
            self.kv_pool = S.mp.MLATokenToKVPool(
                size=sh.pool_tokens, page_size=sh.page_size, dtype=torch.float16,
                kv_lora_rank=sh.kv_lora_rank, qk_rope_head_dim=sh.qk_rope_head_dim,
                layer_num=len(sh.stage_layers), device="cpu", enable_memory_saver=False,
                start_layer=sh.stage_layers.start, end_layer=sh.stage_layers.stop - 1)
        else:
            self.kv_pool = S.mp.MHATokenToKVPool(
                size=sh.pool_tokens, page_size=sh.page_size, dtype=torch.float16,
                head_num=sh.heads, head_dim=sh.head_dim, layer_num=len(sh.stage_layers),
                device="cpu", enable_memory_saver=False, enable_alt_stream=False,
                start_layer=sh.stage_layers.start, end_layer=sh.stage_layers.stop - 1)
        self.allocator = _allocator(sh.pool_tokens, sh.page_size, torch.float16, self.kv_pool)
        if sh.hybrid:
            pass  # built with the pools
        elif decode:
            # what SGLang's decode builds (kv_cache_configurator._build_decode_req_pool):
            # max_reqs running, as many more pre-allocated or in transfer
            self.req_to_token_pool = S.decode.DecodeReqToTokenPool(
                size=sh.max_reqs, max_context_len=sh.max_context, device="cpu",
                enable_memory_saver=False, pre_alloc_size=sh.max_reqs)
        else:
            self.req_to_token_pool = S.mp.ReqToTokenPool(
                size=sh.max_reqs, max_context_len=sh.max_context, device="cpu", enable_memory_saver=False)
        self.req_slots_total = self.req_to_token_pool.available_size()
        self.state_slots_total = (self.req_to_token_pool.mamba_allocator.available_size()
                                  if sh.hybrid else 0)
        params = S.CacheInitParams(disable=not radix, req_to_token_pool=self.req_to_token_pool,
                                   token_to_kv_pool_allocator=self.allocator, page_size=sh.page_size)
        base = S.radix_cache.RadixCache if radix else S.chunk_cache.ChunkCache
        self.tree_cache = _watched_cache(base, params, watch) if watch else base(params)
        self.gloo = _gloo_group(gloo_path, sh.tp_rank, sh.tp_size)
        self.free_at_start = self.allocator.available_size()

    def _hybrid_pools(self, decode: bool):
        """SGLang's hybrid (Mamba2) pools, as kv_cache_configurator builds
        them: HybridReqToTokenPool (prefill) or decode.py's
        HybridMambaDecodeReqToTokenPool, each with its MambaPool of state
        slots, and HybridLinearKVPool (the full-attention layers' KV)."""
        from sglang.srt.configs.mamba_utils import Mamba2CacheParams, Mamba2StateShape
        torch = S.torch
        sh = self.shape
        st = Mamba2StateShape.create(tp_world_size=1, intermediate_size=64, n_groups=1, num_heads=4,
                                     head_dim=16, state_size=8, conv_kernel=4)
        params = Mamba2CacheParams(shape=st, layers=sh.mamba_layers)
        common = dict(max_context_len=sh.max_context, device="cpu", enable_memory_saver=False,
                      cache_params=params, mamba_layer_ids=sh.mamba_layers,
                      enable_mamba_extra_buffer=False, enable_overlap_schedule=False)
        if decode:
            self.req_to_token_pool = S.decode.HybridMambaDecodeReqToTokenPool(
                size=sh.max_reqs, speculative_num_draft_tokens=None, pre_alloc_size=sh.max_reqs, **common)
        else:
            self.req_to_token_pool = S.mp.HybridReqToTokenPool(
                size=sh.max_reqs, mamba_size=2 * sh.max_reqs, mamba_spec_state_size=sh.max_reqs, **common)
        self.mamba_pool = self.req_to_token_pool.mamba_pool
        self.kv_pool = S.mp.HybridLinearKVPool(
            size=sh.pool_tokens, dtype=torch.float16, page_size=sh.page_size, head_num=sh.heads,
            head_dim=sh.head_dim, full_attention_layer_ids=sh.attn_layers, device="cpu",
            mamba_pool=self.mamba_pool, enable_memory_saver=False)

    # KV slot access, by global layer
    def _layer_bufs(self, layer: int):
        if self.shape.hybrid:
            li = self.shape.attn_layers.index(layer)
            pool = self.kv_pool.full_kv_pool
            return pool.k_buffer[li], pool.v_buffer[li]
        li = layer - self.shape.stage_layers.start
        if self.shape.mla:
            return (self.kv_pool.kv_buffer[li],)
        return self.kv_pool.k_buffer[li], self.kv_pool.v_buffer[li]

    def _state_tensors(self):
        """(index, per-slot view) of every transferred state tensor and layer."""
        k = 0
        for _, t, _ in self.mamba_pool._iter_transfer_state_tensors():
            for layer in range(t.shape[0]):
                yield k, t[layer]
                k += 1

    def write_state(self, room: int, slot: int):
        torch = S.torch
        for k, t in self._state_tensors():
            n = t[slot].numel()
            t[slot] = ((torch.arange(n) + room * 13 + k * 7) % 251).to(t.dtype).view(t[slot].shape)

    def check_state(self, room: int, slot: int) -> int:
        torch = S.torch
        bad = 0
        for k, t in self._state_tensors():
            n = t[slot].numel()
            want = ((torch.arange(n) + room * 13 + k * 7) % 251).to(t.dtype).view(t[slot].shape)
            bad += int((t[slot] != want).sum())
        return bad

    def state_slots(self) -> Dict[str, int]:
        if not self.shape.hybrid:
            return {}
        return {"state_free": self.req_to_token_pool.mamba_allocator.available_size(),
                "state_total": self.state_slots_total}

    def state_bytes(self) -> int:
        return sum(t[0].numel() * t.element_size() for _, t in self._state_tensors())

    def write_pattern(self, tokens, positions, locs):
        """The forward: every layer, head and K/V of the given token slots."""
        torch = S.torch
        sh = self.shape
        tok = torch.as_tensor(list(tokens), dtype=torch.float32)
        pos = torch.as_tensor(list(positions), dtype=torch.float32)
        locs = torch.as_tensor(locs, dtype=torch.int64)
        for layer in sh.attn_layers:
            for kv, buf in enumerate(self._layer_bufs(layer)):
                for h in range(sh.heads):
                    v = pattern(tok, pos, layer, sh.head0 + h, kv)
                    buf[locs, h, :] = v.to(buf.dtype)[:, None]

    def check_pattern(self, tokens, positions, locs) -> int:
        """Wrong 2-byte elements over every layer, head and K/V of the slots."""
        torch = S.torch
        sh = self.shape
        tok = torch.as_tensor(list(tokens), dtype=torch.float32)
        pos = torch.as_tensor(list(positions), dtype=torch.float32)
        locs = torch.as_tensor(locs, dtype=torch.int64)
        bad = 0
        for layer in sh.attn_layers:
            for kv, buf in enumerate(self._layer_bufs(layer)):
                for h in range(sh.heads):
                    want = pattern(tok, pos, layer, sh.head0 + h, kv).to(buf.dtype)
                    bad += int((buf[locs, h, :] != want[:, None]).sum())
        return bad

    def slot_bytes(self, ntokens: int) -> int:
        sh = self.shape
        row = (sh.kv_lora_rank + sh.qk_rope_head_dim) if sh.mla else sh.heads * sh.head_dim * 2
        return ntokens * len(sh.attn_layers) * row * 2


def _common_scheduler(sched, side: _Side, server_args, mode_shape: Shape, model_layers: int,
                      total_kv_heads: int, max_total_tokens: int):
    from types import SimpleNamespace as ns
    sched.server_args = server_args
    sched.ps = ns(dp_rank=None, gpu_id=0, tp_rank=mode_shape.tp_rank, tp_size=mode_shape.tp_size,
                  pp_rank=mode_shape.pp_rank, pp_size=mode_shape.pp_size)
    sched.tp_worker = ns(model_runner=ns(effective_max_total_num_tokens=max_total_tokens,
                                         kv_cache_dtype_str="auto", swa_max_total_num_tokens=0),
                         is_hybrid_swa=False)
    sched.model_config = ns(num_hidden_layers=model_layers,
                            get_total_num_kv_heads=lambda: total_kv_heads,
                            num_key_value_heads=total_kv_heads, hf_config=None)
    sched.token_to_kv_pool_allocator = side.allocator
    sched.req_to_token_pool = side.req_to_token_pool
    sched.tree_cache = side.tree_cache
    sched.attn_tp_cpu_group = side.gloo
    sched.attn_cp_cpu_group = side.gloo   # attn-CP size 1: the second MIN is over the same rank set
    sched.output_streamer = _Recorder()
    sched.metrics_reporter = _Metrics()
    sched.metrics_collector = None
    sched.enable_hicache_storage = False
    sched.enable_overlap = False
    sched.enable_staging = False
    sched.waiting_queue = []
    sched.spec_algorithm = S.SpeculativeAlgorithm.NONE
    sched.last_batch = None


# ---- prefill --------------------------------------------------------------------------

@dataclasses.dataclass
class Request:
    room: int
    input_len: int
    prefix_of: Optional[int] = None  # its first shared_prefix tokens are this room's
    shared_prefix: int = 0




def make_req(r: Request, bootstrap_host: str, bootstrap_port: Optional[int], mode):
    req = S.sb.Req(rid=f"room-{r.room}", origin_input_text="",
                   origin_input_ids=array("q", input_ids(r.room, r.input_len, r.prefix_of,
                                                          r.shared_prefix)),
                   sampling_params=S.SamplingParams(max_new_tokens=8),
                   bootstrap_host=bootstrap_host, bootstrap_port=bootstrap_port,
                   bootstrap_room=r.room, disagg_mode=mode)
    return req


class PPChannel:
    """The pipeline's point-to-point objects between the PP stages of one
    prefill (threads of one process): what
    scheduler_pp_mixin.event_loop_pp_disagg_prefill sends down the stages
    (_pp_send_pyobj_to_next_stage) and back, reduced to one synchronous
    round per turn."""

    def __init__(self, stages: int, timeout: float = 120.0):
        self.stages = stages
        self.slots: List = [None] * stages
        # a stage that left its loop alone would hold the others here for
        # ever: the timeout turns that into a BrokenBarrierError, an error
        self.barrier = threading.Barrier(stages, timeout=timeout)

    def gather(self, stage: int, value):
        self.slots[stage] = value
        self.barrier.wait()
        out = list(self.slots)
        self.barrier.wait()
        return out


class PrefillRank:
    """One prefill rank: a Scheduler made of SGLang's prefill mixin and the
    attributes its queue code reads, and SGLang's PrefillBootstrapQueue.
    With pp_size > 1, pp is the PPChannel of its stages."""

    def __init__(self, shape: Shape, backend_name: str, bootstrap_port: int, host: str = "127.0.0.1",
                 ib_device: Optional[str] = None, gloo_path: str = "/tmp/kvf-sg-gloo-p",
                 server_args_extra: Optional[Dict] = None, pp: Optional[PPChannel] = None):
        load()
        self.shape = shape
        self.backend = backend(backend_name)
        # SGLang refuses "fake" as a prefill's configured backend (its warmup
        # requests reach FAKE by bootstrap_host); the queue takes the enum.
        sa_backend = "mooncake" if backend_name == "fake" else backend_name
        self.server_args = _server_args("prefill", shape, sa_backend, bootstrap_port, host, ib_device,
                                        server_args_extra or {})
        S.rc.publish(self.server_args, role="scheduler")
        self.side = _Side(shape, gloo_path)

        class Sched(S.prefill.SchedulerDisaggregationPrefillMixin):
            pass
        sched = self.sched = Sched()
        _common_scheduler(sched, self.side, self.server_args, shape, shape.layers, shape.total_kv_heads,
                          shape.pool_tokens)
        sched.chunked_req = None
        sched.max_running_requests = shape.max_reqs
        sched.req_to_metadata_buffer_idx_allocator = S.utils.ReqToMetadataIdxAllocator(shape.max_reqs * 2)
        sched.disagg_metadata_buffers = S.utils.MetadataBuffers(
            shape.max_reqs * 2, hidden_size=16, hidden_states_dtype=S.torch.float32)
        sched.disagg_prefill_bootstrap_queue = S.prefill.PrefillBootstrapQueue(
            token_to_kv_pool=self.side.kv_pool, draft_token_to_kv_pool=None,
            req_to_metadata_buffer_idx_allocator=sched.req_to_metadata_buffer_idx_allocator,
            metadata_buffers=sched.disagg_metadata_buffers, tp_rank=shape.tp_rank,
            tp_size=shape.tp_size, gpu_id=0, bootstrap_port=bootstrap_port,
            gloo_group=self.side.gloo, max_total_num_tokens=shape.pool_tokens, scheduler=sched,
            pp_rank=shape.pp_rank, pp_size=shape.pp_size, transfer_backend=self.backend)
        sched.disagg_prefill_inflight_queue = []
        sched.disagg_prefill_pending_chunk_rids = set()
        sched.enable_staging = False  # SGLANG_DISAGG_STAGING_BUFFER: a GPU staging path
        self.kv_manager = sched.disagg_prefill_bootstrap_queue.kv_manager
        self.pp = pp
        self.bootstrap_host, self.bootstrap_port = host, bootstrap_port
        self.requests: Dict[int, Request] = {}
        self.running: List = []          # requests with chunks left (the harness's batch queue)
        self.done: Dict[int, str] = {}   # room -> "ok" / failure text
        self.turns = 0
        self.bytes_written = 0

    # 1. process_input_requests
    def add(self, r: Request, bootstrap_host: Optional[str] = None):
        req = make_req(r, bootstrap_host or self.bootstrap_host, self.bootstrap_port,
                       S.utils.DisaggregationMode.PREFILL)
        req.harness = r
        self.requests[r.room] = r
        self.sched.disagg_prefill_bootstrap_queue.add(req, self.shape.heads)
        return req

    def _forward(self, req):
        """run_batch for the request's next chunk: KV slots from SGLang's
        allocator into req_to_token, the pattern into the pool."""
        torch = S.torch
        sh = self.shape
        if req.req_pool_idx is None:
            # the whole input is computed, a decode-side prefix too (the
            # decode's prefix cache decides what is sent: start_send_idx)
            self.side.req_to_token_pool.alloc([req])
            start = 0
        else:
            start = req.extend_range.end
        end = min(start + sh.chunk_tokens, len(req.origin_input_ids))
        last_loc = (self.side.req_to_token_pool.req_to_token[req.req_pool_idx, start - 1:start]
                    .to(torch.int64) if start > 0 else torch.tensor([-1], dtype=torch.int64))
        locs = self.side.allocator.alloc_extend(
            prefix_lens=torch.tensor([start]), prefix_lens_cpu=torch.tensor([start]),
            seq_lens=torch.tensor([end]), seq_lens_cpu=torch.tensor([end]),
            last_loc=last_loc, extend_num_tokens=end - start)
        if locs is None:
            raise RuntimeError("prefill KV pool full (the harness sizes it for its requests)")
        self.side.req_to_token_pool.write((req.req_pool_idx, slice(start, end)), locs.to(torch.int32))
        if req.kv is None:
            req.kv = S.sb.ReqKvInfo(kv_allocated_len=end, swa_evicted_seqlen=0)
        req.kv.kv_allocated_len = end
        req.kv_committed_len = end
        req.set_extend_range(start, end)
        self.side.write_pattern(req.origin_input_ids[start:end], range(start, end), locs)
        self.bytes_written += self.side.slot_bytes(end - start)
        last = end >= len(req.origin_input_ids)
        if last and sh.hybrid:  # the linear layers' state after the whole prompt
            self.side.write_state(req.bootstrap_room, int(req.mamba_pool_idx))
            self.bytes_written += self.side.state_bytes()
        return last

    def turn(self):
        """One iteration of event_loop_normal_disagg_prefill."""
        s = self.sched
        self.turns += 1
        progress = getattr(self.kv_manager, "progress", None)
        if progress is not None:
            progress()
        # 2.
        if self.pp is None:
            s.waiting_queue.extend(s.disagg_prefill_bootstrap_queue.pop_bootstrapped())
        else:
            self._pp_bootstrap()
        # 3. the chunk that ran last turn is sent now (non-overlap scheduler)
        if s.chunked_req is not None:
            s.process_prefill_chunk(last_batch=None, running_batch=_RunningBatch())
        # the next chunk: the chunked request first, else a waiting one
        req = s.chunked_req
        if req is None and s.waiting_queue:
            req = s.waiting_queue.pop(0)
        if req is not None:
            last = self._forward(req)                  # 4.
            if last:                                   # 5.
                s.chunked_req = None
                req.output_ids.append(first_token(req.bootstrap_room))
                req.cached_tokens = req.bootstrap_room % 97
                s.disagg_prefill_inflight_queue.append(req)
                req.hidden_states_tensor = None
                req.output_dsa_topk_indices = None
                if not req.pending_bootstrap:
                    s.send_kv_chunk(req, last_chunk=True)
            else:
                s.chunked_req = req
        # 6.
        release = self._pp_transferred() if self.pp is not None else None
        for req in s.process_disagg_prefill_inflight_queue(release):
            fr = req.finished_reason
            self.done[req.bootstrap_room] = "ok" if type(fr).__name__ == "FINISH_LENGTH" else \
                f"failed: {getattr(fr, 'message', fr)}"
        for req in list(s.output_streamer.streamed):
            # bootstrap failures are streamed by handle_bootstrap_failure
            if S.utils.is_aborted(req) and req.bootstrap_room not in self.done:
                self.done[req.bootstrap_room] = f"failed: {req.finished_reason.message}"
        s.output_streamer.streamed.clear()

    # PP: event_loop_pp_disagg_prefill's consensus, each stage's own
    # queue methods, SGLang's helpers to combine them (scheduler_pp_mixin.py)
    def _pp_bootstrap(self):
        """_pp_pd_get_bootstrapped_ids: each stage's get_rids of its bootstrap
        queue (WaitingForInput: good, Failed: bad), good intersected and bad
        united down the stages, aborted requests routed to bad
        (_route_aborts_to_bad); then process_bootstrapped_queue with that
        consensus: pop_bootstrapped(pp_good_rids=, pp_bad_rids=)."""
        from sglang.srt.managers.scheduler_pp_mixin import SchedulerPPMixin as PP
        q = self.sched.disagg_prefill_bootstrap_queue
        poll = S.base.KVPoll
        local = PP.get_rids(self.sched, q.queue, True, [poll.WaitingForInput], [poll.Failed])
        aborted = {r.rid for r in q.queue if isinstance(r.finished_reason, S.sb.FINISH_ABORT)}
        good, bad = None, None
        for g, b in self.pp.gather(self.shape.pp_rank, local):
            good = list(g) if good is None else list(set(good) & set(g))
            bad = list(b) if bad is None else list(set(bad) | set(b))
        good, bad = PP._route_aborts_to_bad(good, bad, aborted)
        good_reqs, _failed = q.pop_bootstrapped(return_failed_reqs=True, pp_good_rids=good,
                                                pp_bad_rids=bad)
        self.sched.waiting_queue.extend(good_reqs)

    def _pp_transferred(self):
        """_pp_pd_get_prefill_transferred_ids: each stage's get_rids of its
        inflight queue (Success or Failed), intersected down the stages: the
        rids every stage may release."""
        from sglang.srt.managers.scheduler_pp_mixin import SchedulerPPMixin as PP
        poll = S.base.KVPoll
        mine = PP.get_rids(self.sched, self.sched.disagg_prefill_inflight_queue, True,
                           [poll.Success, poll.Failed])
        rids = None
        for st in self.pp.gather(self.shape.pp_rank, mine):
            rids = list(st) if rids is None else list(set(rids) & set(st))
        return rids

    def idle(self) -> bool:
        s = self.sched
        return not (s.disagg_prefill_bootstrap_queue.queue or s.waiting_queue or s.chunked_req
                    or s.disagg_prefill_inflight_queue)

    def queues(self) -> Dict[str, int]:
        s = self.sched
        return {"bootstrap": len(s.disagg_prefill_bootstrap_queue.queue), "waiting": len(s.waiting_queue),
                "chunked": int(s.chunked_req is not None), "inflight": len(s.disagg_prefill_inflight_queue),
                "metadata_free": s.req_to_metadata_buffer_idx_allocator.available_size(),
                "kv_free": self.side.allocator.available_size(), "kv_total": self.side.free_at_start,
                "req_slots_free": self.side.req_to_token_pool.available_size(),
                "req_slots_total": self.side.req_slots_total,
                "metadata_total": s.req_to_metadata_buffer_idx_allocator.size,
                **self.side.state_slots()}


class _RunningBatch:
    batch_is_full = False


# ---- decode ---------------------------------------------------------------------------

class DecodeRank:
    """One decode rank: SGLang's DecodeTransferQueue and DecodePreallocQueue
    under a Scheduler made of its decode mixin and the attributes they read.
    radix: SGLang's decode-side prefix cache (a RadixCache,
    --disaggregation-decode-enable-radix-cache): a finished request's pages
    stay in its tree, and a later request sharing the prefix sends
    decode_prefix_len, so the prefill sends only the rest."""

    def __init__(self, shape: Shape, backend_name: str, bootstrap_port: int, host: str = "127.0.0.1",
                 ib_device: Optional[str] = None, gloo_path: str = "/tmp/kvf-sg-gloo-d",
                 server_args_extra: Optional[Dict] = None, radix: bool = False):
        load()
        self.shape = shape
        self.backend = backend(backend_name)
        extra = dict(server_args_extra or {})
        if radix:
            extra.update(disaggregation_decode_enable_radix_cache=True, disable_radix_cache=False)
        self.server_args = _server_args("decode", shape, backend_name, bootstrap_port, host, ib_device,
                                        extra)
        S.rc.publish(self.server_args, role="scheduler")
        # decode.py _init_kv_manager reads get_parallel().attn_tp_size: the
        # parallel groups SGLang would initialize, as its tests override them
        self._par = S.rc.get_parallel().override(attn_tp_size=shape.tp_size, attn_tp_rank=shape.tp_rank,
                                                  tp_size=shape.tp_size, tp_rank=shape.tp_rank,
                                                  pp_size=shape.pp_size, pp_rank=shape.pp_rank,
                                                  attn_dp_size=1, attn_dp_rank=0, attn_cp_size=1,
                                                  attn_cp_rank=0)
        self._par.__enter__()
        _rank_shape.shape = shape
        self.receivers: Dict[int, object] = {}   # room -> the kv_receiver SGLang created
        self.freed_unquiescent = 0               # failed requests freed while a write could land
        self.hooked = 0                          # released by the backend's page_release_hook
        self.side = _Side(shape, gloo_path, watch=self._watch_free, radix=radix, decode=True)

        class Sched(S.decode.SchedulerDisaggregationDecodeMixin):
            pass
        sched = self.sched = Sched()
        _common_scheduler(sched, self.side, self.server_args, shape, shape.layers, shape.total_kv_heads,
                          shape.pool_tokens)
        sched.running_batch = type("RunningBatch", (), {"reqs": []})()
        sched.enable_priority_scheduling = False
        sched.enable_decode_hicache = False
        sched.enable_hisparse = False
        sched.hisparse_coordinator = None
        sched.max_total_num_tokens = shape.pool_tokens
        buffer_size = shape.max_reqs * 2
        sched.req_to_metadata_buffer_idx_allocator = S.utils.ReqToMetadataIdxAllocator(buffer_size)
        sched.disagg_metadata_buffers = S.utils.MetadataBuffers(
            buffer_size, hidden_size=16, hidden_states_dtype=S.torch.float32)
        sched.disagg_decode_transfer_queue = S.decode.DecodeTransferQueue(
            gloo_group=self.side.gloo,
            req_to_metadata_buffer_idx_allocator=sched.req_to_metadata_buffer_idx_allocator,
            tp_rank=shape.tp_rank, metadata_buffers=sched.disagg_metadata_buffers, scheduler=sched,
            tree_cache=self.side.tree_cache)
        sched.disagg_decode_prealloc_queue = S.decode.DecodePreallocQueue(
            req_to_token_pool=self.side.req_to_token_pool, token_to_kv_pool_allocator=self.side.allocator,
            draft_token_to_kv_pool=None,
            req_to_metadata_buffer_idx_allocator=sched.req_to_metadata_buffer_idx_allocator,
            metadata_buffers=sched.disagg_metadata_buffers, scheduler=sched,
            transfer_queue=sched.disagg_decode_transfer_queue, tree_cache=self.side.tree_cache,
            gloo_group=self.side.gloo, tp_rank=shape.tp_rank, tp_size=shape.tp_size, dp_size=1,
            gpu_id=0, bootstrap_port=bootstrap_port, max_total_num_tokens=shape.pool_tokens,
            pp_rank=shape.pp_rank, num_reserved_decode_tokens=S.rc.get_disagg().num_reserved_decode_tokens,
            transfer_backend=self.backend)
        self.kv_manager = sched.disagg_decode_prealloc_queue.kv_manager
        hook = getattr(self.kv_manager, "page_release_hook", None)
        if hook is not None:  # set by the patched DecodePreallocQueue: count its calls
            def counted(rc, hook=hook):
                self.hooked += 1
                return hook(rc)
            self.kv_manager.page_release_hook = counted
        self.bootstrap_port = bootstrap_port
        self.requests: Dict[int, Request] = {}
        self.done: Dict[int, str] = {}
        self.bad_elements: Dict[int, int] = {}
        self.bytes_checked = 0
        self.prefix_tokens: Dict[int, int] = {}  # room -> decode_prefix_len SGLang computed
        self.turns = 0

    def add(self, r: Request, bootstrap_host: str):
        req = make_req(r, bootstrap_host, self.bootstrap_port, S.utils.DisaggregationMode.DECODE)
        req.harness = r
        self.requests[r.room] = r
        q = self.sched.disagg_decode_prealloc_queue
        q.add(req)
        for dr in q.queue[-1:]:
            if dr.req is req:
                self.receivers[r.room] = dr.kv_receiver
        return req

    def _watch_free(self, req):
        """A failed request's pages are being freed: could a write still land?"""
        if not S.utils.is_aborted(req):
            return
        room = getattr(self.receivers.get(req.bootstrap_room), "room", None)
        if room is None or not hasattr(room, "quiescent"):
            return
        try:
            quiet = room.quiescent()
        except Exception:
            quiet = True  # released: quiescent by construction
        if not quiet:
            self.freed_unquiescent += 1

    def turn(self, check_bytes: bool = True):
        s = self.sched
        self.turns += 1
        progress = getattr(self.kv_manager, "progress", None)
        if progress is not None:
            progress()
        s.process_decode_queue()
        # get_next_disagg_decode_batch_to_run: the harness ends each request here
        for req in s.waiting_queue:
            self._finish(req, check_bytes)
        s.waiting_queue = []
        for req in list(s.output_streamer.streamed):
            if S.utils.is_aborted(req) and req.bootstrap_room not in self.done:
                self.done[req.bootstrap_room] = f"failed: {req.finished_reason.message}"
        s.output_streamer.streamed.clear()

    def _finish(self, req, check_bytes: bool):
        room = req.bootstrap_room
        self.prefix_tokens[room] = int(getattr(req, "cache_protected_len", 0) or 0)
        n = len(req.origin_input_ids)
        bad = 0
        if check_bytes:
            locs = self.side.req_to_token_pool.req_to_token[req.req_pool_idx, :n].to(S.torch.int64)
            bad = self.side.check_pattern(req.origin_input_ids[:n], range(n), locs)
            self.bytes_checked += self.side.slot_bytes(n)
            if self.shape.hybrid:
                bad += self.side.check_state(room, int(req.mamba_pool_idx))
                self.bytes_checked += self.side.state_bytes()
            if list(req.output_ids[-1:]) != [first_token(room)]:
                bad += 1
            if req.cached_tokens != room % 97:
                bad += 1
        self.bad_elements[room] = bad
        self.done[room] = "ok" if bad == 0 else f"bad: {bad} wrong elements"
        S.decode.release_kv_cache(req, self.side.tree_cache)

    def idle(self) -> bool:
        s = self.sched
        return not (s.disagg_decode_prealloc_queue.queue or s.disagg_decode_prealloc_queue.pending_reqs
                    or s.disagg_decode_transfer_queue.queue or s.waiting_queue)

    def queues(self) -> Dict[str, int]:
        s = self.sched
        q = s.disagg_decode_prealloc_queue
        return {"prealloc": len(q.queue), "pending": len(q.pending_reqs),
                "retracted": len(q.retracted_queue), "transfer": len(s.disagg_decode_transfer_queue.queue),
                "waiting": len(s.waiting_queue),
                "metadata_free": s.req_to_metadata_buffer_idx_allocator.available_size(),
                "kv_free": self.side.allocator.available_size(), "kv_total": self.side.free_at_start,
                "req_slots_free": self.side.req_to_token_pool.available_size(),
                "req_slots_total": self.side.req_slots_total,
                "metadata_total": s.req_to_metadata_buffer_idx_allocator.size,
                **self.side.state_slots()}
