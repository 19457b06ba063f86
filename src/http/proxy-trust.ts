import { isIP } from 'node:net';
import type { FastifyRequest } from 'fastify';
import type { ProxyTrust } from '../config.js';
import { canonicalIp } from '../outbound/address-policy.js';

/** Fastify's `trustProxy`: which hop of a request's X-Forwarded-For chain is a proxy we trust. */
export type TrustProxyOption = false | string[] | ((address: string, hop: number) => boolean);

/**
 * ASSAY_TRUST_PROXY as Fastify's `trustProxy`. Fastify (through proxy-addr) walks from the socket
 * peer (hop 0) leftwards through X-Forwarded-For while each hop is trusted; the client is the
 * first untrusted one, so whatever a client wrote to the left of its proxy's entry is never read.
 * A number is given as a function: Fastify's own number form ignores the headers altogether.
 * `true` is never passed on, since Fastify's `true` takes the leftmost entry, the client's own.
 */
export function trustProxyOption(trust: ProxyTrust): TrustProxyOption {
  switch (trust.kind) {
    case 'none':
      return false;
    case 'addresses':
      return trust.addresses;
    case 'hops': {
      const { hops } = trust;
      return (_address, hop) => hop < hops;
    }
  }
}

/** Longest host name kept (RFC 1035's 253, plus room for a port). */
const MAX_HOST = 260;
const LABEL = '[A-Za-z0-9_](?:[A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?';
const PORT = '(?::(?<port>\\d{1,5}))?';
const HOST_NAME = new RegExp(`^(?:${LABEL}\\.)*${LABEL}\\.?${PORT}$`);
const IPV6_LITERAL = new RegExp(`^\\[(?<ip>[0-9A-Fa-f:.]+)\\]${PORT}$`);

/** `host[:port]` as a URL may hold it (a DNS name, an IPv4 address or a bracketed IPv6 one). */
export function isSaneHost(value: string | undefined): value is string {
  if (value === undefined || value.length > MAX_HOST) return false;
  const v6 = IPV6_LITERAL.exec(value);
  if (v6 !== null && isIP(v6.groups?.ip ?? '') !== 6) return false;
  const match = v6 ?? HOST_NAME.exec(value);
  if (match === null) return false;
  const port = match.groups?.port;
  return port === undefined || (Number(port) >= 1 && Number(port) <= 65535);
}

/** The address and port the client reached: the last resort when no Host can be believed. */
function localHost(request: FastifyRequest): string {
  const { localAddress = '', localPort } = request.socket;
  const ip = canonicalIp(localAddress);
  const host = ip !== null && isIP(ip) === 4 ? ip : `[${localAddress}]`;
  return localPort === undefined ? host : `${host}:${localPort}`;
}

/**
 * `scheme://host[:port]` of the service as the client addressed it, for absolute URLs when
 * ASSAY_PUBLIC_URL is not set. Fastify's `protocol` and `host` are X-Forwarded-Proto and
 * X-Forwarded-Host (their last entries) only when the socket peer is a trusted proxy; even then
 * only `http`/`https` is a scheme and a host must look like one, else the request's own is used.
 */
export function requestOrigin(request: FastifyRequest): string {
  const own = 'encrypted' in request.socket && request.socket.encrypted === true ? 'https' : 'http';
  const forwarded = String(request.protocol).toLowerCase();
  const protocol = forwarded === 'http' || forwarded === 'https' ? forwarded : own;
  const host = [request.host, request.headers.host].find(isSaneHost) ?? localHost(request);
  return `${protocol}://${host}`;
}
