/*
 * Idle close racing new rooms on the decode (docs/design.md, "Idle
 * connections close"), checked with spin (tests/model/run.sh).
 *
 * NR rooms to one prefill peer, created at any moment. Each finds its
 * connection by the peer lookup or opens a new one; the scheduler's
 * heartbeat walk may find any connection idle (no room bound since
 * rdma.idle_close_s: time is abstracted, any idle connection may be past
 * it) and request its teardown; the poller then moves it to error and its
 * PEER_LOST fails the rooms bound to it. Nothing else tears a connection
 * down here, and rooms have no deadlines or aborts (tests/model/room.pml
 * has those): every failure here is the idle close's.
 *
 * What it checks, over every interleaving:
 *  - no room fails because of an idle close: a connection idle-closed has
 *    no room bound, and its PEER_LOST finds no room waiting on it;
 *  - nothing gets stuck: at the end every room succeeded and was released,
 *    and no connection is left open (the QP count follows the traffic).
 *
 * The scheduler is one thread (the app's calls and kvf_progress): each of
 * its steps is one atomic block. Connection ids are never reused: one
 * record per connection ever opened. MUTANT_TAKE_CLOSING: the lookup takes
 * a connection whose teardown was requested (run.sh: a room fails).
 */
#define NR 3 /* rooms (Sched and Poller spell out 3 connections) */
#define NC NR /* connections: each room may open one */

/* connection states (src/rdma/conn.h) */
#define C_NONE 0
#define C_CONNECTING 1 /* NEW..AUTH: a room's ROOM_INFO waits in its queue */
#define C_UP 2         /* ESTABLISHED */
#define C_DEAD 3       /* QP in error, PEER_LOST on the ring */
#define C_RETIRED 4    /* the scheduler let go of it (retire, sched.c) */

/* room states: ROOM_INFO sent or queued (waiting for the data), SUCCESS,
 * FAILED, released (include/kvferry/kvferry.h) */
#define R_WAIT 1
#define R_OK 2
#define R_FAILED 3
#define R_RELEASED 4

byte cst[NC];   /* connection state */
bool treq[NC];  /* teardown_req (kvf_ctrl_teardown) */
bool idle[NC];  /* idle_since_ns != 0: it had rooms, has none now */
byte bound[NC]; /* rooms listed under it (by_conn, src/engine/conn_rooms.c) */
byte nconn = 0;
byte rst[NR];
byte rconn[NR]; /* the room's connection, NC when unbound */
bool rok[NR];   /* it reached SUCCESS */

/* group_alive (sched.c): every QP of the group below DEAD, and no
 * teardown requested */
#ifdef MUTANT_TAKE_CLOSING
#define alive(c) (cst[c] == C_CONNECTING || cst[c] == C_UP)
#else
#define alive(c) ((cst[c] == C_CONNECTING || cst[c] == C_UP) && !treq[c])
#endif
/* idle_close (ops.c): established (walk_conns), idle, not closing */
#define closable(c) (cst[c] == C_UP && idle[c] && !treq[c])

/* conn_busy (src/engine/room.c relist -> op_conn_busy): the first room listed
 * under a connection clears idle_since_ns, the last one leaving sets it */
inline unbind(r)
{
	bound[rconn[r]]--;
	idle[rconn[r]] = (bound[rconn[r]] == 0);
	rconn[r] = NC
}

proctype Room(byte r)
{
	byte c = 0;

	/* kvf_receiver_init -> info_to: send_room_info finds the peer's
	 * connection (kvf_sched_find_peer) or opens one (get_or_connect),
	 * queues the ROOM_INFO on it, and the room is bound to it
	 * (kvf_room_info_sent) in the same call */
	atomic {
		do
		:: c < nconn && alive(c) -> break
		:: c < nconn && !alive(c) -> c++
		:: c == nconn -> cst[c] = C_CONNECTING; nconn++; break
		od;
		rst[r] = R_WAIT;
		rconn[r] = c;
		idle[c] = false; /* (it was false already if bound[c] > 0) */
		bound[c]++
	}
	/* the prefill's last write lands on that connection (DATA_DONE),
	 * or its PEER_LOST failed the room */
	if
	:: atomic { rst[r] == R_WAIT && cst[c] == C_UP -> rst[r] = R_OK; rok[r] = true }
	:: rst[r] == R_FAILED -> skip
	fi;
	/* kvf_release: it leaves its connection's list (FREE) */
	atomic { if :: rconn[r] < NC -> unbind(r) :: else -> skip fi; rst[r] = R_RELEASED }
}

/* The scheduler's own steps: the heartbeat walk and PEER_LOST. */
proctype Sched()
{
	byte c, r;

end:	do
	/* walk_conns -> idle_close, over every connection it holds: each
	 * idle one may or may not be past rdma.idle_close_s */
	:: atomic { closable(0) || closable(1) || closable(2) ->
		for (c : 0 .. NC - 1) {
			if
			:: closable(c) ->
				assert(bound[c] == 0); /* no room on what closes */
				treq[c] = true
			:: true -> skip
			fi
		} }
	/* on_peer_lost: every room listed under it fails (lose_room) and
	 * is unbound; the connection is retired */
	:: atomic { (cst[0] == C_DEAD || cst[1] == C_DEAD || cst[2] == C_DEAD) ->
		c = 0;
		do
		:: cst[c] == C_DEAD -> break
		:: else -> c++
		od;
		for (r : 0 .. NR - 1) {
			if
			:: rconn[r] == c && rst[r] == R_WAIT ->
				assert(false); /* a room failed by an idle close */
				rst[r] = R_FAILED; unbind(r)
			:: rconn[r] == c && rst[r] != R_WAIT -> unbind(r)
			:: else -> skip
			fi
		}
		cst[c] = C_RETIRED }
	od
}

/* The poller: a connection gets established, and a teardown requested is
 * carried out (check_conn -> kvf_conn_teardown: QP to error, PEER_LOST). */
#define POLL(c) \
	:: atomic { cst[c] == C_CONNECTING && !treq[c] -> cst[c] = C_UP } \
	:: atomic { (cst[c] == C_CONNECTING || cst[c] == C_UP) && treq[c] -> cst[c] = C_DEAD }
proctype Poller()
{
end:	do
	POLL(0)
	POLL(1)
	POLL(2)
	od
}

init
{
	byte i;

	atomic {
		for (i : 0 .. NR - 1) { rconn[i] = NC }
		for (i : 0 .. NR - 1) { run Room(i) }
		run Sched();
		run Poller()
	}
	timeout ->
	for (i : 0 .. NR - 1) { assert(rst[i] == R_RELEASED && rok[i]) }
	for (i : 0 .. NC - 1) { assert(cst[i] == C_NONE || cst[i] == C_RETIRED) }
}
