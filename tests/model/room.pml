/*
 * kvferry's room protocol, one room: a sender (prefill) and a receiver
 * (decode) over one RC connection, checked with spin (tests/model/run.sh).
 *
 * What it checks, over every interleaving, with deadlines and local aborts
 * allowed to fire at any moment on either side:
 *  - no RDMA WRITE lands in the receiver's blocks after the receiver handed
 *    them back (kvf_release returned 0): the quiescence rule;
 *  - nothing gets stuck: when no step is possible, both rooms are terminal,
 *    both released, and no write is outstanding.
 *
 * It mirrors src/engine/room.c: a sender ABORTs only once its writes drained (so
 * that ABORT doubles as the ACK); it acknowledges a receiver's ABORT only
 * once drained; a receiver that told the sender about the room waits for
 * ACK or ABORT, or tears the connection down at its quiesce deadline; after
 * release, an ABORT for the unknown room is acknowledged at once (tombstone)
 * and a ROOM_INFO for it is answered with ABORT (parked info expiring).
 *
 * MUTANT_* macros break rules; run.sh checks that spin then finds a
 * violation, so the model is known to be able to fail. Some rules back each
 * other up on one RC queue pair (a frame posted after the writes arrives
 * after them), so some mutants are only caught in pairs.
 */

mtype = { ROOM_INFO, WRITE, WRITE_IMM, ABORT, ACK };

chan r2s = [4] of { mtype }; /* decode -> prefill, in order (RC) */
chan s2r = [4] of { mtype }; /* prefill -> decode, in order (RC) */

#define BOOT 1
#define WAIT 2
#define XFER 3
#define OK 4
#define FAILED 5
#define RELEASED 6
#define terminal(st) (st == OK || st == FAILED || st == RELEASED)

byte s_st = BOOT;
byte r_st = BOOT;
byte inflight = 0;   /* sender's writes not landed or flushed, queued included */
byte queued = 0;     /* of those, still in the transport's send queue (not posted) */
bool torn = false;   /* QPs in error: nothing more is delivered */
bool r_quiet = false;

/* Teardown: both QPs to error. What is in flight never lands; the
 * sender's posted writes complete with flush errors. */
inline teardown()
{
	atomic {
		torn = true;
		do
		:: s2r?_
		:: r2s?_
		:: empty(s2r) && empty(r2s) -> break
		od;
		inflight = 0;
		queued = 0
	}
}

/* cancel_writes: drop what was never posted */
inline cancel()
{
#ifndef MUTANT_NO_CANCEL
	inflight = inflight - queued;
	queued = 0
#else
	skip
#endif
}

proctype Sender()
{
	bool info = false, owe_ack = false, owe_abort = false;

end:	do
	/* ROOM_INFO: the receiver's blocks are known */
	:: atomic { r2s?[ROOM_INFO] && s_st == BOOT -> r2s?ROOM_INFO; info = true; s_st = WAIT }
	/* ... for a room that already failed or is gone: tell it */
	:: atomic { r2s?[ROOM_INFO] && s_st != BOOT -> r2s?ROOM_INFO; s2r!ABORT }
	/* kvf_sender_send: two writes, the last with the immediate; they may
	 * wait in the transport's queue for send-queue credits */
	:: atomic { s_st == WAIT && !torn -> inflight = 2; queued = 2; s_st = XFER }
	/* the transport posts a queued write (frames do not wait behind them) */
	:: atomic { queued > 0 && !torn ->
		if
		:: queued == 2 -> s2r!WRITE
		:: queued == 1 -> s2r!WRITE_IMM
		fi;
		queued-- }
	:: atomic { s_st == XFER && inflight == 0 && !torn -> s_st = OK }
	/* the receiver's ABORT: fail, acknowledge once drained */
	:: atomic { r2s?[ABORT] && s_st < RELEASED ->
		r2s?ABORT;
		if
		:: !terminal(s_st) -> s_st = FAILED; cancel()
		:: else -> skip
		fi;
		owe_ack = true }
	/* ... for a room already released: nothing of it is posted */
	:: atomic { r2s?[ABORT] && s_st == RELEASED -> r2s?ABORT; s2r!ACK }
	/* deadline or local abort, at any moment */
	:: atomic { !terminal(s_st) -> s_st = FAILED; owe_abort = info; cancel() }
	/* drained: send what is owed */
#ifdef MUTANT_EARLY_ACK
	:: atomic { terminal(s_st) && s_st != RELEASED && (owe_ack || owe_abort) ->
#else
	:: atomic { terminal(s_st) && s_st != RELEASED && inflight == 0 && (owe_ack || owe_abort) ->
#endif
		if
		:: !torn && owe_ack -> s2r!ACK
		:: !torn && !owe_ack -> s2r!ABORT
		:: torn -> skip
		fi;
		owe_ack = false; owe_abort = false }
	/* peer lost */
	:: atomic { torn && !terminal(s_st) -> s_st = FAILED; owe_ack = false; owe_abort = false }
	/* kvf_release: terminal and quiescent */
#ifdef MUTANT_RELEASE_UNDRAINED
	:: atomic { terminal(s_st) && s_st != RELEASED && !owe_ack && !owe_abort ->
#else
	:: atomic { terminal(s_st) && s_st != RELEASED && inflight == 0 && !owe_ack && !owe_abort ->
#endif
		s_st = RELEASED }
	od
}

proctype Receiver()
{
	bool told = false;

end:	do
	/* kvf_receiver_init: ROOM_INFO out */
	:: atomic { r_st == BOOT && !torn -> r2s!ROOM_INFO; told = true; r_st = WAIT }
	/* a write lands: never after release */
	/* a write lands: never in blocks the receiver handed back, never
	 * from source blocks the sender handed back */
	:: atomic { s2r?[WRITE] -> s2r?WRITE; assert(r_st != RELEASED && s_st != RELEASED); inflight-- }
	/* the last write lands: SUCCESS, or quiescent if already failed */
	:: atomic { s2r?[WRITE_IMM] ->
		s2r?WRITE_IMM;
		assert(r_st != RELEASED && s_st != RELEASED);
		inflight--;
		if
		:: r_st == WAIT -> r_st = OK
		:: else -> skip
		fi;
		r_quiet = true }
	/* the sender's ABORT: it had drained, so it is the ACK too */
	:: atomic { s2r?[ABORT] ->
		s2r?ABORT;
		if
		:: !terminal(r_st) -> r_st = FAILED
		:: else -> skip
		fi;
		r_quiet = true }
	:: atomic { s2r?[ACK] -> s2r?ACK; r_quiet = true }
	/* deadline or local abort: tell the sender if it knows of the room */
	:: atomic { !terminal(r_st) ->
		r_st = FAILED;
		if
		:: told && !torn -> r2s!ABORT
#ifdef MUTANT_NO_ACK_WAIT
			; r_quiet = true
#endif
		:: else -> r_quiet = true
		fi }
	/* quiesce deadline: no ACK came, cut the connection */
#ifdef MUTANT_NO_TEARDOWN
	:: atomic { r_st == FAILED && !r_quiet && !torn -> r_quiet = true }
#else
	:: atomic { r_st == FAILED && !r_quiet && !torn -> teardown() }
#endif
	/* peer lost */
	:: atomic { torn && !terminal(r_st) -> r_st = FAILED }
	:: atomic { torn && !r_quiet -> r_quiet = true }
	/* kvf_release */
	:: atomic { terminal(r_st) && r_st != RELEASED && r_quiet -> r_st = RELEASED }
	od
}

init
{
	atomic { run Sender(); run Receiver() }
	/* Nothing can move any more: everything must be finished. */
	timeout ->
	assert(s_st == RELEASED && r_st == RELEASED && inflight == 0)
}
