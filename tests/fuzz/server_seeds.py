#!/usr/bin/env python3
"""server_seeds.py - writes the committed seeds of fuzz_server into
corpus/server/ (see fuzz_server.c for the input layout: a flags byte, then
chunks of a 2-byte little-endian length and bytes). Run it from anywhere;
it rewrites only the files it names."""
import os
import struct

F_STARTUP, F_HANGUP, F_READY, F_RESETQ = 1, 2, 4, 8
HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus",
                    "server")


def m(t, payload=b""):
    return t.encode() + struct.pack(">I", len(payload) + 4) + payload


def param(name, val):
    return m("S", name.encode() + b"\0" + val.encode() + b"\0")


def fields(**kv):
    return b"".join(k.encode() + v.encode() + b"\0" for k, v in kv.items()) + b"\0"


def err(sev, code, text, t="E"):
    return m(t, fields(S=sev, V=sev, C=code, M=text))


def ready(st="I"):
    return m("Z", st.encode())


def startup(hs="off", ro="off"):
    return param("in_hot_standby", hs) + param("default_transaction_read_only", ro) + \
        m("K", struct.pack(">II", 1, 2)) + ready()


def row(val):
    desc = b"pg_is_in_recovery\0" + struct.pack(">IhIhih", 0, 0, 16, 1, -1, 0)
    return m("T", struct.pack(">h", 1) + desc) + \
        m("D", struct.pack(">hi", 1, len(val)) + val.encode()) + \
        m("C", b"SELECT 1\0") + ready()


def seed(flags, *chunks):
    b = bytes([flags])
    for c in chunks:
        b += struct.pack("<H", len(c)) + c
    return b


SEEDS = {
    "all-ok": seed(F_STARTUP | F_READY, b"", b"", m("I"), b"", row("f")),
    "standby": seed(0, startup("on", "on"), b"", m("I") + ready(), b"", row("t")),
    "no-role-reports": seed(0, m("K", struct.pack(">II", 1, 2)) + ready(), b"",
                            m("I") + ready(), b"", row("f")),
    "old-server-read-only": seed(0, param("default_transaction_read_only", "on") + ready(),
                                 param("default_transaction_read_only", "off"),
                                 m("I") + ready(), b"", row("t")),
    "idle-promoted": seed(F_STARTUP | F_READY, b"", param("in_hot_standby", "off"),
                          m("I"), b"", row("f")),
    "idle-demoted": seed(F_STARTUP | F_READY, b"", param("in_hot_standby", "on"),
                         m("I"), b"", row("t")),
    "idle-terminated": seed(F_STARTUP, b"",
                            err("FATAL", "57P01", "terminating connection due to administrator command")),
    "idle-crash": seed(F_STARTUP | F_HANGUP, b"",
                       err("FATAL", "57P02", "terminating connection because of crash of another server process")),
    "idle-session-timeout": seed(F_STARTUP | F_HANGUP, b"",
                                 err("FATAL", "57P05", "terminating connection due to idle-session timeout")),
    "idle-notice": seed(F_STARTUP | F_READY, b"", err("NOTICE", "00000", "hello", "N") +
                        m("A", struct.pack(">I", 7) + b"chan\0payload\0"), m("I"), b"", row("f")),
    "idle-eof": seed(F_STARTUP | F_HANGUP, b"", b""),
    "idle-garbage": seed(F_STARTUP, b"", b"\x00\x01\x02garbage"),
    "validate-error": seed(F_STARTUP, b"", b"", err("ERROR", "42601", "syntax error at or near \"password\"") + ready(),
                           b"", row("f")),
    "validate-in-txn": seed(F_STARTUP | F_RESETQ, b"", b"", m("I") + ready("T"),
                            m("C", b"ROLLBACK\0") + ready() + m("C", b"SET\0") + ready(), row("f")),
    "reset-failed-txn": seed(F_STARTUP, b"", b"", m("I") + ready("E"),
                             m("C", b"ROLLBACK\0") + ready("E"), row("f")),
    "reset-shutdown": seed(F_STARTUP | F_RESETQ, b"", b"", m("I") + ready(),
                           err("FATAL", "57P01", "terminating connection due to administrator command")),
    "copy-out": seed(F_STARTUP, b"", b"", m("H", b"\0\0\0"), b"", b""),
    "role-odd-answer": seed(F_STARTUP, b"", b"", m("I") + ready(), b"", row("maybe")),
    "role-error": seed(F_STARTUP | F_READY, b"", b"", m("I"), b"",
                       err("ERROR", "25006", "cannot execute in a read-only transaction")),
    "connect-too-many": seed(0, err("FATAL", "53300", "sorry, too many clients already")),
    "connect-starting": seed(0, err("FATAL", "57P03", "the database system is starting up")),
    "connect-no-db": seed(0, err("FATAL", "3D000", "database \"fuzz\" does not exist")),
    "connect-auth": seed(0, err("FATAL", "28P01", "password authentication failed for user \"fuzz\"")),
    "connect-eof": seed(0, param("in_hot_standby", "off")),
    "connect-bad-length": seed(0, b"S\xff\xff\xff\xff"),
    "connect-notice": seed(F_STARTUP, err("WARNING", "01000", "careful", "N")),
    "connect-long-param": seed(0, param("in_hot_standby", "offoffoffoff") + ready(),
                               param("in_hot_standby", "offoffoffoff"), m("I") + ready(), b"", row("f")),
}

os.makedirs(HERE, exist_ok=True)
for name, data in SEEDS.items():
    with open(os.path.join(HERE, name), "wb") as f:
        f.write(data)
