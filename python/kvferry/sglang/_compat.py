# SPDX-License-Identifier: Apache-2.0
"""SGLang's base classes and types where SGLang imports; stand-ins with the
same names and fields where it does not, so kvferry.sglang imports and is
tested without SGLang."""
from __future__ import annotations

import dataclasses
from typing import Any, List, Optional

try:
    from sglang.srt.disaggregation.base.conn import (  # type: ignore
        BaseKVBootstrapServer,
        BaseKVManager,
        BaseKVReceiver,
        BaseKVSender,
        KVArgs,
        KVPoll,
    )

    try:
        from sglang.srt.disaggregation.base.conn import KVTransferMetric  # type: ignore
    except ImportError:  # older SGLang: no metric class
        KVTransferMetric = None  # type: ignore
    HAVE_SGLANG = True
except ImportError:
    HAVE_SGLANG = False

    class KVArgs:  # type: ignore[no-redef]
        """What SGLang's KVArgs carries that this backend reads."""

        engine_rank: int = 0
        kv_data_ptrs: List[int]
        kv_data_lens: List[int]
        kv_item_lens: List[int]
        kv_layer_ids: List[int] = []
        kv_cache_dtype_str: str = ""
        aux_data_ptrs: List[int] = []
        aux_data_lens: List[int] = []
        aux_item_lens: List[int] = []
        state_types: List[Any] = []
        state_data_ptrs: List[Any] = []
        state_data_lens: List[Any] = []
        state_item_lens: List[Any] = []
        ib_device: str = ""
        gpu_id: int = 0
        kv_head_num: int = 0
        total_kv_head_num: int = 0
        page_size: int = 1
        system_dp_rank: int = 0
        pp_rank: int = 0
        prefill_start_layer: int = 0

    class KVPoll:  # type: ignore[no-redef]
        Failed = 0
        Bootstrapping = 1
        WaitingForInput = 2
        Transferring = 3
        Success = 4

    class BaseKVManager:  # type: ignore[no-redef]
        pass

    class BaseKVSender:  # type: ignore[no-redef]
        pass

    class BaseKVReceiver:  # type: ignore[no-redef]
        pass

    class BaseKVBootstrapServer:  # type: ignore[no-redef]
        pass

    KVTransferMetric = None  # type: ignore


@dataclasses.dataclass
class TransferMetric:
    """get_transfer_metric()'s result where SGLang has no KVTransferMetric."""

    transfer_latency_s: Optional[float] = None
    alloc_latency_s: Optional[float] = None
    transfer_total_bytes: Optional[int] = None


def metric(**kw: Any) -> Any:
    return (KVTransferMetric or TransferMetric)(**kw)


@dataclasses.dataclass
class PrefillInfo:
    """A prefill server's layout as its bootstrap server reports it (the fields
    of SGLang's PrefillServerInfo), with the decode rank's mapping onto it."""

    attn_tp_size: int
    attn_cp_size: int
    dp_size: int
    pp_size: int
    page_size: Optional[int] = None
    kv_cache_dtype: Optional[str] = None
    follow_bootstrap_room: bool = True
    enable_dsa_cache_layer_split: bool = False
    prefill_http_port: Optional[int] = None
    target_tp_rank: Optional[int] = None
    target_tp_ranks: Optional[List[int]] = None
    target_cp_ranks: Optional[List[int]] = None
    target_pp_ranks: Optional[List[int]] = None
    required_dst_info_num: Optional[int] = None
    required_prefill_response_num: Optional[int] = None


class KVTransferError(Exception):
    """A request's transfer failed: raised by failure_exception(). The fields
    of SGLang's KVTransferError (common/conn.py)."""

    def __init__(self, bootstrap_room: int, failure_reason: str,
                 is_from_another_rank: bool = False):
        super().__init__(failure_reason)
        self.bootstrap_room = bootstrap_room
        self.failure_reason = failure_reason
        self.is_from_another_rank = is_from_another_rank

    def __str__(self) -> str:
        return f"KVTransferError(bootstrap_room={self.bootstrap_room}): {self.failure_reason}"
