/* SPDX-License-Identifier: Apache-2.0 */
#include "transfer/frame_events.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include <kvferry/kvferry.h>

#include "base/log.h"
#include "engine/transport.h"

#define DETAIL_LEN 256

/* One bad frame (or sequence): logged, and its room told (key 0 when the
 * frame names none). The detail travels as the event's data. */
static void bad_frame(const struct kvf_frame_src *src, bool names_room, uint64_t room_id,
		      const char *detail)
{
	struct kvf_event ev = {
		.kind = KVF_EV_BAD_FRAME,
		.role = src->role,
		.peer = src->peer,
		.key = names_room ? room_id : 0,
	};
	char *msg = malloc(DETAIL_LEN);

	if (msg)
		snprintf(msg, DETAIL_LEN, "from %s: %s", src->peer_name, detail);
	ev.data = msg;
	kvf_warn("poller", "connection %u: bad frame from %s: %s", src->conn_id, src->peer_name,
		 detail);
	src->push(src->push_arg, &ev);
}

/* ROOM_INFO and ROOM_INFO_CONT: one sequence in progress per connection
 * (proto.h); the room's list is pushed once whole. */
static void on_room_info(const struct kvf_frame_src *src, const struct kvf_frame *f,
			 uint64_t now_ns)
{
	struct kvf_event ev = {.kind = KVF_EV_PEER_INFO, .role = KVF_SENDER, .peer = src->peer};
	struct kvf_peer_info *pi;
	struct kvf_reasm_drop drop;
	char detail[200];
	int rc = kvf_proto_reasm_feed(src->reasm, f, src->lim, now_ns, &pi, &drop, detail,
				      sizeof(detail));

	if (drop.set)
		bad_frame(src, true, drop.room_id, drop.why);
	if (rc < 0)
		bad_frame(src, true, f->room_id, detail);
	if (rc <= 0)
		return;
	pi->peer = src->peer;
	ev.key = pi->room_id;
	ev.data = pi;
	src->push(src->push_arg, &ev);
}

/* A malformed frame. A broken part of a ROOM_INFO ends the sequence in
 * progress: its room fails with it when it is another room's. */
static enum kvf_frame_verdict on_malformed(const struct kvf_frame_src *src,
					   const struct kvf_frame *f, bool names,
					   const char *detail)
{
	struct kvf_room_reasm *ra = src->reasm;

	if (names && ra->buf && (f->type == KVF_FR_ROOM_INFO || f->type == KVF_FR_ROOM_INFO_CONT)) {
		if (ra->room_id != f->room_id) {
			char why[200];

			snprintf(why, sizeof(why), "ROOM_INFO sequence cut short by a "
				 "malformed %s for room %#" PRIx64, kvf_frame_type_str(f->type),
				 f->room_id);
			bad_frame(src, true, ra->room_id, why);
		}
		kvf_proto_reasm_clear(ra);
	}
	bad_frame(src, names, f->room_id, detail);
	/* A frame that names no room: nothing on this connection can be
	 * trusted any more. */
	return names ? KVF_FRAME_HANDLED : KVF_FRAME_FATAL;
}

enum kvf_frame_verdict kvf_frame_events(const struct kvf_frame_src *src, const void *buf,
					size_t len, uint64_t now_ns, struct kvf_frame *f)
{
	struct kvf_event ev = {.peer = src->peer};
	struct kvf_reasm_drop drop;
	char detail[200];
	bool names;

	/* Any frame may find the sequence in progress too old (a heartbeat
	 * comes every interval): its memory does not wait for the next one. */
	if (kvf_proto_reasm_expire(src->reasm, now_ns, &drop))
		bad_frame(src, true, drop.room_id, drop.why);
	if (kvf_proto_decode(buf, len, src->lim, f, &names, detail, sizeof(detail)))
		return on_malformed(src, f, names, detail);
	if (src->rx_by_type)
		atomic_fetch_add_explicit(&src->rx_by_type[f->type % KVF_FRAME_TYPES], 1,
					  memory_order_relaxed);
	switch (f->type) {
	case KVF_FR_HELLO:
		return KVF_FRAME_HELLO;
	case KVF_FR_AUTH:
		return KVF_FRAME_AUTH;
	case KVF_FR_ROOM_INFO:
	case KVF_FR_ROOM_INFO_CONT:
		on_room_info(src, f, now_ns);
		break;
	case KVF_FR_ABORT:
		ev.kind = KVF_EV_PEER_ABORT;
		ev.role = f->abort.to_role;
		ev.status = f->abort.reason;
		ev.key = f->room_id;
		src->push(src->push_arg, &ev);
		break;
	case KVF_FR_ABORT_ACK:
		ev.kind = KVF_EV_ABORT_ACK;
		ev.role = KVF_RECEIVER;
		ev.key = f->room_id;
		src->push(src->push_arg, &ev);
		break;
	default: /* HEARTBEAT: being heard is all it says */
		break;
	}
	return KVF_FRAME_HANDLED;
}
