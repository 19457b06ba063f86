import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { isIP } from 'node:net';
import { hostname } from 'node:os';
import { resolve } from 'node:path';
import { createSecureContext } from 'node:tls';
import type {
  BootstrapCredentials,
  ClamdSetting,
  Config,
  ProxyTrust,
  RateLimitSetting,
} from './config-shape.js';
import { AddressPolicy } from './outbound/address-policy.js';
import { SETTINGS, type SettingName } from './settings.js';
import { parseS3Url } from './spool/s3-url.js';

// Reading and checking ASSAY_* variables, one setting or group at a time; loadConfig (config.ts)
// puts them together.

/** Thrown when an ASSAY_* variable is invalid; the message names the variable. */
export class ConfigError extends Error {}

/** More proxies in a row than any real chain has: a larger number is a mistake. */
const MAX_PROXY_HOPS = 16;

export type Env = Record<string, string | undefined>;

export function read(env: Env, name: SettingName): string {
  const value = env[name];
  return value === undefined || value.trim() === '' ? SETTINGS[name].default : value.trim();
}

export function integer(env: Env, name: SettingName, min: number, max: number): number {
  const raw = read(env, name);
  if (!/^\d+$/.test(raw)) throw new ConfigError(`${name} must be a whole number, got "${raw}"`);
  const value = Number(raw);
  if (value < min || value > max) {
    throw new ConfigError(`${name} must be between ${min} and ${max}, got ${value}`);
  }
  return value;
}

export function oneOf<T extends string>(env: Env, name: SettingName, allowed: readonly T[]): T {
  const raw = read(env, name);
  const found = allowed.find((value) => value === raw);
  if (found === undefined) {
    throw new ConfigError(`${name} must be one of ${allowed.join(', ')}, got "${raw}"`);
  }
  return found;
}

/**
 * An absolute http(s) URL without credentials, query or fragment, normalised and without its
 * trailing slash; its path, if any, is a prefix the proxy in front strips.
 */
export function baseUrl(
  env: Env,
  name: 'ASSAY_PUBLIC_URL' | 'ASSAY_LEGACY_BASE_URL',
): string | null {
  const raw = read(env, name);
  if (raw === '') return null;
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new ConfigError(`${name} must be an absolute http(s) URL, got "${raw}"`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw new ConfigError(`${name} must be an http(s) URL, got "${raw}"`);
  }
  if (url.search !== '' || url.hash !== '' || raw.includes('?') || raw.includes('#')) {
    throw new ConfigError(`${name} must not have a query or fragment, got "${raw}"`);
  }
  if (url.username !== '' || url.password !== '') {
    throw new ConfigError(`${name} must not carry a user name or password`);
  }
  return `${url.origin}${url.pathname}`.replace(/\/+$/, '');
}

/** A folder, or `none` (''). */
export function optionalPath(raw: string): string {
  return raw === 'none' ? '' : resolve(raw);
}

export function clamd(env: Env): ClamdSetting {
  const raw = read(env, 'ASSAY_CLAMD');
  if (raw === 'managed') return { mode: 'managed' };
  if (raw.startsWith('/') || /^tcp:\/\/[^:/]+:\d+$/.test(raw))
    return { mode: 'external', address: raw };
  throw new ConfigError(
    `ASSAY_CLAMD must be "managed", an absolute unix socket path or tcp://host:port, got "${raw}"`,
  );
}

export function bootstrapCredentials(env: Env): BootstrapCredentials | null {
  const raw = read(env, 'ASSAY_BOOTSTRAP_CREDENTIALS');
  if (raw === '') return null;
  const colon = raw.indexOf(':');
  const keyId = raw.slice(0, colon);
  const secret = raw.slice(colon + 1);
  // Client test suites use the literal key "key", so any short token is accepted here.
  if (colon < 1 || !/^[A-Za-z0-9_-]{1,64}$/.test(keyId) || secret.length === 0) {
    throw new ConfigError(
      'ASSAY_BOOTSTRAP_CREDENTIALS must be key:secret (key: 1-64 of A-Z a-z 0-9 _ -; secret non-empty)',
    );
  }
  return { keyId, secret };
}

export function headerBrand(env: Env): string {
  const raw = read(env, 'ASSAY_HEADER_BRAND');
  if (!/^[A-Za-z][A-Za-z0-9]{0,31}$/.test(raw)) {
    throw new ConfigError(`ASSAY_HEADER_BRAND must be a word of letters and digits, got "${raw}"`);
  }
  return raw;
}

export function hostId(env: Env): string {
  const raw = read(env, 'ASSAY_HOST_ID');
  if (raw === '') return createHash('sha256').update(hostname()).digest('hex').slice(0, 8);
  if (!/^[A-Za-z0-9._-]{1,64}$/.test(raw)) {
    throw new ConfigError(`ASSAY_HOST_ID must be 1-64 of A-Z a-z 0-9 . _ -, got "${raw}"`);
  }
  return raw;
}

export function fetchAllow(env: Env): string {
  const raw = read(env, 'ASSAY_FETCH_ALLOW');
  try {
    AddressPolicy.fromSetting(raw);
  } catch (error) {
    throw new ConfigError(
      `ASSAY_FETCH_ALLOW: ${error instanceof Error ? error.message : String(error)}`,
    );
  }
  return raw;
}

export function decimal(env: Env, name: SettingName, max: number): number {
  const raw = read(env, name);
  if (!/^\d+(\.\d+)?$/.test(raw) || Number(raw) > max) {
    throw new ConfigError(`${name} must be a number from 0 to ${max}, got "${raw}"`);
  }
  return Number(raw);
}

export function rateLimit(env: Env, rate: SettingName, burst: SettingName): RateLimitSetting {
  return { rate: decimal(env, rate, 1_000_000), burst: integer(env, burst, 1, 10_000_000) };
}

export function tls(env: Env): Config['tls'] {
  const certPath = read(env, 'ASSAY_TLS_CERT');
  const keyPath = read(env, 'ASSAY_TLS_KEY');
  if (certPath === '' && keyPath === '') return null;
  if (certPath === '' || keyPath === '') {
    throw new ConfigError('ASSAY_TLS_CERT and ASSAY_TLS_KEY must be set together');
  }
  const readPem = (name: SettingName, path: string): Buffer => {
    try {
      return readFileSync(path);
    } catch (error) {
      const reason = error instanceof Error ? error.message : String(error);
      throw new ConfigError(`${name}: cannot read ${path}: ${reason}`);
    }
  };
  const cert = readPem('ASSAY_TLS_CERT', certPath);
  const key = readPem('ASSAY_TLS_KEY', keyPath);
  try {
    createSecureContext({ cert, key });
  } catch (error) {
    const reason = error instanceof Error ? error.message : String(error);
    throw new ConfigError(`ASSAY_TLS_CERT/ASSAY_TLS_KEY are not a usable PEM pair: ${reason}`);
  }
  return { cert, key };
}

const TRUST_PROXY_FORMS = `a number of proxy hops (1-${MAX_PROXY_HOPS}), comma-separated proxy addresses/CIDRs, or false`;

export function trustProxy(env: Env): ProxyTrust {
  const raw = read(env, 'ASSAY_TRUST_PROXY');
  if (raw === '' || raw === 'false' || raw === '0') return { kind: 'none' };
  if (raw === 'true') return { kind: 'hops', hops: 1, deprecatedTrue: true };
  if (/^\d+$/.test(raw)) {
    const hops = Number(raw);
    if (hops > MAX_PROXY_HOPS) {
      throw new ConfigError(`ASSAY_TRUST_PROXY must be ${TRUST_PROXY_FORMS}; got ${hops} hops`);
    }
    return { kind: 'hops', hops, deprecatedTrue: false };
  }
  const addresses = raw.split(',').map((entry) => entry.trim());
  for (const entry of addresses) {
    const [address, bits, extra] = entry.split('/');
    const family = isIP(address ?? '');
    const maxBits = family === 6 ? 128 : 32;
    if (
      family === 0 ||
      extra !== undefined ||
      (bits !== undefined && (!/^\d+$/.test(bits) || Number(bits) > maxBits))
    ) {
      throw new ConfigError(`ASSAY_TRUST_PROXY must be ${TRUST_PROXY_FORMS}; bad entry "${entry}"`);
    }
  }
  return { kind: 'addresses', addresses };
}

export function databaseUrl(env: Env): string {
  const raw = read(env, 'ASSAY_DATABASE_URL');
  if (raw === '') return '';
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    // Not echoed: it may hold a password.
    throw new ConfigError('ASSAY_DATABASE_URL is not a URL (expected postgres://host/database)');
  }
  if (url.protocol !== 'postgres:' && url.protocol !== 'postgresql:') {
    throw new ConfigError(
      `ASSAY_DATABASE_URL must start with postgres:// or postgresql://, got ${url.protocol}//`,
    );
  }
  return raw;
}

/**
 * An account's share of a pool of slots: the setting, at most the pool; 0 (the default) leaves
 * the pool's `1 - fraction` to other accounts.
 */
export function accountShare(
  env: Env,
  name: SettingName,
  pool: SettingName,
  max: number,
  fraction: number,
): number {
  const slots = integer(env, pool, 1, max);
  const value = integer(env, name, 0, max);
  if (value > 0) return Math.min(value, slots);
  return Math.max(1, Math.ceil(slots * fraction));
}

const MAX_SPOOL_BYTES = 2 ** 50;

export function spoolQuota(env: Env): { spoolMaxBytes: number; accountSpoolMaxBytes: number } {
  const spoolMaxBytes = integer(env, 'ASSAY_SPOOL_MAX_BYTES', 1, MAX_SPOOL_BYTES);
  return {
    spoolMaxBytes,
    accountSpoolMaxBytes: Math.min(
      spoolMaxBytes,
      integer(env, 'ASSAY_ACCOUNT_SPOOL_MAX_BYTES', 1, MAX_SPOOL_BYTES),
    ),
  };
}

type SpoolLocation = Pick<Config, 'spoolDir' | 'spoolUrl' | 's3Endpoint' | 's3Region'>;

/** Where async content is kept: one of a directory or a bucket, never both silently. */
export function spoolLocation(env: Env): SpoolLocation {
  const spoolDir = read(env, 'ASSAY_SPOOL_DIR');
  const spoolUrl = read(env, 'ASSAY_SPOOL_URL');
  const s3Endpoint = read(env, 'ASSAY_S3_ENDPOINT');
  const s3Region = read(env, 'ASSAY_S3_REGION');
  if (spoolUrl !== '') {
    try {
      parseS3Url(spoolUrl);
    } catch (error) {
      throw new ConfigError(`ASSAY_SPOOL_URL ${error instanceof Error ? error.message : error}`);
    }
    if (spoolDir !== '') {
      throw new ConfigError('ASSAY_SPOOL_DIR and ASSAY_SPOOL_URL are exclusive: set one of them');
    }
  } else if (s3Endpoint !== '') {
    throw new ConfigError(
      'ASSAY_S3_ENDPOINT is set but ASSAY_SPOOL_URL (s3://bucket/prefix) is not',
    );
  }
  if (s3Endpoint !== '') {
    let url: URL | null = null;
    try {
      url = new URL(s3Endpoint);
    } catch {}
    if (url === null || (url.protocol !== 'http:' && url.protocol !== 'https:')) {
      throw new ConfigError(`ASSAY_S3_ENDPOINT must be an http(s) URL, got "${s3Endpoint}"`);
    }
    // Credentials belong to the SDK's chain (AWS_ACCESS_KEY_ID…), where they are never logged.
    if (url.username !== '' || url.password !== '' || url.search !== '' || url.hash !== '') {
      throw new ConfigError('ASSAY_S3_ENDPOINT must not hold credentials, a query or a fragment');
    }
  }
  if (!/^[a-z0-9-]{1,32}$/.test(s3Region)) {
    throw new ConfigError(
      `ASSAY_S3_REGION must be a region name like eu-west-1, got "${s3Region}"`,
    );
  }
  return { spoolDir: spoolDir === '' ? '' : resolve(spoolDir), spoolUrl, s3Endpoint, s3Region };
}

export function metricsToken(env: Env): string {
  const raw = read(env, 'ASSAY_METRICS_TOKEN');
  // Not echoed: it is a secret.
  if (raw !== '' && !/^[\x21-\x7e]{16,256}$/.test(raw)) {
    throw new ConfigError(
      'ASSAY_METRICS_TOKEN must be 16 to 256 visible ASCII characters (no spaces), or empty',
    );
  }
  return raw;
}
