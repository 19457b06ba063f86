import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';

/** 32 lowercase hex characters: the id form of files, keys, tokens and accounts. */
export function newId(): string {
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
