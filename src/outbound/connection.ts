/**
 * Vetted connection establishment: DNS answers checked against the AddressPolicy, and the TCP
 * (and TLS) connection opened to exactly a vetted IP.
 */
import net from 'node:net';
import tls from 'node:tls';
import { type AddressPolicy, canonicalIp } from './address-policy.js';
import { NameResolver, type ResolvedAddress } from './name-resolver.js';
import type { Operation } from './operation.js';
import { describe, OutboundError, OutboundRefusedError, type Target } from './target.js';

export type { ResolvedAddress } from './name-resolver.js';

export interface OutboundOptions {
  policy: AddressPolicy;
  /** Per connection attempt (TCP connect, and the TLS handshake for https). */
  connectTimeoutMs: number;
  /** Whole exchange including body, redirects. */
  totalTimeoutMs: number;
  /**
   * fetchContent only: the longest wait for the response head or the body's next bytes once the
   * connection is open (ASSAY_FETCH_IDLE_TIMEOUT); a remote silent that long has stalled.
   */
  idleTimeoutMs?: number;
  userAgent: string;
  /** Resolves host names (`signal` aborts the lookup); default the process's NameResolver. Tests use it to play DNS without a resolver. */
  resolve?: (hostname: string, signal?: AbortSignal) => Promise<readonly ResolvedAddress[]>;
}

/** One for the process, so that its bound on lookups in flight holds for every request. */
const processResolver = new NameResolver();

/** The addresses the target may be contacted on; refuses if any of them is refused. */
async function vettedAddresses(
  target: Target,
  options: OutboundOptions,
  op: Operation,
): Promise<ResolvedAddress[]> {
  const refused = (reason: string) =>
    new OutboundRefusedError(
      options.policy.refusalMessage(`refused ${target.display}${target.via}`, reason),
    );
  const literal = net.isIP(target.hostname);
  if (literal !== 0) {
    const reason = options.policy.refusal(target.hostname, target.hostname);
    if (reason !== null) throw refused(reason);
    return [{ address: target.hostname, family: literal }];
  }
  let answers: readonly ResolvedAddress[];
  try {
    answers = await op.race(
      (options.resolve ?? processResolver.resolve)(target.hostname, op.signal),
    );
  } catch (err) {
    throw op.explain(
      err,
      (detail) =>
        `could not resolve ${target.hostname} for ${target.display}${target.via}: ${detail}`,
    );
  }
  if (answers.length === 0) {
    throw new OutboundError(
      `could not resolve ${target.hostname} for ${target.display}${target.via}: no addresses`,
    );
  }
  const vetted: ResolvedAddress[] = [];
  for (const answer of answers) {
    // One refused address refuses the name: which one a connection would get is up to DNS.
    const reason = options.policy.refusal(answer.address, target.hostname);
    if (reason !== null) throw refused(`${target.hostname} has a refused address (${reason})`);
    const family = net.isIP(answer.address);
    if (!vetted.some((known) => known.address === answer.address)) {
      vetted.push({ address: answer.address, family });
    }
  }
  return vetted;
}

/** A TCP connection to exactly `address`, within the per-attempt connect timeout. */
function connectTcp(
  address: ResolvedAddress,
  port: number,
  timeoutMs: number,
  op: Operation,
): Promise<net.Socket> {
  return new Promise((resolve, reject) => {
    if (op.aborted) {
      reject(op.reason);
      return;
    }
    // An IP host skips DNS inside net, so the connection goes where the policy said it may.
    const socket = net.connect({ host: address.address, port, family: address.family });
    op.track(socket);
    const settle = () => {
      clearTimeout(timer);
      op.signal.removeEventListener('abort', onAbort);
      socket.off('connect', onConnect);
      socket.off('error', onError);
    };
    const onConnect = () => {
      settle();
      resolve(socket);
    };
    const onError = (err: Error) => {
      settle();
      socket.destroy();
      reject(err);
    };
    const onAbort = () => {
      settle();
      socket.destroy();
      reject(op.reason);
    };
    const timer = setTimeout(() => {
      settle();
      socket.destroy();
      reject(new OutboundError(`connect timed out after ${timeoutMs} ms`));
    }, timeoutMs);
    socket.once('connect', onConnect);
    socket.once('error', onError);
    op.signal.addEventListener('abort', onAbort, { once: true });
  });
}

/** TLS over a vetted socket; SNI and the certificate check use the URL's host name. */
function startTls(
  socket: net.Socket,
  target: Target,
  timeoutMs: number,
  op: Operation,
): Promise<tls.TLSSocket> {
  return new Promise((resolve, reject) => {
    const secure = tls.connect({
      socket,
      // RFC 6066 forbids IP addresses in SNI; the certificate is then checked against the IP.
      servername: net.isIP(target.hostname) === 0 ? target.hostname : undefined,
      host: target.hostname,
      ALPNProtocols: ['http/1.1'],
    });
    op.track(secure);
    const settle = () => {
      clearTimeout(timer);
      op.signal.removeEventListener('abort', onAbort);
      secure.off('secureConnect', onSecure);
      secure.off('error', onError);
    };
    const onSecure = () => {
      settle();
      resolve(secure);
    };
    const onError = (err: Error) => {
      settle();
      secure.destroy();
      reject(
        new OutboundError(
          `TLS handshake with ${target.display}${target.via} failed: ${err.message}`,
        ),
      );
    };
    const onAbort = () => {
      settle();
      secure.destroy();
      reject(op.reason);
    };
    const timer = setTimeout(() => {
      onError(new Error(`no answer within ${timeoutMs} ms`));
    }, timeoutMs);
    secure.once('secureConnect', onSecure);
    secure.once('error', onError);
    op.signal.addEventListener('abort', onAbort, { once: true });
  });
}

/** A connected (and for https, handshaken) socket to one of the target's vetted addresses. */
export async function openConnection(
  target: Target,
  options: OutboundOptions,
  op: Operation,
): Promise<net.Socket> {
  const addresses = await vettedAddresses(target, options, op);
  let lastError: unknown;
  for (const address of addresses) {
    let socket: net.Socket;
    try {
      socket = await connectTcp(address, target.port, options.connectTimeoutMs, op);
    } catch (err) {
      if (op.aborted) throw op.reason;
      lastError = err;
      continue;
    }
    // Belt and braces: the peer must be the address we vetted, and still pass the policy.
    const remote = socket.remoteAddress ?? '';
    const sameAddress = canonicalIp(remote) === canonicalIp(address.address);
    const reason = sameAddress ? options.policy.refusal(remote, target.hostname) : null;
    if (!sameAddress || reason !== null) {
      socket.destroy();
      const refused = `refused ${target.display}${target.via}`;
      throw new OutboundRefusedError(
        reason === null
          ? `${refused}: connected to ${remote || 'an unknown address'} instead of ${address.address}`
          : options.policy.refusalMessage(refused, reason),
      );
    }
    if (target.url.protocol !== 'https:') return socket;
    return startTls(socket, target, options.connectTimeoutMs, op);
  }
  throw new OutboundError(
    `could not connect to ${target.display}${target.via}: ${describe(lastError)}`,
  );
}
