import type postgres from "postgres";

/**
 * What the `signalbox` schema of a database is, as sorted lines of text: every column (with
 * its position, type, nullability and default), constraint, index, trigger and function body.
 * Two databases with equal descriptions behave alike, whatever path of migrations built them.
 */
export async function describeSchema(sql: postgres.Sql): Promise<string[]> {
  const rows = await sql<{ line: string }[]>`
    select format('column %s.%s #%s %s%s default %s', c.relname, a.attname, a.attnum, format_type(a.atttypid, a.atttypmod),
                  case when a.attnotnull then ' not null' else '' end, coalesce(pg_get_expr(d.adbin, d.adrelid), '-')) as line
      from pg_attribute a
      join pg_class c on c.oid = a.attrelid
      join pg_namespace n on n.oid = c.relnamespace
      left join pg_attrdef d on d.adrelid = a.attrelid and d.adnum = a.attnum
     where n.nspname = 'signalbox' and c.relkind = 'r' and a.attnum > 0 and not a.attisdropped
    union all
    select format('constraint %s.%s %s', c.relname, k.conname, pg_get_constraintdef(k.oid))
      from pg_constraint k join pg_class c on c.oid = k.conrelid join pg_namespace n on n.oid = c.relnamespace
     where n.nspname = 'signalbox'
    union all
    select format('index %s', indexdef) from pg_indexes where schemaname = 'signalbox'
    union all
    select format('trigger %s', pg_get_triggerdef(t.oid))
      from pg_trigger t join pg_class c on c.oid = t.tgrelid join pg_namespace n on n.oid = c.relnamespace
     where n.nspname = 'signalbox' and not t.tgisinternal
    union all
    select format('function %s', pg_get_functiondef(p.oid))
      from pg_proc p join pg_namespace n on n.oid = p.pronamespace
     where n.nspname = 'signalbox'`;
  return rows.map((r) => r.line).sort();
}
