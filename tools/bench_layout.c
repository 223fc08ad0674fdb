/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Which blocks a room uses on each side, and what the source blocks hold.
 * Both processes derive the same room ids and block lists from --seed.
 * Room i uses partition i % window of each pool, so a partition is reused
 * only after its previous room was released.
 */
#include "bench.h"

uint64_t bench_mix(uint64_t x)
{
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ull;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

uint64_t bench_room_id(const struct opts *o, uint32_t i)
{
	return bench_mix(o->seed * 1000003u + i) >> 1;
}

/* Blocks per partition: the sglang layout spreads its scattered half over
 * twice the room's pages. */
uint32_t bench_part_blocks(const struct opts *o)
{
	return o->layout == LAYOUT_SGLANG ? 2 * o->bpr : o->bpr;
}

/* SGLang's page lists: the first half of the request's pages are one run
 * (a prefix allocated at once), the rest every other page (freed and
 * reused), so only the first half merges into larger writes. The decode
 * side takes the scattered pages in the opposite order. */
static uint32_t sglang_block(const struct opts *o, uint32_t j, bool src)
{
	uint32_t h = (o->bpr + 1) / 2;

	if (j < h)
		return j;
	return h + 1 + 2 * (src ? j - h : o->bpr - 1 - j);
}

uint32_t bench_room_block(const struct opts *o, uint32_t i, uint32_t j, bool src)
{
	uint32_t base = (i % o->window) * bench_part_blocks(o);
	uint32_t rot;

	switch (o->layout) {
	case LAYOUT_CONTIGUOUS:
		return base + j;
	case LAYOUT_SGLANG:
		return base + sglang_block(o, j, src);
	case LAYOUT_ROTATED:
		break;
	}
	/* rotation then stride 1: distinct blocks, runs that are contiguous
	 * sometimes and wrap other times, so both merged and split writes occur */
	rot = (uint32_t)(bench_mix(o->seed ^ ((uint64_t)i << 1 | src)) % o->bpr);
	return base + (j + rot) % o->bpr;
}

uint64_t bench_pattern(const struct opts *o, uint32_t buf, uint32_t block, uint64_t word)
{
	return bench_mix(o->seed ^ (uint64_t)buf << 40 ^ (uint64_t)block << 20 ^ word);
}
