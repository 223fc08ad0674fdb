# shellcheck shell=bash
# Sourced by the transport scenarios of the RDMA suite (tests/rxe/run.sh
# TESTS list). Every scenario is called as
#   SCENARIO BUILD_DIR DEV0 ADDR0 DEV1 ADDR1 [ARGS...]
# (DEV1/ADDR1 equal DEV0/ADDR0 with one device), prints what it checks and
# ends with "PASS: ..." (exit 0) or "FAIL: reason" (exit 1). Every process it
# starts runs under timeout; the engines' logs are shown on failure.
set -uo pipefail
KVF_SCEN=$(basename "$0" .sh)
BUILD=${1:?build dir}
DEV0=${2:?} ADDR0=${3:?} DEV1=${4:?} ADDR1=${5:?}
shift 5
BIN=$BUILD/tests/rxe
DRIVER=$BIN/kvf_driver
FAKE=$BIN/fake_peer
BENCH=$BUILD/tools/kvferry-bench
# the tests' Python (scripts/lib.sh: KVF_PY, the virtual environment with the
# engines' releases; scripts/test.sh exports it into the guest)
PY=${KVF_PY:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd -P)/.venv/bin/python}
[ -x "$PY" ] || { echo "FAIL: no Python at $PY (KVF_PY; scripts/venv.sh makes it)"; exit 1; }
# KVF_SCEN_KEEP=DIR: the work dir (configs, the processes' .out and .log)
# goes under DIR and stays (a guest's /tmp is gone when it stops)
W=$(mktemp -d "${KVF_SCEN_KEEP:-/tmp}/kvf-$KVF_SCEN.XXXXXX")
ulimit -l unlimited 2> /dev/null || true
CHILDREN=()

note() { printf '%s: %s\n' "$KVF_SCEN" "$*"; }
fail() {
	known_bugs "$W"/*.log "$W"/*.out "$W"/*.err
	echo "FAIL: $*"
	stop_children
	exit 1
}
pass() {
	echo "PASS: $*"
	stop_children
	exit 0
}
# kill only what this scenario started, by pid
stop_children() {
	local p
	for p in "${CHILDREN[@]+"${CHILDREN[@]}"}"; do
		kill -CONT "$p" 2> /dev/null
		kill "$p" 2> /dev/null
	done
	for p in "${CHILDREN[@]+"${CHILDREN[@]}"}"; do wait "$p" 2> /dev/null; done
	CHILDREN=()
}
trap stop_children EXIT

for b in "$DRIVER" "$FAKE" "$BENCH"; do
	[ -x "$b" ] || fail "not built: $b (meson compile -C $BUILD)"
done

# gid DEV: the index of its RoCE v2 ::ffff: GID (perftest -x)
gid() { # RoCE v2 ::ffff: GID index of a device
	local f
	for f in /sys/class/infiniband/"$1"/ports/1/gids/*; do
		case $(cat "$f" 2> /dev/null) in 0000:0000:0000:0000:0000:ffff:*)
			[ "$(cat "/sys/class/infiniband/$1/ports/1/gid_attrs/types/${f##*/}" 2> /dev/null)" = "RoCE v2" ] &&
				{ echo "${f##*/}"; return; } ;;
		esac
	done
}

# conf_qps FILE: the QPs per peer a decode config asks for (its
# rdma.qps_per_peer, KVF_SCEN_RDMA included), else the default, 2
conf_qps() {
	local q
	q=$(sed -n 's/.*qps_per_peer *= *\([0-9]*\).*/\1/p' "$1")
	echo "${q:-2}"
}

# rdma_side ROLE PORT: the rdma group's keys that place a side: a prefill
# listening on DEV0 at ADDR0:PORT, a decode on DEV1 (from ADDR1) dialing it
rdma_side() {
	if [ "$1" = prefill ]; then
		echo "device = \"$DEV0\"; listen_addr = \"$ADDR0\"; listen_port = $2;"
	elif [ "$ADDR1" != "$ADDR0" ]; then
		echo "device = \"$DEV1\"; peer = \"$ADDR0:$2\"; source_addr = \"$ADDR1\";"
	else
		echo "device = \"$DEV1\"; peer = \"$ADDR0:$2\";"
	fi
}

# engine_conf FILE ID ROLE(prefill|decode) PORT [EXTRA KEYS] : a config
# for one side. prefill listens on ADDR0 (DEV0); decode connects from ADDR1
# (DEV1) to ADDR0:PORT. HB_MS/HB_MISSES/TOKEN/BOOTSTRAP_S override;
# KVF_SCEN_RDMA adds keys to the rdma group (e.g. "qp_timeout = 14;").
engine_conf() {
	local f=$1 id=$2 role=$3 port=$4 extra=${5:-} side
	side=$(rdma_side "$role" "$port")
	cat > "$f" <<CONF
log: { level = "info"; };
engine: { id = "$id"; max_blocks_per_room = 4096; summary_interval_s = 0; };
deadlines: { bootstrap_s = ${BOOTSTRAP_S:-120}; inflight_s = 120; receiver_waiting_s = 120; quiesce_s = 10; };
heartbeat: { interval_ms = ${HB_MS:-1000}; misses = ${HB_MISSES:-5}; };
rdma: { $side auth_token = "${TOKEN:-kvf-suite}"; sq_depth = 256; rq_depth = 64; signal_every = 16; $extra ${KVF_SCEN_RDMA:-} };
CONF
}

# wait_file PATH SECONDS
# (wall clock: in a TCG guest each loop turn costs more than its sleep)
wait_file() {
	local end=$((SECONDS + $2))
	while [ $SECONDS -lt $end ]; do
		[ -e "$1" ] && return 0
		sleep 0.1
	done
	[ -e "$1" ]
}

# wait_lines FILE REGEX COUNT SECONDS : until FILE has COUNT lines matching
wait_lines() {
	local end=$((SECONDS + $4))
	while [ $SECONDS -lt $end ]; do
		[ "$(grep -cE "$2" "$1" 2> /dev/null)" -ge "$3" ] && return 0
		sleep 0.2
	done
	return 1
}

# field LINE KEY : value of key=value in a driver line
field() { sed -n "s/.* $2=\([^ ]*\).*/\1/p" <<< "$1" | head -n1; }

# summary FILE KEY : from the "driver: role=..." summary line
summary() { field "$(grep '^driver: role=.* rooms=' "$1" | tail -n1)" "$2"; }

# show the tail of logs (for the reader of a failed test)
show() {
	local f
	for f in "$@"; do
		echo "----- $f (last ${SHOW_LINES:-25} lines)"
		tail -n "${SHOW_LINES:-25}" "$f" 2> /dev/null
	done
}

# fgt A B : A > B (floats)
fgt() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a + 0 > b + 0) }'; }
now() { "$DRIVER" --now; }

# The sender rooms a driver listed in FILE after their peer was SIGKILLed at
# TK: one that ended after TK must be SUCCESS, or FAILED peer_lost within
# LIMIT seconds; none may be left live past BOOTSTRAPPING. Prints a line per
# room that is not so (nothing: all as expected).
rooms_after_kill() {
	awk -v tk="$2" -v lim="$3" '
		/^room / {
			t = 0; r = ""
			for (i = 1; i <= NF; i++) {
				if ($i ~ /^t=/) t = substr($i, 3) + 0
				if ($i ~ /^reason=/) r = substr($i, 8)
			}
			if ($0 ~ / STUCK /) { if ($0 !~ /state=BOOTSTRAPPING/) print "still live: " $0; next }
			if (t < tk || $4 == "SUCCESS") next
			if (r != "peer_lost") { print "other failure: " $0; next }
			if (t - tk > lim) print "late (" t - tk " s): " $0
		}' "$1"
}

# known_bugs LOG... : name a fixed kvferry bug whose signature is back in a
# log, so a failure caused by its return says so (printed before FAIL)
known_bugs() {
	if grep -q 'nothing heard for 1844674407' "$@" 2> /dev/null; then
		echo "NOTE: REGRESSION (src/rdma/poller.c check_conn): a connection's age went negative and" \
			"wrapped, so a fresh connection was torn down at once ('nothing heard for 18446744073709 ms')"
		grep -h 'nothing heard for 1844674407' "$@" 2> /dev/null | head -n 2
	fi
}
