import type { Kysely } from 'kysely';
import type { Database } from './schema.js';

/** A console session as stored: whose it is and until when. */
export interface ConsoleSessionRow {
  idHash: string;
  accountId: string;
  email: string;
  creationDate: string;
  expiresAt: number;
  lastSeenAt: number;
}

/** A session's user as signing in needs them: their account, operator flag and password hash. */
export interface SessionUser {
  accountId: string;
  email: string;
  operator: boolean;
  accountActive: boolean;
}

export class ConsoleSessionRepository {
  constructor(private readonly db: Kysely<Database>) {}

  async insert(session: ConsoleSessionRow): Promise<void> {
    await this.db
      .insertInto('console_sessions')
      .values({
        id_hash: session.idHash,
        account_id: session.accountId,
        email: session.email,
        creation_date: session.creationDate,
        expires_at: session.expiresAt,
        last_seen_at: session.lastSeenAt,
      })
      .execute();
  }

  /** The session and its user (who must still have a password), or null. */
  async find(idHash: string): Promise<{ session: ConsoleSessionRow; user: SessionUser } | null> {
    const row = await this.db
      .selectFrom('console_sessions as s')
      .innerJoin('users as u', (join) =>
        join.onRef('u.email', '=', 's.email').onRef('u.account_id', '=', 's.account_id'),
      )
      .innerJoin('accounts as a', 'a.id', 's.account_id')
      .select([
        's.id_hash',
        's.account_id',
        's.email',
        's.creation_date',
        's.expires_at',
        's.last_seen_at',
        'u.operator',
        'u.password_hash',
        'a.active',
      ])
      .where('s.id_hash', '=', idHash)
      .executeTakeFirst();
    if (row === undefined || row.password_hash === null) return null;
    return {
      session: {
        idHash: row.id_hash,
        accountId: row.account_id,
        email: row.email,
        creationDate: row.creation_date,
        expiresAt: Number(row.expires_at),
        lastSeenAt: Number(row.last_seen_at),
      },
      user: {
        accountId: row.account_id,
        email: row.email,
        operator: Number(row.operator) === 1,
        accountActive: Number(row.active) === 1,
      },
    };
  }

  async touch(idHash: string, lastSeenAt: number): Promise<void> {
    await this.db
      .updateTable('console_sessions')
      .set({ last_seen_at: lastSeenAt })
      .where('id_hash', '=', idHash)
      .execute();
  }

  async delete(idHash: string): Promise<void> {
    await this.db.deleteFrom('console_sessions').where('id_hash', '=', idHash).execute();
  }

  /** Ends every session of the user (signed out everywhere, a new password, or removed). */
  async deleteForUser(email: string): Promise<number> {
    const result = await this.db
      .deleteFrom('console_sessions')
      .where('email', '=', email)
      .executeTakeFirst();
    return Number(result.numDeletedRows);
  }

  /** Removes sessions past their end; returns how many. */
  async deleteExpired(now: number, idleBefore: number): Promise<number> {
    const result = await this.db
      .deleteFrom('console_sessions')
      .where((eb) => eb.or([eb('expires_at', '<=', now), eb('last_seen_at', '<=', idleBefore)]))
      .executeTakeFirst();
    return Number(result.numDeletedRows);
  }
}
