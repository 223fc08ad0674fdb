/* SPDX-License-Identifier: Apache-2.0 */
/* Fault injection (fault.h): the KVF_FAULT parser, the random draws, and
 * the frames held back for delay and reorder. Test builds only. */
#include "rdma/fault.h"

#include <errno.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include <infiniband/verbs.h>

#include "base/clock.h"
#include "rdma/conn.h"
#include "base/log.h"

#define MAX_RULES 16
#define MAX_HELD 64
#define REORDER_MAX_NS 100000000ull /* a reordered frame waits for a later one this long at most */
#define TYPE_ANY 0xffu              /* every frame type but HELLO and AUTH */

enum fkind { F_DROP, F_DUP, F_DELAY, F_REORDER, F_CORRUPT, F_QP_ERROR, F_STALL_CQ,
	     F_RING_FULL, F_BAD_RKEY, F_NUM };

static const char *const kind_names[F_NUM] = {
	"drop", "dup", "delay", "reorder", "corrupt", "qp_error", "stall_cq", "ring_full",
	"bad_rkey",
};

/* enum kvf_frame_type (proto.h), by name. */
static const char *const type_names[] = {
	[1] = "HELLO", [2] = "ROOM_INFO", [3] = "ABORT", [4] = "ABORT_ACK",
	[5] = "HEARTBEAT", [6] = "ROOM_INFO_CONT",
};
#define NTYPES (sizeof(type_names) / sizeof(type_names[0]))

struct rule {
	uint8_t kind;
	uint8_t type;      /* frame rules */
	bool every;        /* qp_error: every N, not once after N */
	double p;
	uint64_t dur_ns;
	uint64_t n;
};

struct held {
	const void *tag;
	uint32_t conn, len;
	uint64_t due;
	bool after_next;   /* reorder: due once a later frame on conn passed */
	uint8_t *data;
};

static struct {
	struct rule r[MAX_RULES];
	uint32_t nr;
	uint64_t seed;
	atomic_uint_fast64_t count[F_NUM];
	atomic_uint seq;             /* random streams handed out */
	uint64_t send_wcs;           /* poller thread */
	uint64_t drains, polls;      /* chances ring_full and stall_cq had (reported) */
	uint64_t cq_until, ring_until;
	struct held h[MAX_HELD];     /* poller thread */
	uint32_t nheld;
} fs;

static _Thread_local uint64_t rng;

/* xorshift64*, one stream per thread (the seed and the thread's turn). */
static double draw(void)
{
	if (!rng)
		rng = (fs.seed ^ (0x9e3779b97f4a7c15ull * (atomic_fetch_add(&fs.seq, 1) + 1))) | 1;
	rng ^= rng >> 12;
	rng ^= rng << 25;
	rng ^= rng >> 27;
	return (double)((rng * 0x2545f4914f6cdd1dull) >> 11) * 0x1.0p-53;
}

static bool fires(const struct rule *r, uint8_t kind)
{
	if (r->kind != kind || !(r->p > 0 && draw() < r->p))
		return false;
	atomic_fetch_add(&fs.count[kind], 1);
	return true;
}

/* ---------------------------------------------------------------- parsing */

static int bad(uint32_t i, const char *rule, const char *what)
{
	kvf_err("fault", "KVF_FAULT rule %u '%s': %s (grammar: docs/chaos.md)", i + 1, rule, what);
	return -EINVAL;
}

static bool parse_p(const char *s, double *p)
{
	char *end;

	*p = strtod(s, &end);
	return end != s && !*end && *p >= 0 && *p <= 1;
}

/* "20ms", "2s": a positive whole count of milliseconds or seconds. */
static bool parse_dur(const char *s, uint64_t *ns)
{
	char *end;
	unsigned long long v = strtoull(s, &end, 10);

	if (end == s || !v || *s == '-')
		return false;
	if (!strcmp(end, "ms"))
		*ns = v * 1000000ull;
	else if (!strcmp(end, "s"))
		*ns = v * 1000000000ull;
	else
		return false;
	return true;
}

static bool parse_type(const char *s, uint8_t *type)
{
	if (!strcmp(s, "any")) {
		*type = TYPE_ANY;
		return true;
	}
	for (uint8_t t = 1; t < NTYPES; t++)
		if (!strcmp(s, type_names[t])) {
			*type = t;
			return true;
		}
	return false;
}

/* kind:TYPE:P (drop dup corrupt reorder), delay:TYPE:P:DUR. */
static int parse_frame_rule(uint32_t i, const char *rule, char **f, int nf, struct rule *r)
{
	if (nf != (r->kind == F_DELAY ? 4 : 3))
		return bad(i, rule, r->kind == F_DELAY ? "expected delay:TYPE:P:DURATION"
						       : "expected KIND:TYPE:P");
	if (!parse_type(f[1], &r->type))
		return bad(i, rule, "unknown frame type (HELLO ROOM_INFO ROOM_INFO_CONT ABORT "
			   "ABORT_ACK HEARTBEAT any)");
	if (!parse_p(f[2], &r->p))
		return bad(i, rule, "the probability is not a number in [0, 1]");
	if (r->kind == F_DELAY && !parse_dur(f[3], &r->dur_ns))
		return bad(i, rule, "the duration is not a positive count with ms or s");
	return 0;
}

/* qp_error:after|every:N, stall_cq|ring_full:DUR[:P], bad_rkey:P. */
static int parse_other_rule(uint32_t i, const char *rule, char **f, int nf, struct rule *r)
{
	char *end;

	if (r->kind == F_QP_ERROR) {
		if (nf != 3 || (strcmp(f[1], "after") && strcmp(f[1], "every")))
			return bad(i, rule, "expected qp_error:after:N or qp_error:every:N");
		r->every = !strcmp(f[1], "every");
		r->n = strtoull(f[2], &end, 10);
		if (end == f[2] || *end || !r->n || *f[2] == '-')
			return bad(i, rule, "N is not a positive integer");
		r->p = 1;
		return 0;
	}
	if (r->kind == F_BAD_RKEY) {
		if (nf != 2 || !parse_p(f[1], &r->p))
			return bad(i, rule, "expected bad_rkey:P with P in [0, 1]");
		return 0;
	}
	if (nf < 2 || nf > 3 || !parse_dur(f[1], &r->dur_ns))
		return bad(i, rule, "expected KIND:DURATION[:P], a duration like 200ms or 2s");
	r->p = 0.01;
	if (nf == 3 && !parse_p(f[2], &r->p))
		return bad(i, rule, "the probability is not a number in [0, 1]");
	return 0;
}

static int parse_rule(uint32_t i, char *rule, struct rule *r)
{
	char copy[128], *f[5], *save = NULL;
	int nf = 0;

	if (strlen(rule) >= sizeof(copy))
		return bad(i, rule, "too long");
	if (strstr(rule, "::") || rule[0] == ':' || rule[strlen(rule) - 1] == ':')
		return bad(i, rule, "an empty field");
	strcpy(copy, rule);
	for (char *tok = strtok_r(copy, ":", &save); tok; tok = strtok_r(NULL, ":", &save)) {
		if (nf == 5)
			return bad(i, rule, "too many fields");
		f[nf++] = tok;
	}
	if (!nf)
		return bad(i, rule, "empty rule");
	memset(r, 0, sizeof(*r));
	for (r->kind = 0; r->kind < F_NUM && strcmp(f[0], kind_names[r->kind]); r->kind++)
		;
	if (r->kind == F_NUM)
		return bad(i, rule, "unknown fault (drop dup delay reorder corrupt qp_error "
			   "stall_cq ring_full bad_rkey)");
	if (r->kind <= F_CORRUPT)
		return parse_frame_rule(i, rule, f, nf, r);
	return parse_other_rule(i, rule, f, nf, r);
}

static void free_held(void)
{
	for (uint32_t k = 0; k < fs.nheld; k++)
		free(fs.h[k].data);
	fs.nheld = 0;
}

int kvf_fault_setup(void)
{
	const char *spec = getenv("KVF_FAULT"), *seed = getenv("KVF_FAULT_SEED");
	char buf[1024], *save = NULL;
	uint32_t n = 0;
	int rc;

	free_held();
	memset(fs.r, 0, sizeof(fs.r));
	fs.nr = 0;
	fs.send_wcs = fs.cq_until = fs.ring_until = fs.drains = fs.polls = 0;
	for (int k = 0; k < F_NUM; k++)
		atomic_store(&fs.count[k], 0);
	fs.seed = seed ? strtoull(seed, NULL, 0) : 1;
	if (!spec || !*spec)
		return 0;
	if (strlen(spec) >= sizeof(buf)) {
		kvf_err("fault", "KVF_FAULT is over %zu bytes", sizeof(buf) - 1);
		return -EINVAL;
	}
	if (strstr(spec, ",,") || spec[0] == ',' || spec[strlen(spec) - 1] == ',') {
		kvf_err("fault", "KVF_FAULT '%s': an empty rule (rules are separated by one comma)",
			spec);
		return -EINVAL;
	}
	strcpy(buf, spec);
	for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save), n++) {
		if (n == MAX_RULES) {
			kvf_err("fault", "KVF_FAULT: more than %d rules", MAX_RULES);
			return -EINVAL;
		}
		rc = parse_rule(n, tok, &fs.r[n]);
		if (rc)
			return rc;
	}
	fs.nr = n;
	kvf_warn("fault", "fault injection on: KVF_FAULT=%s KVF_FAULT_SEED=%" PRIu64, spec, fs.seed);
	return 0;
}

void kvf_fault_report(void)
{
	char line[512];
	int at = 0;

	free_held(); /* the transport is closing: what is held is lost, as dropped */
	if (!fs.nr)
		return;
	for (int k = 0; k < F_NUM && at < (int)sizeof(line); k++)
		at += snprintf(line + at, sizeof(line) - (size_t)at, " %s=%" PRIu64, kind_names[k],
			       (uint64_t)atomic_load(&fs.count[k]));
	kvf_warn("fault", "injected:%s (of %" PRIu64 " send completions, %" PRIu64 " polls and %"
		 PRIu64 " ring drains that found work)", line, fs.send_wcs, fs.polls, fs.drains);
}

/* ------------------------------------------------------------ the hooks */

static bool type_matches(const struct rule *r, const uint8_t *buf, uint32_t len)
{
	uint8_t t = len > KVF_PROTO_TYPE_OFF ? kvf_proto_frame_type(buf) : 0;

	/* Connection setup is not faulted: AUTH frames before the peer's proof
	 * never reach this hook (handshake.h), so none after it is either. */
	return r->type == TYPE_ANY ? t != KVF_FR_HELLO && t != KVF_FR_AUTH : t == r->type;
}

/* One byte the decoder checks for an exact value (magic, version, flags,
 * reserved), flipped: the frame must be refused, never misread. The type
 * and length are left alone (a flip there can make another valid frame:
 * kvferry has no frame checksum, the RDMA transport's ICRC covers the wire). */
static void corrupt(uint8_t *buf, uint32_t len)
{
	static const uint8_t at[] = { 0, 1, 2, 3, 4, 5, 7, 12, 13, 14, 15 };
	uint8_t k = at[(uint32_t)(draw() * sizeof(at)) % sizeof(at)];

	if (k < len)
		buf[k] ^= 0xff;
}

static bool hold(const void *tag, uint32_t conn, const uint8_t *buf, uint32_t len, uint64_t due,
		 bool after_next)
{
	struct held *h;

	if (fs.nheld == MAX_HELD)
		return false; /* delivered now instead: the fault was not injected */
	h = &fs.h[fs.nheld];
	h->data = malloc(len);
	if (!h->data)
		return false;
	memcpy(h->data, buf, len);
	*h = (struct held){ .tag = tag, .conn = conn, .len = len, .due = due,
			    .after_next = after_next, .data = h->data };
	fs.nheld++;
	return true;
}

int kvf_fault_rx(const void *tag, uint32_t conn, uint8_t *buf, uint32_t len)
{
	uint64_t now = kvf_monotonic_ns();

	for (uint32_t i = 0; i < fs.nr; i++) {
		const struct rule *r = &fs.r[i];

		if (r->kind > F_CORRUPT || !type_matches(r, buf, len) || !fires(r, r->kind))
			continue;
		switch (r->kind) {
		case F_DROP:
			return 0;
		case F_DUP:
			return 2;
		case F_CORRUPT:
			corrupt(buf, len);
			return 1;
		case F_DELAY:
			return hold(tag, conn, buf, len, now + r->dur_ns, false) ? 0 : 1;
		default: /* F_REORDER */
			return hold(tag, conn, buf, len, now + REORDER_MAX_NS, true) ? 0 : 1;
		}
	}
	return 1;
}

void kvf_fault_passed(const void *tag, uint32_t conn)
{
	for (uint32_t k = 0; k < fs.nheld; k++)
		if (fs.h[k].tag == tag && fs.h[k].conn == conn && fs.h[k].after_next)
			fs.h[k].due = 0;
}

uint8_t *kvf_fault_next_held(const void *tag, uint64_t now, uint32_t *conn, uint32_t *len,
			     uint32_t *held)
{
	uint8_t *data = NULL;

	*held = 0;
	for (uint32_t k = 0; k < fs.nheld; k++) {
		struct held *h = &fs.h[k];

		if (h->tag != tag)
			continue;
		if (data || h->due > now) {
			++*held;
			continue;
		}
		*conn = h->conn;
		*len = h->len;
		data = h->data;
		fs.h[k--] = fs.h[--fs.nheld]; /* order among the held is not kept: they are late */
	}
	return data;
}

bool kvf_fault_send_wc(struct kvf_conn *c)
{
	struct ibv_qp_attr attr = { .qp_state = IBV_QPS_ERR };

	fs.send_wcs++;
	for (uint32_t i = 0; i < fs.nr; i++) {
		const struct rule *r = &fs.r[i];

		if (r->kind != F_QP_ERROR ||
		    (r->every ? fs.send_wcs % r->n != 0 : fs.send_wcs != r->n) || !c->qp)
			continue;
		atomic_fetch_add(&fs.count[F_QP_ERROR], 1);
		kvf_warn("fault", "connection %u: moving qp 0x%x to error (send completion %" PRIu64
			 ")", c->id, c->qp_num, fs.send_wcs);
		return ibv_modify_qp(c->qp, &attr, IBV_QP_STATE) == 0;
	}
	return false;
}

bool kvf_fault_cq_stalled(uint64_t now)
{
	return now < fs.cq_until;
}

/* After work was found (n > 0): each rule of kind that fires holds *until
 * its duration from now. */
static void arm_hold(int n, uint64_t now, enum fkind kind, uint64_t *until)
{
	for (uint32_t i = 0; n > 0 && i < fs.nr; i++)
		if (fires(&fs.r[i], kind))
			*until = now + fs.r[i].dur_ns;
}

void kvf_fault_cq_polled(int n, uint64_t now)
{
	fs.polls += n > 0;
	arm_hold(n, now, F_STALL_CQ, &fs.cq_until);
}

bool kvf_fault_ring_held(uint64_t now)
{
	return now < fs.ring_until;
}

void kvf_fault_ring_drained(int n, uint64_t now)
{
	fs.drains += n > 0;
	arm_hold(n, now, F_RING_FULL, &fs.ring_until);
}

void kvf_fault_post(struct ibv_send_wr *wr)
{
	for (uint32_t i = 0; i < fs.nr; i++) {
		if (fs.r[i].kind != F_BAD_RKEY)
			continue;
		for (struct ibv_send_wr *w = wr; w; w = w->next)
			if ((w->opcode == IBV_WR_RDMA_WRITE || w->opcode == IBV_WR_RDMA_WRITE_WITH_IMM) &&
			    fires(&fs.r[i], F_BAD_RKEY)) {
				w->wr.rdma.rkey ^= 0x5a5a5a5au;
				return; /* one per chain: the QP goes to error at the first */
			}
	}
}
