/**
 * What PostgreSQL can tell about a peer's storage, asked through the peer's own connection
 * (`query(text, values)` resolving to rows): the bytes of every table of its schema with their
 * indexes and TOAST, and how much WAL the server has written.
 */

/**
 * Bytes on disk of every table of `schema` (partitions included, partitioned parents hold none),
 * as the files stand: no VACUUM or CHECKPOINT first. heap is pg_table_size (the table's main,
 * free-space and visibility-map forks and its TOAST), indexes pg_indexes_size, total their sum
 * (pg_total_relation_size).
 */
export async function schemaBytes(query, schema) {
  const rows = await query(
    `select c.relname as name,
            pg_table_size(c.oid)::bigint as heap,
            pg_indexes_size(c.oid)::bigint as indexes,
            pg_total_relation_size(c.oid)::bigint as total,
            c.reltuples::bigint as estimated_rows
       from pg_class c join pg_namespace n on n.oid = c.relnamespace
      where n.nspname = $1 and c.relkind in ('r', 'm')
      order by total desc`,
    [schema],
  );
  const sum = (key) => rows.reduce((bytes, row) => bytes + Number(row[key]), 0);
  return {
    schema,
    heapBytes: sum('heap'),
    indexBytes: sum('indexes'),
    totalBytes: sum('total'),
    // The largest tables by name, for the report: where the bytes are.
    largest: rows.slice(0, 4).map((row) => ({ table: row.name, bytes: Number(row.total) })),
  };
}

/** Bytes of WAL the server has written since it was made. */
export async function walBytes(query) {
  const [row] = await query(`select pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::bigint as wal`);
  return Number(row.wal);
}
