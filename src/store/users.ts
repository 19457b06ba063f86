import type { Kysely } from 'kysely';
import type { User } from '../domain/records.js';
import type { Database } from './schema.js';

export class UserRepository {
  constructor(private readonly db: Kysely<Database>) {}

  async insert(user: User): Promise<void> {
    await this.db
      .insertInto('users')
      .values({
        account_id: user.accountId,
        email: user.email,
        creation_date: user.creationDate,
        last_login_date: user.lastLoginDate,
      })
      .execute();
  }

  async list(accountId: string): Promise<User[]> {
    const rows = await this.db
      .selectFrom('users')
      .selectAll()
      .where('account_id', '=', accountId)
      .orderBy('email')
      .execute();
    return rows.map((row) => ({
      accountId: row.account_id,
      email: row.email,
      creationDate: row.creation_date,
      lastLoginDate: row.last_login_date,
    }));
  }
}
