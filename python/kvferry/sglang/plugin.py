# SPDX-License-Identifier: Apache-2.0
"""kvferry as SGLang's transfer backend without patching SGLang: a general
plugin (entry-point group "sglang.srt.plugins", pyproject.toml), which SGLang
runs in every process that calls load_plugins() -- the launcher before it
parses the command line, the Engine before it builds ServerArgs, each
scheduler process before it builds its Scheduler -- and then applies the
hooks it registered (docs/sglang-plugin.md).

What it does:
- "kvferry" among --disaggregation-transfer-backend's choices
  (server_args.add_disagg_transfer_backend_choices);
- TransferBackend.KVFERRY, a member added to SGLang's enum in place (the hook
  registry can only replace a class whole);
- get_kv_class: an AROUND hook that answers for KVFERRY and hands every other
  backend to SGLang's own function;
- in a scheduler process: the kvferry manager's progress() once per
  iteration of the disaggregation event loops (an AFTER hook on
  Scheduler.process_input_requests, which each of them calls once per
  iteration, before it polls its queues).
Not done: the deferred release of a failed room's pages (docs/sglang.md,
"Failed rooms"): SGLang frees them inline in
DecodeTransferQueue.pop_transferred; that needs docs/sglang-backend.patch.
"""
from __future__ import annotations

import logging
import sys

log = logging.getLogger("kvferry.sglang.plugin")

BACKEND = "kvferry"
MEMBER = "KVFERRY"


def _add_enum_member(enum_cls, name: str, value: str):
    """enum_cls(value) and enum_cls.<name> from now on, added to the class
    itself: every module that holds the class sees it and the other members
    stay the same objects. Uses the enum's own tables (Python 3.11-3.13)."""
    if value in enum_cls._value2member_map_:
        return enum_cls(value)
    member = object.__new__(enum_cls)  # a plain Enum: no mixed-in type
    member._name_ = name
    member._value_ = value
    member.__objclass__ = enum_cls
    member._sort_order_ = len(enum_cls._member_names_)
    if hasattr(enum_cls, "_add_member_"):  # 3.13: sets the attribute and _member_map_
        enum_cls._add_member_(name, member)
    else:
        enum_cls._member_map_[name] = member
        type.__setattr__(enum_cls, name, member)  # EnumType.__setattr__ refuses
    enum_cls._member_names_.append(name)
    enum_cls._value2member_map_[value] = member
    if enum_cls(value) is not member or getattr(enum_cls, name) is not member:
        raise RuntimeError(f"kvferry: could not add {name} to {enum_cls.__qualname__}")
    return member


def classes() -> dict:
    """{KVClassType: class} for kvferry: SGLang's KVArgs, kvferry.sglang's rest."""
    from sglang.srt.disaggregation.base import KVArgs
    from sglang.srt.disaggregation.utils import KVClassType

    from kvferry import sglang as kvs
    return {KVClassType.KVARGS: KVArgs, KVClassType.MANAGER: kvs.KVManager,
            KVClassType.SENDER: kvs.KVSender, KVClassType.RECEIVER: kvs.KVReceiver,
            KVClassType.BOOTSTRAP_SERVER: kvs.KVBootstrapServer}


def _get_kv_class(original, transfer_backend, class_type):
    """AROUND hook of sglang.srt.disaggregation.utils.get_kv_class."""
    if getattr(transfer_backend, "value", transfer_backend) != BACKEND:
        return original(transfer_backend, class_type)
    return classes().get(class_type)


def _kv_manager(scheduler):
    """The scheduler's kvferry manager, or None (another backend, or no
    disaggregation)."""
    if getattr(scheduler.server_args, "disaggregation_transfer_backend", None) != BACKEND:
        return None
    for queue in ("disagg_prefill_bootstrap_queue", "disagg_decode_prealloc_queue"):
        mgr = getattr(getattr(scheduler, queue, None), "kv_manager", None)
        if mgr is not None:
            return mgr
    return None


def _progress_after_input(result, scheduler, *args, **kwargs):
    """AFTER hook of Scheduler.process_input_requests: one progress() per
    event-loop iteration, before the loop polls its disaggregation queues.
    The queues are built in Scheduler.__init__, before any loop runs, so the
    manager is looked up once."""
    try:
        mgr = scheduler._kvferry_manager
    except AttributeError:
        mgr = scheduler._kvferry_manager = _kv_manager(scheduler)
    if mgr is not None:
        mgr.progress()
    return result


def register() -> None:
    """The entry point: SGLang calls it once per process, in load_plugins()."""
    from sglang.srt import server_args
    from sglang.srt.disaggregation import utils
    from sglang.srt.plugins.hook_registry import HookRegistry, HookType

    if MEMBER in utils.TransferBackend.__members__:
        log.info("kvferry: SGLang lists the backend already (docs/sglang-backend.patch)")
        return
    if BACKEND not in server_args.DISAGG_TRANSFER_BACKEND_CHOICES:
        server_args.add_disagg_transfer_backend_choices([BACKEND])
    _add_enum_member(utils.TransferBackend, MEMBER, BACKEND)
    HookRegistry.register("sglang.srt.disaggregation.utils.get_kv_class",
                          _get_kv_class, HookType.AROUND)
    # Only where a scheduler runs: its process imported the module before it
    # called load_plugins() (run_scheduler_process); the launcher has not, and
    # resolving the hook would import the whole scheduler there.
    if "sglang.srt.managers.scheduler" in sys.modules:
        HookRegistry.register(
            "sglang.srt.managers.scheduler.Scheduler.process_input_requests",
            _progress_after_input, HookType.AFTER)
    log.info("kvferry: transfer backend %r registered", BACKEND)
