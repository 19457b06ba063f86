/**
 * Outbound name resolution that a slow resolver cannot stall: /etc/hosts first (read and parsed
 * here), then DNS through c-ares (node:dns Resolver), which waits on the event loop rather than
 * on one of libuv's four threads as dns.lookup does. Each lookup has its own deadline, and a
 * bounded number run at once; beyond that a lookup fails at once instead of queueing.
 */
import { Resolver } from 'node:dns/promises';
import { open, stat } from 'node:fs/promises';
import { isIP } from 'node:net';
import { OutboundError } from './target.js';

/** An address a host name resolves to. */
export interface ResolvedAddress {
  address: string;
  family: number;
}

export interface NameResolverOptions {
  /** Per DNS try (c-ares' timeout). */
  tryTimeoutMs: number;
  /** Tries per name server. */
  tries: number;
  /** A lookup is cancelled after this long, whatever c-ares is doing. */
  deadlineMs: number;
  /** DNS lookups under way at most; /etc/hosts answers do not count. */
  maxInFlight: number;
  hostsPath: string;
  /** Name servers (`ip` or `ip:port`); default those of /etc/resolv.conf. */
  servers?: readonly string[];
}

/** Defaults: documented in docs/API.md ("Outbound requests and SSRF"). */
export const DNS_DEFAULTS: NameResolverOptions = {
  tryTimeoutMs: 2_000,
  tries: 2,
  deadlineMs: 5_000,
  maxInFlight: 64,
  hostsPath: '/etc/hosts',
};

/** A hosts file larger than this is read only up to it (a hosts file is a few KB). */
export const MAX_HOSTS_BYTES = 1024 * 1024;

/** Addresses by lower-case name, in file order, from the text of a hosts file. Linear in its size. */
export function parseHosts(text: string): Map<string, ResolvedAddress[]> {
  const table = new Map<string, ResolvedAddress[]>();
  for (const rawLine of text.split('\n')) {
    const hash = rawLine.indexOf('#');
    const line = hash === -1 ? rawLine : rawLine.slice(0, hash);
    const [address, ...names] = line.split(/[ \t\r\f\v]+/).filter((field) => field !== '');
    if (address === undefined) continue;
    // A scoped address ('fe80::1%eth0') is kept whole: the policy drops the scope to decide.
    const family = isIP(address.split('%')[0] ?? '');
    if (family === 0) continue;
    for (const raw of names) {
      const name = normalise(raw);
      const known = table.get(name) ?? [];
      if (!known.some((entry) => entry.address === address)) known.push({ address, family });
      table.set(name, known);
    }
  }
  return table;
}

function normalise(name: string): string {
  const lower = name.toLowerCase();
  return lower.endsWith('.') ? lower.slice(0, -1) : lower;
}

function errorCode(err: unknown): string | undefined {
  if (typeof err !== 'object' || err === null || !('code' in err)) return undefined;
  return typeof err.code === 'string' ? err.code : undefined;
}

export class NameResolver {
  private inFlight = 0;
  private hosts: { mtimeMs: number; size: number; table: Map<string, ResolvedAddress[]> } | null =
    null;

  constructor(private readonly options: NameResolverOptions = DNS_DEFAULTS) {}

  /** Lookups waiting on DNS now. */
  get lookupsInFlight(): number {
    return this.inFlight;
  }

  /** The name's addresses (IPv4 first); rejects with an Error carrying a DNS code, or OutboundError when too many lookups are under way. */
  readonly resolve = async (hostname: string, signal?: AbortSignal): Promise<ResolvedAddress[]> => {
    const name = normalise(hostname);
    const fromHosts = (await this.hostsTable()).get(name);
    if (fromHosts !== undefined) return fromHosts;
    if (this.inFlight >= this.options.maxInFlight) {
      throw new OutboundError(
        `too many DNS lookups under way (${this.options.maxInFlight}); ${hostname} was not looked up`,
      );
    }
    this.inFlight += 1;
    try {
      return await this.query(name, signal);
    } finally {
      this.inFlight -= 1;
    }
  };

  private async query(name: string, signal?: AbortSignal): Promise<ResolvedAddress[]> {
    // One channel per lookup, so cancelling it ends this lookup and no other.
    const resolver = new Resolver({
      timeout: this.options.tryTimeoutMs,
      tries: this.options.tries,
    });
    if (this.options.servers !== undefined) resolver.setServers([...this.options.servers]);
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      resolver.cancel();
    }, this.options.deadlineMs);
    const onAbort = () => resolver.cancel();
    signal?.addEventListener('abort', onAbort, { once: true });
    try {
      const [v4, v6] = await Promise.allSettled([resolver.resolve4(name), resolver.resolve6(name)]);
      const answers: ResolvedAddress[] = [
        ...(v4.status === 'fulfilled' ? v4.value.map((address) => ({ address, family: 4 })) : []),
        ...(v6.status === 'fulfilled' ? v6.value.map((address) => ({ address, family: 6 })) : []),
      ];
      if (answers.length > 0) return answers;
      if (timedOut) {
        throw Object.assign(new Error(`DNS lookup timed out after ${this.options.deadlineMs} ms`), {
          code: 'ETIMEOUT',
        });
      }
      // The IPv4 answer's error says most (no such name, a timeout, a server failure).
      const failure =
        v4.status === 'rejected' ? v4.reason : v6.status === 'rejected' ? v6.reason : null;
      if (failure !== null) throw failure;
      throw Object.assign(new Error(`no address for ${name}`), { code: 'ENODATA' });
    } finally {
      clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
    }
  }

  /** The hosts file's table, re-read when the file changes; empty when it cannot be read. */
  private async hostsTable(): Promise<Map<string, ResolvedAddress[]>> {
    let info: { mtimeMs: number; size: number };
    try {
      info = await stat(this.options.hostsPath);
    } catch {
      return new Map();
    }
    const cached = this.hosts;
    if (cached !== null && cached.mtimeMs === info.mtimeMs && cached.size === info.size) {
      return cached.table;
    }
    let text = '';
    try {
      const file = await open(this.options.hostsPath, 'r');
      try {
        const buffer = Buffer.alloc(Math.min(info.size, MAX_HOSTS_BYTES));
        const { bytesRead } = await file.read(buffer, 0, buffer.length, 0);
        text = buffer.subarray(0, bytesRead).toString('latin1');
        // Cut to the limit: the last, partial line is not read as a (shorter) name.
        if (info.size > MAX_HOSTS_BYTES) text = text.slice(0, text.lastIndexOf('\n') + 1);
      } finally {
        await file.close();
      }
    } catch (err) {
      if (errorCode(err) !== 'ENOENT') return cached?.table ?? new Map();
    }
    const table = parseHosts(text);
    this.hosts = { ...info, table };
    return table;
  }
}
