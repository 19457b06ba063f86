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

  /** The user who signs in with `email` (one with a password), or null. */
  async findForSignIn(
    email: string,
  ): Promise<{ accountId: string; email: string; passwordHash: string; operator: boolean } | null> {
    const row = await this.db
      .selectFrom('users')
      .select(['account_id', 'email', 'password_hash', 'operator'])
      .where('email', '=', email)
      .where('password_hash', 'is not', null)
      .executeTakeFirst();
    if (row === undefined || row.password_hash === null) return null;
    return {
      accountId: row.account_id,
      email: row.email,
      passwordHash: row.password_hash,
      operator: Number(row.operator) === 1,
    };
  }

  /** Whether the account has the user `email`, and whether they can sign in (have a password). */
  async findInAccount(accountId: string, email: string): Promise<{ signsIn: boolean } | null> {
    const row = await this.db
      .selectFrom('users')
      .select('password_hash')
      .where('account_id', '=', accountId)
      .where('email', '=', email)
      .executeTakeFirst();
    return row === undefined ? null : { signsIn: row.password_hash !== null };
  }

  /**
   * Adds the user, or gives an existing one of the account without a password a password (and
   * operator flag); false when the account's user has a password already (nothing changed).
   */
  async addWithPassword(user: User, passwordHash: string, operator: boolean): Promise<boolean> {
    const result = await this.db
      .insertInto('users')
      .values({
        account_id: user.accountId,
        email: user.email,
        creation_date: user.creationDate,
        last_login_date: user.lastLoginDate,
        password_hash: passwordHash,
        operator: operator ? 1 : 0,
      })
      .onConflict((conflict) =>
        conflict
          .columns(['account_id', 'email'])
          .doUpdateSet({ password_hash: passwordHash, operator: operator ? 1 : 0 })
          .where('users.password_hash', 'is', null),
      )
      .executeTakeFirst();
    return Number(result.numInsertedOrUpdatedRows ?? 0) > 0;
  }

  /** Removes the account's user `email`; false when there is none. */
  async delete(accountId: string, email: string): Promise<boolean> {
    const result = await this.db
      .deleteFrom('users')
      .where('account_id', '=', accountId)
      .where('email', '=', email)
      .executeTakeFirst();
    return Number(result.numDeletedRows) > 0;
  }

  /** Sets the password of the user who signs in with `email`; false when there is none. */
  async setPassword(email: string, passwordHash: string): Promise<boolean> {
    const result = await this.db
      .updateTable('users')
      .set({ password_hash: passwordHash })
      .where('email', '=', email)
      .where('password_hash', 'is not', null)
      .executeTakeFirst();
    return Number(result.numUpdatedRows) > 0;
  }

  async recordLogin(accountId: string, email: string, date: string): Promise<void> {
    await this.db
      .updateTable('users')
      .set({ last_login_date: date })
      .where('account_id', '=', accountId)
      .where('email', '=', email)
      .execute();
  }
}
