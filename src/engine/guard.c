/* SPDX-License-Identifier: Apache-2.0 */
/* Misuse the library refuses: see guard.h. */
#include "engine/guard.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "base/log.h"
#include "engine/engine_impl.h"
#include "engine/transport.h"

/* The transport of an engine in a forked child: every call that would touch
 * the parent's verbs objects refuses; teardown and close do nothing (the
 * objects are the parent's; the child's copy of the memory ends with it). */
static int refuse_reg(void *t, const struct kvf_region_layout *reg) { (void)t, (void)reg; return -ECHILD; }
static void none_unreg(void *t, uint32_t id) { (void)t, (void)id; }
static int refuse_info(void *t, const char *peer, const struct kvf_info_out *info, uint32_t *conn)
{
	(void)t, (void)peer, (void)info, (void)conn;
	return -ECHILD;
}
static int refuse_post(void *t, uint32_t conn, uint64_t wr_id, const struct kvf_xfer_part *parts,
		       uint32_t nparts, const uint32_t *imm)
{
	(void)t, (void)conn, (void)wr_id, (void)parts, (void)nparts, (void)imm;
	return -ECHILD;
}
static int none_cancel(void *t, uint32_t conn, uint64_t wr_id) { (void)t, (void)conn, (void)wr_id; return 0; }
static int refuse_abort(void *t, uint32_t conn, uint64_t id, uint8_t role, uint16_t reason)
{
	(void)t, (void)conn, (void)id, (void)role, (void)reason;
	return -ECHILD;
}
static int refuse_ack(void *t, uint32_t conn, uint64_t id) { (void)t, (void)conn, (void)id; return -ECHILD; }
static void none_teardown(void *t, uint32_t conn, const char *why) { (void)t, (void)conn, (void)why; }
static bool none_wc(void *t, const struct kvf_event *ev) { (void)t, (void)ev; return false; }
static int none_progress(void *t, uint64_t now) { (void)t, (void)now; return 0; }
static void none_close(void *t) { (void)t; }

static const struct kvf_transport_ops forked_ops = {
	.region_register = refuse_reg,
	.region_unregister = none_unreg,
	.send_room_info = refuse_info,
	.post_chunk = refuse_post,
	.cancel_writes = none_cancel,
	.send_abort = refuse_abort,
	.send_abort_ack = refuse_ack,
	.teardown = none_teardown,
	.on_wc = none_wc,
	.progress = none_progress,
	.close = none_close,
};

/* The open engines, for the child's fork handler. The mutex is held across
 * fork (prepare locks, both sides unlock), so the list is whole in the child. */
static pthread_mutex_t engines_lock = PTHREAD_MUTEX_INITIALIZER;
static struct kvf_engine **engines;
static size_t nengines, engines_cap;
static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;

static void before_fork(void) { pthread_mutex_lock(&engines_lock); }
static void after_fork_parent(void) { pthread_mutex_unlock(&engines_lock); }

static void after_fork_child(void)
{
	for (size_t i = 0; i < nengines; i++) {
		struct kvf_engine *eng = engines[i];

		eng->forked = true;
		if (eng->ops)
			eng->ops = &forked_ops;
		eng->metrics = NULL; /* its HTTP thread is the parent's: not joined, not freed */
	}
	pthread_mutex_unlock(&engines_lock);
}

static void install_atfork(void)
{
	pthread_atfork(before_fork, after_fork_parent, after_fork_child);
}

void kvf_guard_track(struct kvf_engine *eng)
{
	pthread_once(&atfork_once, install_atfork);
	pthread_mutex_lock(&engines_lock);
	if (nengines == engines_cap) {
		size_t cap = engines_cap ? 2 * engines_cap : 8;
		struct kvf_engine **n = realloc(engines, cap * sizeof(*n));

		if (!n) { /* untracked: a fork is then not refused, only logged nowhere */
			pthread_mutex_unlock(&engines_lock);
			kvf_warn("engine", "out of memory tracking the engine for fork()");
			return;
		}
		engines = n;
		engines_cap = cap;
	}
	engines[nengines++] = eng;
	pthread_mutex_unlock(&engines_lock);
}

void kvf_guard_untrack(struct kvf_engine *eng)
{
	pthread_mutex_lock(&engines_lock);
	for (size_t i = 0; i < nengines; i++)
		if (engines[i] == eng) {
			engines[i] = engines[--nengines];
			break;
		}
	if (!nengines) { /* the last one: nothing is kept between engines */
		free(engines);
		engines = NULL;
		engines_cap = 0;
	}
	pthread_mutex_unlock(&engines_lock);
}

int kvf_guard_enter(struct kvf_engine *eng, const char *what)
{
	if (eng->forked) {
		if (!eng->fork_logged++)
			kvf_err("engine", "%s in a child process after fork(): refused (the engine's "
				"queue pairs are the parent's; open a new engine in the child)", what);
		return -ECHILD;
	}
	/* pairs with the release in kvf_guard_leave */
	if (atomic_flag_test_and_set_explicit(&eng->busy, memory_order_acquire)) {
		atomic_fetch_add_explicit(&eng->calls_concurrent, 1, memory_order_relaxed);
		return -EBUSY;
	}
	return 0;
}

void kvf_guard_leave(struct kvf_engine *eng)
{
	atomic_flag_clear_explicit(&eng->busy, memory_order_release); /* pairs with enter's acquire */
}
