import { ConfigError, type Env, oneOf, read } from './config-read.js';
import type { IcapSettings } from './icap/icap-context.js';
import { clientAllowList } from './icap/icap-server.js';

const SERVICE_NAME = /^[A-Za-z0-9._-]{1,64}$/;
const KEY_ID = /^[\x21-\x7e]{1,200}$/;

function port(env: Env, name: 'ASSAY_ICAP_PORT' | 'ASSAY_ICAPS_PORT'): number | null {
  const raw = read(env, name);
  if (raw === 'off') return null;
  if (!/^\d{1,5}$/.test(raw) || Number(raw) > 65535) {
    throw new ConfigError(
      `${name} must be a port (0-65535; 0 picks a free one) or off, got "${raw}"`,
    );
  }
  return Number(raw);
}

/** ASSAY_ICAP_SERVICES: `name=keyId,...`, each name once. */
function services(env: Env): Map<string, string> {
  const raw = read(env, 'ASSAY_ICAP_SERVICES');
  const map = new Map<string, string>();
  for (const entry of raw.split(',')) {
    const trimmed = entry.trim();
    if (trimmed === '') continue;
    const equals = trimmed.indexOf('=');
    const name = trimmed.slice(0, Math.max(0, equals)).trim();
    const keyId = trimmed.slice(equals + 1).trim();
    if (equals < 0 || !SERVICE_NAME.test(name) || !KEY_ID.test(keyId)) {
      throw new ConfigError(
        `ASSAY_ICAP_SERVICES entry "${trimmed}" must be service=keyId (a service name of letters, digits, '.', '_' or '-')`,
      );
    }
    if (map.has(name)) throw new ConfigError(`ASSAY_ICAP_SERVICES names "${name}" twice`);
    map.set(name, keyId);
  }
  return map;
}

/** The ICAP listener's settings; checked together (a port needs services, ICAPS a certificate). */
export function icapSettings(env: Env, httpPort: number, hasTls: boolean): IcapSettings {
  const settings: IcapSettings = {
    port: port(env, 'ASSAY_ICAP_PORT'),
    tlsPort: port(env, 'ASSAY_ICAPS_PORT'),
    allow: read(env, 'ASSAY_ICAP_ALLOW'),
    services: services(env),
    oversize: oneOf(env, 'ASSAY_ICAP_OVERSIZE', ['block', 'pass'] as const),
  };
  const on = settings.port !== null || settings.tlsPort !== null;
  if (on && settings.services.size === 0) {
    throw new ConfigError(
      'ASSAY_ICAP_SERVICES must name at least one service (like avscan=<key id>) when an ICAP port is on',
    );
  }
  if (settings.tlsPort !== null && !hasTls) {
    throw new ConfigError('ASSAY_ICAPS_PORT needs ASSAY_TLS_CERT and ASSAY_TLS_KEY');
  }
  const ports = [httpPort, settings.port, settings.tlsPort].filter(
    (value): value is number => value !== null && value !== 0,
  );
  if (new Set(ports).size !== ports.length) {
    throw new ConfigError('ASSAY_PORT, ASSAY_ICAP_PORT and ASSAY_ICAPS_PORT must differ');
  }
  try {
    clientAllowList(settings.allow);
  } catch (error) {
    throw new ConfigError((error as Error).message);
  }
  return settings;
}
