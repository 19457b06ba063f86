/**
 * Import first in any test that opens sockets: this machine may only send packets to loopback, so a
 * bug in the SSRF layer under test must fail loudly here instead of leaking a SYN (or a DNS query:
 * the resolver in /etc/resolv.conf is not on loopback).
 *
 * - `net.Socket.prototype.connect` (and so net.connect, tls.connect, http/https requests) throws
 *   synchronously for a TCP destination that is not a loopback IP or the name 'localhost'; unix
 *   socket paths pass. For 'localhost' the lookup (the caller's `lookup` option or dns.lookup) is
 *   wrapped so that a non-loopback answer fails the connect before it starts.
 * - `dns.lookup` and `dns.promises.lookup` refuse every name but 'localhost' and IP literals
 *   ('localhost' comes from /etc/hosts, so no packet is sent).
 * - `Resolver` queries (c-ares, both APIs) are refused unless every name server the resolver
 *   would ask is a loopback address (a test's own DNS server).
 *
 * Every destination the guard sees is recorded, so tests can prove both that a form of connect
 * went through the guard and that the code under test refused an address before the guard had to.
 */
import dns, { type LookupAddress } from 'node:dns';
import dnsPromises from 'node:dns/promises';
import { syncBuiltinESMExports } from 'node:module';
import net from 'node:net';

/** Destinations seen by the guard, as `host:port` (and `lookup host -> ip` entries). */
export const guardSeen: string[] = [];
/** Destinations the guard refused; tests assert this stays empty when the code under test refuses. */
export const guardRefused: string[] = [];

const installed = Symbol.for('assay.test.loopbackOnlyGuard');

/** The eight 16-bit groups of a valid IPv6 address (an embedded dotted quad becomes two groups). */
function ipv6Groups(ip: string): number[] {
  let text = ip.toLowerCase();
  const quad = /(\d+)\.(\d+)\.(\d+)\.(\d+)$/.exec(text);
  if (quad !== null) {
    const [a, b, c, d] = quad.slice(1).map(Number) as [number, number, number, number];
    text = `${text.slice(0, quad.index)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const [head = '', tail] = text.split('::');
  const left = head === '' ? [] : head.split(':');
  const right = tail === undefined || tail === '' ? [] : tail.split(':');
  const zeros = tail === undefined ? [] : Array<string>(8 - left.length - right.length).fill('0');
  return [...left, ...zeros, ...right].map((group) => Number.parseInt(group, 16));
}

/** True for 127.0.0.0/8, ::1 and IPv4-mapped loopback (which a dual-stack socket sends to 127/8). */
export function isLoopbackIp(ip: string): boolean {
  const family = net.isIP(ip);
  if (family === 4) return ip.startsWith('127.');
  if (family !== 6 || ip.includes('%')) return false;
  const groups = ipv6Groups(ip);
  const prefixZero = groups.slice(0, 5).every((group) => group === 0);
  if (prefixZero && groups[5] === 0 && groups[6] === 0 && groups[7] === 1) return true;
  return prefixZero && groups[5] === 0xffff && (groups[6] ?? 0) >> 8 === 127;
}

function refuse(what: string): Error {
  guardRefused.push(what);
  return new Error(`loopback-only test guard: refused ${what}`);
}

type Callback = (...args: unknown[]) => unknown;
type LookupCallback = (
  err: NodeJS.ErrnoException | null,
  address?: string | LookupAddress[],
  family?: number,
) => void;
type Lookup = (hostname: string, options: dns.LookupOptions, callback: LookupCallback) => void;

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null;
}

/** Wraps a lookup so that only loopback answers reach the socket. */
function checkedLookup(lookup: Lookup, port: unknown): Lookup {
  return (hostname, options, callback) => {
    lookup(hostname, options, (err, address, family) => {
      if (err !== null) {
        callback(err, address, family);
        return;
      }
      const answers = Array.isArray(address) ? address.map((a) => a.address) : [String(address)];
      for (const ip of answers) {
        guardSeen.push(`lookup ${hostname} -> ${ip}`);
        if (!isLoopbackIp(ip)) {
          callback(refuse(`${hostname} -> ${ip}:${String(port)}`));
          return;
        }
      }
      callback(null, address, family);
    });
  };
}

type Connect = (this: net.Socket, ...args: unknown[]) => net.Socket;

function installConnectGuard(): void {
  const proto = net.Socket.prototype as unknown as { connect: Connect };
  const original = proto.connect;
  proto.connect = function guardedConnect(this: net.Socket, ...args: unknown[]): net.Socket {
    // net.connect() hands over an already normalised [options, callback] array; a direct call
    // passes (options[, cb]), (port[, host][, cb]) or (path[, cb]).
    let first: unknown = args[0];
    let rest: unknown[] = args.slice(1);
    if (Array.isArray(first)) {
      rest = first.slice(1);
      first = first[0];
    }
    let options: Record<string, unknown>;
    if (isObject(first)) {
      options = first;
    } else if (typeof first === 'string' && !/^\s*\d+\s*$/.test(first)) {
      options = { path: first };
    } else {
      options = { port: first, host: typeof rest[0] === 'string' ? rest[0] : undefined };
      rest = rest.filter((arg) => typeof arg === 'function');
    }
    if (typeof options.path === 'string' && options.path !== '') {
      return original.apply(this, args);
    }
    const host =
      typeof options.host === 'string' && options.host !== '' ? options.host : 'localhost';
    const port = options.port;
    guardSeen.push(`${host}:${String(port)}`);
    if (net.isIP(host) !== 0) {
      if (!isLoopbackIp(host)) throw refuse(`${host}:${String(port)}`);
      return original.apply(this, args);
    }
    if (host.toLowerCase() !== 'localhost' && host.toLowerCase() !== 'localhost.') {
      throw refuse(`${host}:${String(port)}`);
    }
    // A name: the address comes from a lookup, so check what the lookup answers.
    const lookup =
      typeof options.lookup === 'function'
        ? (options.lookup as Lookup)
        : (name: string, opts: dns.LookupOptions, cb: LookupCallback) => {
            dns.lookup(name, { ...opts, all: opts.all === true }, cb as never);
          };
    const callback = rest.find((arg): arg is Callback => typeof arg === 'function');
    const guarded = { ...options, host, lookup: checkedLookup(lookup, port) };
    return callback === undefined
      ? original.call(this, guarded)
      : original.call(this, guarded, callback);
  };
}

function allowedName(hostname: unknown): boolean {
  if (typeof hostname !== 'string') return false;
  const lower = hostname.toLowerCase();
  return lower === 'localhost' || lower === 'localhost.' || net.isIP(hostname) !== 0;
}

function installDnsGuard(): void {
  const callbackApi = dns as unknown as { lookup: Callback };
  const originalLookup = callbackApi.lookup;
  callbackApi.lookup = function guardedLookup(this: unknown, ...args: unknown[]): unknown {
    if (!allowedName(args[0])) throw refuse(`DNS lookup of ${String(args[0])}`);
    return originalLookup.apply(this, args);
  };
  // dns.promises is the same object as node:dns/promises; patch both names in case they differ.
  for (const api of new Set([dns.promises, dnsPromises]) as Set<unknown>) {
    const promiseApi = api as { lookup: Callback };
    const originalPromiseLookup = promiseApi.lookup;
    promiseApi.lookup = function guardedPromiseLookup(this: unknown, ...args: unknown[]): unknown {
      if (!allowedName(args[0])) {
        return Promise.reject(refuse(`DNS lookup of ${String(args[0])}`));
      }
      return originalPromiseLookup.apply(this, args);
    };
  }
  // ESM named imports of builtins are snapshots until synced.
  syncBuiltinESMExports();
}

/** '127.0.0.1', '127.0.0.1:5353', '[::1]:53' or '::1' to its IP. */
function serverIp(server: string): string {
  if (server.startsWith('[')) return server.slice(1, server.indexOf(']'));
  return net.isIP(server) !== 0 ? server : server.slice(0, server.lastIndexOf(':'));
}

const RESOLVER_METHODS = [
  'resolve',
  'resolve4',
  'resolve6',
  'resolveAny',
  'resolveCname',
  'resolveMx',
  'resolveNs',
  'resolveTxt',
  'resolveSrv',
  'resolvePtr',
  'resolveNaptr',
  'resolveSoa',
  'resolveCaa',
  'reverse',
] as const;

function installResolverGuard(): void {
  for (const ResolverClass of [dns.Resolver, dnsPromises.Resolver]) {
    const proto = ResolverClass.prototype as unknown as Record<string, Callback> & {
      getServers(): string[];
    };
    for (const method of RESOLVER_METHODS) {
      const original = proto[method];
      if (typeof original !== 'function') continue;
      proto[method] = function guardedResolve(this: typeof proto, ...args: unknown[]): unknown {
        const servers = this.getServers();
        const outside = servers.filter((server) => !isLoopbackIp(serverIp(server)));
        if (servers.length === 0 || outside.length > 0) {
          const error = refuse(
            `DNS query ${method}(${String(args[0])}) to ${outside.join(', ') || 'no server'}`,
          );
          if (ResolverClass === dnsPromises.Resolver) return Promise.reject(error);
          throw error;
        }
        return original.apply(this, args);
      };
    }
  }
}

const registry = globalThis as unknown as Record<symbol, boolean | undefined>;
if (registry[installed] !== true) {
  registry[installed] = true;
  installConnectGuard();
  installDnsGuard();
  installResolverGuard();
}
