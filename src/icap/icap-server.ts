import {
  type AddressInfo,
  BlockList,
  createServer,
  isIP,
  type Server,
  type Socket,
} from 'node:net';
import { createServer as createTlsServer } from 'node:tls';
import { listenError } from '../http/listen-port.js';
import { serveIcapConnection } from './icap-connection.js';
import type { IcapContext } from './icap-context.js';

/** How long a stop lets requests under way finish before their connections are cut. */
const STOP_GRACE_MS = 10_000;

/** ASSAY_ICAP_ALLOW: comma-separated addresses and CIDRs; throws naming a bad entry. */
export function clientAllowList(setting: string): BlockList {
  const list = new BlockList();
  for (const raw of setting.split(',')) {
    const entry = raw.trim();
    if (entry === '') continue;
    const [network = '', prefixText, extra] = entry.split('/');
    const family = isIP(network);
    const max = family === 4 ? 32 : 128;
    if (family === 0 || extra !== undefined || network.includes('%')) {
      throw new Error(`ASSAY_ICAP_ALLOW entry "${entry}" is not an IP address or CIDR`);
    }
    const type = family === 4 ? 'ipv4' : 'ipv6';
    if (prefixText === undefined) {
      list.addAddress(network, type);
      continue;
    }
    if (!/^\d{1,3}$/.test(prefixText) || Number(prefixText) > max) {
      throw new Error(
        `ASSAY_ICAP_ALLOW entry "${entry}" has a bad prefix length (0 to ${max} for IPv${family})`,
      );
    }
    list.addSubnet(network, Number(prefixText), type);
  }
  return list;
}

/** Whether a peer's address is in the allow list (IPv4-mapped IPv6 addresses as their IPv4). */
function allowed(list: BlockList, address: string | undefined): boolean {
  if (address === undefined) return false;
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address)?.[1];
  if (mapped !== undefined) return list.check(mapped, 'ipv4');
  return list.check(address, isIP(address) === 6 ? 'ipv6' : 'ipv4');
}

/**
 * The ICAP front door (RFC 3507): plain ICAP on ASSAY_ICAP_PORT and ICAPS on ASSAY_ICAPS_PORT,
 * each connection served by serveIcapConnection. Only addresses in ASSAY_ICAP_ALLOW may connect:
 * ICAP has no authentication of its own, so the network is the credential. Under `--processes`
 * every process listens on the same ports (node:cluster shares them).
 */
export class IcapServer {
  private readonly servers: Server[] = [];
  /** Each open connection, and whether it waits for its next request (idle). */
  private readonly sockets = new Map<Socket, boolean>();
  private stopping = false;
  private readonly busy = new Set<Promise<void>>();
  private readonly allowList: BlockList;

  constructor(
    private readonly context: IcapContext,
    private readonly listen: {
      host: string;
      maxConnections: number;
      tls: { cert: Buffer; key: Buffer } | null;
    },
  ) {
    this.allowList = clientAllowList(context.settings.allow);
  }

  /** Listens on each configured port; returns the `icap://` and `icaps://` URLs. */
  async start(): Promise<{ icap: string | null; icaps: string | null }> {
    const { port, tlsPort } = this.context.settings;
    const { tls } = this.listen;
    const icap = port === null ? null : await this.open(createServer(), port, 'ASSAY_ICAP_PORT');
    let icaps: number | null = null;
    if (tlsPort !== null) {
      if (tls === null) throw new Error('ASSAY_ICAPS_PORT needs ASSAY_TLS_CERT and ASSAY_TLS_KEY');
      icaps = await this.open(
        createTlsServer({ cert: tls.cert, key: tls.key }),
        tlsPort,
        'ASSAY_ICAPS_PORT',
        'secureConnection',
      );
    }
    const host = this.listen.host.includes(':') ? `[${this.listen.host}]` : this.listen.host;
    return {
      icap: icap === null ? null : `icap://${host}:${icap}`,
      icaps: icaps === null ? null : `icaps://${host}:${icaps}`,
    };
  }

  private async open(
    server: Server,
    port: number,
    setting: string,
    event: 'connection' | 'secureConnection' = 'connection',
  ): Promise<number> {
    server.maxConnections = this.listen.maxConnections;
    server.on(event, (socket: Socket) => this.accept(socket));
    // A TLS handshake that fails is the client's; it never reaches the ICAP code.
    server.on('tlsClientError', (error: Error, socket: Socket) => {
      this.context.logger.debug({ err: error }, 'an ICAPS handshake failed');
      socket.destroy();
    });
    if (event === 'secureConnection') {
      // Refused before the handshake costs anything.
      server.on('connection', (socket: Socket) => {
        if (!allowed(this.allowList, socket.remoteAddress)) this.refuse(socket);
      });
    }
    server.on('error', (error) =>
      this.context.logger.error({ err: error }, 'the ICAP listener failed'),
    );
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen({ host: this.listen.host, port }, () => {
        server.off('error', reject);
        resolve();
      });
    }).catch((error: unknown) => {
      throw listenError(error, this.listen.host, port, setting);
    });
    this.servers.push(server);
    return (server.address() as AddressInfo).port;
  }

  private refuse(socket: Socket): void {
    this.context.metrics.connectionRefused();
    this.context.logger.warn(
      { client: socket.remoteAddress },
      'an ICAP connection from outside ASSAY_ICAP_ALLOW was closed',
    );
    socket.destroy();
  }

  private accept(socket: Socket): void {
    if (socket.destroyed) return;
    if (!allowed(this.allowList, socket.remoteAddress)) {
      this.refuse(socket);
      return;
    }
    socket.setNoDelay(true);
    // A dropped connection is logged where it is read; it must never end the process.
    socket.on('error', () => undefined);
    this.sockets.set(socket, true);
    const served = serveIcapConnection(socket, this.context, {
      idle: (idle) => {
        this.sockets.set(socket, idle);
        return !this.stopping;
      },
    })
      .catch((error: unknown) => {
        this.context.logger.error({ err: error }, 'an ICAP connection failed');
        socket.destroy();
      })
      .finally(() => {
        this.sockets.delete(socket);
        this.busy.delete(served);
      });
    this.busy.add(served);
  }

  /** Stops listening; requests under way get STOP_GRACE_MS to finish, then are cut. */
  async stop(): Promise<void> {
    this.stopping = true;
    // close() calls back once every connection has ended: it is awaited last.
    const closed = Promise.all(
      this.servers.map((server) => new Promise<void>((resolve) => server.close(() => resolve()))),
    );
    const deadline = setTimeout(() => {
      for (const socket of this.sockets.keys()) socket.destroy();
    }, STOP_GRACE_MS);
    // Connections waiting for their next request end now; one in a request ends after it.
    for (const [socket, idle] of this.sockets) if (idle) socket.destroy();
    await Promise.allSettled([...this.busy]);
    clearTimeout(deadline);
    await closed;
  }
}
