import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { Logger } from 'pino';
import type { ConnectionDrop } from '../../metrics/service-metrics.js';
import { failureBucketOf } from '../plugins/client-address.js';

export interface ConnectionLimitSettings {
  maxConnections: number;
  maxConnectionsPerAddress: number;
  headerTimeoutMs: number;
}

interface Connection {
  socket: Socket;
  address: string;
  openedAt: number;
  /** Requests of this connection whose response has not ended. */
  inFlight: number;
  /** Whether a complete request head ever arrived on it. */
  served: boolean;
}

/** The connections open now, and the most one address holds. */
export interface ConnectionCount {
  open: number;
  busiestAddress: number;
}

/** How often refusals are summed up in the log: a flood must not flood the log too. */
const REPORT_EVERY_MS = 10_000;

/**
 * Bounds what idle connections can hold (each is a file descriptor):
 * - at most `maxConnectionsPerAddress` per client address (IPv6: its /64); more are closed at once;
 * - at most `maxConnections` in all: a connection beyond it takes the place of the oldest idle
 *   connection (no request in progress) of the address holding the most, so a flood from many
 *   addresses cannot lock out a health checker or a client; with none idle, it is closed at once;
 * - a connection that sends no complete request head within `headerTimeoutMs` is closed. Node's
 *   own `headersTimeout` is checked only every 30 s; this sweep runs several times per period.
 * Counted per TCP peer: behind a proxy every client is the proxy, so raise the per-address cap.
 */
export function limitConnections(
  server: Server,
  settings: ConnectionLimitSettings,
  log: Logger,
  dropped: (reason: ConnectionDrop) => void = () => {},
): { stop(): void; count(): ConnectionCount } {
  const { maxConnections, maxConnectionsPerAddress, headerTimeoutMs } = settings;
  const bySocket = new Map<Socket, Connection>();
  const byAddress = new Map<string, Set<Connection>>();
  const counts = { refused: 0, evicted: 0, timedOut: 0 };
  let reportedAt = performance.now();
  // A partial head on a kept-alive connection is Node's to time out; the same bound applies.
  server.headersTimeout = headerTimeoutMs;

  const oldestIdle = (group: Iterable<Connection>): Connection | null => {
    for (const connection of group) if (connection.inFlight === 0) return connection;
    return null;
  };
  // Linear in the addresses, not sorted: it runs for every connection of a flood at the cap.
  const oldestIdleOfBusiestAddress = (): Connection | null => {
    let busiest: Set<Connection> | undefined;
    for (const group of byAddress.values()) {
      if (busiest === undefined || group.size > busiest.size) busiest = group;
    }
    return (busiest && oldestIdle(busiest)) ?? oldestIdle(bySocket.values());
  };

  server.on('connection', (socket: Socket) => {
    const address = failureBucketOf(socket.remoteAddress ?? '');
    const group = byAddress.get(address) ?? new Set<Connection>();
    if (group.size >= maxConnectionsPerAddress) {
      counts.refused += 1;
      dropped('address-limit');
      socket.destroy();
      return;
    }
    if (bySocket.size >= maxConnections) {
      const idle = oldestIdleOfBusiestAddress();
      if (idle === null) {
        counts.refused += 1;
        dropped('limit');
        socket.destroy();
        return;
      }
      counts.evicted += 1;
      dropped('evicted');
      forget(idle);
      idle.socket.destroy();
    }
    const connection: Connection = {
      socket,
      address,
      openedAt: performance.now(),
      inFlight: 0,
      served: false,
    };
    bySocket.set(socket, connection);
    byAddress.set(address, group.add(connection));
    socket.once('close', () => forget(connection));
  });

  const forget = (connection: Connection) => {
    if (bySocket.get(connection.socket) !== connection) return;
    bySocket.delete(connection.socket);
    const group = byAddress.get(connection.address);
    group?.delete(connection);
    if (group?.size === 0) byAddress.delete(connection.address);
  };

  server.on('request', (request: IncomingMessage, response: ServerResponse) => {
    // Over TLS the request's socket wraps the TCP socket that connected.
    const socket = request.socket as Socket & { _parent?: Socket };
    const connection = bySocket.get(socket) ?? bySocket.get(socket._parent as Socket);
    if (connection === undefined) return;
    connection.served = true;
    connection.inFlight += 1;
    response.once('close', () => {
      connection.inFlight -= 1;
    });
  });

  const sweep = () => {
    const now = performance.now();
    for (const connection of bySocket.values()) {
      if (!connection.served && now - connection.openedAt > headerTimeoutMs) {
        counts.timedOut += 1;
        dropped('header-timeout');
        forget(connection);
        connection.socket.destroy();
      }
    }
    if (now - reportedAt >= REPORT_EVERY_MS) {
      if (counts.refused + counts.evicted + counts.timedOut > 0) {
        log.warn(
          { ...counts, open: bySocket.size, seconds: Math.round((now - reportedAt) / 1000) },
          'connections refused, evicted or timed out without a request head',
        );
      }
      counts.refused = counts.evicted = counts.timedOut = 0;
      reportedAt = now;
    }
  };
  const timer = setInterval(sweep, Math.max(50, Math.min(1_000, headerTimeoutMs / 4)));
  timer.unref();
  return {
    stop() {
      clearInterval(timer);
    },
    // Linear in the addresses: read at a scrape, not per connection.
    count() {
      let busiestAddress = 0;
      for (const group of byAddress.values()) busiestAddress = Math.max(busiestAddress, group.size);
      return { open: bySocket.size, busiestAddress };
    },
  };
}
