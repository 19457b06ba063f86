import { createHash, createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import type { Store } from '../store/store.js';
import { hashPassword, passwordProblem, UNKNOWN_USER_HASH, verifyPassword } from './passwords.js';

/** A user that cannot be added or changed as asked (the message says why). */
export class ConsoleUserError extends Error {}

/** Who is signed in to the console. */
export interface ConsoleUser {
  accountId: string;
  email: string;
  /** Also sees every account and the operations page. */
  operator: boolean;
}

export interface ConsoleSession {
  user: ConsoleUser;
  /** The token every state change must carry (derived from the session's secret). */
  csrfToken: string;
}

export type SignInOutcome =
  | {
      ok: true;
      token: string;
      session: ConsoleSession;
      /** The browser's proof that it signed in as this user: kept in a cookie for DEVICE_MS. */
      deviceToken: string;
    }
  | { ok: false; reason: 'wrong' }
  | { ok: false; reason: 'limited'; retryAfterSeconds: number };

export interface ConsoleAccessOptions {
  /** A session ends this long after sign-in, whatever its use. */
  sessionMs: number;
  /** ...or after this long unused. */
  idleMs: number;
}

// Sign-in attempts, failed or not, allowed per client (its address; IPv6: its /64) and per e-mail
// address: a burst, then one every so often (shared by every process through the store's token
// buckets). A browser that signed in as the user before has a per-user bucket of its own.
const ADDRESS_LIMIT = { rate: 1 / 6, burst: 10 };
const USER_LIMIT = { rate: 1 / 60, burst: 5 };
/** How long a browser that signed in is known by its device token. */
export const DEVICE_MS = 90 * 24 * 3600 * 1000;
const DEVICE_TOKEN = /^(\d{1,15})\.([\w-]{22})\.([\w-]{43})$/;
// A session's last use is written at most this often (a page view costs no write).
const TOUCH_EVERY_MS = 60_000;
const EMAIL = /^[^\s@]{1,200}@[^\s@]{1,200}$/;

export function normalizeEmail(email: string): string {
  return email.trim().toLowerCase();
}

function sha256(text: string): string {
  return createHash('sha256').update(text).digest('hex');
}

/**
 * Console users, passwords and sessions. Sessions live in the store (only a hash of the cookie's
 * secret), so any process or node can check one and signing out ends it everywhere.
 */
export class ConsoleAccess {
  constructor(
    private readonly store: Store,
    private readonly options: ConsoleAccessOptions,
    private readonly clock: () => number = Date.now,
  ) {}

  /**
   * Adds a user who can sign in (or gives an existing user of the account a password); a user
   * of another account with that e-mail address is refused.
   */
  async addUser(input: {
    accountId: string;
    email: string;
    password: string;
    operator: boolean;
  }): Promise<ConsoleUser> {
    const email = normalizeEmail(input.email);
    if (!EMAIL.test(email)) throw new ConsoleUserError(`not an e-mail address: ${input.email}`);
    const problem = passwordProblem(input.password);
    if (problem !== null) throw new ConsoleUserError(problem);
    if ((await this.store.accounts.find(input.accountId)) === null) {
      throw new ConsoleUserError(`no account ${input.accountId}`);
    }
    const existing = await this.store.users.findForSignIn(email);
    if (existing !== null && existing.accountId !== input.accountId) {
      throw new ConsoleUserError(`${email} already signs in to another account`);
    }
    const passwordHash = await hashPassword(input.password);
    await this.store.transaction(async (store) => {
      await store.users.upsertWithPassword(
        {
          accountId: input.accountId,
          email,
          creationDate: new Date(this.clock()).toISOString(),
          lastLoginDate: null,
        },
        passwordHash,
        input.operator,
      );
      await store.consoleSessions.deleteForUser(email);
    });
    return { accountId: input.accountId, email, operator: input.operator };
  }

  /** Sets a new password and ends every session of the user; false when no such user. */
  async resetPassword(emailGiven: string, password: string): Promise<boolean> {
    const problem = passwordProblem(password);
    if (problem !== null) throw new ConsoleUserError(problem);
    const email = normalizeEmail(emailGiven);
    const passwordHash = await hashPassword(password);
    return this.store.transaction(async (store) => {
      if (!(await store.users.setPassword(email, passwordHash))) return false;
      await store.consoleSessions.deleteForUser(email);
      return true;
    });
  }

  /**
   * Checks a sign-in. Every attempt draws on its client's bucket (`client`: an address, an IPv6
   * /64), which bounds guessing from one place, and on the user's, which bounds guessing one
   * password from many places. A browser that shows the device token of an earlier sign-in as
   * this user (`device`) draws on a second bucket of the user's instead: someone who only knows
   * the e-mail address can empty the first, and would otherwise keep the owner out. Unknown
   * e-mail addresses and wrong passwords take the same steps (two buckets, a hash) and get the
   * same answer.
   */
  async signIn(
    emailGiven: string,
    password: string,
    from: { client: string; device: string },
  ): Promise<SignInOutcome> {
    const email = normalizeEmail(emailGiven).slice(0, 500);
    const now = this.clock();
    const limited = (limit: { rate: number }): SignInOutcome => ({
      ok: false,
      reason: 'limited',
      retryAfterSeconds: Math.ceil(1 / limit.rate),
    });
    const leased = (name: string, limit: { rate: number; burst: number }) =>
      this.store.rateBuckets.lease(name, limit, 1, now);
    if ((await leased(`signin-addr:${from.client}`, ADDRESS_LIMIT)).granted === 0) {
      return limited(ADDRESS_LIMIT);
    }
    const user = await this.store.users.findForSignIn(email);
    const known =
      user !== null && deviceTokenMatches(from.device, user.email, user.passwordHash, now);
    // The user's browsers have a bucket of their own: only one of them can empty it.
    const userBucket = `${known ? 'signin-known' : 'signin-user'}:${sha256(email)}`;
    if ((await leased(userBucket, USER_LIMIT)).granted === 0) return limited(USER_LIMIT);
    // An unknown e-mail address costs a hash too: the answer's time does not tell who exists.
    const matches = await verifyPassword(user?.passwordHash ?? UNKNOWN_USER_HASH, password);
    if (user === null || !matches) return { ok: false, reason: 'wrong' };
    const account = await this.store.accounts.find(user.accountId);
    if (account === null || !account.active) return { ok: false, reason: 'wrong' };
    const token = randomBytes(32).toString('base64url');
    const date = new Date(now).toISOString();
    await this.store.transaction(async (store) => {
      await store.consoleSessions.insert({
        idHash: sha256(token),
        accountId: user.accountId,
        email: user.email,
        creationDate: date,
        expiresAt: now + this.options.sessionMs,
        lastSeenAt: now,
      });
      await store.users.recordLogin(user.accountId, user.email, date);
    });
    const sessionUser = { accountId: user.accountId, email: user.email, operator: user.operator };
    return {
      ok: true,
      token,
      session: { user: sessionUser, csrfToken: csrfTokenOf(token) },
      deviceToken: deviceTokenOf(user.email, user.passwordHash, now),
    };
  }

  /** The session the cookie's `token` names, if it is still on; its use is noted. */
  async session(token: string): Promise<ConsoleSession | null> {
    if (token.length === 0 || token.length > 100) return null;
    const found = await this.store.consoleSessions.find(sha256(token));
    if (found === null) return null;
    const now = this.clock();
    const { session, user } = found;
    if (session.expiresAt <= now || session.lastSeenAt + this.options.idleMs <= now) {
      await this.store.consoleSessions.delete(session.idHash);
      return null;
    }
    if (!user.accountActive) return null;
    if (now - session.lastSeenAt >= TOUCH_EVERY_MS) {
      await this.store.consoleSessions.touch(session.idHash, now);
    }
    return {
      user: { accountId: user.accountId, email: user.email, operator: user.operator },
      csrfToken: csrfTokenOf(token),
    };
  }

  /** Ends every session of the user whose session `token` is, in every process. */
  async signOut(token: string): Promise<void> {
    const found = await this.store.consoleSessions.find(sha256(token));
    if (found !== null) await this.store.consoleSessions.deleteForUser(found.user.email);
  }

  /** Sessions past their end, removed (with expired tokens' purge). */
  async purge(): Promise<number> {
    const now = this.clock();
    return this.store.consoleSessions.deleteExpired(now, now - this.options.idleMs);
  }
}

/**
 * `<issued (s)>.<nonce>.<mac>`: a MAC keyed with the user's password hash (a secret only the
 * store holds), so it needs no storage, only this user's browser has one, and a new password
 * ends every one of them.
 */
function deviceTokenOf(email: string, passwordHash: string, now: number, nonce?: string): string {
  const issued = Math.floor(now / 1000);
  const random = nonce ?? randomBytes(16).toString('base64url');
  const mac = createHmac('sha256', passwordHash)
    .update(`assay-console-device\n${email}\n${issued}\n${random}`)
    .digest('base64url');
  return `${issued}.${random}.${mac}`;
}

/** Whether `given` is an unexpired device token of the user (compared in constant time). */
function deviceTokenMatches(
  given: string,
  email: string,
  passwordHash: string,
  now: number,
): boolean {
  const parts = DEVICE_TOKEN.exec(given);
  if (parts === null) return false;
  const issuedMs = Number(parts[1]) * 1000;
  // A minute ahead is another node's clock, not a forgery (which the MAC refuses anyway).
  if (issuedMs > now + 60_000 || now - issuedMs > DEVICE_MS) return false;
  const expected = Buffer.from(deviceTokenOf(email, passwordHash, issuedMs, parts[2]));
  const actual = Buffer.from(given);
  return actual.length === expected.length && timingSafeEqual(actual, expected);
}

/** The CSRF token of a session: an HMAC of its secret, so it needs no storage of its own. */
export function csrfTokenOf(sessionToken: string): string {
  return createHmac('sha256', sessionToken).update('assay-console-csrf').digest('base64url');
}

/** Whether `given` is the session's CSRF token (constant time). */
export function csrfMatches(sessionToken: string, given: string): boolean {
  const expected = Buffer.from(csrfTokenOf(sessionToken));
  const actual = Buffer.from(given);
  return actual.length === expected.length && timingSafeEqual(actual, expected);
}
