import type { Kysely, Selectable } from 'kysely';
import type { Token } from '../domain/records.js';
import type { Database, TokensTable } from './schema.js';

function toToken(row: Selectable<TokensTable>): Token {
  return {
    id: row.id,
    accountId: row.account_id,
    apiKeyId: row.api_key_id,
    creationDate: row.creation_date,
    expirationDate: row.expiration_date,
  };
}

export class TokenRepository {
  constructor(private readonly db: Kysely<Database>) {}

  async insert(token: Token): Promise<void> {
    await this.db
      .insertInto('tokens')
      .values({
        id: token.id,
        account_id: token.accountId,
        api_key_id: token.apiKeyId,
        creation_date: token.creationDate,
        expiration_date: token.expirationDate,
      })
      .execute();
  }

  async find(id: string): Promise<Token | null> {
    const row = await this.db
      .selectFrom('tokens')
      .selectAll()
      .where('id', '=', id)
      .executeTakeFirst();
    return row ? toToken(row) : null;
  }

  async list(accountId?: string): Promise<Token[]> {
    let query = this.db.selectFrom('tokens').selectAll().orderBy('creation_date');
    if (accountId !== undefined) query = query.where('account_id', '=', accountId);
    return (await query.execute()).map(toToken);
  }

  /**
   * The account's tokens unexpired at `now` (ISO), newest first, after `before` in that order:
   * a tuple compared with a shorter id sorts before every id that starts with it.
   */
  async pageForAccount(
    accountId: string,
    now: string,
    before: { creationDate: string; id: string } | null,
    limit: number,
  ): Promise<Token[]> {
    let select = this.db
      .selectFrom('tokens')
      .selectAll()
      .where('account_id', '=', accountId)
      .where('expiration_date', '>', now);
    if (before !== null) {
      select = select.where((eb) =>
        eb(eb.refTuple('creation_date', 'id'), '<', eb.tuple(before.creationDate, before.id)),
      );
    }
    const rows = await select
      .orderBy('creation_date', 'desc')
      .orderBy('id', 'desc')
      .limit(limit)
      .execute();
    return rows.map(toToken);
  }

  /** Up to `limit` of the account's tokens whose id starts with `prefix` (hex digits only). */
  async findByPrefix(accountId: string, prefix: string, limit: number): Promise<Token[]> {
    const rows = await this.db
      .selectFrom('tokens')
      .selectAll()
      .where('account_id', '=', accountId)
      .where((eb) => eb.fn('substr', ['id', eb.lit(1), eb.lit(prefix.length)]), '=', prefix)
      .limit(limit)
      .execute();
    return rows.map(toToken);
  }

  /** False when the account has no such token. Deleted tokens are gone: a later use is a 401. */
  async delete(accountId: string, id: string): Promise<boolean> {
    const result = await this.db
      .deleteFrom('tokens')
      .where('id', '=', id)
      .where('account_id', '=', accountId)
      .executeTakeFirst();
    return result.numDeletedRows > 0n;
  }

  /** Removes every token made from the key; returns how many there were. */
  async deleteForKey(apiKeyId: string): Promise<number> {
    const result = await this.db
      .deleteFrom('tokens')
      .where('api_key_id', '=', apiKeyId)
      .executeTakeFirst();
    return Number(result.numDeletedRows);
  }

  /** Removes tokens that expired before `now`. */
  async deleteExpired(now: string): Promise<number> {
    const result = await this.db
      .deleteFrom('tokens')
      .where('expiration_date', '<', now)
      .executeTakeFirst();
    return Number(result.numDeletedRows);
  }
}
