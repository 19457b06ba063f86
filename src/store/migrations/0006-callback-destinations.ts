import type { Kysely } from 'kysely';

// biome-ignore lint/suspicious/noExplicitAny: migrations run before (and independent of) the current schema types
type AnyDb = Kysely<any>;

/** scheme://host:port of a callback URL, as the dispatcher computes it (frozen here). */
function destinationOf(url: string): string {
  try {
    const parsed = new URL(url);
    const port = parsed.port !== '' ? parsed.port : parsed.protocol === 'https:' ? '443' : '80';
    return `${parsed.protocol}//${parsed.hostname}:${port}`;
  } catch {
    return '';
  }
}

export async function up(db: AnyDb): Promise<void> {
  // Deliveries are limited and held back per destination (the receiver), not per URL.
  await db.schema
    .alterTable('callback_deliveries')
    .addColumn('destination', 'text', (c) => c.notNull().defaultTo(''))
    .execute();
  const pending = await db
    .selectFrom('callback_deliveries')
    .select(['id', 'url'])
    .where('state', '=', 'pending')
    .execute();
  for (const { id, url } of pending) {
    await db
      .updateTable('callback_deliveries')
      .set({ destination: destinationOf(url) })
      .where('id', '=', id)
      .execute();
  }
  await db.schema
    .createIndex('callback_deliveries_destination')
    .on('callback_deliveries')
    .columns(['destination', 'state', 'next_attempt_at'])
    .execute();
}

export async function down(db: AnyDb): Promise<void> {
  await db.schema.dropIndex('callback_deliveries_destination').execute();
  await db.schema.alterTable('callback_deliveries').dropColumn('destination').execute();
}
