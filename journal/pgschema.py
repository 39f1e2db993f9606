"""The PostgreSQL journal's tables and triggers (SPEC §2.6), created or upgraded
idempotently by a writer that finds them missing, disabled or of an older version.

    statements = schema_statements("campaign_7")   # run under the DDL advisory lock

What the database itself keeps, whoever connects:
- UPDATE, DELETE and TRUNCATE on `quotaledger_events` are refused, except the DELETE
  of a row the same transaction has copied to `quotaledger_quarantine` (what `repair`
  does, in one transaction under the journal's lock);
- an INSERT must extend the chain: seq = the head's + 1 (0 for the first row, with
  prev 64 zeros), prev = the head's hash, hash = SHA-256 of the line's body, and
  seq, prev, kind, goal and at as the line says. So no role that may insert can wedge
  every writer with a gap, or give SQL readers columns the line does not say;
- the trigger records the inserting role in `inserted_by` (forced: the INSERT cannot
  name someone else), so a forged but well-chained row names who wrote it. Rows from
  before the upgrade keep NULL: who wrote them is unknown.

The insert check reads the head through a SECURITY DEFINER function: a role with
INSERT but no SELECT on the table can still append (and be named), and the trigger
itself runs as the inserting role, so `current_user` is that role.
"""

from __future__ import annotations

from psycopg import sql

EVENTS_TABLE = "quotaledger_events"
CHECKPOINTS_TABLE = "quotaledger_checkpoints"
QUARANTINE_TABLE = "quotaledger_quarantine"
REFUSE_FUNCTION = "quotaledger_refuse_change"
GUARD_FUNCTION = "quotaledger_guard_change"
HEAD_FUNCTION = "quotaledger_head"
INSERT_FUNCTION = "quotaledger_check_insert"
ROW_TRIGGER = "quotaledger_events_append_only"
TRUNCATE_TRIGGER = "quotaledger_events_no_truncate"
INSERT_TRIGGER = "quotaledger_events_chain"
QUARANTINE_ROW_TRIGGER = "quotaledger_quarantine_append_only"
QUARANTINE_TRUNCATE_TRIGGER = "quotaledger_quarantine_no_truncate"
SCHEMA_VERSION = "quotaledger/pg 3: chain trigger, inserted_by, quarantine"
"""The events table's comment once this version's objects are in place: a table whose
comment differs was made by an older version (or altered) and is upgraded."""

EVENTS_TRIGGERS = (
    (ROW_TRIGGER, GUARD_FUNCTION),
    (TRUNCATE_TRIGGER, REFUSE_FUNCTION),
    (INSERT_TRIGGER, INSERT_FUNCTION),
)

CHECK_QUERY = """
SELECT current_setting('server_encoding'),
       to_regclass(format('%%I.%%I', %(schema)s::text, %(table)s::text)),
       (SELECT count(*) FROM pg_trigger t JOIN pg_proc p ON p.oid = t.tgfoid
         WHERE t.tgrelid = to_regclass(format('%%I.%%I', %(schema)s::text, %(table)s::text))
           AND t.tgenabled <> 'D'
           AND ((t.tgname = %(t0)s AND p.proname = %(f0)s)
             OR (t.tgname = %(t1)s AND p.proname = %(f1)s)
             OR (t.tgname = %(t2)s AND p.proname = %(f2)s))) = 3
       AND obj_description(to_regclass(format('%%I.%%I', %(schema)s::text, %(table)s::text)),
                           'pg_class') IS NOT DISTINCT FROM %(version)s
"""
"""The database's encoding, the events table (NULL if missing), and whether this
version's triggers are all in place and enabled."""


def check_parameters(schema: str) -> dict[str, str]:
    parameters = {"schema": schema, "table": EVENTS_TABLE, "version": SCHEMA_VERSION}
    for index, (trigger, function) in enumerate(EVENTS_TRIGGERS):
        parameters[f"t{index}"] = trigger
        parameters[f"f{index}"] = function
    return parameters


_REFUSE = """
CREATE OR REPLACE FUNCTION @refuse@() RETURNS trigger LANGUAGE plpgsql AS $f$
BEGIN
  RAISE EXCEPTION 'quotaledger journal %.% is append-only: % refused',
    TG_TABLE_SCHEMA, TG_TABLE_NAME, TG_OP USING ERRCODE = 'insufficient_privilege';
END $f$
"""

# A row may leave the journal only in the transaction that copied it to quarantine
# (xmin: the quarantine row was written by this very transaction).
_GUARD = """
CREATE OR REPLACE FUNCTION @guard@() RETURNS trigger LANGUAGE plpgsql AS $f$
BEGIN
  IF TG_OP = 'DELETE' AND EXISTS (
      SELECT 1 FROM @quarantine@ q
       WHERE q.seq = OLD.seq AND q.hash = OLD.hash
         AND q.xmin::text::bigint = txid_current() % 4294967296) THEN
    RETURN OLD;
  END IF;
  RAISE EXCEPTION 'quotaledger journal %.% is append-only: % refused',
    TG_TABLE_SCHEMA, TG_TABLE_NAME, TG_OP USING ERRCODE = 'insufficient_privilege';
END $f$
"""

# PL/pgSQL, not SQL: a session caches its plan (an SQL function plans its query on
# every call, which doubled the trigger's cost per row of an import).
_HEAD = """
CREATE OR REPLACE FUNCTION @head@(OUT seq bigint, OUT hash text)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $f$
BEGIN
  SELECT e.seq, e.hash::text INTO seq, hash FROM @events@ e ORDER BY e.seq DESC LIMIT 1;
END $f$
"""

_CHECK_INSERT = """
CREATE OR REPLACE FUNCTION @check@() RETURNS trigger LANGUAGE plpgsql AS $f$
DECLARE
  head_seq bigint;
  head_hash text;
  j jsonb;
BEGIN
  SELECT h.seq, h.hash INTO head_seq, head_hash FROM @head@() h;
  IF head_seq IS NULL THEN
    IF NEW.seq IS DISTINCT FROM 0 OR NEW.prev IS DISTINCT FROM repeat('0', 64) THEN
      RAISE EXCEPTION 'quotaledger journal %.% is empty: its first record is seq 0 with '
        'prev 0...0, not seq %', TG_TABLE_SCHEMA, TG_TABLE_NAME, NEW.seq
        USING ERRCODE = 'check_violation';
    END IF;
  ELSIF NEW.seq IS DISTINCT FROM head_seq + 1 OR NEW.prev::text IS DISTINCT FROM head_hash THEN
    RAISE EXCEPTION 'quotaledger journal %.%: record seq % refused: the head is seq % '
      '(hash %), so the next record is seq % with that prev', TG_TABLE_SCHEMA,
      TG_TABLE_NAME, NEW.seq, head_seq, head_hash, head_seq + 1
      USING ERRCODE = 'check_violation';
  END IF;
  IF right(NEW.line, 75) IS DISTINCT FROM ',"hash":"' || NEW.hash::text || '"}'
     OR encode(sha256(convert_to(left(NEW.line, -75) || '}', 'UTF8')), 'hex')
        IS DISTINCT FROM NEW.hash::text THEN
    RAISE EXCEPTION 'quotaledger journal %.%: record seq % refused: its hash is not '
      'the SHA-256 of its line', TG_TABLE_SCHEMA, TG_TABLE_NAME, NEW.seq
      USING ERRCODE = 'check_violation';
  END IF;
  j := NEW.line::jsonb;
  IF (j->>'seq')::bigint IS DISTINCT FROM NEW.seq OR j->>'prev' IS DISTINCT FROM NEW.prev::text
     OR j->>'kind' IS DISTINCT FROM NEW.kind OR j->>'goal' IS DISTINCT FROM NEW.goal
     OR (j->>'at')::timestamptz IS DISTINCT FROM NEW.at THEN
    RAISE EXCEPTION 'quotaledger journal %.%: record seq % refused: its columns disagree '
      'with its line', TG_TABLE_SCHEMA, TG_TABLE_NAME, NEW.seq
      USING ERRCODE = 'check_violation';
  END IF;
  NEW.inserted_by := current_user;
  RETURN NEW;
END $f$
"""


def schema_statements(schema: str) -> list[str]:
    """Every statement that creates or upgrades the journal in `schema`, in order;
    each is idempotent."""
    names = {
        "@schema@": sql.Identifier(schema).as_string(),
        "@events@": sql.Identifier(schema, EVENTS_TABLE).as_string(),
        "@checkpoints@": sql.Identifier(schema, CHECKPOINTS_TABLE).as_string(),
        "@quarantine@": sql.Identifier(schema, QUARANTINE_TABLE).as_string(),
        "@refuse@": sql.Identifier(schema, REFUSE_FUNCTION).as_string(),
        "@guard@": sql.Identifier(schema, GUARD_FUNCTION).as_string(),
        "@head@": sql.Identifier(schema, HEAD_FUNCTION).as_string(),
        "@check@": sql.Identifier(schema, INSERT_FUNCTION).as_string(),
    }
    statements = [
        "CREATE SCHEMA IF NOT EXISTS @schema@",
        "CREATE TABLE IF NOT EXISTS @events@ (seq bigint PRIMARY KEY,"
        " hash char(64) UNIQUE NOT NULL, prev char(64) NOT NULL, kind text, goal text,"
        " at timestamptz, line text NOT NULL, inserted_by text DEFAULT current_user)",
        # A table of the previous version: its rows keep NULL (who wrote them is unknown;
        # a default in ADD COLUMN would name the upgrading role for all of them).
        "ALTER TABLE @events@ ADD COLUMN IF NOT EXISTS inserted_by text",
        "ALTER TABLE @events@ ALTER COLUMN inserted_by SET DEFAULT current_user",
        "CREATE TABLE IF NOT EXISTS @checkpoints@ (id smallint PRIMARY KEY CHECK (id = 1),"
        " seq bigint NOT NULL, hash char(64) NOT NULL, projection_version text NOT NULL,"
        " blob bytea NOT NULL, written_at timestamptz NOT NULL DEFAULT now())",
        "CREATE TABLE IF NOT EXISTS @quarantine@ (seq bigint NOT NULL, hash char(64) NOT NULL,"
        " prev char(64) NOT NULL, kind text, goal text, at timestamptz, line text NOT NULL,"
        " inserted_by text, quarantined_at timestamptz NOT NULL DEFAULT now())",
        _REFUSE,
        _GUARD,
        _HEAD,
        _CHECK_INSERT,
        *_trigger(ROW_TRIGGER, "BEFORE UPDATE OR DELETE", "@events@", "ROW", "@guard@"),
        *_trigger(TRUNCATE_TRIGGER, "BEFORE TRUNCATE", "@events@", "STATEMENT", "@refuse@"),
        *_trigger(INSERT_TRIGGER, "BEFORE INSERT", "@events@", "ROW", "@check@"),
        *_trigger(
            QUARANTINE_ROW_TRIGGER, "BEFORE UPDATE OR DELETE", "@quarantine@", "ROW", "@refuse@"
        ),
        *_trigger(
            QUARANTINE_TRUNCATE_TRIGGER, "BEFORE TRUNCATE", "@quarantine@", "STATEMENT", "@refuse@"
        ),
        f"COMMENT ON TABLE @events@ IS {sql.Literal(SCHEMA_VERSION).as_string()}",
    ]
    result = []
    for statement in statements:
        for name, identifier in names.items():
            statement = statement.replace(name, identifier)
        result.append(statement)
    return result


def _trigger(name: str, when: str, table: str, each: str, function: str) -> list[str]:
    trigger = sql.Identifier(name).as_string()
    return [
        f"DROP TRIGGER IF EXISTS {trigger} ON {table}",
        f"CREATE TRIGGER {trigger} {when} ON {table} FOR EACH {each} EXECUTE FUNCTION {function}()",
    ]
