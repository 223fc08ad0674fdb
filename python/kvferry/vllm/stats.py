# SPDX-License-Identifier: Apache-2.0
"""kvferry's figures in vLLM's own metrics.

Each worker's connector counts the rooms that ended since vLLM last asked
(get_kv_connector_stats, once per model-runner step): by kind and outcome
("recv ok", "send peer lost", ...), their bytes (posted by a sender, landed
at a receiver) and their time from creation to the end. vLLM sums the
workers' objects (KVOutputAggregator -> aggregate), hands the dict to its
stat loggers, which rebuild it with build_kv_connector_stats and log
reduce()'s figures ("KV Transfer metrics: ..."), and, where Prometheus is
on, to build_prom_metrics's counters (vllm:kvferry_rooms_total{outcome},
vllm:kvferry_bytes_total{direction})."""
from __future__ import annotations

import dataclasses
from typing import Any, Dict

from vllm.distributed.kv_transfer.kv_connector.v1.metrics import (
    KVConnectorPromMetrics,
    KVConnectorStats,
)


def _empty() -> Dict[str, Any]:
    return {"rooms": {}, "requests": {}, "bytes": {"send": 0, "recv": 0}, "seconds": 0.0,
            "max_seconds": 0.0}


@dataclasses.dataclass
class KVFerryStats(KVConnectorStats):
    """data: {"rooms": {"recv ok": n, ...} (workers), "requests": {"sends": n,
    "refused": n, ...} (the scheduler side), "bytes": {"send": b, "recv": b},
    "seconds": total room time, "max_seconds": the longest}; plain types, so
    it crosses vLLM's process boundaries as is."""

    def __post_init__(self) -> None:
        base = _empty()
        base.update(self.data or {})
        self.data = base

    def record(self, outcome: str, nbytes: int, seconds: float) -> None:
        rooms = self.data["rooms"]
        rooms[outcome] = rooms.get(outcome, 0) + 1
        kind = outcome.split(" ", 1)[0]
        if kind in ("send", "recv"):
            self.data["bytes"][kind] += int(nbytes)
        self.data["seconds"] += float(seconds)
        self.data["max_seconds"] = max(self.data["max_seconds"], float(seconds))

    def reset(self) -> None:
        self.data = _empty()

    def aggregate(self, other: KVConnectorStats) -> "KVFerryStats":
        o = other.data if other is not None else {}
        for key in ("rooms", "requests", "bytes"):
            mine = self.data[key]
            for k, n in (o.get(key) or {}).items():
                mine[k] = mine.get(k, 0) + int(n)
        self.data["seconds"] += float(o.get("seconds", 0.0))
        self.data["max_seconds"] = max(self.data["max_seconds"], float(o.get("max_seconds", 0.0)))
        return self

    def is_empty(self) -> bool:
        return not self.data["rooms"] and not self.data["requests"]

    def reduce(self) -> Dict[str, int | float]:
        rooms = self.data["rooms"]
        n = sum(rooms.values())
        out: Dict[str, int | float] = {
            "kvferry rooms": n,
            "ok": sum(v for k, v in rooms.items() if k.endswith(" ok")),
            "MiB sent": round(self.data["bytes"]["send"] / 2**20, 3),
            "MiB received": round(self.data["bytes"]["recv"] / 2**20, 3),
            "avg room ms": round(1000 * self.data["seconds"] / n, 3) if n else 0.0,
            "max room ms": round(1000 * self.data["max_seconds"], 3),
        }
        for k in sorted(rooms):
            if not k.endswith(" ok"):
                out[k] = rooms[k]
        for k, v in sorted(self.data["requests"].items()):
            out[f"requests {k}"] = v
        return out


class KVFerryPromMetrics(KVConnectorPromMetrics):
    """Prometheus counters fed from each interval's KVFerryStats."""

    def __init__(self, vllm_config: Any, metric_types: Any, labelnames: Any,
                 per_engine_labelvalues: Any):
        super().__init__(vllm_config, metric_types, labelnames, per_engine_labelvalues)
        names = list(labelnames)
        # vLLM types _counter_cls as any metric class; it makes Counters
        self.rooms: Any = self._counter_cls(
            name="vllm:kvferry_rooms_total", labelnames=names + ["outcome"],
            documentation="kvferry rooms ended, by kind and outcome")
        self.bytes: Any = self._counter_cls(
            name="vllm:kvferry_bytes_total", labelnames=names + ["direction"],
            documentation="kvferry bytes posted (send) or landed (recv)")

    def observe(self, transfer_stats_data: Dict[str, Any], engine_idx: int = 0) -> None:
        values = self.per_engine_labelvalues[engine_idx]
        for outcome, n in (transfer_stats_data.get("rooms") or {}).items():
            self.rooms.labels(*values, outcome).inc(n)
        for d, n in (transfer_stats_data.get("bytes") or {}).items():
            if n:
                self.bytes.labels(*values, d).inc(n)
