#!/usr/bin/env bash
# test_probe.sh - `tether probe` against a local port: the attempt count of
# the outcome (race, sequential; one host, a refused host first, all
# refused), the same count in --json, and no password in the output. The
# server is a stand-in written in Perl that speaks the start of the
# PostgreSQL protocol (no TLS, trust authentication, ready for queries), so
# no PostgreSQL is needed; a refused port is one nothing listens on.
set -euo pipefail
bin=${1:?usage: test_probe.sh TETHER_BINARY}
here=$(cd "$(dirname "$0")" && pwd)
fail() { echo "FAIL: $*" >&2; exit 1; }
check() { echo "check: $*"; }

tmp=$(mktemp -d)
srv=
cleanup() {
  [ -z "$srv" ] || kill "$srv" 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT

# The stand-in server: listens on a loopback port it picks, writes the port
# to $tmp/port, and answers every connection: 'N' to an SSL or GSS request,
# then to the startup message AuthenticationOk, a few ParameterStatus
# (in_hot_standby off: a primary), BackendKeyData and ReadyForQuery; it
# then reads until the client leaves.
perl -MIO::Socket::INET -e '
  my $l = IO::Socket::INET->new(LocalAddr => "127.0.0.1", LocalPort => 0,
                                Listen => 16, ReuseAddr => 1) or die "listen: $!";
  open(my $f, ">", "$ARGV[0].tmp") or die; print $f $l->sockport, "\n"; close $f;
  rename("$ARGV[0].tmp", $ARGV[0]);
  sub msg { my ($t, $b) = @_; return $t . pack("N", 4 + length $b) . $b }
  sub ps { return msg("S", "$_[0]\0$_[1]\0") }
  while (my $c = $l->accept) {
    binmode $c;
    while (1) {
      my $h; last unless read($c, $h, 8) == 8;
      my ($len, $code) = unpack("NN", $h);
      if ($code == 80877103 || $code == 80877104) { print $c "N"; $c->flush; next }
      my $rest; read($c, $rest, $len - 8) if $len > 8;
      print $c msg("R", pack("N", 0)), ps("server_version", "16.0"),
        ps("in_hot_standby", "off"), ps("client_encoding", "UTF8"),
        ps("server_encoding", "UTF8"), ps("standard_conforming_strings", "on"),
        ps("integer_datetimes", "on"), ps("DateStyle", "ISO, MDY"),
        msg("K", pack("NN", $$, 42)), msg("Z", "I");
      $c->flush;
      my $buf; 1 while read($c, $buf, 4096);
      last;
    }
    close $c;
  }' "$tmp/port" &
srv=$!
for _ in $(seq 100); do [ -s "$tmp/port" ] && break; sleep 0.05; done
live=$(cat "$tmp/port" 2>/dev/null) || fail "the stand-in server did not start"
dead=$(bash "$here/../../scripts/free-port" "$live")
echo "server on 127.0.0.1:$live; nothing on $dead"

base="user=probe dbname=probe password=s3cret sslmode=disable gssencmode=disable"

# probe_outcome N CONNINFO: the human outcome line says N attempts, and
# --json's outcome says the same N and the events name attempts 1..N.
probe_outcome() {
  local want=$1 ci=$2 out rc word=attempts last
  [ "$want" -eq 1 ] && word=attempt
  set +e
  out=$("$bin" probe "$ci" 2>&1); rc=$?
  set -e
  echo "$out" | sed 's/^/    /'
  grep -q "s3cret" <<<"$out" && fail "the password is shown: $out"
  last=$(tail -1 <<<"$out")
  case "$3" in
  ok) [ $rc -eq 0 ] && [[ $last == "connected after $want $word, "* ]] ||
        fail "want 'connected after $want $word', rc 0; got rc $rc: $last" ;;
  fail) [ $rc -eq 1 ] && [[ $last == "failed after $want $word, "* ]] ||
        fail "want 'failed after $want $word', rc 1; got rc $rc: $last" ;;
  esac
  set +e
  out=$("$bin" probe --json "$ci" 2>&1)
  set -e
  grep -q "s3cret" <<<"$out" && fail "the password is shown in --json: $out"
  tail -1 <<<"$out" | grep -q "^{\"outcome\":\"$3\",\"attempts\":$want," ||
    fail "--json outcome: want $3 after $want: $(tail -1 <<<"$out")"
}

check "race, one live host: connected after 1 attempt (not 0)"
probe_outcome 1 "host=127.0.0.1 port=$live $base tether_strategy=race" ok

check "race, a refused host first: connected after 2 attempts"
probe_outcome 2 "host=127.0.0.1,127.0.0.1 port=$dead,$live $base tether_strategy=race" ok

check "sequential, the same hosts: connected after 2 attempts"
probe_outcome 2 "host=127.0.0.1,127.0.0.1 port=$dead,$live $base tether_strategy=sequential" ok

check "race, every host refused (one pass: 2 s login timeout, 5 s pause)"
probe_outcome 2 "host=127.0.0.1,127.0.0.1 port=$dead,$dead $base tether_strategy=race tether_login_timeout=2s tether_pause='fixed base=5s jitter=none'" fail

echo "test_probe: all checks passed"
