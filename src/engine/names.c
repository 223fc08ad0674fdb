/* SPDX-License-Identifier: Apache-2.0 */
/* Name tables for the public enums: one place, checked against the enums'
 * _NUM sentinels at compile time. */
#include <kvferry/kvferry.h>

#include "engine/names.h"
#include "engine/engine_impl.h"

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

static const char *const poll_names[] = {
	[KVF_FAILED] = "FAILED",
	[KVF_BOOTSTRAPPING] = "BOOTSTRAPPING",
	[KVF_WAITING_FOR_INPUT] = "WAITING_FOR_INPUT",
	[KVF_TRANSFERRING] = "TRANSFERRING",
	[KVF_SUCCESS] = "SUCCESS",
};
_Static_assert(COUNT(poll_names) == KVF_POLL_NUM, "poll_names");

static const char *const fail_names[] = {
	[KVF_FAIL_NONE] = "none",
	[KVF_FAIL_LOCAL_ABORT] = "local abort",
	[KVF_FAIL_PEER_ABORT] = "peer abort",
	[KVF_FAIL_WC_ERROR] = "work completion error",
	[KVF_FAIL_PEER_LOST] = "peer lost",
	[KVF_FAIL_DEADLINE] = "deadline",
	[KVF_FAIL_BAD_FRAME] = "bad frame from peer",
	[KVF_FAIL_BAD_REQUEST] = "bad request",
	[KVF_FAIL_DEVICE] = "device fatal",
	[KVF_FAIL_CONNECT] = "connect failed",
	[KVF_FAIL_REFUSED] = "room refused",
};
_Static_assert(COUNT(fail_names) == KVF_FAIL_NUM, "fail_names");

static const char *const deadline_names[] = {
	[KVF_DL_NONE] = "none",
	[KVF_DL_BOOTSTRAP] = "bootstrap",
	[KVF_DL_WAITING_FOR_INPUT] = "waiting_for_input",
	[KVF_DL_INFLIGHT] = "inflight",
	[KVF_DL_RECEIVER_WAITING] = "receiver_waiting",
	[KVF_DL_QUIESCE] = "quiesce",
	[KVF_DL_BETWEEN_CHUNKS] = "between_chunks",
};
_Static_assert(COUNT(deadline_names) == KVF_DL_NUM, "deadline_names");

static const char *const ignore_names[] = {
	[KVF_IGN_STALE_GENERATION] = "stale generation",
	[KVF_IGN_UNKNOWN_ROOM] = "unknown room",
	[KVF_IGN_FINISHED_ROOM] = "finished room",
	[KVF_IGN_DUPLICATE] = "duplicate",
	[KVF_IGN_BAD_EVENT] = "bad event",
	[KVF_IGN_OTHER_CONN] = "other connection",
};
_Static_assert(COUNT(ignore_names) == KVF_IGN_NUM, "ignore_names");

/* From 1, also the AUTH refusal codes' texts in docs/wire.md. */
static const char *const auth_names[] = {
	[KVF_AUTH_PEER_REFUSED] = "refused by the peer",
	[KVF_AUTH_BAD_TOKEN] = "bad token",
	[KVF_AUTH_REPLAY] = "replayed proof",
	[KVF_AUTH_IDENTITY] = "identity mismatch",
	[KVF_AUTH_MALFORMED] = "malformed proof",
	[KVF_AUTH_EARLY] = "frame before proof",
	[KVF_AUTH_TIMEOUT] = "no proof in time",
};
_Static_assert(COUNT(auth_names) == KVF_AUTH_NUM, "auth_names");

/* kvf_stats' arrays have room for the enums to grow; past it, the struct
 * would have to change shape, which breaks callers. */
_Static_assert(KVF_FAIL_NUM <= KVF_STATS_REASONS, "kvf_stats.failures is full");
_Static_assert(KVF_DL_NUM <= KVF_STATS_DEADLINES, "kvf_stats.deadlines is full");
_Static_assert(KVF_IGN_NUM <= KVF_STATS_IGNORED, "kvf_stats.ignored is full");
_Static_assert(KVF_AUTH_NUM <= KVF_STATS_AUTH, "kvf_stats.auth_refused is full");

const char *kvf_poll_str(int state)
{
	return state >= 0 && state < KVF_POLL_NUM ? poll_names[state] : "?";
}

const char *kvf_fail_reason_str(enum kvf_fail_reason r)
{
	return (unsigned)r < KVF_FAIL_NUM ? fail_names[r] : "?";
}

const char *kvf_rail_state_str(int state)
{
	static const char *const names[] = {"up", "port_down", "device_dead"};

	return state >= 0 && state < 3 ? names[state] : "?";
}

const char *kvf_deadline_str(enum kvf_deadline d)
{
	return (unsigned)d < KVF_DL_NUM ? deadline_names[d] : "?";
}

const char *kvf_ignore_reason_str(enum kvf_ignore_reason r)
{
	return (unsigned)r < KVF_IGN_NUM ? ignore_names[r] : "?";
}

const char *kvf_auth_refusal_str(enum kvf_auth_refusal r)
{
	return (unsigned)r < KVF_AUTH_NUM ? auth_names[r] : "?";
}

static const char *const last_names[] = {
	[KVF_LAST_CREATED] = "created",
	[KVF_LAST_INIT] = "init",
	[KVF_LAST_SEND] = "send",
	[KVF_LAST_PEER_INFO] = "room_info",
	[KVF_LAST_WC] = "completion",
	[KVF_LAST_PEER_ABORT] = "peer_abort",
	[KVF_LAST_ABORT_ACK] = "abort_ack",
	[KVF_LAST_PEER_LOST] = "peer_lost",
	[KVF_LAST_DATA_DONE] = "data_done",
	[KVF_LAST_BAD_FRAME] = "bad_frame",
	[KVF_LAST_LOCAL_ABORT] = "local_abort",
	[KVF_LAST_DEADLINE] = "deadline",
};
_Static_assert(COUNT(last_names) == KVF_LAST_NUM, "last_names");

const char *kvf_last_str(enum kvf_last l)
{
	return (unsigned)l < KVF_LAST_NUM ? last_names[l] : "?";
}

/* Work-completion statuses. The values are enum ibv_wc_status of
 * <infiniband/verbs.h>, stable ABI of libibverbs since its first release
 * (new ones are only appended), so the room engine can name a status
 * without the verbs headers: the same texts as ibv_wc_status_str().
 * test_room.c compares the two wherever the verbs are built in. */
enum {
	WC_SUCCESS = 0, WC_LOC_LEN_ERR, WC_LOC_QP_OP_ERR, WC_LOC_EEC_OP_ERR, WC_LOC_PROT_ERR,
	WC_WR_FLUSH_ERR, WC_MW_BIND_ERR, WC_BAD_RESP_ERR, WC_LOC_ACCESS_ERR, WC_REM_INV_REQ_ERR,
	WC_REM_ACCESS_ERR, WC_REM_OP_ERR, WC_RETRY_EXC_ERR, WC_RNR_RETRY_EXC_ERR,
	WC_LOC_RDD_VIOL_ERR, WC_REM_INV_RD_REQ_ERR, WC_REM_ABORT_ERR, WC_INV_EECN_ERR,
	WC_INV_EEC_STATE_ERR, WC_FATAL_ERR, WC_RESP_TIMEOUT_ERR, WC_GENERAL_ERR, WC_TM_ERR,
	WC_TM_RNDV_INCOMPLETE, WC_NUM
};

static const char *const wc_names[] = {
	[WC_SUCCESS] = "success",
	[WC_LOC_LEN_ERR] = "local length error",
	[WC_LOC_QP_OP_ERR] = "local QP operation error",
	[WC_LOC_EEC_OP_ERR] = "local EE context operation error",
	[WC_LOC_PROT_ERR] = "local protection error",
	[WC_WR_FLUSH_ERR] = "Work Request Flushed Error",
	[WC_MW_BIND_ERR] = "memory management operation error",
	[WC_BAD_RESP_ERR] = "bad response error",
	[WC_LOC_ACCESS_ERR] = "local access error",
	[WC_REM_INV_REQ_ERR] = "remote invalid request error",
	[WC_REM_ACCESS_ERR] = "remote access error",
	[WC_REM_OP_ERR] = "remote operation error",
	[WC_RETRY_EXC_ERR] = "transport retry counter exceeded",
	[WC_RNR_RETRY_EXC_ERR] = "RNR retry counter exceeded",
	[WC_LOC_RDD_VIOL_ERR] = "local RDD violation error",
	[WC_REM_INV_RD_REQ_ERR] = "remote invalid RD request",
	[WC_REM_ABORT_ERR] = "aborted error",
	[WC_INV_EECN_ERR] = "invalid EE context number",
	[WC_INV_EEC_STATE_ERR] = "invalid EE context state",
	[WC_FATAL_ERR] = "fatal error",
	[WC_RESP_TIMEOUT_ERR] = "response timeout error",
	[WC_GENERAL_ERR] = "general error",
	[WC_TM_ERR] = "TM error",
	[WC_TM_RNDV_INCOMPLETE] = "TM software rendezvous",
};
_Static_assert(COUNT(wc_names) == WC_NUM, "wc_names");

/* What to look at, per status (NCCL's habit of naming the likely cause). */
static const char *const wc_hints[WC_NUM] = {
	[WC_WR_FLUSH_ERR] = "flushed: the queue pair went to error earlier (see the first error)",
	[WC_RETRY_EXC_ERR] = "peer unreachable or qp_timeout too short (rdma.qp_timeout, "
			     "rdma.retry_cnt)",
	[WC_RNR_RETRY_EXC_ERR] = "peer had no receive posted (rdma.rnr_retry, rdma.rq_depth)",
	[WC_REM_ACCESS_ERR] = "bad rkey or block out of the remote pool",
	[WC_REM_INV_REQ_ERR] = "peer rejected the request (length or opcode)",
	[WC_REM_OP_ERR] = "peer failed the operation (its receive buffer too small?)",
	[WC_LOC_PROT_ERR] = "local buffer not registered or lkey wrong",
	[WC_LOC_ACCESS_ERR] = "local buffer not registered or lkey wrong",
	[WC_LOC_LEN_ERR] = "message longer than the receive buffer",
	[WC_LOC_QP_OP_ERR] = "local queue pair misuse (bad SGE count or state)",
	[WC_FATAL_ERR] = "device error: check dmesg",
	[WC_GENERAL_ERR] = "device error: check dmesg",
};

const char *kvf_wc_status_str(int status)
{
	return status >= 0 && status < WC_NUM ? wc_names[status] : "unknown";
}

const char *kvf_wc_status_hint(int status)
{
	return status >= 0 && status < WC_NUM && wc_hints[status] ? wc_hints[status] : "";
}

/* The configuration key behind each deadline: what a failure's log line and
 * /rooms name, so an operator knows which knob bounds the room. */
static const char *const deadline_keys[] = {
	[KVF_DL_NONE] = "",
	[KVF_DL_BOOTSTRAP] = "deadlines.bootstrap_s",
	[KVF_DL_WAITING_FOR_INPUT] = "deadlines.waiting_for_input_s",
	[KVF_DL_INFLIGHT] = "deadlines.inflight_s",
	[KVF_DL_RECEIVER_WAITING] = "deadlines.receiver_waiting_s",
	[KVF_DL_QUIESCE] = "deadlines.quiesce_s",
	[KVF_DL_BETWEEN_CHUNKS] = "deadlines.between_chunks_s",
};
_Static_assert(COUNT(deadline_keys) == KVF_DL_NUM, "deadline_keys");

const char *kvf_deadline_key(enum kvf_deadline d)
{
	return (unsigned)d < KVF_DL_NUM ? deadline_keys[d] : "";
}

/* Label values for /metrics and keys for /rooms: one token each, no
 * spaces, stable (dashboards and alerts match on them). */
static const char *const fail_tokens[] = {
	[KVF_FAIL_NONE] = "none",
	[KVF_FAIL_LOCAL_ABORT] = "local_abort",
	[KVF_FAIL_PEER_ABORT] = "peer_abort",
	[KVF_FAIL_WC_ERROR] = "wc_error",
	[KVF_FAIL_PEER_LOST] = "peer_lost",
	[KVF_FAIL_DEADLINE] = "deadline",
	[KVF_FAIL_BAD_FRAME] = "bad_frame",
	[KVF_FAIL_BAD_REQUEST] = "bad_request",
	[KVF_FAIL_DEVICE] = "device",
	[KVF_FAIL_CONNECT] = "connect",
	[KVF_FAIL_REFUSED] = "refused",
};
_Static_assert(COUNT(fail_tokens) == KVF_FAIL_NUM, "fail_tokens");

static const char *const ignore_tokens[] = {
	[KVF_IGN_STALE_GENERATION] = "stale_generation",
	[KVF_IGN_UNKNOWN_ROOM] = "unknown_room",
	[KVF_IGN_FINISHED_ROOM] = "finished_room",
	[KVF_IGN_DUPLICATE] = "duplicate",
	[KVF_IGN_BAD_EVENT] = "bad_event",
	[KVF_IGN_OTHER_CONN] = "other_conn",
};
_Static_assert(COUNT(ignore_tokens) == KVF_IGN_NUM, "ignore_tokens");

static const char *const auth_tokens[] = {
	[KVF_AUTH_PEER_REFUSED] = "peer_refused",
	[KVF_AUTH_BAD_TOKEN] = "bad_token",
	[KVF_AUTH_REPLAY] = "replay",
	[KVF_AUTH_IDENTITY] = "identity",
	[KVF_AUTH_MALFORMED] = "malformed",
	[KVF_AUTH_EARLY] = "early_frame",
	[KVF_AUTH_TIMEOUT] = "timeout",
};
_Static_assert(COUNT(auth_tokens) == KVF_AUTH_NUM, "auth_tokens");

const char *kvf_fail_reason_token(unsigned r)
{
	return r < KVF_FAIL_NUM ? fail_tokens[r] : "unknown";
}

const char *kvf_ignore_reason_token(unsigned r)
{
	return r < KVF_IGN_NUM ? ignore_tokens[r] : "unknown";
}

const char *kvf_auth_refusal_token(unsigned r)
{
	return r < KVF_AUTH_NUM ? auth_tokens[r] : "unknown";
}
