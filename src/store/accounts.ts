import { type Kysely, type Selectable, sql } from 'kysely';
import type { AccountSummary } from '../domain/operations.js';
import type { Account, AccountErasure } from '../domain/records.js';
import { QueryTemplate } from './query-template.js';
import type { AccountsTable, Database } from './schema.js';

// Items of accounts that do not enforce their balance are charged with their result (every item).
// Every accepted item takes one: built once.
const takeCredit = new QueryTemplate(1, (db, id: string) =>
  db
    .updateTable('accounts')
    .set((eb) => ({ balance: eb('balance', '-', 1) }))
    .where('id', '=', id)
    .where((eb) => eb.or([eb('enforce_balance', '=', 0), eb('balance', '>=', 1)])),
);
const addCredits = new QueryTemplate(2, (db, id: string, credits: number) =>
  db
    .updateTable('accounts')
    .set((eb) => ({ balance: eb('balance', '+', credits) }))
    .where('id', '=', id),
);

function toAccount(row: Selectable<AccountsTable>): Account {
  return {
    id: row.id,
    name: row.name,
    billingEmail: row.billing_email,
    subscription: row.subscription,
    balance: Number(row.balance),
    startingBalance: Number(row.starting_balance),
    enforceBalance: row.enforce_balance === 1,
    creationDate: row.creation_date,
    modificationDate: row.modification_date,
    callbackSecret: row.callback_secret,
    active: row.active === 1,
  };
}

export class AccountRepository {
  constructor(private readonly db: Kysely<Database>) {}

  async insert(account: Account): Promise<void> {
    await this.db
      .insertInto('accounts')
      .values({
        id: account.id,
        name: account.name,
        billing_email: account.billingEmail,
        subscription: account.subscription,
        balance: account.balance,
        starting_balance: account.startingBalance,
        enforce_balance: account.enforceBalance ? 1 : 0,
        creation_date: account.creationDate,
        modification_date: account.modificationDate,
        callback_secret: account.callbackSecret,
        active: account.active ? 1 : 0,
      })
      .execute();
  }

  async find(id: string): Promise<Account | null> {
    const row = await this.db
      .selectFrom('accounts')
      .selectAll()
      .where('id', '=', id)
      .executeTakeFirst();
    return row ? toAccount(row) : null;
  }

  /**
   * Gives an account without a callback secret the one given; returns the account's secret after
   * (the given one, or one another process set first), or null when the account is gone.
   */
  async fillEmptyCallbackSecret(id: string, secret: string): Promise<string | null> {
    await this.db
      .updateTable('accounts')
      .set({ callback_secret: secret })
      .where('id', '=', id)
      .where('callback_secret', '=', '')
      .execute();
    return (await this.find(id))?.callbackSecret ?? null;
  }

  /** False when there is no such account. */
  async setActive(id: string, active: boolean, modificationDate: string): Promise<boolean> {
    const result = await this.db
      .updateTable('accounts')
      .set({ active: active ? 1 : 0, modification_date: modificationDate })
      .where('id', '=', id)
      .executeTakeFirst();
    return result.numUpdatedRows > 0n;
  }

  /**
   * Removes the account and everything of it: keys, tokens, users, results, traces, jobs,
   * callbacks and watched buckets. Returns what was removed, with the spool keys of its jobs (the caller removes those
   * files once this has committed). Run it in a transaction.
   */
  async erase(id: string): Promise<AccountErasure | null> {
    if ((await this.find(id)) === null) return null;
    const jobs = await this.db
      .selectFrom('jobs')
      .select(['id', 'kind', 'stage', 'spool_key'])
      .where('account_id', '=', id)
      .execute();
    const count = (result: { numDeletedRows: bigint }[]) =>
      result.reduce((sum, r) => sum + Number(r.numDeletedRows), 0);
    const ofAccount = (table: 'files' | 'jobs') =>
      this.db.selectFrom(table).select('id').where('account_id', '=', id);
    const traceEvents = count(
      await this.db
        .deleteFrom('trace_events')
        .where((eb) =>
          eb.or([eb('file_id', 'in', ofAccount('files')), eb('file_id', 'in', ofAccount('jobs'))]),
        )
        .execute(),
    );
    const remove = async (
      table:
        | 'callback_deliveries'
        | 'jobs'
        | 'files'
        | 'tokens'
        | 'api_keys'
        | 'console_sessions'
        | 'users',
    ) => count(await this.db.deleteFrom(table).where('account_id', '=', id).execute());
    // Its users' console sessions end with them (they reference the account).
    await remove('console_sessions');
    // Its watched buckets stop being watched: their objects' rows go with them.
    await this.db
      .deleteFrom('bucket_objects')
      .where(
        'source_id',
        'in',
        this.db.selectFrom('bucket_sources').select('id').where('account_id', '=', id),
      )
      .execute();
    await this.db.deleteFrom('bucket_sources').where('account_id', '=', id).execute();
    const erasure: AccountErasure = {
      callbacks: await remove('callback_deliveries'),
      jobs: await remove('jobs'),
      results: await remove('files'),
      traceEvents,
      tokens: await remove('tokens'),
      keys: await remove('api_keys'),
      users: await remove('users'),
      spoolKeys: jobs.flatMap((job) => (job.spool_key === null ? [] : [job.spool_key])),
      downloadKeys: jobs.flatMap((job) =>
        job.kind !== 'upload' && job.stage === 'download' ? [job.id] : [],
      ),
    };
    await this.db.deleteFrom('accounts').where('id', '=', id).execute();
    return erasure;
  }

  /**
   * Takes one credit for an item being accepted: refused (false) when the account enforces its
   * balance and has none left, or is gone. One conditional update, so submissions racing in any
   * number of processes sharing the store never take more than the balance holds. An account that
   * does not enforce its balance always pays (its balance may go below zero, counting use).
   */
  async takeCredit(id: string): Promise<boolean> {
    const result = await takeCredit.execute(this.db, id);
    return (result.numAffectedRows ?? 0n) > 0n;
  }

  /** Adds `credits` to the balance (negative: takes them, unconditionally): refunds and charges. */
  async addCredits(id: string, credits: number): Promise<void> {
    await addCredits.execute(this.db, id, credits);
  }

  async update(
    id: string,
    changes: Partial<
      Pick<Account, 'name' | 'billingEmail' | 'subscription' | 'balance' | 'enforceBalance'>
    >,
    modificationDate: string,
  ): Promise<boolean> {
    const result = await this.db
      .updateTable('accounts')
      .set({
        ...(changes.name === undefined ? {} : { name: changes.name }),
        ...(changes.billingEmail === undefined ? {} : { billing_email: changes.billingEmail }),
        ...(changes.subscription === undefined ? {} : { subscription: changes.subscription }),
        ...(changes.balance === undefined ? {} : { balance: changes.balance }),
        ...(changes.enforceBalance === undefined
          ? {}
          : { enforce_balance: changes.enforceBalance ? 1 : 0 }),
        modification_date: modificationDate,
      })
      .where('id', '=', id)
      .executeTakeFirst();
    return result.numUpdatedRows > 0n;
  }

  async list(): Promise<Account[]> {
    const rows = await this.db
      .selectFrom('accounts')
      .selectAll()
      .orderBy('creation_date')
      .execute();
    return rows.map(toAccount);
  }

  /**
   * Accounts by name (then id), `limit` at most, after the account `afterId` (keyset: an index
   * seek, whatever the page), whose name contains `search` (any case) or whose id starts with it.
   * An `afterId` that no longer exists starts over from the first account.
   */
  async page(options: {
    search: string;
    afterId: string | null;
    limit: number;
  }): Promise<AccountSummary[]> {
    const after =
      options.afterId === null
        ? undefined
        : await this.db
            .selectFrom('accounts')
            .select(['name', 'id'])
            .where('id', '=', options.afterId)
            .executeTakeFirst();
    let query = this.db.selectFrom('accounts as a').select((eb) => [
      'a.id',
      'a.name',
      'a.active',
      'a.balance',
      'a.enforce_balance',
      'a.creation_date',
      // One count on the keys' account index per listed account.
      eb
        .selectFrom('api_keys as k')
        .select((k) => k.fn.countAll<number>().as('n'))
        .whereRef('k.account_id', '=', 'a.id')
        .as('key_count'),
    ]);
    if (options.search !== '') {
      const escaped = escapeLike(options.search.toLowerCase());
      const contains = `%${escaped}%`;
      // An explicit escape character: SQLite has none by default.
      query = query.where(
        sql<boolean>`(lower(a.name) like ${contains} escape '\\' or a.id like ${`${escaped}%`} escape '\\')`,
      );
    }
    if (after !== undefined) {
      query = query.where((eb) =>
        eb.or([
          eb('a.name', '>', after.name),
          eb.and([eb('a.name', '=', after.name), eb('a.id', '>', after.id)]),
        ]),
      );
    }
    const rows = await query.orderBy('a.name').orderBy('a.id').limit(options.limit).execute();
    return rows.map((row) => ({
      id: row.id,
      name: row.name,
      active: Number(row.active) === 1,
      balance: Number(row.balance),
      enforceBalance: Number(row.enforce_balance) === 1,
      creationDate: row.creation_date,
      keyCount: Number(row.key_count ?? 0),
    }));
  }
}

/** `text` for LIKE to match literally (a backslash escaping): its wildcards and escapes escaped. */
export function escapeLike(text: string): string {
  return text.replace(/[\\%_]/g, (char) => `\\${char}`);
}
