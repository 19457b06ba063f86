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
// A session's last use is written at most this often (most page views cost no write), and at
// most a quarter of the idle timeout after the last write: a session used more often than every
// three quarters of the timeout never ends idle, however short the timeout.
const MAX_TOUCH_EVERY_MS = 60_000;
const TOUCH_FRACTION_OF_IDLE = 4;
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
  private readonly touchEveryMs: number;

  constructor(
    private readonly store: Store,
    private readonly options: ConsoleAccessOptions,
    private readonly clock: () => number = Date.now,
  ) {
    this.touchEveryMs = Math.min(MAX_TOUCH_EVERY_MS, options.idleMs / TOUCH_FRACTION_OF_IDLE);
  }

  /**
   * Adds a user to the account: with a password, one who can sign in (an existing user of the
   * account without one is given it); without, one only listed in the account resource. A user
   * the account has already (with a password, when one is given), or one who signs in to
   * another account, is refused: nothing is changed.
   */
  async addUser(input: {
    accountId: string;
    email: string;
    password: string | null;
    operator: boolean;
  }): Promise<{ user: ConsoleUser; outcome: 'added' | 'password given' }> {
    const email = normalizeEmail(input.email);
    if (!EMAIL.test(email)) throw new ConsoleUserError(`not an e-mail address: ${input.email}`);
    if (input.password === null && input.operator) {
      throw new ConsoleUserError('an operator needs a password');
    }
    const problem = input.password === null ? null : passwordProblem(input.password);
    if (problem !== null) throw new ConsoleUserError(problem);
    if ((await this.store.accounts.find(input.accountId)) === null) {
      throw new ConsoleUserError(`no account ${input.accountId}`);
    }
    const already = new ConsoleUserError(
      `${email} is a user of ${input.accountId} already (a new password: reset-password; another role: remove the user, then add them)`,
    );
    const existing = await this.store.users.findInAccount(input.accountId, email);
    if (existing !== null && (existing.signsIn || input.password === null)) throw already;
    const user = { accountId: input.accountId, email, operator: input.operator };
    const record = {
      accountId: input.accountId,
      email,
      creationDate: new Date(this.clock()).toISOString(),
      lastLoginDate: null,
    };
    if (input.password === null) {
      await this.store.users.insert(record);
      return { user, outcome: 'added' };
    }
    const signsInElsewhere = await this.store.users.findForSignIn(email);
    if (signsInElsewhere !== null && signsInElsewhere.accountId !== input.accountId) {
      throw new ConsoleUserError(`${email} already signs in to another account`);
    }
    const passwordHash = await hashPassword(input.password);
    // Written only if the user has no password still (another command may have given one).
    if (!(await this.store.users.addWithPassword(record, passwordHash, input.operator))) {
      throw already;
    }
    return { user, outcome: existing === null ? 'added' : 'password given' };
  }

  /**
   * Removes the account's user `email` (as given, or normalized) and ends their sessions; false
   * when the account has no such user.
   */
  async removeUser(accountId: string, emailGiven: string): Promise<boolean> {
    return this.store.transaction(async (store) => {
      for (const email of new Set([emailGiven, normalizeEmail(emailGiven)])) {
        const existing = await store.users.findInAccount(accountId, email);
        if (existing === null) continue;
        // Only a user with a password has sessions (the address may sign in to another account).
        if (existing.signsIn) await store.consoleSessions.deleteForUser(email);
        return store.users.delete(accountId, email);
      }
      return false;
    });
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
    if (!user.accountActive) {
      // Ended for good: enabling the account again does not revive it (the user signs in again).
      await this.store.consoleSessions.delete(session.idHash);
      return null;
    }
    if (now - session.lastSeenAt >= this.touchEveryMs) {
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
