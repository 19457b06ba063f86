import { randomBytes, scrypt, timingSafeEqual } from 'node:crypto';

// scrypt with N = 2^15, r = 8, p = 1 (about 32 MiB and some tens of ms a hash): slow enough that
// a stolen store does not give its passwords up cheaply, fast enough for a sign-in.
const LOG_N = 15;
const R = 8;
const P = 1;
const KEY_BYTES = 32;
const SALT_BYTES = 16;
const MAX_MEMORY = 64 * 1024 * 1024;
/** Longer passwords are refused: a hash of megabytes would be a cheap way to spend our CPU. */
export const PASSWORD_MAX_LENGTH = 1024;
export const PASSWORD_MIN_LENGTH = 12;

function derive(
  password: string,
  salt: Buffer,
  params: { logN: number; r: number; p: number },
): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    scrypt(
      password.normalize('NFKC'),
      salt,
      KEY_BYTES,
      { N: 2 ** params.logN, r: params.r, p: params.p, maxmem: MAX_MEMORY },
      (error, key) => (error === null ? resolve(key) : reject(error)),
    );
  });
}

/** Why a new password is refused, or null when it will do. */
export function passwordProblem(password: string): string | null {
  if (password.length < PASSWORD_MIN_LENGTH) {
    return `a password needs at least ${PASSWORD_MIN_LENGTH} characters`;
  }
  if (password.length > PASSWORD_MAX_LENGTH) {
    return `a password may have at most ${PASSWORD_MAX_LENGTH} characters`;
  }
  return null;
}

/** `scrypt$<log2 N>$<r>$<p>$<salt>$<hash>` (base64url): the parameters travel with the hash. */
export async function hashPassword(password: string): Promise<string> {
  const salt = randomBytes(SALT_BYTES);
  const key = await derive(password, salt, { logN: LOG_N, r: R, p: P });
  return ['scrypt', LOG_N, R, P, salt.toString('base64url'), key.toString('base64url')].join('$');
}

/** A stored hash to compare with when there is no user, so an unknown e-mail costs the same. */
export const UNKNOWN_USER_HASH = `scrypt$${LOG_N}$${R}$${P}$${Buffer.alloc(SALT_BYTES).toString('base64url')}$${Buffer.alloc(KEY_BYTES).toString('base64url')}`;

/** Whether `password` is the one `stored` was made from; compared in constant time. */
export async function verifyPassword(stored: string, password: string): Promise<boolean> {
  if (password.length > PASSWORD_MAX_LENGTH) return false;
  const [kind, logN, r, p, salt, hash] = stored.split('$');
  if (kind !== 'scrypt' || salt === undefined || hash === undefined) return false;
  const params = { logN: Number(logN), r: Number(r), p: Number(p) };
  if (![params.logN, params.r, params.p].every((n) => Number.isInteger(n) && n > 0 && n < 32)) {
    return false;
  }
  const expected = Buffer.from(hash, 'base64url');
  const key = await derive(password, Buffer.from(salt, 'base64url'), params);
  return key.length === expected.length && timingSafeEqual(key, expected);
}
