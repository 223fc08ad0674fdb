/* SPDX-License-Identifier: Apache-2.0 */
/* Staging in the transport (docs/design.md, "GPU memory and staging"): a
 * sender chunk from a region the NIC could not register is copied into
 * registered host slots (stage_pool.h) and its RDMA WRITEs go from there
 * once the copy is done.
 *
 * How a staged chunk goes. Its writes are built at once, like any chunk's
 * (so post_chunk returns their signaled count as always), with slot-relative
 * local addresses, and held in the send queue under a tag (sendq.h): they,
 * and every write queued after them on that QP, wait. When slots are
 * granted the held SGEs are rebased to the slots and the copies queued on
 * the region's copier; when the copy is done the hold is lifted and the
 * queue posts. Completions and cancels keep the ledger that says when the
 * slots are quiet again.
 *
 * Sender side only: a receiver region cannot be staged (a copy after the
 * final write-with-immediate would change what SUCCESS means), so a
 * ROOM_INFO naming a staged region is refused with -ENOTSUP.
 *
 * Scheduler thread only. */
#ifndef KVF_RDMA_STAGE_H
#define KVF_RDMA_STAGE_H

#include <stdbool.h>
#include <stdint.h>

#include "transfer/sendq.h"

struct kvf_rdma;
struct kvf_conn;
struct kvf_pool;
struct kvf_transport_stats;
struct kvf_region_layout;
struct kvf_xfer_part;
struct kvf_info_out;

/* Bytes in one staging slot; a staged region's items must fit one. */
#define KVF_STAGE_SLOT_BYTES (256u * 1024u)

/* The test hook: whether the KVF_TEST_STAGE_REGIONS environment variable
 * (a comma-separated list of region names) names this region. Such a host
 * region is staged with the memcpy copier, so the whole path runs without
 * a GPU (tests/rxe/scenarios/stage.sh). */
bool kvf_stage_test_forced(const char *region);

/* kvf_pool_create as rdma.cuda_staging and the test hook say; a region
 * with staged buffers sets up the staging slots (rdma.staging_pool_mb) on
 * first use, and its copier. Returns kvf_pool_create's, or -EINVAL (a
 * staged item over KVF_STAGE_SLOT_BYTES, logged) or -errno (no copier). */
int kvf_staging_pool_create(struct kvf_rdma *t, const struct kvf_region_layout *layout,
			    struct kvf_pool **out);
void kvf_staging_destroy(struct kvf_rdma *t);

/* Whether every region a receiver's info names can receive (none is
 * staged; logged with the region's name when one is). */
bool kvf_staging_receiver_ok(const struct kvf_rdma *t, const struct kvf_info_out *info);

/* post_chunk: queue the chunk's writes (sp, from parts) on c's send queue
 * (conn: the group id the engine knows), staged parts held until their
 * copy is done; without staging set up, kvf_sendq_add_parts alone. Same
 * returns as kvf_sendq_add_parts, and -E2BIG (a chunk bigger than every
 * slot together, logged), -ENOTSUP (parts staged by two copiers). */
int kvf_staging_add(struct kvf_rdma *t, struct kvf_conn *c, uint32_t conn, uint64_t wr_id,
		    const struct kvf_sq_part *sp, const struct kvf_xfer_part *parts,
		    uint32_t nparts, const uint32_t *imm, const struct kvf_sq_buf *imm_to);

/* A completion of a write of (conn, wr_id), any status. */
void kvf_staging_on_wc(struct kvf_rdma *t, uint32_t conn, uint64_t wr_id);
/* The room's waiting writes were cancelled (ndropped signaled ones).
 * Returns ndropped. */
int kvf_staging_cancel(struct kvf_rdma *t, uint32_t conn, uint64_t wr_id, int ndropped);

/* Copies done: lift their holds and kick(c); copies failed: fail(c,
 * reason, why) (the connection goes, logged here); quiet claims give their
 * slots back; waiting claims get slots. */
typedef void (*kvf_staging_kick_fn)(struct kvf_conn *c);
typedef void (*kvf_staging_fail_fn)(struct kvf_conn *c, uint16_t reason, const char *why);
void kvf_staging_progress(struct kvf_rdma *t, kvf_staging_kick_fn kick, kvf_staging_fail_fn fail);
/* Scheduler: staged work is under way (copies to watch, rooms holding or
 * waiting for slots): progress is owed at its next scan, whatever else. */
bool kvf_staging_busy(const struct kvf_rdma *t);

void kvf_staging_stats(const struct kvf_rdma *t, struct kvf_transport_stats *out);

#endif
