/* SPDX-License-Identifier: Apache-2.0 */
/* kvferry: rooms across ranks: fan-out (one sender, n receivers) and fan-in (one
 * receiver, m senders). Included by
 * <kvferry/kvferry.h> (inside its extern "C"); include that one
 * (this one includes nothing: kvferry.h has what it needs before it). */
#ifndef KVFERRY_FAN_H
#define KVFERRY_FAN_H

/*
 * Rooms across ranks (docs/design.md, "Fan-out and fan-in"). At most
 * KVF_FAN_MAX peers a room; a room of n peers takes n slots of
 * engine.max_rooms (and counts as n in kvf_stats' rooms, created and
 * released; its failure counts once in failures).
 *
 * Fan-out: one sender room serving n receivers (SGLang's
 * required_dst_info_num: decode TP larger than prefill TP, MLA, where every
 * decode rank holds the same latent KV), n given here; or learned from the
 * first receiver's ROOM_INFO (kvf_sender_create_learned, below). Each
 * receiver joins with its own ROOM_INFO on its own connection,
 * numbered in the order they joined (0 first). The room stays
 * BOOTSTRAPPING until all n joined; the bootstrap deadline covers the
 * missing ones and its failure says how many joined ("(2 of 3 joined)").
 * Every chunk goes to every receiver, checked against that receiver's own
 * lists (dst_offset into its list); a receiver that needs no data (a
 * dummy: kvf_receiver_init_dummy) gets only the final write. SUCCESS when
 * every receiver's final write completed. One receiver failing (its
 * connection lost, its ABORT, a chunk it refuses, a deadline) fails the
 * room, and every other receiver is told with ABORT; kvf_failure gives that
 * first failure. Quiescent when every receiver's connection is.
 * n = 1 is kvf_sender_create. Errors as kvf_sender_create, plus -EINVAL
 * for n 0 or above KVF_FAN_MAX; -ENOSPC when fewer than n slots are free.
 */
#define KVF_FAN_MAX 64
KVF_API int kvf_sender_create_fanout(kvf_engine *eng, uint64_t room_id, uint32_t n,
				     kvf_room *out);

/*
 * The fan-out tag: how a receiver tells a sender created with
 * kvf_sender_create_learned how many receivers the room serves. Its user
 * data begins with these KVF_FAN_TAG_LEN bytes, little-endian: the magic
 * KVF_FAN_TAG_MAGIC (4 bytes), the version KVF_FAN_TAG_VERSION (u16),
 * flags (u16, 0), n (u32); what the application adds follows. The tag is
 * user data like any other on the wire (docs/wire.md 6.3).
 */
#define KVF_FAN_TAG_MAGIC "KVFN"
#define KVF_FAN_TAG_VERSION 1
#define KVF_FAN_TAG_LEN 12

/*
 * A fan-out whose size the first receiver's ROOM_INFO gives, for a prefill
 * that does not know it (SGLang's and vLLM's decode TP is the decode's
 * fact): the room is created now, BOOTSTRAPPING, its bootstrap deadline
 * running from now. The first ROOM_INFO that joins it (one parked before
 * creation included) sets n from its fan-out tag: n - 1 more receivers
 * may join, under the same deadline ("(1 of 3 joined)" when it passes); no
 * tag, n = 1. A tag with n 0 or above KVF_FAN_MAX fails the room
 * (KVF_FAIL_BAD_FRAME), fewer than n - 1 free slots fail it
 * (KVF_FAIL_BAD_REQUEST); that receiver is told ABORT. Only the first
 * receiver's tag is read: a later one's n does not change the room's.
 * Until the first joins, kvf_sender_receivers says 1. Errors as
 * kvf_sender_create.
 */
KVF_API int kvf_sender_create_learned(kvf_engine *eng, uint64_t room_id, kvf_room *out);

/*
 * Fan-in: one receiver room fed by m senders at peers[0..m-1] (SGLang's
 * required_prefill_response_num: prefill TP larger than decode TP, or
 * pipeline stages). kvf_receiver_init_regions sends the same ROOM_INFO to
 * every sender, each of which must then cover the whole list (what it
 * writes of each item, its heads or layers, is the geometry's business);
 * kvf_receiver_init_part gives sender k a list of its own instead, so that
 * without geometry the senders can write disjoint parts. SUCCESS when all m
 * final writes landed; any failure fails the room and aborts the others;
 * quiescent when every sender is. m = 1 is kvf_receiver_create. Errors as
 * kvf_receiver_create, plus -EINVAL for m 0 or above KVF_FAN_MAX.
 */
KVF_API int kvf_receiver_create_fanin(kvf_engine *eng, uint64_t room_id,
				      const char *const *peers, uint32_t m, kvf_room *out);

#endif
