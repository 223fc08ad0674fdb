/* SPDX-License-Identifier: Apache-2.0 */
/* Shared by the RDMA suite's kvf_driver and fake_peer: which blocks a room
 * uses on each side and what a source block holds, so one side can check
 * what the other wrote without talking to it.
 *
 * Room i (id = first_id + i), block j of blocks_per_room:
 *   destination (decode) block  (i * bpr + j)     % pool_blocks
 *   source      (prefill) block (i * bpr + j + 1) % pool_blocks
 * With window * bpr <= pool_blocks the destinations of live rooms never
 * overlap. Source block b of buffer k holds kvt_word(k, b, x) at word x. */
#ifndef KVF_RXE_PATTERN_H
#define KVF_RXE_PATTERN_H

#include <stdint.h>
#include <time.h>

/* Seconds on CLOCK_MONOTONIC, for both programs' timing lines. */
static inline double kvt_mono(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static inline uint64_t kvt_mix(uint64_t x)
{
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ull;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

static inline uint64_t kvt_word(uint32_t buf, uint32_t block, uint64_t x)
{
	return kvt_mix(0x6b7666657272ull ^ (uint64_t)buf << 44 ^ (uint64_t)block << 22 ^ x);
}

static inline uint32_t kvt_dst_block(uint32_t i, uint32_t j, uint32_t bpr, uint32_t pool_blocks)
{
	return (uint32_t)(((uint64_t)i * bpr + j) % pool_blocks);
}

static inline uint32_t kvt_src_block(uint32_t i, uint32_t j, uint32_t bpr, uint32_t pool_blocks)
{
	return (uint32_t)(((uint64_t)i * bpr + j + 1) % pool_blocks);
}

#endif
