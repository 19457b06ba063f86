import { type Kysely, sql } from 'kysely';
import type { Database } from './schema.js';

export interface Lease {
  /** Tokens taken for the caller (0: refused). */
  granted: number;
  /** Tokens left in the shared bucket after the lease. */
  left: number;
}

/**
 * Shared token buckets: each lease is one atomic statement (no read then write), so processes
 * on one store never hand out the same token twice, nor refuse one a bucket has.
 */
export class RateBucketRepository {
  constructor(private readonly db: Kysely<Database>) {}

  /**
   * Takes `want` tokens from bucket `name` (refilling at `rate` per second up to `burst` since it
   * was last used), or 1 if fewer are left, or none. Each try is one upsert: a bucket missing is
   * a full one, and `deleteFull` (another process's, any time) may remove a full bucket between
   * two statements, which an insert followed by an update took for a refusal.
   */
  async lease(
    name: string,
    limit: { rate: number; burst: number },
    want: number,
    now: number,
  ): Promise<Lease> {
    // The bucket as it is now: its tokens plus the refill since its last use (never negative:
    // another node's clock may be a little ahead), capped at the burst. Qualified: in the upsert
    // these are the stored row's columns. Parameters are typed: PostgreSQL would otherwise infer
    // bigint from `updated_at` for them.
    const at = sql`cast(${now} as bigint)`;
    const rate = sql`cast(${limit.rate} as double precision)`;
    const burst = sql`cast(${limit.burst} as double precision)`;
    const tokens = sql.ref('rate_buckets.tokens');
    const updatedAt = sql.ref('rate_buckets.updated_at');
    const refill = sql`(case when ${at} > ${updatedAt} then ${at} - ${updatedAt} else 0 end) * ${rate} / 1000.0`;
    const refilled = sql<number>`case when ${tokens} + ${refill} > ${burst} then ${burst} else ${tokens} + ${refill} end`;
    for (const take of want > 1 ? [want, 1] : [1]) {
      if (take > limit.burst) continue;
      const row = await this.db
        .insertInto('rate_buckets')
        .values({
          name,
          tokens: limit.burst - take,
          updated_at: now,
          rate: limit.rate,
          burst: limit.burst,
        })
        .onConflict((conflict) =>
          conflict
            .column('name')
            .doUpdateSet({
              tokens: sql<number>`${refilled} - cast(${take} as double precision)`,
              updated_at: now,
              rate: limit.rate,
              burst: limit.burst,
            })
            .where(sql<boolean>`${refilled} >= cast(${take} as double precision)`),
        )
        .returning('tokens')
        .executeTakeFirst();
      if (row !== undefined) return { granted: take, left: Number(row.tokens) };
    }
    // Refused: the bucket exists and holds less than one token, so no `deleteFull` removes it.
    const row = await this.db
      .selectFrom('rate_buckets')
      .select(refilled.as('tokens'))
      .where('name', '=', name)
      .executeTakeFirst();
    return { granted: 0, left: Number(row?.tokens ?? 0) };
  }

  /**
   * Buckets under `prefix` that are empty now, with when each has a token again (ms since the
   * epoch): one indexed range read, whatever the traffic.
   */
  async emptyUnder(prefix: string, now: number): Promise<Array<{ name: string; until: number }>> {
    const rows = await this.db
      .selectFrom('rate_buckets')
      .select(['name', 'tokens', 'updated_at', 'rate'])
      .where('name', '>=', prefix)
      .where('name', '<', `${prefix}\uffff`)
      .where('tokens', '<', 1)
      .execute();
    const empty: Array<{ name: string; until: number }> = [];
    for (const row of rows) {
      if (row.rate <= 0) continue;
      const until = Number(row.updated_at) + ((1 - row.tokens) / row.rate) * 1000;
      if (until > now) empty.push({ name: row.name, until });
    }
    return empty;
  }

  /** Forgets buckets that have refilled: a full bucket and no row are the same. */
  async deleteFull(now: number): Promise<number> {
    const result = await this.db
      .deleteFrom('rate_buckets')
      .where(sql<boolean>`tokens + (cast(${now} as bigint) - updated_at) * rate / 1000.0 >= burst`)
      .executeTakeFirst();
    return Number(result.numDeletedRows);
  }
}
