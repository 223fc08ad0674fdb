/*
 * The rail's shared queues (docs/design.md, "Frames: per rail, not per
 * peer"), checked with spin (tests/model/run.sh). Two models in one file,
 * chosen at compile time (their product would only multiply states):
 *
 *  (a) default: the shared receive queue (src/rdma/frames.c) and its one
 *      receive CQ, fed by the peers of NPEER connections. Asserts: the
 *      receive CQ never overruns; no frame is lost (each peer's frames all
 *      reach the poller, every frame of the SRQ is posted, in the CQ or in
 *      the poller's hands); a sender finding no posted frame waits (RNR).
 *  (b) -DSEND_CQ: one shared send CQ (src/rdma/sendcq.c) serving SLOTS
 *      connections at a time, NCONN over its life, each torn down at any
 *      moment. Asserts: the CQ never overruns; a connection's QP is empty
 *      when it is destroyed (its drain marker came last).
 *
 * Numbers are small stand-ins: STEP for rdma.rq_depth (256), SRQMAX for
 * rdma.srq_depth, CAP for KVF_SENDCQ_PER_CONN (64), SIGMAX for the sendq's
 * sig_max (60), CREDITS for rdma.sq_depth (1024). Time is abstracted: any
 * step may come at any moment. Mutants (run.sh checks each is caught):
 * MUTANT_RX_CQ_SMALL, MUTANT_SLOT_EARLY, MUTANT_NO_SIG_CAP.
 */
#ifndef SEND_CQ
/* ------------------------------------------ (a) the shared receive queue */
#define NPEER 3   /* connections on the rail whose peers send frames */
#define NSEND 3   /* frames each peer sends (a bounded flood) */
#define STEP 4    /* rdma.rq_depth: frames a chunk (add_chunk) */
#define SRQMAX 8  /* rdma.srq_depth: a whole number of chunks (size_rx) */
#define BATCH 2   /* frames the poller holds at once (ibv_poll_cq's batch) */
#ifdef MUTANT_RX_CQ_SMALL
#define RXCQ STEP   /* sized for the first chunk only */
#else
#define RXCQ SRQMAX /* open_rx: ibv_create_cq(t->rx.max) */
#endif

chan rxcq = [SRQMAX] of { byte }; /* completions, naming the sender (qp_num) */
byte total = STEP;    /* kvf_frames_rx_count: frames the SRQ has */
byte posted = STEP;   /* of those, posted and not consumed */
byte held = 0;        /* taken from the CQ, being handled (on_shared_recv) */
byte limit = STEP / 4; /* arm_limit: the SRQ limit armed, 0 none */
bool low = false;     /* IBV_EVENT_SRQ_LIMIT_REACHED read (rx.low) */
bool rnr = false;     /* some sender was told RNR at least once */
byte got[NPEER];      /* frames the poller handed to each connection */

/* The peer's NIC sends its next frame: it takes a posted receive, or is
 * NAKed (RNR) and retries (rdma.rnr_retry 7: for ever): it waits, it is
 * not lost. One at a time per QP: RC delivers in order, so a frame NAKed
 * holds those behind it. */
proctype Peer(byte id)
{
	byte n = 0;

	do
	:: n < NSEND ->
		if
		:: atomic { posted > 0 ->
			posted--;
			assert(len(rxcq) < RXCQ); /* the receive CQ never overruns */
			rxcq!id;
			n++;
			/* the device fires the limit once, then disarms it */
			if
			:: limit > 0 && posted < limit -> low = true; limit = 0
			:: else -> skip
			fi }
		:: atomic { posted == 0 -> rnr = true } /* RNR NAK: retried */
		fi
	:: n == NSEND -> break
	od
}

/* The poller (src/rdma/poller.c): poll_rx takes up to BATCH completions,
 * on_shared_recv hands each to its connection and reposts its frame at
 * once (kvf_frames_repost), whoever it was for (a stray's too: the same
 * count); housekeeping reads the limit event and grows the SRQ by a chunk
 * up to SRQMAX, then re-arms it at a quarter (kvf_frames_on_limit). */
proctype Poller()
{
	byte id;

end:	do
	:: atomic { held < BATCH && nempty(rxcq) -> rxcq?id; got[id]++; held++ }
	:: atomic { held > 0 -> held--; posted++ }
	:: atomic { low ->
		low = false;
		if
		:: total + STEP <= SRQMAX -> total = total + STEP; posted = posted + STEP
		:: else -> skip /* at its most: senders wait (RNR) */
		fi;
		limit = total / 4 }
	od
}

/* Every frame of the SRQ is somewhere: posted, in the CQ, or handled. */
active proctype Conserved()
{
end:	atomic { posted + len(rxcq) + held != total -> assert(false) }
}

init
{
	byte i;

	atomic {
		for (i : 0 .. NPEER - 1) { run Peer(i) }
		run Poller()
	}
	timeout ->
	for (i : 0 .. NPEER - 1) { assert(got[i] == NSEND) } /* none lost */
	assert(posted == total && held == 0 && empty(rxcq))
}

#else
/* ----------------------------------------------- (b) a shared send CQ */
#define NCONN 3   /* connections over the CQ's life */
#define SLOTS 2   /* connections it serves at once: per_cq */
#define CAP 3     /* KVF_SENDCQ_PER_CONN: signaled WRs a connection may have out */
#define SIGMAX (CAP - 2) /* sig_max: CAP less the poller's own (conn.c) */
#define CREDITS 3 /* the sendq's credits (rdma.sq_depth): what bounds it without sig_max */
#define CQSIZE (SLOTS * CAP) /* add_cq: per_cq * KVF_SENDCQ_PER_CONN entries */

/* The poller's own signaled sends, here the keepalive (one in flight at
 * most) and the drain marker; its two AUTH frames are like the keepalive
 * (before ESTABLISHED, counted in the four) and left out. */
mtype = { WR, KA, MARKER };

chan cq = [CQSIZE + CAP] of { byte, mtype }; /* past CQSIZE only to assert */
chan qp[NCONN] = [CREDITS + 2] of { mtype }; /* posted, not completed yet */
byte users = 0;       /* kvf_send_cq.users */
byte sig[NCONN];      /* kvf_sendq_sig_inflight: the scheduler's */
bool ka[NCONN];       /* a keepalive in flight */
bool drained[NCONN];  /* sq_drained: its drain marker's completion polled */

proctype Conn(byte i)
{
	bool up = false, marked = false;
	mtype k;

	atomic { users < SLOTS -> users++; up = true } /* kvf_sendcq_take */
end:	do
	/* the scheduler posts a frame or a chain ending signaled:
	 * kvf_sendq_credits is 0 while sig_max are in flight */
#ifdef MUTANT_NO_SIG_CAP
	:: atomic { up && sig[i] < CREDITS -> qp[i]!WR; sig[i]++ }
#else
	:: atomic { up && sig[i] < SIGMAX -> qp[i]!WR; sig[i]++ }
#endif
	/* the poller's keepalive (kvf_keepalive_tick: established only) */
	:: atomic { up && !ka[i] -> qp[i]!KA; ka[i] = true }
	/* the NIC completes the oldest WR, or flushes it once in error */
	:: atomic { nempty(qp[i]) -> qp[i]?k; assert(len(cq) < CQSIZE); cq!i,k }
	/* teardown at any moment (idle close, peer lost): QP to error, the
	 * scheduler retires it (sched_done) and posts nothing more */
	:: atomic { up -> up = false
#ifdef MUTANT_SLOT_EARLY
		; users-- /* the slot given back before the marker was polled */
#endif
		}
	/* drained(): after sched_done the poller posts the drain marker, the
	 * last WR this QP ever gets */
	:: atomic { !up && !marked -> qp[i]!MARKER; marked = true }
	/* its completion polled: the QP is destroyed, then the slot goes
	 * back (kvf_conn_destroy) for a new connection to take */
	:: atomic { drained[i] ->
		assert(empty(qp[i]));
#ifndef MUTANT_SLOT_EARLY
		users--;
#endif
		break }
	od
}

/* poll_tx/on_shared_send: every completion, in CQ order, to its
 * connection by qp_num; the scheduler hears a WR's (its sig_inflight
 * falls: here at once, the earliest it could) */
proctype Poller()
{
	byte c;
	mtype k;

end:	do
	:: atomic { cq?c,k ->
		if
		:: k == WR -> sig[c]--
		:: k == KA -> ka[c] = false
		:: k == MARKER -> drained[c] = true
		fi }
	od
}

init
{
	byte i;

	atomic {
		for (i : 0 .. NCONN - 1) { run Conn(i) }
		run Poller()
	}
	timeout ->
	assert(users == 0 && empty(cq));
	for (i : 0 .. NCONN - 1) { assert(drained[i]) }
}
#endif
