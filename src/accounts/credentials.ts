import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';

/** Random bytes drawn ahead, so that an id costs no call into OpenSSL of its own. */
const pool = { bytes: Buffer.alloc(0), at: 0 };

function pooledRandomHex(bytes: number): string {
  if (pool.at + bytes > pool.bytes.length) {
    pool.bytes = randomBytes(4096);
    pool.at = 0;
  }
  pool.at += bytes;
  return pool.bytes.toString('hex', pool.at - bytes, pool.at);
}

/**
 * 32 lowercase hex characters: the id form of files, jobs, keys and accounts. The first 12 are the
 * time in milliseconds, so the rows of every table keyed by id (and the trace's index by file id)
 * are inserted at the end of their B-tree, not on a random page of it: fewer pages written per
 * commit, on SQLite and PostgreSQL alike. The other 80 bits are random: ids stay unguessable.
 */
export function newId(): string {
  return Date.now().toString(16).padStart(12, '0') + pooledRandomHex(10);
}

/** A token's id is its bearer credential (Basic auth's user name): 128 random bits, no clock. */
export function newTokenId(): string {
  return randomBytes(16).toString('hex');
}

/** 256 random bits; URL-safe so it survives Basic auth and shell quoting untouched. */
export function newSecret(): string {
  return randomBytes(32).toString('base64url');
}

/** The key that signs an account's callbacks: 256 random bits in hex, stored as is (it signs). */
export function newCallbackSecret(): string {
  return randomBytes(32).toString('hex');
}

/**
 * Secrets are random and high-entropy, so a fast hash is enough (no dictionary to defend against)
 * and keeps authentication off the hot path's profile; a slow password hash would cap throughput.
 */
export function hashSecret(secret: string): string {
  return createHash('sha256').update(secret, 'utf8').digest('hex');
}

/** Constant-time comparison of a presented secret with a stored hash. */
export function secretMatches(secret: string, storedHash: string): boolean {
  const presented = Buffer.from(hashSecret(secret), 'hex');
  const stored = Buffer.from(storedHash, 'hex');
  return presented.length === stored.length && timingSafeEqual(presented, stored);
}

// Compared against when the key is unknown, so a miss costs the same as a wrong secret.
const UNKNOWN_KEY_HASH = hashSecret(newSecret());

export function secretMatchesUnknownKey(secret: string): false {
  secretMatches(secret, UNKNOWN_KEY_HASH);
  return false;
}
