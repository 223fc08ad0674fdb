/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer harness for ROOM_INFO reassembly (src/transfer/proto.c): an input is
 * a sequence of records (fuzz_records.h); each record's bytes are decoded as
 * a frame and, when a ROOM_INFO or ROOM_INFO_CONT, fed to one connection's
 * kvf_room_reasm, as frame_events.c does. op's low 7 bits advance the clock
 * by op x 0.5 s before the frame (so sequences expire); with op >= 0x80
 * the sequence's age is checked before the frame (as frame_events.c does on
 * every frame), else after it (a frame of another type that came next).
 *
 * Checks, after every record: memory follows the bytes received (have <=
 * cap <= 2 x have, cap <= the info's total); a whole info is handed over
 * only decoded: lists of the regions, every item inside its region, for the
 * room of the sequence; a sequence is never older than the bound after a
 * frame; nothing leaks (LSan).
 * Run it with scripts/fuzz.sh reasm SECONDS.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "fuzz_report.h"
#include "base/event.h"
#include "fuzz_records.h"
#include "transfer/proto.h"

#define HALF_S 500000000ull

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void broken(const char *what)
{
	char msg[256];

	snprintf(msg, sizeof(msg), "fuzz_reasm: %s", what);
	fuzz_broken(msg);
}

static const struct kvf_hello_region regions[2] = {
	{.name = "kv", .id = 0, .nitems = 1000, .nbufs = 2},
	{.name = "aux", .id = 3, .nitems = 4, .nbufs = 3},
};
static const struct kvf_proto_limits lim = {.max_blocks = 4096, .max_bufs = 8,
					    .regions = regions, .nregions = 2};

static void check_state(const struct kvf_room_reasm *ra, uint64_t now)
{
	if (!ra->buf) {
		if (ra->have || ra->cap)
			broken("counts left with no sequence");
		return;
	}
	if (ra->have > ra->cap || ra->cap > ra->total || ra->cap > 2 * (uint64_t)ra->have)
		broken("memory does not follow the bytes received");
	if (ra->have >= ra->total)
		broken("a whole info left in progress");
	if (now - ra->started_ns > KVF_PROTO_REASM_MAX_NS)
		broken("a sequence older than the bound survived a frame");
}

static void check_done(const struct kvf_peer_info *pi, uint64_t room)
{
	if (pi->room_id != room)
		broken("an info for another room than its frame's");
	for (uint32_t k = 0; k < pi->nlists; k++) {
		uint32_t nitems = pi->lists[k].peer_region == 0 ? 1000 :
				  pi->lists[k].peer_region == 3 ? 4 : 0;

		for (uint32_t i = 0; i < pi->lists[k].n; i++)
			if (pi->ids[pi->lists[k].first + i] >= nitems)
				broken("an item outside its region in a whole info");
	}
}

static void one_frame(struct kvf_room_reasm *ra, const struct fuzz_record *r, uint64_t now)
{
	struct kvf_peer_info *done = NULL;
	struct kvf_reasm_drop drop;
	struct kvf_frame f;
	char why[200];
	int rc;

	if (r->op & 0x80)
		kvf_proto_reasm_expire(ra, now, &drop);
	if (kvf_proto_decode(r->data, r->len, &lim, &f, NULL, why, sizeof(why))) {
		/* frame_events.c: a malformed part ends the sequence. */
		if (f.type == KVF_FR_ROOM_INFO || f.type == KVF_FR_ROOM_INFO_CONT)
			kvf_proto_reasm_clear(ra);
		return;
	}
	if (f.type != KVF_FR_ROOM_INFO && f.type != KVF_FR_ROOM_INFO_CONT)
		return;
	rc = kvf_proto_reasm_feed(ra, &f, &lim, now, &done, &drop, why, sizeof(why));
	if (rc < 0 && rc != -EBADMSG)
		broken("unexpected return");
	if ((rc == 1) != (done != NULL))
		broken("a whole list not handed over, or handed over unfinished");
	if (done) {
		check_done(done, f.room_id);
		free(done);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct kvf_room_reasm ra = {0};
	struct fuzz_record r;
	uint64_t now = 1000000000ull;

	while (fuzz_next_record(&data, &size, &r)) {
		now += (uint64_t)(r.op & 0x7f) * HALF_S;
		one_frame(&ra, &r, now);
		/* the age is checked on every frame: on those too */
		if (!(r.op & 0x80)) {
			struct kvf_reasm_drop drop;

			kvf_proto_reasm_expire(&ra, now, &drop);
		}
		check_state(&ra, now);
	}
	kvf_proto_reasm_clear(&ra);
	return 0;
}
