import type { Kysely, Selectable } from 'kysely';
import type { Account } from './records.js';
import type { AccountsTable, Database } from './schema.js';

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

  async list(): Promise<Account[]> {
    const rows = await this.db
      .selectFrom('accounts')
      .selectAll()
      .orderBy('creation_date')
      .execute();
    return rows.map(toAccount);
  }
}
