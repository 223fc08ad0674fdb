/* SPDX-License-Identifier: Apache-2.0 */
/* Name tables for the public enums: one place, checked against the enums'
 * _NUM sentinels at compile time. */
#include <kvferry/kvferry.h>

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
};
_Static_assert(COUNT(fail_names) == KVF_FAIL_NUM, "fail_names");

static const char *const deadline_names[] = {
	[KVF_DL_NONE] = "none",
	[KVF_DL_BOOTSTRAP] = "bootstrap",
	[KVF_DL_WAITING_FOR_INPUT] = "waiting_for_input",
	[KVF_DL_INFLIGHT] = "inflight",
	[KVF_DL_RECEIVER_WAITING] = "receiver_waiting",
	[KVF_DL_QUIESCE] = "quiesce",
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

/* kvf_stats' arrays have room for the enums to grow; past it, the struct
 * would have to change shape, which breaks callers. */
_Static_assert(KVF_FAIL_NUM <= KVF_STATS_REASONS, "kvf_stats.failures is full");
_Static_assert(KVF_DL_NUM <= KVF_STATS_DEADLINES, "kvf_stats.deadlines is full");
_Static_assert(KVF_IGN_NUM <= KVF_STATS_IGNORED, "kvf_stats.ignored is full");

const char *kvf_poll_str(int state)
{
	return state >= 0 && state < KVF_POLL_NUM ? poll_names[state] : "?";
}

const char *kvf_fail_reason_str(enum kvf_fail_reason r)
{
	return (unsigned)r < KVF_FAIL_NUM ? fail_names[r] : "?";
}

const char *kvf_deadline_str(enum kvf_deadline d)
{
	return (unsigned)d < KVF_DL_NUM ? deadline_names[d] : "?";
}

const char *kvf_ignore_reason_str(enum kvf_ignore_reason r)
{
	return (unsigned)r < KVF_IGN_NUM ? ignore_names[r] : "?";
}
