#!/usr/bin/env bash
# Observability: a stuck room explains itself (docs/troubleshooting.md).
#   metrics.sh BUILD DEV0 ADDR0 DEV1 ADDR1 stuck|load [ROOMS]
# stuck: a prefill kvf_driver runs 8 rooms, a decode kvf_driver 12 (window
#   12); once the 8 have landed the prefill is SIGSTOPped: the 4 rooms it
#   never created cannot complete and the peer no longer answers. While
#   they wait, the decode's /rooms shows them with deadlines.receiver_waiting_s
#   and its time left (receiver_waiting_s 90) and /metrics counts them; malformed and oversized
#   requests get a 4xx and the endpoint lives on; after the deadline they
#   are FAILED (deadline), the gauge is back to 0, the failure counter
#   moved, and the log says so once per room with the deadline's key.
# load: kvferry-bench, one process, ROOMS rooms (1000) with both engines'
#   endpoints on, twice: alone, then with 1,000 scrapes (/metrics, and
#   /rooms every 10th; tests/rxe/scrape, 10 ms apart) during the run. Every room ok and every byte right
#   both times; the Gb/s of both runs are printed, and the second must be
#   at least 60% of the first (a TCG guest's run-to-run noise is ~25%: two
#   runs here gave 0.057 alone and 0.074 scraped).
. "$(dirname "$0")/common.sh"
mode=${1:?stuck|load}
STAT=(python3 "$(dirname "$0")/../../../tools/kvferry-stat")

# http PORT REQUEST-TEXT OUT : the raw answer in OUT, its status printed
http() {
	local code
	# (a subshell: the server may answer and close before it read a big
	# request; the write then fails with EPIPE instead of killing us)
	trap '' PIPE
	{ exec 3<> "/dev/tcp/127.0.0.1/$1"; } 2> /dev/null || { echo 000; return; }
	printf '%b' "$2" >&3 2> /dev/null
	timeout 10 cat <&3 > "$3"
	exec 3>&-
	code=$(head -n1 "$3" | awk '{print $2}')
	echo "${code:-000}"
}
get() { http "$1" "GET $2 HTTP/1.0\r\n\r\n" "$3"; }
# metric FILE SERIES : a sample's value from a saved /metrics answer
metric() { awk -v s="$2" '$1 == s { print $2 }' "$1"; }

if [ "$mode" = load ]; then
	rooms=${2:-1000}
	DEV1=$DEV0 ADDR1=$ADDR0
	engine_conf "$W/p.conf" prefill-m prefill 18741
	engine_conf "$W/d.conf" decode-m decode 18741
	echo 'metrics: { listen_port = 19741; interval_ms = 200; };' >> "$W/p.conf"
	echo 'metrics: { listen_port = 19742; interval_ms = 200; };' >> "$W/d.conf"
	shape=(--rooms "$rooms" --buffers 64 --block-size 16384 --blocks-per-room 1 --seed 7 --json)
	run_bench() { # OUT
		timeout -k 5 250 "$BENCH" --prefill-config "$W/p.conf" --decode-config "$W/d.conf" \
			"${shape[@]}" --timeout 230 > "$1" 2> "$1.err"
	}
	gbps() { sed -n 's/.*"gbit_per_s": \([0-9.]*\).*/\1/p' <<< "$(grep '^{' "$1" | tail -n1)"; }
	okn() { sed -n 's/.*"ok": \([0-9]*\).*/\1/p' <<< "$(grep '^{' "$1" | tail -n1)"; }
	note "alone: $rooms rooms, both endpoints on"
	run_bench "$W/alone.out" || { show "$W/alone.out.err"; fail "kvferry-bench alone failed"; }
	note "with scrapes: $rooms rooms while 1,000 scrapes run"
	run_bench "$W/scraped.out" &
	bpid=$!
	CHILDREN+=("$bpid")
	# 1,000 scrapes 10 ms apart, both engines: ~15 s, well inside a run of
	# 1 GiB (~65 s at the 0.15 Gb/s of a quiet guest). At 50 ms apart the
	# scrapes took ~64 s and outlasted a fast run: the last ones found the
	# engines closed and were counted as not answered.
	timeout -k 5 240 "$BIN/scrape" 1000 10 10 19741 19742 > "$W/scrape.out"
	src=$?
	still=0
	kill -0 "$bpid" 2> /dev/null && still=1
	wait "$bpid"
	rc=$?
	CHILDREN=()
	cat "$W/scrape.out"
	[ $rc = 0 ] || { show "$W/scraped.out.err"; fail "kvferry-bench with scrapes exit $rc"; }
	a=$(gbps "$W/alone.out") s=$(gbps "$W/scraped.out")
	note "alone: $(okn "$W/alone.out") ok, $a Gb/s; with 1,000 scrapes: $(okn "$W/scraped.out") ok, $s Gb/s"
	[ "$(okn "$W/alone.out")" = "$rooms" ] && [ "$(okn "$W/scraped.out")" = "$rooms" ] ||
		fail "not every room ok"
	[ $still = 1 ] || fail "the run ended before the 1,000 scrapes did ($(cat "$W/scrape.out"))"
	[ $src = 0 ] || fail "scrape exit $src: not every scrape answered 200"
	fgt "$s" "$(awk -v a="$a" 'BEGIN { print a * 0.6 }')" || fail "with scrapes $s Gb/s < 60% of $a Gb/s"
	pass "$rooms rooms twice, all ok; $a Gb/s alone, $s Gb/s with 1,000 scrapes"
fi

# ---- stuck ------------------------------------------------------------------
HB_MS=2000 HB_MISSES=75 # silence (150 s) must outlast receiver_waiting (90 s) + quiesce (30 s)
engine_conf "$W/p.conf" prefill-s prefill 18742
engine_conf "$W/d.conf" decode-s decode 18742
# The checks below read /rooms and /metrics inside two windows: before
# the 4 rooms' receiver_waiting deadline, then between it and the quiesce
# deadline. In a loaded TCG guest the 8 rooms took up to ~30 s to land and
# two reads ~7 s apart: 40 s and 10 s windows were missed (seen twice, a
# load flake, not a wrong gauge). 90 s and 30 s leave room for both.
sed -i -e 's/receiver_waiting_s = 120/receiver_waiting_s = 90/' \
	-e 's/quiesce_s = 10/quiesce_s = 30/' "$W/d.conf"
echo 'metrics: { listen_port = 19743; interval_ms = 200; };' >> "$W/d.conf"
# one pool size on both sides: the source pattern depends on it
shape=(--buffers 4 --block-size 16384 --blocks-per-room 4 --pool-blocks 48)
timeout -k 5 260 "$DRIVER" --role prefill --config "$W/p.conf" "${shape[@]}" --rooms 8 \
	--timeout 240 --linger 240 --ready-file "$W/ready" > "$W/prefill.out" 2> "$W/prefill.log" &
ppid=$!
CHILDREN+=("$ppid")
wait_file "$W/ready" 30 || { show "$W/prefill.log"; fail "prefill not ready in 30 s"; }
timeout -k 5 260 "$DRIVER" --role decode --config "$W/d.conf" "${shape[@]}" --rooms 12 \
	--timeout 240 --linger 60 > "$W/decode.out" 2> "$W/decode.log" &
CHILDREN+=("$!")
wait_lines "$W/decode.out" ' SUCCESS ' 8 60 || { show "$W/decode.out" "$W/decode.log"; fail "8 rooms did not land"; }
pdrv=$(pgrep -P "$ppid" | head -n1) # the driver itself, not its timeout
[ -n "$pdrv" ] || fail "no prefill driver under pid $ppid"
CHILDREN+=("$pdrv")
kill -STOP "$pdrv"
note "8 rooms landed; prefill SIGSTOPped: 4 receiver rooms wait for a peer that does not answer"
sleep 1 # a snapshot after the last success (interval_ms 200)
c=$(get 19743 '/rooms?state=WAITING_FOR_INPUT&role=receiver' "$W/rooms1")
[ "$c" = 200 ] || { cat "$W/rooms1"; fail "/rooms answered $c"; }
get 19743 /metrics "$W/m1" > /dev/null
sed '1,/^\r$/d' "$W/rooms1" > "$W/rooms1.json"
python3 - "$W/rooms1.json" <<'PY' || fail "/rooms does not show the 4 waiting rooms with their deadline"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["count"] == 4, d["count"]
for r in d["rooms"]:
    dl = r["deadline"]
    assert dl["name"] == "receiver_waiting" and dl["key"] == "deadlines.receiver_waiting_s", dl
    assert 0 < dl["left_s"] <= 90, dl
    assert r["state"] == "WAITING_FOR_INPUT" and r["failure"] is None, r
print("rooms: 4 waiting, deadlines.receiver_waiting_s, left",
      ", ".join("%.1f s" % r["deadline"]["left_s"] for r in d["rooms"]))
PY
"${STAT[@]}" --url http://127.0.0.1:19743 | tee "$W/stat1.txt"
waiting=$(metric "$W/m1" 'kvferry_rooms{role="receiver",state="WAITING_FOR_INPUT"}')
f0=$(metric "$W/m1" 'kvferry_room_failures_total{role="receiver",reason="deadline"}')
[ "$waiting" = 4 ] && [ "$f0" = 0 ] || fail "/metrics: waiting $waiting (want 4), deadline failures $f0 (want 0)"
note "/metrics: $(grep -E '^kvferry_rooms\{role="receiver",state="WAITING' "$W/m1")"

# Bad requests while the rooms wait: a 4xx each, the engine unaffected.
for req in '\x01\x02 not http at all\r\n\r\n' 'POST /metrics HTTP/1.0\r\nContent-Length: 2\r\n\r\nhi' \
	"GET /$(head -c 65536 /dev/zero | tr '\0' a) HTTP/1.0\r\n\r\n" \
	"GET /metrics HTTP/1.0\r\nX: $(head -c 65536 /dev/zero | tr '\0' b)\r\n\r\n" \
	'GET /rooms?state=SIDEWAYS HTTP/1.0\r\n\r\n'; do
	c=$(http 19743 "$req" "$W/bad")
	case $c in 4??) ;; *) fail "a bad request (${req:0:30}...) answered '$c', not 4xx" ;; esac
	printf '%s: bad request %-32s -> %s\n' "$KVF_SCEN" "${req:0:30}" "$c"
done
# A request line without a space: libmicrohttpd 0.9.75 closes the
# connection without an answer (it cannot tell a method from a URL).
c=$(http 19743 'garbage\r\n\r\n' "$W/bad")
[ "$c" = 000 ] || case $c in 4??) ;; *) fail "'garbage' answered '$c'" ;; esac
note "bad request 'garbage' (no space) -> connection closed, answer '$c'"
[ "$(get 19743 /metrics "$W/m1b")" = 200 ] || fail "/metrics not 200 after the bad requests"

wait_lines "$W/decode.out" 'FAILED reason=deadline' 4 120 || { show "$W/decode.out" "$W/decode.log"; fail "the 4 rooms did not fail by their deadline"; }
note "the 4 rooms FAILED by their deadline; waiting for them to quiesce and be released"
sleep 1
# Failed, but the stopped peer cannot acknowledge: not quiescent, bounded
# now by deadlines.quiesce_s (30 s here), then the connection is torn down.
get 19743 '/rooms?state=FAILED' "$W/rooms2" > /dev/null
sed '1,/^\r$/d' "$W/rooms2" > "$W/rooms2.json"
"${STAT[@]}" --url http://127.0.0.1:19743 --state failed | tee "$W/stat2.txt"
python3 - "$W/rooms2.json" <<'PY' || fail "/rooms does not show the 4 failed rooms waiting to quiesce"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["count"] == 4, d["count"]
for r in d["rooms"]:
    f, dl = r["failure"], r["deadline"]
    assert f["reason"] == "deadline" and f["key"] == "deadlines.receiver_waiting_s", f
    assert not r["quiescent"] and dl["key"] == "deadlines.quiesce_s" and dl["left_s"] <= 30, r
PY
wait_lines "$W/decode.out" '^driver: role=decode rooms=' 1 90 || { show "$W/decode.out" "$W/decode.log"; fail "decode did not finish"; }
grep -q '^driver: role=decode .* bad_words=0 ' "$W/decode.out" ||
	{ grep '^driver:' "$W/decode.out"; fail "the 8 rooms that landed have wrong bytes"; }
sleep 1
get 19743 /metrics "$W/m2" > /dev/null
waiting=$(metric "$W/m2" 'kvferry_rooms{role="receiver",state="WAITING_FOR_INPUT"}')
f1=$(metric "$W/m2" 'kvferry_room_failures_total{role="receiver",reason="deadline"}')
e1=$(metric "$W/m2" 'kvferry_deadline_expiries_total{deadline="receiver_waiting",key="deadlines.receiver_waiting_s"}')
q1=$(metric "$W/m2" 'kvferry_deadline_expiries_total{deadline="quiesce",key="deadlines.quiesce_s"}')
grep -E '^kvferry_(rooms\{role="receiver"|rooms_inflight|rooms_unquiescent|room_failures_total\{role="receiver",reason="deadline"|deadline_expiries_total)' "$W/m2"
[ "$waiting" = 0 ] || fail "the waiting gauge is $waiting after the deadline, not 0"
u1=$(metric "$W/m2" 'kvferry_rooms_unquiescent')
[ "$u1" = 0 ] || fail "$u1 rooms still unquiescent after the driver released every room"
[ "$f1" = 4 ] && [ "$e1" = 4 ] || fail "failure counter $f1, expiries $e1 (want 4 and 4)"
[ "${q1:-0}" -ge 1 ] || fail "no quiesce deadline expired: who acknowledged for a stopped peer?"
# The transport's counters, from the decode side: 12 ROOM_INFOs sent, the
# prefill's HELLO received, the 4 ABORTs sent, heartbeats both ways.
grep -E '^kvferry_(frames_(sent|received)_total\{type="(HELLO|ROOM_INFO|ABORT|HEARTBEAT)"|completions_total|work_requests_posted_total|connections|reconnects_total)' "$W/m2"
ri=$(metric "$W/m2" 'kvferry_frames_sent_total{type="ROOM_INFO"}')
ab=$(metric "$W/m2" 'kvferry_frames_sent_total{type="ABORT"}')
he=$(metric "$W/m2" 'kvferry_frames_received_total{type="HELLO"}')
co=$(metric "$W/m2" 'kvferry_completions_total')
[ "$ri" = 12 ] && [ "$ab" = 4 ] && [ "${he:-0}" -ge 1 ] && [ "${co:-0}" -gt 0 ] ||
	fail "transport counters: ROOM_INFO sent $ri (want 12), ABORT sent $ab (want 4), HELLO received $he, completions $co"
"${STAT[@]}" --url http://127.0.0.1:19743 --summary | tee "$W/stat3.txt"
logs=$(grep -c 'FAILED: deadline receiver_waiting, set by deadlines.receiver_waiting_s; peer' "$W/decode.log")
grep -m1 'FAILED: deadline' "$W/decode.log" | sed 's/^/log: /'
grep -m1 'not quiescent after' "$W/decode.log" | sed 's/^/log: /'
grep -m1 'lost (' "$W/decode.log" | sed 's/^/log: /'
[ "$logs" = 4 ] || fail "$logs failure log lines naming the deadline key, want 4 (one per room)"
pass "4 stuck rooms shown with deadlines.receiver_waiting_s and time left, FAILED by it, quiesced by deadlines.quiesce_s; gauge back to 0, failures 0 -> 4, 4 log lines; bad requests 4xx"
