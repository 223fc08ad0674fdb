/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kvferry._kvferry: what the binding's files share. The object structs of
 * Engine and Room, the type objects and exceptions _kvferry.c registers, and
 * the helpers more than one file calls: the owner-thread check and errno ->
 * KVFerryError (errors.c), an engine's pool and region registration
 * (regions.c, in Engine's method table), and the struct-sequence values of
 * stats and failures (stats.c). Engine is engine.c, Room rooms.c.
 */
#ifndef KVF_PY_BINDING_H
#define KVF_PY_BINDING_H

#include <Python.h>
#include <stdbool.h>
#include <stdint.h>

#include <kvferry/kvferry.h>

typedef struct {
	PyObject_HEAD
	kvf_engine *eng;
	unsigned long owner; /* PyThread_get_thread_ident() of the opener */
	PyObject *keep;      /* memoryviews of the pool's buffer objects */
	PyObject *regions;   /* region id -> memoryviews of its buffer objects */
	PyObject *weakrefs;
	bool waiting;        /* the owner is in wait() without the GIL */
} EngineObject;

typedef struct {
	PyObject_HEAD
	EngineObject *engine; /* strong: a room keeps its engine object alive */
	kvf_room h;
	uint64_t id;
	int role;
} RoomObject;

extern PyTypeObject EngineType, RoomType; /* engine.c, rooms.c */
extern PyTypeObject StatsType, FailureType, RoomStatsType; /* stats.c */
extern PyStructSequence_Desc stats_desc, failure_desc, room_stats_desc;

/* errors.c; created and registered by the module init */
extern PyObject *KVFerryError;     /* OSError subclass */
extern PyObject *WrongThreadError; /* RuntimeError subclass */

/* 0, or -1 with ValueError (closed) or WrongThreadError (not the opener). */
int engine_usable(EngineObject *e);
/* Raise KVFerryError for rc < 0, with the room's failure when it failed. */
PyObject *raise_rc(int rc, const char *what, RoomObject *room);

/* regions.c: Engine.register_pool, register_region, unregister_region */
PyObject *engine_register_pool(EngineObject *self, PyObject *args, PyObject *kw);
PyObject *engine_register_region(EngineObject *self, PyObject *args, PyObject *kw);
PyObject *engine_unregister_region(EngineObject *self, PyObject *arg);

/* watch.c: Engine.poll_many, watch, unwatch, changed */
PyObject *engine_poll_many(EngineObject *self, PyObject *rooms);
PyObject *engine_watch(EngineObject *self, PyObject *room);
PyObject *engine_unwatch(EngineObject *self, PyObject *room);
PyObject *engine_changed(EngineObject *self, PyObject *unused);

/* stats.c: a new kvferry.Stats, Failure, RoomStats of the library's struct
 * (NULL with a Python exception). */
PyObject *kvf_py_stats(const struct kvf_stats *st);
PyObject *kvf_py_failure(const struct kvf_failure *fl);
PyObject *kvf_py_room_stats(const struct kvf_room_stats *st);

#endif
