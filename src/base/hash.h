/* SPDX-License-Identifier: Apache-2.0 */
/* The one 64-bit hash finalizer of the library: splitmix64's. Room ids may
 * be sequential or random; mixing all 64 bits spreads both evenly (the id
 * map's buckets, a connection group's QP choice). */
#ifndef KVF_HASH_H
#define KVF_HASH_H

#include <stdint.h>

static inline uint64_t kvf_mix64(uint64_t x)
{
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ull;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

#endif
