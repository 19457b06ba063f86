import { execFile } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { connect, type Socket } from 'node:net';
import { join } from 'node:path';
import type { TestContext } from 'node:test';
import { AccountService } from '../../src/accounts/account-service.js';
import type { DetectionCategory } from '../../src/domain/records.js';
import type { ServiceTestHooks } from '../../src/service.js';
import { basic, buildService, quietLogger, type TestService, tempDir } from './service.js';

/** The ICAP services every test service offers, the keys they act as, and those keys' secrets. */
export const ICAP_SERVICES: Record<string, { keyId: string; categories: DetectionCategory[] }> = {
  avscan: { keyId: 'icap-avscan', categories: ['MALWARE'] },
  nsfw: { keyId: 'icap-nsfw', categories: ['MALWARE', 'NSFW_IMAGE'] },
};
const ICAP_SECRET = 'icap-test-secret-0123456789abcdef';

export interface IcapService extends TestService {
  /** The ICAP listener's port. */
  icapPort: number;
  /** `Authorization` of the ICAP services' keys, to read their results over the API. */
  icapAuth: Record<string, string>;
}

/**
 * A test service with the ICAP listener on a free port and the services of ICAP_SERVICES, whose
 * keys belong to an account of their own (their secrets known, to read results over the API).
 */
export async function buildIcapService(
  t: TestContext,
  clamdSocket: string,
  env: Record<string, string> = {},
  hooks: ServiceTestHooks = {},
): Promise<IcapService> {
  const svc = await buildService(
    t,
    {
      ASSAY_CLAMD: clamdSocket,
      ASSAY_ICAP_PORT: '0',
      ASSAY_ICAP_SERVICES: Object.entries(ICAP_SERVICES)
        .map(([name, { keyId }]) => `${name}=${keyId}`)
        .join(','),
      ...env,
    },
    quietLogger,
    hooks,
    async (_dataDir, store) => {
      const accounts = new AccountService(store);
      const account = await accounts.createAccount({ name: 'ICAP' });
      for (const { keyId, categories } of Object.values(ICAP_SERVICES)) {
        await accounts.createKey(account.id, { id: keyId, secret: ICAP_SECRET, categories });
      }
    },
  );
  const icapUrl = svc.service.icap.icap;
  if (icapUrl === null) throw new Error('the ICAP listener did not start');
  const icapAuth = Object.fromEntries(
    Object.entries(ICAP_SERVICES).map(([name, { keyId }]) => [name, basic(keyId, ICAP_SECRET)]),
  );
  return { ...svc, icapPort: Number(new URL(icapUrl.replace(/^icap/, 'http')).port), icapAuth };
}

/** What Debian's c-icap-client printed: the ICAP status and headers, and the body it saved. */
export interface IcapClientRun {
  status: number | null;
  /** ICAP headers, names in lower case (a folded header's lines joined with "\n"). */
  headers: Map<string, string>;
  /** The encapsulated HTTP head it printed (RESPMOD/REQMOD HEADERS), as text. */
  httpHead: string;
  /** The body it wrote (`-o`), or null when it wrote none. */
  output: Buffer | null;
  stdout: string;
}

/** Runs c-icap-client against `port`; `args` are its own options (-f, -resp, -no204, ...). */
export async function icapClient(
  port: number,
  service: string,
  args: string[],
  options: { tls?: boolean } = {},
): Promise<IcapClientRun> {
  const output = join(tempDir('assay-icap-out-'), 'body');
  const stdout = await new Promise<string>((resolve, reject) => {
    execFile(
      'c-icap-client',
      [
        '-i',
        '127.0.0.1',
        '-p',
        String(port),
        '-s',
        service,
        '-v',
        ...(args.includes('-f') ? ['-o', output] : []),
        ...(options.tls === true ? ['-tls', '-tls-no-verify'] : []),
        ...args,
      ],
      { timeout: 120_000, maxBuffer: 16 * 1024 * 1024 },
      // It prints what it received on stderr.
      (error, out, err) => {
        if (error !== null && err === '') reject(new Error(`c-icap-client failed: ${error}`));
        else resolve(`${out}${err}`);
      },
    );
  });
  const body = await readFile(output).catch(() => null);
  return { ...parseClientOutput(stdout), output: body, stdout };
}

function parseClientOutput(stdout: string): Omit<IcapClientRun, 'output' | 'stdout'> {
  const headers = new Map<string, string>();
  let status: number | null = null;
  let httpHead = '';
  let section: 'icap' | 'http' | null = null;
  let last: string | null = null;
  for (const line of stdout.split(/\r?\n/)) {
    if (line === 'ICAP HEADERS:') {
      section = 'icap';
      continue;
    }
    if (/^(RESPMOD|REQMOD) HEADERS:$/.test(line)) {
      section = 'http';
      continue;
    }
    if (!line.startsWith('\t')) {
      if (line.trim() !== '') section = null;
      continue;
    }
    const text = line.slice(1);
    if (section === 'http') httpHead += `${text}\n`;
    if (section !== 'icap') continue;
    const statusLine = /^ICAP\/1\.0 (\d{3})/.exec(text);
    if (statusLine !== null) {
      status = Number(statusLine[1]);
      continue;
    }
    const colon = text.indexOf(': ');
    if (colon > 0 && /^[A-Za-z0-9-]+$/.test(text.slice(0, colon))) {
      last = text.slice(0, colon).toLowerCase();
      headers.set(last, text.slice(colon + 2));
    } else if (last !== null) {
      headers.set(last, `${headers.get(last)}\n${text.trim()}`);
    }
  }
  return { status, headers, httpHead };
}

/** An ICAP response read off a raw connection: its status, headers and decoded body. */
export interface RawIcapResponse {
  status: number;
  headers: Map<string, string>;
  /** The encapsulated heads and the de-chunked body, or null with a null-body. */
  heads: string;
  body: Buffer | null;
}

/** An ICAP connection written by hand: requests in pieces, responses read one at a time. */
export class RawIcapConnection {
  readonly socket: Socket;
  private buffered = Buffer.alloc(0);
  private closed = false;
  private waiters: Array<() => void> = [];

  constructor(port: number) {
    this.socket = connect(port, '127.0.0.1');
    this.socket.on('data', (data: Buffer) => {
      this.buffered = Buffer.concat([this.buffered, data]);
      this.wake();
    });
    this.socket.on('close', () => {
      this.closed = true;
      this.wake();
    });
    this.socket.on('error', () => undefined);
  }

  private wake(): void {
    for (const wake of this.waiters.splice(0)) wake();
  }

  get isClosed(): boolean {
    return this.closed;
  }

  write(data: string | Buffer): void {
    this.socket.write(data);
  }

  /** Waits until the connection is closed by the server. */
  async closedByServer(): Promise<void> {
    while (!this.closed) await new Promise<void>((resolve) => this.waiters.push(resolve));
  }

  private async until(found: () => number): Promise<number> {
    for (;;) {
      const at = found();
      if (at >= 0) return at;
      if (this.closed) {
        throw new Error(`connection closed; received: ${this.buffered.toString('latin1')}`);
      }
      await new Promise<void>((resolve) => this.waiters.push(resolve));
    }
  }

  private take(length: number): Buffer {
    const taken = this.buffered.subarray(0, length);
    this.buffered = this.buffered.subarray(length);
    return taken;
  }

  /** The next response: its head, then its encapsulated heads and chunked body, if any. */
  async response(): Promise<RawIcapResponse> {
    const headEnd = await this.until(() => this.buffered.indexOf('\r\n\r\n'));
    const head = this.take(headEnd + 4).toString('latin1');
    const [statusLine = '', ...lines] = head.trimEnd().split('\r\n');
    const status = Number(/^ICAP\/1\.0 (\d{3})/.exec(statusLine)?.[1] ?? 'NaN');
    const headers = new Map<string, string>();
    for (const line of lines) {
      const colon = line.indexOf(':');
      if (colon > 0) headers.set(line.slice(0, colon).toLowerCase(), line.slice(colon + 1).trim());
    }
    const encapsulated = headers.get('encapsulated') ?? 'null-body=0';
    const bodyEntry = /(req|res)-body=(\d+)/.exec(encapsulated);
    const nullEntry = /null-body=(\d+)/.exec(encapsulated);
    const headsLength = Number(bodyEntry?.[2] ?? nullEntry?.[1] ?? 0);
    if (status === 100) return { status, headers, heads: '', body: null };
    await this.until(() => (this.buffered.length >= headsLength ? 0 : -1));
    const heads = this.take(headsLength).toString('latin1');
    if (bodyEntry === null) return { status, headers, heads, body: null };
    const pieces: Buffer[] = [];
    for (;;) {
      const lineEnd = await this.until(() => this.buffered.indexOf('\r\n'));
      const size = Number.parseInt(this.take(lineEnd + 2).toString('latin1'), 16);
      if (size === 0) {
        await this.until(() => this.buffered.indexOf('\r\n'));
        this.take(2);
        break;
      }
      await this.until(() => (this.buffered.length >= size + 2 ? 0 : -1));
      pieces.push(Buffer.from(this.take(size + 2).subarray(0, size)));
    }
    return { status, headers, heads, body: Buffer.concat(pieces) };
  }

  close(): void {
    this.socket.destroy();
  }
}

/** A chunked body: `data` in chunks of `chunkSize`, then the last chunk (with `ieof` if asked). */
export function chunked(data: Buffer, chunkSize = 64 * 1024, ieof = false): Buffer {
  const parts: Buffer[] = [];
  for (let offset = 0; offset < data.length; offset += chunkSize) {
    const piece = data.subarray(offset, offset + chunkSize);
    parts.push(Buffer.from(`${piece.length.toString(16)}\r\n`), piece, Buffer.from('\r\n'));
  }
  parts.push(Buffer.from(ieof ? '0; ieof\r\n\r\n' : '0\r\n\r\n'));
  return Buffer.concat(parts);
}

/** An ICAP request head with the given encapsulated HTTP heads; the body section comes last. */
export function icapRequest(
  method: 'REQMOD' | 'RESPMOD' | 'OPTIONS',
  service: string,
  options: {
    requestHead?: string;
    responseHead?: string;
    body?: boolean;
    headers?: Record<string, string>;
  },
): Buffer {
  const sections: string[] = [];
  let offset = 0;
  let heads = '';
  if (options.requestHead !== undefined) {
    sections.push(`req-hdr=${offset}`);
    offset += Buffer.byteLength(options.requestHead);
    heads += options.requestHead;
  }
  if (options.responseHead !== undefined) {
    sections.push(`res-hdr=${offset}`);
    offset += Buffer.byteLength(options.responseHead);
    heads += options.responseHead;
  }
  const bodyName = method === 'REQMOD' ? 'req-body' : 'res-body';
  sections.push(`${options.body === true ? bodyName : 'null-body'}=${offset}`);
  const lines = [
    `${method} icap://127.0.0.1/${service} ICAP/1.0`,
    'Host: 127.0.0.1',
    `Encapsulated: ${sections.join(', ')}`,
    ...Object.entries(options.headers ?? {}).map(([name, value]) => `${name}: ${value}`),
  ];
  return Buffer.from(`${lines.join('\r\n')}\r\n\r\n${heads}`);
}

/** An HTTP response head of `length` bytes of content, as a proxy encapsulates it. */
export function httpResponseHead(length: number, type = 'application/octet-stream'): string {
  return `HTTP/1.1 200 OK\r\nContent-Type: ${type}\r\nContent-Length: ${length}\r\n\r\n`;
}

export function httpRequestHead(url: string, method = 'GET', extra = ''): string {
  return `${method} ${url} HTTP/1.1\r\nHost: ${new URL(url).host}\r\n${extra}\r\n`;
}
