/* SPDX-License-Identifier: Apache-2.0 */
/* What a received control frame becomes, without the device: decoded
 * (proto.c), ROOM_INFO sequences reassembled, and mapped to the events the
 * scheduler gets through its ring. The poller (poller.c on_frame) calls it
 * for every frame; the engine fuzz harness (tests/fuzz/fuzz_engine.c)
 * drives the same code into a real engine. */
#ifndef KVF_FRAME_EVENTS_H
#define KVF_FRAME_EVENTS_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "base/event.h"
#include "transfer/proto.h"

/* The connection a frame came on, as much of it as the mapping needs. */
struct kvf_frame_src {
	struct kvf_room_reasm *reasm;        /* its ROOM_INFO sequence in progress */
	const struct kvf_proto_limits *lim;  /* what decoding checks against */
	uint32_t conn_id;                    /* for logs */
	uint32_t peer;                       /* the events' peer: the group id */
	uint8_t role;                        /* local role of BAD_FRAME (RECEIVER on
	                                        the active, decode, side) */
	const char *peer_name;               /* its address, for logs and details */
	/* Hands one event to the scheduler (the ring); data, if any, goes
	 * with it. */
	void (*push)(void *arg, const struct kvf_event *ev);
	void *push_arg;
	/* Sound frames received per type (KVF_FRAME_TYPES entries; NULL: not
	 * counted). Relaxed counters: they publish nothing. */
	_Atomic uint64_t *rx_by_type;
};

/* What the caller still has to do. */
enum kvf_frame_verdict {
	KVF_FRAME_HANDLED = 0, /* every event it makes is pushed */
	KVF_FRAME_HELLO,       /* *f is a sound HELLO: take the peer's pool layout */
	KVF_FRAME_AUTH,        /* *f is a sound AUTH frame after the handshake
	                          (handshake.h: kvf_handshake_late) */
	KVF_FRAME_FATAL,       /* malformed, naming no room (BAD_FRAME pushed):
	                          tear the connection down */
	KVF_FRAME_NUM
};

/*
 * Decode the len bytes at buf received at now_ns (the clock of
 * kvf_proto_reasm_feed) and push its events: PEER_INFO for a whole
 * ROOM_INFO list, PEER_ABORT, ABORT_ACK, BAD_FRAME (key = the room a bad
 * frame names, 0 for none; data = a malloc'd detail) for every malformed
 * frame, broken or expired sequence. HEARTBEAT makes none. *f gets the
 * decoded frame.
 */
enum kvf_frame_verdict kvf_frame_events(const struct kvf_frame_src *src, const void *buf,
					size_t len, uint64_t now_ns, struct kvf_frame *f);

#endif
