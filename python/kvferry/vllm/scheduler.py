# SPDX-License-Identifier: Apache-2.0
"""The scheduler-side half of KVFerryConnector (in vLLM's engine core
process, beside its Scheduler). No engine, no RDMA: it decides which
requests move, keeps their block ids, and builds the workers' metadata.

Prefill (kv_producer): a request that arrives with kv_transfer_params
{"do_remote_decode": True} runs as usual; when it finishes (length capped:
its one token), request_finished keeps its blocks (True: freed only when
every worker reported it in finished_sending, i.e. its room is SUCCESS, or
FAILED and quiescent) and returns the kv_transfer_params the decode needs:
the room, and every prefill rank's kvferry address (learned from the
workers' handshake). The next step's metadata tells the workers to send.

Decode (kv_consumer): a request with those params {"do_remote_prefill":
True, ...} asks for the prompt's tokens beyond its local prefix hit,
asynchronously (get_num_new_matched_tokens -> (n, True)); once blocks are
allocated (update_state_after_alloc) the next step's metadata tells the
workers to receive into them. A request aborted before that, or one whose
whole prompt is cached here, still gets a receive without data, so that
the prefill's blocks are freed at once rather than at its deadline."""
from __future__ import annotations

import collections
import logging
from typing import Any, Dict, Optional, Set, Tuple

from ._compat import status_name
from .mapping import (
    PARAMS_KEY,
    ParamsError,
    PrefillInfo,
    prefill_info,
    room_id_of,
)
from .metadata import KVFerryConnectorMetadata, KVFerryHandshake, RecvSpec, SendSpec
from .stats import KVFerryStats

log = logging.getLogger("kvferry.vllm")


# a prefill request's ends whose KV is offered (as NIXL's): its max_tokens
# reached (the proxy's max_tokens=1), or a stop (its one token was EOS)
OFFERED = ("FINISHED_LENGTH_CAPPED", "FINISHED_STOPPED")


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def remote_tokens(params: Dict[str, Any], prompt: int, block_size: int) -> Tuple[int, str]:
    """(the prompt tokens whose KV the prefill holds, why not usable or "")
    from NIXL's keys as vLLM 0.31's prefills and proxies send them:
    remote_num_tokens (missing: the whole prompt) and remote_block_ids, one
    list per KV cache group (a flat list, from kvferry before it, is one
    group). The decode's blocks are the tail of the prefill's, so a prompt
    shorter than what the prefill computed cannot be served from it."""
    held = params.get("remote_num_tokens")
    held = prompt if held is None else int(held)
    if held > prompt:
        return 0, (f"the prefill computed {held} tokens, this prompt has {prompt}: not "
                   "the same prompt")
    groups = params.get("remote_block_ids")
    if groups and isinstance(groups[0], (list, tuple)):
        if len(groups) != 1:
            return 0, f"the prefill sent {len(groups)} KV cache groups; kvferry moves one"
        groups = groups[0]
    if groups is not None and len(groups) != _cdiv(held, block_size):
        return 0, (f"remote_block_ids has {len(groups)} blocks, {held} tokens need "
                   f"{_cdiv(held, block_size)}")
    return held, ""


class SchedulerSide:
    def __init__(self, vllm_config: Any, engine_id: str):
        self.engine_id = engine_id
        self.block_size = int(vllm_config.cache_config.block_size)
        pc = vllm_config.parallel_config
        self.tp_size = int(getattr(pc, "tensor_parallel_size", 1) or 1)
        self.pp_size = int(getattr(pc, "pipeline_parallel_size", 1) or 1)
        self.use_mla = bool(getattr(vllm_config.model_config, "use_mla", False))
        # (pp, tp) -> the worker's handshake (set_xfer_handshake_metadata*)
        self.workers: Dict[Tuple[int, int], KVFerryHandshake] = {}
        # decode: request id -> the local prefix hit get_num_new_matched_tokens saw
        self._local_hit: Dict[str, int] = {}
        # the next metadata's work
        self._recv: Dict[str, RecvSpec] = {}
        self._send: Dict[str, SendSpec] = {}
        # prefill: requests whose blocks are held for a send not reported finished yet
        self.pending_sends: Set[str] = set()
        # this interval's (take_stats) and the totals
        self.counts = {"sends": 0, "recvs": 0, "cancels": 0, "full_hits": 0, "refused": 0}
        self.total: collections.Counter = collections.Counter()

    # ---- handshake (engine core, once after the workers registered their caches)
    def set_workers(self, metadata: Dict[Tuple[int, int], Any]) -> None:
        for (pp, tp), m in metadata.items():
            if not isinstance(m, KVFerryHandshake):
                raise ValueError(f"handshake of worker (pp {pp}, tp {tp}) is "
                                 f"{type(m).__name__}, not kvferry's")
            self.workers[(int(pp), int(tp))] = m
        log.info("kvferry: %d workers: %s", len(self.workers),
                 ", ".join(f"pp{pp}/tp{tp}={m.addr or '-'}"
                           for (pp, tp), m in sorted(self.workers.items())))

    def _peers(self) -> Optional[list]:
        try:
            peers = [[self.workers[(pp, tp)].addr for tp in range(self.tp_size)]
                     for pp in range(self.pp_size)]
        except KeyError:
            return None
        return None if any(a is None for s in peers for a in s) else peers

    @property
    def sliceable(self) -> bool:
        return bool(self.workers) and all(m.sliceable for m in self.workers.values())

    # ---- decode
    def _remote(self, request: Any) -> Optional[PrefillInfo]:
        """The prefill this request's KV comes from, or None (not a remote
        prefill, or one this decode cannot pair with: said once)."""
        params = request.kv_transfer_params
        if not params or not params.get("do_remote_prefill"):
            return None
        try:
            info = prefill_info(params)
        except ParamsError as e:
            self._refuse(request, str(e))
            return None
        why = self._pairing_problem(info)
        if why:
            self._refuse(request, why)
            return None
        return info

    def _pairing_problem(self, info: PrefillInfo) -> str:
        if info.block_size != self.block_size:
            return (f"block size {info.block_size} at the prefill, {self.block_size} here: "
                    "both must use the same --block-size")
        if info.use_mla != self.use_mla:
            return f"MLA at the prefill {info.use_mla}, here {self.use_mla}"
        tp_a, tp_b = info.tp_size, self.tp_size
        if tp_a % tp_b and tp_b % tp_a:
            return f"tensor parallel sizes {tp_a} (prefill) and {tp_b} (decode) do not divide"
        if tp_a != tp_b and not self.use_mla and self.workers and not self.sliceable:
            return (f"prefill TP {tp_a}, decode TP {tp_b}: this decode's KV cache layout "
                    "cannot be sliced by head (HND, or K and V side by side); same TP only")
        return ""

    def _refuse(self, request: Any, why: str) -> None:
        p = request.kv_transfer_params
        if not p.get("_kvferry_refused"):
            p["_kvferry_refused"] = True
            self.counts["refused"] += 1
            log.error("request %s: no remote prefill through kvferry (%s); it is computed here",
                      request.request_id, why)

    def get_num_new_matched_tokens(self, request: Any,
                                   num_computed_tokens: int) -> Tuple[int, bool]:
        info = self._remote(request)
        if info is None:
            return 0, False
        prompt = len(request.prompt_token_ids or ())
        held, why = remote_tokens(request.kv_transfer_params, prompt, self.block_size)
        if why:
            self._refuse(request, why)
            return 0, False
        n = held - int(num_computed_tokens)
        self._local_hit[request.request_id] = int(num_computed_tokens)
        return (n, True) if n > 0 else (0, False)

    def update_state_after_alloc(self, request: Any, blocks: Any,
                                 num_external_tokens: int) -> None:
        params = request.kv_transfer_params
        if not params or not params.get("do_remote_prefill"):
            return
        # one transfer per request, whatever happens below
        params["do_remote_prefill"] = False
        local = self._local_hit.pop(request.request_id, 0)
        info = self._remote_or_cancel_info(request)
        if info is None:
            return
        if num_external_tokens <= 0:
            # nothing to load (the whole prompt is cached here, or this decode
            # refused the pairing): a receive without data frees the prefill
            refused = params.get("_kvferry_refused", False)
            self._recv[request.request_id] = RecvSpec(info.room, info, [], report=False,
                                                      cancel=refused)
            self.counts["cancels" if refused else "full_hits"] += 1
            return
        groups = blocks.get_block_ids()
        if len(groups) != 1:
            log.error("request %s: %d KV cache groups; kvferry.vllm moves one (no hybrid "
                      "allocator): computed here", request.request_id, len(groups))
            self._recv[request.request_id] = RecvSpec(info.room, info, [], report=False,
                                                      cancel=True)
            return
        # the blocks past the local hit, as many as the external tokens fill
        ids = list(groups[0])[local // self.block_size:
                              _cdiv(local + num_external_tokens, self.block_size)]
        self._recv[request.request_id] = RecvSpec(info.room, info, ids)
        self.counts["recvs"] += 1

    def _remote_or_cancel_info(self, request: Any) -> Optional[PrefillInfo]:
        """The prefill's info, even for a pairing this decode refused (its
        blocks are still to be freed); None when the params name no room."""
        try:
            return prefill_info(request.kv_transfer_params)
        except ParamsError:
            return None

    # ---- both
    def build_connector_meta(self, scheduler_output: Any) -> KVFerryConnectorMetadata:
        meta = KVFerryConnectorMetadata(self._recv, self._send)
        self._recv, self._send = {}, {}
        return meta

    def request_finished(self, request: Any, block_ids: list
                         ) -> Tuple[bool, Optional[Dict[str, Any]]]:
        params = request.kv_transfer_params
        if not params:
            return False, None
        if params.get("do_remote_prefill"):
            # a decode request finished (aborted) before it was scheduled:
            # free the prefill's blocks now (a ROOM_INFO without data, then ABORT)
            params["do_remote_prefill"] = False
            self._local_hit.pop(request.request_id, None)
            info = self._remote_or_cancel_info(request)
            if info is not None:
                self._recv[request.request_id] = RecvSpec(info.room, info, [], report=False,
                                                          cancel=True)
                self.counts["cancels"] += 1
            return False, None
        if not params.get("do_remote_decode"):
            return False, None
        if status_name(request.status) not in OFFERED:
            # aborted or failed at the prefill: nothing to hand over
            return False, None
        if not block_ids:
            return False, None
        peers = self._peers()
        if peers is None:
            log.error("request %s: not every worker's kvferry address is known (%d of %d "
                      "handshakes); its KV is not offered", request.request_id,
                      len(self.workers), self.tp_size * self.pp_size)
            return False, None
        # the prompt's blocks: a prefill run longer than its prompt computed
        # output tokens too, which no decode asks for
        ntok = min(int(request.num_computed_tokens), int(request.num_prompt_tokens))
        block_ids = list(block_ids)[:_cdiv(ntok, self.block_size)]
        room = room_id_of(self.engine_id, request.request_id)
        self._send[request.request_id] = SendSpec(room, block_ids)
        self.pending_sends.add(request.request_id)
        self.counts["sends"] += 1
        return True, self._params(request, room, peers, block_ids, ntok)

    def _params(self, request: Any, room: int, peers: list, block_ids: list,
                ntok: int) -> Dict[str, Any]:
        """The kv_transfer_params the decode gets through the proxy: NIXL's
        keys (remote_block_ids one list per KV cache group, remote_num_tokens
        the tokens they hold), and kvferry's own entry, all a decode reads."""
        host, _, port = peers[0][0].rpartition(":")
        info = PrefillInfo(room=room, peers=peers, tp_size=self.tp_size, pp_size=self.pp_size,
                           block_size=self.block_size, use_mla=self.use_mla,
                           num_blocks=len(block_ids))
        return {
            "do_remote_prefill": True,
            "do_remote_decode": False,
            "remote_engine_id": self.engine_id,
            "remote_request_id": request.request_id,
            "remote_block_ids": [list(block_ids)],
            "remote_num_tokens": ntok,
            "remote_host": host.strip("[]"),
            "remote_port": int(port),
            "tp_size": self.tp_size,
            "pp_size": self.pp_size,
            PARAMS_KEY: info.to_params(),
        }

    def update_connector_output(self, output: Any) -> None:
        for rid in getattr(output, "finished_sending", None) or ():
            self.pending_sends.discard(rid)

    def take_stats(self) -> Optional[KVFerryStats]:
        """The requests offered, asked for, cancelled or refused since the
        last call (the "requests" of vLLM's connector stats)."""
        if not any(self.counts.values()):
            return None
        st = KVFerryStats()
        for k, n in self.counts.items():
            if n:
                st.data["requests"][k] = n
        self.total.update(self.counts)
        self.counts = dict.fromkeys(self.counts, 0)
        return st
