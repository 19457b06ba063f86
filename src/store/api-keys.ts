import type { Kysely, Selectable } from 'kysely';
import type { ApiKey, DetectionCategory, KeyRateLimit } from '../domain/records.js';
import type { ApiKeysTable, Database } from './schema.js';

function toApiKey(row: Selectable<ApiKeysTable>): ApiKey {
  return {
    id: row.id,
    accountId: row.account_id,
    secretHash: row.secret_hash,
    active: row.active === 1,
    tags: JSON.parse(row.tags) as string[],
    detectionCategories: JSON.parse(row.detection_categories) as DetectionCategory[],
    creationDate: row.creation_date,
    lastSeenDate: row.last_seen_date,
    rateLimit: limitOf(row.rate_limit, row.rate_burst),
    accountRateLimit: limitOf(row.account_rate_limit, row.account_rate_burst),
    resultRetention: row.result_retention === null ? null : Number(row.result_retention),
  };
}

function limitOf(rate: number | null, burst: number | null): KeyRateLimit | null {
  return rate === null || burst === null ? null : { rate, burst };
}

export class ApiKeyRepository {
  constructor(private readonly db: Kysely<Database>) {}

  async insert(key: ApiKey): Promise<void> {
    await this.db
      .insertInto('api_keys')
      .values({
        id: key.id,
        account_id: key.accountId,
        secret_hash: key.secretHash,
        active: key.active ? 1 : 0,
        tags: JSON.stringify(key.tags),
        detection_categories: JSON.stringify(key.detectionCategories),
        creation_date: key.creationDate,
        last_seen_date: key.lastSeenDate,
        rate_limit: key.rateLimit?.rate ?? null,
        rate_burst: key.rateLimit?.burst ?? null,
        account_rate_limit: key.accountRateLimit?.rate ?? null,
        account_rate_burst: key.accountRateLimit?.burst ?? null,
        result_retention: key.resultRetention ?? null,
      })
      .execute();
  }

  async find(id: string): Promise<ApiKey | null> {
    const row = await this.db
      .selectFrom('api_keys')
      .selectAll()
      .where('id', '=', id)
      .executeTakeFirst();
    return row ? toApiKey(row) : null;
  }

  async list(accountId?: string): Promise<ApiKey[]> {
    let query = this.db.selectFrom('api_keys').selectAll().orderBy('creation_date');
    if (accountId !== undefined) query = query.where('account_id', '=', accountId);
    return (await query.execute()).map(toApiKey);
  }

  async setLastSeen(id: string, date: string): Promise<void> {
    await this.db
      .updateTable('api_keys')
      .set({ last_seen_date: date })
      .where('id', '=', id)
      .execute();
  }

  /** Replaces the given fields; false when no such key exists. */
  async update(
    id: string,
    changes: {
      tags?: string[];
      detectionCategories?: DetectionCategory[];
      /** The operator's: null returns the key to the service default. */
      rateLimit?: KeyRateLimit | null;
      /** The account's own: null, none. */
      accountRateLimit?: KeyRateLimit | null;
      /** Seconds its results are kept; null: the service's default. */
      resultRetention?: number | null;
    },
  ): Promise<boolean> {
    if (Object.values(changes).every((value) => value === undefined)) {
      return (await this.find(id)) !== null;
    }
    const result = await this.db
      .updateTable('api_keys')
      .set({
        ...(changes.tags === undefined ? {} : { tags: JSON.stringify(changes.tags) }),
        ...(changes.detectionCategories === undefined
          ? {}
          : { detection_categories: JSON.stringify(changes.detectionCategories) }),
        ...(changes.resultRetention === undefined
          ? {}
          : { result_retention: changes.resultRetention }),
        ...(changes.rateLimit === undefined
          ? {}
          : {
              rate_limit: changes.rateLimit?.rate ?? null,
              rate_burst: changes.rateLimit?.burst ?? null,
            }),
        ...(changes.accountRateLimit === undefined
          ? {}
          : {
              account_rate_limit: changes.accountRateLimit?.rate ?? null,
              account_rate_burst: changes.accountRateLimit?.burst ?? null,
            }),
      })
      .where('id', '=', id)
      .executeTakeFirst();
    return result.numUpdatedRows > 0n;
  }

  /** Returns false when no such key exists. */
  async setActive(id: string, active: boolean): Promise<boolean> {
    const result = await this.db
      .updateTable('api_keys')
      .set({ active: active ? 1 : 0 })
      .where('id', '=', id)
      .executeTakeFirst();
    return result.numUpdatedRows > 0n;
  }
}
