/* SPDX-License-Identifier: Apache-2.0 */
/* Lock-free single-producer / single-consumer ring of struct kvf_event:
 * the completion poller thread produces, the scheduler thread consumes.
 * One producer and one consumer per ring, always. */
#ifndef KVF_RING_H
#define KVF_RING_H

#include <stdbool.h>
#include <stdint.h>

#include "base/event.h"

struct kvf_ring;

/* size: a power of two >= 2; the ring holds up to size events. Returns NULL
 * on a bad size or no memory. */
struct kvf_ring *kvf_ring_create(uint32_t size);
void kvf_ring_destroy(struct kvf_ring *r);

/* Producer. Never drops: when full, waits (spin, then yield) until the
 * consumer makes room, and counts the stall once per wait. */
void kvf_ring_push(struct kvf_ring *r, const struct kvf_event *ev);
/* Producer. false when full (nothing written). */
bool kvf_ring_try_push(struct kvf_ring *r, const struct kvf_event *ev);

/* Consumer. Copies up to max events into out, releases their slots with one
 * store, returns how many. */
uint32_t kvf_ring_pop_batch(struct kvf_ring *r, struct kvf_event *out, uint32_t max);

/* Either side; approximate while the other side runs. kvf_ring_stalls counts
 * the kvf_ring_push calls that found the ring full (try_push never counts). */
uint32_t kvf_ring_count(const struct kvf_ring *r);
uint64_t kvf_ring_stalls(const struct kvf_ring *r);

/* Sleeping consumer (see ring.c: the order that makes a lost wakeup
 * impossible). fd: an eventfd (nonblocking) the producer writes when the
 * consumer announced a sleep; the ring does not own it. */
void kvf_ring_set_wake_fd(struct kvf_ring *r, int fd);
/* Consumer: announce a sleep, then re-check. true: the ring is empty and
 * the flag is up, so the next push writes the fd: sleep on it, then call
 * kvf_ring_wait_disarm. false: events are there, nothing is armed. */
bool kvf_ring_wait_arm(struct kvf_ring *r);
/* Producer side, for work handed to the consumer outside the ring (the
 * transport's lock-free stacks): after publishing it, wake the consumer if
 * it announced a sleep. The same fence as a push: a consumer that reads
 * that work after kvf_ring_wait_arm cannot miss both it and the wakeup. */
void kvf_ring_wake(struct kvf_ring *r);
/* Consumer, after an armed sleep: take the flag down and drain the fd
 * (always: a late write of an earlier sleep may be there). Returns true
 * when a producer had taken the flag (an event came). */
bool kvf_ring_wait_disarm(struct kvf_ring *r);

/* For tests: kvf_ring_create with both free-running indices starting at
 * start (e.g. near UINT32_MAX, to cover their wraparound). */
struct kvf_ring *kvf_ring_create_at(uint32_t size, uint32_t start);

#endif
