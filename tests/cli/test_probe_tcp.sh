#!/usr/bin/env bash
# test_probe_tcp.sh - `tether probe --driver tcp` over several servers, each
# with several ports ("host=a,b port=p|p,p|p"): every attempt is shown in
# order against real listening and closed loopback ports, the outcome
# counts them, --json says the same, a bad port form is refused naming the
# port item, a driver keyword is refused by name (never its value), and
# --driver takes only pq or tcp. The listeners are one Perl process that
# accepts and closes, always stopped.
set -euo pipefail
bin=${1:?usage: test_probe_tcp.sh TETHER_BINARY}
here=$(cd "$(dirname "$0")" && pwd)
free_port=$here/../../scripts/free-port
fail() { echo "FAIL: $*" >&2; exit 1; }
check() { echo "check: $*"; }

tmp=$(mktemp -d)
srv=
cleanup() {
  [ -z "$srv" ] || kill "$srv" 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT

# Two listening ports on 127.0.0.1, picked by the kernel, written to
# $tmp/ports; every connection is accepted and closed.
perl -MIO::Socket::INET -MIO::Select -e '
  my @l = map { IO::Socket::INET->new(LocalAddr => "127.0.0.1", LocalPort => 0,
                Listen => 16, ReuseAddr => 1) or die "listen: $!" } 1 .. 2;
  open(my $f, ">", "$ARGV[0].tmp") or die;
  print $f join(" ", map { $_->sockport } @l), "\n"; close $f;
  rename("$ARGV[0].tmp", $ARGV[0]);
  my $s = IO::Select->new(@l);
  while (my @r = $s->can_read) { for (@r) { my $c = $_->accept; close $c if $c } }
' "$tmp/ports" &
srv=$!
for _ in $(seq 100); do [ -s "$tmp/ports" ] && break; sleep 0.05; done
read -r live1 live2 <"$tmp/ports" || fail "the listeners did not start"
dead1=$("$free_port" "$live1" "$live2")
dead2=$("$free_port" "$live1" "$live2" "$dead1")
dead3=$("$free_port" "$live1" "$live2" "$dead1" "$dead2")
echo "listening: $live1 $live2; closed: $dead1 $dead2 $dead3"

# probe ARGS...: runs tether probe, output in $out, status in $rc.
probe() {
  set +e
  out=$("$bin" probe "$@" 2>&1); rc=$?
  set -e
  echo "$out" | sed 's/^/    /'
}

# attempts_are WANT...: the attempt lines, in order, are WANT ("fail
# host:port", "ok host:port").
attempts_are() {
  local got
  got=$(sed -nE 's/^ *[0-9]+ ms  (fail|ok) +#[0-9]+ +([^ ]+)$/\1 \2/p' <<<"$out")
  [ "$got" = "$(printf '%s\n' "$@")" ] ||
    fail "attempts: got"$'\n'"$got"$'\n'"want"$'\n'"$(printf '%s\n' "$@")"
}

check "two servers, two ports each: the first server's closed ports, then the second's, up to its live port"
probe --driver tcp "host=127.0.0.1,localhost port=$dead1|$dead2,$dead3|$live2|$live1"
[ "$rc" -eq 0 ] || fail "exit status $rc, want 0"
attempts_are "fail 127.0.0.1:$dead1" "fail 127.0.0.1:$dead2" \
  "fail localhost:$dead3" "ok localhost:$live2"
grep -q "TETHER_ECONNECT, transient: connect to 127.0.0.1:$dead1: Connection refused" <<<"$out" ||
  fail "a refused port's line names the error, class and port"
[[ $(tail -1 <<<"$out") == "connected after 4 attempts, "* ]] || fail "outcome: $(tail -1 <<<"$out")"

check "one port item for every server; the first live port wins"
probe --driver tcp "host=127.0.0.1,127.0.0.1 port=$dead1|$live1"
attempts_are "fail 127.0.0.1:$dead1" "ok 127.0.0.1:$live1"

check "every port closed: each is tried in every pass until the login timeout"
probe --driver tcp "host=127.0.0.1,localhost port=$dead1|$dead2,$dead3 tether_login_timeout=1s tether_pause='fixed base=300ms jitter=none'"
[ "$rc" -eq 1 ] || fail "exit status $rc, want 1"
first=$(sed -nE 's/^ *[0-9]+ ms  fail +#[0-9]+ +([^ ]+)$/\1/p' <<<"$out" | head -3 | tr '\n' ' ')
[ "$first" = "127.0.0.1:$dead1 127.0.0.1:$dead2 localhost:$dead3 " ] || fail "first pass: $first"
grep -q "pause     300 ms" <<<"$out" || fail "no pause between passes"
n=$(grep -cE '^ *[0-9]+ ms  fail ' <<<"$out")
[ "$n" -ge 6 ] || fail "$n attempts in 1 s with 300 ms pauses, want at least two passes (6)"
[[ $(tail -1 <<<"$out") == "failed after $n attempts, "*"(transient)" ]] || fail "outcome: $(tail -1 <<<"$out")"

check "--json: one object per attempt, the outcome counts them"
probe --driver tcp --json "host=127.0.0.1 port=$dead1|$live1"
[ "$(grep -c '"phase":"fail"' <<<"$out")" -eq 1 ] || fail "--json: want one fail"
grep -q "\"host\":\"127.0.0.1\",\"port\":$live1,\"phase\":\"ok\"" <<<"$out" || fail "--json: no ok on $live1"
tail -1 <<<"$out" | grep -q '^{"outcome":"ok","attempts":2,' || fail "--json outcome"

check "a malformed port list is refused, naming the port item"
probe --driver tcp "host=127.0.0.1 port=$live1||$live2"
[ "$rc" -eq 2 ] || fail "exit status $rc, want 2"
grep -q "bad value \"$live1||$live2\" for port: want a port in \[1, 65535\], or several joined by |" <<<"$out" ||
  fail "no clear error for the port list"

check "a driver keyword is refused by name, its value never shown"
probe --driver tcp "host=127.0.0.1 port=$live1 password=s3cret"
[ "$rc" -eq 2 ] || fail "exit status $rc, want 2"
# (a build without libpq knows no libpq keyword: password is then unknown,
# and an unknown keyword is not named, as it may be part of a password)
nopq=$("$bin" probe "host=127.0.0.1 port=1 connect_timeout=1" 2>&1 || true)
if ! grep -q "built without PostgreSQL" <<<"$nopq"; then
  grep -q 'keyword "password" is not used by the tcp driver' <<<"$out" || fail "no error naming the keyword"
else
  grep -q 'unknown keyword' <<<"$out" || fail "no unknown-keyword error"
fi
grep -q s3cret <<<"$out" && fail "the password is shown"

check "--driver takes pq or tcp"
probe --driver redis "host=127.0.0.1 port=$live1"
[ "$rc" -eq 2 ] || fail "exit status $rc, want 2"
grep -q -- "--driver: want pq or tcp" <<<"$out" || fail "no usage error"

check "--help lists the connection-string keywords from the library's tables"
out=$("$bin" probe --help 2>&1) rc=$?
[ "$rc" -eq 0 ] || fail "exit status $rc, want 0"
grep -Eq '^    tether_pool_max +the most connections$' <<<"$out" || fail "no tether_pool_max line"
grep -Eq '^    tether_strategy +how the hosts are tried' <<<"$out" || fail "no tether_strategy line"
grep -q '^  read by pool:$' <<<"$out" || fail "no pool heading"

echo "test_probe_tcp: all checks passed"
