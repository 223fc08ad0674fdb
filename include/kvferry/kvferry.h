/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kvferry — KV-cache transfer over RDMA for disaggregated LLM serving.
 *
 * A prefill node (sender) writes KV blocks into a decode node (receiver) with
 * RDMA WRITE. Each request is a "room", named by a 64-bit room id that both
 * sides agree on (SGLang's bootstrap_room). The API is shaped like SGLang's
 * BaseKVSender / BaseKVReceiver:
 *
 *   sender (prefill)                     receiver (decode)
 *   kvf_sender_create(id)                kvf_receiver_create(id, prefill addr)
 *   kvf_poll() == WAITING_FOR_INPUT  <-- kvf_receiver_init_regions(dst lists,
 *                                                            user data)
 *   kvf_sender_send_chunk(...)       --> RDMA WRITEs, per chunk as it comes
 *   kvf_sender_send_chunk(LAST)      --> the rest, then the write with immediate
 *   kvf_poll() == SUCCESS                kvf_poll() == SUCCESS
 *   kvf_release()                        kvf_release()
 *
 * Threads: every function here is called from one thread, the scheduler
 * thread, which owns the room table. kvf_progress() drains the events that the
 * completion poller thread produced and applies deadlines; call it every
 * scheduler iteration, or wait for work with kvf_engine_wait (or its fd)
 * instead of spinning. The only exceptions are kvf_engine_open,
 * kvf_engine_open_with and kvf_engine_close.
 *
 * The promise: every room reaches SUCCESS or FAILED within a bounded time, a
 * failed room says why (kvf_failure), and a room's memory is handed back
 * (kvf_release returns 0) only when no posted work of it can still land.
 *
 * Errors are negative errno values. A NULL engine or a stale/unknown room
 * handle gives -EINVAL, never a crash.
 */
#ifndef KVFERRY_H
#define KVFERRY_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Only what this header declares is exported from libkvferry.so. */
#if defined(__GNUC__)
#define KVF_API __attribute__((visibility("default")))
#else
#define KVF_API
#endif

typedef struct kvf_engine kvf_engine;

/* A room handle: slot and generation packed by value. {0} is never valid.
 * A handle whose room was released is stale; every call on it is -EINVAL. */
typedef struct kvf_room {
	uint64_t v;
} kvf_room;

/* Room states, numbered as SGLang's KVPoll so an engine maps them 1:1. */
enum kvf_poll {
	KVF_FAILED = 0,            /* terminal; kvf_failure() says why */
	KVF_BOOTSTRAPPING = 1,     /* sender: waiting for the receiver's ROOM_INFO;
	                              receiver: created, kvf_receiver_init not yet done */
	KVF_WAITING_FOR_INPUT = 2, /* sender: peer known, waiting for kvf_sender_send;
	                              receiver: ROOM_INFO posted, data on the way */
	KVF_TRANSFERRING = 3,      /* sender: writes posted, last one not completed */
	KVF_SUCCESS = 4,           /* terminal; all data landed */
};
#define KVF_POLL_NUM 5

enum kvf_role {
	KVF_SENDER = 0,   /* prefill */
	KVF_RECEIVER = 1, /* decode */
};

/* Why a room failed. Exactly one per failed room, written once. */
enum kvf_fail_reason {
	KVF_FAIL_NONE = 0,
	KVF_FAIL_LOCAL_ABORT,  /* kvf_abort() on this side */
	KVF_FAIL_PEER_ABORT,   /* the peer sent ABORT (or an early ABORT tombstone) */
	KVF_FAIL_WC_ERROR,     /* a work completion with an error status */
	KVF_FAIL_PEER_LOST,    /* disconnect, heartbeat misses, connection torn down */
	KVF_FAIL_DEADLINE,     /* a state's deadline passed; see kvf_failure.deadline */
	KVF_FAIL_BAD_FRAME,    /* the peer sent a malformed frame naming this room */
	KVF_FAIL_BAD_REQUEST,  /* the local caller asked for something invalid
	                          (block count differs from the peer's, block id
	                          out of the pool) */
	KVF_FAIL_DEVICE,       /* a fatal asynchronous device event */
	KVF_FAIL_CONNECT,      /* the connection to the peer could not be made or
	                          was rejected */
	KVF_FAIL_REFUSED,      /* the prefill will not serve this ROOM_INFO: its room
	                          id is bound to another connection, already failed
	                          or finished, or aborted before the room existed
	                          (an ABORT's reason; docs/wire.md 7.2) */
	KVF_FAIL_NUM
};

/* Which deadline. */
enum kvf_deadline {
	KVF_DL_NONE = 0,
	KVF_DL_BOOTSTRAP,         /* BOOTSTRAPPING, both sides */
	KVF_DL_WAITING_FOR_INPUT, /* sender WAITING_FOR_INPUT (optional, 0 = off) */
	KVF_DL_INFLIGHT,          /* sender TRANSFERRING: from the LAST chunk
	                             (send) to success */
	KVF_DL_RECEIVER_WAITING,  /* receiver WAITING_FOR_INPUT */
	KVF_DL_QUIESCE,           /* FAILED but not quiescent: peer must ACK or
	                             the connection is torn down */
	KVF_DL_BETWEEN_CHUNKS,    /* sender TRANSFERRING before its LAST chunk:
	                             from one chunk to the next */
	KVF_DL_NUM
};

/* Events that were not applied to a room, counted per reason. */
enum kvf_ignore_reason {
	KVF_IGN_STALE_GENERATION = 0, /* names a slot that now holds another room */
	KVF_IGN_UNKNOWN_ROOM,         /* names a room id this engine does not have */
	KVF_IGN_FINISHED_ROOM,        /* the room is already terminal */
	KVF_IGN_DUPLICATE,            /* the same event twice (e.g. ROOM_INFO again) */
	KVF_IGN_BAD_EVENT,            /* an event kind or field out of range */
	KVF_IGN_OTHER_CONN,           /* a frame naming a room bound to another
	                                 connection (a room takes frames only from
	                                 the peer it is bound to) */
	KVF_IGN_NUM
};

/* Why a connection was refused before it could carry a room: the peer's
 * proof of rdma.auth_token (docs/wire.md 4.4) did not hold, or never
 * came. kvf_stats.auth_refused[] counts them; from 1 they are the AUTH
 * frame's refusal codes on the wire. */
enum kvf_auth_refusal {
	KVF_AUTH_PEER_REFUSED = 0, /* the peer refused our proof (its reason in
	                              our log) */
	KVF_AUTH_BAD_TOKEN,        /* its MAC does not verify under our token */
	KVF_AUTH_REPLAY,           /* its proof names other nonces: a replay */
	KVF_AUTH_IDENTITY,         /* it saw other QP numbers or GIDs: relayed */
	KVF_AUTH_MALFORMED,        /* not a sound AUTH frame of the peer's role */
	KVF_AUTH_EARLY,            /* another frame (or a write) before its proof */
	KVF_AUTH_TIMEOUT,          /* no proof within rdma.auth_timeout_ms */
	KVF_AUTH_NUM
};

/*
 * The structs below are copied out to the caller and will grow: new fields
 * are only ever added at the end, and the arrays indexed by an enum have
 * room for it to grow (KVF_STATS_*). Before the call, set .size to
 * sizeof(the struct) as your header knows it, e.g.
 *
 *     struct kvf_stats st = KVF_STATS_INIT;
 *     kvf_stats(eng, &st);
 *
 * The library fills only the first .size bytes (a caller built against an
 * older, smaller header gets the fields it knows and nothing is written past
 * them), zeroes what it does not know of a larger one, and sets .size to the
 * bytes it filled: a field at or past that offset was not filled. A .size
 * smaller than the first field's offset is -EINVAL.
 */
struct kvf_failure {
	uint32_t size;              /* in: sizeof(struct kvf_failure); out: bytes filled */
	enum kvf_fail_reason reason;
	enum kvf_deadline deadline; /* KVF_FAIL_DEADLINE: which one */
	int err;                    /* positive errno where one applies, else 0 */
	int wc_status;              /* enum ibv_wc_status for KVF_FAIL_WC_ERROR, else -1 */
	uint32_t vendor_err;        /* from the work completion */
	char detail[192];           /* human-readable, never empty when failed */
};
#define KVF_FAILURE_INIT { .size = sizeof(struct kvf_failure) }

/* ------------------------------------------------------------------ logging */

/* Log levels, most severe first (the config's log.level names them). */
enum kvf_log_level {
	KVF_LOG_ERROR = 0,
	KVF_LOG_WARN,
	KVF_LOG_INFO,
	KVF_LOG_DEBUG,
	KVF_LOG_NUM
};

/* A log sink: one call per line, without the trailing newline. level is an
 * enum kvf_log_level, module the part of kvferry that logs ("rdma", "room",
 * "config", ...), msg the text without the timestamp and level prefix that
 * stderr lines carry. Called from whichever thread logs: the scheduler
 * thread, the transport's completion poller, the metrics HTTP thread, or
 * the thread in kvf_engine_open / kvf_engine_close. It must not call back
 * into kvferry; it may block (the logging thread waits for it). */
typedef void (*kvf_log_fn)(void *arg, int level, const char *module, const char *msg);

/*
 * Send every log line of the process to fn instead of stderr (fn NULL:
 * stderr again). Process-wide, as log.level is: several engines in one
 * process share it. Lines below log.level are dropped before fn sees them.
 * A line being logged while this runs goes to the old sink or the new one,
 * whole; after it returns, no new line goes to the old one, but a call of
 * the old fn that started before may still be running. Returns 0.
 */
KVF_API int kvf_set_log_callback(kvf_log_fn fn, void *arg);

/* ------------------------------------------------------------------ engine */

/*
 * Open an engine from a libconfig file (see config/kvferry.conf and
 * docs/config.md). Starts the transport and its completion poller thread
 * when the config has an rdma section.
 * Returns 0 and *out, or:
 *   -EINVAL  NULL argument, or the config is invalid (logged: file, line, key)
 *   -ENOENT  the file does not exist
 *   -ENOMEM  out of memory
 *   -ENODEV  no RDMA device/port as configured (logged with device, port, state)
 *   other    -errno from the verbs or rdma_cm setup
 */
KVF_API int kvf_engine_open(const char *config_path, kvf_engine **out);

/*
 * Open an engine from a config file plus overrides given in code, or from
 * overrides alone: what one rank of a serving job sets for itself
 * (its device, port 0 for an ephemeral port, its peer).
 *
 * config_path: a libconfig file as for kvf_engine_open, or NULL for none
 *   (every key not overridden takes its default).
 * overrides: noverrides strings "group.key=value", applied in order on top
 *   of the file (a later one wins), before the rules between keys are
 *   checked, so those see the final values. The value is a libconfig
 *   literal ("rdma.listen_port=0", "rdma.sq_depth=0x400"); for a string
 *   key a value not starting with '"' is taken bare, as is
 *   ("rdma.device=mlx5_3", "rdma.peer=10.0.0.1:18515"), and a quoted one
 *   is a libconfig string ("engine.id=\"a b\""). Blanks around the key
 *   and the value are dropped. An rdma.* override turns the transport on,
 *   as an rdma group in the file would. Each is checked as the file is:
 *   an unknown key is an error naming the nearest one, a bad value names
 *   the key and what was expected; "override I" (I the 0-based index)
 *   stands where a file error says "file:line":
 *     override 1: unknown key 'rdma.devcie' (did you mean 'rdma.device'?)
 *   May be NULL when noverrides is 0. See docs/config.md, "Overrides".
 * err: if not NULL and errlen > 0, set to "" and on failure to one line
 *   saying why: the config error exactly as logged, or the stage that
 *   failed and its errno text (the transport logs the details).
 *
 * Returns 0 and *out, or the errors of kvf_engine_open (-EINVAL for a NULL
 * out, or overrides NULL with noverrides > 0, or an invalid config or
 * override; -ENOENT, -ENOMEM, -ENODEV, other -errno).
 */
KVF_API int kvf_engine_open_with(const char *config_path, const char *const *overrides,
				 size_t noverrides, char *err, size_t errlen,
				 kvf_engine **out);

/*
 * The address and port this engine's listener is bound to: what a prefill
 * publishes to its bootstrap server, and the only way to learn the port
 * with rdma.listen_port = 0 (ephemeral). host gets the numeric address
 * (IPv4 dotted, or IPv6 without brackets: write "[host]:port" for
 * rdma.peer), NUL-terminated; a wildcard rdma.listen_addr (0.0.0.0, ::)
 * gives the wildcard, which is not an address to publish. host may be
 * NULL with hostlen 0, port NULL, to get only the other.
 * Returns 0, or:
 *   -EINVAL       eng NULL, or host NULL with hostlen > 0
 *   -ENOTCONN     the engine does not listen (no transport, or
 *                 rdma.listen_addr is "")
 *   -ERANGE       hostlen is too small for the address (nothing written;
 *                 64 bytes always suffice)
 *   -EAFNOSUPPORT the listener is bound to an address that has no numeric
 *                 form (not IPv4 or IPv6; logged)
 * On an error nothing is written.
 */
KVF_API int kvf_engine_listen_addr(const kvf_engine *eng, char *host, size_t hostlen,
				   uint16_t *port);

/* Stop the poller, destroy connections, free everything. Rooms still live
 * are dropped (logged with their count). NULL is a no-op. */
KVF_API void kvf_engine_close(kvf_engine *eng);

/*
 * Replace the engine's monotonic clock (nanoseconds). For tests and for
 * engines that want deadlines on their own clock. fn NULL restores
 * CLOCK_MONOTONIC. Returns 0 or -EINVAL.
 *
 * What follows this clock: room deadlines, the quiesce deadline, tombstone
 * and parked ROOM_INFO TTLs, the periodic summary, kvf_dump's ages.
 * What does not: the transport's heartbeats, heartbeat misses
 * (heartbeat.interval_ms x heartbeat.misses) and rdma.connect_timeout_ms
 * stay on CLOCK_MONOTONIC, measured by the transport; a clock that runs
 * slow or stops does not delay a lost peer's detection.
 */
KVF_API int kvf_engine_set_clock(kvf_engine *eng, uint64_t (*fn)(void *arg), void *arg);

/*
 * Scheduler-thread work: drain the event ring, apply events to rooms, expire
 * deadlines, post queued work, send heartbeats, log the periodic summary.
 * Returns the number of events and expiries applied (>= 0), or -EINVAL.
 * With nothing due it costs O(1) in the number of live rooms.
 */
KVF_API int kvf_progress(kvf_engine *eng);

/*
 * Waiting for work instead of spinning (scheduler thread). A scheduler with
 * nothing to do calls kvf_engine_wait between kvf_progress calls and gives
 * its core to the poller: it returns when the poller pushed an event, when
 * something kvf_progress owes on a clock falls due (the earliest room
 * deadline, a tombstone or parked ROOM_INFO TTL, the periodic summary, the
 * metrics snapshot, the transport's heartbeats and queued frames), when
 * timeout_ms passes (< 0: no limit but those), or at once when work is
 * pending. Call kvf_progress after it, whatever it returned: the wait never
 * applies anything itself, and a room's deadline is never passed over while
 * the scheduler sleeps. While the scheduler does not wait, the poller pays
 * one memory fence per event and never a syscall.
 * Returns 1 (work is, or may be, pending: an event, a deadline due), 0 (the
 * timeout passed with nothing), or -EINVAL (NULL engine), -EINTR (a signal
 * interrupted the sleep).
 */
KVF_API int kvf_engine_wait(kvf_engine *eng, int timeout_ms);

/*
 * For a scheduler with its own poll/epoll loop (Python's asyncio): an eventfd
 * that becomes readable when the poller pushes an event after
 * kvf_engine_wait_prepare announced a sleep. Never read or close it; the
 * engine drains it in its next kvf_progress (or kvf_engine_wait) and closes
 * it in kvf_engine_close. Each iteration: kvf_progress(); t =
 * kvf_engine_wait_prepare(); poll the fd (with your other fds) for at most t
 * ms; repeat. Without the prepare call the fd is never written (the poller
 * only writes it for a scheduler that announced its sleep).
 * kvf_engine_fd returns the fd (>= 0) or -EINVAL (NULL engine).
 * kvf_engine_wait_prepare announces the sleep and returns how many ms the
 * caller may sleep at most: 0 when work is pending (call kvf_progress now;
 * nothing stays armed), INT_MAX when nothing falls due on a clock, or
 * -EINVAL (NULL engine). The value is rounded up: the engine's deadlines are
 * applied at most 1 ms late, never skipped.
 * Both bound the sleep on the engine's clock: with kvf_engine_set_clock, a
 * clock that runs faster than CLOCK_MONOTONIC (a test's scaled clock) makes
 * the sleep that many times longer in real time; spin with kvf_progress
 * there instead.
 */
KVF_API int kvf_engine_fd(const kvf_engine *eng);
KVF_API int kvf_engine_wait_prepare(kvf_engine *eng);

/* ----------------------------------------------------------------- regions */

/*
 * A region is a set of buffers that one index space names: nbufs buffers
 * of nitems items each, item i of every buffer moving together, each buffer
 * with its own item size. The KV cache is one region (layers x K/V buffers,
 * an item = one page), the aux/metadata buffers another (an item = one
 * request's row), a hybrid model's state buffers a third. Regions are
 * matched with the peer's by name: both sides' regions of one name must have
 * the same nbufs and the same item size per buffer, or, when both give a
 * geometry (struct kvf_buf_geometry below), buffers that pair by layer
 * (checked when the connection comes up; a mismatch tears it down with a
 * reason naming the region, the buffer and the field, on both sides).
 * nitems may differ.
 */
/*
 * A buffer's geometry (optional): what lets ranks of different tensor
 * parallelism or pipeline stages exchange KV cache. An item (page) of the
 * buffer is page_tokens tokens x heads heads x head_bytes bytes, token
 * major: token t's heads are bytes [t x heads x head_bytes, ...), head
 * head0 + j of the model at j x head_bytes in it. With geometry, the
 * sender's buffers pair with the receiver's by (layer, kind), not by
 * position, and the sender writes, for every token of every page, the heads
 * that both sides hold (head slicing); the receiver may hold layers the
 * sender does not (a pipeline stage sends its own layers only). Both sides'
 * buffers that pair must have the same page_tokens and head_bytes and
 * overlapping head ranges, and every sender buffer must have a partner:
 * otherwise the connection fails with a reason naming the region, the
 * buffer and the field, on both sides. Equal geometry (same head range)
 * copies whole items, as without geometry. All zero = no geometry: buffers
 * pair by position, items are copied whole. A region gives geometry for
 * all its buffers or for none. docs/design.md, "Ranks and geometry".
 */
struct kvf_buf_geometry {
	uint32_t page_tokens; /* tokens per item; item_size = page_tokens x heads x head_bytes */
	uint32_t heads;       /* heads this rank holds in the buffer, >= 1 */
	uint32_t head0;       /* the model's index of its first head */
	uint32_t head_bytes;  /* bytes of one head of one token (head_dim x dtype size) */
	uint32_t layer;       /* the model's (global) layer id */
	uint32_t kind;        /* which tensor of the layer: 0 = K, 1 = V (any number:
	                         (layer, kind) names a buffer, once per region) */
};

#define KVF_REGION_NAME_MAX 31 /* bytes without the NUL */
#define KVF_MAX_REGIONS 16     /* registered at once, per engine */
struct kvf_region_desc {
	uint32_t size;             /* sizeof(struct kvf_region_desc) */
	uint32_t nbufs;            /* 1..1024 over every region of the engine */
	const char *name;          /* 1..KVF_REGION_NAME_MAX bytes, unique per engine */
	uint32_t nitems;           /* items per buffer: the region's index space */
	uint32_t flags;            /* 0 */
	void *const *bufs;         /* nbufs base addresses, host or CUDA */
	const uint64_t *item_size; /* nbufs item sizes in bytes, each 1..2^30 */
	/* Appended later (read only when .size covers it): */
	const struct kvf_buf_geometry *geom; /* nbufs geometries, or NULL: none */
};
#define KVF_REGION_DESC_INIT { .size = sizeof(struct kvf_region_desc) }

/*
 * Register a region; *region gets its id (what index lists and chunk parts
 * name). The memory stays the caller's; it must outlive the registration.
 * Regions reach a peer in the HELLO of each connection: a receiver region
 * registered after a connection's HELLO went out is unknown to that peer,
 * so a room naming it on that connection fails (BAD_REQUEST, the detail
 * says so); new connections carry it. docs/design.md, "Regions", says why.
 * Returns 0, or:
 *   -EINVAL   NULL argument, .size too small, a bad shape (logged: which
 *             field), flags not 0, a name empty or too long
 *   -EEXIST   a region of this name is registered
 *   -ENOSPC   KVF_MAX_REGIONS regions, or 1024 buffers over all regions
 *   -ENOMEM, -ENOTSUP (CUDA memory without CUDA support), -errno from
 *   ibv_reg_mr
 * CUDA memory the NIC cannot register (no dmabuf, no peer memory) is not
 * an error while rdma.cuda_staging is 1: it is sent through registered
 * host memory (logged once; sender side only, see kvf_receiver_init_regions;
 * docs/design.md, "GPU memory and staging").
 */
KVF_API int kvf_region_register(kvf_engine *eng, const struct kvf_region_desc *desc,
				uint32_t *region);

/*
 * Unregister a region that no live room uses (a room uses the regions of
 * its index lists, or of its chunks, until it is released). Its id may be
 * given to a later registration. Returns 0, -EINVAL (no such region), or
 * -EBUSY (a live room uses it; logged with their count).
 */
KVF_API int kvf_region_unregister(kvf_engine *eng, uint32_t region);

/*
 * The KV pool of earlier versions: kvf_region_register of a region named
 * "kv" with nbufs buffers of nblocks items of block_size[i] bytes. Returns
 * its errors, except -EEXIST when "kv" is registered already.
 */
KVF_API int kvf_pool_register(kvf_engine *eng, uint32_t nbufs, void *const *bufs,
		      const uint64_t *block_size, uint32_t nblocks);

/* ------------------------------------------------------------------- rooms */

/*
 * Create a sender room (prefill) for room_id. It stays BOOTSTRAPPING until a
 * receiver's ROOM_INFO for room_id arrives. If an ABORT for room_id arrived
 * before (a tombstone), the room is created FAILED (KVF_FAIL_PEER_ABORT).
 * Returns 0 and *out, or -EINVAL, -EEXIST (a live sender room with this id;
 * that room is unaffected), -ENOSPC (the table is at max_rooms).
 */
KVF_API int kvf_sender_create(kvf_engine *eng, uint64_t room_id, kvf_room *out);

/*
 * Create a receiver room (decode) for room_id whose data comes from the
 * prefill engine at peer ("host:port"; NULL = the config's default peer).
 * Errors as kvf_sender_create, plus -EINVAL for an unparsable peer.
 */
KVF_API int kvf_receiver_create(kvf_engine *eng, uint64_t room_id, const char *peer,
			kvf_room *out);

/* One region's items in a room: the receiver's destination list, or a
 * sender chunk's source items. */
struct kvf_index_list {
	uint32_t region;       /* id from kvf_region_register */
	uint32_t n;            /* items, >= 1 */
	const uint32_t *items; /* n item indices of the region */
};
#define KVF_USER_DATA_MAX 256 /* opaque bytes a receiver hands its sender */

/*
 * Receiver: the room's destination lists, one per region it uses (at most
 * KVF_MAX_REGIONS, each region once, every list non-empty, engine.
 * max_blocks_per_room items over all lists), and user_len bytes of opaque
 * user data (SGLang's decode_prefix_len, ...; user may be NULL when
 * user_len is 0). Sends ROOM_INFO to the peer; the room moves to
 * WAITING_FOR_INPUT. SUCCESS later means every item of every list landed.
 * Returns 0 or:
 *   -EINVAL     stale handle, not a receiver, no list, a list empty or of an
 *               unknown region, a region twice, too many items, user_len
 *               over KVF_USER_DATA_MAX
 *   -ERANGE     an item is outside its region (the room is FAILED, BAD_REQUEST)
 *   -EALREADY   init was already called
 *   -ECANCELED  the room is already FAILED
 *   -ENOTSUP    a list names a region staged through host memory: a
 *               receiver cannot be staged (the room is FAILED, BAD_REQUEST)
 */
KVF_API int kvf_receiver_init_regions(kvf_engine *eng, kvf_room room,
				      const struct kvf_index_list *lists, uint32_t nlists,
				      const void *user, uint32_t user_len);

/*
 * Receiver of earlier versions: one list for the region named "kv".
 * -ENOBUFS when no such region is registered; otherwise as
 * kvf_receiver_init_regions.
 */
KVF_API int kvf_receiver_init(kvf_engine *eng, kvf_room room, const uint32_t *blocks,
		      uint32_t nblocks);

/*
 * Fan-in receiver: the ROOM_INFO for sender k (0..m-1, in the order of
 * kvf_receiver_create_fanin's peers) only, with lists of its own; no lists
 * (lists NULL, nlists 0) makes sender k a dummy: it sends no data, only its
 * final write (SGLang's MLA decode fed by one of several prefill ranks:
 * the others are dummies). The room is WAITING_FOR_INPUT once every sender
 * has its info. Errors as
 * kvf_receiver_init_regions, plus -EINVAL for k out of range and
 * -EALREADY when sender k has its info already.
 */
KVF_API int kvf_receiver_init_part(kvf_engine *eng, kvf_room room, uint32_t k,
				   const struct kvf_index_list *lists, uint32_t nlists,
				   const void *user, uint32_t user_len);

/*
 * A receiver that needs no data (SGLang's is_dummy decode rank) still
 * joins its sender's fan-out: a ROOM_INFO with no lists. It reaches
 * SUCCESS with the sender's final write (of no bytes), or fails with the
 * room. Errors as kvf_receiver_init_regions.
 */
KVF_API int kvf_receiver_init_dummy(kvf_engine *eng, kvf_room room);

/*
 * Sender, once the receiver's ROOM_INFO arrived (the room is past
 * BOOTSTRAPPING): how many items the receiver's list has for our region of
 * the same name (0 when it asked for none of it). Returns 0, -EINVAL (stale
 * handle, not a sender, unknown region, count NULL) or -EAGAIN (no
 * ROOM_INFO yet).
 */
KVF_API int kvf_sender_peer_count(kvf_engine *eng, kvf_room room, uint32_t region,
				  uint32_t *count);

/*
 * Sender: the receiver's user data. Copies min(buflen, its length) bytes to
 * buf (NULL with buflen 0 to ask the length) and sets *len to its whole
 * length. Returns 0, -EINVAL or -EAGAIN (no ROOM_INFO yet).
 */
KVF_API int kvf_sender_user_data(kvf_engine *eng, kvf_room room, void *buf, uint32_t buflen,
				 uint32_t *len);

/*
 * Fan-out: kvf_sender_peer_count and kvf_sender_user_data are receiver
 * 0's (the first to join); these are receiver k's (0..n-1, in the order
 * they joined). -EAGAIN until every receiver joined, -EINVAL for k out of
 * range; a dummy's count is 0 for every region.
 */
KVF_API int kvf_sender_peer_count_k(kvf_engine *eng, kvf_room room, uint32_t k,
				    uint32_t region, uint32_t *count);
KVF_API int kvf_sender_user_data_k(kvf_engine *eng, kvf_room room, uint32_t k, void *buf,
				   uint32_t buflen, uint32_t *len);

/*
 * Before a sender room exists: what has arrived for room_id. A decode rank
 * may ask before the prefill created the room; its ROOM_INFO is kept
 * (engine.tombstone_ttl_s) and applied at creation. This lets a prefill
 * that does not know how many decode ranks a room serves (SGLang's
 * required_dst_info_num is the decode's fact) read the first receiver's
 * user data, where such a fact travels, and then create the room with the
 * right n (kvf_sender_create_fanout). kvf_sender_create_learned (fan.h)
 * does that in the library, with the bootstrap deadline running from the
 * room's creation: prefer it where the n travels in the fan-out tag. Copies min(buflen, its length) bytes
 * of the first parked ROOM_INFO's user data to buf and sets *len to its
 * length. Returns the number of parked ROOM_INFOs (>= 1), 0 when nothing
 * arrived (*len 0), -ECANCELED when the peer's ABORT arrived instead (a room
 * created now is FAILED at once, saying why), or -EINVAL. Nothing is taken:
 * the room's creation does that. Call it after kvf_progress, which is what
 * moves arrived frames in.
 */
KVF_API int kvf_sender_pending(kvf_engine *eng, uint64_t room_id, void *buf, uint32_t buflen,
			       uint32_t *len);

/*
 * Sender: how many receivers the room serves (*n, 1 unless fan-out) and,
 * when dummies is not NULL, how many of those that joined are dummies.
 * Returns 0 or -EINVAL.
 */
KVF_API int kvf_sender_receivers(kvf_engine *eng, kvf_room room, uint32_t *n,
				 uint32_t *dummies);

/* One region's part of a chunk: src[i] of our region goes to the
 * receiver's list entry dst_offset + i for the region of the same name. */
struct kvf_chunk_part {
	uint32_t region;      /* our region id */
	uint32_t dst_offset;  /* into the receiver's list for that region */
	uint32_t n;           /* items, >= 1 */
	const uint32_t *src;  /* n item indices of our region */
};
#define KVF_SEND_LAST 0x1u

/*
 * Sender: post one chunk of the room as it comes (chunked prefill): its
 * writes go out now (or wait for send-queue room), the room moves to
 * TRANSFERRING. Chunks may come in any order; together they must cover
 * every entry of every list of the receiver exactly once. The chunk with
 * KVF_SEND_LAST is the last one; it may have no part at all, and carries
 * what goes at the end (aux, state). After the LAST chunk's writes, and
 * after every write of the earlier chunks, comes the write-with-immediate
 * that tells the receiver "done": SUCCESS there means every byte landed.
 * Deadlines: deadlines.between_chunks_s from one chunk to the next,
 * deadlines.inflight_s from LAST to success (docs/config.md).
 * Returns 0 or:
 *   -EINVAL     stale handle, not a sender, parts NULL with nparts > 0, a
 *               part with no items, an unknown region, flags unknown,
 *               nparts over KVF_MAX_REGIONS
 *   -EAGAIN     the receiver's ROOM_INFO has not arrived yet (BOOTSTRAPPING)
 *   -EMSGSIZE   a part runs past the receiver's list, overlaps an earlier
 *               part, names a region the receiver did not ask for, or the
 *               LAST chunk leaves entries unsent (room FAILED, BAD_REQUEST;
 *               the detail names the region and the offsets)
 *   -ERANGE     a source item is outside our region (room FAILED, BAD_REQUEST)
 *   -EALREADY   the LAST chunk was already sent
 *   -ECANCELED  the room is already FAILED
 */
KVF_API int kvf_sender_send_chunk(kvf_engine *eng, kvf_room room,
				  const struct kvf_chunk_part *parts, uint32_t nparts,
				  uint32_t flags);

/*
 * Sender of earlier versions: one LAST chunk of region "kv" at offset 0,
 * whose nblocks must be the receiver's whole list (-EMSGSIZE otherwise,
 * room FAILED). -ENOBUFS when no "kv" region is registered; otherwise as
 * kvf_sender_send_chunk.
 */
KVF_API int kvf_sender_send(kvf_engine *eng, kvf_room room, const uint32_t *blocks,
		    uint32_t nblocks);

/* The room's state (enum kvf_poll, >= 0), or -EINVAL. The failure field is
 * read first: a failed room is FAILED whatever else is in flight. */
KVF_API int kvf_poll(kvf_engine *eng, kvf_room room);

/*
 * Fail the room now (KVF_FAIL_LOCAL_ABORT) and tell the peer. poll() returns
 * FAILED from this call on. Idempotent on a terminal room (returns 0, the
 * first failure is kept). Returns 0 or -EINVAL.
 */
KVF_API int kvf_abort(kvf_engine *eng, kvf_room room);

/* Copy the room's failure (reason KVF_FAIL_NONE when not failed); set
 * out->size first (see struct kvf_failure).
 * Returns 0 or -EINVAL (stale handle, NULL out, out->size too small). */
KVF_API int kvf_failure(kvf_engine *eng, kvf_room room, struct kvf_failure *out);

/*
 * 1 when no posted work of the room can still touch its memory (its
 * outstanding work requests are 0; on a receiver, the peer acknowledged or
 * the connection is gone), 0 when not yet, -EINVAL.
 */
KVF_API int kvf_quiescent(kvf_engine *eng, kvf_room room);

/*
 * Hand the room's slot back. Only a terminal, quiescent room can be released:
 * after 0 its blocks may be reused and the handle is stale.
 * Returns 0, -EBUSY (not terminal, or terminal but not yet quiescent: call
 * kvf_progress and try again), or -EINVAL.
 */
KVF_API int kvf_release(kvf_engine *eng, kvf_room room);

/*
 * Watched rooms: what changed since the last look, instead of a poll of
 * every room. After kvf_watch, each change of the room's kvf_poll state
 * puts it on the engine's change list; kvf_changed takes up to max of them
 * into out[], each with the state it has now and the caller's tag, and
 * returns how many (0 when nothing changed), or -EINVAL (NULL out). A room
 * changed twice between two calls is reported once, with its state then; a
 * change that left the state as it was last reported (a fan member's) is
 * not reported. The list holds every watched room at most once, so it never
 * overflows: what max leaves out stays for the next call. Release and
 * kvf_unwatch end the watch; a released room's changes not yet taken are
 * dropped with it. Scheduler thread only, as every call on rooms.
 *
 * kvf_watch: 0, -EINVAL (stale handle), -ENOMEM (the table, made at the
 * first call: 20 B per max_rooms slot). Watching a watched room replaces
 * its tag. The state at this call counts as reported: the first change
 * reported is one after it.
 * kvf_unwatch: 0, or -EINVAL (stale handle, or not watched).
 */
struct kvf_change {
	kvf_room room;
	int state;  /* enum kvf_poll */
	void *tag;  /* kvf_watch's */
};

KVF_API int kvf_watch(kvf_engine *eng, kvf_room room, void *tag);
KVF_API int kvf_unwatch(kvf_engine *eng, kvf_room room);
KVF_API int kvf_changed(kvf_engine *eng, struct kvf_change *out, uint32_t max);

/* Names, for logs. Never NULL. */
KVF_API const char *kvf_poll_str(int state);
KVF_API const char *kvf_fail_reason_str(enum kvf_fail_reason r);
KVF_API const char *kvf_deadline_str(enum kvf_deadline d);
KVF_API const char *kvf_ignore_reason_str(enum kvf_ignore_reason r);
KVF_API const char *kvf_auth_refusal_str(enum kvf_auth_refusal r);
/* The configuration key that sets a deadline ("deadlines.inflight_s"), ""
 * for KVF_DL_NONE. Never NULL. */
KVF_API const char *kvf_deadline_key(enum kvf_deadline d);
/*
 * The engine's configured length of deadline d in seconds (0: off), in *s.
 * For a layer above that keeps a deadline of its own in a state the library
 * has no room for yet (kvferry.sglang's sender before its room exists), so
 * that it applies the operator's figure. Returns 0 or -EINVAL.
 */
KVF_API int kvf_engine_deadline_s(kvf_engine *eng, enum kvf_deadline d, uint32_t *s);
/* The other groups, inside the extern "C": rooms across ranks, the
 * counters and the rooms seen from outside, several devices per engine. */
#include <kvferry/fan.h>
#include <kvferry/stats.h>
#include <kvferry/rails.h>
#ifdef __cplusplus
}
#endif
#endif /* KVFERRY_H */
